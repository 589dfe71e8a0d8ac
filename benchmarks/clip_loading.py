"""Read throughput of `tfrecorder.load()` on video clips against a bare tf.data pipeline
over the same records (issue 49's read target: >= 0.9 of the bare pipeline).

    PYTHONPATH=. .venv/bin/python benchmarks/clip_loading.py [--clips 200] [--frames 48]
        [--num-frames 16] [--rounds 3]

The dataset is written by tests/clip_datasets.py (real MediaSequence records, one JPEG a
frame at quality 90; frames of 160x120 with texture, so a decode is real work) in a
temporary folder. Both contenders read its validation split, whose window is the centre
one (deterministic, so both decode the very same frames), and deliver batches of 8
clips of `--num-frames` frames, uint8:

- `load`: `tfrecorder.load(path, "validation", num_frames=T, batch_size=8)`: elements
  with `video`, `timestamps`, `label`, `data_path`;
- `bare`: `TFRecordDataset` over the same shards, `parse_single_sequence_example` of the
  frames and the label, the centre window's indices (DMVR's formula), `gather`,
  `map_fn(decode_jpeg(INTEGER_ACCURATE))` of those frames, `batch(8)`, `prefetch`; the
  parallel map as load's (AUTOTUNE).

And `load_train`: the train split (the same clips) with its seeded random windows, to
show what drawing a window costs. The host is shared and noisy, so both run in one
process, in rounds, alternating which goes first; each is timed over a whole epoch
after an untimed one (tracing, the first batch), by CPU time per clip (`os.times()`
user + sys, which counts TensorFlow's threads), the steadier measure, and wall clips/s.
Ratios are taken within rounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

BATCH = 8


def textured_frame(k: int, clip: int, height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(clip * 1000 + k)
    y, x = np.mgrid[0:height, 0:width]
    base = 128 + 60 * np.sin((x + 3 * k) / 9.0 + clip) * np.cos(y / 7.0)
    noise = rng.normal(0, 12, (height, width, 3))
    return np.clip(base[..., None] + noise, 0, 255).astype(np.uint8)


def write_dataset(folder: str, clips: int, frames: int) -> str:
    import io

    from clip_datasets import write_clip_dataset
    from PIL import Image

    def encoded(clip):
        found = []
        for k in range(frames):
            buffer = io.BytesIO()
            Image.fromarray(textured_frame(k, clip, 120, 160)).save(buffer, "JPEG",
                                                                    quality=90)
            found.append(buffer.getvalue())
        return found

    specs = []
    for clip in range(clips):
        frames_bytes = encoded(clip)
        for split in ("train", "validation"):
            specs.append({"label": f"class{clip % 5}", "split": split, "num_frames": frames,
                          "size": (120, 160), "encoded": frames_bytes})
    return write_clip_dataset(folder, specs, records_per_shard=max(1, clips // 4))


def bare(path: str, num_frames: int):
    import tensorflow as tf

    from tfrecorder.format import media_sequence as ms

    files = sorted(tf.io.gfile.glob(os.path.join(path, "validation-*.tfrecord")))
    context_spec = {ms.CLIP_LABEL_INDEX: tf.io.RaggedFeature(tf.int64)}
    sequence_spec = {ms.IMAGE_ENCODED: tf.io.FixedLenSequenceFeature([], tf.string)}

    def decoded(record):
        context, steps = tf.io.parse_single_sequence_example(record, context_spec,
                                                             sequence_spec)
        encoded = steps[ms.IMAGE_ENCODED]
        length = tf.shape(encoded)[0]
        offset = tf.maximum(0, (length - num_frames) // 2)
        indices = tf.math.floormod(offset + tf.range(num_frames), length)
        frames = tf.map_fn(
            lambda data: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
            tf.gather(encoded, indices), fn_output_signature=tf.TensorSpec([None, None, 3],
                                                                           tf.uint8))
        return frames, context[ms.CLIP_LABEL_INDEX][0]

    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=len(files), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(decoded, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)


def contenders(path: str, num_frames: int) -> dict:
    import tfrecorder

    return {
        "load": lambda: tfrecorder.load(path, "validation", num_frames=num_frames,
                                        batch_size=BATCH),
        "bare": lambda: bare(path, num_frames),
        "load_train": lambda: tfrecorder.load(path, "train", num_frames=num_frames,
                                              batch_size=BATCH, shuffle=False, seed=0),
    }


def epoch(ds) -> tuple[int, float, float]:
    """Clips, CPU seconds and wall seconds of one pass."""
    clips = 0
    start, wall = os.times(), time.perf_counter()
    for batch in ds:
        video = batch["video"] if isinstance(batch, dict) else batch[0]
        clips += int(video.shape[0])
    end = os.times()
    cpu = (end.user - start.user) + (end.system - start.system)
    return clips, cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=200)
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--num-frames", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        path = write_dataset(folder, args.clips, args.frames)
        made = contenders(path, args.num_frames)
        pipelines = {name: make() for name, make in made.items()}
        for ds in pipelines.values():
            epoch(ds)  # untimed: tracing, the first batches
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in made}
        ratios_cpu, ratios_wall = [], []
        for round_ in range(args.rounds):
            order = list(made) if round_ % 2 == 0 else list(reversed(made))
            timed = {}
            for name in order:
                clips, cpu, wall = epoch(pipelines[name])
                timed[name] = (cpu / clips * 1e3, clips / wall)
                results[name].append(timed[name])
            ratios_cpu.append(timed["bare"][0] / timed["load"][0])
            ratios_wall.append(timed["load"][1] / timed["bare"][1])
            print(f"round {round_ + 1}: " + ", ".join(
                f"{name} {ms:.2f} ms CPU/clip, {rate:.0f} clips/s"
                for name, (ms, rate) in timed.items()), flush=True)
        print(f"\n{platform.node()}: {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; {args.clips} clips of {args.frames} frames "
              f"(160x120 JPEG), num_frames={args.num_frames}, batches of {BATCH}")
        for name, rows in results.items():
            print(f"  {name:<11} median {statistics.median(r[0] for r in rows):.2f} ms CPU a "
                  f"clip, {statistics.median(r[1] for r in rows):.0f} clips/s wall")
        print(f"  load / bare: {statistics.median(ratios_cpu):.3f} by CPU per clip "
              f"(rounds: {', '.join(f'{r:.3f}' for r in ratios_cpu)}), "
              f"{statistics.median(ratios_wall):.3f} by wall clips/s")


if __name__ == "__main__":
    main()

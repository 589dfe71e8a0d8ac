"""Frames a second writing video clips: 100 clips of 10 s stored at 10 fps, 256 px short
side, in a pool of 2 processes, three ways (issue 49's targets):

- `encode_row`: what both engines call per row (`records.encode_row` -> `clip_records`),
  the whole record built;
- bare: the ceiling, a plain loop of PyAV decode + swscale resize + libjpeg-turbo encode
  of the same frames (the recipe `media` uses, nothing else);
- ffmpeg: DMVR's recipe, an ffmpeg subprocess a clip (`ffmpeg -ss START -t 10 -i FILE
  -vf fps=10,scale=-2:256 -f image2pipe -vcodec mjpeg -`), with imageio-ffmpeg's binary.

    PYTHONPATH=. .venv/bin/python benchmarks/video_convert.py [--rounds 3]

The sources (25 videos of 40 s, 30 fps, 640x360 H.264, cut into clips at 0, 10, 20 and
30 s, so three of four clips start with a seek) are made once in `--folder`. ffmpeg is
imageio-ffmpeg's, installed apart from the project's environment:
`uv pip install --target /work/bench-deps --no-deps imageio-ffmpeg` (`--ffmpeg` names
another). Each round runs the three back to back; medians over rounds are reported:
frames a second (wall), CPU a stored frame (the workers', ffmpeg's included), and the
JPEGs' mean size.
"""

from __future__ import annotations

import argparse
import glob
import io
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import time

import av
import numpy as np

from tfrecorder.options import MediaOptions, RecordOptions
from tfrecorder.write.records import encode_row
from tfrecorder.write.rows import Record, Row

VIDEOS, SECONDS, CLIP_SECONDS, FPS, SHORT_SIDE, QUALITY = 25, 40, 10, 10, 256, 90


def make_sources(folder: str) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"source-{i:02d}.mp4") for i in range(VIDEOS)]
    yy, xx = np.mgrid[:360, :640]
    texture = np.random.default_rng(0).integers(0, 40, (360, 640, 1), dtype=np.uint8)
    for i, path in enumerate(paths):
        if os.path.exists(path):
            continue
        with av.open(path + ".part", "w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=30)
            stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
            stream.options = {"preset": "veryfast"}
            for k in range(30 * SECONDS):
                pixels = np.stack([(xx + 3 * k + i) % 256, (yy + 2 * k) % 256,
                                   ((xx + yy) // 3 + k) % 256], -1).astype(np.uint8)
                pixels = pixels // 2 + texture // 2
                container.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, "rgb24")))
            container.mux(stream.encode())
        os.rename(path + ".part", path)
    return paths


def clips(paths: list[str], count: int) -> list[tuple[str, int]]:
    starts = range(0, SECONDS, CLIP_SECONDS)
    return [(path, start) for path in paths for start in starts][:count]


def with_ours(clip: tuple[str, int]) -> tuple[int, int]:
    path, start = clip
    row = Row(0, path, path, 0, "train", clip_start_us=start * 1_000_000,
              clip_end_us=(start + CLIP_SECONDS) * 1_000_000)
    options = RecordOptions(class_names=("a",), media="video", jpeg_quality=QUALITY,
                            media_options=MediaOptions(frame_rate=FPS, short_side=SHORT_SIDE))
    record = encode_row(row, options)
    assert isinstance(record, Record), record
    return record.clip.frames, record.clip.num_bytes


def bare(clip: tuple[str, int]) -> tuple[int, int]:
    import simplejpeg

    path, start = clip
    with open(path, "rb") as f:
        data = f.read()
    frames = size = 0
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        if start:
            container.seek(int(start / stream.time_base), stream=stream)
        next_time, end = start, start + CLIP_SECONDS
        for frame in container.decode(stream):
            if frame.time >= end:
                break
            if frame.time + 1e-6 < next_time:
                continue
            next_time += 1 / FPS
            scaled = frame.reformat(456, 256, format="yuvj420p", interpolation="BILINEAR",
                                    threads=1)  # (ours rounds 455.1 to even, as -2 does)
            planes = [np.ascontiguousarray(np.frombuffer(p, np.uint8).reshape(
                p.height, p.line_size)[:, :p.width]) for p in scaled.planes]
            size += len(simplejpeg.encode_jpeg_yuv_planes(*planes, quality=QUALITY))
            frames += 1
    return frames, size


FFMPEG = ""


def with_ffmpeg(clip: tuple[str, int]) -> tuple[int, int]:
    path, start = clip
    out = subprocess.run(
        [FFMPEG, "-v", "error", "-ss", str(start), "-t", str(CLIP_SECONDS), "-i", path,
         "-vf", f"fps={FPS},scale=-2:{SHORT_SIDE}", "-f", "image2pipe", "-vcodec", "mjpeg",
         "-"], capture_output=True, check=True).stdout
    return out.count(b"\xff\xd8\xff"), len(out)


CONTENDERS = {"encode_row": with_ours, "bare": bare, "ffmpeg": with_ffmpeg}


def _timed(job):
    work, clip = job
    cpu, children = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    frames, size = CONTENDERS[work](clip)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (time.process_time() - cpu + after.ru_utime - children.ru_utime
             + after.ru_stime - children.ru_stime)
    return frames, size, spent


def run(name: str, jobs: list, workers: int) -> dict:
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(int, range(workers))  # the workers started before the clock
        wall = time.perf_counter()
        found = pool.map(_timed, [(name, clip) for clip in jobs], chunksize=1)
        wall = time.perf_counter() - wall
    frames = sum(f for f, _, _ in found)
    return {"fps": frames / wall, "cpu_ms": 1000 * sum(c for _, _, c in found) / frames,
            "frames": frames, "kb": sum(s for _, s, _ in found) / frames / 1024}


def run_convert(jobs: list, workers: int, folder: str) -> dict:
    """`tfrecorder.convert()` of the clips as a table: the whole run (planning, the
    pool, shards, the manifest), its workers' CPU included once they have exited."""
    import pandas as pd

    import tfrecorder

    table = pd.DataFrame({"video_uri": [path for path, _ in jobs], "label": "a",
                          "split": "TRAIN", "start": [float(s) for _, s in jobs],
                          "end": [float(s + CLIP_SECONDS) for _, s in jobs]})
    out = os.path.join(folder, "converted")
    before, cpu = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    wall = time.perf_counter()
    result = tfrecorder.convert(table, out, frame_rate=FPS, short_side=SHORT_SIDE,
                                jpeg_quality=QUALITY, num_workers=workers, overwrite=True,
                                progress=False)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (time.process_time() - cpu + after.ru_utime - before.ru_utime
             + after.ru_stime - before.ru_stime)
    counts = result.manifest.media.counts["train"] if hasattr(result, "manifest") else None
    frames = int(counts["frames"]) if counts else FPS * CLIP_SECONDS * len(jobs)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
               if f.endswith(".tfrecord"))
    return {"fps": frames / wall, "cpu_ms": 1000 * spent / frames, "frames": frames,
            "kb": size / frames / 1024}


def main() -> None:
    global FFMPEG
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="/tmp/tfr-video-bench")
    parser.add_argument("--clips", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ffmpeg", default=None)
    args = parser.parse_args()
    FFMPEG = args.ffmpeg or next(iter(sorted(glob.glob(
        "/work/bench-deps/imageio_ffmpeg/binaries/ffmpeg-*"))), "ffmpeg")
    made = time.perf_counter()
    jobs = clips(make_sources(args.folder), args.clips)
    print(f"{len(jobs)} clips ready in {time.perf_counter() - made:.0f} s; ffmpeg: {FFMPEG}",
          file=sys.stderr)
    rounds = []
    for number in range(args.rounds):
        found = {name: run(name, jobs, args.workers) for name in CONTENDERS}
        found["convert"] = run_convert(jobs, args.workers, args.folder)
        rounds.append(found)
        print(f"round {number + 1}: " + ", ".join(
            f"{n} {r['fps']:.0f} fps {r['cpu_ms']:.2f} ms" for n, r in rounds[-1].items()),
            file=sys.stderr)
    print("| way | stored frames | frames/s (wall) | CPU ms a frame | KB a JPEG |")
    print("|---|---|---|---|---|")
    for name in (*CONTENDERS, "convert"):
        print(f"| {name} | {rounds[0][name]['frames']} | "
              f"{statistics.median(r[name]['fps'] for r in rounds):.0f} | "
              f"{statistics.median(r[name]['cpu_ms'] for r in rounds):.2f} | "
              f"{statistics.median(r[name]['kb'] for r in rounds):.1f} |")
    for ours in ("encode_row", "convert"):
        for other in ("bare", "ffmpeg"):
            ratio = statistics.median(r[ours]["fps"] / r[other]["fps"] for r in rounds)
            cpu = statistics.median(r[other]["cpu_ms"] / r[ours]["cpu_ms"] for r in rounds)
            print(f"{ours} / {other}: {ratio:.2f} by frames/s, {cpu:.2f} by CPU a frame "
                  f"(medians of rounds)")


if __name__ == "__main__":
    main()

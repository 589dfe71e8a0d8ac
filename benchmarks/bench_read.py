"""Read throughput without TensorFlow: `tfrecorder.open_split` against `load()` (tf.data)
and the PyPI `tfrecord` package, on one dataset of JPEGs.

    .venv/bin/python benchmarks/bench_read.py [--images 2000] [--rounds 3]

One split of JPEGs (the sample photos cropped, 320-560 px, about 50 KB each, two shards
with their record indexes) is read once per measurement, in file order, by:

- images/s, each image decoded to a uint8 (height, width, 3) array:
  `open_split` in this process (`ours`), on 2 threads (`ours_threads_x2`: simplejpeg
  decodes without the GIL, as Grain's threads would read), in a Pool of 2 forked
  processes (`ours_x2`) and in a PyTorch DataLoader with 2 workers (`ours_torch_x2`);
  `tfrecorder.load()` (`load`:
  tf.data's parallel map, accurate IDCT, both cores); the `tfrecord` package's
  `tfrecord_loader` with the index, its `image` decoded by simplejpeg as ours is
  (`tfrecord`), and its `TFRecordDataset` in a DataLoader with 2 workers
  (`tfrecord_torch_x2`). Records that cross processes are (image, label) pairs, what a
  training step takes: PyTorch sends each array through a shared-memory file of its own
  (about 2.7 ms apiece on this host), so a whole record's dozen values would measure
  that instead;
- records/s, parsed but images left as bytes: `open_split(decode=False)` (`ours_raw`)
  and `tfrecord_loader` (`tfrecord_raw`).

The `tfrecord` package's `example_pb2` was generated for protobuf 3: with the protobuf
TensorFlow needs (6.x) it does not import, and with PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION
=python it imports but cannot read a record (its `feature` map comes out as a list). So
it runs here with TensorFlow's compiled `example_pb2` (the same messages, parsed by upb)
put in its place: the package at its best. It checks no CRC; ours checks both of every
record.

This host's 2 cores are shared (other jobs kept its CPU pressure at 30-75%), so how
many runnable threads a contender has changes its share of the CPU as much as its own
speed: each contender's CPU time per item (its threads, and the worker processes it
reaped) is reported beside its rate, and does not depend on that share.

PyTorch and the `tfrecord` package come from the interop folders of tests/interop.py
(installed on first use). Each contender runs in a fresh process per round (imports not
timed), contenders back to back within a round; medians over rounds, ratios within a
round.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import harness  # noqa: E402
from sample_crops import make_crops  # noqa: E402

IMAGES = ("ours", "ours_threads_x2", "ours_x2", "ours_torch_x2", "load", "tfrecord",
          "tfrecord_torch_x2")
RECORDS = ("ours_raw", "tfrecord_raw")


def build(out: str, count: int) -> str:
    """The dataset read: `count` JPEGs in one split of two shards (made once)."""
    import tfrecorder

    path = os.path.join(out, f"read_{count}")
    if not os.path.exists(os.path.join(path, "dataset.json")):
        shutil.rmtree(path, ignore_errors=True)
        table = make_crops(os.path.join(out, "read_images"), count, sides=(320, 560))
        tfrecorder.convert(table, path, unassigned_split=(1.0, 0.0, 0.0), num_shards=2,
                           progress=False)
    return path


def on_path(*names: str) -> None:
    """Puts interop folders on sys.path, and on the path of the processes started here."""
    from interop import interop_path

    folders = [str(interop_path(name)) for name in names]
    sys.path[:0] = folders
    os.environ["PYTHONPATH"] = os.pathsep.join(folders + sys.path[len(folders):])


def shards(path: str) -> list[tuple[str, str]]:
    """(shard, index) paths of the train split."""
    from tfrecorder.format.manifest import read_manifest

    return [(os.path.join(path, s.file), os.path.join(path, s.index))
            for s in read_manifest(path).splits["train"].shards]


def rgb(data) -> object:
    import simplejpeg

    return simplejpeg.decode_jpeg(bytes(data), colorspace="RGB")


def decoded_image(features: dict) -> dict:
    """The `tfrecord` package's record with its image decoded, as `open_split` does it."""
    features["image"] = rgb(features["image"])
    return features


def image_and_label(record: dict) -> tuple:
    """What a training step takes of a record: sent between processes, a whole record's
    dozen values would cost PyTorch a shared-memory file each."""
    return record["image"], record["label"]


def decoded_image_and_label(features: dict) -> tuple:
    return rgb(features["image"]), features["label"]


def _in_two_processes(ds):
    """`ds`'s records read by a pool of 2 forked processes, in order."""
    import multiprocessing

    def read():
        with multiprocessing.get_context("fork").Pool(2) as pool:
            yield from pool.imap(ds.__getitem__, range(len(ds)), chunksize=16)

    return read()


def records(name: str, path: str, files: list[tuple[str, str]]):
    """What contender `name` iterates over: its records or images, one item each."""
    import tfrecorder

    if name in ("ours", "ours_raw"):
        ds = tfrecorder.open_split(path, "train", decode=name == "ours")
        return (ds[i] for i in range(len(ds)))
    if name == "ours_threads_x2":  # simplejpeg decodes without the GIL
        from concurrent.futures import ThreadPoolExecutor

        ds = tfrecorder.open_split(path, "train", transform=image_and_label)
        return ThreadPoolExecutor(2).map(ds.__getitem__, range(len(ds)))
    if name == "ours_x2":
        ds = tfrecorder.open_split(path, "train", transform=image_and_label)
        return _in_two_processes(ds)
    if name == "ours_torch_x2":
        from torch.utils.data import DataLoader

        ds = tfrecorder.open_split(path, "train", transform=image_and_label)
        return DataLoader(ds.to_torch(), batch_size=None, num_workers=2)
    if name == "load":
        return (element["image"] for element in tfrecorder.load(path, "train",
                                                                 shuffle=False))
    if name in ("tfrecord", "tfrecord_raw"):
        from tfrecord.reader import tfrecord_loader

        transform = decoded_image if name == "tfrecord" else (lambda features: features)
        return (transform(features) for data, index in files
                for features in tfrecord_loader(data, index, shard=(0, 1)))
    if name == "tfrecord_torch_x2":
        from tfrecord.torch.dataset import TFRecordDataset
        from torch.utils.data import ChainDataset, DataLoader

        chain = ChainDataset([TFRecordDataset(data, index, transform=decoded_image_and_label)
                              for data, index in files])
        return DataLoader(chain, batch_size=None, num_workers=2)
    raise ValueError(name)


def run(name: str, path: str) -> dict:
    """Reads the split once as contender `name`: its seconds, the CPU seconds it took
    (this process's threads and the worker processes it reaped) and its items."""
    if name.startswith("tfrecord"):
        import types

        from tensorflow.core.example import example_pb2, feature_pb2

        # TensorFlow's compiled messages, of the same names, for the package's own.
        sys.modules["tfrecord.example_pb2"] = types.SimpleNamespace(
            Example=example_pb2.Example, SequenceExample=example_pb2.SequenceExample,
            Features=feature_pb2.Features, Feature=feature_pb2.Feature,
            FeatureLists=feature_pb2.FeatureLists)
        on_path("tfrecord", "torch")
    elif name == "ours_torch_x2":
        on_path("torch")
    items = records(name, path, shards(path))  # built before the clock, not read
    cpu, start = _cpu_seconds(), time.perf_counter()
    count = 0
    for _ in items:
        count += 1
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "cpu": _cpu_seconds() - cpu, "count": count}


def _cpu_seconds() -> float:
    import resource

    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


LABELS = {
    "ours": "`open_split`, 1 process", "ours_threads_x2": "`open_split`, 2 threads",
    "ours_x2": "`open_split`, Pool of 2 processes",
    "ours_torch_x2": "`open_split`, DataLoader 2 workers",
    "load": "`tfrecorder.load()` (tf.data, 2 cores)",
    "tfrecord": "`tfrecord` package, 1 process",
    "tfrecord_torch_x2": "`tfrecord` package, DataLoader 2 workers",
    "ours_raw": "`open_split(decode=False)`",
    "tfrecord_raw": "`tfrecord` package"}
# (contender, reference, the target for contender / reference, or None)
RATIOS = [("ours", "tfrecord", 2.0), ("ours_torch_x2", "tfrecord_torch_x2", 2.0),
          ("ours_raw", "tfrecord_raw", 2.0), ("ours_threads_x2", "load", 0.8),
          ("ours_x2", "load", 0.8), ("ours_torch_x2", "load", 0.8), ("ours", "load", None)]


def main():
    args = harness.parser(__doc__.splitlines()[0], images=2000, rounds=3).parse_args()
    if args.contender:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        path, expected = args.input.rsplit(":", 1)
        found = run(args.contender, path)
        assert found["count"] == int(expected), (args.contender, found, expected)
        print(json.dumps(found))
        return

    path = build(args.out, args.images)
    on_path("torch", "tfrecord")  # installed once, before any clock
    names = [*IMAGES, *RECORDS]
    measured = []  # per round: name -> {"seconds", "cpu", "count"}
    for _ in range(args.rounds):
        measured.append({name: json.loads(harness.last_line_in_fresh_process(
            __file__, name, f"{path}:{args.images}", args.out)) for name in names})
    rounds = [{name: args.images / m["seconds"] for name, m in r.items()} for r in measured]
    rate = {name: harness.median(rounds, name) for name in names}
    cpu_ms = {name: statistics.median(1000 * r[name]["cpu"] / args.images for r in measured)
              for name in names}

    from tfrecorder.format.manifest import read_manifest

    stats = read_manifest(path).statistics["train"]
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                  if line.startswith("Model name")), platform.processor())
    print(f"\nMachine: {model}, {os.cpu_count()} cores, {platform.platform()}, "
          f"Python {platform.python_version()}")
    print(f"{args.images} JPEGs ({stats.image_width.min:.0f}-{stats.image_width.max:.0f} px "
          f"wide, {stats.image_bytes.mean / 1000:.0f} KB on average), 2 shards; median of "
          f"{args.rounds} rounds\n")
    print("| contender | images/s | records/s | CPU ms per item |")
    print("|---|---|---|---|")
    for name in names:
        cells = (f"{rate[name]:.0f} | | " if name in IMAGES else f"| {rate[name]:.0f} | ")
        print(f"| {LABELS[name]} | {cells}{cpu_ms[name]:.2f} |")
    print()
    for name, reference, target in RATIOS:
        ratio = harness.median_ratio(rounds, name, reference)
        verdict = "" if target is None else (
            f" (target >= {target}: {'met' if ratio >= target else 'MISSED'})")
        print(f"- {LABELS[name]} / {LABELS[reference]}: {ratio:.2f}x{verdict}")


if __name__ == "__main__":
    main()

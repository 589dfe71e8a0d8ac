"""Time and peak memory converting images already in memory: arrays, bytes cells and a
Hugging Face dataset.

Issue 17: NumPy arrays passed as `(x, y)`, and encoded images held as bytes in a
DataFrame column, which the local engine's workers read from the table they share with
the driver by fork.

    .venv/bin/python benchmarks/bench_memory_images.py [--images 50000]
        [--large-images 5000] [--rounds 2] [--workloads arrays,encoded,hf]

Three workloads, each converted in a fresh process with tfrecorder's defaults (2 workers
here), `overwrite=True, progress=False`:

- arrays: `--images` random-ish 32x32x3 uint8 arrays (CIFAR's size: a random colour and
  gradient per image, plus noise) and int labels, passed as `(x, y)`;
- encoded: `--large-images` distinct JPEGs of 1000x700 noisy gradients at quality 95
  (about 1 MiB each), read into a DataFrame column `image` of bytes, with a `label` and
  a `split` column;
- hf: the same JPEGs as a Hugging Face `DatasetDict` (80/10/10 splits, an `Image` column
  and a `ClassLabel`), saved once with `save_to_disk` and opened with `load_from_disk`:
  its Arrow files are memory-mapped, so the images are page cache, not the driver's
  anonymous memory, and tfrecorder must not copy them there.

Both inputs are made once from seeds and cached under --out (an .npz file; a folder of
JPEG files), so rounds and later runs reuse them; the conversion's output is deleted
after each run. A run loads its input before the clock starts, then reports: seconds,
what the input itself occupies (`x.nbytes + y.nbytes`; the DataFrame's
`memory_usage(deep=True)`), the driver's anonymous memory (RssAnon) after its imports and
with the input loaded, its peak during the conversion (sampled every 20 ms) and its
VmHWM (reset before converting), and the most private memory a worker held (Private_*
in smaps_rollup: the pages it shares with the driver by fork cost nothing more; sampled
as often as costs at most 5% of a core, see `_watch`), and the CPU seconds of driver
and workers, which a busy host changes less than the wall time. The records are counted
twice: the result's count, and the frames read back from the shards.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import resource
import shutil
import statistics
import struct
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from bench_structured import _private_kb, _status_kb  # noqa: E402

WORKLOADS = ("arrays", "encoded", "hf")
ARRAY_SHAPE = (32, 32, 3)
JPEG_SIZE = (700, 1000)  # height, width: about 1 MiB at quality 95 with this noise
JPEG_QUALITY = 95
CLASSES = 10


def arrays_input(images: int, folder: str) -> str:
    """`images` 32x32x3 uint8 arrays and int labels, made from a seed and cached."""
    path = os.path.join(folder, f"arrays-{images}.npz")
    if os.path.exists(path):
        return path
    rng = np.random.default_rng(0)
    x = np.empty((images, *ARRAY_SHAPE), np.uint8)
    ramp = np.linspace(-1, 1, ARRAY_SHAPE[1], dtype=np.float32)[None, None, :, None]
    for start in range(0, images, 10_000):  # bounded temporaries
        n = min(10_000, images - start)
        colour = rng.uniform(40, 215, (n, 1, 1, 3)).astype(np.float32)
        slope = rng.uniform(-40, 40, (n, 1, 1, 3)).astype(np.float32)
        noise = rng.normal(0, 12, (n, *ARRAY_SHAPE)).astype(np.float32)
        x[start:start + n] = np.clip(colour + slope * ramp + noise, 0, 255).astype(np.uint8)
    y = rng.integers(0, CLASSES, images)
    np.savez(path + ".tmp.npz", x=x, y=y)
    os.replace(path + ".tmp.npz", path)
    return path


def encoded_input(images: int, folder: str) -> str:
    """A folder of `images` distinct JPEGs of about 1 MiB (made once; a run cut short
    adds the missing ones). Each is a gradient plus uniform noise seeded by its index:
    distinct content, about 10 ms to make."""
    import simplejpeg

    path = os.path.join(folder, f"jpeg-{JPEG_SIZE[1]}x{JPEG_SIZE[0]}-q{JPEG_QUALITY}-{images}")
    os.makedirs(path, exist_ok=True)
    height, width = JPEG_SIZE
    rows, columns = np.mgrid[0:height, 0:width]
    base = np.stack([columns * 255 // width, rows * 255 // height,
                     (rows + columns) * 255 // (height + width)], -1).astype(np.int16)
    for index in range(images):
        name = os.path.join(path, f"{index:06d}.jpg")
        if os.path.exists(name):
            continue
        noise = np.random.default_rng(index).integers(-40, 41, base.shape, dtype=np.int16)
        pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
        with open(name + ".tmp", "wb") as f:
            f.write(simplejpeg.encode_jpeg(pixels, quality=JPEG_QUALITY, colorspace="RGB"))
        os.replace(name + ".tmp", name)
    return path


def hf_input(images: int, folder: str) -> str:
    """The encoded workload's JPEGs as a Hugging Face DatasetDict saved to disk (once)."""
    import datasets

    jpegs = encoded_input(images, folder)
    path = os.path.join(folder, f"hf-{images}")
    if os.path.exists(path):
        return path
    files = sorted(n for n in os.listdir(jpegs) if n.endswith(".jpg"))

    def rows(part: int):
        for index, name in enumerate(files):
            if index // 10 % 10 in ((0, 1, 2, 3, 4, 5, 6, 7), (8,), (9,))[part]:
                with open(os.path.join(jpegs, name), "rb") as f:
                    yield {"image": {"bytes": f.read(), "path": None},
                           "label": index % CLASSES}

    features = datasets.Features({"image": datasets.Image(decode=False),
                                  "label": datasets.ClassLabel(num_classes=CLASSES)})
    splits = datasets.DatasetDict({
        split: datasets.Dataset.from_generator(rows, features=features,
                                               gen_kwargs={"part": part})
        for part, split in enumerate(("train", "validation", "test"))})
    splits.save_to_disk(path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def load_input(name: str, path: str):
    """The source to convert, in memory, its number of images and the bytes it
    occupies."""
    if name == "arrays":
        with np.load(path) as data:
            x, y = data["x"], data["y"]
        return (x, y), len(x), x.nbytes + y.nbytes
    if name == "hf":
        import datasets

        splits = datasets.load_from_disk(path)
        mapped = sum(os.path.getsize(os.path.join(root, file))
                     for root, _, files in os.walk(path) for file in files
                     if file.endswith(".arrow"))
        return splits, sum(len(part) for part in splits.values()), mapped
    import pandas as pd

    cells = []
    for file in sorted(n for n in os.listdir(path) if n.endswith(".jpg")):
        with open(os.path.join(path, file), "rb") as f:
            cells.append(f.read())
    positions = np.arange(len(cells))
    table = pd.DataFrame({
        "image": cells,
        "label": [f"class-{i}" for i in positions % CLASSES],  # every class in each split
        "split": np.array(["train", "validation", "test"])[
            np.select([positions // 10 % 10 < 8, positions // 10 % 10 == 8], [0, 1], 2)],
    })
    return table, len(table), int(table.memory_usage(deep=True).sum())


def _watch(peaks: dict, done: threading.Event) -> None:
    """The driver's anonymous memory every 20 ms, and its workers' private memory as
    often as costs at most a twentieth of a core. Reading a worker's smaps_rollup walks
    the page tables of all it shares with the driver: 17 ms for 5 GB of bytes here, so
    at every 20 ms (bench_chunked's `_watch`) the sampler took most of a core from the
    run it measured: the driver's CPU for the 5,000 JPEGs was 40 s with it, 10 s (3 of
    them sampling) with this one."""
    me, next_workers = os.getpid(), 0.0
    while not done.wait(0.02):
        try:
            peaks["anon"] = max(peaks.get("anon", 0), _status_kb("RssAnon"))
            started = time.perf_counter()
            if started < next_workers:
                continue
            with open(f"/proc/{me}/task/{me}/children") as f:
                for pid in f.read().split():
                    peaks[pid] = max(peaks.get(pid, 0), _private_kb(pid))
            spent = time.perf_counter() - started
            peaks["sampling"] = peaks.get("sampling", 0.0) + spent
            next_workers = started + 20 * spent
        except (OSError, StopIteration):
            pass


def shard_records(paths: list[str]) -> int:
    """Records framed in the shards, read back from disk: each is a little-endian
    length, its CRC, the data and the data's CRC."""
    count = 0
    for path in paths:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            while header := f.read(12):
                (length,) = struct.unpack("<Q", header[:8])
                f.seek(length + 4, os.SEEK_CUR)
                count += 1
    return count


def _cpu_seconds() -> tuple[float, float]:
    """User and system CPU seconds of this process and of its ended children (the
    workers, once the pool has reaped them): on a shared host, steadier than wall time."""
    me, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                        resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def contender(name: str, path: str, out: str) -> dict:
    import tfrecorder

    base_kb = _status_kb("RssAnon")  # the interpreter, NumPy, pandas, tfrecorder
    source, images, input_bytes = load_input(name, path)
    output = os.path.join(out, f"output-{name}")
    shutil.rmtree(output, ignore_errors=True)
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM := VmRSS: the peak from here
        f.write("5")
    before_kb, peaks, done = _status_kb("RssAnon"), {}, threading.Event()
    threading.Thread(target=_watch, args=(peaks, done), daemon=True).start()
    cpu = _cpu_seconds()
    started = time.perf_counter()
    result = tfrecorder.convert(source, output, overwrite=True, progress=False)
    seconds = time.perf_counter() - started
    done.set()
    cpu = [after - before for after, before in zip(_cpu_seconds(), cpu)]
    anon_peak_kb = max(peaks.get("anon", 0), before_kb, _status_kb("RssAnon"))
    rss_peak_kb = _status_kb("VmHWM")
    workers = [kb for pid, kb in peaks.items() if pid not in ("anon", "sampling")]
    framed = shard_records(list(result.shards))
    shutil.rmtree(output, ignore_errors=True)
    return {"seconds": seconds, "images": images, "input_mb": input_bytes / 2**20,
            "base_mb": base_kb / 1024, "before_mb": before_kb / 1024,
            "anon_peak_mb": anon_peak_kb / 1024, "rss_peak_mb": rss_peak_kb / 1024,
            "worker_peak_mb": max(workers, default=0) / 1024, "workers_seen": len(workers),
            "worker_sampling_seconds": peaks.get("sampling", 0.0),
            "driver_cpu_seconds": cpu[0], "workers_cpu_seconds": cpu[1],
            "records": result.num_records, "rejected": result.num_rejected,
            "records_in_shards": framed}


def main() -> None:
    parser = harness.parser(__doc__.splitlines()[0], images=50_000, rounds=2)
    parser.set_defaults(out="/var/tmp/tfr-bench-memory-images")
    parser.add_argument("--large-images", type=int, default=5_000,
                        help="encoded images of about 1 MiB (the 'encoded' workload)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="which of arrays,encoded to run")
    args = parser.parse_args()
    if args.contender:
        print(json.dumps(contender(args.contender, args.input, args.out)))
        return
    names = [name for name in args.workloads.split(",") if name]
    unknown = set(names) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}: choose from {WORKLOADS}")
    os.makedirs(args.out, exist_ok=True)
    inputs = {}
    for name in names:
        started = time.perf_counter()
        make = {"arrays": lambda: arrays_input(args.images, args.out),
                "encoded": lambda: encoded_input(args.large_images, args.out),
                "hf": lambda: hf_input(args.large_images, args.out)}[name]
        inputs[name] = make()
        print(f"{name}: input ready in {time.perf_counter() - started:.1f} s "
              f"({inputs[name]})", file=sys.stderr, flush=True)
    counts = {"arrays": args.images, "encoded": args.large_images, "hf": args.large_images}
    script = os.path.abspath(__file__)
    runs = {name: [] for name in names}
    for number in range(args.rounds):
        for name in names:
            line = harness.last_line_in_fresh_process(script, name, inputs[name], args.out)
            runs[name].append(json.loads(line))
            print(f"round {number + 1}, {name}: {line}", file=sys.stderr, flush=True)

    print(f"Machine: {platform.platform()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; median seconds of {args.rounds} rounds "
          f"(and CPU seconds), memory the highest of them\n")
    print("| workload | images | seconds | images/s | CPU s, driver + workers | input "
          "| driver before the input "
          "| driver with the input | driver anonymous peak | driver peak / input "
          "| peak - with the input | driver RSS peak (VmHWM) | worker peak, private |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wrong = []
    for name in names:
        done = runs[name]
        seconds = statistics.median(r["seconds"] for r in done)
        images = counts[name]
        top = max(done, key=lambda r: r["anon_peak_mb"])
        label = {"arrays": "32x32x3 uint8 arrays as (x, y)",
                 "encoded": "~1 MiB JPEGs as bytes in a DataFrame",
                 "hf": "the same JPEGs, a memory-mapped Hugging Face DatasetDict"}[name]
        driver_cpu = statistics.median(r["driver_cpu_seconds"] for r in done)
        workers_cpu = statistics.median(r["workers_cpu_seconds"] for r in done)
        print(f"| {label} | {images:,} | {seconds:.1f} | {images / seconds:,.0f} "
              f"| {driver_cpu:.1f} + {workers_cpu:.1f} "
              f"| {top['input_mb']:,.0f} MB | {top['base_mb']:,.0f} MB "
              f"| {top['before_mb']:,.0f} MB | {top['anon_peak_mb']:,.0f} MB "
              f"| **{top['anon_peak_mb'] / top['input_mb']:.2f}** "
              f"| {top['anon_peak_mb'] - top['before_mb']:,.0f} MB "
              f"| {max(r['rss_peak_mb'] for r in done):,.0f} MB "
              f"| {max(r['worker_peak_mb'] for r in done):,.0f} MB |")
        wrong += [f"{name}: {r['records']:,} records in the result, "
                  f"{r['records_in_shards']:,} in the shards, {r['rejected']} rejected, "
                  f"{r['workers_seen']} workers seen; expected {images:,}"
                  for r in done if not (r["records"] == r["records_in_shards"] == images
                                        and r["workers_seen"])]
    print("\nRecord counts: " + ("as expected in every run" if not wrong
                                 else "WRONG\n" + "\n".join(wrong)))
    if wrong:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

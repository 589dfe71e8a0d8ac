"""An AutoML CSV of many small image files converted at 100k and 1M rows: images/s and
the driver's peak RSS, and how many bytes a row the driver grows by between the sizes.

Issue 31 ("Image tables at scale"): the driver must hold a row in a few hundred bytes,
or ImageNet-21k's 14M rows would need gigabytes before any image is read.

    .venv/bin/python benchmarks/bench_scale.py [--rows 100000,1000000] [--out /tmp/scale-bench]

The images are made once and reused across runs: distinct 16x16 JPEGs (a grey gradient
whose first 24 pixels spell the row index in black and white, so no two are alike), 1,000 a
folder, written by Pillow in a process pool; then one CSV a size, `split,image_uri,label`
lines without a header (80/10/10 splits, 10 labels in every split), the first N images. Each size is
converted in a fresh process with the defaults (the local engine, its default workers);
the clock covers `tfrecorder.convert` only. The driver's peak RSS is its own
`ru_maxrss` (RUSAGE_SELF: the workers are other processes), and "before" its RSS after
the imports, so the growth between the sizes is what the rows cost.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from multiprocessing import Pool

PER_FOLDER = 1_000
SPLITS = ("TRAIN",) * 8 + ("VALIDATION", "TEST")


def _image_path(folder: str, index: int) -> str:
    return os.path.join(folder, "images", f"{index // PER_FOLDER:05d}", f"{index:08d}.jpg")


def _write_folder(args: tuple[str, int]) -> None:
    """One folder's images: a gradient whose first 24 pixels spell the row index in
    black and white (a change of one grey level JPEG would quantize away)."""
    from PIL import Image

    folder, first = args
    os.makedirs(os.path.dirname(_image_path(folder, first)), exist_ok=True)
    pixels = bytearray(range(256))  # a 16x16 grey gradient
    for index in range(first, first + PER_FOLDER):
        pixels[0:24] = bytes(255 * (index >> bit & 1) for bit in range(24))
        buffer = io.BytesIO()
        Image.frombytes("L", (16, 16), bytes(pixels)).save(buffer, "JPEG", quality=95)
        with open(_image_path(folder, index), "wb") as f:
            f.write(buffer.getvalue())


def make_images(rows: int, folder: str) -> None:
    """The first `rows` images, writing only the folders not made by an earlier run."""
    done_marker = os.path.join(folder, "images", "done-{:05d}")
    todo = [(folder, first) for first in range(0, rows, PER_FOLDER)
            if not os.path.exists(done_marker.format(first // PER_FOLDER))]
    if not todo:
        return
    started = time.perf_counter()
    with Pool() as pool:
        for _ in pool.imap_unordered(_write_folder, todo, chunksize=4):
            pass
    for _, first in todo:
        open(done_marker.format(first // PER_FOLDER), "w").close()
    print(f"made {len(todo) * PER_FOLDER:,} images in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)


def make_csv(rows: int, folder: str) -> str:
    path = os.path.join(folder, f"images-{rows}.csv")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            for index in range(rows):
                f.write(f"{SPLITS[index % 10]},{_image_path(folder, index)},"
                        f"class{index // 10 % 10}\n")
        os.replace(path + ".tmp", path)
    return path


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def contender(csv: str, out: str) -> dict:
    """In the fresh process: one conversion with the defaults."""
    import tfrecorder

    shutil.rmtree(out, ignore_errors=True)
    before = _rss_mb()
    started = time.perf_counter()
    result = tfrecorder.convert(csv, out)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "records": result.num_records, "before_mb": before,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def in_fresh_process(csv: str, out: str) -> dict:
    result = subprocess.run([sys.executable, __file__, "--contender", csv, "--out", out],
                            capture_output=True, text=True)
    if result.returncode:
        sys.stderr.write(result.stderr[-5000:])
        result.check_returncode()
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000",
                        help="comma-separated sizes, smallest first")
    parser.add_argument("--out", default="/tmp/scale-bench")
    parser.add_argument("--contender", help=argparse.SUPPRESS)  # the CSV, in the child
    args = parser.parse_args()
    if args.contender:
        print(json.dumps(contender(args.contender, args.out)))
        return
    sizes = sorted(int(n) for n in args.rows.split(","))
    make_images(sizes[-1], args.out)
    print(f"Machine: {platform.platform()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}\n")
    print("| rows | seconds | images/s | driver before | driver peak RSS | records |")
    print("|---|---|---|---|---|---|")
    found = {}
    for rows in sizes:
        run = found[rows] = in_fresh_process(make_csv(rows, args.out),
                                             os.path.join(args.out, "dataset"))
        print(f"| {rows:,} | {run['seconds']:.1f} | {rows / run['seconds']:,.0f} "
              f"| {run['before_mb']:,.0f} MB | {run['peak_mb']:,.0f} MB "
              f"| {run['records']:,} |", flush=True)
    shutil.rmtree(os.path.join(args.out, "dataset"), ignore_errors=True)
    if len(sizes) > 1:
        small, large = found[sizes[0]], found[sizes[-1]]
        per_row = (large["peak_mb"] - small["peak_mb"]) * 2**20 / (sizes[-1] - sizes[0])
        rate = (sizes[-1] / large["seconds"]) / (sizes[0] / small["seconds"])
        print(f"\nDriver growth: {per_row:,.0f} bytes a row between {sizes[0]:,} and "
              f"{sizes[-1]:,} rows; rate at {sizes[-1]:,} / rate at {sizes[0]:,}: "
              f"{rate:.2f}")


if __name__ == "__main__":
    main()

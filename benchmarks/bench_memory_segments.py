"""A/B, in one process: the local engine's segments for images held in memory, 16 rows
each (as for image files) against segments of about 512 KB of images (up to 256 rows).

    .venv/bin/python benchmarks/bench_memory_segments.py [--images 50000] [--rounds 4]

Converts bench_memory_images' 50,000 32x32x3 arrays (made and cached by it) as (x, y),
stored as PNG (the default) and raw, alternating the two segment sizes and their order
round by round; the first round warms up. Prints each round's images/s and the median
ratio new / old per format; with --classic, also the classic CIFAR-10 recipe's rate (each
array's raw bytes in a `tf.train.Example`, written by `tf.io.TFRecordWriter` in one
process: no validation, no content hash, no PNG), for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_memory_images import arrays_input  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default="/var/tmp/tfr-bench-memory-images")
    parser.add_argument("--classic", action="store_true",
                        help="also time the hand-written tf.train.Example loop")
    args = parser.parse_args()
    import tfrecorder
    from tfrecorder.write.engines import local

    os.makedirs(args.out, exist_ok=True)
    with np.load(arrays_input(args.images, args.out)) as data:
        x, y = data["x"], data["y"]
    new_cap = local._MAX_SEGMENT_ROWS_IN_MEMORY
    ratios: dict[str, list[float]] = {"auto": [], "raw": []}
    for number in range(args.rounds):
        for image_format in ratios:
            rates = {}
            for cap in (16, new_cap) if number % 2 == 0 else (new_cap, 16):
                local._MAX_SEGMENT_ROWS_IN_MEMORY = cap  # 16: every segment 16 rows
                with tempfile.TemporaryDirectory(dir=args.out) as out:
                    started = time.perf_counter()
                    tfrecorder.convert((x, y), os.path.join(out, "o"), progress=False,
                                       image_format=image_format)
                    rates[cap] = len(x) / (time.perf_counter() - started)
            if number:  # the first round warms up
                ratios[image_format].append(rates[new_cap] / rates[16])
            print(f"round {number + 1}, {image_format}: "
                  f"{ {k: round(v) for k, v in rates.items()} } images/s", flush=True)
    if args.classic:
        rate = _classic(x, y, args.out)
        print(f"classic loop: {rate:,.0f} images/s")
    for image_format, found in ratios.items():
        print(f"{image_format}: new / old = {statistics.median(found):.2f} "
              f"(rounds {', '.join(f'{r:.2f}' for r in found)})")


def _classic(x: np.ndarray, y: np.ndarray, folder: str) -> float:
    """Images/s of the hand-written loop most CIFAR-10 tutorials show."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(dir=folder) as out:
        started = time.perf_counter()
        with tf.io.TFRecordWriter(os.path.join(out, "classic.tfrecord")) as writer:
            for image, label in zip(x, y):
                feature = {
                    "image": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                    "label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())
        return len(x) / (time.perf_counter() - started)


if __name__ == "__main__":
    main()

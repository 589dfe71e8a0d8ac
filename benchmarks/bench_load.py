"""Read throughput of `tfrecorder.load()` against Keras' `image_dataset_from_directory`.

    .venv/bin/python benchmarks/bench_load.py [--images 3000] [--rounds 5]

Both read the same JPEGs (bench_write.py's set, laid out as label folders) and deliver
batches of 32 (image, label) pairs, images decoded and resized to 224x224, in file order
(no shuffling), one epoch per measurement. tfrecorder reads two datasets converted from
those files: images stored as they are, and images written with `max_image_side=256`.
Each contender runs in a fresh process per round (TensorFlow's import is not timed); the
median over rounds is reported, with ratios taken within each round.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

from bench_write import build_images

BATCH, SIZE = 32, (224, 224)


def label_tree(table, root: str) -> str:
    """Hard links of the images as root/label/file, the layout Keras reads."""
    if not os.path.isdir(root):
        for uri, label in zip(table["image_uri"], table["label"]):
            os.makedirs(os.path.join(root, label), exist_ok=True)
            os.link(uri, os.path.join(root, label, os.path.basename(uri)))
    return root


def convert(tree: str, output: str, **options) -> str:
    import tfrecorder

    if not os.path.exists(os.path.join(output, "dataset.json")):
        shutil.rmtree(output, ignore_errors=True)
        tfrecorder.convert(tree, output, unassigned_split=(1.0, 0.0, 0.0), progress=False,
                           **options)
    return output


def epoch_seconds(name: str, path: str) -> float:
    """One timed epoch of a contender (runs in its own process)."""
    import tensorflow as tf

    if name == "keras":
        ds = tf.keras.utils.image_dataset_from_directory(
            path, image_size=SIZE, batch_size=BATCH, shuffle=False, verbose=False)
        ds = ds.prefetch(tf.data.AUTOTUNE)
    else:
        import tfrecorder

        ds = tfrecorder.load(path, "train", batch_size=BATCH, image_size=SIZE,
                             shuffle=False, as_supervised=True)
    start = time.perf_counter()
    count = sum(int(images.shape[0]) for images, _ in ds)
    seconds = time.perf_counter() - start
    return seconds, count


def run(name: str, path: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, __file__, "--contender", name, "--path", path],
                         capture_output=True, text=True, check=True)
    seconds, count = out.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(count)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--out", default="/tmp/tfr-bench")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.contender:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        seconds, count = epoch_seconds(args.contender, args.path)
        print(seconds, count)
        return

    table = build_images(os.path.join(args.out, "images"), args.images)
    tree = label_tree(table, os.path.join(args.out, "by_label"))
    paths = {
        "keras": tree,
        "as_is": convert(tree, os.path.join(args.out, "load_as_is")),
        "max_256": convert(tree, os.path.join(args.out, "load_256"), max_image_side=256),
        "at_224": convert(tree, os.path.join(args.out, "load_224"), image_size=SIZE),
    }
    rounds = []
    for _ in range(args.rounds):
        rates = {}
        for name, path in paths.items():
            seconds, count = run(name, path)
            assert count == len(table), (name, count)
            rates[name] = count / seconds
        rounds.append(rates)
    rate = {name: statistics.median(r[name] for r in rounds) for name in paths}
    ratio = {name: statistics.median(r[name] / r["keras"] for r in rounds)
             for name in ("as_is", "max_256", "at_224")}

    print(f"\nMachine: {platform.platform()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print(f"{len(table)} JPEGs (400-800 px), batches of {BATCH} at {SIZE[0]}x{SIZE[1]}, "
          f"median of {args.rounds} rounds\n")
    print("| contender | images/s | vs Keras |")
    print("|---|---|---|")
    print(f"| `image_dataset_from_directory` | {rate['keras']:.0f} | 1.0x |")
    print(f"| `tfrecorder.load`, images as written | {rate['as_is']:.0f} | "
          f"{ratio['as_is']:.1f}x (target >= 1.0x) |")
    print(f"| `tfrecorder.load`, written with max_image_side=256 | {rate['max_256']:.0f} | "
          f"{ratio['max_256']:.1f}x (target >= 3x) |")
    print(f"| `tfrecorder.load`, written with image_size=(224, 224) | {rate['at_224']:.0f} | "
          f"{ratio['at_224']:.1f}x |")


if __name__ == "__main__":
    main()

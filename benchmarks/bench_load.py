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

import os
import platform
import shutil
import time

import harness
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


def epoch_seconds(name: str, path: str, expected: int) -> float:
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
    assert count == expected, (name, count, expected)
    return seconds


def main():
    args = harness.parser(__doc__.splitlines()[0], images=3000, rounds=5).parse_args()
    if args.contender:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        path, expected = args.input.rsplit(":", 1)
        print(epoch_seconds(args.contender, path, int(expected)))
        return

    table = build_images(os.path.join(args.out, "images"), args.images)
    tree = label_tree(table, os.path.join(args.out, "by_label"))
    paths = {
        "keras": tree,
        "as_is": convert(tree, os.path.join(args.out, "load_as_is")),
        "max_256": convert(tree, os.path.join(args.out, "load_256"), max_image_side=256),
        "at_224": convert(tree, os.path.join(args.out, "load_224"), image_size=SIZE),
    }
    rounds = harness.rounds(
        list(paths), lambda name: harness.seconds_in_fresh_process(
            __file__, name, f"{paths[name]}:{len(table)}", args.out),
        len(table), args.rounds)
    rate = {name: harness.median(rounds, name) for name in paths}
    ratio = {name: harness.median_ratio(rounds, name, "keras")
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

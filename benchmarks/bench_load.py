"""Read throughput of `tfrecorder.load()` against Keras and a bare tf.data pipeline.

    .venv/bin/python benchmarks/bench_load.py [--images 2000] [--rounds 3] [--epochs 3]
    .venv/bin/python benchmarks/bench_load.py --decode-options 300 [--epochs 3]

Every contender reads the same JPEGs (bench_write.py's set, 400-800 px as written) and
delivers batches of 64 (image, label) pairs, images decoded and resized to 224x224, in
file order (no shuffling):

- `keras`: `tf.keras.utils.image_dataset_from_directory` on the files laid out as label
  folders (reads each file, `decode_image`, bilinear resize; float32 pixels).
- `bare`: the files' bytes held in memory (read before timing), `decode_jpeg` at full
  size, then `tf.image.resize` (bilinear), `map(num_parallel_calls=AUTOTUNE)`, batch,
  prefetch; float32 pixels, as Keras.
- `bare_scaled`: the same, with the DCT scale `load()` picks for each image from its
  size (1/2 when that still covers 224x224): the decode work `load()` does, without its
  reading and parsing.
- `load`: `tfrecorder.load(..., image_size=(224, 224), as_supervised=True)` on a dataset
  of the files as they are; and `load_256`, `load_224` on datasets written with
  `max_image_side=256` and with `image_size=(224, 224)`.

The host is shared and its speed drifts (the same pipeline runs at ~750 or ~1,450
images/s from one epoch to the next), so each contender runs in a fresh process per
round (TensorFlow's import and the pipeline's first batch are not timed), the
contenders of a round run back to back, and each process times `--epochs` epochs: wall
images/s, and CPU time per image (`os.times()` user + sys around the epoch, which counts
TensorFlow's threads), the steadier of the two. Ratios are taken within rounds.

`--decode-options N` measures instead, in one process, what each way of decoding and
resizing these JPEGs costs (CPU per image; DCT scales, IDCTs, chroma upsampling, resize
methods) and how far its pixels are from load()'s, the bare pipeline's and a faithful
reduction's (full accurate decode, antialiased), over the first N images.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import time

import harness
from bench_write import build_images

BATCH, SIZE = 64, (224, 224)
CONTENDERS = ("keras", "bare", "bare_scaled", "load", "load_256", "load_224")
DESCRIPTIONS = {
    "keras": "`image_dataset_from_directory`",
    "bare": "bare tf.data: bytes in memory, full `decode_jpeg`, `resize`",
    "bare_scaled": "bare tf.data, at `load()`'s DCT scales",
    "load": "`tfrecorder.load`, images as written",
    "load_256": "`tfrecorder.load`, written with max_image_side=256",
    "load_224": "`tfrecorder.load`, written with image_size=(224, 224)",
}


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


def jpegs(tree: str) -> tuple[list[bytes], list[int], list[int]]:
    """Every file's bytes (in Keras' order), its label's index, and the DCT scale load()
    picks for it from its size: the largest of 1/1, 1/2, 1/4, 1/8 (as 0-3) that keeps
    both sides at least the target's."""
    from PIL import Image

    labels = sorted(os.listdir(tree))
    files = [(os.path.join(tree, label, name), index)
             for index, label in enumerate(labels)
             for name in sorted(os.listdir(os.path.join(tree, label)))]
    datas, scales = [], []
    for path, _ in files:
        with open(path, "rb") as f:
            datas.append(f.read())
        with Image.open(path) as image:
            width, height = image.size
        scales.append(sum(width >= r * SIZE[1] and height >= r * SIZE[0] for r in (2, 4, 8)))
    return datas, [label for _, label in files], scales


def bare_dataset(tree: str, scaled: bool):
    """The bare pipeline: every file's bytes in memory, decoded and resized in a parallel
    map; `scaled` decodes at load()'s DCT scale for each image."""
    import tensorflow as tf

    datas, labels, scales = jpegs(tree)

    def decode(data, scale, label):
        if scaled:
            image = tf.switch_case(scale, [
                lambda r=r: tf.io.decode_jpeg(data, channels=3, ratio=r) for r in (1, 2, 4, 8)])
        else:
            image = tf.io.decode_jpeg(data, channels=3)
        return tf.image.resize(image, SIZE), label

    ds = tf.data.Dataset.from_tensor_slices((datas, scales, labels))
    ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)


# Decode options, measured per image with --decode-options: (DCT scale: "load" for
# load()'s choice per image, or a ratio; dct_method; fancy_upscaling; resize method, or
# None for the decode alone).
DECODE_OPTIONS = {
    "decode 1/1 (default IDCT, INTEGER_FAST)": (1, "", True, None),
    "decode 1/1 INTEGER_ACCURATE": (1, "INTEGER_ACCURATE", True, None),
    "decode 1/1 fancy_upscaling=False": (1, "", False, None),
    "decode 1/2": (2, "", True, None),
    "decode 1/4": (4, "", True, None),
    "decode 1/8 (~ entropy decoding alone)": (8, "", True, None),
    "decode at load()'s scales": ("load", "", True, None),
    "1/1 + bilinear (the bare pipeline)": (1, "", True, "bilinear"),
    "1/1 INTEGER_ACCURATE + bilinear": (1, "INTEGER_ACCURATE", True, "bilinear"),
    "1/1 + area": (1, "", True, "area"),
    "1/1 + bilinear antialias": (1, "", True, "antialias"),
    "1/1 INTEGER_ACCURATE + bilinear antialias": (1, "INTEGER_ACCURATE", True, "antialias"),
    "load()'s scales + bilinear (load())": ("load", "", True, "bilinear"),
    "load()'s scales INTEGER_ACCURATE + bilinear": ("load", "INTEGER_ACCURATE", True,
                                                    "bilinear"),
    "load()'s scales fancy_upscaling=False + bilinear": ("load", "", False, "bilinear"),
    "load()'s scales + area": ("load", "", True, "area"),
    "load()'s scales + bilinear antialias": ("load", "", True, "antialias"),
    "1/2 for all + bilinear": (2, "", True, "bilinear"),
    "1/4 for all + bilinear": (4, "", True, "bilinear"),
    "1/8 for all + bilinear": (8, "", True, "bilinear"),
}
# What the resized options' pixels are compared with.
REFERENCES = ("load()'s scales + bilinear (load())", "1/1 + bilinear (the bare pipeline)",
              "1/1 INTEGER_ACCURATE + bilinear antialias")


def decode_options(tree: str, rounds: int, compared: int) -> None:
    """CPU per image of each of DECODE_OPTIONS (a parallel map over the bytes in memory,
    `rounds` epochs each, interleaved), and how far the resized ones' pixels are from
    REFERENCES' on the first `compared` images."""
    import numpy as np
    import tensorflow as tf

    datas, _, scales = jpegs(tree)

    def pixels(option):
        scale, dct_method, fancy, method = DECODE_OPTIONS[option]

        def decode(data, index):
            def at(ratio):
                return lambda: tf.io.decode_jpeg(data, channels=3, ratio=ratio,
                                                 dct_method=dct_method, fancy_upscaling=fancy)
            if scale != "load":
                image = at(scale)()
            else:
                image = tf.switch_case(index, [at(r) for r in (1, 2, 4, 8)])
            if method is None:
                return tf.shape(image)  # the decode alone, nothing to batch
            resized = tf.image.resize(image, SIZE, method="bilinear" if method == "antialias"
                                      else method, antialias=method == "antialias")
            return tf.saturate_cast(resized + 0.5, tf.uint8)  # rounded, as load()

        return decode

    def run(option, count):
        ds = tf.data.Dataset.from_tensor_slices((datas[:count], scales[:count]))
        return ds.map(pixels(option), num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)

    cpu = {option: [] for option in DECODE_OPTIONS}
    for _ in range(rounds):
        for option in DECODE_OPTIONS:
            before = os.times()
            for _ in run(option, len(datas)):
                pass
            after = os.times()
            cpu[option].append(1e6 * (after.user + after.system - before.user - before.system)
                               / len(datas))
    found = {option: np.concatenate(list(run(option, compared).as_numpy_iterator())
                                    ).astype(np.int16)
             for option in DECODE_OPTIONS if DECODE_OPTIONS[option][3]}
    exact = [tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy()
             .astype(np.int16) for data in datas[:compared]]
    counts = np.bincount(scales, minlength=4)
    print(f"\n{len(datas)} JPEGs: DCT scale load() picks for {SIZE[0]}x{SIZE[1]}: " + ", ".join(
        f"1/{2 ** i}: {n}" for i, n in enumerate(counts)))
    print(f"CPU us per image: median of {rounds} epochs (range); pixels: max / mean "
          f"absolute difference over the first {compared} images\n")
    print("| option | CPU us/image | " + " | ".join(f"vs {ref}" for ref in REFERENCES) + " |")
    print("|---|---|" + "---|" * len(REFERENCES))
    for option, (scale, dct_method, fancy, method) in DECODE_OPTIONS.items():
        cells = [f"{statistics.median(cpu[option]):.0f} ({spread(cpu[option])})"]
        if method is not None:
            cells += [f"{np.abs(found[option] - found[ref]).max()} / "
                      f"{np.abs(found[option] - found[ref]).mean():.2f}" for ref in REFERENCES]
        elif scale == 1:  # full size: against the exact (accurate) decode
            decoded = [tf.io.decode_jpeg(data, channels=3, dct_method=dct_method,
                                         fancy_upscaling=fancy).numpy() for data in
                       datas[:compared]]
            diffs = [np.abs(d - e) for d, e in zip(decoded, exact)]
            cells += [f"vs the exact decode: {max(d.max() for d in diffs)} / "
                      f"{np.mean([d.mean() for d in diffs]):.2f}"] + [""] * (len(REFERENCES) - 1)
        else:
            cells += [""] * len(REFERENCES)
        print(f"| {option} | " + " | ".join(cells) + " |")


def dataset(name: str, path: str):
    import tensorflow as tf

    if name == "keras":
        ds = tf.keras.utils.image_dataset_from_directory(
            path, image_size=SIZE, batch_size=BATCH, shuffle=False, verbose=False)
        return ds.prefetch(tf.data.AUTOTUNE)
    if name.startswith("bare"):
        return bare_dataset(path, scaled=name == "bare_scaled")
    import tfrecorder

    return tfrecorder.load(path, "train", batch_size=BATCH, image_size=SIZE, shuffle=False,
                           as_supervised=True)


def epochs(name: str, path: str, expected: int, number: int) -> list[tuple[float, float]]:
    """(seconds, CPU seconds) of `number` epochs of a contender, in its own process,
    after one untimed batch (building the pipeline, tracing its functions)."""
    ds = dataset(name, path)
    next(iter(ds))
    found = []
    for _ in range(number):
        cpu, start = os.times(), time.perf_counter()
        count = sum(int(images.shape[0]) for images, _ in ds)
        seconds, after = time.perf_counter() - start, os.times()
        assert count == expected, (name, count, expected)
        found.append((seconds, after.user + after.system - cpu.user - cpu.system))
    return found


def spread(values) -> str:
    return f"{min(values):.0f}-{max(values):.0f}"


def main():
    parser = harness.parser(__doc__.splitlines()[0], images=2000, rounds=3)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per process")
    parser.add_argument("--only", default=",".join(CONTENDERS),
                        help="comma-separated contenders")
    parser.add_argument("--decode-options", type=int, metavar="IMAGES",
                        help="instead: CPU per image of each decode option, and their "
                             "pixels' differences over this many images")
    args = parser.parse_args()
    if args.contender:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        path, expected, number = args.input.rsplit(":", 2)
        print(json.dumps(epochs(args.contender, path, int(expected), int(number))))
        return

    table = build_images(os.path.join(args.out, "images"), args.images)
    tree = label_tree(table, os.path.join(args.out, "by_label"))
    if args.decode_options:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        decode_options(tree, args.epochs, args.decode_options)
        return
    paths = {"keras": tree, "bare": tree, "bare_scaled": tree,
             "load": convert(tree, os.path.join(args.out, "load_as_is")),
             "load_256": convert(tree, os.path.join(args.out, "load_256"),
                                 max_image_side=256),
             "load_224": convert(tree, os.path.join(args.out, "load_224"), image_size=SIZE)}
    names = [name for name in CONTENDERS if name in args.only.split(",")]
    n = len(table)
    rounds = []  # per round: name -> [(seconds, cpu seconds)] of its epochs
    for _ in range(args.rounds):
        rounds.append({name: json.loads(harness.last_line_in_fresh_process(
            __file__, name, f"{paths[name]}:{n}:{args.epochs}", args.out)) for name in names})

    def rates(name, runs=rounds):
        return [n / seconds for r in runs for seconds, _ in r[name]]

    def cpu_ms(name, runs=rounds):
        return [1000 * cpu / n for r in runs for _, cpu in r[name]]

    print(f"\nMachine: {platform.platform()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} "
          "at the end")
    print(f"{n} JPEGs (400-800 px), batches of {BATCH} at {SIZE[0]}x{SIZE[1]}, "
          f"{args.rounds} rounds of a fresh process each, {args.epochs} epochs each\n")
    print("| contender | images/s best | images/s all epochs | CPU ms/image median | "
          "CPU ms/image all epochs |")
    print("|---|---|---|---|---|")
    for name in names:
        print(f"| {DESCRIPTIONS[name]} | {max(rates(name)):.0f} | {spread(rates(name))} | "
              f"{statistics.median(cpu_ms(name)):.2f} | "
              f"{min(cpu_ms(name)):.2f}-{max(cpu_ms(name)):.2f} |")

    # Within each round: best epoch against best epoch, median CPU against median CPU.
    references = [name for name in ("bare", "keras") if name in names]
    others = [name for name in names if name.startswith("load") or name == "bare_scaled"]
    if references and others:
        print("\nRatios within rounds (median, and range over rounds): images/s of the "
              "best epochs; CPU per image of the median epochs (theirs / ours)\n")
        print("| contender | " + " | ".join(
            f"images/s vs {ref} | CPU vs {ref}" for ref in references) + " |")
        print("|---|" + "---|---|" * len(references))
        for name in others:
            cells = []
            for ref in references:
                speed = [max(rates(name, [r])) / max(rates(ref, [r])) for r in rounds]
                cpu = [statistics.median(cpu_ms(ref, [r])) /
                       statistics.median(cpu_ms(name, [r])) for r in rounds]
                cells += [f"{statistics.median(speed):.2f}x ({min(speed):.2f}-"
                          f"{max(speed):.2f})",
                          f"{statistics.median(cpu):.2f}x ({min(cpu):.2f}-{max(cpu):.2f})"]
            print(f"| {DESCRIPTIONS[name]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

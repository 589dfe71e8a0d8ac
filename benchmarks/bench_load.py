"""Read throughput of `tfrecorder.load()` against Keras and a bare tf.data pipeline.

    .venv/bin/python benchmarks/bench_load.py [--images 2000] [--rounds 3] [--epochs 3]
    .venv/bin/python benchmarks/bench_load.py --decode-options 300 [--epochs 3]
    .venv/bin/python benchmarks/bench_load.py --crops [--large-images 1000] [--epochs 2]
    .venv/bin/python benchmarks/bench_load.py --crop-stages [--epochs 3]
    .venv/bin/python benchmarks/bench_load.py --records [--images 2000] [--rounds 3]

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

`--crops` measures the training and evaluation paths instead, the same way (rounds of
fresh processes, CPU per image, ratios within rounds). Training, Inception's
random-resized crop resized to 224x224 and flipped, the same windows everywhere
(crop_pipelines.py):

- `load_rrc`: `load(..., augment="random_resized_crop", seed=0)` (the window decoded
  alone, at the DCT scale that still covers 224x224; uint8 pixels);
- `bare_crop_after_decode`: the bare pipeline, full `decode_jpeg`, the window sliced out;
- `ceiling_crop_decode`: the bare pipeline, `decode_and_crop_jpeg` of the window at ratio
  1 (float32 pixels, both);
- `model_garden`: Model Garden's classification `Decoder` and `Parser` (training) on the
  same images written with layout="tf_models" (normalized float32 pixels).

Evaluation, the central 0.875 of the short side, likewise: `load_center` (`crop="center"`),
`bare_center_after_decode`, `ceiling_center_crop_decode`, `model_garden_eval`. And written
for training: `load_rrc` on `--large-images` photos of 2000-3000 px, written as they are
(`load_rrc_large`), with FFCV's ImageNet recipe, max_image_side=500 and jpeg_quality=90
(`load_rrc_500`), and with docs/reading.md's max_image_side=512 (`load_rrc_512`).

`--records` holds `load()` against bare pipelines over the same records, on two sets of
photos: of ImageNet's size (the sample photos cropped to a longer side of 400-600 px, a
median short side under 400) and the 400-800 px set. `records_crop` reads the shard with
`TFRecordDataset`, parses the image, its size and the label, and decodes the window of
`load_rrc`'s crop (the same seeds, so the same windows) at `load()`'s DCT ratio, resized,
rounded to uint8, flipped; `records_whole` decodes the whole image at `load()`'s DCT
scale and resizes it, as `load_whole` (`load(image_size=(224, 224))`). CPU per image,
ratios within rounds.

`--crop-stages` times, in one process, epochs of the parts of a random-resized crop's
pipeline interleaved (crop_pipelines.STAGES: the window, reading records, each decode
alone, the ceiling from bytes and from records), to show what bounds `load_rrc`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import time

import crop_pipelines
import harness
from bench_write import build_images
from sample_crops import make_crops  # on sys.path by bench_write

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
# --crops: name -> (description, pixels delivered); the references each `load` contender
# is held against, with the target (CPU per image, theirs / ours).
CROPS = {
    "load_rrc": ("`load(augment=\"random_resized_crop\")`", "uint8"),
    "bare_crop_after_decode": ("bare: full `decode_jpeg`, crop, resize, flip", "float32"),
    "ceiling_crop_decode": ("bare: `decode_and_crop_jpeg` (ratio 1), resize, flip",
                            "float32"),
    "model_garden": ("Model Garden's `Parser`, training", "float32, normalized"),
    "load_center": ("`load(crop=\"center\")`", "uint8"),
    "bare_center_after_decode": ("bare: full `decode_jpeg`, central crop, resize",
                                 "float32"),
    "ceiling_center_crop_decode": ("bare: `decode_and_crop_jpeg` (ratio 1), resize",
                                   "float32"),
    "model_garden_eval": ("Model Garden's `Parser`, evaluation", "float32, normalized"),
    "load_rrc_large": ("`load_rrc`, 2000-3000 px photos as written", "uint8"),
    "load_rrc_500": ("`load_rrc`, the same written with max_image_side=500, "
                     "jpeg_quality=90", "uint8"),
    "load_rrc_512": ("`load_rrc`, the same written with max_image_side=512", "uint8"),
}
# --records: load() against bare record pipelines over the same shard (issue 52), on
# photos of ImageNet's size and on the 400-800 px set: name -> description; and the
# targets, CPU per image, theirs / ours.
RECORDS = {
    "load_rrc": "`load(augment=\"random_resized_crop\")`",
    "records_crop": "bare: `TFRecordDataset`, parse image, size, label, crop-decode at "
                    "load()'s DCT ratio, resize, flip",
    "load_whole": "`load(image_size=(224, 224))`, the whole image",
    "records_whole": "bare: `TFRecordDataset`, parse image, size, label, decode at "
                     "load()'s DCT scale, resize",
}
RECORD_TARGETS = {("load_rrc", "records_crop"): 0.95, ("load_whole", "records_whole"): 0.95,
                  ("load_rrc", "load_whole"): 1.1}
# Photos of ImageNet's size (median 500x375): sample crops with a longer side of 400-600
# px, a median short side under 400.
SMALL_SIDES = (400, 600)
# The written-for-training contenders: convert's options for the large photos.
WRITTEN = {"load_rrc_large": {}, "load_rrc_500": {"max_image_side": 500, "jpeg_quality": 90},
           "load_rrc_512": {"max_image_side": 512}}
TARGETS = {
    "load_rrc": {"bare_crop_after_decode": 1.2, "ceiling_crop_decode": 0.85,
                 "model_garden": 1.0},
    "load_center": {"bare_center_after_decode": 1.2, "ceiling_center_crop_decode": 0.85,
                    "model_garden_eval": 1.0},
    "load_rrc_500": {"load_rrc_large": None},
    "load_rrc_512": {"load_rrc_large": None},
}


def label_tree(table, root: str) -> str:
    """Hard links of the images as root/label/file, the layout Keras reads."""
    if not os.path.isdir(root):
        for uri, label in zip(table["image_uri"], table["label"]):
            os.makedirs(os.path.join(root, label), exist_ok=True)
            os.link(uri, os.path.join(root, label, os.path.basename(uri)))
    return root


def convert(tree: str, output: str, **options) -> str:
    """`tree` converted to `output` (all in train), once; the seconds it took are kept
    beside it, in `output`.seconds."""
    import tfrecorder

    if not os.path.exists(os.path.join(output, "dataset.json")):
        shutil.rmtree(output, ignore_errors=True)
        start = time.perf_counter()
        tfrecorder.convert(tree, output, unassigned_split=(1.0, 0.0, 0.0), progress=False,
                           **options)
        with open(output + ".seconds", "w") as f:
            f.write(f"{time.perf_counter() - start:.1f}\n")
    return output


def convert_seconds(output: str) -> str:
    try:
        with open(output + ".seconds") as f:
            return f.read().strip()
    except OSError:
        return "?"


def jpegs(tree: str) -> tuple[list[bytes], list[int], list[int], list[tuple[int, int]]]:
    """Every file's bytes (in Keras' order), its label's index, the DCT scale load()
    picks for it from its size: the largest of 1/1, 1/2, 1/4, 1/8 (as 0-3) that keeps
    both sides at least the target's; and its (height, width)."""
    from PIL import Image

    labels = sorted(os.listdir(tree))
    files = [(os.path.join(tree, label, name), index)
             for index, label in enumerate(labels)
             for name in sorted(os.listdir(os.path.join(tree, label)))]
    datas, scales, shapes = [], [], []
    for path, _ in files:
        with open(path, "rb") as f:
            datas.append(f.read())
        with Image.open(path) as image:
            width, height = image.size
        scales.append(sum(width >= r * SIZE[1] and height >= r * SIZE[0] for r in (2, 4, 8)))
        shapes.append((height, width))
    return datas, [label for _, label in files], scales, shapes


def bare_dataset(tree: str, scaled: bool):
    """The bare pipeline: every file's bytes in memory, decoded and resized in a parallel
    map; `scaled` decodes at load()'s DCT scale for each image."""
    import tensorflow as tf

    datas, labels, scales, _ = jpegs(tree)

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


def interleaved_cpu(pipeline, names, rounds: int, count: int) -> dict[str, list[float]]:
    """CPU us per image of an epoch of each of `names`' pipelines (`pipeline(name)`, of
    `count` images), `rounds` epochs each, interleaved, in this process."""
    cpu = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            before = os.times()
            for _ in pipeline(name):
                pass
            after = os.times()
            cpu[name].append(1e6 * (after.user + after.system - before.user - before.system)
                             / count)
    return cpu


def crop_stages(tree: str, path: str, rounds: int) -> None:
    """--crop-stages: CPU per image of the parts of a random-resized crop's pipeline
    (crop_pipelines.STAGES) and of load()'s, interleaved epochs in one process; and how
    many windows load()'s DCT scaling can shrink."""
    import numpy as np

    datas, labels, _, shapes = jpegs(tree)
    records = sorted(os.path.join(path, f) for f in os.listdir(path) if f.startswith("train-"))

    def build(stage):
        if crop_pipelines.STAGES[stage] == "load":
            return crop_dataset("load_rrc", path)
        decode, output, from_records = crop_pipelines.STAGES[stage]
        return crop_pipelines.bare_crops(datas, shapes, labels, SIZE, BATCH, "random", decode,
                                         output, records if from_records else None)

    pipelines = {stage: build(stage) for stage in crop_pipelines.STAGES}
    for ds in pipelines.values():
        next(iter(ds))  # traced, untimed
    cpu = interleaved_cpu(pipelines.__getitem__, pipelines, rounds, len(datas))
    cuts = np.concatenate([cut for cut, _ in pipelines["seeds and window alone"]
                           .as_numpy_iterator()])
    area = cuts[:, 2] * cuts[:, 3] / np.prod(np.array(shapes), 1)
    short = [min(h, w) for h, w in shapes]
    central = np.array([int(crop_pipelines.FRACTION * s) for s in short])
    print(f"\n{len(datas)} JPEGs (400-800 px), random windows of one epoch: area median "
          f"{np.median(area):.2f} of the image; at 1/2 or less (short side >= "
          f"{2 * SIZE[0]} px): {np.mean(cuts[:, 2:].min(1) >= 2 * SIZE[0]):.0%} of random "
          f"windows, {np.mean(central >= 2 * SIZE[0]):.0%} of central ones")
    print(f"CPU us per image: median of {rounds} epochs (range)\n")
    print("| stage | CPU us/image |\n|---|---|")
    for stage, values in cpu.items():
        print(f"| {stage} | {statistics.median(values):.0f} ({spread(values)}) |")


def decode_options(tree: str, rounds: int, compared: int) -> None:
    """CPU per image of each of DECODE_OPTIONS (a parallel map over the bytes in memory,
    `rounds` epochs each, interleaved), and how far the resized ones' pixels are from
    REFERENCES' on the first `compared` images."""
    import numpy as np
    import tensorflow as tf

    datas, _, scales, _ = jpegs(tree)

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

    cpu = interleaved_cpu(lambda option: run(option, len(datas)), DECODE_OPTIONS, rounds,
                          len(datas))
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

    if name in CROPS or name in RECORDS:
        return crop_dataset(name, path)
    if name == "keras":
        ds = tf.keras.utils.image_dataset_from_directory(
            path, image_size=SIZE, batch_size=BATCH, shuffle=False, verbose=False)
        return ds.prefetch(tf.data.AUTOTUNE)
    if name.startswith("bare"):
        return bare_dataset(path, scaled=name == "bare_scaled")
    import tfrecorder

    return tfrecorder.load(path, "train", batch_size=BATCH, image_size=SIZE, shuffle=False,
                           as_supervised=True)


def crop_dataset(name: str, path: str):
    """A --crops or --records contender's pipeline (the module doc)."""
    import tfrecorder

    if name == "load_whole":
        return tfrecorder.load(path, "train", batch_size=BATCH, image_size=SIZE,
                               shuffle=False, as_supervised=True)
    if name.startswith("records_"):
        shards = [os.path.join(path, f) for f in sorted(os.listdir(path))
                  if f.startswith("train-")]
        return crop_pipelines.bare_crops([], [], [], SIZE, BATCH, output="uint8",
                                         crop="random" if name == "records_crop" else "none",
                                         decode="scaled", records=shards)
    if name.startswith("load_rrc"):
        return tfrecorder.load(path, "train", batch_size=BATCH, image_size=SIZE,
                               augment="random_resized_crop", shuffle=False,
                               as_supervised=True, seed=0)
    if name == "load_center":
        return tfrecorder.load(path, "train", batch_size=BATCH, image_size=SIZE,
                               crop="center", shuffle=False, as_supervised=True)
    if name.startswith("model_garden"):
        return crop_pipelines.model_garden(path, SIZE, BATCH, training=name == "model_garden")
    datas, labels, _, shapes = jpegs(path)
    return crop_pipelines.bare_crops(datas, shapes, labels, SIZE, BATCH,
                                     crop="center" if "center" in name else "random",
                                     decode="window" if name.startswith("ceiling") else "whole")


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


def timed_rounds(names, inputs: dict, counts: dict, args) -> list[dict]:
    """Per round, every contender in a fresh process, back to back: name -> [(seconds,
    CPU seconds)] of its epochs."""
    return [{name: json.loads(harness.last_line_in_fresh_process(
        __file__, name, f"{inputs[name]}:{counts[name]}:{args.epochs}", args.out))
        for name in names} for _ in range(args.rounds)]


def rates(rounds: list[dict], counts: dict, name: str) -> list[float]:
    return [counts[name] / seconds for r in rounds for seconds, _ in r[name]]


def cpu_ms(rounds: list[dict], counts: dict, name: str) -> list[float]:
    return [1000 * cpu / counts[name] for r in rounds for _, cpu in r[name]]


def within_rounds(rounds, counts, name: str, reference: str) -> tuple[list, list]:
    """Per round, `name` against `reference`: images/s of the best epochs (ours /
    theirs), and CPU per image of the median epochs (theirs / ours)."""
    speed = [max(rates([r], counts, name)) / max(rates([r], counts, reference))
             for r in rounds]
    cpu = [statistics.median(cpu_ms([r], counts, reference)) /
           statistics.median(cpu_ms([r], counts, name)) for r in rounds]
    return speed, cpu


def ratio(values) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def print_setting(args, what: str) -> None:
    print(f"\nMachine: {platform.platform()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} "
          "at the end")
    print(f"{what}, batches of {BATCH} at {SIZE[0]}x{SIZE[1]}, {args.rounds} rounds of a "
          f"fresh process each, {args.epochs} epochs each\n")


def print_contenders(rounds, counts, names, describe, pixels=None) -> None:
    """The table of every contender's images/s and CPU per image over all epochs."""
    extra = " pixels |" if pixels else ""
    print(f"| contender |{extra} images/s best | images/s all epochs | CPU ms/image median "
          "| CPU ms/image all epochs |")
    print("|---|" + "---|" * (5 if pixels else 4))
    for name in names:
        cells = [describe(name)] + ([pixels(name)] if pixels else []) + [
            f"{max(rates(rounds, counts, name)):.0f}", spread(rates(rounds, counts, name)),
            f"{statistics.median(cpu_ms(rounds, counts, name)):.2f}",
            f"{min(cpu_ms(rounds, counts, name)):.2f}-"
            f"{max(cpu_ms(rounds, counts, name)):.2f}"]
        print("| " + " | ".join(cells) + " |")


def crops(args, table) -> None:
    """--crops: the training and evaluation paths (the module doc)."""
    tree = label_tree(table, os.path.join(args.out, "by_label"))
    ours = convert(tree, os.path.join(args.out, "load_as_is"))
    theirs = convert(tree, os.path.join(args.out, "tf_models"), layout="tf_models")
    paths = {name: ours if name.startswith("load") else
             theirs if name.startswith("model_garden") else tree
             for name in CROPS if name not in WRITTEN}
    counts = dict.fromkeys(paths, len(table))
    written = {}
    if args.large_images:
        large = make_crops(os.path.join(args.out, "large_images"), args.large_images,
                           sides=(2000, 3000))
        large_tree = label_tree(large, os.path.join(args.out, "large_by_label"))
        written = {name: convert(large_tree, os.path.join(args.out, name), **options)
                   for name, options in WRITTEN.items()}
        paths.update(written)
        counts.update(dict.fromkeys(written, len(large)))
    names = [name for name in paths if args.only is None or name in args.only.split(",")]
    rounds = timed_rounds(names, paths, counts, args)

    print_setting(args, f"{len(table)} JPEGs (400-800 px)" + (
        f"; {args.large_images} JPEGs of 2000-3000 px for the written-for-training rows"
        if written else ""))
    print_contenders(rounds, counts, names, lambda name: f"`{name}`: {CROPS[name][0]}",
                     pixels=lambda name: CROPS[name][1])
    print("\nWithin rounds (median, and range over rounds): CPU per image of the median "
          "epochs (theirs / ours: above 1 is less work than theirs), images/s of the best "
          "epochs (ours / theirs)\n")
    print("| ours | against | CPU | target | images/s |")
    print("|---|---|---|---|---|")
    for name, references in TARGETS.items():
        for reference, target in references.items():
            if name not in names or reference not in names:
                continue
            speed, cpu = within_rounds(rounds, counts, name, reference)
            verdict = "" if target is None else f">= {target}: " + (
                "met" if statistics.median(cpu) >= target else
                f"**missed** by {target - statistics.median(cpu):.2f}")
            print(f"| `{name}` | `{reference}` | {ratio(cpu)} | {verdict} | {ratio(speed)} |")
    if written:
        print("\n| written | convert s (wall, this machine) | shards MB |")
        print("|---|---|---|")
        for name, path in written.items():
            size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
                       if f.startswith("train-"))
            print(f"| `{name}` | {convert_seconds(path)} | {size / 1e6:.0f} |")


def records(args) -> None:
    """--records: load()'s crop and whole-image paths against bare record pipelines, on
    photos of ImageNet's size and on the 400-800 px set (the module doc)."""
    from PIL import Image

    # label -> (the photos, the folder suffix of their label tree and dataset; the 400-800
    # px set's are those of the other modes)
    sets = {"small": (make_crops(os.path.join(args.out, "small_images"), args.images,
                                 sides=SMALL_SIDES), "_small"),
            "400-800 px": (build_images(os.path.join(args.out, "images"), args.images), "")}
    names = [name for name in RECORDS if args.only is None or name in args.only.split(",")]
    print_setting(args, f"{args.images} JPEGs of each set")
    for label, (table, suffix) in sets.items():
        tree = label_tree(table, os.path.join(args.out, "by_label" + suffix))
        path = convert(tree, os.path.join(args.out, "load_as_is" + suffix))
        sides = []
        for uri in table["image_uri"]:
            with Image.open(uri) as image:
                sides.append(image.size)
        print(f"\n#### {label}: median {statistics.median(h for _, h in sides):.0f} x "
              f"{statistics.median(w for w, _ in sides):.0f} (height x width), short side "
              f"{statistics.median(min(side) for side in sides):.0f}\n")
        counts = dict.fromkeys(names, len(table))
        rounds = timed_rounds(names, dict.fromkeys(names, path), counts, args)
        print_contenders(rounds, counts, names, lambda name: f"`{name}`: {RECORDS[name]}")
        print("\n| ours | against | CPU (theirs / ours) | target | images/s |")
        print("|---|---|---|---|---|")
        for (name, reference), target in RECORD_TARGETS.items():
            if name in names and reference in names:
                speed, cpu = within_rounds(rounds, counts, name, reference)
                verdict = f">= {target}: " + (
                    "met" if statistics.median(cpu) >= target else
                    f"**missed** by {target - statistics.median(cpu):.2f}")
                print(f"| `{name}` | `{reference}` | {ratio(cpu)} | {verdict} | "
                      f"{ratio(speed)} |")


def main():
    parser = harness.parser(__doc__.splitlines()[0], images=2000, rounds=3)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per process")
    parser.add_argument("--only", help="comma-separated contenders (default: all of the mode)")
    parser.add_argument("--decode-options", type=int, metavar="IMAGES",
                        help="instead: CPU per image of each decode option, and their "
                             "pixels' differences over this many images")
    parser.add_argument("--crops", action="store_true",
                        help="instead: the training and evaluation crops (module doc)")
    parser.add_argument("--records", action="store_true",
                        help="instead: load() against bare record pipelines, on photos "
                             "of ImageNet's size and on the 400-800 px set")
    parser.add_argument("--crop-stages", action="store_true",
                        help="instead: CPU per image of a random-resized crop's parts")
    parser.add_argument("--large-images", type=int, default=1000,
                        help="with --crops: photos of 2000-3000 px for the written-for-"
                             "training rows (0: none)")
    args = parser.parse_args()
    if args.contender:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        path, expected, number = args.input.rsplit(":", 2)
        print(json.dumps(epochs(args.contender, path, int(expected), int(number))))
        return

    if args.records:
        records(args)
        return
    table = build_images(os.path.join(args.out, "images"), args.images)
    if args.crops:
        crops(args, table)
        return
    tree = label_tree(table, os.path.join(args.out, "by_label"))
    if args.crop_stages:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        crop_stages(tree, convert(tree, os.path.join(args.out, "load_as_is")), args.epochs)
        return
    if args.decode_options:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        decode_options(tree, args.epochs, args.decode_options)
        return
    paths = {"keras": tree, "bare": tree, "bare_scaled": tree,
             "load": convert(tree, os.path.join(args.out, "load_as_is")),
             "load_256": convert(tree, os.path.join(args.out, "load_256"),
                                 max_image_side=256),
             "load_224": convert(tree, os.path.join(args.out, "load_224"), image_size=SIZE)}
    names = [name for name in CONTENDERS if args.only is None or name in args.only.split(",")]
    counts = dict.fromkeys(names, len(table))
    rounds = timed_rounds(names, paths, counts, args)
    print_setting(args, f"{len(table)} JPEGs (400-800 px)")
    print_contenders(rounds, counts, names, DESCRIPTIONS.get)

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
                speed, cpu = within_rounds(rounds, counts, name, ref)
                cells += [ratio(speed), ratio(cpu)]
            print(f"| {DESCRIPTIONS[name]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

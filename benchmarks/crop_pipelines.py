"""The pipelines `bench_load.py --crops` holds `load()`'s training and evaluation crops
against: bare tf.data over JPEG bytes in memory, and Model Garden's classification parser.

Every one draws its windows from `load()`'s distribution: Inception's random-resized
crop (area 0.08-1, aspect 3/4-4/3, 10 attempts, min_object_covered the smallest area,
the whole image when every attempt fails: `tf.image.stateless_sample_distorted_bounding_box`,
as Model Garden's `random_crop_image_v2` calls its stateful twin), flipped left to right
half the time, and the evaluation crop (Model Garden's `center_crop_image_v2`: a square
of 0.875 of the short side, centred, not flipped); each resized to the model's size
with bilinear `tf.image.resize`. The windows are the same distribution, not the same
draws: a dataset holds the images in its own order, and Model Garden seeds its own op
(and, when every attempt fails, decodes its central crop instead of the whole image).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
AREA, ASPECT, ATTEMPTS, FRACTION = (0.08, 1.0), (3 / 4, 4 / 3), 10, 0.875


def window(shape, crop: str, seed=None):
    """The window (int32 [4]: y, x, height, width) of an image of `shape` (int32 [2]):
    `crop` "random" draws it with `seed`, "center" is the evaluation crop's."""
    import tensorflow as tf

    if crop == "random":
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.concat([shape, [3]], 0), tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed,
            min_object_covered=AREA[0], aspect_ratio_range=ASPECT, area_range=AREA,
            max_attempts=ATTEMPTS)
        return tf.concat([begin[:2], size[:2]], 0)
    side = FRACTION * tf.cast(tf.reduce_min(shape), tf.float32)
    offset = tf.cast((tf.cast(shape, tf.float32) - side) / 2.0, tf.int32)
    return tf.concat([offset, tf.fill([2], tf.cast(side, tf.int32))], 0)


def cropped(data, shape, seed, size: tuple[int, int], crop: str, decode: str,
            output: str):
    """One image of a crop pipeline: `crop` "random" (its window drawn with `seed`, then
    flipped half the time), "center", or "none" (the whole image, "scaled" only);
    `decode` "whole"
    (`decode_jpeg`, the window sliced out), "window" (`decode_and_crop_jpeg`, ratio 1)
    or "scaled" (the window, or the whole image, at `load()`'s DCT ratio); `output`
    "float32" (as `tf.image.resize` gives), "uint8" (rounded, as `load()`), or, to time a
    part alone, "window" or "decoded" (the decoded pixels' shape)."""
    import tensorflow as tf

    window_seed = flip_seed = None
    if crop == "none":  # the whole image, at load()'s DCT scale: load(image_size=)'s work
        image = tf.image.resize(scaled_decode(data, shape, size), size)
        return tf.cast(image + 0.5, tf.uint8) if output == "uint8" else image
    if crop == "random":
        window_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    if decode == "whole":
        image = tf.io.decode_jpeg(data, channels=3)
        if output == "decoded":
            return tf.shape(image)
        cut = window(tf.shape(image)[:2], crop, window_seed)
        image = image[cut[0]:cut[0] + cut[2], cut[1]:cut[1] + cut[3]]
    else:
        cut = window(shape, crop, window_seed)
        if output == "window":
            return cut
        image = scaled_crop_decode(data, cut, size) if decode == "scaled" else \
            tf.io.decode_and_crop_jpeg(data, cut, channels=3)
        if output == "decoded":
            return tf.shape(image)
    image = tf.image.resize(image, size)
    if output == "uint8":
        image = tf.cast(image + 0.5, tf.uint8)
    if crop == "random":
        image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    return image


def bare_crops(datas: list[bytes], shapes: list[tuple[int, int]], labels: list[int],
               size: tuple[int, int], batch: int, crop: str, decode: str,
               output: str = "float32", records: str | None = None):
    """A bare pipeline of `cropped` images: the JPEG bytes in memory, with each image's
    (height, width) beside them (as a record's features hold them), or, with `records`
    (a shard of the default layout), the same read and parsed from the shard (`output`
    "parsed": that alone); a parallel map, batch, prefetch.

    The random windows are drawn from one seed per element, a `Dataset.random` stream as
    `load()` draws them, so every pipeline here crops the same windows."""
    import tensorflow as tf

    def one(data, shape, label, seed=None):
        return cropped(data, shape, seed, size, crop, decode, output), label

    def parsed(serialized, seed=None):
        features = tf.io.parse_single_example(serialized, {
            name: tf.io.FixedLenFeature([], tf.string if name == "image" else tf.int64)
            for name in ("image", "image_height", "image_width", "label")})
        if output == "parsed":
            return features["image_height"], features["label"]
        shape = tf.cast(tf.stack([features["image_height"], features["image_width"]]),
                        tf.int32)
        return one(features["image"], shape, features["label"], seed)

    if records is not None:
        ds, function = tf.data.TFRecordDataset(records), parsed
    else:
        ds = tf.data.Dataset.from_tensor_slices((datas, tf.constant(shapes, tf.int32), labels))
        function = one
    if crop == "random":
        seeds = tf.data.Dataset.random(seed=0, rerandomize_each_iteration=True).batch(2)
        ds = tf.data.Dataset.zip((ds, seeds))
        ds = ds.map(lambda element, seed: function(*tf.nest.flatten(element), seed),
                    num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(function, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch).prefetch(tf.data.AUTOTUNE)


def model_garden(path: str, size: tuple[int, int], batch: int, training: bool):
    """Model Garden's classification input on a dataset written with layout="tf_models":
    its `Decoder` and its `Parser` (the ImageNet configs' defaults: `decode_jpeg_only`
    and `aug_crop`, so `random_crop_image_v2` / `center_crop_image_v2` decode the window
    alone; random flips in training) as its `InputReader` runs them, a parallel map
    each over `TFRecordDataset`, then batches. Its pixels are normalized float32.

    From tf-models-official's interop folder, loaded as tests/model_garden.py loads it
    (the packages whose `__init__` pulls in the training stack registered empty)."""
    import tensorflow as tf

    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from model_garden import model_garden as loaded

    mg = loaded().classification_input
    decoder = mg.Decoder()
    # num_classes only sizes multi-label targets: these labels are single ints.
    parser = mg.Parser(output_size=list(size), num_classes=1001, aug_rand_hflip=True,
                       decode_jpeg_only=True)
    files = sorted(os.path.join(path, name) for name in os.listdir(path)
                   if name.startswith("train-"))
    ds = tf.data.TFRecordDataset(files)
    ds = ds.map(decoder.decode, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(parser.parse_fn(is_training=training), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch).prefetch(tf.data.AUTOTUNE)


def scaled_decode(data, shape, size: tuple[int, int]):
    """The whole image decoded at the DCT ratio `load()` picks for it (`shape`: its
    height and width)."""
    import tensorflow as tf

    return scaled_crop_decode(data, tf.concat([[0, 0], shape], 0), size, crop=False)


def scaled_crop_decode(data, cut, size: tuple[int, int], crop: bool = True):
    """The window `cut` decoded alone at the DCT ratio `load()` picks for it: the largest
    of 1, 2, 4, 8 at which the window still covers `size`."""
    import tensorflow as tf

    short = tf.minimum(cut[2] * size[1], cut[3] * size[0])
    scale = tf.reduce_sum(tf.cast(tf.stack([short >= r * size[0] * size[1] for r in (2, 4, 8)]),
                                  tf.int32))

    def at(ratio):
        if not crop:
            return lambda: tf.io.decode_jpeg(data, channels=3, ratio=ratio)
        return lambda: tf.io.decode_and_crop_jpeg(
            data, tf.stack([cut[0] // ratio, cut[1] // ratio, tf.maximum(cut[2] // ratio, 1),
                            tf.maximum(cut[3] // ratio, 1)]), channels=3, ratio=ratio)

    return tf.switch_case(scale, [at(r) for r in (1, 2, 4, 8)])


# --crop-stages: what a random-resized crop's pipeline is made of; bare_crops' arguments
# (decode, output, from the records), and "load" for load() itself.
STAGES = {
    "seeds and window alone": ("window", "window", False),
    "records read and parsed (image, size, label), nothing decoded": ("window", "parsed", True),
    "full decode alone (the decode-then-crop pipelines')": ("whole", "decoded", False),
    "crop-decode alone, ratio 1 (the ceiling's)": ("window", "decoded", False),
    "crop-decode alone at load()'s DCT ratio": ("scaled", "decoded", False),
    "bare decode-then-crop, resize, flip (float32)": ("whole", "float32", False),
    "ceiling: crop-decode (ratio 1), resize, flip (float32)": ("window", "float32", False),
    "ceiling rounded to uint8": ("window", "uint8", False),
    "ceiling rounded to uint8, from the records": ("window", "uint8", True),
    "the same at load()'s DCT ratio": ("scaled", "uint8", True),
    "load(augment=\"random_resized_crop\")": "load",
}

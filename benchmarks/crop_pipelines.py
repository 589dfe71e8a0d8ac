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


def bare_crops(datas: list[bytes], shapes: list[tuple[int, int]], labels: list[int],
               size: tuple[int, int], batch: int, crop: str, in_decode: bool):
    """The bare pipeline of a crop (`crop`: "random" or "center"): the JPEG bytes in
    memory, with each image's (height, width) beside them (as a record's features hold
    them), a parallel map, batch, prefetch; float32 pixels, as `tf.image.resize` gives.

    `in_decode` False decodes the whole image (`decode_jpeg`) and slices the window out
    of it; True decodes the window alone (`decode_and_crop_jpeg`, ratio 1): the ceiling
    of a crop made in the decode without DCT scaling. The random windows are drawn from
    one seed per element (as `load()` draws them, a `Dataset.random` stream), so both
    ways crop the same windows."""
    import tensorflow as tf

    def decoded(data, shape, label, seed=None):
        if seed is not None:
            window_seed, flip_seed = tf.unstack(
                tf.random.experimental.stateless_split(seed, 2))
        if in_decode:
            cut = window(shape, crop, None if seed is None else window_seed)
            image = tf.io.decode_and_crop_jpeg(data, cut, channels=3)
        else:
            image = tf.io.decode_jpeg(data, channels=3)
            cut = window(tf.shape(image)[:2], crop, None if seed is None else window_seed)
            image = image[cut[0]:cut[0] + cut[2], cut[1]:cut[1] + cut[3]]
        image = tf.image.resize(image, size)
        if seed is not None:
            image = tf.image.stateless_random_flip_left_right(image, flip_seed)
        return image, label

    ds = tf.data.Dataset.from_tensor_slices((datas, tf.constant(shapes, tf.int32), labels))
    if crop == "random":
        seeds = tf.data.Dataset.random(seed=0, rerandomize_each_iteration=True).batch(2)
        ds = tf.data.Dataset.zip((ds, seeds)).map(
            lambda element, seed: decoded(*element, seed),
            num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(decoded, num_parallel_calls=tf.data.AUTOTUNE)
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

"""`load()`: a dataset folder -> tuned `tf.data` pipelines, ready for `model.fit`.

Everything comes from the manifest: shard files, record counts (so datasets know their
length), the parsing spec, compression, whether images are raw pixels, and the size of
every image. That last fact keeps decoding cheap: when images are resized on load, JPEGs
are decoded at a reduced DCT scale (1/2, 1/4 or 1/8) whenever the result is still at
least as large as the target, which skips most of the work of a full decode and does the
bulk of the downscaling as an average over pixels.

TensorFlow is imported here, and only here (and by inspect/verify through these
helpers), never by the writer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from tfrecorder import fs
from tfrecorder.dataset import read_manifest

SPLITS = ("train", "validation", "test")
AUGMENT_PRESETS = ("basic",)
DEFAULT_SHUFFLE_BUFFER = 1000  # records; shards are already shuffled at write time


def shard_files(dataset_dir: str, manifest: dict, split: str) -> list[str]:
    """The paths of a split's shards, as the manifest lists them."""
    if split not in manifest["splits"]:
        raise ValueError(
            f"the dataset in {dataset_dir!r} has no {split!r} split; it has "
            f"{sorted(manifest['splits'])}."
        )
    return [fs.join(dataset_dir, shard["file"]) for shard in manifest["splits"][split]["shards"]]


def feature_spec(manifest: dict) -> dict:
    """The `tf.io.parse_example` spec of the dataset's records, from the manifest."""
    import tensorflow as tf

    dtypes = {"string": tf.string, "int64": tf.int64, "float32": tf.float32}
    return {
        name: tf.io.FixedLenFeature(feature["shape"], dtypes[feature["dtype"]])
        for name, feature in manifest["features"].items()
    }


def decode_image(features: dict, channels: int = 0):
    """The record's image as a uint8 [H, W, C] tensor: exactly the source's pixels.

    JPEGs are decoded with the accurate IDCT, which matches Pillow (TensorFlow's default
    fast IDCT is off by a few levels). channels=0 keeps each image's own channels; 1, 3
    or 4 converts.
    """
    import tensorflow as tf

    image_format = features["image_format"]

    def jpeg():
        image = tf.io.decode_jpeg(features["image"], channels=channels if channels != 4 else 3,
                                  dct_method="INTEGER_ACCURATE")
        return _convert_channels(image, channels) if channels == 4 else image

    def png():
        return tf.io.decode_png(features["image"], channels=channels)

    def raw():
        pixels = tf.io.decode_raw(tf.io.decode_base64(features["image"]), tf.uint8)
        shape = tf.stack([features["image_height"], features["image_width"],
                          features["image_channels"]])
        return _convert_channels(tf.reshape(pixels, tf.cast(shape, tf.int32)), channels)

    return tf.cond(tf.equal(image_format, "jpeg"), jpeg,
                   lambda: tf.cond(tf.equal(image_format, "raw"), raw, png))


def load(
    path: str | os.PathLike,
    split: str | None = None,
    *,
    batch_size: int | None = None,
    image_size: tuple[int, int] | None = None,
    channels: int = 3,
    shuffle: bool | None = None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    seed: int | None = 0,
    repeat: bool = False,
    augment: Callable | str | None = None,
    cache: bool | str = False,
    as_supervised: bool = False,
    drop_remainder: bool = False,
):
    """Loads a dataset written by tfrecorder as `tf.data` pipelines.

    Args:
        path: the dataset folder (local or gs://).
        split: "train", "validation" or "test" for one dataset; None for a dict of all.
        batch_size: batch the elements; with mixed image sizes, give `image_size` too.
        image_size: (height, width) to resize images to, so that batches stack.
        channels: 3 (default) converts every image to RGB; 1 or 4 likewise; 0 keeps
            each image's own channels.
        shuffle: shuffle shards and records; default: only the train split.
        shuffle_buffer: records held for shuffling (shards are shuffled when written).
        seed: seeds shuffling and augmentation; None for a fresh order every run.
        repeat: repeat forever (for `steps_per_epoch`-style training).
        augment: a function image -> image, or "basic" (random flips, crops and
            brightness); applied to the train split only.
        cache: True caches decoded (and resized) elements in memory; a path caches
            them in files there.
        as_supervised: elements are (image, label) pairs instead of feature dicts.
        drop_remainder: drop a last, smaller batch.

    Returns:
        A `tf.data.Dataset` for `split`, or a dict of them by split name. Each knows its
        length (`len(ds)`), so Keras shows steps per epoch.
    """
    path = os.fspath(path)
    manifest = read_manifest(path)
    _check_options(manifest, image_size, channels, augment, as_supervised)
    splits = [split] if split is not None else [s for s in SPLITS if s in manifest["splits"]]
    datasets = {
        name: _pipeline(
            path, manifest, name, batch_size=batch_size, image_size=image_size,
            channels=channels, shuffle=(name == "train") if shuffle is None else shuffle,
            shuffle_buffer=shuffle_buffer, seed=seed, repeat=repeat,
            augment=augment if name == "train" else None, cache=cache,
            as_supervised=as_supervised, drop_remainder=drop_remainder,
        )
        for name in splits
    }
    return datasets[split] if split is not None else datasets


def _check_options(manifest, image_size, channels, augment, as_supervised) -> None:
    if image_size is not None and (
        len(image_size) != 2 or not all(isinstance(v, int) and v > 0 for v in image_size)
    ):
        raise ValueError(f"image_size must be (height, width) > 0, not {image_size!r}")
    if channels not in (0, 1, 3, 4):
        raise ValueError(f"channels must be 0, 1, 3 or 4, not {channels!r}")
    if isinstance(augment, str) and augment not in AUGMENT_PRESETS:
        raise ValueError(f"augment must be a function or one of {AUGMENT_PRESETS}")
    if as_supervised and "label" not in manifest["features"]:
        raise ValueError("as_supervised needs labels, and this dataset has none.")


def _pipeline(path, manifest, split, *, batch_size, image_size, channels, shuffle,
              shuffle_buffer, seed, repeat, augment, cache, as_supervised, drop_remainder):
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    # A seed promises a reproducible order; without one, parallel stages may reorder.
    ordered = seed is not None or not shuffle
    files = shard_files(path, manifest, split)
    num_records = manifest["splits"][split]["num_records"]
    compression = "GZIP" if manifest["compression"] == "gzip" else ""
    spec = feature_spec(manifest)

    ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
        cycle_length=min(len(files), 16), num_parallel_calls=autotune,
        deterministic=ordered,
    )
    # The count is known from the manifest, so len(ds) works through every later step.
    ds = ds.apply(tf.data.experimental.assert_cardinality(num_records))
    if shuffle and not cache:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)

    transform = None
    if augment is not None:
        transform = _basic_augmentation(seed) if augment == "basic" else augment
    if batch_size and image_size and not cache:
        # Fixed-shape batches: parse a whole batch of records in one vectorized op, then
        # decode its images; much less per-record overhead than one parse per record.
        if repeat:
            ds = ds.repeat()
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        ds = ds.map(lambda batch: _decoded_batch(batch, spec, image_size, channels, transform),
                    num_parallel_calls=autotune, deterministic=ordered)
    else:
        def parse(serialized):
            features = tf.io.parse_single_example(serialized, spec)
            features["image"] = _decoded(features, image_size, channels)
            return features

        ds = ds.map(parse, num_parallel_calls=autotune, deterministic=ordered)
        if cache:
            ds = ds.cache("" if cache is True else os.fspath(cache))
            if shuffle:
                ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        if transform is not None:
            ds = ds.map(lambda f: {**f, "image": transform(f["image"])},
                        num_parallel_calls=autotune, deterministic=ordered)
        if repeat:
            ds = ds.repeat()
        if batch_size:
            ds = ds.batch(batch_size, drop_remainder=drop_remainder,
                          num_parallel_calls=autotune, deterministic=ordered)
    if as_supervised:
        ds = ds.map(lambda f: (f["image"], f["label"]))
    return ds.prefetch(autotune)


_IMAGE_FEATURES = ("image", "image_format", "image_height", "image_width", "image_channels")


def _decoded_batch(serialized, spec: dict, image_size, channels: int, transform):
    """Parses a batch of records and decodes (and resizes) their images."""
    import tensorflow as tf

    features = tf.io.parse_example(serialized, spec)

    def one(image_features):
        image = _decoded(image_features, image_size, channels)
        return transform(image) if transform is not None else image

    features["image"] = tf.map_fn(
        one, {name: features[name] for name in _IMAGE_FEATURES},
        fn_output_signature=tf.TensorSpec((*image_size, channels or None), tf.uint8))
    return features


def _decoded(features: dict, image_size: Sequence[int] | None, channels: int):
    """Decodes (and resizes) one record's image, cheaply where the manifest allows."""
    import tensorflow as tf

    if image_size is None:
        image = decode_image(features, channels)
        return tf.ensure_shape(image, [None, None, channels or None])
    height, width = image_size

    def scaled_jpeg():
        # The largest DCT scale whose output still covers the target size.
        short = tf.minimum(features["image_height"] * width, features["image_width"] * height)
        target = tf.cast(height * width, tf.int64)
        index = tf.reduce_sum(tf.cast(
            tf.stack([short >= 2 * target, short >= 4 * target, short >= 8 * target]),
            tf.int32))
        branches = [
            lambda r=r: tf.io.decode_jpeg(features["image"], ratio=r,
                                          channels=channels if channels != 4 else 3)
            for r in (1, 2, 4, 8)
        ]
        image = tf.switch_case(index, branches)
        return _convert_channels(image, channels) if channels == 4 else image

    def resized():
        image = tf.cond(tf.equal(features["image_format"], "jpeg"), scaled_jpeg,
                        lambda: decode_image(features, channels))  # PNG and raw: exact
        # Bilinear, like Keras: the scaled JPEG decode has already averaged away most of
        # any reduction. Bilinear output of uint8 stays in [0, 255]: +0.5 and a cast round.
        return tf.cast(tf.image.resize(image, image_size) + 0.5, tf.uint8)

    # Images written at the target size (image_size= on convert) need no resize at all.
    same_size = tf.logical_and(tf.equal(features["image_height"], height),
                               tf.equal(features["image_width"], width))
    image = tf.cond(same_size, lambda: decode_image(features, channels), resized)
    return tf.ensure_shape(image, [height, width, channels or None])


def _convert_channels(image, channels: int):
    """Converts an image of 1 (L), 2 (LA), 3 (RGB) or 4 (RGBA) channels to `channels`."""
    import tensorflow as tf

    if channels == 0:
        return image
    have = tf.shape(image)[-1]
    grey = have <= 2
    rgb = tf.cond(grey, lambda: tf.image.grayscale_to_rgb(image[..., :1]),
                  lambda: image[..., :3])
    if channels == 3:
        return rgb
    if channels == 1:
        return tf.cond(grey, lambda: image[..., :1], lambda: tf.image.rgb_to_grayscale(rgb))
    opaque = tf.fill(tf.concat([tf.shape(image)[:2], [1]], 0), tf.constant(255, tf.uint8))
    alpha = tf.cond(tf.equal(have % 2, 0), lambda: image[..., -1:], lambda: opaque)
    return tf.concat([rgb, alpha], -1)


def _basic_augmentation(seed: int | None) -> Callable:
    """Random horizontal flips, crops (to 90% and back) and brightness changes."""
    import tensorflow as tf

    generator = tf.random.Generator.from_seed(seed) if seed is not None else \
        tf.random.Generator.from_non_deterministic_state()

    def augment(image):
        seeds = generator.make_seeds(3)
        image = tf.image.stateless_random_flip_left_right(image, seeds[:, 0])
        shape = tf.shape(image)
        crop = tf.stack([tf.cast(tf.cast(shape[0], tf.float32) * 0.9, tf.int32),
                         tf.cast(tf.cast(shape[1], tf.float32) * 0.9, tf.int32), shape[2]])
        cropped = tf.image.stateless_random_crop(image, crop, seeds[:, 1])
        image = tf.saturate_cast(tf.round(tf.image.resize(cropped, shape[:2])), tf.uint8)
        image = tf.image.stateless_random_brightness(image, 0.2, seeds[:, 2])
        return tf.ensure_shape(image, image.shape)

    return augment


def convert_and_load(source, output_dir, *, split: str | None = None,
                     load_options: dict | None = None, **convert_options):
    """Converts `source` (see `tfrecorder.convert`) and loads the result (see `load`),
    as TFRecorder's function of the same name did."""
    from tfrecorder.convert import convert

    convert(source, output_dir, **convert_options)
    return load(output_dir, split, **(load_options or {}))

"""`load()`: a dataset folder -> tuned `tf.data` pipelines, ready for `model.fit`.

Everything comes from the manifest: shard files, record counts (so datasets know their
length), the parsing spec (every feature's dtype and shape, and its role: image, label,
split or input), compression, whether images are raw pixels, and the size of every image.
Datasets without images are parsed a batch at a time, as there is nothing to decode.
Records with images are parsed and decoded one at a time in a parallel map, then
batched: the decoding spreads over the cores an image at a time.

This module assembles the pipeline; its stages live apart: the options and the manifest
are checked by `tfrecorder.read.load_checks`, the shards' records come from
`tfrecorder.read.shards`, images and their masks are decoded (and resized, or cut to a
window that `tfrecorder.read.crops` chooses) by `tfrecorder.read.decoding`, and augmented
by `tfrecorder.read.augmentation`.

Records of either layout (`tfrecorder.format.layouts`) are parsed with the manifest's spec and
read through the layout's read form (`Layout.canonical`), so everything after parsing
sees the same canonical names: `image`, `objects/bbox`, `segmentation_mask`, ... A
detection or segmentation record's annotations are decoded with its image and move with
it: resized with it, flipped with it by augmentation.

TensorFlow is imported by the functions here, and by inspect/verify through the shared
modules, never by the writer; always through `_tensorflow.tensorflow()`, which keeps its
start-up lines quiet.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from tfrecorder._tensorflow import check_installed, tensorflow
from tfrecorder.errors import OptionError
from tfrecorder.format.layouts import (
    AREA,
    BBOX,
    DIFFICULT,
    IS_CROWD,
    KEYPOINT_VISIBILITY,
    KEYPOINTS,
    MASK,
    NUM_KEYPOINTS,
    OBJECT_LABEL,
    SEGMENTATION_MASK,
    TRUNCATED,
    VIEW,
    Layout,
    layout_of,
)
from tfrecorder.format.manifest import (
    LABEL,
    NO_LABEL,
    SPLITS,
    Manifest,
    Split,
    read_manifest,
)
from tfrecorder.read.augmentation import AUGMENT_PRESETS, augmentation, seeded
from tfrecorder.read.clips import ClipOptions, clip_batched, clip_decoder, clip_supervised
from tfrecorder.read.crops import CenterCrop, RandomResizedCrop, center_window, random_window
from tfrecorder.read.decoding import decoded_record, largest_dct_scale
from tfrecorder.read.info import DatasetInfo
from tfrecorder.read.load_checks import (
    check_batchable,
    check_options,
    check_shards,
    checked_values,
    warn_of_large_images,
)
from tfrecorder.read.shards import shard_reader
from tfrecorder.storage import fs

logger = logging.getLogger(__name__)

NUM_OBJECTS = "objects/num"  # with max_boxes: how many of the padded objects are real
# What padding fills a detection record's objects with, up to max_boxes: -1 for boxes,
# classes and areas, as Keras (`MaxNumBoundingBoxes`, KerasCV's `to_dense`) and Model
# Garden (`pad_groundtruths_to_fixed_size`) pad them, so their losses skip such rows;
# 0 for is_crowd (as Model Garden) and for masks (no pixel); keypoints at -1 like boxes,
# of visibility 0 (not labelled: what every keypoint loss skips) and none labelled;
# Pascal VOC's difficult and truncated 0 and view "", as no object.
OBJECT_PADDING = {BBOX: -1, OBJECT_LABEL: -1, AREA: -1, IS_CROWD: 0, MASK: 0,
                  KEYPOINTS: -1, KEYPOINT_VISIBILITY: 0, NUM_KEYPOINTS: 0,
                  DIFFICULT: 0, TRUNCATED: 0, VIEW: ""}
# Features of pixels: batched densely, so all of a batch must share their size.
_PIXELS = ("image", SEGMENTATION_MASK)
# What an (image, label) pair of a classification dataset is decoded from.
_SUPERVISED_FEATURES = ("image", "image_format", "image_height", "image_width",
                        "image_channels", LABEL)
DEFAULT_SHUFFLE_BUFFER = 1000  # records; shards are already shuffled at write time


def load(
    path: str | os.PathLike,
    split: str | None = None,
    *,
    batch_size: int | None = None,
    image_size: tuple[int, int] | None = None,
    channels: int | None = None,
    shuffle: bool | None = None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    seed: int | None = 0,
    repeat: bool = False,
    augment: Callable | str | RandomResizedCrop | None = None,
    crop: str | CenterCrop | None = None,
    cache: bool | str = False,
    as_supervised: bool = False,
    multi_hot: bool = False,
    max_boxes: int | None = None,
    drop_remainder: bool = False,
    with_info: bool = False,
    host: tuple[int, int] | None = None,
    num_frames: int | None = None,
    frame_stride: int = 1,
    num_samples: int | None = None,
):
    """Loads a dataset written by tfrecorder as `tf.data` pipelines.

    Elements are dicts of every feature, by tfrecorder's names whichever layout the
    records were written in; lists (e.g. boxes, as [n, 4] tensors) come in batches as
    RaggedTensors. `image_size`, `channels` and `augment` are for datasets with images
    only.

    A detection dataset's elements also hold its objects: `objects/bbox` float32 [n, 4]
    as (ymin, xmin, ymax, xmax), fractions of the image's size; `objects/label` int64
    [n], ids into the manifest's label vocabulary (from 0, in both layouts); where the
    records have them, `objects/area` (pixels of the image as loaded), `objects/is_crowd`
    and `objects/mask`, uint8 [n, height, width] of 0s and 1s. A segmentation dataset's
    hold `segmentation_mask`, uint8 [height, width, 1] of class ids. Annotations follow
    their image through `image_size` and `augment`.

    A video dataset's elements are clips (`tfrecorder.read.clips` has the details):
    `video` uint8 [num_frames, height, width, 3], its frames sampled as DeepMind's DMVR
    samples them: a random window of `num_frames` frames `frame_stride` apart for the
    train split (seeded by `seed`, a new one every epoch), the centre window for the
    others, a clip shorter than the window looping; only those frames are decoded.
    With it `timestamps` int64 [num_frames] (microseconds), `label` (-1: none) and
    `data_path`; object tracking adds each sampled frame's boxes, `objects/bbox`
    [num_frames, B, 4] with `objects/label`, `objects/track` (padded with -1 to the
    clip's most boxes on a frame, or to `max_boxes`), `objects/num` and
    `objects/is_annotated` [num_frames]; action recognition adds `segments/start`,
    `segments/end` and `segments/label`. An audio dataset's elements hold `audio`
    float32 [N, channels] (never mixed down), `sample_rate`, `label` and `data_path`.

    Args:
        path: the dataset folder: local, or a gs://, s3:// (or other fsspec) URI.
        split: "train", "validation" or "test" for one dataset; None for a dict of all.
        batch_size: batch the elements; with mixed image sizes, give `image_size` too.
        image_size: (height, width) to resize images to, so that batches stack;
            `image_height`, `image_width`, masks and objects' areas follow.
        channels: 3 (the default) converts every image to RGB; 1 or 4 likewise; 0 keeps
            each image's own channels.
        shuffle: shuffle shards and records; default: only the train split.
        shuffle_buffer: records held for shuffling (shards are shuffled when written).
        seed: seeds shuffling and augmentation; None for a fresh order every run. As
            with TensorFlow's own seeded ops, the global seed (`tf.random.set_seed`,
            `keras.utils.set_random_seed`) takes part: set it too, or leave it unset.
        repeat: repeat forever (for `steps_per_epoch`-style training).
        augment: for the train split only: "random_resized_crop" (Inception's crop of
            8-100% of the area, aspect 3/4-4/3, decoded alone and resized to
            `image_size`, and flips; `RandomResizedCrop(...)` sets its ranges; boxes
            are clipped, and objects mostly outside the crop left out), "basic" (random
            flips, crops to 90% and back, and brightness), or a function image ->
            image. For detection and segmentation datasets the function gets the
            element's dict and returns it, so that what moves the pixels moves the
            annotations too; "basic" flips boxes and masks with their image and changes
            brightness, and does not crop.
        crop: "center": the evaluation crop, of the splits not augmented by
            "random_resized_crop": the central 0.875 of the short side (in
            `image_size`'s shape) decoded alone and resized to `image_size`, which
            keeps the aspect ratio; `CenterCrop(fraction)` sets the fraction. Without
            it, `image_size` resizes the whole image.
        cache: True caches decoded (and resized) elements in memory, or the records as
            read for a dataset without images; a local folder caches them in files
            there (worth it for a dataset in a bucket, read again every epoch).
        as_supervised: elements are (image, label) pairs instead of feature dicts; for a
            dataset without images, (dict of the input features, label). Records stored
            without a label (rows whose label was blank) are left out, with a logged
            warning, and `len(ds)` counts the rest; as dicts their `label` is -1 (text
            "") and no class's. For detection,
            (image, {"boxes": objects/bbox, "classes": objects/label}), what KerasHub's
            object detectors fit on (`bounding_box_format="rel_yxyx"`); for
            segmentation, (image, segmentation_mask).
        multi_hot: for multi-label datasets: each label is a float32 vector of
            `num_classes` with 1 for the record's classes (for binary crossentropy),
            instead of the list of its class ids.
        max_boxes: for detection datasets: pad each record's objects to this many (or
            keep its first this many), so that batches stack densely, as TPUs and most
            detection losses want: boxes, classes and areas are padded with -1 (as Keras
            and Model Garden pad them), is_crowd, masks and Pascal VOC's difficult and
            truncated with 0 (its view with ""), and `objects/num` says how many are
            real. By default batches hold RaggedTensors.
        drop_remainder: drop a last, smaller batch.
        with_info: also return the dataset's `DatasetInfo` (as `tfrecorder.info`).
        host: (index, count): read only this host's share, for `count` hosts (or
            workers) reading together, each with its own index. With a shard count that
            splits evenly (`convert(..., hosts=count)` writes such), a host reads its
            own contiguous block of shards, and the shares differ by at most a record
            a shard; otherwise every host reads every shard and keeps every count-th
            record (a logged warning says so). Either way tf.distribute's auto-sharding
            is turned off for the dataset, which is sharded already; without `host` it
            shards by record (DATA), which suits any shard count.
        num_frames: for video datasets: frames a clip gives (None: all of them, which
            cannot batch); `image_size` resizes them.
        frame_stride: for video datasets: frames between two sampled ones (1: each).
        num_samples: for audio datasets: samples a clip gives, a random crop for train
            and the centre otherwise, a shorter clip padded with zeros (None: all).

    Returns:
        A `tf.data.Dataset` for `split`, or a dict of them by split name ("train"; 2.0's
        "TRAIN" finds it too). Each knows its length (`len(ds)`), so Keras shows steps
        per epoch. With `with_info`, a pair (that, the `DatasetInfo`).
    """
    image_size = checked_values(
        batch_size=batch_size, image_size=image_size, channels=channels, shuffle=shuffle,
        shuffle_buffer=shuffle_buffer, seed=seed, repeat=repeat, augment=augment,
        crop=crop, cache=cache, as_supervised=as_supervised, multi_hot=multi_hot,
        max_boxes=max_boxes, drop_remainder=drop_remainder, with_info=with_info, host=host,
        num_frames=num_frames, frame_stride=frame_stride, num_samples=num_samples)
    check_installed("tfrecorder.load()", "tfrecorder.open_split() reads the same records "
                    "without it, for PyTorch, Grain or NumPy.")
    augment = AUGMENT_PRESETS.get(augment, augment) if isinstance(augment, str) else augment
    crop = CenterCrop() if crop == "center" else crop
    manifest = read_manifest(path)
    check_options(manifest, image_size, channels, augment, crop, as_supervised, multi_hot,
                  max_boxes, num_frames, frame_stride, num_samples, batch_size)
    clip_options = None
    if manifest.media is not None:
        clip_options = ClipOptions(
            num_frames, frame_stride, num_samples, image_size, max_boxes,
            manifest.labels.num_classes if multi_hot else None)
    splits = [split] if split is not None else [s for s in SPLITS if s in manifest.splits]
    check_shards(path, manifest, splits)
    if batch_size is not None and image_size is None:
        check_batchable(manifest, splits, channels)
    if image_size is not None:
        warn_of_large_images(manifest, splits, image_size)
    datasets = {
        name: _pipeline(
            path, manifest, name, batch_size=batch_size, image_size=image_size,
            channels=3 if channels is None else channels,
            shuffle=(name == "train") if shuffle is None else shuffle,
            shuffle_buffer=shuffle_buffer, seed=seed, repeat=repeat,
            augment=augment if name == "train" else None,
            crop=augment if name == "train" and isinstance(augment, RandomResizedCrop)
            else crop, cache=cache,
            as_supervised=as_supervised, multi_hot=multi_hot, max_boxes=max_boxes,
            drop_remainder=drop_remainder, host=host, clip_options=clip_options,
        )
        for name in splits
    }
    loaded = datasets[split] if split is not None else datasets
    return (loaded, DatasetInfo(path, manifest)) if with_info else loaded


def _pipeline(path, manifest, split, *, batch_size, image_size, channels, shuffle,
              shuffle_buffer, seed, repeat, augment, crop, cache, as_supervised, multi_hot,
              max_boxes, drop_remainder, host, clip_options=None):
    """One split's pipeline. `augment` is this split's (None but for train), and `crop`
    the window its images are decoded in (a `RandomResizedCrop`, a `CenterCrop`, or
    None for the whole image). `clip_options` reads a video or audio dataset's clips."""
    tf = tensorflow()

    autotune = tf.data.AUTOTUNE
    # A seed promises a reproducible order; without one, parallel stages may reorder.
    ordered = seed is not None or not shuffle
    shards = manifest.split(split, path).shards
    by_record = None  # (index, count): every host reads every shard, keeps its records
    if host is not None:
        mine = manifest.splits[split].host_shards(*host)
        if mine is None:
            by_record = host
            logger.warning(
                "the %s split's %d shards do not split evenly across %d hosts: every host "
                "reads them all and keeps one record in %d. Write the dataset with "
                "hosts=%d to read only this host's shards.", split, len(shards), host[1],
                host[1], host[1])
        else:
            shards = mine
    files = [fs.join(path, shard.file) for shard in shards]
    num_records = sum(shard.num_records for shard in shards)
    spec = manifest.parse_spec()
    layout = layout_of(manifest)
    num_classes = manifest.labels.num_classes if multi_hot else None
    has_images = manifest.has_images
    # Detection and segmentation records carry annotations of their pixels, which are
    # decoded with the image and move with it: one record at a time.
    annotated = manifest.task != "classification"
    # The formats the writer stored in this split (older manifests do not say: any).
    stats = manifest.statistics.get(Split(split))
    formats = frozenset(stats.image_formats) if stats and stats.image_formats else None
    largest_height = largest_width = None  # not known: any
    if stats and stats.image_height:
        largest_height, largest_width = stats.image_height.max, stats.image_width.max
    largest_scale = largest_dct_scale(largest_height, largest_width, image_size)
    if as_supervised and has_images and not annotated:
        spec = _supervised_spec(spec, layout)

    ds = tf.data.Dataset.from_tensor_slices(files)
    if shuffle and by_record is None:  # hosts keeping every n-th record read one order
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(
        shard_reader(fs.is_remote(path), manifest.compression),
        cycle_length=max(1, min(len(files), 16)), num_parallel_calls=autotune,
        deterministic=ordered or by_record is not None,
    )
    if by_record is not None:
        ds = ds.shard(by_record[1], by_record[0])
        num_records = len(range(by_record[0], num_records, by_record[1]))
    # tf.distribute's default (AUTO) shards by file: a split of fewer shards than
    # workers fails on some workers and leaves others empty, and unequal shares stall
    # synchronous training at an epoch's end. Unless sharded here already (`host`), every
    # worker keeps its own records (DATA): equal shares, whatever the shard count.
    policy = tf.data.experimental.AutoShardPolicy
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        policy.OFF if host is not None else policy.DATA)
    ds = ds.with_options(options)
    # The count is known from the manifest, so len(ds) works through every later step.
    ds = ds.apply(tf.data.experimental.assert_cardinality(num_records))
    unlabeled = manifest.unlabeled(split) if as_supervised else 0
    if unlabeled:  # an (image, label) pair needs a label: such records are left out
        logger.warning("%d of %d records of the %s split have no label (their rows' label "
                       "was blank); as_supervised leaves them out", unlabeled,
                       manifest.splits[split].num_records, split)
        ds = ds.filter(_labelled(manifest))
        if host is None:  # a host's share of them is not counted
            ds = ds.apply(tf.data.experimental.assert_cardinality(num_records - unlabeled))
    if shuffle and not cache:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if clip_options is not None:
        return _clips(ds, manifest, split, clip_options, shuffle=shuffle,
                      shuffle_buffer=shuffle_buffer, seed=seed, ordered=ordered, cache=cache,
                      repeat=repeat, batch_size=batch_size, drop_remainder=drop_remainder,
                      as_supervised=as_supervised)

    # `transform` augments an element (a dict), given a seed of its own.
    transform = None
    if augment is not None:
        transform = augmentation(augment, annotated, layout.keypoint_names)
    if not has_images:
        # Nothing to decode: cache the records as read, and parse a whole batch at once.
        if cache:
            ds = _cached(ds, split, cache, shuffle, shuffle_buffer, seed)
        if repeat:
            ds = ds.repeat()
        if batch_size:
            ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        ds = ds.map(lambda serialized: _parsed(serialized, spec, layout, num_classes),
                    num_parallel_calls=autotune, deterministic=ordered)
    else:
        def decoded(serialized, window_seed=None):
            features = _parsed(serialized, spec, layout, num_classes)
            if isinstance(crop, RandomResizedCrop):
                window = random_window(features, crop, window_seed)
                return decoded_record(features, image_size, channels, formats, window,
                                      crop.min_visible, largest_scale)
            window = center_window(features, crop, image_size) if crop is not None else None
            return decoded_record(features, image_size, channels, formats, window,
                                  largest_scale=largest_scale)

        if isinstance(crop, RandomResizedCrop):
            # A new window every epoch, in the decode: what is cached is the records.
            if cache:
                ds = _cached(ds, split, cache, shuffle, shuffle_buffer, seed)

            def cropped(serialized, seed):
                window_seed, augment_seed = tf.unstack(
                    tf.random.experimental.stateless_split(seed, 2))
                return transform(decoded(serialized, window_seed), augment_seed)

            ds = seeded(ds, seed).map(cropped, num_parallel_calls=autotune,
                                      deterministic=ordered)
        else:
            ds = ds.map(decoded, num_parallel_calls=autotune, deterministic=ordered)
            if cache:
                ds = _cached(ds, split, cache, shuffle, shuffle_buffer, seed)
            if transform is not None:
                ds = seeded(ds, seed).map(transform, num_parallel_calls=autotune,
                                          deterministic=ordered)
        if transform is not None and not isinstance(ds.element_spec, dict):
            raise OptionError(
                "augment gets and returns the element's dict for a detection or "
                "segmentation dataset (its boxes and masks must move with the pixels), "
                f"but returned {ds.element_spec}. Return the dict, e.g. "
                "{**features, \"image\": ...} for a change that moves no pixel.",
                option="augment")
        if max_boxes is not None:
            ds = ds.map(lambda f: _padded_objects(f, max_boxes))
        if repeat:
            ds = ds.repeat()
        if batch_size:
            ds = _batched(ds, batch_size, drop_remainder)
    if as_supervised:
        ds = ds.map(_supervised(manifest))
    return ds.prefetch(autotune)


def _clips(ds, manifest: Manifest, split: str, options: ClipOptions, *, shuffle: bool,
           shuffle_buffer: int, seed: int | None, ordered: bool, cache, repeat: bool,
           batch_size: int | None, drop_remainder: bool, as_supervised: bool):
    """A video or audio split's clips (`clips`): the records cached as read (a new window
    is drawn every epoch), each decoded with a seed of its own for the train split's
    random windows, the centre window for the others."""
    tf = tensorflow()

    if cache:
        ds = _cached(ds, split, cache, shuffle, shuffle_buffer, seed)
    random = split == "train"
    decode = clip_decoder(manifest, options, random)
    if random:
        ds = seeded(ds, seed)
    ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=ordered)
    if repeat:
        ds = ds.repeat()
    if batch_size:
        ds = clip_batched(ds, batch_size, drop_remainder)
    if as_supervised:
        ds = ds.map(clip_supervised(manifest))
    return ds.prefetch(tf.data.AUTOTUNE)


def _labelled(manifest: Manifest) -> Callable:
    """Whether a serialized record holds a label, from that feature alone."""
    tf = tensorflow()

    key = layout_of(manifest).key(LABEL)
    spec = {key: manifest.features[key].parse_spec(key, optional=True)}
    return lambda serialized: tf.io.parse_single_example(serialized, spec)[key] != \
        NO_LABEL["int64"]


def _supervised(manifest: Manifest) -> Callable:
    """The (input, target) pair `as_supervised` makes of an element."""
    if manifest.task == "detection":
        return lambda f: (f["image"], {"boxes": f[BBOX], "classes": f[OBJECT_LABEL]})
    if manifest.task == "segmentation":
        return lambda f: (f["image"], f[SEGMENTATION_MASK])
    if manifest.has_images:
        return lambda f: (f["image"], f[LABEL])
    inputs = manifest.inputs
    return lambda f: ({name: f[name] for name in inputs}, f[LABEL])


def _cached(ds, split: str, cache: bool | str, shuffle: bool, shuffle_buffer: int,
            seed: int | None):
    """Caches `ds` in memory (True) or in files in the folder `cache`, one set per split
    (sharing one would serve one split's cache for another); shuffles after the cache,
    so that every epoch still has its own order."""
    if cache is True:
        ds = ds.cache()
    else:
        fs.makedirs(os.fspath(cache))
        ds = ds.cache(fs.join(os.fspath(cache), split))
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return ds


def _supervised_spec(spec: dict, layout: Layout) -> dict:
    """The part of a classification dataset's parsing spec that an (image, label) pair
    is made of: the image, what decodes it, and the label. The other features (the
    file's name and URI, the split, passed-through columns) would be parsed and batched
    for every record only to be dropped by `_supervised`."""
    keys = {layout.key(name) for name in _SUPERVISED_FEATURES}
    return {key: value for key, value in spec.items() if key in keys}


def _parsed(serialized, spec: dict, layout: Layout, num_classes: int | None) -> dict:
    """Parses one record, or a batch of them, into features by canonical name (the
    layout's read form); with `num_classes`, multi-label labels become multi-hot vectors
    of that length."""
    tf = tensorflow()

    parse = tf.io.parse_example if serialized.shape.rank else tf.io.parse_single_example
    features = layout.canonical(parse(serialized, spec))
    if num_classes is not None:
        # Per record, also for a batch's RaggedTensor of labels; ids out of range are
        # dropped.
        multi_hot = tf.math.bincount(
            features[LABEL], minlength=num_classes, maxlength=num_classes,
            binary_output=True, dtype=tf.float32, axis=-1)
        features[LABEL] = tf.ensure_shape(multi_hot, serialized.shape + [num_classes])
    return features


def _batched(ds, batch_size: int, drop_remainder: bool):
    """Batches parsed records. Lists (features whose first dimension has any length: a
    record's boxes, its objects' masks) come out as RaggedTensors, as
    `tf.io.parse_example` returns them; images and segmentation masks are stacked
    densely (`ragged_batch` would make images of unknown size ragged too), so must share
    a size."""
    tf = tensorflow()

    lists = [name for name, spec in ds.element_spec.items()
             if name not in _PIXELS and spec.shape.rank and spec.shape[0] is None]
    if lists:
        # A list as a RaggedTensor of one row stacks with lists of other lengths; the
        # extra dimension is merged away after batching.
        ds = ds.map(lambda f: {**f, **{name: tf.RaggedTensor.from_tensor(f[name][None])
                                       for name in lists}})
    # One thread batches: a parallel batch cost 15-60 us of CPU an image more (threads
    # handing over elements), for nothing while decoding is the bottleneck.
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if lists:
        ds = ds.map(lambda f: {**f, **{name: f[name].merge_dims(1, 2) for name in lists}})
    return ds


def _padded_objects(features: dict, max_boxes: int) -> dict:
    """A detection element's objects padded (or cut) to `max_boxes` (`OBJECT_PADDING`
    says with what), and `objects/num`, how many are real."""
    tf = tensorflow()

    count = tf.shape(features[BBOX], out_type=tf.int64)[0]
    found = dict(features)
    for name, fill in OBJECT_PADDING.items():
        if name in features:
            value = features[name][:max_boxes]
            padding = [[0, max_boxes - tf.shape(value)[0]]] + [[0, 0]] * (value.shape.rank - 1)
            found[name] = tf.ensure_shape(
                tf.pad(value, padding, constant_values=tf.constant(fill, value.dtype)),
                [max_boxes, *value.shape[1:]])
    found[NUM_OBJECTS] = tf.minimum(count, max_boxes)
    return found

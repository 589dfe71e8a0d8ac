"""What `load()` checks before it builds a pipeline: option values no dataset could take,
options this dataset cannot take, shards that are gone, images that cannot batch, and
images stored far larger than they are loaded at.

Apart from `load`, which assembles the pipeline, because every check here runs when
`load()` is called, on the options and the manifest alone: TensorFlow would refuse the
same mistakes mid-epoch, far from the option, or not at all.
"""

from __future__ import annotations

import logging
import os

from tfrecorder.errors import Option, OptionError, VerificationError
from tfrecorder.format.layouts import layout_of
from tfrecorder.format.manifest import LABEL, Manifest, Split
from tfrecorder.option_checks import checked_bool, checked_image_size, checked_int, is_int, require
from tfrecorder.read.augmentation import AUGMENT_PRESETS
from tfrecorder.read.crops import CenterCrop, RandomResizedCrop
from tfrecorder.storage import fs
from tfrecorder.wording import count

logger = logging.getLogger(__name__)


def checked_values(*, batch_size, image_size, channels, shuffle, shuffle_buffer, seed, repeat,
                  augment, crop, cache, as_supervised, multi_hot, max_boxes, drop_remainder,
                  with_info, host, num_frames=None, frame_stride=1,
                  num_samples=None) -> tuple[int, int] | None:
    """Refuses, before any file is read, a value no dataset could take, with the
    `OptionError` that `convert` raises for it: inside the pipeline the same mistake
    surfaces later, far from the option (`'bool' object is not callable` from a
    `tf.function`). Returns `image_size` as (height, width) ints."""
    checked_int("batch_size", batch_size, "a positive int or None", minimum=1)
    checked_int("shuffle_buffer", shuffle_buffer, "a positive int (records)", minimum=1,
                optional=False)
    checked_int("seed", seed, "an int or None", minimum=-(2**63), maximum=2**63 - 1)
    checked_int("max_boxes", max_boxes, "a positive int or None", minimum=1)
    checked_int("num_frames", num_frames, "a positive int (frames a clip) or None", minimum=1)
    checked_int("frame_stride", frame_stride, "a positive int (1: consecutive frames)",
                minimum=1, optional=False)
    checked_int("num_samples", num_samples, "a positive int (audio samples a clip) or None",
                minimum=1)
    require("channels", channels, channels is None or (is_int(channels) and channels in (
        0, 1, 3, 4)), "0, 1, 3, 4 or None")
    checked_bool("shuffle", shuffle, optional=True)
    for name, value in [("repeat", repeat), ("as_supervised", as_supervised),
                        ("multi_hot", multi_hot), ("drop_remainder", drop_remainder),
                        ("with_info", with_info)]:
        checked_bool(name, value)
    require("augment", augment, augment is None or callable(augment) or isinstance(
        augment, RandomResizedCrop) or (isinstance(augment, str) and augment in AUGMENT_PRESETS),
        f"{', '.join(map(repr, AUGMENT_PRESETS))}, a RandomResizedCrop, a function "
        "(image -> image), or None")
    require("crop", crop, crop is None or crop == "center" or isinstance(crop, CenterCrop),
            "'center', a CenterCrop, or None")
    for name, value in [("augment", augment), ("crop", crop)]:
        if image_size is None and value is not None and not callable(value) and \
                value != "basic":
            raise OptionError(
                f"{name}={value!r} resizes its crops to image_size, which is not given. "
                "Pass image_size=(height, width) too, e.g. image_size=(224, 224).",
                option=name)
    require("cache", cache, isinstance(cache, (bool, str, os.PathLike)),
            "True, False or a local folder")
    require("host", host, host is None or (
        isinstance(host, (tuple, list)) and len(host) == 2 and all(map(is_int, host))
        and 0 <= host[0] < host[1]), "(index, count) with 0 <= index < count, or None")
    return checked_image_size(image_size)


def check_options(manifest: Manifest, image_size, channels, augment, crop, as_supervised,
                   multi_hot, max_boxes, num_frames=None, frame_stride=1,
                   num_samples=None, batch_size=None) -> None:
    """Refuses options this dataset cannot take (images, labels, its task, its media)."""
    clip_options = {"num_frames": num_frames, "frame_stride": frame_stride,
                    "num_samples": num_samples}
    if manifest.media is not None:
        check_clip_options(manifest, image_size=image_size, channels=channels,
                           augment=augment, crop=crop, multi_hot=multi_hot,
                           max_boxes=max_boxes, batch_size=batch_size, **clip_options)
        return
    given = [name for name, value in clip_options.items()
             if value is not None and (name != "frame_stride" or value != 1)]
    if given:
        raise OptionError(
            f"{given[0]} samples video or audio clips, and this dataset holds "
            f"{'images' if manifest.has_images else 'table rows'}. Leave {given[0]} out.",
            option=given[0])
    features = manifest.features
    labelled = layout_of(manifest).key(LABEL) in features
    if not manifest.has_images:
        given = [name for name, value in
                 [("image_size", image_size), ("channels", channels), ("augment", augment),
                  ("crop", crop)] if value is not None]
        if given:
            raise OptionError(
                f"this dataset has no images, so {' and '.join(given)} cannot apply. Leave "
                f"{'it' if len(given) == 1 else 'them'} out.", option=given[0])
        if as_supervised and not manifest.inputs:
            raise OptionError(
                "as_supervised pairs the input features with the label, and this dataset "
                "has neither images nor input features. Load feature dicts instead.",
                option="as_supervised")
    if as_supervised and not labelled and manifest.task == "classification":
        raise OptionError("as_supervised needs labels, and this dataset has none.",
                          option="as_supervised")
    if multi_hot and manifest.task == "detection":
        raise OptionError(
            "multi_hot is for multi-label classification; in a detection dataset "
            "objects/label gives each box its class id. Leave multi_hot out.",
            option="multi_hot")
    if multi_hot and not labelled:
        raise OptionError("multi_hot needs labels, and this dataset has none.",
                          option="multi_hot")
    if max_boxes is not None and manifest.task != "detection":
        raise OptionError(f"max_boxes pads the objects of a detection dataset, and this "
                          f"one is a {manifest.task} dataset. Leave max_boxes out.",
                          option="max_boxes")
    if multi_hot and not (manifest.labels and manifest.labels.multi_label):
        raise OptionError(
            "multi_hot is for multi-label datasets, and this one has a single label per "
            "record: its label is already a class id. Leave multi_hot out (or use "
            "tf.one_hot on the label).", option="multi_hot")


# Options of `load` for images only, and why a clip dataset takes none of them.
_IMAGE_ONLY = {
    "augment": "augments images; a clip's frames are sampled in time (num_frames, "
               "frame_stride: a random window for train) and resized by image_size",
    "crop": "crops images; a clip's frames are resized whole by image_size",
}


def check_clip_options(manifest: Manifest, *, image_size, channels, augment, crop,
                       multi_hot, max_boxes, batch_size, num_frames, frame_stride,
                       num_samples) -> None:
    """Refuses, for a video or audio dataset, options that do not apply to its clips,
    each naming the option: image options on clips, frame options on audio, sample
    options on video, and batches of clips of any length."""
    from tfrecorder.read.clips import AUDIO, TRACKING, kind_of

    kind = kind_of(manifest)
    for name, value in (("augment", augment), ("crop", crop)):
        if value is not None:
            raise OptionError(f"{name} {_IMAGE_ONLY[name]}. Leave {name} out for this "
                              f"{kind} dataset.", option=name)
    if channels not in (None, 3):
        raise OptionError(f"a clip's frames are RGB (channels=3), so channels={channels!r} "
                          "cannot apply. Leave channels out.", option="channels")
    if kind == AUDIO:
        given = [name for name, value in (("image_size", image_size),
                                          ("num_frames", num_frames)) if value is not None]
        given += ["frame_stride"] if frame_stride != 1 else []
        if given:
            raise OptionError(f"{given[0]} applies to video frames, and this dataset holds "
                              "audio. Leave it out (num_samples crops audio clips).",
                              option=given[0])
        if batch_size is not None and num_samples is None:
            raise OptionError(
                "audio clips differ in length, so batches of them need num_samples=N "
                "(a random crop of N samples for train, the centre one otherwise; shorter "
                "clips padded with zeros).", option="num_samples")
    else:
        if num_samples is not None:
            raise OptionError("num_samples crops audio clips, and this dataset holds video. "
                              "Use num_frames for frames.", option="num_samples")
        if batch_size is not None and num_frames is None:
            raise OptionError(
                "video clips differ in length, so batches of them need num_frames=T (a "
                "random window of T frames for train, the centre one otherwise; shorter "
                "clips loop).", option="num_frames")
    if max_boxes is not None and manifest.task != TRACKING:
        raise OptionError(f"max_boxes pads the boxes of an object tracking dataset, and "
                          f"this one is a {manifest.task} dataset. Leave max_boxes out.",
                          option="max_boxes")
    if multi_hot and not (manifest.labels and manifest.labels.multi_label):
        raise OptionError(
            "multi_hot is for multi-label datasets, and this one has a single label per "
            "clip: its label is already a class id. Leave multi_hot out.", option="multi_hot")


def check_shards(path: str, manifest: Manifest, splits: list[str]) -> None:
    """Refuses, when called, a dataset whose manifest lists shards that are gone, from one
    listing of its folder: TensorFlow would fail only when it reached them, mid-epoch,
    with a bare NotFoundError."""
    present = set(fs.list_dir(path))
    missing = [shard.file for name in splits for shard in manifest.split(name, path).shards
               if shard.file not in present]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more"
                                           if len(missing) > 3 else "")
        raise VerificationError(
            f"the dataset in {path!r} lacks {count(len(missing), 'shard')} that its "
            f"manifest lists: {shown}. Restore the files from a copy, or write the dataset "
            "again with ", Option("overwrite", True), ".")


def check_batchable(manifest: Manifest, splits: list[str], channels: int | None) -> None:
    """Refuses, when called, batches of images of several sizes (or, with `channels=0`,
    channel counts), which TensorFlow would only refuse mid-epoch ("Cannot batch tensors
    with different shapes"). The manifest's statistics say; older manifests have none."""
    for name in splits:
        stats = manifest.statistics.get(Split(name))
        if stats is None or stats.image_height is None:
            continue
        height, width = stats.image_height, stats.image_width
        if height.min != height.max or width.min != width.max:
            raise OptionError(
                f"the {name} split's images differ in size (heights {height.min:g} to "
                f"{height.max:g}, widths {width.min:g} to {width.max:g}), so batches of "
                "them cannot stack. Pass image_size=(height, width) to resize them, e.g. "
                f"image_size=({round(height.median)}, {round(width.median)}), the median.",
                option="image_size")
        if channels == 0 and len(stats.image_channels) > 1:
            raise OptionError(
                f"the {name} split's images have {sorted(stats.image_channels)} channels, "
                "so with channels=0 batches of them cannot stack. Pass channels=3 (or 1).",
                option="channels")


# Stored images whose short side is this many times image_size's longer side are "far
# larger" than what is loaded: warned of, as most of their decode is thrown away.
LARGE_IMAGE_FACTOR = 4


def warn_of_large_images(manifest: Manifest, splits: list[str],
                          image_size: tuple[int, int]) -> None:
    """Warns, once per call, when the splits' images are stored far larger than the
    `image_size` they are loaded at (by the manifest's medians), naming `max_image_side`
    and the side that serves this size: twice the side the central crop needs
    (image_size / 0.875), which keeps a DCT scale of 1/2 for every crop that needs no
    more."""
    side = max(image_size)
    large = {}
    for name in splits:
        stats = manifest.statistics.get(Split(name))
        if stats is not None and stats.image_height is not None and min(
                stats.image_height.median, stats.image_width.median) >= \
                LARGE_IMAGE_FACTOR * side:
            large[name] = (stats.image_height.median, stats.image_width.median)
    if not large:
        return
    sizes = ", ".join(f"{name} {height:.0f}x{width:.0f}"
                      for name, (height, width) in large.items())
    suggested = 2 * round(side / 0.875)
    logger.warning(
        "the stored images are over %d times larger than the %dx%d they are loaded at "
        "(median height x width: %s): every epoch decodes all their pixels (DCT "
        "scaling saves only part of it). Write the dataset for training with "
        "max_image_side=%d (--max-image-side %d) to read it several times faster; see "
        "\"Written for training\" in docs/reading.md.", LARGE_IMAGE_FACTOR, *image_size,
        sizes, suggested, suggested)

"""Crops that `load()` makes in the decode: the random-resized crop of training and the
central crop of evaluation, as windows of the stored image, and what a window does to a
detection or segmentation record's annotations.

A window is (y, x, height, width) in the stored image's pixels, chosen from the record's
`image_height` / `image_width` before any pixel is decoded, so that a JPEG is decoded
only there (`decoding.decoded_record`). Apart from the decoding because these are the
rules of which pixels a model sees (Inception's crop distribution, the 0.875 central
crop), and apart from `augmentation` because a crop is not applied to decoded pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tfrecorder._tensorflow import tensorflow
from tfrecorder.errors import OptionError
from tfrecorder.format import layouts
from tfrecorder.format.layouts import (
    AREA,
    BBOX,
    KEYPOINT_VISIBILITY,
    KEYPOINTS,
    MASK,
    NUM_KEYPOINTS,
    OBJECT_LABEL,
)

# A record's per-object features: what leaving an object out takes it out of (Pascal
# VOC's difficult, truncated and view too, or they would describe other objects).
OBJECT_FEATURES = (OBJECT_LABEL, *layouts.OBJECT_FEATURES)


@dataclass(frozen=True)
class RandomResizedCrop:
    """Inception's random-resized crop, the training augmentation of Model Garden's,
    timm's and torchvision's image classifiers: a window of a random fraction of the
    image's `area` and a random `aspect_ratio` (width / height, uniform in log scale),
    resized to `load()`'s `image_size`, and flipped left to right half the time.

    The window is drawn by `tf.image.stateless_sample_distorted_bounding_box`, as Model
    Garden draws it (10 attempts, then the whole image). For detection and segmentation
    records, boxes are clipped to the window, objects with less than `min_visible` of
    their box inside it are left out (0.3, as the Object Detection API's crops), and
    masks and keypoints are cropped with the image.
    """

    area: tuple[float, float] = (0.08, 1.0)
    aspect_ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip: bool = True
    min_visible: float = 0.3

    def __post_init__(self):
        _check_range("area", self.area, upper=1.0)
        _check_range("aspect_ratio", self.aspect_ratio, upper=math.inf)
        if not isinstance(self.flip, bool):
            raise OptionError(f"RandomResizedCrop's flip must be True or False, not "
                              f"{self.flip!r}.", option="augment")
        if not (isinstance(self.min_visible, (int, float)) and 0 <= self.min_visible <= 1):
            raise OptionError(f"RandomResizedCrop's min_visible must be a fraction from 0 "
                              f"to 1, not {self.min_visible!r}.", option="augment")


@dataclass(frozen=True)
class CenterCrop:
    """The evaluation crop of Model Garden's and timm's classifiers: the central window
    of `image_size`'s shape whose short side is `fraction` of the image's (224 / 256 =
    0.875: the short side resized to image_size / 0.875, and the center kept), resized to
    `load()`'s `image_size`."""

    fraction: float = 0.875

    def __post_init__(self):
        if not (isinstance(self.fraction, (int, float)) and 0 < self.fraction <= 1):
            raise OptionError(f"CenterCrop's fraction must be above 0 and at most 1, not "
                              f"{self.fraction!r}.", option="crop")


def _check_range(name: str, value, upper: float) -> None:
    """Refuses a (low, high) range that is not one, or leaves (0, upper]."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, (int, float)) for v in value)
            and 0 < value[0] <= value[1] <= upper):
        bound = "" if upper == math.inf else f" <= {upper:g}"
        raise OptionError(f"RandomResizedCrop's {name} must be (low, high) with "
                          f"0 < low <= high{bound}, not {value!r}.", option="augment")


def stored_size(features: dict):
    """The stored image's (height, width), int32 [2]: what windows are cut from."""
    tf = tensorflow()

    return tf.cast(tf.stack([features["image_height"], features["image_width"]]), tf.int32)


def random_window(features: dict, crop: RandomResizedCrop, seed):
    """A window drawn from Inception's distribution (int32 [4]: y, x, height, width), by
    the stateless op with this `seed` ([2] ints): the same seed, the same window."""
    tf = tensorflow()

    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.concat([stored_size(features), [1]], 0),
        tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed,
        min_object_covered=crop.area[0], aspect_ratio_range=crop.aspect_ratio,
        area_range=crop.area, max_attempts=10)
    return tf.concat([begin[:2], size[:2]], 0)


def center_window(features: dict, crop: CenterCrop, image_size: Sequence[int]):
    """The central window of `image_size`'s shape, `crop.fraction` of the largest such
    window in the image (int32 [4]: y, x, height, width). For a square `image_size`,
    Model Garden's `center_crop_image_v2` window: the side is fraction x the short side
    (rounded down), the offset half the rest (rounded down)."""
    tf = tensorflow()

    height, width = image_size
    stored = tf.cast(stored_size(features), tf.int64)
    # The largest window of image_size's shape is (span / width, span / height): integers
    # divided once, in float64, so that a square window's side is exactly the short side
    # and fraction x side rounds down as Model Garden's does (a float32 ratio of the
    # sides, reordered by graph optimizations, can fall a pixel short).
    span = tf.cast(tf.minimum(stored[0] * width, stored[1] * height), tf.float64)
    size = crop.fraction * span / tf.constant([width, height], tf.float64)
    offset = tf.cast((tf.cast(stored, tf.float64) - size) / 2.0, tf.int32)
    return tf.concat([offset, tf.maximum(tf.cast(size, tf.int32), 1)], 0)


def objects_in_window(features: dict, window, min_visible: float, stored
                      ) -> tuple[dict, object]:
    """A detection record's objects seen through `window`: boxes and keypoints in the
    window's fractions, boxes clipped to it, and objects with less than `min_visible` of
    their box inside left out of every per-object feature (`stored`: the image's
    (height, width) as stored). Keypoints outside the window become not labelled
    (visibility 0, at (0, 0), as COCO stores those). Areas shrink in
    proportion to the box's visible part: an estimate, as an object's pixels are not
    stored (the caller rescales them to the image as loaded). Returns the features and
    which objects are kept (bool [n]): instance masks are cut by the caller, which
    decodes them."""
    tf = tensorflow()

    found = dict(features)
    stored = tf.cast(stored, tf.float32)  # the record's own sizes, before any resize
    start = tf.cast(window[:2], tf.float32) / stored  # the window in the image's fractions
    extent = tf.cast(window[2:], tf.float32) / stored

    def in_window(points):  # [..., 2] (y, x) fractions of the image -> of the window
        return (points - start) / extent

    boxes = features[BBOX]
    moved = tf.concat([in_window(boxes[:, :2]), in_window(boxes[:, 2:])], -1)
    clipped = tf.clip_by_value(moved, 0.0, 1.0)

    def area(b):
        return tf.maximum(b[:, 2] - b[:, 0], 0.0) * tf.maximum(b[:, 3] - b[:, 1], 0.0)

    whole, inside = area(moved), area(clipped)
    # A box of no area (a point) is kept while it is inside the window. A box exactly
    # `min_visible` inside is kept: the slack, a hundred-thousandth of the box, is above
    # float32's rounding of the fractions, which would otherwise decide such ties.
    keep = tf.where(whole > 0, (inside > 0) & (inside >= (min_visible - 1e-5) * whole),
                    tf.reduce_all(moved == clipped, -1))
    found[BBOX] = clipped
    if AREA in features:
        found[AREA] = features[AREA] * tf.math.divide_no_nan(inside, whole)
    if KEYPOINTS in features:
        points = in_window(features[KEYPOINTS])
        seen = tf.reduce_all((points >= 0) & (points <= 1), -1)
        if KEYPOINT_VISIBILITY in features:
            seen = seen & (features[KEYPOINT_VISIBILITY] > 0)
            found[KEYPOINT_VISIBILITY] = tf.where(
                seen, features[KEYPOINT_VISIBILITY],
                tf.zeros_like(features[KEYPOINT_VISIBILITY]))
            if NUM_KEYPOINTS in features:
                found[NUM_KEYPOINTS] = tf.reduce_sum(
                    tf.cast(seen, features[NUM_KEYPOINTS].dtype), -1)
        found[KEYPOINTS] = tf.where(seen[..., None], points, tf.zeros_like(points))
    for name in OBJECT_FEATURES:
        if name in found and name != MASK:
            found[name] = tf.boolean_mask(found[name], keep)
    return found, keep

"""Augmentation of loaded elements with TensorFlow: the presets ("basic", and the flips of
"random_resized_crop", whose crop is made in the decode by `crops`), for an image and
for a detection or segmentation element, whose boxes, keypoints and masks must move
with its pixels.

Random numbers come from a seed per element (`seeded`), drawn in the order of the
records, so that the same `seed` gives the same augmentation of each record however
many threads decode and augment in parallel (a shared `tf.random.Generator` would hand
its numbers to whichever element asks first).

Apart from `load()`, which applies it to the train split after decoding, so that a new
augmentation is one function here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tfrecorder._tensorflow import tensorflow
from tfrecorder.format.keypoints import flip_order
from tfrecorder.format.layouts import BBOX, KEYPOINT_VISIBILITY, KEYPOINTS, MASK, SEGMENTATION_MASK
from tfrecorder.read.crops import RandomResizedCrop

AUGMENT_PRESETS = {"basic": "basic", "random_resized_crop": RandomResizedCrop()}


def seeded(ds, seed: int | None):
    """`ds`'s elements paired with a seed each (int64 [2], for TensorFlow's stateless
    random ops): the same for the same `seed`, and new every epoch (a fresh stream every
    run for seed=None)."""
    tf = tensorflow()

    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return tf.data.Dataset.zip((ds, seeds))


def augmentation(augment: Callable | str | RandomResizedCrop, annotated: bool,
                 keypoint_names: Sequence[str] | None = None) -> Callable:
    """The augmentation of an element: a function (features, seed) -> features.

    A function of the user's gets the image (or, for a detection or segmentation
    element, the whole element, which it must return). "basic" flips the image left to
    right, with its boxes, keypoints (of these names) and masks, and changes its
    brightness; for an image alone, it also crops to 90% and back (cutting objects would
    take clipping boxes and dropping objects: `RandomResizedCrop` does that, in the
    decode). A `RandomResizedCrop` flips here, its crop being made already."""
    tf = tensorflow()

    if callable(augment) and annotated:
        return lambda features, seed: augment(features)  # `load` checks it returns a dict
    if callable(augment):
        return lambda features, seed: {**features, "image": augment(features["image"])}
    if isinstance(augment, RandomResizedCrop):
        if not augment.flip:
            return lambda features, seed: features
        return lambda features, seed: _maybe_flipped(features, seed, keypoint_names)

    def basic(features, seed):
        seeds = tf.random.experimental.stateless_split(seed, 3)
        if annotated:
            features = _maybe_flipped(features, seeds[0], keypoint_names)
            image = features["image"]
        else:
            image = _cropped_and_back(
                tf.image.stateless_random_flip_left_right(features["image"], seeds[0]),
                seeds[1])
        image = tf.image.stateless_random_brightness(image, 0.2, seeds[2])
        return {**features, "image": tf.ensure_shape(image, features["image"].shape)}

    return basic


def _cropped_and_back(image, seed):
    """A random 90% of the image, resized back to its size."""
    tf = tensorflow()

    shape = tf.shape(image)
    crop = tf.stack([tf.cast(tf.cast(shape[0], tf.float32) * 0.9, tf.int32),
                     tf.cast(tf.cast(shape[1], tf.float32) * 0.9, tf.int32), shape[2]])
    cropped = tf.image.stateless_random_crop(image, crop, seed)
    return tf.saturate_cast(tf.round(tf.image.resize(cropped, shape[:2])), tf.uint8)


def _maybe_flipped(features: dict, seed, keypoint_names: Sequence[str] | None) -> dict:
    """The element flipped left to right half the time, by `seed`: its image, its boxes
    (xmin' = 1 - xmax, xmax' = 1 - xmin), its keypoints (x' = 1 - x, and each left one
    trading places with its right one, `keypoints.flip_order`) and its instance and
    segmentation masks.

    Pixels are reversed under a `cond` of their own and coordinates chosen by a `where`,
    not the whole element under one `cond`: that passes every feature through a
    function call, which cost 0.03 ms of CPU an image more (a `where` of pixels, or a
    `gather` of their columns, costs more still: 0.25-0.7 ms; docs/performance.md).
    """
    tf = tensorflow()

    flip = tf.random.stateless_uniform([], seed) < 0.5
    found = dict(features)
    found["image"] = _columns_reversed(features["image"], flip, axis=-2)
    if BBOX in features:
        ymin, xmin, ymax, xmax = tf.unstack(features[BBOX], num=4, axis=-1)
        found[BBOX] = tf.where(flip, tf.stack([ymin, 1 - xmax, ymax, 1 - xmin], axis=-1),
                               features[BBOX])
    if KEYPOINTS in features:
        found.update(_flipped_keypoints(features, keypoint_names, flip))
    if MASK in features:
        found[MASK] = _columns_reversed(features[MASK], flip, axis=-1)
    if SEGMENTATION_MASK in features:
        found[SEGMENTATION_MASK] = _columns_reversed(features[SEGMENTATION_MASK], flip,
                                                     axis=-2)
    return found


def _columns_reversed(pixels, flip, axis: int):
    """`pixels` with the columns of `axis` in reverse order where `flip`, else as they are."""
    tf = tensorflow()

    return tf.cond(flip, lambda: tf.reverse(pixels, [axis]), lambda: pixels)


def _flipped_keypoints(features: dict, names: Sequence[str] | None, flip) -> dict:
    """Keypoints [n, K, 2] (and their visibility [n, K]) of an image flipped left to
    right where `flip`. Keypoints not labelled (visibility 0, stored at (0, 0) as COCO
    writes them) keep their place: they are not in the image."""
    tf = tensorflow()

    keypoints = features[KEYPOINTS]
    count = keypoints.shape[-2]
    order = tf.where(flip, tf.constant(flip_order(names, count)), tf.range(count))
    moved = tf.gather(keypoints, order, axis=-2)
    y, x = tf.unstack(moved, num=2, axis=-1)
    found = {}
    labelled = tf.ones_like(x, tf.bool)
    if KEYPOINT_VISIBILITY in features:
        visibility = tf.gather(features[KEYPOINT_VISIBILITY], order, axis=-1)
        found[KEYPOINT_VISIBILITY] = visibility
        labelled = visibility > 0
    found[KEYPOINTS] = tf.stack([y, tf.where(flip & labelled, 1 - x, x)], axis=-1)
    return found

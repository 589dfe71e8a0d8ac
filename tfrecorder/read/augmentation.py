"""Augmentation of loaded elements with TensorFlow: the "basic" preset for an image, and
for a detection or segmentation element, whose boxes, keypoints and masks must move
with its pixels.

Apart from `load()`, which applies it to the train split after decoding, so that a new
augmentation is one function here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tfrecorder._tensorflow import tensorflow
from tfrecorder.format.keypoints import flip_order
from tfrecorder.format.layouts import BBOX, KEYPOINT_VISIBILITY, KEYPOINTS, MASK, SEGMENTATION_MASK

AUGMENT_PRESETS = ("basic",)


def basic_augmentation(seed: int | None) -> Callable:
    """Random horizontal flips, crops (to 90% and back) and brightness changes."""
    tf = tensorflow()

    generator = _generator(seed)

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


def _generator(seed: int | None):
    """The random numbers of augmentation: seeded, or fresh every run."""
    tf = tensorflow()

    return tf.random.Generator.from_seed(seed) if seed is not None else \
        tf.random.Generator.from_non_deterministic_state()


def annotated_augmentation(augment: Callable | str, seed: int | None,
                           keypoint_names: Sequence[str] | None = None) -> Callable:
    """The augmentation of a detection or segmentation element (a dict -> a dict), so that
    whatever moves the pixels moves their annotations too: "basic" flips the image with
    its boxes, keypoints (of these names) and masks and changes its brightness (no crop:
    cutting objects would take clipping boxes, dropping objects and redrawing their
    areas); a function gets the whole element and must return it."""
    tf = tensorflow()

    if augment != "basic":
        return augment  # `_pipeline` checks that it returns a dict
    generator = _generator(seed)

    def basic(features):
        seeds = generator.make_seeds(2)
        flip = tf.random.stateless_uniform([], seeds[:, 0]) < 0.5
        features = tf.cond(flip, lambda: _flipped_left_right(features, keypoint_names),
                           lambda: dict(features))
        image = tf.image.stateless_random_brightness(features["image"], 0.2, seeds[:, 1])
        features["image"] = tf.ensure_shape(image, features["image"].shape)
        return features

    return basic


def _flipped_left_right(features: dict, keypoint_names: Sequence[str] | None = None
                        ) -> dict:
    """An element flipped left to right: its image, its boxes (xmin' = 1 - xmax,
    xmax' = 1 - xmin), its keypoints (x' = 1 - x, and each left one trading places with
    its right one, `keypoints.flip_order`) and its instance and segmentation masks."""
    tf = tensorflow()

    found = dict(features)
    found["image"] = tf.reverse(features["image"], axis=[-2])
    if BBOX in features:
        ymin, xmin, ymax, xmax = tf.unstack(features[BBOX], num=4, axis=-1)
        found[BBOX] = tf.stack([ymin, 1 - xmax, ymax, 1 - xmin], axis=-1)
    if KEYPOINTS in features:
        found.update(_flipped_keypoints(features, keypoint_names))
    if MASK in features:
        found[MASK] = tf.reverse(features[MASK], axis=[-1])
    if SEGMENTATION_MASK in features:
        found[SEGMENTATION_MASK] = tf.reverse(features[SEGMENTATION_MASK], axis=[-2])
    return found


def _flipped_keypoints(features: dict, names: Sequence[str] | None) -> dict:
    """Keypoints [n, K, 2] (and their visibility [n, K]) of an image flipped left to
    right. Keypoints not labelled (visibility 0, stored at (0, 0) as COCO writes them)
    keep their place: they are not in the image."""
    tf = tensorflow()

    keypoints = features[KEYPOINTS]
    order = flip_order(names, keypoints.shape[-2])
    moved = tf.gather(keypoints, order, axis=-2)
    y, x = tf.unstack(moved, num=2, axis=-1)
    found = {}
    if KEYPOINT_VISIBILITY in features:
        visibility = tf.gather(features[KEYPOINT_VISIBILITY], order, axis=-1)
        found[KEYPOINT_VISIBILITY] = visibility
        x = tf.where(visibility > 0, 1 - x, x)
    else:
        x = 1 - x
    found[KEYPOINTS] = tf.stack([y, x], axis=-1)
    return found

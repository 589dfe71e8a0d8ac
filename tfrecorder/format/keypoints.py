"""Keypoints of a detection record's objects (COCO's `person_keypoints_*.json`): their
names and which of them trade places when the image is flipped left to right.

Shared by the sources (which give the names), the plan (which writes them into the
manifest, on the `objects/keypoints` feature), the layouts (the `tf_models` layout stores
them per object in `image/object/keypoint/text`, as the Object Detection API's
`create_coco_tf_record.py` does) and `load` (whose flip swaps each left keypoint with its
right one). Light: no TensorFlow, no pandas.
"""

from __future__ import annotations

from collections.abc import Sequence

# COCO's 17 person keypoints, in the order of its `person` category's `keypoints`: the
# list the Object Detection API writes as every object's `image/object/keypoint/text`.
COCO_KEYPOINT_NAMES = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")
_SIDES = (("left_", "right_"), ("left ", "right "), ("l_", "r_"))


def default_names(count: int) -> tuple[str, ...] | None:
    """The names of `count` keypoints a source gives without names: COCO's for 17 (the
    Object Detection API assumes them for any keypoints), else None (unknown)."""
    return COCO_KEYPOINT_NAMES if count == len(COCO_KEYPOINT_NAMES) else None


def flip_pairs(names: Sequence[str]) -> list[tuple[int, int]]:
    """The (left, right) index pairs that a left-right flip swaps: keypoints named alike
    but for a "left_"/"right_" prefix (any case). COCO's: (1, 2), (3, 4), ... (15, 16)."""
    index = {name.lower(): i for i, name in enumerate(names)}
    found = []
    for i, name in enumerate(names):
        lower = name.lower()
        for left, right in _SIDES:
            if lower.startswith(left) and right + lower[len(left):] in index:
                found.append((i, index[right + lower[len(left):]]))
                break
    return found


def flip_order(names: Sequence[str] | None, count: int) -> list[int]:
    """Keypoint i of a flipped object is keypoint order[i] of the object as stored: the
    identity but for `flip_pairs`, swapped (no names: nothing is known to swap)."""
    order = list(range(count))
    for left, right in flip_pairs(names or ()):
        order[left], order[right] = right, left
    return order

"""COCO keypoints (`person_keypoints_*.json`): an annotation's `keypoints` [x1, y1, v1,
x2, y2, v2, ...] in pixels and `num_keypoints`, and a category's `keypoints` names, as
the objects' features the COCO reader hands to `detection.Objects.of`.

Values follow the Object Detection API's `create_coco_tf_record.py` (`create_tf_example`
with a keypoint annotation per object): x / image width and y / image height, unclipped;
visibility as written (0 not labelled, 1 labelled but hidden, 2 visible); `num_keypoints`
as written. An object without keypoints (an annotation of another category, or none in
the file) has K keypoints at (0, 0) of visibility 0 and num_keypoints 0, as that script
writes an annotation missing from its keypoint file, so that every object has K.
Coordinates are kept [y, x], TensorFlow Datasets' order of boxes and the Object Detection
API's order of `groundtruth_keypoints`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import numpy as np

from tfrecorder.errors import SchemaError
from tfrecorder.sources.detection import KEYPOINT_VISIBILITY, KEYPOINTS, NUM_KEYPOINTS
from tfrecorder.wording import count as counted

_EXAMPLES = 3


def keypoint_extras(keypoints: Sequence[Sequence[float] | None], widths: np.ndarray,
                    heights: np.ndarray, num_keypoints: Sequence[int | None] | None = None,
                    size: int | None = None,
                    where: Callable[[int], str] = lambda i: f"annotation {i}",
                    source: str = "the COCO file") -> dict[str, np.ndarray]:
    """The objects' keypoint features, one entry per object, for `Objects.of(...,
    **extras)`.

    Args:
        keypoints: per object, COCO's flat [x, y, v, ...] in pixels, or None (no
            keypoints: all K unlabelled).
        widths, heights: each object's image's size, in pixels.
        num_keypoints: per object, COCO's `num_keypoints` (None: the labelled keypoints
            counted, v > 0).
        size: K, the keypoints of an object (the categories' `keypoints`); None: the
            longest list given.
        where: an object's position -> where the user finds it, for messages.

    Returns:
        `objects/keypoints` an (n, 2K) float64 array [y1, x1, y2, x2, ...], fractions of
        the image's size; `objects/keypoint_visibility` (n, K) int64;
        `objects/num_keypoints` (n,) int64.

    Raises:
        SchemaError: for a list that is not triples of numbers, a visibility other than
            0, 1 or 2, or more than `size` keypoints, naming the first objects at fault.
    """
    values, lengths = _joined(keypoints, where, source)
    _refuse(np.flatnonzero(lengths % 3).tolist(), keypoints, where, source, _NOT_TRIPLES)
    size = int(lengths.max(initial=0)) // 3 if size is None else size
    _refuse(np.flatnonzero(lengths > 3 * size).tolist(), keypoints, where, source,
            f"with more keypoints than the {size} its category names")
    n = len(lengths)
    # Each list at the start of its object's row of 3K (the rest: unlabelled, zeros).
    starts = np.cumsum(lengths) - lengths
    at = np.arange(len(values)) - np.repeat(starts - np.arange(n) * 3 * size, lengths)
    triples = np.zeros(n * size * 3)
    triples[at] = values
    triples = triples.reshape(n, size, 3)
    visibility = triples[..., 2]
    _refuse(np.flatnonzero(~np.isin(visibility, (0, 1, 2)).all(axis=1)).tolist(),
            keypoints, where, source, "with a keypoint visibility other than 0 (not "
            "labelled), 1 (labelled, hidden) or 2 (visible)")
    scale = np.stack([np.asarray(heights, dtype=np.float64),
                      np.asarray(widths, dtype=np.float64)], axis=-1)[:, None, :]
    relative = triples[..., 1::-1] / scale  # [y, x] / [height, width]
    labelled = (visibility > 0).sum(axis=1)
    counts = labelled if num_keypoints is None else np.array(
        [given if given is not None else c
         for given, c in zip(num_keypoints, labelled.tolist())], dtype=np.int64)
    return {KEYPOINTS: relative.reshape(n, 2 * size),
            KEYPOINT_VISIBILITY: visibility.astype(np.int64),
            NUM_KEYPOINTS: counts.astype(np.int64).reshape(-1)}


def category_keypoint_names(categories: Sequence[dict] | None, source: str = "the COCO file"
                            ) -> tuple[str, ...] | None:
    """The names of the keypoints of the file's categories (COCO's `keypoints` of a
    category), or None where none names any. One dataset has one list: every object has
    the same K keypoints (COCO's keypoint files have one category, `person`).

    Raises:
        SchemaError: for categories naming different keypoints, or a list of non-text.
    """
    found: dict[tuple, object] = {}
    for category in categories or ():
        names = category.get("keypoints") if isinstance(category, dict) else None
        if not names:
            continue
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SchemaError(
                f"{source} has category {category.get('id')!r} with keypoints {names!r}: "
                "a list of the keypoints' names (\"nose\", \"left_eye\", ...).")
        found.setdefault(tuple(names), category.get("id"))
    if len(found) > 1:
        (first, one), (second, other) = list(found.items())[:2]
        raise SchemaError(
            f"{source} has categories naming different keypoints: {one!r} "
            f"{list(first)} and {other!r} {list(second)}. A dataset's objects share one "
            "list of keypoints: convert the categories' annotations as datasets of their "
            "own.")
    return next(iter(found), None)


_NOT_TRIPLES = ("whose keypoints are not a list of numbers [x1, y1, v1, x2, y2, v2, ...] "
                "(three a keypoint)")


def _joined(keypoints: Sequence, where: Callable[[int], str], source: str
            ) -> tuple[np.ndarray, np.ndarray]:
    """Every object's numbers, joined (by Arrow: 260,000 COCO persons in a fraction of a
    second, where a check a number took seconds), and each object's count of them (0
    for None)."""
    import pyarrow as pa

    try:
        joined = pa.array(keypoints, type=pa.large_list(pa.float64()),
                          from_pandas=False)
    except (pa.ArrowException, TypeError, ValueError):
        bad = [i for i, given in enumerate(keypoints) if not _is_numbers(given)]
        _refuse(bad, keypoints, where, source, _NOT_TRIPLES)
        raise
    lengths = joined.value_lengths().fill_null(0).to_numpy().astype(np.int64)
    return joined.flatten().to_numpy(zero_copy_only=False), lengths


def _is_numbers(given) -> bool:
    return given is None or (isinstance(given, (list, tuple, np.ndarray)) and all(
        isinstance(v, numbers.Real) for v in given))


def _refuse(positions: list[int], keypoints: Sequence, where: Callable[[int], str],
            source: str, what: str) -> None:
    if not positions:
        return
    shown = "; ".join(f"{where(i)}: {_clip(keypoints[i])}" for i in positions[:_EXAMPLES])
    more = f"; and {len(positions) - _EXAMPLES} more" if len(positions) > _EXAMPLES else ""
    raise SchemaError(
        f"{source} has {counted(len(positions), 'object')} {what}: {shown}{more}. COCO "
        "writes an object's keypoints [x1, y1, v1, ...] in pixels, one triple per name "
        "of its category's `keypoints`, v 0, 1 or 2.", column=KEYPOINTS)


def _clip(value, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."

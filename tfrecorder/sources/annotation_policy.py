"""One policy for bad annotations, which every detection source asks.

COCO, Pascal VOC, YOLO, Vertex AI JSONL, AutoML CSV and DataFrames each read their
objects into `detection.Objects`, and mark each object they found unusable with a
`Problem` (a class id the data file does not name, a bbox of three numbers, an object
without `<name>`). They decide nothing more: `settle` adds the checks every box passes (a
label and a box, inside the image, minimum below maximum), clips boxes a little past the
edge, and then does what `invalid_annotations` says:

- "skip" (the default): each image is written without its bad objects, and every one of
  them is listed (`Table.skipped_annotations`, written to skipped_annotations.csv: the
  file, the annotation as the file names it, its image, the reason, the value as
  written) and counted by reason. A 100,000-image export with one slip converts.
- "error": the source is refused before any image is read, naming the objects at fault
  where the user finds them and the fix (the strictness of earlier versions).

**Tolerance.** Labels rounded to a few decimals, or drawn to the last pixel, put a corner
a little outside the image. A corner at most `TOLERANCE` (1% of the image's side)
outside is clipped to the edge, and the box counted as clipped; further out, the object
is outside the image. YOLO applies Ultralytics' own rule before (its label values within
1%; `yolo.py`), and COCO none: boxes beyond the edge are skipped exactly as TensorFlow's
converters skip them (`coco.py`).

**Masks.** An object's segmentation is kept where the source gives one. A source whose
kept objects carry no polygon or RLE at all (supervision, globox and datumaro write
`"segmentation": []` for a box) gives box-only records: no `objects/mask`. Where some
objects have a segmentation and others none, every object gets a mask and those without
one an empty mask, as Mask R-CNN's inputs need one mask a box; they are counted
(`AnnotationCounts.objects_without_mask`) and warned of.

Nothing vanishes unlisted: the objects a source holds = the objects written + those
listed here + those of images rejected whole (rejected.csv's `objects`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.layouts import BBOX
from tfrecorder.sources.schema import is_missing
from tfrecorder.wording import count

# A corner this far outside 0..1 (a fraction of the image's side) is clipped to the edge.
TOLERANCE = 0.01
# What invalid_annotations may say (options.py declares the option).
SKIP, ERROR = "skip", "error"
# skipped_annotations.csv's columns.
SKIPPED_COLUMNS = ("source", "annotation", "image", "reason", "written")
_EXAMPLES = 3


@dataclass(frozen=True)
class Problem:
    """What is wrong with an object.

    Attributes:
        reason: the reason listed in skipped_annotations.csv and counted in the manifest
            (no value in it, so that a thousand such objects count as one reason).
        phrase: the reason as an error continues "the file has 3 objects ...".
        fix: how to fix such an object, for the error.
        column: the column an error names.
    """

    reason: str
    phrase: str
    fix: str
    column: str = BBOX


NO_LABEL = Problem("box without a label", "with no label",
                   "Every box needs its object's class: add it, or drop the box.", "label")
NO_BOX = Problem("label without a box", "with a label but no box",
                 "Every object needs its box; an image without objects is listed without "
                 "labels.", "label")
OUTSIDE = Problem("box outside the image", "outside the image",
                  "Box coordinates are fractions of the image's height and width, from 0 to "
                  f"1 (divide pixels by the image's size); a corner up to {TOLERANCE:g} "
                  "outside is clipped.")
EMPTY = Problem("empty or upside-down box",
                "whose minimum is not below its maximum (empty, or upside down)",
                "A box needs ymin < ymax and xmin < xmax.")


@dataclass(frozen=True)
class Objects:
    """A source's objects, one entry per object in file order: columns, not an object a
    box (COCO's training set has 860,000 boxes).

    Attributes:
        image: each object's image, by its position in the table's rows.
        labels: each object's class; None where the source gives a box without one.
        boxes: an (n, 4) array of [ymin, xmin, ymax, xmax], fractions of the image's
            size; NaN where the source gives a label without a box.
        rows: each object's table row (its index label), for errors' `rows`.
        where: an object's position -> where the user finds it, as written ("line 4:
            'car,0.1,0.1,,,1.3,0.3,,'"), for messages.
        source: the source, for messages ("the CSV file 'boxes.csv'").
        extras: the objects' other inputs (AREA, IS_CROWD) where the source gives them,
            one value an object.
        problem: what the format found wrong with each object: 0 for nothing, k for
            `problems[k - 1]` (`annotation_policy.settle` decides what becomes of it).
        problems: the problems `problem` refers to.
        noun: what the source calls an object, in messages ("annotation" in COCO).
        names: an object's position -> (the file holding it, the annotation as that file
            names it, its value as written), for skipped_annotations.csv; by default
            the source and `where`.
        tolerance: how far outside 0..1 a corner is clipped to the edge
            (`annotation_policy.TOLERANCE`; 0: never).
        clipped: which boxes the format clipped itself (YOLO, by Ultralytics' rule).
        segmentations: each object's segmentation where the source gives masks (COCO
            polygons or RLE, or their JSON text; YOLO-seg's relative polygon), None or
            empty for an object without one.
    """

    image: np.ndarray
    labels: Sequence
    boxes: np.ndarray
    rows: Sequence
    where: Callable[[int], str]
    source: str = "the table"
    extras: Mapping[str, Sequence] = dataclasses.field(default_factory=dict)
    problem: np.ndarray | None = None
    problems: tuple[Problem, ...] = ()
    noun: str = "object"
    names: Callable[[int], tuple[str, object, str]] | None = None
    tolerance: float = TOLERANCE
    clipped: np.ndarray | None = None
    segmentations: Sequence | None = None

    @classmethod
    def of(cls, image: Sequence[int], labels: Sequence, boxes: Sequence, rows: Sequence,
           where: Callable[[int], str], source: str = "the table", *,
           problem: Sequence[int] | None = None, problems: Sequence[Problem] = (),
           noun: str = "object", names: Callable | None = None,
           tolerance: float = TOLERANCE, clipped: Sequence[bool] | None = None,
           segmentations: Sequence | None = None, **extras) -> Objects:
        return cls(np.asarray(image, dtype=np.int64).reshape(-1), labels,
                   np.asarray(boxes, dtype=np.float64).reshape(-1, 4), rows, where, source,
                   extras, None if problem is None else np.asarray(problem, np.int16),
                   tuple(problems), noun, names, tolerance,
                   None if clipped is None else np.asarray(clipped, bool), segmentations)

    def listed(self, i: int) -> tuple[str, object, str]:
        """(file, annotation, value as written) of object i, as skipped_annotations.csv
        lists it."""
        return self.names(i) if self.names is not None else (self.source, i, self.where(i))

    def subset(self, keep: np.ndarray, boxes: np.ndarray | None = None) -> Objects:
        """The objects where `keep` holds (their boxes replaced by `boxes`, if given),
        named as before."""
        at = np.flatnonzero(keep)

        def take(values):
            if values is None:
                return None
            if isinstance(values, np.ndarray):
                return values[at]
            return [values[i] for i in at.tolist()]

        where, names = self.where, self.names
        return dataclasses.replace(
            self, image=self.image[at], labels=take(self.labels),
            boxes=self.boxes[at] if boxes is None else boxes, rows=take(self.rows),
            where=lambda i: where(int(at[i])),
            names=None if names is None else (lambda i: names(int(at[i]))),
            extras={name: take(values) for name, values in self.extras.items()},
            problem=None, problems=(), clipped=None,
            segmentations=take(self.segmentations))


@dataclass(frozen=True)
class Settled:
    """What became of a source's objects.

    Attributes:
        objects: the objects written (boxes clipped where within the tolerance).
        kept: for each of the source's objects, whether it is written.
        skipped: the others, one a row (`SKIPPED_COLUMNS`); None when there are none.
        clipped: how many of the kept boxes were clipped to the image.
    """

    objects: Objects
    kept: np.ndarray
    skipped: pd.DataFrame | None
    clipped: int


def settle(objects: Objects, invalid_annotations: str = SKIP) -> Settled:
    """The objects to write, those set aside with their reasons, and the boxes clipped.

    Raises:
        SchemaError: with `invalid_annotations="error"`, for the first kind of problem
            found, naming the objects that have it where the user finds them.
    """
    n = len(objects.boxes)
    codes = np.zeros(n, dtype=np.int16) if objects.problem is None else \
        np.asarray(objects.problem, dtype=np.int16).copy()
    problems = list(objects.problems)

    def mark(bad: np.ndarray, problem: Problem) -> None:
        bad = bad & (codes == 0)
        if bad.any():
            problems.append(problem)
            codes[bad] = len(problems)

    boxes = np.array(objects.boxes, dtype=np.float64).reshape(n, 4)
    has_box = ~np.isnan(boxes).any(axis=1)
    labelled = _labelled(objects.labels)
    mark(has_box & ~labelled, NO_LABEL)
    mark(labelled & ~has_box, NO_BOX)
    tolerance = objects.tolerance
    with np.errstate(invalid="ignore"):
        inside = ((boxes >= -tolerance) & (boxes <= 1 + tolerance)).all(axis=1)
    mark(has_box & ~inside, OUTSIDE)
    fine = has_box & (codes == 0)
    past = fine & ((boxes < 0) | (boxes > 1)).any(axis=1)
    boxes[fine] = np.clip(boxes[fine], 0.0, 1.0)
    with np.errstate(invalid="ignore"):
        mark(has_box & ((boxes[:, 0] >= boxes[:, 2]) | (boxes[:, 1] >= boxes[:, 3])), EMPTY)
    if objects.clipped is not None:
        past |= np.asarray(objects.clipped, dtype=bool)
    kept = codes == 0
    if not kept.all() and invalid_annotations == ERROR:
        raise _refusal(objects, codes, problems)
    return Settled(objects.subset(kept, boxes[kept]), kept,
                   _skipped(objects, codes, problems), int((past & kept).sum()))


def _labelled(labels: Sequence) -> np.ndarray:
    codes, distinct = pd.factorize(np.asarray(labels, dtype=object).reshape(-1))
    # (each distinct label asked once; code -1, a missing one, reads the last: False)
    return np.array([not is_missing(label) for label in distinct] + [False],
                    dtype=bool)[codes]


def _refusal(objects: Objects, codes: np.ndarray, problems: list[Problem]) -> SchemaError:
    """The error for `invalid_annotations="error"`: the first kind of problem, in file
    order, and every object that has it."""
    code = int(codes[np.flatnonzero(codes)[0]])
    problem = problems[code - 1]
    at = np.flatnonzero(codes == code)
    shown = "; ".join(objects.where(int(i)) for i in at[:_EXAMPLES])
    more = f"; and {len(at) - _EXAMPLES} more" if len(at) > _EXAMPLES else ""
    return SchemaError(
        f"{objects.source} has {count(len(at), objects.noun)} {problem.phrase}: "
        f"{shown}{more}. {problem.fix} Fix them, or pass ", Option("invalid_annotations",
                                                                   SKIP),
        " to write the images without them (each listed in skipped_annotations.csv).",
        column=problem.column, option="invalid_annotations",
        rows=list(dict.fromkeys(_plain(objects.rows[i]) for i in at)))


def _skipped(objects: Objects, codes: np.ndarray, problems: list[Problem]
             ) -> pd.DataFrame | None:
    at = np.flatnonzero(codes)
    if not len(at):
        return None
    listed = [objects.listed(int(i)) for i in at]
    return pd.DataFrame({
        "source": [file for file, _, _ in listed],
        "annotation": [name for _, name, _ in listed],
        "image": [_plain(objects.rows[i]) for i in at.tolist()],
        "reason": [problems[code - 1].reason for code in codes[at].tolist()],
        "written": [written for _, _, written in listed]}, columns=list(SKIPPED_COLUMNS))


def skipped_rows(source: str, annotations: Sequence, images: Sequence, reason: str,
                 written: Sequence | None = None) -> pd.DataFrame:
    """Annotations a source sets aside before they are objects (the label file of an
    image that is not there), as `settle` lists its own."""
    return pd.DataFrame({"source": source, "annotation": list(annotations),
                         "image": list(images), "reason": reason,
                         "written": list(written) if written is not None else ""},
                        columns=list(SKIPPED_COLUMNS))


def joined(frames: Sequence[pd.DataFrame | None]) -> pd.DataFrame | None:
    """Lists of skipped annotations as one (None: none)."""
    found = [frame for frame in frames if frame is not None and len(frame)]
    return pd.concat(found, ignore_index=True) if found else None


def has_segmentation(segmentation) -> bool:
    """Whether an object's segmentation draws anything: polygons or an RLE mask, not
    nothing (None, `[]`, `{}`: what exporters write for a box without a mask), whether
    given as a value or as its JSON text (`msgspec.Raw`, bytes)."""
    if segmentation is None:
        return False
    if isinstance(segmentation, (bytes, bytearray, memoryview)) or \
            type(segmentation).__name__ == "Raw":
        return bytes(segmentation).strip() not in (b"", b"[]", b"{}", b"null", b"[[]]")
    if isinstance(segmentation, (list, tuple, dict)):
        return bool(segmentation) and not all(
            isinstance(p, (list, tuple)) and not p for p in segmentation)
    return not is_missing(segmentation)


def _plain(value):
    """A NumPy scalar as the Python value it holds (as messages and `rows` show it)."""
    return value.item() if isinstance(value, np.generic) else value

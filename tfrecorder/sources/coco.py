"""COCO object-detection files: one JSON object with `images` (id, file_name, width,
height), `annotations` (id, image_id, category_id, bbox [x, y, width, height] in pixels,
and where given area, iscrowd and segmentation) and `categories` (id, name).

One row an image, in the order of `images`, named by its id, with its id as the input
`image_id` (the `tf_models` layout's `image/source_id`) and its `file_name` as its
`image_name` (`image/filename`), as Model Garden's `create_coco_tf_record.py` writes them.
Its objects are its annotations in file order, their classes the categories' names; the
table's `label_map` is every category, used or not, with its id, so that every file of
one dataset numbers its classes alike and the `tf_models` layout stores COCO's ids. (A
file without categories labels objects by their category ids.) Boxes become fractions of
the image's size; a mask is kept as written in `objects/mask`: each segmentation's JSON
text (`msgspec.Raw`), read by the worker that draws it (`annotations.segmentation`).

Annotations that TensorFlow's reference converters skip (a width or height of 0 or less;
a box whose x + width or y + height exceeds its image's width or height, compared
exactly as they do) are skipped here too, and so is a box starting left of or above its
image (which they would write with negative coordinates): the image is written without
them, and they are listed in `Table.skipped_annotations` with their reason.
`invalid_annotations="error"` refuses the file instead.

File names are relative to `image_root`, by default the JSON file's folder. A COCO file
has no splits: every row takes `split=`, or is UNASSIGNED.

Speed: COCO 2017's training file (118,287 images, 860,001 annotations, 450 MB) is decoded
by msgspec into typed structs, with the segmentations left as JSON text, and checked a
column at a time with NumPy (benchmarks/bench_detection.py, docs/performance.md).
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import re
from collections.abc import Sequence

import msgspec
import numpy as np
import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.format.layouts import IMAGE_ID
from tfrecorder.format.manifest import AnnotationCounts
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.annotation_policy import ERROR, Objects, Problem, skipped_rows
from tfrecorder.sources.coco_keypoints import category_keypoint_names, keypoint_extras
from tfrecorder.sources.detection import AREA, BBOX, IS_CROWD, MASK, objects_table
from tfrecorder.sources.schema import STRING_LABEL
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.wording import count

_SNIFFED = 1 << 16
_EXAMPLES = 3
# Why an annotation is skipped (`Table.skipped_annotations`' reasons). The first two are
# the reference converters' own tests (`width <= 0 or height <= 0`; `x + width >
# image_width or y + height > image_height`); the third is ours: they would write it.
ZERO_SIZE = "zero or negative width or height"
BEYOND_IMAGE = "beyond the image's right or bottom edge"
BEFORE_IMAGE = "starting left of or above the image"
_SEGMENTATIONS_AT_ONCE = 20_000  # checked a batch at a time: their floats, then freed


class _Image(msgspec.Struct):
    id: int | str
    file_name: str
    width: int | float | None = None  # None: a rejected row (`_images`)
    height: int | float | None = None


class _Annotation(msgspec.Struct):
    image_id: int | str
    id: int | str | None = None
    category_id: int | str | None = None
    bbox: list[float | None] | None = None  # checked a column at a time (`_boxes`)
    area: float | None = None
    iscrowd: bool | int | None = None  # (False in the Object Detection API's tests)
    segmentation: msgspec.Raw = msgspec.Raw()  # empty: none given
    keypoints: list | None = None  # person_keypoints_*.json: [x1, y1, v1, ...] in pixels
    num_keypoints: int | None = None


class _Category(msgspec.Struct):
    id: int | str
    name: str
    keypoints: list | None = None  # the names of its keypoints ("nose", ...)
    supercategory: str | None = None


class _Coco(msgspec.Struct):
    images: list[_Image]
    annotations: list[_Annotation] | None = None
    categories: list[_Category] | None = None


class _Rle(msgspec.Struct):
    size: tuple[int, int]
    counts: list[int] | str


_SEGMENTATION = list[list[float]] | _Rle | None
_SEGMENTATIONS = list[_SEGMENTATION]


def claims(path: str, folder: bool) -> bool:
    """A `.json` file, or one that starts as a JSON object naming `images`."""
    if folder:
        return False
    if path.lower().endswith(".json"):
        return True
    if path.lower().endswith((".csv", ".jsonl", ".parquet", ".pq")):
        return False
    head = csv.head_text(path, _SNIFFED)
    return head.lstrip().startswith("{") and '"images"' in head


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's detection table; images without a size, its rejected rows; annotations
    it cannot write, listed (`annotation_policy`)."""
    data = _decode(path, fs.read_bytes(path))
    root = base_dir
    if options.image_root is not None:
        root = os.fspath(options.image_root)
        root = root if fs.is_remote(root) else os.path.abspath(root)
    strict = options.invalid_annotations == ERROR
    images, unsized = _images(path, data.images, strict)
    categories = _categories(path, data.categories)
    keypoint_names = category_keypoint_names(
        [{"id": c.id, "keypoints": c.keypoints} for c in data.categories or ()],
        f"the COCO file {path!r}")
    parents = {c.supercategory for c in data.categories or ()}
    annotations = data.annotations or []
    del data
    found = _annotations(path, annotations, images, unsized, categories, keypoint_names,
                         strict)
    del annotations  # its structs (400 MB for COCO 2017's train): the columns stay
    label_map, notes = _label_map(path, categories, found.category, parents)
    source = pd.DataFrame({"file_name": images["image_uri"], "width": images["width"],
                           "height": images["height"]}, index=images.index).assign(
        annotations=_per_image(found.ids, found.image, len(images)))
    table = objects_table(
        images[["image_uri"]].assign(**{IMAGE_ID: _image_ids(images.index.to_numpy())}),
        found.objects(path, images), source, root, options,
        mask_sizes=images[["height", "width"]].to_numpy().tolist(),
        annotated_sizes=images[["height", "width"]].to_numpy().tolist(),
        label_type=STRING_LABEL if label_map is not None else None,
        keypoint_names=keypoint_names, skipped=found.unknown_images(path),
        counts=AnnotationCounts(objects=len(found.elsewhere) + len(found.unsized),
                                notes=notes))
    return dataclasses.replace(
        table, rows=table.rows.assign(image_name=images["image_uri"].to_numpy()),
        label_map=label_map, rejected_rows=_unsized_rows(unsized, found))


# --- decoding ------------------------------------------------------------------------------

_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<where>.*)`)?$", re.DOTALL)
_ELEMENT = re.compile(r"^\.(images|annotations|categories)\[(\d+)\](.*)$")


def _decode(path: str, data: bytes) -> _Coco:
    if data.startswith(codecs.BOM_UTF8):  # Windows tools write one; JSON has none
        data = data[len(codecs.BOM_UTF8):]
    try:
        return msgspec.json.decode(data, type=_Coco)
    except msgspec.ValidationError as error:
        raise _invalid(path, data, str(error)) from None
    except msgspec.DecodeError as error:
        cleaned = _nan_as_null(data)
        if cleaned is not None:  # NaN is a bbox's problem (`BAD_BBOX`), not the file's
            return _decode(path, cleaned)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise SchemaError(f"the COCO file {path!r} is not UTF-8 (byte {bad.start}). "
                              "Save it as UTF-8.") from None
        at = re.search(r"byte (\d+)", str(error))
        offset = int(at.group(1)) if at else 0
        line = data.count(b"\n", 0, offset) + 1
        column = offset - data.rfind(b"\n", 0, offset)
        reason = re.sub(r" \(byte \d+\)", "", str(error)).removeprefix("JSON is malformed: ")
        raise SchemaError(f"the COCO file {path!r} is not JSON: {reason} at line {line}, "
                          f"column {column}.", rows=[line]) from None


# Python's json module writes float("nan") as NaN and infinities as Infinity, which are
# no JSON: outside strings, they are read as null.
_NOT_NUMBERS = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?(?:NaN|Infinity))')


def _nan_as_null(data: bytes) -> bytes | None:
    """The file with its NaN and Infinity as null; None if it has none."""
    if b"NaN" not in data and b"Infinity" not in data:
        return None
    cleaned = _NOT_NUMBERS.sub(lambda m: b"null" if m.group(1) else m.group(0), data)
    return cleaned if cleaned != data else None


def _invalid(path: str, data: bytes, message: str) -> SchemaError:
    """The error for a file that is JSON but not of COCO's shape, naming the element (and
    the annotation's id) and its value: msgspec's message says what it expected where."""
    what, where = _AT.match(message).group("what", "where")
    element = _ELEMENT.match(where or "")
    if element is None:
        found = msgspec.json.decode(data)
        found = sorted(found)[:10] if isinstance(found, dict) else type(found).__name__
        return SchemaError(
            f"the JSON file {path!r} is not a COCO file: {what}{f' at {where}' if where else ''}"
            f" (it holds {found}). A COCO file is an object with a list of 'images', and "
            "'annotations' and 'categories'.")
    key, k, field = element.group(1), int(element.group(2)), element.group(3).lstrip(".")
    entry = msgspec.json.decode(data)[key][k]
    name = (f"annotation id {entry['id']!r}" if key == "annotations" and isinstance(
        entry, dict) and "id" in entry else f"{key}[{k}]")
    value = entry.get(field.split("[")[0]) if isinstance(entry, dict) and field else entry
    shown_value = (f"{field.split('[')[0]} {_clip(json.dumps(value))}" if field
                   else _clip(entry))
    advice = {"images": "An image is an object with an id, a file_name, and its width and "
                        "height in pixels.",
              "annotations": "A COCO bbox is [x, y, width, height] in pixels; image_id and "
                             "category_id name an entry of 'images' and 'categories'.",
              "categories": "A category is an object with an id and a name."}[key]
    if field == "bbox" or field.startswith("bbox["):
        what = f"a bbox that is not [x, y, width, height] ({what})"
    return SchemaError(f"the COCO file {path!r} has {name}: {shown_value}: {what}. {advice}",
                       column=BBOX if field.startswith("bbox") else None)


# --- images and categories ---------------------------------------------------------------

def _images(path: str, entries: list[_Image], strict: bool
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The images with a size, indexed by id: `image_uri` (file_name), width and height;
    and the others (`entry` names them: `images[k]`), which are rejected rows: their
    boxes cannot be made fractions of their size (with `strict`, an error)."""
    frame = pd.DataFrame({"id": [e.id for e in entries],
                          "image_uri": [e.file_name for e in entries],
                          "width": [e.width for e in entries],
                          "height": [e.height for e in entries]})
    repeated = frame["id"][frame["id"].duplicated()].tolist()
    if repeated:
        raise SchemaError(f"the COCO file {path!r} gives the image id {repeated[0]!r} to "
                          "several images. Give each image its own id.", rows=repeated)
    sizes = frame[["width", "height"]].to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        sized = (sizes > 0).all(axis=1)
    bad = np.flatnonzero(~sized)
    if len(bad) and strict:
        shown = "; ".join(f"images[{k}] {_clip(msgspec.to_builtins(entries[k]))}"
                          for k in bad[:_EXAMPLES])
        raise SchemaError(
            f"the COCO file {path!r} has {count(len(bad), 'image')} without a width and "
            f"height in pixels: {shown}. Boxes are turned into fractions of the image's "
            "size, so each image needs both.", option="invalid_annotations")
    frame = frame.set_index(pd.Index(frame.pop("id"), name="image id"))
    unsized = frame.iloc[bad].assign(entry=[f"images[{k}]" for k in bad.tolist()])
    if not len(bad):
        return frame, unsized
    frame = frame.iloc[np.flatnonzero(sized)]
    for side in ("width", "height"):  # whole numbers again, once the blanks are gone
        values = frame[side].to_numpy(dtype=np.float64)
        frame[side] = values.astype(np.int64) if (values % 1 == 0).all() else values
    return frame, unsized


def _unsized_rows(unsized: pd.DataFrame, found: _Annotations) -> pd.DataFrame | None:
    """The images without a size as rejected rows, with their objects."""
    if not len(unsized):
        return None
    return pd.DataFrame({"file_name": unsized["image_uri"], "width": unsized["width"],
                         "height": unsized["height"],
                         "objects": np.bincount(found.unsized, minlength=len(unsized)),
                         "reason": [f"{entry} has no width and height in pixels: its boxes "
                                    "cannot be made fractions of its size"
                                    for entry in unsized["entry"]]}, index=unsized.index)


def _categories(path: str, entries: list[_Category] | None) -> LabelMap | None:
    """Every category with its id, ordered by id; None for a file without categories
    (labels are then the annotations' category ids)."""
    if entries is None:
        return None
    names: dict = {}
    for k, entry in enumerate(entries):
        if not entry.name.strip():
            raise SchemaError(f"the COCO file {path!r} has categories[{k}] "
                              f"{_clip(msgspec.to_builtins(entry))}: a category is an object "
                              "with an id and a name.")
        if entry.id in names:
            raise SchemaError(f"the COCO file {path!r} gives the category id "
                              f"{entry.id!r} to several categories.")
        names[entry.id] = entry.name
    twice = pd.Series(list(names.values()))
    twice = twice[twice.duplicated()].tolist()
    if twice:
        ids = [i for i, name in names.items() if name == twice[0]]
        raise SchemaError(f"the COCO file {path!r} names several categories {twice[0]!r} "
                          f"(ids {ids}): they would become one class. Give each category "
                          "its own name.", column="label")
    texts = [i for i in names if not isinstance(i, int)]
    if texts:  # a label map's ids are numbers
        raise SchemaError(f"the COCO file {path!r} gives the category id {texts[0]!r}: "
                          "category ids are numbers (1 to 90 in COCO's own files).",
                          column="label")
    return LabelMap.of(list(names.values()), list(names))


# --- annotations, a column at a time -------------------------------------------------------

_BBOX_FIX = ("A COCO bbox is [x, y, width, height] in pixels, inside its image (TensorFlow's "
             "converters skip such annotations too).")
# What can be wrong with an annotation (`annotation_policy.Problem`), in the order they
# are looked for: an annotation keeps its first. The converters' skips read as before.
UNKNOWN_CATEGORY = Problem("unknown category id", "naming an unknown category id",
                           "image_id and category_id name an entry of 'images' and "
                           "'categories'.", "label")
BAD_BBOX = Problem("bbox that is not [x, y, width, height]",
                   "whose bbox is not four numbers [x, y, width, height]",
                   "A COCO bbox is [x, y, width, height] in pixels.")
_SKIPS = {reason: Problem(reason, f"whose bbox is {reason}", _BBOX_FIX)
          for reason in (ZERO_SIZE, BEYOND_IMAGE, BEFORE_IMAGE)}
BAD_SEGMENTATION = Problem(
    "segmentation neither polygons nor an RLE mask of its image",
    "with a segmentation that is neither polygons nor an RLE mask of its image",
    "A COCO segmentation is a list of polygons [x0, y0, x1, y1, ...] in pixels, or an RLE "
    "mask {'size': [height, width], 'counts': ...} of its image, as pycocotools writes it.",
    MASK)
NO_AREA = Problem("no area, beside annotations with areas",
                  "without an area, beside annotations with areas",
                  "Give every annotation its area, or none.", AREA)
_PROBLEMS = (UNKNOWN_CATEGORY, BAD_BBOX, *_SKIPS.values(), BAD_SEGMENTATION, NO_AREA)
_CODE = {problem: k for k, problem in enumerate(_PROBLEMS, 1)}
UNKNOWN_IMAGE = "unknown image id"


@dataclasses.dataclass
class _Annotations:
    """Every annotation of an image with a size as columns (one entry each, in file
    order), with what is wrong with it; and those of no such image, counted.

    Attributes:
        ids: each annotation's id (its position in the file where it has none).
        named: whether the annotation has an id (else `ids` is its position).
        image: its image's position in `images`.
        category: its category's position in the categories (-1: unknown, or none).
        labels: its class.
        boxes: (n, 4) relative [ymin, xmin, ymax, xmax]; NaN without a usable bbox.
        given: (n, 4) the bbox as written, in pixels; NaN without a usable one.
        problem: what is wrong with it: 0 nothing, k `_PROBLEMS[k - 1]`.
        written: the annotation's value as written, for each with a problem.
        extras: AREA, IS_CROWD and keypoint columns where given.
        segmentations: each one's JSON text (msgspec.Raw); None: none given.
        elsewhere: (entry name, image_id as written) of each annotation naming an image
            the file does not have.
        unsized: the position in the images without a size of each annotation of one.
    """

    ids: np.ndarray
    named: np.ndarray
    image: np.ndarray
    category: np.ndarray
    labels: np.ndarray
    boxes: np.ndarray
    given: np.ndarray
    problem: np.ndarray
    written: dict
    extras: dict
    segmentations: list | None
    elsewhere: list
    unsized: np.ndarray

    def name(self, k: int) -> str:
        return (f"annotation id {self.ids[k]!r}" if self.named[k]
                else f"annotations[{self.ids[k]}]")

    def objects(self, path: str, images: pd.DataFrame) -> Objects:
        """The annotations as the table's objects, each with its problem marked."""

        def where(k: int) -> str:
            if self.problem[k] and _PROBLEMS[self.problem[k] - 1] in (UNKNOWN_CATEGORY,
                                                                      BAD_SEGMENTATION):
                return f"{self.name(k)}: {self.written[k]}"
            written = self.written.get(k) or f"bbox {_numbers(self.given[k])}"
            return f"{self.name(k)}: {written} in image {_image(images, self.image[k])}"

        def names(k: int) -> tuple[str, object, str]:
            return (path, self.ids[k] if self.named[k] else f"annotations[{self.ids[k]}]",
                    self.written.get(k, ""))

        return Objects.of(self.image, self.labels, self.boxes, images.index[self.image],
                          where, f"the COCO file {path!r}", problem=self.problem,
                          problems=_PROBLEMS, noun="annotation", names=names, tolerance=0.0,
                          segmentations=self.segmentations, **self.extras)

    def unknown_images(self, path: str) -> pd.DataFrame | None:
        """The annotations naming an image the file does not have, as listed."""
        if not self.elsewhere:
            return None
        return skipped_rows(path, [name for name, _ in self.elsewhere],
                            [image for _, image in self.elsewhere], UNKNOWN_IMAGE,
                            [f"image_id {image!r}" for _, image in self.elsewhere])


def _annotations(path: str, annotations: list[_Annotation], images: pd.DataFrame,
                 unsized: pd.DataFrame, label_map: LabelMap | None,
                 keypoint_names: tuple[str, ...] | None, strict: bool) -> _Annotations:
    """The annotations as columns, each one's problem marked (the reference converters'
    skips among them); those of images the file lacks or gives no size set apart.

    Raises:
        SchemaError: with `strict`, for an annotation naming an unknown image.
    """
    image_ids = pd.Index([a.image_id for a in annotations], dtype=object)
    image = images.index.get_indexer(image_ids)
    unsized_at = unsized.index.get_indexer(image_ids)
    unknown = (image < 0) & (unsized_at < 0)
    unsized_at = unsized_at[unsized_at >= 0]
    given_ids = [a.id for a in annotations]
    if unknown.any():
        named = np.array([i is not None for i in given_ids], dtype=bool)
        ids = _objects([i if i is not None else k for k, i in enumerate(given_ids)])
        if strict:
            _refuse_unknown(path, annotations, ids, named, unknown,
                            "naming an unknown image id", "image_id")
    elsewhere = [(given_ids[k] if given_ids[k] is not None else f"annotations[{k}]",
                  annotations[k].image_id) for k in np.flatnonzero(unknown).tolist()]
    on = np.flatnonzero(image >= 0)
    if len(on) < len(annotations):
        annotations = [annotations[k] for k in on.tolist()]
        given_ids = [given_ids[k] for k in on.tolist()]
        image = image[on]
    else:
        on = None  # every annotation: positions are the file's
    n = len(annotations)
    named = np.array([i is not None for i in given_ids], dtype=bool)
    positions = range(n) if on is None else on.tolist()
    ids = _objects([i if i is not None else k for k, i in zip(positions, given_ids)])
    problem = np.zeros(n, dtype=np.int16)
    written: dict[int, str] = {}

    def mark(bad: np.ndarray, found: Problem, shown=None) -> None:
        bad = bad & (problem == 0)
        problem[bad] = _CODE[found]
        if shown is not None:
            written.update((k, shown(k)) for k in np.flatnonzero(bad).tolist())

    categories = [a.category_id for a in annotations]
    if label_map is not None:
        category = pd.Index(label_map.model_ids).get_indexer(pd.Index(categories, dtype=object))
        labels = np.asarray((*label_map.names, None), dtype=object)[category]
        mark(category < 0, UNKNOWN_CATEGORY, lambda k: f"category_id {categories[k]!r}")
    else:
        category = np.full(n, -1, dtype=np.int64)
        labels = _objects(categories)
    bboxes = [a.bbox for a in annotations]
    four = np.fromiter((b is not None and len(b) == 4 for b in bboxes), bool, n)
    given = np.full((n, 4), np.nan)
    if four.any():
        given[four] = np.array([b for b, ok in zip(bboxes, four) if ok], dtype=np.float64)
    mark(~np.isfinite(given).all(axis=1), BAD_BBOX,
         lambda k: "no bbox" if bboxes[k] is None else
         f"bbox [{', '.join('NaN' if v is None else _number(v) for v in bboxes[k])}]")
    widths = images["width"].to_numpy(dtype=np.float64)[image]
    heights = images["height"].to_numpy(dtype=np.float64)[image]
    x, y, w, h = given.T
    with np.errstate(invalid="ignore"):
        for reason, bad in ((ZERO_SIZE, (w <= 0) | (h <= 0)),
                            (BEYOND_IMAGE, (x + w > widths) | (y + h > heights)),
                            (BEFORE_IMAGE, (x < 0) | (y < 0))):
            mark(bad, _SKIPS[reason], lambda k: f"bbox {_numbers(given[k])}")
        boxes = np.stack([y / heights, x / widths, (y + h) / heights, (x + w) / widths],
                         axis=1)
    extras = {}
    areas = [a.area for a in annotations]
    missing = np.array([a is None for a in areas], dtype=bool)
    if not missing.all():
        mark(missing, NO_AREA, lambda k: "area None")
        extras[AREA] = np.array([a if a is not None else np.nan for a in areas],
                                dtype=np.float64)
    crowds = [a.iscrowd for a in annotations]
    if any(c is not None for c in crowds):
        extras[IS_CROWD] = np.array([int(c or 0) for c in crowds], dtype=np.int64)
    if keypoint_names is not None or any(a.keypoints is not None for a in annotations):
        extras.update(keypoint_extras(
            [a.keypoints for a in annotations], widths, heights,
            [a.num_keypoints for a in annotations],
            size=None if keypoint_names is None else len(keypoint_names),
            where=lambda k: _name(ids, named, k), source=f"the COCO file {path!r}"))
    segmentations = [a.segmentation for a in annotations]
    if not any(map(len, segmentations)):
        segmentations = None
    else:
        bad = _bad_segmentations(segmentations, images, image)
        mark(np.isin(np.arange(n), list(bad)), BAD_SEGMENTATION, bad.__getitem__)
    return _Annotations(ids, named, image, category, labels, boxes, given, problem, written,
                        extras, segmentations, elsewhere, unsized_at)


def _label_map(path: str, categories: LabelMap | None, category: np.ndarray,
               parents: set) -> tuple[LabelMap | None, tuple[str, ...]]:
    """The classes with the ids TensorFlow's models see, and what was decided for them.
    A category id 0 never reaches a label map (the models reserve it for the
    background): a category 0 named as the others' supercategory and used by no
    annotation (Roboflow's exports carry one) is left out; any other id 0 is a class,
    and every id is shifted up by 1, so the file's categories keep their order."""
    if categories is None or 0 not in categories.model_ids:
        return categories, ()
    zero = categories.model_ids.index(0)
    name = categories.names[zero]
    others = [(n, i) for n, i in zip(categories.names, categories.model_ids) if i != 0]
    if name in parents and not (category == zero).any() and others:
        return LabelMap.of([n for n, _ in others], [i for _, i in others]), (
            f"category id 0 {name!r} of {path!r}, the supercategory of the others and used "
            "by no annotation, is no class (TensorFlow's models reserve id 0 for the "
            "background)",)
    return LabelMap.of(categories.names, [i + 1 for i in categories.model_ids]), (
        f"{path!r} uses category id 0 ({name!r}), which TensorFlow's models reserve for "
        "the background: every category id is shifted up by 1 (id k is k + 1) in "
        "label_map.pbtxt and the tf_models records",)


def _bad_segmentations(segmentations: list, images: pd.DataFrame, image: np.ndarray
                       ) -> dict[int, str]:
    """What is wrong with each segmentation that is neither polygons (lists of three or
    more x, y pairs) nor an RLE mask of its image's size whose runs cover it exactly, by
    its annotation's position; decoded a batch at a time (their floats would take
    gigabytes at once) and let go."""
    from tfrecorder.write.annotations import rle_runs

    heights = images["height"].to_numpy()
    widths = images["width"].to_numpy()
    bad: dict[int, str] = {}
    for start in range(0, len(segmentations), _SEGMENTATIONS_AT_ONCE):
        batch = segmentations[start:start + _SEGMENTATIONS_AT_ONCE]
        # Most are plainly polygons: only the others are decoded (RLEs, mistakes).
        others = (start + np.flatnonzero(~_plainly_polygons(batch))).tolist()
        for k, segmentation in zip(others, _decoded(segmentations, others, bad)):
            if segmentation is None:
                continue
            if isinstance(segmentation, list):
                polygon = next((p for p in segmentation if len(p) < 6 or len(p) % 2), None)
                if polygon is not None and segmentation != [[]]:
                    bad[k] = f"polygon {_numbers(polygon)} is not x, y pairs (three or more)"
                continue
            height, width = heights[image[k]], widths[image[k]]
            if list(segmentation.size) != [height, width]:
                bad[k] = (f"an RLE mask of size {list(segmentation.size)!r}, not the "
                          f"image's [{height}, {width}]")
                continue
            try:
                covered = sum(rle_runs({"counts": segmentation.counts}))
            except (TypeError, ValueError, IndexError):
                covered = None
            if covered != height * width:
                bad[k] = (f"RLE counts {_clip(segmentation.counts, 40)} cover {covered} "
                          f"pixels, not {height} x {width}")
    return bad


def _decoded(segmentations: list, at: list[int], bad: dict[int, str]) -> list:
    """The segmentations at `at`, decoded at once; one that is not of COCO's shape is
    None here, and `bad` says what it is."""
    text = b"[" + b",".join(bytes(segmentations[k]) if len(segmentations[k]) else b"null"
                            for k in at) + b"]"
    try:
        return msgspec.json.decode(text, type=_SEGMENTATIONS)
    except msgspec.ValidationError:
        pass
    found = []
    for k in at:  # one at a time, to know which
        try:
            found.append(msgspec.json.decode(bytes(segmentations[k]) or b"null",
                                             type=_SEGMENTATION))
        except msgspec.ValidationError:
            bad[k] = f"segmentation {_clip(msgspec.json.decode(segmentations[k]))}"
            found.append(None)
    return found


def _refuse_unknown(path: str, annotations: list, ids: np.ndarray, named: np.ndarray,
                    bad: np.ndarray, what: str, field: str) -> None:
    at = np.flatnonzero(bad)
    if not len(at):
        return
    found = [f"{_name(ids, named, k)}: {field} {getattr(annotations[k], field)!r}"
             for k in at[:_EXAMPLES]]
    more = f"; and {len(at) - _EXAMPLES} more" if len(at) > _EXAMPLES else ""
    raise SchemaError(
        f"the COCO file {path!r} has {count(len(at), 'annotation')} {what}: "
        f"{'; '.join(found)}{more}. image_id and category_id name an entry of 'images' "
        "and 'categories'.")


# The bytes a segmentation of polygons is made of (JSON numbers, lists and blanks).
_POLYGON_BYTES = np.zeros(256, dtype=bool)
_POLYGON_BYTES[np.frombuffer(b"0123456789.eE+-,[] \t\r\n", np.uint8)] = True
_NUMBER_BYTES = np.zeros(256, dtype=bool)
_NUMBER_BYTES[np.frombuffer(b"0123456789.eE+-", np.uint8)] = True


def _plainly_polygons(batch: list) -> np.ndarray:
    """Which segmentations (JSON text, valid JSON: msgspec has read it) are surely
    polygons of three or more x, y pairs, told from their bytes with NumPy, without a
    Python float made: numbers and lists only, every number in a list of a list, and
    each such list of an even number (6 or more) of them. False says "look closer"."""
    sizes = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch))
    plain = np.zeros(len(batch), dtype=bool)
    given = np.flatnonzero(sizes)
    if not len(given):
        return plain
    text = np.frombuffer(b"".join(batch[k] for k in given.tolist()), dtype=np.uint8)
    starts = np.cumsum(np.r_[0, sizes[given][:-1]])
    opens, closes = text == ord("["), text == ord("]")
    depth = np.cumsum(opens.astype(np.int32) - closes)
    wrong = ~_POLYGON_BYTES[text] | (_NUMBER_BYTES[text] & (depth != 2))
    ok = (np.add.reduceat(wrong, starts) == 0) & (np.maximum.reduceat(depth, starts) == 2)
    # Each polygon: from its "[" (depth 2 after it) to its "]" (depth 1 after it).
    commas = np.cumsum((text == ord(",")) & (depth == 2))
    first, last = np.flatnonzero(opens & (depth == 2)), np.flatnonzero(closes & (depth == 1))
    numbers = commas[last] - commas[first] + 1
    odd = (numbers < 6) | (numbers % 2 == 1)
    ok[np.searchsorted(starts, first[odd], side="right") - 1] = False
    plain[given] = ok
    return plain


def _per_image(values: np.ndarray, image: np.ndarray, images: int) -> list[list]:
    found = [[] for _ in range(images)]
    for at, value in zip(image.tolist(), values.tolist()):
        found[at].append(value)
    return found


def _image_ids(ids: np.ndarray) -> np.ndarray:
    """The images' ids as the `image_id` column: numbers where all are, else text."""
    if all(isinstance(i, int) for i in ids.tolist()):
        return ids.astype(np.int64)
    return ids.astype(str).astype(object)


def _objects(values: Sequence) -> np.ndarray:
    found = np.empty(len(values), dtype=object)
    found[:] = values
    return found


def _name(ids: np.ndarray, named: np.ndarray, k: int) -> str:
    return f"annotation id {ids[k]!r}" if named[k] else f"annotations[{ids[k]}]"


def _image(images: pd.DataFrame, at: int) -> str:
    row, name = images.iloc[at], images.index[at]
    name = name.item() if isinstance(name, np.generic) else name
    return f"{name!r} of {_number(row['width'])} x {_number(row['height'])} pixels"


def _number(value) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _numbers(values) -> str:
    return f"[{', '.join(_number(v) for v in values)}]"


def _clip(value, width: int = 120) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= width else text[:width] + "..."

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

import dataclasses
import json
import os
import re
from collections.abc import Sequence

import msgspec
import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.layouts import IMAGE_ID
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.coco_keypoints import category_keypoint_names, keypoint_extras
from tfrecorder.sources.detection import AREA, BBOX, IS_CROWD, Objects, objects_table
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
SKIPPED_COLUMNS = ("source", "annotation", "image", "reason")
_SEGMENTATIONS_AT_ONCE = 20_000  # checked a batch at a time: their floats, then freed


class _Image(msgspec.Struct):
    id: int | str
    file_name: str
    width: int | float
    height: int | float


class _Annotation(msgspec.Struct):
    image_id: int | str
    id: int | str | None = None
    category_id: int | str | None = None
    bbox: tuple[float, float, float, float] | None = None
    area: float | None = None
    iscrowd: bool | int | None = None  # (False in the Object Detection API's tests)
    segmentation: msgspec.Raw = msgspec.Raw()  # empty: none given
    keypoints: list | None = None  # person_keypoints_*.json: [x1, y1, v1, ...] in pixels
    num_keypoints: int | None = None


class _Category(msgspec.Struct):
    id: int | str
    name: str
    keypoints: list | None = None  # the names of its keypoints ("nose", ...)


class _Coco(msgspec.Struct):
    images: list[_Image]
    annotations: list[_Annotation] | None = None
    categories: list[_Category] | None = None


class _Rle(msgspec.Struct):
    size: tuple[int, int]
    counts: list[int] | str


_SEGMENTATIONS = list[list[list[float]] | _Rle | None]


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
    """The file's detection table."""
    data = _decode(path, fs.read_bytes(path))
    root = base_dir
    if options.image_root is not None:
        root = os.fspath(options.image_root)
        root = root if fs.is_remote(root) else os.path.abspath(root)
    images = _images(path, data.images)
    label_map = _categories(path, data.categories)
    keypoint_names = category_keypoint_names(
        [{"id": c.id, "keypoints": c.keypoints} for c in data.categories or ()],
        f"the COCO file {path!r}")
    annotations = data.annotations or []
    del data
    found = _annotations(path, annotations, images, label_map, keypoint_names)
    del annotations  # its structs (400 MB for COCO 2017's train): the columns stay
    skipped = found.skipped_frame(path, images)
    if skipped is not None and options.invalid_annotations == "error":
        raise found.skipped_error(path, images)
    keep = found.kept
    objects = Objects.of(found.image[keep], found.labels[keep], found.boxes[keep],
                         images.index[found.image[keep]], found.where(images, keep),
                         f"the COCO file {path!r}",
                         **{name: values[keep] for name, values in found.extras.items()})
    masks = _masks(found, keep, images) if found.segmentations is not None else None
    ids = images.index.to_numpy()
    source = pd.DataFrame({"file_name": images["image_uri"], "width": images["width"],
                           "height": images["height"]}, index=images.index).assign(
        annotations=_per_image(found.ids[keep], found.image[keep], len(images)))
    table = objects_table(
        images[["image_uri"]].assign(**{IMAGE_ID: _image_ids(ids)}), objects, source, root,
        options, masks=masks, label_type=STRING_LABEL if label_map is not None else None,
        keypoint_names=keypoint_names)
    return dataclasses.replace(
        table, rows=table.rows.assign(image_name=images["image_uri"].to_numpy()),
        label_map=label_map, skipped_annotations=skipped)


# --- decoding ------------------------------------------------------------------------------

_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<where>.*)`)?$", re.DOTALL)
_ELEMENT = re.compile(r"^\.(images|annotations|categories)\[(\d+)\](.*)$")


def _decode(path: str, data: bytes) -> _Coco:
    try:
        return msgspec.json.decode(data, type=_Coco)
    except msgspec.ValidationError as error:
        raise _invalid(path, data, str(error)) from None
    except msgspec.DecodeError as error:
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

def _images(path: str, entries: list[_Image]) -> pd.DataFrame:
    """The images, indexed by id: `image_uri` (file_name), width and height."""
    frame = pd.DataFrame({"id": [e.id for e in entries],
                          "image_uri": [e.file_name for e in entries],
                          "width": [e.width for e in entries],
                          "height": [e.height for e in entries]})
    sizes = frame[["width", "height"]].to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~(sizes > 0).all(axis=1))
    if len(bad):
        shown = "; ".join(f"images[{k}] {_clip(msgspec.to_builtins(entries[k]))}"
                          for k in bad[:_EXAMPLES])
        raise SchemaError(
            f"the COCO file {path!r} has {count(len(bad), 'image')} without a width and "
            f"height in pixels: {shown}. Boxes are turned into fractions of the image's "
            "size, so each image needs both.")
    repeated = frame["id"][frame["id"].duplicated()].tolist()
    if repeated:
        raise SchemaError(f"the COCO file {path!r} gives the image id {repeated[0]!r} to "
                          "several images. Give each image its own id.", rows=repeated)
    return frame.set_index(pd.Index(frame.pop("id"), name="image id"))


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

@dataclasses.dataclass
class _Annotations:
    """Every annotation as columns (one entry each, in file order), and which to skip."""

    ids: np.ndarray  # each annotation's id (its position where it has none), objects
    image: np.ndarray  # its image's position in `images`
    labels: np.ndarray  # its class (objects)
    boxes: np.ndarray  # (n, 4) relative [ymin, xmin, ymax, xmax]; NaN without a bbox
    given: np.ndarray  # (n, 4) the bbox as written, in pixels
    reasons: np.ndarray  # why it is skipped ("": kept), objects
    extras: dict  # AREA, IS_CROWD columns where given
    segmentations: list | None  # each one's JSON text (msgspec.Raw); None: none given
    named: np.ndarray  # whether the annotation has an id (else `ids` is its position)

    @property
    def kept(self) -> np.ndarray:
        return self.reasons == ""

    def name(self, k: int) -> str:
        return (f"annotation id {self.ids[k]!r}" if self.named[k]
                else f"annotations[{self.ids[k]}]")

    def where(self, images: pd.DataFrame, keep: np.ndarray):
        """An object's position (among those kept) -> where the user finds it."""
        at = np.flatnonzero(keep)

        def found(i: int) -> str:
            k = int(at[i])
            box = self.given[k]
            shown = f"bbox {_numbers(box)}" if not np.isnan(box).any() else "no bbox"
            return f"{self.name(k)}: {shown} in image {_image(images, self.image[k])}"
        return found

    def skipped_frame(self, path: str, images: pd.DataFrame) -> pd.DataFrame | None:
        skipped = np.flatnonzero(~self.kept)
        if not len(skipped):
            return None
        return pd.DataFrame({
            "source": path,
            "annotation": [self.ids[k] if self.named[k] else None for k in skipped],
            "image": images.index.to_numpy()[self.image[skipped]],
            "reason": self.reasons[skipped]}, columns=list(SKIPPED_COLUMNS))

    def skipped_error(self, path: str, images: pd.DataFrame) -> SchemaError:
        """`invalid_annotations="error"`: the annotations that would be skipped, by
        their first reason."""
        reason = self.reasons[~self.kept][0]
        at = np.flatnonzero(self.reasons == reason)
        shown = "; ".join(f"{self.name(k)}: bbox {_numbers(self.given[k])} in image "
                          f"{_image(images, self.image[k])}" for k in at[:_EXAMPLES])
        more = f"; and {len(at) - _EXAMPLES} more" if len(at) > _EXAMPLES else ""
        return SchemaError(
            f"the COCO file {path!r} has {count(len(at), 'annotation')} whose bbox is "
            f"{reason}: {shown}{more}. A COCO bbox is [x, y, width, height] in pixels, "
            "inside its image. Fix them, or pass ", Option("invalid_annotations", "skip"),
            " to write the images without them, as TensorFlow's converters do.",
            column=BBOX, rows=images.index[self.image[at]].unique().tolist(),
            option="invalid_annotations")


def _annotations(path: str, annotations: list[_Annotation], images: pd.DataFrame,
                 label_map: LabelMap | None,
                 keypoint_names: tuple[str, ...] | None = None) -> _Annotations:
    """The annotations as columns, checked; those the reference converters skip marked.

    Raises:
        SchemaError: for an annotation naming an unknown image or category, or whose
            segmentation is neither polygons nor an RLE mask of its image.
    """
    n = len(annotations)
    given_ids = [a.id for a in annotations]
    named = np.array([i is not None for i in given_ids], dtype=bool)
    ids = _objects([i if i is not None else k for k, i in enumerate(given_ids)])
    image = images.index.get_indexer(pd.Index([a.image_id for a in annotations],
                                              dtype=object))
    categories = [a.category_id for a in annotations]
    if label_map is not None:
        category = pd.Index(label_map.model_ids).get_indexer(pd.Index(categories, dtype=object))
        labels = np.asarray(label_map.names, dtype=object)[category]
    else:
        category = np.zeros(n, dtype=np.int64)
        labels = _objects(categories)
    _refuse_unknown(path, annotations, ids, named, image < 0, "naming an unknown image id",
                    "image_id")
    _refuse_unknown(path, annotations, ids, named, category < 0,
                    "naming an unknown category id", "category_id")
    given = np.array([a.bbox if a.bbox is not None else _NO_BOX for a in annotations],
                     dtype=np.float64).reshape(n, 4)
    widths = images["width"].to_numpy(dtype=np.float64)[image]
    heights = images["height"].to_numpy(dtype=np.float64)[image]
    x, y, w, h = given.T
    reasons = np.full(n, "", dtype=object)
    # Later tests first, so that an annotation keeps its first reason.
    reasons[(x < 0) | (y < 0)] = BEFORE_IMAGE
    reasons[(x + w > widths) | (y + h > heights)] = BEYOND_IMAGE
    reasons[(w <= 0) | (h <= 0)] = ZERO_SIZE
    with np.errstate(invalid="ignore"):
        boxes = np.stack([y / heights, x / widths, (y + h) / heights, (x + w) / widths],
                         axis=1)
    extras = {}
    areas = [a.area for a in annotations]
    missing = [k for k, a in enumerate(areas) if a is None]
    if len(missing) < n:
        if missing:
            k = missing[0]
            raise SchemaError(f"the COCO file {path!r} gives areas, but not for "
                              f"{_name(ids, named, k)} (area None). Give every annotation "
                              "its area, or none.", column=AREA, rows=[images.index[image[k]]])
        extras[AREA] = np.asarray(areas, dtype=np.float64)
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
        _check_segmentations(path, segmentations, ids, named, images, image)
    return _Annotations(ids, image, labels, boxes, given, reasons, extras, segmentations,
                        named)


_NO_BOX = (np.nan,) * 4


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


def _check_segmentations(path: str, segmentations: list, ids: np.ndarray,
                         named: np.ndarray, images: pd.DataFrame, image: np.ndarray) -> None:
    """Raises for a segmentation that is neither polygons (lists of three or more x, y
    pairs) nor an RLE mask of its image's size whose runs cover it exactly; decoded a
    batch at a time (their floats would take gigabytes at once) and let go."""
    from tfrecorder.write.annotations import rle_runs

    heights = images["height"].to_numpy()
    widths = images["width"].to_numpy()
    for start in range(0, len(segmentations), _SEGMENTATIONS_AT_ONCE):
        batch = segmentations[start:start + _SEGMENTATIONS_AT_ONCE]
        # Most are plainly polygons: only the others are decoded (RLEs, mistakes).
        others = (start + np.flatnonzero(~_plainly_polygons(batch))).tolist()
        text = b"[" + b",".join(bytes(segmentations[k]) if len(segmentations[k]) else b"null"
                                for k in others) + b"]"
        try:
            decoded = msgspec.json.decode(text, type=_SEGMENTATIONS)
        except msgspec.ValidationError as error:
            k = others[int(re.search(r"\$\[(\d+)\]", str(error)).group(1))]
            _refuse_segmentation(path, _name(ids, named, k), "segmentation "
                                 f"{_clip(msgspec.json.decode(segmentations[k]))}")
        for k, segmentation in zip(others, decoded):
            if segmentation is None:
                continue
            if isinstance(segmentation, list):
                polygon = next((p for p in segmentation if len(p) < 6 or len(p) % 2), None)
                if polygon is not None:
                    _refuse_segmentation(path, _name(ids, named, k), f"polygon "
                                         f"{_numbers(polygon)} is not x, y pairs (three or "
                                         "more)")
                continue
            height, width = heights[image[k]], widths[image[k]]
            if list(segmentation.size) != [height, width]:
                _refuse_segmentation(path, _name(ids, named, k), "an RLE mask of size "
                                     f"{list(segmentation.size)!r}, not the image's "
                                     f"[{height}, {width}]")
            try:
                covered = sum(rle_runs({"counts": segmentation.counts}))
            except (TypeError, ValueError, IndexError):
                covered = None
            if covered != height * width:
                _refuse_segmentation(path, _name(ids, named, k), "RLE counts "
                                     f"{_clip(segmentation.counts, 40)} cover {covered} "
                                     f"pixels, not {height} x {width}")


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


def _refuse_segmentation(path: str, name: str, problem: str) -> None:
    raise SchemaError(
        f"the COCO file {path!r} has 1 annotation with a segmentation that is neither "
        f"polygons nor an RLE mask of its image: {name}: {problem}. A COCO segmentation "
        "is a list of polygons [x0, y0, x1, y1, ...] in pixels, or an RLE mask {'size': "
        "[height, width], 'counts': ...} of its image, as pycocotools writes it.")


def _masks(found: _Annotations, keep: np.ndarray, images: pd.DataFrame) -> list:
    """Each image's masks (`MASK`): None for an image without objects, else its size and
    its objects' segmentations, as JSON text (b"[]": an object without one)."""
    kept = np.flatnonzero(keep)
    kept = kept[np.argsort(found.image[kept], kind="stable")]  # by image, in file order
    images_of = found.image[kept]
    starts = np.flatnonzero(np.r_[True, images_of[1:] != images_of[:-1]])
    ends = [*starts[1:].tolist(), len(kept)]
    empty = msgspec.Raw(b"[]")
    segmentations = [s if len(s) else empty
                     for s in map(found.segmentations.__getitem__, kept.tolist())]
    heights, widths = images["height"].tolist(), images["width"].tolist()
    masks = [None] * len(images)
    for start, end, at in zip(starts.tolist(), ends, images_of[starts].tolist()):
        masks[at] = {"size": [heights[at], widths[at]], "masks": segmentations[start:end]}
    return masks


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

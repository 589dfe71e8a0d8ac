"""Object detection, shared by every source of boxes: the objects' columns, the checks
every box passes, and the detection `Table` they make; also the shape of an AutoML
row's cells, which tells a detection CSV from a classification one.

An AutoML detection CSV, a Vertex AI JSONL file, a COCO JSON file and a DataFrame with a
`boxes` column each describe objects their own way. Each reader turns its objects into
`Objects` (columns with one entry per object, in file order) and hands them here, so
that a box is checked alike whichever file it came from, before any image is read, and
every detection table has the same columns (see `Table`): one row per image, `label`
the list of its objects' classes and the input `objects/bbox` their boxes as [ymin,
xmin, ymax, xmax], fractions of the image's size (TensorFlow Datasets' order).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.keypoints import default_names
from tfrecorder.format.layouts import (  # the objects' columns, named as the records name them
    AREA,
    BBOX,
    DIFFICULT,
    IS_CROWD,
    KEYPOINT_VISIBILITY,
    KEYPOINTS,
    MASK,
    NUM_KEYPOINTS,
    OBJECTS,
    TRUNCATED,
    VIEW,
)
from tfrecorder.format.manifest import AnnotationCounts
from tfrecorder.options import TableOptions
from tfrecorder.sources.annotation_policy import (
    ERROR,
    Objects,
    Settled,
    has_segmentation,
    joined,
    settle,
)
from tfrecorder.sources.schema import (
    column_types,
    is_list,
    is_missing,
    label_columns,
    synonym_role,
)
from tfrecorder.sources.table import ANNOTATED_SIZE, Table
from tfrecorder.sources.validate import split_cell, validate
from tfrecorder.wording import count, name_row

logger = logging.getLogger(__name__)

# The objects' inputs, as validate types them; MASK is no input (the layout writes it).
OBJECT_INPUTS = {BBOX: "FloatInput", AREA: "FloatInput", IS_CROWD: "IntegerInput",
                 DIFFICULT: "IntegerInput", TRUNCATED: "IntegerInput", VIEW: "StringInput",
                 KEYPOINTS: "FloatInput", KEYPOINT_VISIBILITY: "IntegerInput",
                 NUM_KEYPOINTS: "IntegerInput"}
# A DataFrame's column of boxes, by name (any case).
BOX_COLUMNS = ("boxes", "bbox", "bboxes", BBOX)
_EXAMPLES = 3  # objects an error shows


def check_objects(objects: Objects) -> None:
    """Raises for any object `annotation_policy.settle` would set aside: the strict
    check, for a source whose objects cannot be skipped one by one."""
    settle(objects, ERROR)


def _plain(value):
    """A NumPy scalar as the Python value it holds (as messages and `rows` show it)."""
    return value.item() if isinstance(value, np.generic) else value


def images_in_order(uris: Sequence[str], splits: Sequence | None, lines: Sequence,
                    where: str = "line") -> tuple[np.ndarray, np.ndarray]:
    """The entries (a source's lines) that first name each image, in order of first
    appearance, and each entry's image by that order: a source of one line an object
    becomes a table of one row an image.

    Raises:
        SchemaError: for an image whose entries name two splits, naming the lines.
    """
    # pd.factorize numbers the images in order of first appearance, in C.
    image_of, _ = pd.factorize(np.asarray(uris, dtype=object), use_na_sentinel=False)
    image_of = image_of.astype(np.int64)
    first = np.unique(image_of, return_index=True)[1]
    conflicts: dict[int, int] = {}  # image -> the first entry that disagrees
    if splits is not None:
        codes, cells = pd.factorize(np.asarray(splits, dtype=object), use_na_sentinel=False)
        named, _ = pd.factorize(np.array([_split_of(c) for c in cells], dtype=object))
        named = named[codes]
        differ = np.flatnonzero(named != named[first[image_of]])
        at = np.unique(image_of[differ], return_index=True)[1]
        for i in sorted(differ[at].tolist()):
            conflicts[int(image_of[i])] = i
    if conflicts:
        shown = "; ".join(
            f"{_plain(uris[i])!r} is {_shown(splits[first[image]])} at {where} "
            f"{_plain(lines[first[image]])} and {_shown(splits[i])} at {where} "
            f"{_plain(lines[i])}"
            for image, i in list(conflicts.items())[:_EXAMPLES])
        more = f"; and {len(conflicts) - _EXAMPLES} more images" \
            if len(conflicts) > _EXAMPLES else ""
        raise SchemaError(
            f"{count(len(conflicts), 'image')} under two splits: {shown}{more}. An image "
            "belongs to one split (a test image the model trains on tests nothing): give "
            "all the lines of an image the same one.", column="split",
            rows=[_plain(lines[i]) for image, i in conflicts.items()])
    return first, image_of


def _split_of(cell) -> str:
    found = split_cell(cell)
    return found if found is not None else str(cell).strip()


def _shown(cell) -> str:
    cell = _plain(cell)
    return repr(cell) if not is_missing(cell) else "unassigned (blank)"


def objects_table(images: pd.DataFrame, objects: Objects, source: pd.DataFrame,
                  base_dir: str, options: TableOptions, mask_sizes: Sequence | None = None,
                  label_type: str | None = None,
                  keypoint_names: Sequence[str] | None = None,
                  skipped: pd.DataFrame | None = None,
                  counts: AnnotationCounts | None = None,
                  annotated_sizes: Sequence | None = None) -> Table:
    """The detection table of a file's images and objects, settled by the one policy for
    bad annotations (`annotation_policy.settle`) and checked.

    Args:
        images: one row an image, indexed as the user names it (the line of its first
            row, its COCO id): `image_uri`, and `split` where the source names splits.
        source: one row an image, as the user would recognise it (the report's rows);
            it gains `objects`, each image's number of objects written.
        mask_sizes: per image, the [height, width] its objects' segmentations are drawn
            in (COCO's pixels), or None for polygons in fractions of the image (YOLO);
            only read where `objects.segmentations` is given.
        label_type: StringLabel where the source's labels are names ("1" included).
        keypoint_names: the names of the objects' keypoints (`KEYPOINTS`), where the
            source gives them (COCO's category `keypoints`).
        skipped: annotations the format set aside itself (`annotation_policy.skipped_rows`).
        counts: what the format counted itself (images without an annotation file,
            notes), which this completes.
        annotated_sizes: per image, the [height, width] in pixels its annotation states
            (None: none), where the format states sizes: the table's `ANNOTATED_SIZE`.
    """
    settled = settle(objects, options.invalid_annotations)
    objects = settled.objects
    ends = np.cumsum(np.bincount(objects.image, minlength=len(images)))
    order = np.argsort(objects.image, kind="stable")

    def per_image(values) -> pd.Series:
        ordered = np.asarray(values, dtype=object)[order].tolist() \
            if isinstance(values, np.ndarray) else [values[i] for i in order]
        return pd.Series([ordered[start:end] for start, end in zip([0, *ends[:-1]], ends)],
                         index=images.index, dtype=object)

    # Boxes (and any extra of k values an object: keypoints) go to validate as each
    # image's (n, k) array (views of one array), and numbers one an object (areas, crowd
    # flags) as each image's array too: typed a column at a time
    # (`column_values.input_column`), with no list an object.
    arrays = {BBOX: objects.boxes, **{
        name: values for name, values in objects.extras.items()
        if isinstance(values, np.ndarray) and (values.ndim == 2 or (
            values.ndim == 1 and values.dtype.kind in "iuf"))}}
    columns = {"label": per_image(objects.labels)}
    columns.update((name, pd.Series(_objects_of(np.split(values[order], ends[:-1])),
                                    index=images.index, dtype=object))
                   for name, values in arrays.items())
    columns.update((name, per_image(values)) for name, values in objects.extras.items()
                   if name not in arrays)
    schema = {name: OBJECT_INPUTS[name] for name in columns if name in OBJECT_INPUTS}
    if label_type is not None:
        schema["label"] = label_type
    table = validate(images.assign(**columns), base_dir=base_dir,
                     schema={**schema, **(options.schema or {})},
                     fill_missing=options.fill_missing, split=options.split)
    masks, without_mask = _masks(objects, per_image, mask_sizes)
    skipped = joined([skipped, settled.skipped])
    counts = dataclasses.replace(
        counts or AnnotationCounts(),
        objects=(counts.objects if counts else 0) + len(settled.kept),
        clipped=settled.clipped, without_mask=without_mask)
    table = as_detection(table, source.assign(objects=np.diff(ends, prepend=0)), masks,
                         {name: values.shape[1] for name, values in arrays.items()
                          if values.ndim == 2},
                         keypoint_names)
    if annotated_sizes is not None:
        table = dataclasses.replace(table, rows=table.rows.assign(**{ANNOTATED_SIZE: pd.Series(
            [None if size is None else [int(round(side)) for side in size]
             for size in annotated_sizes], index=table.rows.index, dtype=object)}))
    return dataclasses.replace(table, skipped_annotations=skipped, annotations=counts)


def _masks(objects: Objects, per_image: Callable, sizes: Sequence | None
           ) -> tuple[list | None, int]:
    """Each image's masks (`MASK`: None for an image without objects, else the size its
    segmentations are drawn in and one segmentation an object), and how many objects
    have none; no masks at all where no object has one (`annotation_policy`)."""
    if objects.segmentations is None:
        return None, 0
    drawn = np.fromiter(map(has_segmentation, objects.segmentations), bool,
                        len(objects.segmentations))
    if not drawn.any():
        return None, 0
    segmentations = per_image(objects.segmentations)
    masks = [None if not found else {
        "size": None if sizes is None else sizes[at],
        "masks": [s if has_segmentation(s) else [] for s in found]}
        for at, found in enumerate(segmentations.tolist())]
    return masks, int((~drawn).sum())


def _objects_of(values: list) -> np.ndarray:
    found = np.empty(len(values), dtype=object)
    found[:] = values
    return found


def as_detection(table: Table, source: pd.DataFrame, masks: Sequence | None,
                 widths: Mapping[str, int] | None = None,
                 keypoint_names: Sequence[str] | None = None) -> Table:
    """A validated table as a detection one: its `source`, its masks (`MASK`), boxes
    typed (None, 4) and the other columns of k values an object (`widths`) (None, k),
    even when no image has an object (validate cannot tell then), and the keypoints'
    names (given, or `keypoints.default_names`)."""
    widths = {BBOX: 4, **(widths or {})}
    inputs = tuple(dataclasses.replace(column, shape=(None, widths[column.name]))
                   if column.name in widths else column for column in table.inputs)
    rows = table.rows
    if masks is not None:
        rows = rows.assign(**{MASK: pd.Series(list(masks), index=rows.index, dtype=object)})
    names = keypoint_names
    if names is None:
        width = next((c.shape[1] for c in inputs if c.name == KEYPOINTS
                      and len(c.shape) == 2), None)
        names = default_names(width // 2) if width is not None else None
    return dataclasses.replace(table, rows=rows, source=source, inputs=inputs,
                               multi_label=True, task="detection",
                               keypoint_names=None if names is None else tuple(names))


# --- DataFrames with a column of boxes ----------------------------------------------

def box_column(frame: pd.DataFrame, schema: Mapping) -> str | None:
    """The frame's column of boxes, by name (`BOX_COLUMNS`, any case), unless the schema
    drops it."""
    found = [name for name in frame.columns if isinstance(name, str)
             and name.lower() in BOX_COLUMNS and not _dropped(schema, name)]
    if len(found) > 1:
        raise SchemaError(
            f"columns {found} all name the objects' boxes, so which one is meant is "
            "unclear. Keep one: drop the others with ",
            Option("schema", dict.fromkeys(found[1:])), ".")
    return found[0] if found else None


def _dropped(schema: Mapping, name: str) -> bool:
    declared = schema.get(name, "")
    return declared is None or (isinstance(declared, str) and declared.lower() == "drop")


def object_columns(frame: pd.DataFrame, schema: Mapping) -> list[str]:
    """The frame's columns named as the objects' (`objects/...`), unless dropped."""
    return [name for name in frame.columns if isinstance(name, str)
            and name.startswith(OBJECTS) and not _dropped(schema, name)]


def frame_is_detection(frame: pd.DataFrame, schema: Mapping) -> bool:
    """Whether a DataFrame is a detection table, told from its columns: a column of
    boxes beside a label column of lists as long, row by row (one class a box), or
    columns named `objects/...`. Any other column of boxes stays an input, as before
    detection tables existed: beside no label column (examples/object_detection.py's
    `boxes` and `classes` inputs), or beside labels of whole images."""
    boxes = box_column(frame, schema)
    if object_columns(frame, schema):
        return True
    if boxes is None:
        return False
    labels = label_columns(column_types(frame, schema))
    if len(labels) == 1 and _one_label_a_box(frame[boxes], frame[labels[0]]):
        logger.info("Reading columns %r and %r as a detection table (one class a box); "
                    "to keep them an input and multi-label classes, pass %s.", boxes,
                    labels[0], Option("task", "classification"))
        return True
    if _holds_lists(frame[boxes]):
        logger.info("Reading column %r as an input: a detection table also needs a label "
                    "column of lists, one class a box.", boxes)
    return False


def _one_label_a_box(boxes: pd.Series, labels: pd.Series) -> bool:
    """Whether every row's labels are a list as long as its list of boxes (some row
    having one)."""
    pairs = list(zip(boxes.tolist(), labels.tolist()))
    return any(is_list(b) and len(b) for b, _ in pairs) and all(
        (is_list(b) or is_missing_cell(b)) and (is_list(n) or is_missing_cell(n))
        and (len(b) if is_list(b) else 0) == (len(n) if is_list(n) else 0)
        for b, n in pairs)


def _holds_lists(column: pd.Series) -> bool:
    return column.dtype == object and any(map(is_list, column.head(100)))


def frame_table(frame: pd.DataFrame, base_dir: str, options: TableOptions,
                schema: Mapping, asked: bool) -> Table:
    """A DataFrame of one row an image, with a column of boxes (a list of [ymin, xmin,
    ymax, xmax] an image) and a label column of lists, one class a box, as the
    detection table; its other columns pass through as inputs.

    Args:
        schema: the options' schema, with what an in-memory source implies.
        asked: whether task="detection" was asked (else it was told from the columns:
            an error then also says how to keep the columns as inputs).
    """
    boxes = box_column(frame, schema)
    if boxes is None:
        raise SchemaError(
            "a detection table needs a column of boxes: 'boxes' (or 'bbox', 'bboxes', "
            f"{BBOX!r}) holding each image's list of [ymin, xmin, ymax, xmax], fractions of "
            f"its size; the table's columns are {list(frame.columns)}.")
    strangers = [n for n in object_columns(frame, schema)
                 if n not in _FRAME_OBJECTS and n != boxes]
    if strangers:
        name = strangers[0]
        raise SchemaError(
            f"column {name!r} takes a name of the objects' features "
            f"({', '.join(_FRAME_OBJECTS)}). Rename it, or drop it with ",
            Option("schema", {name: None}), ".", column=name)
    try:
        labels = _label_column(frame, schema, boxes)
        objects, unpaired = _frame_objects(frame, boxes, labels)
        # A row whose lists of labels and boxes differ in length cannot be paired: no
        # object of it is known, so the table is refused, whatever invalid_annotations.
        check_objects(objects.subset(np.isin(objects.image, objects.image[unpaired])))
        settled = settle(objects, options.invalid_annotations)
    except SchemaError as error:
        if asked:
            raise
        raise SchemaError(
            *error.parts, f" (The table is read as a detection table, for its column "
            f"{boxes!r}; to keep its columns as inputs instead, pass ",
            Option("task", "classification"), ".)", column=error.column,
            rows=error.rows) from None
    ours = {name: kind for name, kind in OBJECT_INPUTS.items()
            if name in frame.columns or name == BBOX}
    if MASK in frame.columns:
        ours[MASK] = None
    given = frame
    frame = _settled_cells(frame, boxes, labels, objects, settled)
    table = validate(frame.rename(columns={boxes: BBOX}), base_dir=base_dir,
                     schema={**ours, **{n: k for n, k in schema.items() if n != boxes}},
                     fill_missing=options.fill_missing, split=options.split)
    written = np.bincount(objects.image[settled.kept], minlength=len(frame))
    table = as_detection(table, given.assign(objects=written),
                         frame[MASK].tolist() if MASK in frame else None)
    return dataclasses.replace(
        table, skipped_annotations=settled.skipped,
        annotations=AnnotationCounts(objects=len(settled.kept), clipped=settled.clipped))


def _settled_cells(frame: pd.DataFrame, boxes: str, labels: str, objects: Objects,
                   settled: Settled) -> pd.DataFrame:
    """The frame with each row's objects as `settle` left them: the skipped ones out of
    every per-object cell (boxes, labels, areas, masks...), boxes clipped. Rows without
    a change keep their cells as given."""
    changed_boxes = ~np.isclose(settled.objects.boxes, objects.boxes[settled.kept]).all(axis=1)
    touched = np.union1d(objects.image[~settled.kept],
                         settled.objects.image[changed_boxes]).astype(np.int64)
    if not len(touched):
        return frame
    frame = frame.copy(deep=False)
    kept_at = np.cumsum(settled.kept) - 1  # an object's place among the kept
    for name in [boxes, labels, *(n for n in _FRAME_OBJECTS[1:] if n in frame.columns)]:
        column = frame[name].to_numpy(dtype=object).copy()
        for position in touched.tolist():
            mine = np.flatnonzero(objects.image == position)
            keep = settled.kept[mine]
            if name == boxes:
                column[position] = settled.objects.boxes[kept_at[mine[keep]]].tolist()
            elif name == MASK:
                cell = column[position]
                if isinstance(cell, Mapping):
                    column[position] = {**cell, "masks": [m for m, k in zip(
                        cell["masks"], keep) if k]}
            elif not is_missing_cell(column[position]):
                column[position] = [v for v, k in zip(list(column[position]), keep) if k]
        frame[name] = pd.Series(column, index=frame.index, dtype=object)
    return frame


# A DataFrame's columns of the objects' features: boxes and masks, and one value (a list
# of k: keypoints) a box.
_FRAME_OBJECTS = (BBOX, MASK, AREA, IS_CROWD, KEYPOINTS, KEYPOINT_VISIBILITY, NUM_KEYPOINTS)


def _label_column(frame: pd.DataFrame, schema: Mapping, boxes: str) -> str:
    labels = label_columns(column_types(frame.drop(columns=[boxes]), {
        n: k for n, k in schema.items() if n != boxes}))
    if len(labels) == 1 and all(is_missing_cell(v) or is_list(v)
                                for v in frame[labels[0]].tolist()):
        return labels[0]
    named = next((n for n in frame.columns if synonym_role(n) == "label"), "classes")
    if labels:
        what = f"its label column {labels[0]!r} holds one value an image, not a list" \
            if len(labels) == 1 else f"it has several label columns {labels}"
    else:
        what = "it has no label column"
    raise SchemaError(
        f"a detection table needs a label column holding each image's list of classes, "
        f"one a box (in the order of column {boxes!r}), but {what}. Name the column "
        f"'label', or declare it: ", Option("schema", {named: "StringLabel"}), ".",
        column=labels[0] if len(labels) == 1 else None)


def _frame_objects(frame: pd.DataFrame, boxes: str, labels: str
                   ) -> tuple[Objects, np.ndarray]:
    """A DataFrame's objects: each row's boxes and labels, paired in order (and its
    objects' areas and crowd flags checked to be one a box); and which objects lack
    their pair (a row of more labels than boxes, or fewer)."""
    image, object_labels, object_boxes, rows, written = [], [], [], [], []
    unpaired = []
    extras = [name for name in _FRAME_OBJECTS[2:] if name in frame.columns]
    for position, (row, cell, names) in enumerate(zip(
            frame.index.tolist(), frame[boxes].tolist(), frame[labels].tolist())):
        found = _box_cell(cell, boxes, row, frame.index)
        names = [] if is_missing_cell(names) else list(names)
        for name in extras:
            given = frame[name].iat[position]
            given = [] if is_missing_cell(given) else list(given)
            if len(given) != len(found):
                raise SchemaError(
                    f"column {name!r} holds {count(len(given), 'value')} at "
                    f"{name_row(row, frame.index)}, for "
                    f"{count(len(found), 'box', 'boxes')} in column {boxes!r}: one a box.",
                    column=name, rows=[row])
        for j in range(max(len(found), len(names))):
            image.append(position)
            rows.append(row)
            object_labels.append(names[j] if j < len(names) else None)
            object_boxes.append(found[j] if j < len(found) else [np.nan] * 4)
            written.append((row, j, object_labels[-1],
                            found[j].tolist() if j < len(found) else None))
            unpaired.append(j >= len(found) or j >= len(names))

    def where(i: int) -> str:
        row, j, label, box = written[i]
        return f"{name_row(row, frame.index)}, object {j}: label {label!r}, box {box}"

    def names(i: int) -> tuple[str, object, str]:
        row, j, label, box = written[i]
        return "the table", f"{name_row(row, frame.index)}, object {j}", \
            f"label {label!r}, box {box}"

    return (Objects.of(image, object_labels, object_boxes, rows, where, names=names),
            np.asarray(unpaired, dtype=bool))


def is_missing_cell(cell) -> bool:
    """A cell with no list: None or NaN (an image without objects)."""
    return not is_list(cell) and is_missing(cell)


def _box_cell(cell, column: str, row, index: pd.Index) -> np.ndarray:
    """The boxes of a cell, one a row; `row`: its label in `index`, for an error."""
    if is_missing_cell(cell):
        return np.empty((0, 4))
    try:
        found = np.asarray(cell, dtype=np.float64)
    except (TypeError, ValueError):
        found = None
    if found is not None and found.size == 0:
        return np.empty((0, 4))
    if found is None or found.ndim != 2 or found.shape[1] != 4:
        raise SchemaError(
            f"column {column!r} holds {cell!r} at {name_row(row, index)}: a cell of boxes "
            "is a list of [ymin, xmin, ymax, xmax] (one box: [[ymin, xmin, ymax, xmax]]; "
            "none: []).",
            column=column, rows=[row])
    return found


# --- AutoML rows: what the cells after the image's path hold --------------------------

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_TWO_VERTICES = (True, True, False, False, True, True, False, False)  # x1,y1,,,x3,y3,,


def automl_cells(cells: Sequence[str]) -> str:
    """What the cells after an AutoML row's image path hold: "image" (nothing: an image
    without labels or boxes), "label" (one label alone), "box" (a label and coordinates:
    a number with a fraction among them, or integers with blanks where a two-vertex box
    has them), "ambiguous"
    (eight 0s and 1s: a box's corners, or eight class ids), or "labels" (labels only:
    multi-label classification)."""
    cells = [cell.strip() for cell in cells]
    while cells and not cells[-1]:
        cells.pop()
    if len(cells) <= 1:
        return "label" if cells else "image"
    coordinates = cells[1:]
    if any(_NUMBER.match(cell) and not _INTEGER.match(cell) for cell in coordinates):
        return "box"  # a number with a fraction (or an exponent) is no class name
    if not all(not cell or _INTEGER.match(cell) for cell in coordinates):
        return "labels"
    given = tuple(bool(cell) for cell in coordinates)
    if given == _TWO_VERTICES[:len(given)] and len(given) > 4:
        return "box"
    if len(coordinates) == 8 and all(given) and set(coordinates) <= {"0", "1"}:
        return "ambiguous"
    return "labels"


def refuse_automl_boxes(lines: Sequence[int], records: Sequence[Sequence[str]],
                        lead: int, path: str) -> None:
    """Raises for a header-less CSV read as classification whose rows carry coordinates
    after their label: read as labels, they would become class names ('0.1')."""
    found = next(((line, record) for line, record in zip(lines, records)
                  if len(record) > lead + 1
                  and automl_cells(record[lead:]) in ("box", "ambiguous")), None)
    if found is not None:
        line, record = found
        raise SchemaError(
            f"the CSV file {path!r} has coordinates after the label at line {line} "
            f"({','.join(record[lead:])!r}): it looks like an AutoML object-detection CSV. "
            "Pass ", Option("task", "detection"), " to read its boxes, or ",
            Option("task", "classification"), " to read every cell after the path as a "
            "class name.", rows=[line], option="task")


"""Any source (DataFrame, CSV file, image folder) -> one validated table.

Every mistake in the input is found here, before a single image is read, and reported
with the column, the offending values and the first rows that hold them. The table keeps
the source rows exactly as given, so rejected rows can be reported in the user's terms.

Input follows the AutoML Vision image CSV: `[split,]image_uri[,label...]` without a
header row, or any columns under one (a header is detected, or can be forced). Split
values are case-insensitive TRAIN (or TRAINING), VALIDATION, TEST and UNASSIGNED; a blank
split means UNASSIGNED. Columns besides these are typed in `schema`.
"""

from __future__ import annotations

import csv
import functools
import logging
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import SchemaError
from tfrecorder.schema import (
    IMAGE_URI,
    INPUT_KINDS,
    INTEGER_LABEL,
    LABEL_TYPES,
    RESERVED,
    SPLIT_KEY,
    STRING_LABEL,
    Column,
    column_types,
    flat,
    input_column,
    is_list,
    is_missing,
    label_columns,
    name_rows,
)

logger = logging.getLogger(__name__)

SPLITS = ("TRAIN", "VALIDATION", "TEST")
UNASSIGNED = "UNASSIGNED"
_SPLIT_ALIASES = {"TRAIN": "TRAIN", "TRAINING": "TRAIN", "VALIDATION": "VALIDATION",
                  "TEST": "TEST", "UNASSIGNED": UNASSIGNED, "": UNASSIGNED}
_INTEGER = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True)
class Table:
    """A validated table.

    Attributes:
        rows: one row per source row: `image_uri` (as given) and `uri` (resolved for
            reading) when the table has images; `split` (TRAIN, VALIDATION, TEST or
            UNASSIGNED); `label` when it has labels (all str or all int; lists of them
            when rows are multi-label); and one column per input, by its name, holding
            the values as stored. Its index is the source's.
        source: the rows as the user gave them, for the rejected-rows report.
        inputs: the input columns (features besides image, label and split).
        multi_label: whether each row's label is a list.
    """

    rows: pd.DataFrame
    source: pd.DataFrame
    inputs: tuple[Column, ...] = ()
    multi_label: bool = False

    @property
    def has_labels(self) -> bool:
        return "label" in self.rows.columns

    @property
    def has_images(self) -> bool:
        return "image_uri" in self.rows.columns

    @functools.cached_property
    def remote_images(self) -> list[str]:
        """The first image URI in each bucket the table reads (gs://, s3://, ...)."""
        if not self.has_images:
            return []
        uris = self.rows["uri"]
        remote = uris[uris.str.contains("://", regex=False)
                      & ~uris.str.startswith("file://")]
        buckets = remote.str.extract(r"^([^:/]+://[^/]*)", expand=False)
        return remote[~buckets.duplicated()].tolist()

    @property
    def has_remote_images(self) -> bool:
        return bool(self.remote_images)


def load_table(source: pd.DataFrame | str | os.PathLike, header: bool | None = None,
               schema: Mapping | None = None, fill_missing=None) -> Table:
    """Reads and validates `source`: a DataFrame, a CSV path, or an image folder.

    Args:
        source: the DataFrame, the path of a CSV file, or an image folder laid out as
            `label/file` or `split/label/file`.
        header: for CSV files, whether the first line names the columns; None detects it
            (a first line that names `image_uri`, `split`, `label` or a schema column).
        schema, fill_missing: see `validate`.
    """
    if isinstance(source, pd.DataFrame):
        return validate(source, base_dir=os.getcwd(), schema=schema, fill_missing=fill_missing)
    path = fs.local_path(os.fspath(source))
    if fs.is_folder(path):
        return validate(_folder_table(path), base_dir=path, schema=schema)
    if not fs.exists(path):
        raise FileNotFoundError(f"no such CSV file or image folder: {path!r}")
    # Relative image paths in a CSV are relative to the CSV's folder, local or remote.
    return validate(_read_csv(path, header, names=set(schema or ())), base_dir=fs.dirname(path),
                    schema=schema,
                    fill_missing=fill_missing, text_numbers=True)


def validate(frame: pd.DataFrame, base_dir: str, schema: Mapping | None = None,
             fill_missing=None, text_numbers: bool = False) -> Table:
    """Checks every column and returns the canonical table (see `Table`).

    Args:
        base_dir: relative local image paths are resolved against it (the CSV's folder,
            or the working directory for a DataFrame).
        schema: column name -> TFRecorder type name (see `tfrecorder.schema`), or None to
            drop the column; columns it does not name are typed by name and dtype.
        fill_missing: the value for missing cells of input columns: one for all, or a
            dict by column; by default a missing value is an error.
        text_numbers: type text columns whose values all read as numbers as numbers (a
            CSV file's columns are all text).
    """
    types = column_types(frame, schema)
    fills = fill_missing if isinstance(fill_missing, Mapping) else {}
    inputs = [name for name, type_name in types.items() if type_name in INPUT_KINDS]
    if set(fills) - set(inputs):
        raise SchemaError(f"fill_missing names columns that are not inputs: "
                          f"{sorted(set(fills) - set(inputs))} (the inputs: {inputs}).")
    if frame.index.has_duplicates:
        frame = frame.reset_index(drop=True)
    rows = pd.DataFrame(index=frame.index)
    image_column = next((n for n, t in types.items() if t == IMAGE_URI), None)
    if image_column is not None:
        image_uri = _image_uris(frame[image_column])
        rows["image_uri"] = image_uri
        rows["uri"] = [_resolve(uri, base_dir) for uri in image_uri]
    split_column = next((n for n, t in types.items() if t == SPLIT_KEY), None)
    rows["split"] = _splits(frame[split_column]) if split_column is not None else UNASSIGNED
    multi_label = False
    if label_columns(types):
        rows["label"], multi_label = _labels(frame, label_columns(types), types)
    columns = []
    for name in inputs:
        type_name = types[name]
        if text_numbers and name not in (schema or {}) and type_name == "StringInput":
            type_name = _number_type(frame[name]) or type_name
        column, values = input_column(frame[name], type_name,
                                      fills.get(name) if fills else fill_missing)
        columns.append(column)
        rows[name] = pd.Series(values, index=frame.index, dtype=object)
    _check_inputs(frame, columns, image_column, schema or {})
    return Table(rows=rows, source=frame, inputs=tuple(columns), multi_label=multi_label)


def _check_inputs(frame: pd.DataFrame, inputs: list[Column], image_column: str | None,
                  schema: Mapping) -> None:
    """No input may take a feature's name, and without an image column, no text column
    the schema leaves untyped may look like image paths (a misnamed `image_uri`)."""
    taken = [c.name for c in inputs if c.name in RESERVED]
    if taken:
        raise SchemaError(
            f"column {taken[0]!r} would replace a feature tfrecorder writes "
            f"({', '.join(RESERVED)}). Rename it, or drop it with "
            f"schema={{{taken[0]!r}: None}}.")
    if image_column is not None:
        return
    for column in inputs:
        values = frame[column.name].tolist()[:100]
        if column.kind == "string" and column.name not in schema and values and all(
                isinstance(v, str) and v.strip().lower().endswith(_IMAGE_EXTENSIONS)
                for v in values):
            raise SchemaError(
                f"the table has no 'image_uri' column, and column {column.name!r} looks "
                f"like image paths (e.g. {values[0]!r}). Rename it to 'image_uri', or pass "
                f"schema={{{column.name!r}: 'ImageUri'}}; to store the paths as text only, "
                f"schema={{{column.name!r}: 'StringInput'}}.")


def _number_type(column: pd.Series) -> str | None:
    """IntegerInput or FloatInput for a text column whose values all read as numbers."""
    values = [v.strip() for v in column.tolist() if isinstance(v, str) and v.strip()]
    if not values or len(values) < sum(not is_missing(v) for v in column.tolist()):
        return None
    if all(_INTEGER.match(v) for v in values):
        return "IntegerInput"
    try:
        [float(v) for v in values]
    except ValueError:
        return None
    return "FloatInput"


def _items(column: pd.Series) -> list[tuple]:
    """(index, value) pairs as plain Python objects: iterating pandas' own (Arrow-backed)
    arrays element by element is many times slower."""
    return list(zip(column.index.tolist(), column.tolist()))


def _image_uris(column: pd.Series) -> list[str]:
    bad = [i for i, v in _items(column) if is_missing(v) or not isinstance(v, str)]
    if bad:
        raise SchemaError(
            f"column {column.name!r} has empty or non-text values at {name_rows(bad)}. "
            "Every row needs the path or gs:// URI of its image; drop or fix those rows."
        )
    return [v.strip() for v in column.tolist()]


def _resolve(uri: str, base_dir: str) -> str:
    uri = fs.local_path(uri)
    if fs.is_remote(uri) or os.path.isabs(uri) or not base_dir:
        return uri
    if fs.is_remote(base_dir):
        scheme, folder = base_dir.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(folder, uri))}"
    return os.path.normpath(os.path.join(base_dir, uri))


def _splits(column: pd.Series) -> list[str]:
    normalized, bad = [], {}
    for i, value in _items(column):
        key = "" if is_missing(value) else str(value).strip().upper()
        split = _SPLIT_ALIASES.get(key)
        if split is None:
            bad.setdefault(str(value), []).append(i)
        normalized.append(split)
    if bad:
        values = "; ".join(f"{v!r} at {name_rows(rows)}" for v, rows in bad.items())
        raise SchemaError(
            f"column {column.name!r} has unknown values: {values}. Use TRAIN, VALIDATION, TEST or "
            "UNASSIGNED (any case; TRAINING is read as TRAIN, a blank as UNASSIGNED)."
        )
    return normalized


def _labels(frame: pd.DataFrame, names: list[str], types: Mapping) -> tuple[list, bool]:
    """The labels of every row (all str or all int), and whether rows are multi-label:
    a label column holding lists, or several label columns (their blank cells skipped)."""
    declared = next((types[n] for n in names if types[n] in LABEL_TYPES), None)
    what = f"column {names[0]!r}" if len(names) == 1 else f"label columns {names}"
    cells = [frame[name].tolist() for name in names]
    if len(names) == 1 and not (frame[names[0]].dtype == object
                                and any(is_list(v) for v in cells[0])):
        items = list(zip(frame.index.tolist(), cells[0]))
        missing = [i for i, v in items if is_missing(v)]
        if missing:
            raise SchemaError(
                f"{what} is empty at {name_rows(missing)}. Give every row a label, or drop "
                "the label column to write a dataset without labels.")
        return _label_values(items, what, declared), False
    per_row = [[v for cell in row for v in (flat(cell) if is_list(cell) else [cell])
                if not is_missing(v)] for row in zip(*cells)]
    items = [(i, v) for i, labels in zip(frame.index.tolist(), per_row) for v in labels]
    values = iter(_label_values(items, what, declared))
    return [[next(values) for _ in labels] for labels in per_row], True


def _label_values(items: list[tuple], what: str, declared: str | None) -> list:
    """All-str or all-int labels; raises on numbers mixed with text, on fractions, and on
    text declared IntegerLabel."""
    if declared == STRING_LABEL:
        return [v.strip() if isinstance(v, str) else str(v) for _, v in items]
    # Integer strings count as numbers (CSV files are read as text).
    texts = [(i, v) for i, v in items if isinstance(v, str) and not _INTEGER.match(v.strip())]
    if texts and declared == INTEGER_LABEL:
        raise SchemaError(
            f"{what} is IntegerLabel but holds text at {name_rows(i for i, _ in texts)} (e.g. "
            f"{texts[0][1]!r}). Declare it StringLabel to map names to ids.")
    if texts and len(texts) < len(items):
        numbers = [(i, v) for i, v in items
                   if not isinstance(v, str) or _INTEGER.match(v.strip())]
        raise SchemaError(
            f"{what} mixes numbers ({name_rows(i for i, _ in numbers)}, e.g. "
            f"{numbers[0][1]}) and text ({name_rows(i for i, _ in texts)}, e.g. "
            f"{texts[0][1]!r}). Use class names everywhere or integer class ids everywhere.")
    if texts:
        return [v.strip() for _, v in items]
    fractional = [(i, v) for i, v in items if isinstance(v, float) and not v.is_integer()]
    if fractional:
        raise SchemaError(
            f"{what} has non-integer numbers at {name_rows(i for i, _ in fractional)} "
            f"(e.g. {float(fractional[0][1])}). Labels are class ids or class names.")
    ids = [int(v.strip()) if isinstance(v, str) else int(v) for _, v in items]
    negative = [i for (i, _), label in zip(items, ids) if label < 0]
    if negative:
        raise SchemaError(
            f"{what} has negative class ids at {name_rows(negative)}. Class ids count from "
            "0; use class names, or ids 0, 1, 2, ...")
    return ids


# --- sources -------------------------------------------------------------------------

def _read_csv(path: str, header: bool | None, names: set[str] = frozenset()) -> pd.DataFrame:
    """Reads an AutoML-style CSV as text; the index holds each row's line number.

    Without `header`, a first line is a header when it names `image_uri`, `split` or
    `label`, or a column of the schema (`names`).
    """
    text = fs.read_bytes(path).decode("utf-8-sig")
    lines, records = [], []
    for line_number, record in enumerate(csv.reader(text.splitlines()), start=1):
        if any(cell.strip() for cell in record):
            lines.append(line_number)
            records.append(record)
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    if header is None:
        header = any(cell.strip().lower() in ("image_uri", "split", "label")
                     or cell.strip() in names for cell in records[0])
    if header:
        names = [cell.strip() for cell in records[0]]
        lines, records = lines[1:], records[1:]
    else:
        width = max(len(r) for r in records)
        names = _automl_columns(records, width)
        if len(names) < width:  # AutoML multi-label rows: the trailing cells are labels
            lead = len(names) - 1
            records = [r[:lead] + [""] * (lead - len(r)) + [
                [cell.strip() for cell in r[lead:] if cell.strip()]] for r in records]
    width = len(names)
    short = [n for n, r in zip(lines, records) if len(r) > width]
    if short:
        raise SchemaError(
            f"the CSV file {path!r} has more than {width} fields at {name_rows(short)} "
            f"(lines). Its columns are {names}."
        )
    padded = [r + [""] * (width - len(r)) for r in records]
    return pd.DataFrame(padded, columns=names, index=pd.Index(lines, name="line"), dtype=object)


def _automl_columns(records: list[list[str]], width: int) -> list[str]:
    """The columns of header-less AutoML Vision rows: `[split,]image_uri[,label...]`.

    Two cells are `split,image_uri` when every first cell is a split name; with three or
    more, the first is the split unless every first cell looks like an image path (then a
    misspelt split is reported as such, not read as a path).
    """
    if width == 1:
        return ["image_uri"]
    if width == 2:
        if all(r[0].strip().upper() in _SPLIT_ALIASES for r in records):
            return ["split", "image_uri"]
        return ["image_uri", "label"]
    has_split = not all(_looks_like_path(r[0]) for r in records)
    return ["split", "image_uri", "label"] if has_split else ["image_uri", "label"]


def _looks_like_path(cell: str) -> bool:
    cell = cell.strip().lower()
    return "/" in cell or "\\" in cell or cell.endswith(_IMAGE_EXTENSIONS)


_FOLDER_SPLITS = {"train", "training", "validation", "test", "unassigned"}
_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp")


def _folder_table(root: str) -> pd.DataFrame:
    """Rows for a folder laid out as `label/file` or `split/label/file`.

    A first level made only of split names means `split/label/...`; otherwise the first
    level is the label. Files may sit deeper below the label folder. Hidden files (a
    leading '.') are skipped, and so, with a warning, are non-image files outside the
    label folders (a README); images there are an error.
    """
    root = root.rstrip("/") if fs.is_remote(root) else os.path.abspath(root)
    entries = []
    for uri in fs.list_files(root):
        parts = uri[len(root):].strip("/").split("/" if fs.is_remote(root) else os.sep)
        if not any(p.startswith(".") for p in parts):
            entries.append((uri, parts))
    if not entries:
        raise SchemaError(f"the folder {root!r} holds no files.")
    by_split = all(parts[0].lower() in _FOLDER_SPLITS for _, parts in entries
                   if len(parts) > 1)
    depth = 3 if by_split else 2
    stray = [uri for uri, parts in entries if len(parts) < depth]
    stray_images = [uri for uri in stray if uri.lower().endswith(_IMAGE_EXTENSIONS)]
    if stray_images:
        layout = "split/label/file" if by_split else "label/file"
        raise SchemaError(
            f"the folder {root!r} is read as {layout}, but {len(stray_images)} image(s) "
            f"sit outside a label folder, e.g. {stray_images[:3]}. Move them into one."
        )
    if stray:
        logger.warning("Skipping %d file(s) outside the label folders of %s: %s",
                       len(stray), root, stray[:5])
        entries = [(uri, parts) for uri, parts in entries if len(parts) >= depth]
    if not entries:
        raise SchemaError(f"the folder {root!r} holds no images in label folders.")
    frame = pd.DataFrame(
        {"image_uri": [uri for uri, _ in entries],
         "label": [parts[depth - 2] for _, parts in entries]}
    )
    if by_split:
        frame.insert(0, "split", [parts[0] for _, parts in entries])
    return frame

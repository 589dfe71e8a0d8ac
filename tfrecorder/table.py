"""Any source (DataFrame, CSV file, image folder) -> one validated table.

Every mistake in the input is found here, before a single image is read, and reported
with the column, the offending values and the first rows that hold them. The table keeps
the source rows exactly as given, so rejected rows can be reported in the user's terms.

Input follows the AutoML Vision image CSV: `[split,]image_uri[,label]`, without a header
row (a header is detected, or can be forced). Split values are case-insensitive TRAIN (or
TRAINING), VALIDATION, TEST and UNASSIGNED; a blank split means UNASSIGNED.
"""

from __future__ import annotations

import csv
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import SchemaError

logger = logging.getLogger(__name__)

SPLITS = ("TRAIN", "VALIDATION", "TEST")
UNASSIGNED = "UNASSIGNED"
_SPLIT_ALIASES = {"TRAIN": "TRAIN", "TRAINING": "TRAIN", "VALIDATION": "VALIDATION",
                  "TEST": "TEST", "UNASSIGNED": UNASSIGNED, "": UNASSIGNED}
_INTEGER = re.compile(r"^[+-]?\d+$")
_MAX_ROWS_NAMED = 5


@dataclass(frozen=True)
class Table:
    """A validated table.

    Attributes:
        rows: one row per image, with `image_uri` (as given), `uri` (resolved for
            reading), `split` (TRAIN, VALIDATION, TEST or UNASSIGNED) and, when the source
            has labels, `label` (all str or all int). Its index is the source's.
        source: the rows as the user gave them, for the rejected-rows report.
    """

    rows: pd.DataFrame
    source: pd.DataFrame

    @property
    def has_labels(self) -> bool:
        return "label" in self.rows.columns


def load_table(source: pd.DataFrame | str | os.PathLike, header: bool | None = None) -> Table:
    """Reads and validates `source`: a DataFrame, a CSV path, or an image folder.

    Args:
        source: the DataFrame, the path of a CSV file, or an image folder laid out as
            `label/file` or `split/label/file`.
        header: for CSV files, whether the first line names the columns; None detects it
            (a first line that mentions `image_uri`).
    """
    if isinstance(source, pd.DataFrame):
        return validate(source, base_dir=os.getcwd())
    path = os.fspath(source)
    if _is_folder(path):
        return validate(_folder_table(path), base_dir=path)
    if not fs.exists(path):
        raise FileNotFoundError(f"no such CSV file or image folder: {path!r}")
    base_dir = os.path.dirname(os.path.abspath(path)) if not fs.is_remote(path) else ""
    return validate(_read_csv(path, header), base_dir=base_dir)


def validate(frame: pd.DataFrame, base_dir: str) -> Table:
    """Checks every column and returns the canonical table (see `Table`).

    Relative local image paths are resolved against `base_dir` (the CSV's folder, or the
    working directory for a DataFrame).
    """
    if "image_uri" not in frame.columns:
        raise SchemaError(
            f"the table has no 'image_uri' column (its columns: {list(frame.columns)}). "
            "Name the column that holds image paths or gs:// URIs 'image_uri', e.g. "
            "df.rename(columns={'path': 'image_uri'})."
        )
    if frame.index.has_duplicates:
        frame = frame.reset_index(drop=True)
    image_uri = _image_uris(frame["image_uri"])
    rows = pd.DataFrame(
        {
            "image_uri": image_uri,
            "uri": [_resolve(uri, base_dir) for uri in image_uri],
            "split": _splits(frame["split"]) if "split" in frame.columns else UNASSIGNED,
        },
        index=frame.index,
    )
    if "label" in frame.columns:
        rows["label"] = _labels(frame["label"])
    return Table(rows=rows, source=frame)


def name_rows(index: Iterable) -> str:
    """'rows 3, 7 and 12 more' for an error message."""
    index = list(index)
    shown = ", ".join(str(i) for i in index[:_MAX_ROWS_NAMED])
    more = f" and {len(index) - _MAX_ROWS_NAMED} more" if len(index) > _MAX_ROWS_NAMED else ""
    return f"row{'s' if len(index) > 1 else ''} {shown}{more}"


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NA \
        or (isinstance(value, str) and not value.strip())


def _items(column: pd.Series) -> list[tuple]:
    """(index, value) pairs as plain Python objects: iterating pandas' own (Arrow-backed)
    arrays element by element is many times slower."""
    return list(zip(column.index.tolist(), column.tolist()))


def _image_uris(column: pd.Series) -> list[str]:
    bad = [i for i, v in _items(column) if _is_missing(v) or not isinstance(v, str)]
    if bad:
        raise SchemaError(
            f"column 'image_uri' has empty or non-text values at {name_rows(bad)}. "
            "Every row needs the path or gs:// URI of its image; drop or fix those rows."
        )
    return [v.strip() for v in column.tolist()]


def _resolve(uri: str, base_dir: str) -> str:
    if fs.is_remote(uri) or os.path.isabs(uri) or not base_dir:
        return uri
    return os.path.normpath(os.path.join(base_dir, uri))


def _splits(column: pd.Series) -> list[str]:
    normalized, bad = [], {}
    for i, value in _items(column):
        key = "" if _is_missing(value) else str(value).strip().upper()
        split = _SPLIT_ALIASES.get(key)
        if split is None:
            bad.setdefault(str(value), []).append(i)
        normalized.append(split)
    if bad:
        values = "; ".join(f"{v!r} at {name_rows(rows)}" for v, rows in bad.items())
        raise SchemaError(
            f"column 'split' has unknown values: {values}. Use TRAIN, VALIDATION, TEST or "
            "UNASSIGNED (any case; TRAINING is read as TRAIN, a blank as UNASSIGNED)."
        )
    return normalized


def _labels(column: pd.Series) -> list:
    """All-int or all-str labels; raises on missing values and on numbers mixed with text."""
    items = _items(column)
    missing = [i for i, v in items if _is_missing(v)]
    if missing:
        raise SchemaError(
            f"column 'label' is empty at {name_rows(missing)}. Give every row a label, or drop "
            "the 'label' column to write a dataset without labels."
        )
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_integer_dtype(column):
        return [int(v) for _, v in items]
    if pd.api.types.is_float_dtype(column):
        fractional = [(i, v) for i, v in items if not float(v).is_integer()]
        if fractional:
            raise SchemaError(
                f"column 'label' has non-integer numbers at {name_rows(i for i, _ in fractional)}"
                f" (e.g. {float(fractional[0][1])}). Labels are class ids or class names."
            )
        return [int(v) for _, v in items]
    # Text (CSV files are read as text): integer strings count as numbers.
    numbers = [(i, v) for i, v in items
               if not isinstance(v, str) or _INTEGER.match(v.strip())]
    if len(numbers) == len(items):
        return [int(v.strip()) if isinstance(v, str) else int(v) for _, v in items]
    if numbers:
        texts = [(i, v) for i, v in items if isinstance(v, str) and not _INTEGER.match(v.strip())]
        raise SchemaError(
            f"column 'label' mixes numbers ({name_rows(i for i, _ in numbers)}, e.g. "
            f"{numbers[0][1]}) and text ({name_rows(i for i, _ in texts)}, e.g. {texts[0][1]!r}). "
            "Use class names everywhere or integer class ids everywhere."
        )
    return [v.strip() for _, v in items]


# --- sources -------------------------------------------------------------------------

_AUTOML_COLUMNS = {1: ["image_uri"], 2: ["image_uri", "label"], 3: ["split", "image_uri", "label"]}


def _read_csv(path: str, header: bool | None) -> pd.DataFrame:
    """Reads an AutoML-style CSV as text; the index holds each row's line number."""
    text = fs.read_bytes(path).decode("utf-8-sig")
    lines, records = [], []
    for line_number, record in enumerate(csv.reader(text.splitlines()), start=1):
        if any(cell.strip() for cell in record):
            lines.append(line_number)
            records.append(record)
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    if header is None:
        header = any(cell.strip().lower() == "image_uri" for cell in records[0])
    if header:
        names = [cell.strip() for cell in records[0]]
        lines, records = lines[1:], records[1:]
    else:
        width = max(len(r) for r in records)
        if width not in _AUTOML_COLUMNS:
            raise SchemaError(
                f"the CSV file {path!r} has rows of {width} columns; without a header "
                "row tfrecorder reads AutoML Vision rows: [split,]image_uri[,label]. "
                "Add a header row naming the columns (split, image_uri, label)."
            )
        names = _AUTOML_COLUMNS[width]
        if width == 2 and all(r[0].strip().upper() in _SPLIT_ALIASES for r in records):
            names = ["split", "image_uri"]
    width = len(names)
    short = [n for n, r in zip(lines, records) if len(r) > width]
    if short:
        raise SchemaError(
            f"the CSV file {path!r} has more than {width} fields at {name_rows(short)} "
            f"(lines). Its columns are {names}."
        )
    padded = [r + [""] * (width - len(r)) for r in records]
    return pd.DataFrame(padded, columns=names, index=pd.Index(lines, name="line"), dtype=object)


def _is_folder(path: str) -> bool:
    if not fs.is_remote(path):
        return os.path.isdir(path)
    return path.endswith("/") or (
        not fs.exists(path) and next(fs.list_files(path), None) is not None)


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

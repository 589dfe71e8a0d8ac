"""CSV files, as AutoML Vision writes them: `[split,]image_uri[,label...]` without a
header row, or any columns under one (a header is detected, or can be forced).

The file is read exactly as written: records are parsed by the csv module (a quoted cell
keeps its line breaks), and errors name the physical line each record starts on. Cells
are text; `validate` types columns of numbers by their values. A file larger than
memory is read a chunk of records at a time (`chunks`), with the same parsing.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator

import numpy as np
import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources import chunked
from tfrecorder.sources.detection import refuse_automl_boxes
from tfrecorder.sources.image_paths import first_local_file_is_image, looks_like_path
from tfrecorder.sources.schema import misspelled_role, role_by_name, synonym_role
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import SAMPLE, split_cell
from tfrecorder.storage import fs
from tfrecorder.wording import LINE, name_rows
from tfrecorder.write.heap import release_freed_memory


def claims(path: str, folder: bool) -> bool:
    """Every file that no other format claims (the dispatcher asks it last)."""
    return not folder


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's table."""
    names = set(options.schema or ())
    # Unless the task is said, coordinates after an AutoML row's label are an error, not
    # class names: the rows of an AutoML detection file `automl_detection` did not claim.
    boxes = options.task == "auto"
    return chunked.read_whole_or_in_chunks(
        path, base_dir, options, text_numbers=True,
        whole=lambda: read_csv(path, options.header, names, base_dir, refuse_boxes=boxes),
        chunks=lambda rows: chunks(path, options.header, names, base_dir, rows,
                                   refuse_boxes=boxes))


def read_records(path: str) -> tuple[list[int], list[list[str]]]:
    """The file's non-blank records, parsed as `read_csv` parses them, and the line each
    starts on."""
    return records_of(decode(fs.read_bytes(path), path), path)


def head_text(path: str, size: int) -> str:
    """The text of a file's first `size` bytes, up to its last whole line when there is
    more (one request for a remote file), for a format to tell its files by their content;
    "" for a file that cannot be read as UTF-8 text (the format that reads it says why)."""
    try:
        if fs.is_remote(path):
            with fs.storage_errors(path):
                data = fs.filesystem(path).cat_file(path, start=0, end=size)
        else:
            with fs.open_read(path) as file:
                data = file.read(size)
        text = data.decode("utf-8-sig", errors="ignore" if len(data) == size else "strict")
    except (OSError, ValueError):  # StorageError is an OSError; UnicodeError a ValueError
        return ""
    return text[:text.rfind("\n") + 1] if len(data) == size else text


def records_of(text: str, path: str) -> tuple[list[int], list[list[str]]]:
    """The non-blank records of a CSV file's `text`, and the line each starts on."""
    return next(_records(io.StringIO(text, newline=""), path))


def read_csv(path: str, header: bool | None, names: set[str] = frozenset(),
             base_dir: str = "", refuse_boxes: bool = False) -> pd.DataFrame:
    """Reads an AutoML-style CSV as text; the index holds the line each record starts on.

    Records are parsed by the csv module over the whole text, so a quoted cell keeps its
    line breaks (and U+2028 and its kin, which `str.splitlines` would split on).

    Without `header`, a first record is a header when it names a column (`role_by_name`,
    `synonym_role`, `misspelled_role`, or a column of the schema: `names`) and holds no
    image path.

    The text is parsed twice: once for what every record says of the columns (`_Shape`),
    then into columns a batch of records at a time, each column of text Arrow-backed at
    once (`_compact`): a million records held as lists of Python strings took 700 MB.

    Args:
        refuse_boxes: raise for AutoML rows with coordinates after their label
            (`detection.refuse_automl_boxes`).
    """
    frames = _compact_frames(fs.read_bytes(path), path, header, names, base_dir,
                             refuse_boxes)
    release_freed_memory()  # the file's bytes and the parser's strings: 60 MB a million
    frame = pd.concat(frames) if len(frames) > 1 else frames[0]
    del frames
    frame.index = _line_index(frame.index)
    for name in frame.columns:  # a column at a time: one copy of one column at once
        if isinstance(frame[name].dtype, pd.StringDtype):
            frame[name] = _one_array(frame[name])
            release_freed_memory()  # its chunks, before the next column is copied
    return frame


def _one_array(column: pd.Series) -> pd.Series:
    """Arrow-backed text as one array, not one a batch: workers take a segment's rows
    by position, a take from each chunk they fall in (16 rows from 61 chunks took a
    fifth of a 16x16 JPEG's time)."""
    import pyarrow as pa

    values = pa.array(column.array)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([values]), dtype=column.dtype),
                     index=column.index, name=column.name, copy=False)


def chunks(path: str, header: bool | None, names: set[str], base_dir: str,
           chunk_rows: int, refuse_boxes: bool = False) -> Iterator[pd.DataFrame]:
    """`read_csv`'s table in frames of `chunk_rows` records, read as a stream: the
    columns are found in the first chunk (a header, or AutoML's columns) and kept."""
    binary = fs.open_read(path)
    if binary.peek(2)[:2] in _UTF16_MARKS:
        binary.close()
        _refuse_utf16(path)
    with io.TextIOWrapper(binary, encoding="utf-8-sig", newline="") as text:
        yield from _csv_frames(_records(text, path, chunk_rows), path, header, names,
                               base_dir, refuse_boxes)


def _csv_frames(batches: Iterator[tuple[list[int], list[list[str]]]], path: str,
                header: bool | None, names: set[str], base_dir: str,
                refuse_boxes: bool = False, shape: _Shape | None = None
                ) -> Iterator[pd.DataFrame]:
    """A DataFrame of text cells for each batch of records (`_records`), under the
    columns the records' `shape` names or implies (by default, the first batch's)."""
    lines, records = next(batches, ([], []))
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    if shape is None:
        shape = _Shape()
        shape.add(records)
    _check_delimiter(shape, path, names)
    if header is None:
        header = any(names_a_column(cell, names) for cell in records[0]) and not any(
            looks_like_path(cell) for cell in records[0])
    lead = None  # AutoML multi-label rows: the cells from `lead` on are the labels
    if header:
        names = [cell.strip() for cell in records[0]]
        lines, records = lines[1:], records[1:]
        if not records:
            lines, records = next(batches, ([], []))
        if not records:
            raise SchemaError(
                f"the CSV file {path!r} has a header ({', '.join(names)}) but no rows, so "
                "there is nothing to convert. Add the rows below the header, or check "
                "that this is the file meant.")
    else:
        width = shape.width
        names = _automl_columns(shape, base_dir)
        if len(names) < width:
            lead = len(names) - 1
    width = len(names)
    while records:
        if lead is not None and refuse_boxes:
            refuse_automl_boxes(lines, records, lead, path)
        if lead is not None:
            records = [r[:lead] + [""] * (lead - len(r)) + [
                [cell.strip() for cell in r[lead:] if cell.strip()]] for r in records]
        index = pd.Index(lines, name=LINE)
        long = index[[len(r) > width for r in records]]
        if len(long):
            raise SchemaError(
                f"the CSV file {path!r} has more than {width} fields at {name_rows(long)}. "
                f"Its columns are {names}.", rows=long.tolist())
        padded = [r if len(r) == width else r + [""] * (width - len(r)) for r in records]
        yield pd.DataFrame(padded, columns=names, index=index, dtype=object)
        lines, records = next(batches, ([], []))


def _compact_frames(data: bytes, path: str, header: bool | None, names: set[str],
                    base_dir: str, refuse_boxes: bool) -> list[pd.DataFrame]:
    """`read_csv`'s frames of a file's bytes, a batch of records at a time."""
    decode(data, path)  # refuses UTF-16 and names the line of a byte that is not UTF-8

    def text() -> io.TextIOBase:  # decoded as read: a StringIO's buffer is 4 bytes a char
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")

    shape = _Shape.of(_records(text(), path, _BATCH_RECORDS))
    return [_compact(frame) for frame in _csv_frames(
        _records(text(), path, _BATCH_RECORDS), path, header, names, base_dir,
        refuse_boxes, shape)]


def _compact(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns whose cells are all text as pandas' Arrow-backed `str` (the text and 8
    bytes a cell, where a Python string costs 50 bytes more); a multi-label column of
    lists stays as it is."""
    for name in frame.columns:
        if pd.api.types.infer_dtype(frame[name], skipna=False) == "string":
            frame[name] = frame[name].astype("str")
    return frame


def _line_index(index: pd.Index) -> pd.Index:
    """The records' lines, as a range when no record spans lines or skips a blank one."""
    lines = index.to_numpy()
    if len(lines) and (np.diff(lines) == 1).all():
        return pd.RangeIndex(lines[0], lines[0] + len(lines), name=index.name)
    return index


_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


def _refuse_utf16(path: str):
    raise SchemaError(f"the CSV file {path!r} is UTF-16 (it starts with a UTF-16 byte "
                      "order mark). Save it as UTF-8 (Excel: 'CSV UTF-8').")


def decode(data: bytes, path: str) -> str:
    """The text of a UTF-8 file (a byte order mark dropped); shared with
    `automl_detection`, which parses the text itself."""
    if data.startswith(_UTF16_MARKS):
        _refuse_utf16(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = len(re.findall(rb"\r\n|\r|\n", data[:error.start])) + 1
        raise SchemaError(
            f"the CSV file {path!r} is not UTF-8: byte {data[error.start]:#04x} at line "
            f"{line} is not valid there. Save it as UTF-8 (Excel: 'CSV UTF-8').",
            rows=[line]) from None


def _records(text: io.TextIOBase, path: str, batch: int | None = None
             ) -> Iterator[tuple[list[int], list[list[str]]]]:
    """The non-blank records, and the physical line (1-based) each starts on, in batches
    of `batch` records (one batch of all when None).

    Line breaks are \n, \r\n and \r, as the csv module sees them (`newline=''`); a
    malformed record (an unclosed quote, text after a closing quote) is an error naming
    its line, not a silent merge of the lines that follow.
    """
    reader = csv.reader(text, strict=True)
    lines, records, start = [], [], 1
    try:
        for record in reader:
            if (record and record[0].strip()) or any(cell.strip() for cell in record):
                lines.append(start)
                records.append(record)
                if len(records) == batch:
                    yield lines, records
                    lines, records = [], []
            start = reader.line_num + 1
    except csv.Error as error:
        raise SchemaError(
            f"the CSV file {path!r} has a malformed record at line {start}: {error}. Quote "
            'a cell that holds a comma, a quote or a line break whole ("a, b"), and double '
            'the quotes inside it ("say ""hi""").', rows=[start]) from None
    except UnicodeDecodeError as error:
        raise SchemaError(
            f"the CSV file {path!r} is not UTF-8: byte {error.object[error.start]:#04x} "
            f"near line {start} is not valid there. Save it as UTF-8 (Excel: 'CSV UTF-8').",
            rows=[start]) from None
    if records or batch is None:
        yield lines, records


def names_a_column(cell: str, names: set[str] = frozenset()) -> bool:
    cell = cell.strip()
    return cell in names or bool(role_by_name(cell) or synonym_role(cell)
                                 or misspelled_role(cell))


def _check_delimiter(shape: _Shape, path: str, names: set[str]) -> None:
    """Raises for a file that is evidently `;`- or tab-separated: one column, every line
    holding the separator as often, and a first line that names columns or rows that
    start with split names. Read with commas it would be one column of impossible paths;
    read with a guessed separator, a `;` in a file name would change what the file means,
    so the file is to be saved with commas."""
    if shape.width > 1:
        return
    for separator, what in _SEPARATORS:
        counts, splits_first = shape.separated[separator]
        if len(counts) > 1 or counts == {0}:
            continue
        if any(names_a_column(cell, names) for cell in shape.first[0].split(separator)) or \
                splits_first:
            raise SchemaError(
                f"the CSV file {path!r} looks {what}-separated: its first line "
                f"{shape.first[0]!r} is a single column when split at commas. tfrecorder "
                f"reads comma-separated files (as AutoML does): save it with commas, e.g. "
                f"pd.read_csv(path, sep={separator!r}, dtype=str, keep_default_na=False)"
                f".to_csv(path, index=False).")


def _automl_columns(shape: _Shape, base_dir: str = "") -> list[str]:
    """The columns of header-less AutoML Vision rows: `[split,]image_uri[,label...]`.

    Two cells are `split,image_uri` when every first cell is a split name; with three or
    more, the first is the split unless every first cell looks like an image path, or
    the first that is a local file is an image (then a misspelt split is reported as
    such, not read as a path).
    """
    if shape.width == 1:
        return ["image_uri"]
    if shape.width == 2:
        if shape.splits_first:
            return ["split", "image_uri"]
        return ["image_uri", "label"]
    has_split = not (shape.paths_first
                     or first_local_file_is_image(shape.sample, base_dir))
    return ["split", "image_uri", "label"] if has_split else ["image_uri", "label"]


_SEPARATORS = ((";", "semicolon"), ("\t", "tab"))
_BATCH_RECORDS = 16_384  # records held as Python lists at a time (about 10 MB)


class _Shape:
    """What a file's records say of its columns, gathered a batch of records at a time so
    that no more than a batch is ever held as Python objects: the first record, the most
    cells a record has, whether every first cell names a split or looks like an image
    path, the first SAMPLE first cells, and for records of one cell, how often each
    other separator is in it and whether every first part before it names a split."""

    def __init__(self):
        self.first: list[str] | None = None
        self.width = 0
        self.splits_first = self.paths_first = True
        self.sample: list[str] = []
        self.separated = {separator: (set(), True) for separator, _ in _SEPARATORS}

    @classmethod
    def of(cls, batches: Iterator[tuple[list[int], list[list[str]]]]) -> _Shape:
        shape = cls()
        for _, records in batches:
            shape.add(records)
        return shape

    def add(self, records: list[list[str]]) -> None:
        if not records:
            return
        if self.first is None:
            self.first = records[0]
        self.width = max(self.width, max(map(len, records)))
        self.sample += [r[0] for r in records[:SAMPLE - len(self.sample)]]
        # Each distinct first cell once: split names repeat, and paths are looked at only
        # until one is not a path.
        self.splits_first = self.splits_first and all(
            split_cell(cell) is not None for cell in {r[0] for r in records})
        self.paths_first = self.paths_first and all(looks_like_path(r[0]) for r in records)
        if self.width == 1:  # else `_check_delimiter` looks no further
            for separator, _ in _SEPARATORS:
                counts, splits_first = self.separated[separator]
                counts |= {r[0].count(separator) for r in records}
                self.separated[separator] = counts, splits_first and all(
                    cell and split_cell(cell) is not None for cell in
                    {part.strip() for r in records for part in r[0].split(separator)[:1]})

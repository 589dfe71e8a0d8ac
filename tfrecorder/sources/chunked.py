"""Sources larger than memory: a CSV or Parquet file validated a chunk of rows at a time,
then memory-mapped as the table.

A plan needs every row before the first record is written: the row count, every row's
split (an UNASSIGNED row's is drawn from a hash of its values or URI), every label and
category for the vocabularies, and one shuffle of all rows, so that any shard takes rows
from anywhere in the table. So the file is read once, a chunk at a time. Each chunk is
validated by `validate`, with the column types the first chunk got (so that every
chunk is read alike), and its validated columns are appended to scratch files in
TMPDIR. The table is then those files, memory-mapped: numbers as NumPy arrays, text and
lists as Arrow arrays, text labels and categories as pandas categoricals (a code a row).
Mapped pages belong to the page cache, which the kernel drops and reads back as it
needs, so the driver's own memory holds a few bytes a row (the splits, hashes, label ids
and the shuffle), not the table; worker processes forked later share the mappings.

Validation looks at cells one by one, and every row's hash is its own, so the chunks'
columns put together are what reading the whole file at once gives, and a conversion
writes the same bytes either way (`tests/test_chunked.py`). The scratch files have no
name in TMPDIR (O_TMPFILE): a run leaves nothing behind, even when it is killed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import BinaryIO

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.splits import SPLITS, UNASSIGNED
from tfrecorder.options import TableOptions
from tfrecorder.sources import media
from tfrecorder.sources.column_values import Column
from tfrecorder.sources.schema import (
    IMAGE_URI,
    INPUT_KINDS,
    INTEGER_LABEL,
    MEDIA_TYPES,
    SPLIT_KEY,
    STRING_LABEL,
    column_types,
    is_missing,
)
from tfrecorder.sources.table import CLIP_END, CLIP_START, Table, arrow_backed
from tfrecorder.sources.validate import validate
from tfrecorder.storage import fs
from tfrecorder.write.heap import release_freed_memory

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_ROWS = 250_000
# Sources larger than this share of the memory available are read in chunks by default:
# a CSV file's cells take 5 to 10 times its size as pandas objects.
_AUTO_SHARE = 0.1
_SPLIT_CATEGORIES = [*SPLITS, UNASSIGNED]
_TYPE_NAMES = {kind: name for name, kind in INPUT_KINDS.items()}


def default_chunk_rows(source_bytes: int) -> int | None:
    """The rows a chunk for a source of `source_bytes` when none were asked for:
    DEFAULT_CHUNK_ROWS for a source larger than a tenth of the available memory, else
    None (the whole source at once)."""
    if source_bytes > _AUTO_SHARE * _available_memory():
        logger.info("Reading the source (%.1f GB) in chunks of %d rows: it is larger than "
                    "a tenth of the memory available.", source_bytes / 1e9,
                    DEFAULT_CHUNK_ROWS)
        return DEFAULT_CHUNK_ROWS
    return None


def read_whole_or_in_chunks(path: str, base_dir: str, options: TableOptions,
                            text_numbers: bool, whole: Callable[[], pd.DataFrame],
                            chunks: Callable[[int], Iterable[pd.DataFrame]]) -> Table:
    """A file's table, validated whole (`whole()`) or a chunk at a time (`chunks(rows)`):
    in chunks of `options.chunk_rows`, or by default when the file is larger than a tenth
    of the memory available. A file that holds its images in its cells is read whole
    unless chunks were asked for.

    Args:
        text_numbers: whether the file's cells are text (a CSV's), so that columns of
            numbers are found by their values.
    """
    chunk_rows, chosen = options.chunk_rows, options.chunk_rows is None
    if chosen:  # the size is only looked up to decide
        chunk_rows = default_chunk_rows(fs.total_size(path))
    if chunk_rows is not None:
        try:
            return validate_in_chunks(chunks(chunk_rows), base_dir, options.schema,
                                      options.fill_missing, text_numbers=text_numbers,
                                      split=options.split)
        except ImagesInCells:
            if not chosen:
                raise
            logger.info("%s holds its images in its cells: it is read whole.", path)
    frame = whole()
    # What reading took and freed (130 MB for a million paths), before validation adds
    # its own; then what validation freed.
    release_freed_memory()
    table = validate(frame, base_dir=base_dir, schema=options.schema,
                     fill_missing=options.fill_missing, text_numbers=text_numbers,
                     split=options.split)
    del frame
    release_freed_memory()
    return table


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class ImagesInCells(SchemaError):
    """The source holds its images in its cells, which this module does not spill."""


def validate_in_chunks(frames: Iterable[pd.DataFrame], base_dir: str,
                       schema: Mapping | None, fill_missing, text_numbers: bool,
                       split: str | None = None) -> Table:
    """`validate` of the frames put together, a frame at a time; the table's
    columns are memory-mapped from files in TMPDIR that have no name (`_scratch_file`),
    so the driver's memory holds a few bytes a row, and no run leaves them behind.

    Raises:
        SchemaError: as `validate` does; for a later chunk, with what the first chunk's
            types were and how to declare others (`schema=`).
    """
    with _Spill() as spill:
        pinned = None
        for frame in frames:
            if pinned is None:
                part = validate(frame, base_dir, schema, fill_missing, text_numbers, split)
                if part.images_in_memory:
                    raise ImagesInCells(
                        "this source holds its images in its cells, and a source is read "
                        "in chunks only when its images are paths: pass ",
                        Option("chunk_rows", None), " to read it whole.",
                        option="chunk_rows")
                pinned = _pinned_schema(frame, part, schema)
            else:
                part = _validate_later(frame, base_dir, pinned, fill_missing, split)
            spill.add(part)
            del part
            release_freed_memory()
        table = spill.table()
        release_freed_memory()
        return table


def _pinned_schema(frame: pd.DataFrame, part: Table, schema: Mapping | None) -> dict:
    """The type of every column as the first chunk was read: the schema later chunks
    are validated with, so that a column of numbers stays numbers in every chunk."""
    types = column_types(frame, schema)
    pinned = {name: types.get(name) for name in frame.columns}  # None: dropped
    for column in part.inputs:
        pinned[column.name] = _TYPE_NAMES[column.kind]
    if part.has_labels:
        labels = part.rows["label"].tolist()
        first = next((label for row in labels for label in row), None) \
            if part.multi_label else next((v for v in labels if v is not None), None)
        label_type = INTEGER_LABEL if isinstance(first, (int, np.integer)) else STRING_LABEL
        for name, type_name in types.items():
            if type_name not in (*INPUT_KINDS, SPLIT_KEY, IMAGE_URI, *MEDIA_TYPES):
                pinned[name] = label_type
    if part.media != "image":  # a clip's start and end stay its span in every chunk
        for name in media.span_columns(frame, schema or {}):
            pinned.pop(name, None)
    return pinned


def _validate_later(frame: pd.DataFrame, base_dir: str, pinned: dict, fill_missing,
                    split: str | None) -> Table:
    try:
        return validate(frame, base_dir, pinned, fill_missing, split=split)
    except SchemaError as error:
        kind = pinned.get(error.column)
        typed = f": {error.column!r} is {kind} there" if kind else ""
        raise SchemaError(
            *error.parts, " (The source is read in chunks of rows, and every column keeps "
            f"the type its first chunk gave it{typed}. Declare another with ",
            Option("schema"), ", or read it whole with a larger ", Option("chunk_rows"),
            ".)", column=error.column, rows=error.rows, option=error.option) from None


def _scratch_file() -> BinaryIO:
    """A file in TMPDIR that is deleted already: on Linux it never has a name (O_TMPFILE),
    elsewhere it loses it at once, so not even a killed run leaves it behind."""
    return tempfile.TemporaryFile(prefix="tfrecorder-chunk-")


def _map_arrow(file: BinaryIO):
    """The Arrow IPC file written to `file`, memory-mapped through its descriptor (Linux's
    /proc/self/fd); read into memory where there is no such path."""
    import pyarrow as pa

    file.flush()
    path = f"/proc/self/fd/{file.fileno()}"
    source = pa.memory_map(path) if os.path.exists(path) else pa.py_buffer(
        (file.seek(0), file.read())[1])
    return pa.ipc.open_file(source).read_all().column(0)


class _Spill:
    """The validated chunks' columns, appended to scratch files: numbers as raw arrays,
    other columns as Arrow IPC files of one column; `table` maps them back as one Table.
    """

    def __init__(self):
        self.files = contextlib.ExitStack()  # every scratch file, closed once mapped
        self.scratch: dict[str, BinaryIO] = {}  # column -> its scratch file
        self.writers: dict[str, object] = {}  # column -> the file, or an Arrow writer
        self.kinds: dict[str, str] = {}  # column -> "numbers", "split" or "arrow"
        self.dtypes: dict[str, object] = {}  # column -> NumPy dtype or Arrow type
        self.index: list = []
        self.first: Table | None = None
        self.inputs: list[Column] = []
        self.num_rows = 0

    def __enter__(self) -> _Spill:
        return self

    def __exit__(self, *exc_info) -> None:
        self.files.close()

    def add(self, part: Table) -> None:
        if self.first is None:
            self.first, self.inputs = part, list(part.inputs)
        else:
            self._check_like_first(part)
        rows = part.rows
        for name in rows.columns:
            self._append(name, rows[name])
        self._append_numbers("\0hashes", part.value_hashes)
        for name in part.source.columns:  # for the rejected-rows report
            self._append(f"\0source:{name}", part.source[name])
        index = rows.index
        self.index.append(index.to_numpy(dtype=np.int64) if index.dtype.kind in "iu"
                          else index.tolist())
        self.num_rows += len(rows)

    def _check_like_first(self, part: Table) -> None:
        first = self.first
        if list(part.rows.columns) != list(first.rows.columns) or \
                part.multi_label != first.multi_label:
            raise SchemaError(
                "a later chunk of the source reads differently from the first (its "
                f"columns: {list(part.rows.columns)}, against {list(first.rows.columns)}"
                f"; multi-label: {part.multi_label}, against {first.multi_label}). Declare "
                "the columns' types with ", Option("schema"), ".", option="schema")
        for i, (column, earlier) in enumerate(zip(part.inputs, self.inputs)):
            if (column.kind, column.shape) != (earlier.kind, earlier.shape):
                raise SchemaError(
                    f"column {column.name!r} holds {_describe(column)} in a later chunk of "
                    f"the source, but {_describe(earlier)} in its first chunk. Make its "
                    "cells alike (e.g. every cell a list of the same shape), or declare "
                    "its type with ", Option("schema"), ".", column=column.name)
            if column.categories is not None:
                merged = dict.fromkeys((*(earlier.categories or ()), *column.categories))
                self.inputs[i] = replace(earlier, categories=tuple(merged))

    def _append(self, name: str, column: pd.Series) -> None:
        import pyarrow as pa

        if name == "split":
            codes = pd.Categorical(column, categories=_SPLIT_CATEGORIES).codes
            self._append_numbers(name, codes.astype(np.int8), kind="split")
        elif column.dtype.kind in "iuf" and not isinstance(column.dtype, pd.CategoricalDtype) \
                and not _masked(column):
            self._append_numbers(name, column.to_numpy())
        else:
            values = pa.chunked_array(pa.array(column.array)) if arrow_backed(column) \
                else _arrow_objects(name, column)
            if values.null_count == 0 and not _masked(column) and (
                    pa.types.is_int64(values.type)
                    or pa.types.is_float64(values.type)):
                # Numbers held as Python objects (a CSV file's): a NumPy column, mapped.
                return self._append_numbers(name, values.to_numpy())
            writer = self.writers.get(name)
            if writer is None:
                file = self.scratch[name] = self.files.enter_context(_scratch_file())
                writer = self.writers[name] = pa.ipc.new_file(
                    file, pa.schema([("values", _wide(values.type))]))
                self.kinds[name], self.dtypes[name] = "arrow", _wide(values.type)
            try:
                for chunk in values.chunks:
                    writer.write_batch(pa.record_batch(
                        [chunk.cast(self.dtypes[name])], names=["values"]))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                raise SchemaError(
                    f"column {name!r} holds {values.type} values in a later chunk of the "
                    f"source, but {self.dtypes[name]} in its first. Make its "
                    "values of one kind, or declare its type with ", Option("schema"),
                    ".", column=name) from None

    def _append_numbers(self, name: str, values: np.ndarray, kind: str = "numbers") -> None:
        values = np.ascontiguousarray(values)
        if name not in self.writers:
            file = self.scratch[name] = self.files.enter_context(_scratch_file())
            self.writers[name] = file
            self.kinds[name], self.dtypes[name] = kind, values.dtype
        elif values.dtype != self.dtypes[name]:
            raise SchemaError(
                f"column {name!r} holds {values.dtype} numbers in a later chunk of the "
                f"source, but {self.dtypes[name]} in its first. Declare its type with ",
                Option("schema"), ".", column=name)
        self.writers[name].write(values.data)

    def table(self) -> Table:
        """The chunks put together as one Table, its columns mapped from the files."""
        for name, writer in self.writers.items():
            if self.kinds[name] == "arrow":
                writer.close()  # its footer
        mapped = {name: self._mapped(name) for name in self.writers}
        self.files.close()  # the mappings keep the data
        index = _index(self.index, self.first.rows.index.name)
        columns = {name: _series(values, index)
                   for name, values in mapped.items() if not name.startswith("\0")}
        for name in self._categorical_columns():
            codes = columns[name].astype("category").cat
            # Categories of Python strings: `tolist()` then gives each row a reference to
            # one, where Arrow-backed categories would make a string a row.
            columns[name] = pd.Series(pd.Categorical.from_codes(
                codes.codes, pd.Index(codes.categories.tolist(), dtype=object)),
                index=index, copy=False)
        source = pd.DataFrame({name.split(":", 1)[1]: _series(values, index)
                               for name, values in mapped.items()
                               if name.startswith("\0source:")}, index=index, copy=False)
        for name in (CLIP_START, CLIP_END):  # a clip's span: nullable, as `media` made it
            if name in columns:
                columns[name] = columns[name].astype("Int64")
        table = Table(rows=pd.DataFrame(columns, index=index, copy=False), source=source,
                      inputs=tuple(self.inputs), multi_label=self.first.multi_label,
                      base_dir=self.first.base_dir, label_column=self.first.label_column,
                      media=self.first.media, task=self.first.task)
        table.__dict__["value_hashes"] = mapped["\0hashes"]  # as validated, chunk by chunk
        return table

    def _mapped(self, name: str):
        file = self.scratch[name]
        if self.kinds[name] == "arrow":
            return _map_arrow(file)
        file.flush()
        dtype = self.dtypes[name]
        values = np.memmap(file, dtype=dtype, mode="r") if self.num_rows \
            else np.empty(0, dtype)
        if self.kinds[name] == "split":
            values = pd.Categorical.from_codes(values, categories=_SPLIT_CATEGORIES)
        return values

    def _categorical_columns(self) -> list[str]:
        """Text labels and single-value categorical inputs: held as pandas categoricals
        (a code a row), which the plan reads as one Python string a category."""
        found = [c.name for c in self.inputs if c.kind == "categorical" and not c.shape]
        if self.first.has_labels and not self.first.multi_label and \
                self.kinds["label"] == "arrow":
            found.append("label")
        return found


def _describe(column: Column) -> str:
    return f"{column.kind} {'lists' if column.shape else 'values'}"


def _arrow_objects(name: str, column: pd.Series):
    """A column of Python objects (text, bytes, or lists of numbers or text) as Arrow; a
    source column of mixed kinds, for the report, as text."""
    import pyarrow as pa

    values = column.to_numpy(dtype=object).tolist()
    try:
        return pa.chunked_array([pa.array(values, from_pandas=True)])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        if name.startswith("\0source:"):
            return pa.chunked_array([pa.array(
                [None if is_missing(v) else str(v) for v in values])])
        raise SchemaError(
            f"column {name!r} cannot be set aside in chunks ({error}): reading a source in "
            "chunks needs the cells of a column to be of one kind (text or bytes, not "
            "both). Make them alike.", column=name) from None


def _wide(arrow_type):
    """Arrow's 64-bit-offset type for text, bytes and lists, so no column outgrows it."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pa.large_string()
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return pa.large_binary()
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.large_list(_wide(arrow_type.value_type))
    return arrow_type


def _masked(column: pd.Series) -> bool:
    """A column of pandas' nullable numbers (a clip's `Int64` span, `media`): kept with
    its blanks (<NA>), in Arrow, whichever chunk has them."""
    return isinstance(column.dtype, pd.api.extensions.ExtensionDtype) \
        and column.dtype.kind in "iuf" and not arrow_backed(column)


def _index(parts: list, name) -> pd.Index:
    """The chunks' row labels as one index; row positions if they repeat (as `validate`
    does for a whole table)."""
    if all(isinstance(p, np.ndarray) for p in parts):
        values = np.concatenate(parts) if parts else np.empty(0, np.int64)
        if len(values) and (values == np.arange(values[0], values[0] + len(values))).all():
            return pd.RangeIndex(values[0], values[0] + len(values), name=name)
        index = pd.Index(values, name=name)
    else:
        index = pd.Index([v for p in parts for v in list(p)], name=name)
    return pd.RangeIndex(len(index)) if index.has_duplicates else index


def _series(values, index: pd.Index) -> pd.Series:
    """A pandas column over mapped values, without a copy."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        if pa.types.is_large_string(values.type):  # pandas' own text dtype, `str`
            array = pd.arrays.ArrowStringArray(
                values, dtype=pd.StringDtype("pyarrow", na_value=np.nan))
        else:
            array = pd.arrays.ArrowExtensionArray(values)
        return pd.Series(array, index=index, copy=False)
    return pd.Series(values, index=index, copy=False)

"""Any source (DataFrame, CSV file, Parquet file or folder, image folder) -> one validated
table.

Every mistake in the input is found here, before a single image is read, and reported
with the column, the offending values and the first rows that hold them. The table keeps
the source rows exactly as given, so rejected rows can be reported in the user's terms.

Input follows the AutoML Vision image CSV: `[split,]image_uri[,label...]` without a
header row, or any columns under one (a header is detected, or can be forced). Split
values are case-insensitive TRAIN (or TRAINING), VALIDATION, TEST and UNASSIGNED; a blank
split means UNASSIGNED. Columns besides these are typed in `schema`.

The table is read exactly as written: a CSV file is parsed record by record by the csv
module (a quoted cell keeps its line breaks), and image paths are used as given (never
stripped; `file://` URIs become local paths). Split names and labels are compared
without the whitespace around them, and header names lose it too. A Parquet table keeps
its column types (read by pandas with pyarrow) and is checked as a DataFrame is. Either
file can also be read a chunk of rows at a time (`csv_chunks`, `parquet_chunks`), with
the same parsing, for sources larger than memory (`tfrecorder.chunked`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import logging
import os
import posixpath
import re
import stat
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tfrecorder import fs, hashing, image_cells, sources
from tfrecorder.errors import Option, OptionError, SchemaError, SourceNotFoundError
from tfrecorder.manifest import RESERVED
from tfrecorder.schema import (
    IMAGE,
    IMAGE_TYPES,
    IMAGE_URI,
    INPUT_KINDS,
    INTEGER_LABEL,
    LABEL_TYPES,
    SPLIT_KEY,
    STRING_LABEL,
    Column,
    column_types,
    flat,
    input_column,
    is_list,
    is_missing,
    label_columns,
    role_by_name,
    synonym_role,
)
from tfrecorder.splits import SPLITS, UNASSIGNED, spellings_text, split_named
from tfrecorder.wording import dropping, name_rows, sole

logger = logging.getLogger(__name__)

_INTEGER = re.compile(r"^[+-]?\d+$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class Table:
    """A validated table.

    Attributes:
        rows: one row per source row: `image_uri` (as given) and `uri` (resolved for
            reading) when the table has image files; `image` (the cells as given),
            `image_name` and `image_uri` when it holds its images (`image_cells`);
            `split` (TRAIN, VALIDATION, TEST or UNASSIGNED); `label` when it has labels
            (all str or all int; lists of them when rows are multi-label); and one
            column per input, by its name, holding the values as stored. Its index is
            the source's.
        source: the rows as the user gave them, for the rejected-rows report.
        inputs: the input columns (features besides image, label and split).
        multi_label: whether each row's label is a list.
        base_dir: the folder relative image paths were resolved against (the CSV's
            folder, the image folder, or the working directory for a DataFrame).
        class_names: the names of integer labels, where the source gives them (a Hugging
            Face ClassLabel): label i is class_names[i].
        image_column: the source's column of images held in memory, if any (the report
            describes its cells rather than printing them).
    """

    rows: pd.DataFrame
    source: pd.DataFrame
    inputs: tuple[Column, ...] = ()
    multi_label: bool = False
    base_dir: str = ""
    class_names: tuple[str, ...] | None = None  # integer labels' names, from the source
    image_column: str | None = None  # the source's column of images held in memory

    @property
    def has_labels(self) -> bool:
        return "label" in self.rows.columns

    @property
    def has_images(self) -> bool:
        return "image_uri" in self.rows.columns

    @property
    def images_in_memory(self) -> bool:
        """Whether the images are the table's cells (`image`), not files at `uri`."""
        return "image" in self.rows.columns

    @property
    def image_files(self) -> bool:
        """Whether the images are files to read, at `uri`."""
        return self.has_images and not self.images_in_memory

    @property
    def image_references(self) -> Sequence:
        """How reports name each row's image, by position: its URI as given, or for an
        image held in memory, its `image_name`."""
        return self.rows["image_name" if self.images_in_memory else "image_uri"].array

    @functools.cached_property
    def remote_images(self) -> list[str]:
        """The first image URI in each bucket the table reads (gs://, s3://, ...)."""
        if not self.image_files:
            return []
        uris = self.rows["uri"]
        remote = uris[uris.str.contains("://", regex=False)
                      & ~uris.str.startswith("file://")]
        buckets = remote.str.extract(r"^([^:/]+://[^/]*)", expand=False)
        return remote[~buckets.duplicated()].tolist()

    @functools.cached_property
    def image_hashes(self) -> np.ndarray:
        """Each image's 64-bit content word (`image_cells.image_words`), for a table
        holding its images: what UNASSIGNED rows' splits are drawn from, and part of
        `value_hashes`. Computed once: every image is read to compute it."""
        return image_cells.image_words(self.rows["image"])

    @functools.cached_property
    def value_hashes(self) -> np.ndarray:
        """Each row's 64-bit hash of its values besides its split (`hashing`): what a
        table without images draws UNASSIGNED rows' splits from, and what a resumed run
        checks. Computed once: 8 bytes a row."""
        words = [(name, self.image_hashes if name == "image"
                  else hashing.cell_words(self.rows[name]))
                 for name in self.rows.columns if name not in ("split", "image_name")]
        return hashing.row_hashes(words)

    @property
    def has_remote_images(self) -> bool:
        return bool(self.remote_images)


class ArrowColumn:
    """An Arrow-backed column, read by position a chunk at a time. pyarrow's own
    `ChunkedArray.take` (and so pandas' `iloc`) joins all the chunks first: a copy of the
    whole column for every take (7 ms for 4,096 rows of a 2M-row text column in 4 chunks,
    against 0.13 ms from one array), and of all of a memory-mapped table (`chunked`)."""

    def __init__(self, chunks: list, kind):
        self.chunks, self.type = chunks, kind
        self.starts = np.cumsum([0, *map(len, chunks)])

    @classmethod
    def of(cls, column: pd.Series) -> ArrowColumn:
        import pyarrow as pa

        values = pa.array(column.array)
        return cls(values.chunks if isinstance(values, pa.ChunkedArray) else [values],
                   values.type)

    def take(self, positions: np.ndarray):
        import pyarrow as pa

        positions = np.asarray(positions, dtype=np.int64)
        if len(self.chunks) == 1:
            return self.chunks[0].take(positions)
        chunk_of = np.searchsorted(self.starts, positions, side="right") - 1
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(len(self.chunks) + 1))
        pieces = [self.chunks[c].take(positions[order[start:end]] - self.starts[c])
                  for c, (start, end) in enumerate(zip(bounds[:-1], bounds[1:]))
                  if end > start]
        if not pieces:
            return pa.array([], type=self.type)
        return pa.concat_arrays(pieces).take(np.argsort(order))  # back in `positions` order


def arrow_backed(column: pd.Series) -> bool:
    return isinstance(column.dtype, pd.ArrowDtype) or (
        isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow")


def rows_at(frame: pd.DataFrame, positions) -> pd.DataFrame:
    """`frame.iloc[positions]`, with Arrow-backed columns read by `ArrowColumn`."""
    positions = np.asarray(positions, dtype=np.int64)
    found = frame.iloc[positions, [i for i, name in enumerate(frame.columns)
                                   if not arrow_backed(frame[name])]]
    for i, name in enumerate(frame.columns):
        column = frame[name]
        if arrow_backed(column):
            found.insert(i, name, pd.array(ArrowColumn.of(column).take(positions),
                                           dtype=column.dtype))
    return found


def load_table(source: pd.DataFrame | str | os.PathLike | tuple | Mapping,
               header: bool | None = None,
               schema: Mapping | None = None, fill_missing=None,
               chunk_rows: int | None = None, split: str | None = None) -> Table:
    """Reads and validates `source`: a DataFrame, a CSV or Parquet path, an image folder,
    or images in memory (arrays, dicts of columns or of splits, Hugging Face datasets:
    `tfrecorder.sources`).

    Args:
        source: the DataFrame; the path of a CSV file; a Parquet file (`.parquet` or `.pq`)
            or a folder of them (`part-*.parquet`, as pandas and Spark write, or in hive
            partitions such as `split=TRAIN/`); or an image
            folder laid out as `label/file` or `split/label/file`.
        header: for CSV files, whether the first line names the columns; None detects it
            (a first line that names a column, e.g. `image_uri`, `Split`, `labels`, `path`
            or a schema column, and holds no image path). Parquet names its columns: any
            other value than None is an error there.
        schema, fill_missing: see `validate`.
        chunk_rows: read a CSV or Parquet source this many rows at a time, into a
            memory-mapped table (`tfrecorder.chunked`); None does so, 250,000 rows at a
            time, for a source larger than a tenth of the memory available.
        split: the split of every row, for a source without a split column.
    """
    if sources.is_in_memory(source):  # arrays, dicts of them, Hugging Face datasets
        frame, implied, class_names = sources.as_frame(source)
        table = validate(frame, base_dir=os.getcwd(), schema={**implied, **(schema or {})},
                         fill_missing=fill_missing, split=split)
        return dataclasses.replace(table, class_names=class_names)
    if isinstance(source, pd.DataFrame):
        return validate(source, base_dir=os.getcwd(), schema=schema,
                        fill_missing=fill_missing, split=split)
    if not isinstance(source, (str, os.PathLike)):
        raise SchemaError(
            f"source must be a DataFrame, the path of a CSV file, Parquet file or image "
            f"folder, NumPy arrays (images, labels), a dict of columns or of splits, or a "
            f"Hugging Face Dataset; not {source!r} ({type(source).__name__}).")
    path = os.fspath(source)
    if fs.is_file_uri(path):
        try:
            path = fs.file_uri_path(path)
        except ValueError as error:
            raise ValueError(f"{path!r} is not a usable file:// URI: {error}") from None
    if fs.is_folder(path):
        root = path if fs.is_remote(path) else os.path.abspath(path)
        if _is_parquet_folder(root):
            # Relative image paths in a Parquet dataset are relative to its folder.
            return _read_file(root, root.rstrip("/"), header, schema, fill_missing,
                              chunk_rows, split, parquet=True)
        return validate(_folder_table(root), base_dir=root, schema=schema, split=split)
    if not fs.exists(path):
        if has_parquet_name(path):
            raise SourceNotFoundError(f"no such Parquet file or folder: {path!r}")
        raise SourceNotFoundError(f"no such CSV file or image folder: {path!r}")
    # Relative image paths in a CSV or Parquet file are relative to its folder, local or
    # remote.
    return _read_file(path, fs.dirname(path), header, schema, fill_missing, chunk_rows,
                      split, parquet=has_parquet_name(path))


def _read_file(path: str, base_dir: str, header: bool | None, schema: Mapping | None,
               fill_missing, chunk_rows: int | None, split: str | None,
               parquet: bool) -> Table:
    """A CSV or Parquet source, validated whole or in chunks (`chunked`). A CSV file's
    cells are text, so columns of numbers are found by their values."""
    from tfrecorder import chunked  # it builds on this module

    names = set(schema or ())
    chosen = chunk_rows is None
    if chosen:  # the size is only looked up to decide
        chunk_rows = chunked.default_chunk_rows(fs.total_size(path))
    if chunk_rows is not None:
        frames = parquet_chunks(path, header, chunk_rows) if parquet else \
            csv_chunks(path, header, names, base_dir, chunk_rows)
        try:
            return chunked.validate_in_chunks(frames, base_dir, schema, fill_missing,
                                              text_numbers=not parquet, split=split)
        except chunked.ImagesInCells:
            if not chosen:
                raise
            logger.info("%s holds its images in its cells: it is read whole.", path)
    frame = _read_parquet(path, header) if parquet else \
        _read_csv(path, header, names, base_dir)
    return validate(frame, base_dir=base_dir, schema=schema, fill_missing=fill_missing,
                    text_numbers=not parquet, split=split)


def validate(frame: pd.DataFrame, base_dir: str, schema: Mapping | None = None,
             fill_missing=None, text_numbers: bool = False, split: str | None = None
             ) -> Table:
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
        split: the split of every row of a table without a split column.

    Raises:
        SchemaError: for a table with no rows, or nothing to store but labels and
            splits, and for every column that does not hold what its role needs.
    """
    schema = schema or {}
    types = column_types(frame, schema)
    fills = fill_missing if isinstance(fill_missing, Mapping) else {}
    inputs = [name for name, type_name in types.items() if type_name in INPUT_KINDS]
    strangers = sorted(set(fills) - set(inputs))
    if strangers:
        raise SchemaError(f"fill_missing names columns that are not inputs: {strangers} "
                          f"(the inputs: {inputs}).", column=sole(strangers),
                          option="fill_missing")
    if frame.index.has_duplicates:
        frame = frame.reset_index(drop=True)
    if frame.empty:
        raise SchemaError(
            f"the table has no rows (its columns: {list(frame.columns)}), so there is "
            "nothing to convert. Pass the table with its rows (did a filter remove them "
            "all?).")
    _check_roles(frame, types, schema, base_dir)
    image_column = next((n for n, t in types.items() if t in IMAGE_TYPES), None)
    if image_column is None and not inputs:
        _nothing_to_store(frame, types)
    rows = pd.DataFrame(index=frame.index)
    if image_column is not None and types[image_column] == IMAGE:
        _images_in_memory(frame[image_column], base_dir, rows)
    elif image_column is not None:
        rows["image_uri"], rows["uri"] = _image_uris(frame[image_column], base_dir)
    split_column = next((n for n, t in types.items() if t == SPLIT_KEY), None)
    if split is not None and split_column is not None:
        raise OptionError(Option("split"), " gives every row one split, but the table names "
                          f"each row's split (column {split_column!r}, or the keys of a dict "
                          "of splits). Leave it out.", option="split")
    # Categorical: one byte a row, where a column of references took eight.
    rows["split"] = _splits(frame[split_column]) if split_column is not None \
        else pd.Categorical.from_codes(np.zeros(len(frame), dtype=np.int8),
                                       [_split_cell(split)])
    multi_label = False
    if label_columns(types):
        rows["label"], multi_label = _labels(frame, label_columns(types), types)
    columns = []
    for name in inputs:
        type_name = types[name]
        if text_numbers and name not in schema and type_name == "StringInput":
            type_name = _number_type(frame[name]) or type_name
        column, values = input_column(frame[name], type_name,
                                      fills.get(name) if fills else fill_missing)
        columns.append(column)
        # Number arrays and pandas' own arrays (Arrow-backed text) are kept as they are:
        # a Python object a cell would cost 30 to 60 bytes a row.
        kept = isinstance(values, pd.api.extensions.ExtensionArray) or (
            isinstance(values, np.ndarray) and values.dtype.kind in "if")
        rows[name] = pd.Series(values, index=frame.index, dtype=None if kept else object)
    return Table(rows=rows, source=frame, inputs=tuple(columns), multi_label=multi_label,
                 base_dir=base_dir, image_column=image_column if "image" in rows else None)


_ROLE_TYPES = {"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"}
_SAMPLE = 100  # values looked at to tell what an unnamed column holds


def _check_roles(frame: pd.DataFrame, types: Mapping, schema: Mapping,
                 base_dir: str) -> None:
    """A table without a split, image or label column must not hold one under another
    name unnoticed: its labels would be stored as text and its rows hash-split. Columns
    the schema leaves untyped are asked about when they hold split names or are named
    like a split (`set`), look like image paths (by extension or by their first file's
    bytes), or are named like a label (`class`, `category`, `target`). No input may take
    a feature's name either."""
    roles = {"split": SPLIT_KEY in types.values(),
             "image_uri": bool(set(IMAGE_TYPES) & set(types.values())),
             "label": bool(label_columns(types))}
    untyped = [n for n, t in types.items() if t in INPUT_KINDS and n not in schema]
    found: dict[str, list[tuple[str, str]]] = {}  # role -> (column, why)
    for name in untyped:
        is_text = types[name] in ("StringInput", "CategoricalInput")
        sample = [v for v in frame[name].head(_SAMPLE * 10).tolist()
                  if not is_missing(v)][:_SAMPLE]
        if not roles["split"] and is_text and _holds_split_names(frame[name], sample):
            found.setdefault("split", []).append((name, f"holds only split names (e.g. "
                                                        f"{_first_split_name(sample)!r})"))
        elif not roles["split"] and is_text and synonym_role(name) == "split":
            found.setdefault("split", []).append((name, "is named like a split column"))
        elif not roles["image_uri"] and is_text and sample and all(
                isinstance(v, str) for v in sample) and (
                all(_has_image_extension(v.strip()) for v in sample)
                or _first_local_file_is_image(sample, base_dir)):
            found.setdefault("image_uri", []).append(
                (name, f"looks like image paths (e.g. {sample[0]!r})"))
        elif not roles["label"] and synonym_role(name) == "label":
            found.setdefault("label", []).append((name, "is named like a label column"))
    if found:
        clauses, declared = [], {}
        for role, columns in found.items():
            names = " and ".join(repr(n) for n, _ in columns)
            what = "; ".join(f"column {n!r} {why}" for n, why in columns)
            clauses.append(f"no {role!r} column, and {what}")
            first = columns[0][0]
            declared[first] = _ROLE_TYPES[role]
            if role == "label" and _integer_values(frame[first]):
                declared[first] = "IntegerLabel"
            if len(columns) > 1:
                clauses[-1] += f" (only one of {names} can be the {role})"
        them = "the columns" if len(declared) > 1 else "the column"
        raise SchemaError(
            f"the table has {'; '.join(clauses)}. Rename {them} to "
            f"{' and '.join(repr(r) for r in found)}, or declare "
            f"{'them' if len(declared) > 1 else 'it'}: ", Option("schema", declared),
            "; to store a column as an input instead, declare that (e.g. ",
            Option("schema", {next(iter(declared)): "StringInput"}), ").",
            column=sole(n for columns in found.values() for n, _ in columns))
    taken = [n for n in types if types[n] in INPUT_KINDS and n in RESERVED]
    if taken:
        raise SchemaError(
            f"column {taken[0]!r} would replace a feature tfrecorder writes "
            f"({', '.join(RESERVED)}). Rename it, or drop it with ", dropping(taken[0]), ".",
            column=taken[0])


def _holds_split_names(column: pd.Series, sample: list) -> bool:
    """Whether every value is a split name and one at least is TRAIN, VALIDATION or TEST
    (the sample first: the whole column only when the sample says so)."""
    def split_names(values) -> bool:
        texts = [v for v in values if not is_missing(v)]
        return bool(texts) and all(
            isinstance(v, str) and _split_cell(v) is not None for v in texts) \
            and any(_split_cell(v) in SPLITS for v in texts)

    if not split_names(sample):
        return False
    try:
        return split_names(pd.unique(column.astype(object)).tolist())
    except TypeError:  # lists in the cells
        return False


def _first_split_name(sample: list) -> str:
    return next(v for v in sample if _split_cell(v) in SPLITS)


def _integer_values(column: pd.Series) -> bool:
    if pd.api.types.is_integer_dtype(column):
        return True
    values = [v for v in column.head(_SAMPLE).tolist() if not is_missing(v)]
    return bool(values) and all(isinstance(v, str) and _INTEGER.match(v.strip())
                                for v in values)


def _nothing_to_store(frame: pd.DataFrame, types: Mapping) -> None:
    """Raises for a table whose records would hold nothing but labels and splits."""
    found = [f"{n!r} ({'the split' if t == SPLIT_KEY else 'a label'})"
             for n, t in types.items()]
    found = ", ".join(found[:-1]) + " and " + found[-1] if len(found) > 1 else \
        "".join(found) or "none"
    dropped = [n for n in frame.columns if n not in types]
    raise SchemaError(
        f"the table has nothing to store: its columns are {found}"
        f"{f' (schema drops {dropped})' if dropped else ''}; it has no image column and no "
        "input column, so every record would hold only a label and a split. Add the "
        "images' paths as an 'image_uri' column (or declare the column that holds them: ",
        Option("schema", {"<column>": IMAGE_URI}), "), or keep the input columns to store.")


def _number_type(column: pd.Series) -> str | None:
    """IntegerInput or FloatInput for a text column whose values all read as numbers
    (blanks aside). Each value is looked at by C loops (`map`): a million take 0.3 s."""
    cells = column.tolist()
    if pd.api.types.infer_dtype(column, skipna=False) == "string":  # text only: a CSV's
        values = list(filter(None, map(str.strip, cells)))
    else:
        values = [v.strip() for v in cells if isinstance(v, str) and v.strip()]
        if len(values) < sum(not is_missing(v) for v in cells):
            return None
    if not values:
        return None
    if all(map(_INTEGER.match, values)):
        return "IntegerInput"
    try:
        deque(map(float, values), maxlen=0)
    except ValueError:
        return None
    return "FloatInput"


def _items(column: pd.Series) -> list[tuple]:
    """(index, value) pairs as plain Python objects: iterating pandas' own (Arrow-backed)
    arrays element by element is many times slower."""
    return list(zip(column.index.tolist(), column.tolist()))


def _images_in_memory(column: pd.Series, base_dir: str, rows: pd.DataFrame) -> None:
    """Adds an `Image` column's rows: the cells as given (`image`; never copied), each
    image's `image_uri` (a Hugging Face dict's path, else empty) and `image_name` (the
    path's base name, else the row's index label). Dicts that all have a path and no
    bytes (Hugging Face's images left in their files) are read as image paths."""
    if image_cells.path_only(column):
        paths = pd.Series(image_cells.paths(column), index=column.index, name=column.name)
        rows["image_uri"], rows["uri"] = _image_uris(paths, base_dir)
        return
    image_cells.check_cells(column)
    rows["image"] = column
    rows["image_name"], rows["image_uri"] = image_cells.names_and_paths(column)


def _image_uris(column: pd.Series, base_dir: str) -> tuple[list[str], list[str]]:
    """The image URIs exactly as given, and as read (`_resolve`).

    Nothing is stripped: `'padded.jpg '` names another file than `padded.jpg`. A local
    path with whitespace around it that names no file, where the stripped path does, is
    an error rather than a silent fix or a row rejected later.
    """
    items = _items(column)
    bad = [i for i, v in items if is_missing(v) or not isinstance(v, str)]
    if bad:
        raise SchemaError(
            f"column {column.name!r} has empty or non-text values at {name_rows(bad)}. "
            "Every row needs the path or gs:// URI of its image; drop or fix those rows.",
            column=column.name, rows=bad)
    resolved, malformed, unreadable = [], {}, []
    for i, uri in items:
        try:
            resolved.append(_resolve(uri, base_dir))
        except ValueError as error:
            malformed.setdefault(str(error), []).append((i, uri))
            unreadable.append(i)
            resolved.append("")
    if malformed:
        problems = "; ".join(f"{values[0][1]!r} at {name_rows(i for i, _ in values)}: {why}"
                             for why, values in malformed.items())
        raise SchemaError(f"column {column.name!r} has URIs that cannot be read as written: "
                          f"{problems}.", column=column.name, rows=unreadable)
    padded = [(i, uri, path) for (i, uri), path in zip(items, resolved)
              if uri != uri.strip() and not fs.is_remote(path) and not _is_regular_file(path)
              and _names_a_file(uri.strip(), base_dir)]
    if padded:
        _, uri, _ = padded[0]
        rows = [i for i, _, _ in padded]
        raise SchemaError(
            f"column {column.name!r} has paths with whitespace around them that name no file "
            f"as written, though they do without it: {uri!r} at "
            f"{name_rows(rows)} (the file is {uri.strip()!r}). Paths are "
            "read exactly as written: remove the whitespace from the table (e.g. "
            f"df[{column.name!r}] = df[{column.name!r}].str.strip(), or 'a,b' for 'a, b' in "
            "a CSV file).", column=column.name, rows=rows)
    return [uri for _, uri in items], resolved


def _resolve(uri: str, base_dir: str) -> str:
    """Where to read `uri`: a bucket URI as it is, a `file://` URI as its local path, a
    relative path joined to `base_dir`.

    Raises:
        ValueError: for a URI that is malformed as written (its reason).
    """
    if fs.is_file_uri(uri):
        return fs.file_uri_path(uri)
    if fs.is_remote(uri):
        if uri[:1].isspace() and _SCHEME.match(uri.lstrip()):
            raise ValueError("whitespace before a URI's scheme; remove it (a CSV file "
                             "written as 'a, b' puts one after each comma)")
        return uri
    if os.path.isabs(uri) or not base_dir:
        return uri
    if fs.is_remote(base_dir):
        scheme, folder = base_dir.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(folder, uri))}"
    return os.path.normpath(os.path.join(base_dir, uri))


def _names_a_file(uri: str, base_dir: str) -> bool:
    """Whether `uri` resolves to an existing local regular file."""
    try:
        path = _resolve(uri, base_dir)
    except ValueError:
        return False
    return not fs.is_remote(path) and _is_regular_file(path)


def _is_regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return False


def _split_cell(value) -> str | None:
    """The split a table's cell names (`splits.split_named`); a blank is UNASSIGNED."""
    if is_missing(value) or not str(value).strip():
        return UNASSIGNED
    return split_named(str(value))


def _splits(column: pd.Series) -> pd.Categorical:
    """Every row's split (a `Split`, or UNASSIGNED), each distinct value read once."""
    try:
        codes, distinct = pd.factorize(column, use_na_sentinel=False)
    except TypeError:  # unhashable values: read one by one, below
        return pd.Categorical(_each_split(column))
    normalized = [_split_cell(value) for value in distinct.tolist()]
    if None in normalized:
        _each_split(column)  # raises, naming the rows
    return pd.Categorical(np.array(normalized, dtype=object)[codes])


def _each_split(column: pd.Series) -> list[str]:
    normalized, bad = [], {}
    for i, value in _items(column):
        split = _split_cell(value)
        if split is None:
            bad.setdefault(str(value), []).append(i)
        normalized.append(split)
    if bad:
        values = "; ".join(f"{v!r} at {name_rows(rows)}" for v, rows in bad.items())
        raise SchemaError(
            f"column {column.name!r} has unknown values: {values}. Use {spellings_text()}; a "
            "blank is UNASSIGNED.",
            column=column.name,
            rows=[i for i, split in zip(column.index.tolist(), normalized) if split is None])
    return normalized


def _labels(frame: pd.DataFrame, names: list[str], types: Mapping) -> tuple[list, bool]:
    """The labels of every row (all str or all int), and whether rows are multi-label:
    a label column holding lists, or several label columns (their blank cells skipped)."""
    declared = next((types[n] for n in names if types[n] in LABEL_TYPES), None)
    what = f"column {names[0]!r}" if len(names) == 1 else f"label columns {names}"
    cells = [frame[name].tolist() for name in names]
    if len(names) == 1 and not _holds_lists(frame[names[0]]):
        labels = _distinct_labels(frame[names[0]], what, declared, names)
        if labels is not None:
            return labels, False
        items = list(zip(frame.index.tolist(), cells[0]))
        missing = [i for i, v in items if is_missing(v)]
        if missing:
            raise SchemaError(
                f"{what} is empty at {name_rows(missing)}. Give every row a label, or drop "
                "the label column (", dropping(names[0]), ") to write a dataset without "
                "labels.", column=names[0], rows=missing)
        return _label_values(items, what, declared, names), False
    per_row = [[v for cell in row for v in (flat(cell) if is_list(cell) else [cell])
                if not is_missing(v)] for row in zip(*cells)]
    items = [(i, v) for i, labels in zip(frame.index.tolist(), per_row) for v in labels]
    values = iter(_label_values(items, what, declared, names))
    return [[next(values) for _ in labels] for labels in per_row], True


def _holds_lists(column: pd.Series) -> bool:
    """Whether an object column holds a list anywhere (text and integers are told by
    pandas' C type inference first)."""
    return column.dtype == object and pd.api.types.infer_dtype(
        column, skipna=False) not in ("string", "integer") and any(map(is_list, column))


def _distinct_labels(column: pd.Series, what: str, declared: str | None,
                     names: list[str]) -> list | None:
    """The labels of a column of text or of integers, each distinct value checked and
    mapped once (10M rows of 3 classes: 0.2 s instead of 10). None when any value is
    missing or wrong, or the column mixes types: the row-by-row path then says which
    rows are at fault."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, uniques = column.cat.codes.to_numpy(), column.cat.categories.tolist()
    elif pd.api.types.infer_dtype(column, skipna=False) in ("string", "integer"):
        codes, uniques = pd.factorize(column.to_numpy(), use_na_sentinel=False)
        uniques = uniques.tolist()
    else:
        return None
    if (codes < 0).any() or any(is_missing(v) for v in uniques) or \
            len({type(v) for v in uniques}) > 1:
        return None
    try:
        mapped = _label_values([(None, v) for v in uniques], what, declared, names)
    except SchemaError:
        return None
    found = np.empty(len(mapped), dtype=object)
    found[:] = mapped
    return found[codes].tolist()


def _label_values(items: list[tuple], what: str, declared: str | None,
                  names: list[str]) -> list:
    """All-str or all-int labels; raises on numbers mixed with text, on fractions, on
    text declared IntegerLabel, and, unless declared, on two spellings of one class id
    ('01' and '1'): integer-looking text is read as ids, which must not merge classes
    without a word. Whitespace around a label is no part of its spelling."""
    if declared == STRING_LABEL:
        return [v.strip() if isinstance(v, str) else str(v) for _, v in items]
    # Integer strings count as numbers (CSV files are read as text).
    texts = [(i, v) for i, v in items if isinstance(v, str) and not _INTEGER.match(v.strip())]
    as_names = Option("schema", dict.fromkeys(names, STRING_LABEL))
    if texts and declared == INTEGER_LABEL:
        raise SchemaError(
            f"{what} is IntegerLabel but holds text at {name_rows(_rows(texts))} (e.g. "
            f"{texts[0][1]!r}). Declare it StringLabel to map names to ids: ", as_names, ".",
            column=sole(names), rows=_rows(texts))
    if texts and len(texts) < len(items):
        numbers = [(i, v) for i, v in items
                   if not isinstance(v, str) or _INTEGER.match(v.strip())]
        raise SchemaError(  # rows: the odd ones out, the fewer
            f"{what} mixes numbers ({name_rows(_rows(numbers))}, e.g. {numbers[0][1]}) and "
            f"text ({name_rows(_rows(texts))}, e.g. {texts[0][1]!r}). Use class names "
            "everywhere or integer class ids everywhere (or read them all as names: ",
            as_names, ").", column=sole(names),
            rows=min(_rows(numbers), _rows(texts), key=len))
    if texts:
        return [v.strip() for _, v in items]
    fractional = [(i, v) for i, v in items if isinstance(v, float) and not v.is_integer()]
    if fractional:
        raise SchemaError(
            f"{what} has non-integer numbers at {name_rows(_rows(fractional))} "
            f"(e.g. {float(fractional[0][1])}). Labels are class ids or class names.",
            column=sole(names), rows=_rows(fractional))
    ids = [int(v.strip()) if isinstance(v, str) else int(v) for _, v in items]
    if declared != INTEGER_LABEL:
        _check_spellings(items, ids, what, names)
    negative = _rows(item for item, label in zip(items, ids) if label < 0)
    if negative:
        raise SchemaError(
            f"{what} has negative class ids at {name_rows(negative)}. Class ids count from "
            "0; use class names, or ids 0, 1, 2, ...", column=sole(names), rows=negative)
    return ids


def _rows(items) -> list:
    """The rows of (index, value) pairs, each once (a multi-label row has several)."""
    return list(dict.fromkeys(i for i, _ in items))


def _check_spellings(items: list[tuple], ids: list[int], what: str,
                     names: list[str]) -> None:
    """Raises when two spellings of a label ('01' and '1', '+1' and '1') give one id."""
    if all(not isinstance(v, str) or v.strip() == str(label)
           for (_, v), label in zip(items, ids)):
        return  # every spelling is its id's own: distinct spellings, distinct ids
    spellings: dict[int, dict[str, list]] = {}
    for (i, v), label in zip(items, ids):
        spelling = v.strip() if isinstance(v, str) else str(label)
        spellings.setdefault(label, {}).setdefault(spelling, []).append(i)
    merged = {label: found for label, found in spellings.items() if len(found) > 1}
    if merged:
        label, found = next(iter(merged.items()))
        both = " and ".join(f"{spelling!r} ({name_rows(rows)})"
                            for spelling, rows in found.items())
        more = f" ({len(merged) - 1} more ids are spelt in several ways)" if len(merged) > 1 \
            else ""
        raise SchemaError(
            f"{what} spells class id {label} in different ways: {both}{more}. They would "
            "become one class. To keep them apart as names, declare ",
            Option("schema", dict.fromkeys(names, STRING_LABEL)), "; to merge them as ids, ",
            Option("schema", dict.fromkeys(names, INTEGER_LABEL)), ".", column=sole(names),
            rows=_rows(item for item, id_ in zip(items, ids) if id_ == label))


# --- sources -------------------------------------------------------------------------

def _read_csv(path: str, header: bool | None, names: set[str] = frozenset(),
              base_dir: str = "") -> pd.DataFrame:
    """Reads an AutoML-style CSV as text; the index holds the line each record starts on.

    Records are parsed by the csv module over the whole text, so a quoted cell keeps its
    line breaks (and U+2028 and its kin, which `str.splitlines` would split on).

    Without `header`, a first record is a header when it names a column (`role_by_name`,
    `synonym_role`, or a column of the schema: `names`) and holds no image path.
    """
    text = _decode(fs.read_bytes(path), path)
    batches = _records(io.StringIO(text, newline=""), path)
    return next(_csv_frames(batches, path, header, names, base_dir))


def csv_chunks(path: str, header: bool | None, names: set[str], base_dir: str,
               chunk_rows: int) -> Iterator[pd.DataFrame]:
    """`_read_csv`'s table in frames of `chunk_rows` records, read as a stream: the
    columns are found in the first chunk (a header, or AutoML's columns) and kept."""
    binary = fs.open_read(path)
    if binary.peek(2)[:2] in _UTF16_MARKS:
        binary.close()
        _refuse_utf16(path)
    with io.TextIOWrapper(binary, encoding="utf-8-sig", newline="") as text:
        yield from _csv_frames(_records(text, path, chunk_rows), path, header, names,
                               base_dir)


def _csv_frames(batches: Iterator[tuple[list[int], list[list[str]]]], path: str,
                header: bool | None, names: set[str], base_dir: str
                ) -> Iterator[pd.DataFrame]:
    """A DataFrame of text cells for each batch of records (`_records`), under the
    columns the first batch names or implies."""
    lines, records = next(batches, ([], []))
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    _check_delimiter(records, path, names)
    if header is None:
        header = any(_names_a_column(cell, names) for cell in records[0]) and not any(
            _looks_like_path(cell) for cell in records[0])
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
        width = max(len(r) for r in records)
        names = _automl_columns(records, width, base_dir)
        if len(names) < width:
            lead = len(names) - 1
    width = len(names)
    while records:
        if lead is not None:
            records = [r[:lead] + [""] * (lead - len(r)) + [
                [cell.strip() for cell in r[lead:] if cell.strip()]] for r in records]
        long = [n for n, r in zip(lines, records) if len(r) > width]
        if long:
            raise SchemaError(
                f"the CSV file {path!r} has more than {width} fields at {name_rows(long)} "
                f"(lines). Its columns are {names}.", rows=long)
        padded = [r if len(r) == width else r + [""] * (width - len(r)) for r in records]
        yield pd.DataFrame(padded, columns=names, index=pd.Index(lines, name="line"),
                           dtype=object)
        lines, records = next(batches, ([], []))


_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")


def _refuse_utf16(path: str):
    raise SchemaError(f"the CSV file {path!r} is UTF-16 (it starts with a UTF-16 byte "
                      "order mark). Save it as UTF-8 (Excel: 'CSV UTF-8').")


def _decode(data: bytes, path: str) -> str:
    """The text of a UTF-8 file (a byte order mark dropped)."""
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


def _names_a_column(cell: str, names: set[str] = frozenset()) -> bool:
    cell = cell.strip()
    return cell in names or bool(role_by_name(cell) or synonym_role(cell))


def _check_delimiter(records: list[list[str]], path: str, names: set[str]) -> None:
    """Raises for a file that is evidently `;`- or tab-separated: one column, every line
    holding the separator as often, and a first line that names columns or rows that
    start with split names. Read with commas it would be one column of impossible paths;
    read with a guessed separator, a `;` in a file name would change what the file means,
    so the file is to be saved with commas."""
    if any(len(r) > 1 for r in records):
        return
    for separator, what in ((";", "semicolon"), ("\t", "tab")):
        counts = {r[0].count(separator) for r in records}
        if len(counts) > 1 or counts == {0}:
            continue
        first = [part.strip() for r in records for part in r[0].split(separator)[:1]]
        if any(_names_a_column(cell, names) for cell in records[0][0].split(separator)) or \
                all(cell and _split_cell(cell) is not None for cell in first):
            raise SchemaError(
                f"the CSV file {path!r} looks {what}-separated: its first line "
                f"{records[0][0]!r} is a single column when split at commas. tfrecorder "
                f"reads comma-separated files (as AutoML does): save it with commas, e.g. "
                f"pd.read_csv(path, sep={separator!r}, dtype=str, keep_default_na=False)"
                f".to_csv(path, index=False).")


def _automl_columns(records: list[list[str]], width: int, base_dir: str = "") -> list[str]:
    """The columns of header-less AutoML Vision rows: `[split,]image_uri[,label...]`.

    Two cells are `split,image_uri` when every first cell is a split name; with three or
    more, the first is the split unless every first cell looks like an image path, or
    the first that is a local file is an image (then a misspelt split is reported as
    such, not read as a path).
    """
    if width == 1:
        return ["image_uri"]
    if width == 2:
        if all(_split_cell(r[0]) is not None for r in records):
            return ["split", "image_uri"]
        return ["image_uri", "label"]
    first = [r[0] for r in records]
    has_split = not (all(_looks_like_path(cell) for cell in first)
                     or _first_local_file_is_image(first[:_SAMPLE], base_dir))
    return ["split", "image_uri", "label"] if has_split else ["image_uri", "label"]



# --- Parquet -------------------------------------------------------------------------
# pandas reads Parquet with pyarrow, imported here only: `import tfrecorder` stays fast.

_PARQUET_EXTENSIONS = (".parquet", ".pq")
_HIVE_PART = re.compile(r"^[^=/]+=[^/]*/?$")  # a partition folder: `column=value`


def has_parquet_name(path: str) -> bool:
    """`.parquet` or `.pq` in any case: a file, or a folder as Spark names its output."""
    return path.rstrip("/").lower().endswith(_PARQUET_EXTENSIONS)


def _hidden(parts: list[str]) -> bool:
    """Names pyarrow skips in a dataset folder: `.crc` files, Spark's `_SUCCESS`."""
    return any(part.startswith((".", "_")) for part in parts)


def _is_parquet_folder(root: str) -> bool:
    """Whether a folder is a Parquet dataset: named so, or holding Parquet files directly
    inside (one listing; an image folder holds label folders there).

    Raises:
        SchemaError: for Parquet files beside other files: neither a dataset nor an
            image folder.
    """
    if has_parquet_name(root):
        return True
    found = [name for name in fs.list_dir(root)
             if not _hidden([name]) and has_parquet_name(name)]
    if not found:
        # Hive partitions (`split=TRAIN/part-0.parquet`, as df.to_parquet(partition_cols=)
        # and Spark write them): a dataset if Parquet files are all there is below.
        folders = [name for name in fs.list_dir(root, folders=True) if not _hidden([name])]
        if folders and all(_HIVE_PART.match(name) for name in folders):
            found = [uri for uri in fs.list_files(root) if has_parquet_name(uri)][:1]
    if not found:
        return False
    remote = fs.is_remote(root)
    prefix = root.rstrip("/") if remote else root
    for uri in fs.list_files(root):
        parts = uri[len(prefix):].strip("/").split("/" if remote else os.sep)
        if not _hidden(parts) and not has_parquet_name(uri):
            raise SchemaError(
                f"the folder {root!r} holds Parquet files (e.g. {found[0]!r}) beside other "
                f"files (e.g. {uri!r}), so it is neither a Parquet dataset nor an image "
                "folder. Pass the Parquet file's own path, or move the other files out.")
    return True


def _read_parquet(path: str, header: bool | None) -> pd.DataFrame:
    """A Parquet file, or a folder of them (read in path order), with its column types:
    ints stay ints, a list column holds an array per cell, a dictionary column is a
    pandas Categorical. Remote paths go through `fs`'s file system, as every file does.

    Raises:
        OptionError: for `header`, which only a CSV file takes.
        SchemaError: for a file pyarrow cannot read (not Parquet, cut short), with what
            pyarrow said.
    """
    where, filesystem = _parquet_where(path, header)
    return _reading_parquet(path, lambda: pd.read_parquet(where, engine="pyarrow",
                                                          filesystem=filesystem))


def parquet_chunks(path: str, header: bool | None, chunk_rows: int
                   ) -> Iterator[pd.DataFrame]:
    """`_read_parquet`'s table in frames of about `chunk_rows` rows, read as a stream,
    in the same order and with the same types (a chunk's categoricals have the
    categories found in it)."""
    import pyarrow as pa
    import pyarrow.dataset as ds  # what pandas reads Parquet folders with

    where, filesystem = _parquet_where(path, header)
    dataset = _reading_parquet(path, lambda: ds.dataset(
        where, format="parquet", filesystem=filesystem, partitioning="hive",
        ignore_prefixes=[".", "_"]))
    # One batch read ahead, not pyarrow's 16 (and 4 files), and no pre-buffering of
    # whole row groups: those held 1.4 GB for bench_chunked's 250k-row chunks, against
    # 0.4 GB so.
    batches = iter(_reading_parquet(path, lambda: dataset.to_batches(
        batch_size=chunk_rows, use_threads=False, batch_readahead=1, fragment_readahead=1,
        fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))))
    pending, count, offset = [], 0, 0
    while True:
        batch = _reading_parquet(path, lambda: next(batches, None))
        if batch is not None and batch.num_rows:
            pending.append(batch)
            count += batch.num_rows
        if pending and (batch is None or count >= chunk_rows):
            frame = pa.Table.from_batches(pending, schema=dataset.schema).to_pandas()
            if isinstance(frame.index, pd.RangeIndex):  # row numbers, from the file's start
                frame.index = frame.index + offset
            yield frame
            pending, count, offset = [], 0, offset + count
        if batch is None:
            return


def _parquet_where(path: str, header: bool | None) -> tuple:
    """pyarrow's path and file system for `path`; a `header` is refused."""
    if header is not None:
        raise OptionError(
            f"the source {path!r} is Parquet, which names its own columns: ",
            Option("header", header), " is for CSV files. Leave ", Option("header"),
            " unset.", option="header")
    if fs.is_remote(path):
        return fs.filesystem(path)._strip_protocol(path), _arrow_filesystem(path)
    return path, None


def _reading_parquet(path: str, read: Callable):
    """`read()`, with pyarrow's errors about the data as a SchemaError saying what to do
    (and a store's errors as `fs` reports them)."""
    import pyarrow  # pandas' Parquet engine

    failure = None
    with fs.storage_errors(path):  # a store's errors; pyarrow's are about the data
        try:
            return read()
        except pyarrow.ArrowException as error:
            failure = error  # raised below: inside, it would become a StorageError
    message = " ".join(str(failure).split()) or type(failure).__name__
    raise SchemaError(
        f"the Parquet source {path!r} cannot be read: pyarrow says {message!r}. Check that "
        "each file is a whole Parquet file (a copy cut short, or a file still being "
        "written, lacks its footer), or write it again, e.g. with df.to_parquet(path).")


def _arrow_filesystem(uri: str):
    """pyarrow's view of `fs.filesystem(uri)` that reads each file whole, in one request
    (as `fs.read_bytes` does): the file objects gcsfs opens for pyarrow otherwise leave
    read-ahead tasks behind, and the command line ended with "Task was destroyed but it
    is pending!"."""
    from pyarrow import BufferReader
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    class WholeFiles(FSSpecHandler):
        def open_input_file(self, path: str) -> BufferReader:
            return BufferReader(self.fs.cat_file(path))

    return PyFileSystem(WholeFiles(fs.filesystem(uri)))

# --- what an image is ------------------------------------------------------------------
# By its name where that says (Pillow's registered extensions, and common ones), else by
# the first bytes of a local file. Pillow's list is asked for only for an extension the
# common ones lack: it imports all of Pillow's plugins (80 ms).

_IMAGE_EXTENSIONS = frozenset({
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".apng", ".gif", ".bmp", ".dib", ".tif",
    ".tiff", ".webp", ".avif", ".avifs", ".heic", ".heif", ".jxl", ".jp2", ".j2k", ".jpf",
    ".jpx", ".jpc", ".j2c", ".ico", ".cur", ".icns", ".tga", ".pbm", ".pgm", ".ppm",
    ".pnm", ".pcx", ".psd", ".dds", ".qoi"})
# Formats Pillow opens that are not pictures to train on: documents, video, science data.
_NOT_IMAGES = frozenset({".pdf", ".eps", ".ps", ".mpg", ".mpeg", ".h5", ".hdf", ".bufr",
                         ".grib", ".fit", ".fits"})


@functools.cache
def _pillow_extensions() -> frozenset[str]:
    from PIL import Image

    return frozenset(ext for ext, name in Image.registered_extensions().items()
                     if name in Image.OPEN) - _NOT_IMAGES


def _has_image_extension(path: str) -> bool:
    extension = posixpath.splitext(path.lower())[1]
    return extension in _IMAGE_EXTENSIONS or (
        len(extension) > 1 and extension in _pillow_extensions())


def _looks_like_path(cell: str) -> bool:
    cell = cell.strip()
    return "/" in cell or "\\" in cell or _has_image_extension(cell)


def _is_image_file(path: str) -> bool:
    """Whether Pillow recognises a local regular file as an image, from its header (so
    any format we can read, whatever its name; a FIFO is never opened to wait)."""
    from PIL import Image  # only for a column whose extensions said nothing

    try:
        with fs.open_read(path) as file, Image.open(file):
            return True
    except Exception:  # not a file, not an image: Pillow raises many kinds
        return False


def _first_local_file_is_image(values: list, base_dir: str) -> bool:
    """Whether the first value that names an existing local file names an image, by the
    file's first bytes: one read for the whole column."""
    for value in values:
        if isinstance(value, str) and _names_a_file(value, base_dir):
            return _is_image_file(_resolve(value, base_dir))
    return False


# --- image folders -------------------------------------------------------------------

_STRAY_SNIFFED = 100  # stray files without an image extension whose bytes are looked at


def _folder_table(root: str) -> pd.DataFrame:
    """Rows for a folder laid out as `label/file` or `split/label/file`.

    A first level made only of split names (`splits.SPELLINGS`, any case) means
    `split/label/...`; otherwise the first level is the label. Split folders holding
    label folders beside other folders are an error: which folders are classes is
    unclear. Files may sit deeper below the label folder. Hidden files (a leading '.')
    are skipped, and so, with a warning, are non-image files outside the label folders
    (a README); images there (by extension, or a local file's first bytes) are an error.
    """
    remote = fs.is_remote(root)
    root = root.rstrip("/") if remote else os.path.abspath(root)
    entries = []
    for uri in fs.list_files(root):
        parts = uri[len(root):].strip("/").split("/" if remote else os.sep)
        if not any(p.startswith(".") for p in parts):
            entries.append((uri, parts))
    if not entries:
        raise SchemaError(f"the folder {root!r} holds no files.")
    folders = {parts[0] for _, parts in entries if len(parts) > 1}
    split_folders = sorted(f for f in folders if split_named(f) is not None)
    by_split = bool(folders) and len(split_folders) == len(folders)
    if split_folders and not by_split and all(
            len(parts) > 2 for _, parts in entries if parts[0] in split_folders):
        raise SchemaError(
            f"the folder {root!r} holds split folders with label folders inside "
            f"({split_folders}) beside other folders ({sorted(folders - set(split_folders))}"
            "), so it is neither split/label/file nor label/file. Move the other folders "
            "into the split folders, or out of the folder.")
    depth = 3 if by_split else 2
    stray = [uri for uri, parts in entries if len(parts) < depth]
    unknown = [uri for uri in stray if not _has_image_extension(uri)]
    sniffed = set(unknown[:_STRAY_SNIFFED]) if not remote else set()
    stray_images = [uri for uri in stray if uri not in unknown
                    or (uri in sniffed and _is_image_file(uri))]
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
        frame.insert(0, "split", [split_named(parts[0]) for _, parts in entries])
    return frame


# --- a cheap check that local images exist ----------------------------------------------

def missing_local_images(table: Table) -> list[int]:
    """The positions (0-based, in table order) of rows whose local image is not an
    existing regular file: missing, a folder, a FIFO, a device, a broken link. Remote
    URIs are skipped. Reads no image: one `os.stat` per path (0.28 s for 200,000 paths
    with a warm cache; listing folders instead saved a third of that, not worth its code).
    """
    if not table.image_files:
        return []
    return [position for position, uri in enumerate(table.rows["uri"].tolist())
            if "://" not in uri and not _is_regular_file(uri)]


def describe_missing_images(table: Table, positions: list[int],
                            examples: int = 3) -> tuple[str, dict[str, int]]:
    """What is wrong with the rows `missing_local_images` found, for an error message:
    the commonest reasons with their number of rows, examples (as written and as read),
    and the folder relative paths were resolved against, so that "paths relative to the
    wrong folder" is plain to see. Also returns the reasons' counts (commonest first).
    """
    written = table.rows["image_uri"].tolist()
    uris = table.rows["uri"].tolist()
    reasons = Counter(_why_missing(uris[p]) for p in positions)
    text = "Most common reasons: " + "; ".join(
        f"{count} x {reason}" for reason, count in reasons.most_common(3)) + ". E.g. " + \
        "; ".join(f"row {table.rows.index[p]}: {written[p]!r}"
                  + (f" (read as {uris[p]!r})" if written[p] != uris[p] else "")
                  for p in positions[:examples]) + "."
    relative = [p for p in positions if not os.path.isabs(written[p].strip())
                and not fs.is_file_uri(written[p])]
    if relative and table.base_dir:
        text += (f" Relative paths ({len(relative)} of these rows) are resolved against "
                 f"{table.base_dir!r}.")
        first = written[relative[0]]
        here = os.path.abspath(first)
        if os.getcwd() != table.base_dir and _is_regular_file(here):
            text += (f" {first!r} exists relative to the working directory instead "
                     f"({here!r}): paths in a CSV or Parquet file are relative to that "
                     "file's folder (TFRecorder 2.0 read them relative to the working "
                     "directory). Make them relative to that folder, or absolute.")
    return text, dict(reasons.most_common())


def _why_missing(path: str) -> str:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ("no such file" if os.path.isdir(os.path.dirname(path) or ".")
                else "no such file, nor its folder")
    except NotADirectoryError:
        return "a file where its path needs a folder"
    except PermissionError:
        return "permission denied"
    except (OSError, ValueError) as error:
        return getattr(error, "strerror", None) or str(error)
    return "a folder, not a file" if stat.S_ISDIR(mode) else fs.not_regular(mode)

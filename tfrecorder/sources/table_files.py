"""A source of many table files, read as one table in sorted path order: a glob
(`rows/*.csv`, `gs://bucket/rows/*.parquet`) of CSV, Parquet or JSONL files, or a folder
that holds only CSV files or only JSONL files (a folder of Parquet files is a Parquet
dataset, which `parquet` reads).

A folder of CSV or JSONL files in hive partitions (`split=TRAIN/part-0.csv`, as Spark's
partitionBy writes them) is one table too, read as a Parquet dataset is (`claims`,
`read`): its files in the order pyarrow's discovery gives them, each file's rows with the
partition columns typed as pyarrow types them for Parquet (`parquet.parquet_folder`), its
rows named by their position in the folder's table, as a Parquet folder's are.

The local engine and the Beam pipeline share these functions, so that a file's rows,
column types and errors are the same whichever engine reads it: the local engine reads
every file here (`files_table`); the Beam launcher only lists the files (`table_files`,
which reads no rows) and its workers read one file each (`file_table`). A file is read
by the reader `load_table` would use for it alone, and its rows are named by the file
and their line (`rows-00014.csv[7]`), as `concat_tables` names the files of a dict of
splits.

A JSONL file of plain columns (`{"image_uri": ..., "label": ..., "split": ...}` a line)
is read here; one of Vertex AI's (`imageGcsUri` a line) by `vertex_jsonl`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import re
from collections.abc import Iterator

import pandas as pd

# The package this module is in: its dispatcher reads each file as `load_table` would,
# and `concat_tables` joins them. Imported as a module, not by name: the package imports
# this one while it is still being built, and reads it only once a source is loaded.
from tfrecorder import sources
from tfrecorder.errors import SchemaError, SourceNotFoundError
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv, parquet, tables, vertex_jsonl
from tfrecorder.sources.parquet import ParquetFolder
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.wording import LINE, shown

_GLOB = re.compile(r"[*?[]")
# A table file's format, by how its name ends (compared in lower case).
_FORMATS = {".csv": "CSV", ".parquet": "Parquet", ".pq": "Parquet", ".jsonl": "JSONL",
            ".json": "JSONL"}
# What a folder is read as a table of, when it holds only these (a `.json` file in a
# folder may be a COCO file, so only `.jsonl` is taken there).
_FOLDER_FORMATS = {"CSV": (".csv",), "JSONL": (".jsonl",)}


def table_files(source) -> list[str] | None:
    """The files of a source of many table files, sorted; None for any other source.

    A source of many files is a path or URI with glob characters (`*`, `?`, `[`) that
    names no file or folder itself, or a folder holding, beside hidden files (`.crc`,
    Spark's `_SUCCESS`), only CSV files or only JSONL files and no folders. Only lists:
    the Beam launcher calls this, and holds no table. A path named as a table file
    (`x.csv`) is one file: no request asks whether it is a folder.

    A list of paths is a source of many files too, read in the list's order (each path a
    table file: CSV, Parquet or JSONL).

    Raises:
        SourceNotFoundError: for a glob no file matches.
        SchemaError: for a match that is not a table file, or matches of two formats.
    """
    if isinstance(source, list) and source and all(
            isinstance(path, (str, os.PathLike)) for path in source):
        files = [os.fspath(path) for path in source]
        _check_formats(files, f"the list of files {shown(files)}")
        return files
    if not isinstance(source, (str, os.PathLike)):
        return None
    pattern = os.fspath(source)
    try:
        pattern = fs.local_path(pattern)
    except ValueError:
        return None  # a file:// URI that names no file: `load_table` says why
    # A file or folder whose own name holds `[` (`data[1].csv`) is that file or folder.
    if _GLOB.search(pattern) and not fs.exists(pattern) and not fs.is_folder(pattern):
        files = fs.glob(pattern)
        if not files:
            raise SourceNotFoundError(
                f"no file matches {pattern!r}. Check the pattern: a glob of CSV, Parquet "
                "or JSONL files, such as 'rows/*.csv' or 'gs://bucket/rows/*.parquet'.")
    elif file_format(pattern) is None and fs.is_folder(pattern) and not fs.list_dir(
            pattern, folders=True):
        files = [fs.join(pattern, name) for name in fs.list_dir(pattern)
                 if not name.startswith((".", "_"))]
        if not files or not any(all(name.lower().endswith(ends) for name in files)
                                for ends in _FOLDER_FORMATS.values()):
            return None  # not a folder of tables: the other readers see to it
    else:
        return None
    _check_formats(files, repr(pattern))
    return sorted(files)


def _check_formats(files: list[str], source: str) -> None:
    """Refuses a source of many files that holds other files than tables, or tables of
    two formats, naming them."""
    formats = {}
    for path in files:
        kind = file_format(path)
        if kind is None:
            raise SchemaError(
                f"{source} holds {path!r}, which is not a table file. A source of "
                "many files holds CSV (.csv), Parquet (.parquet, .pq) or JSONL (.jsonl, "
                ".json) files: narrow it to them.", option="source")
        formats.setdefault(kind, path)
    if len(formats) > 1:
        (kind, path), (other, other_path) = list(formats.items())[:2]
        raise SchemaError(
            f"{source} holds files of two formats: {path!r} ({kind}) and "
            f"{other_path!r} ({other}). The files of one table are of one format: narrow "
            "it to one of them.", option="source")


# What a folder of hive partitions is read as a table of (Spark names its JSON Lines
# files `.json`: a hive folder is a table's, not a COCO file's).
_HIVE_FORMATS = ("CSV", "JSONL")


def claims(path: str, folder: bool) -> bool:
    """A folder of CSV or JSONL files in hive partitions (`hive_format`)."""
    return folder and hive_format(path) is not None


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """A hive folder's table: every file's rows, as `folder_table` reads them."""
    return folder_table(parquet.parquet_folder(path, hive_format(path)), options)


def hive_format(root: str) -> str | None:
    """CSV or JSONL, for a folder of hive partition folders (`key=value/`, as many levels
    deep as the table has partition fields) whose files below, beside hidden files
    (`.crc`, Spark's `_SUCCESS`), are CSV files or JSONL files; None for any other
    folder (a Parquet dataset's is `parquet`'s).

    Raises:
        SchemaError: for such files beside other files, or beside files of another
            format, naming both.
    """
    if not parquet.partition_folders(root) or any(
            not name.startswith((".", "_")) for name in fs.list_dir(root)):
        return None
    files = list(parquet.visible_files(root))
    if not any(file_format(path) in _HIVE_FORMATS for path in files):
        return None
    _check_formats(files, f"the folder {root!r}")
    return file_format(files[0])


def folder_table(folder: ParquetFolder, options: TableOptions) -> Table:
    """A hive folder of CSV or JSONL files read whole: each file as `file_table` reads
    it for the Beam pipeline, its rows' positions moved to their place in the folder's
    table, joined (`concat_tables`: one kind of rows, the same inputs of the same types,
    one label map); errors name the file and the line."""
    names = file_names(list(folder.files))
    parts, offset = {}, 0
    for name, path in zip(names, folder.files):
        part = file_table(path, options, name, folder)
        parts[name] = _numbered(part, offset)
        offset += len(part.rows)
    return sources.concat_tables(parts, dict(zip(names, names)), name_rows=False)


def read_folder_file(folder: ParquetFolder, path: str, options: TableOptions) -> Table:
    """One CSV or JSONL file of a hive folder, as the folder's whole read gives its rows
    (`folder_table`): its cells, then the partition columns
    (`ParquetFolder.partition_columns`), validated together, images relative to the
    folder; its rows numbered from 0 in the file (errors name their lines)."""
    root = folder.root.rstrip("/")
    if folder.format == "JSONL":
        frame = _plain_jsonl_frame(path)
    else:
        frame = csv.read_csv(path, options.header, set(options.schema or ()), root,
                             refuse_boxes=options.task == "auto")
    clash = [name for name in folder.fields if name in frame.columns]
    if clash:
        raise SchemaError(
            f"the file has a column {clash[0]!r}, which its folders ({clash[0]}=...) "
            "give too. A partitioned table holds a partition field in "
            "its folders' names only: drop the column from the file, or rename it.",
            column=clash[0])
    partitions = folder.partition_columns(path, len(frame)).set_axis(frame.index)
    table = tables.frame_table(pd.concat([frame, partitions], axis=1), root, options,
                               text_numbers=folder.format == "CSV")
    return _numbered(table, 0)


def _numbered(table: Table, first: int) -> Table:
    """The table with its rows named by their position, from `first` (as a Parquet
    folder's whole read names them)."""
    def numbered(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy(deep=False)
        frame.index = pd.RangeIndex(first, first + len(frame))
        return frame

    return dataclasses.replace(table, rows=numbered(table.rows),
                               source=numbered(table.source))


def file_format(path: str) -> str | None:
    """CSV, Parquet or JSONL, by the file's name; None for any other file."""
    return next((kind for end, kind in _FORMATS.items()
                 if path.rstrip("/").lower().endswith(end)), None)


def file_table(path: str, options: TableOptions, name: str | None = None,
               folder: ParquetFolder | None = None) -> Table:
    """One file's validated table, its images relative to the file's folder, its rows
    named `name[line]` (`name[row]` for Parquet) and its errors prefixed by `name`; or,
    for a file of a `folder` (a Parquet folder, or CSV or JSONL files in hive
    partitions), as the folder's whole read gives its rows (their partition columns,
    images relative to the folder; rows numbered from 0 in the file, their position in
    the folder's table being the caller's to add).

    Args:
        path: the file, local or remote.
        options: the options of the whole source.
        name: how messages and row names call the file; default its base name.
        folder: the folder the file is one of (`pipeline_files`).

    Raises:
        SchemaError: for every mistake in the file, as `load_table(path)` raises it,
            its message starting with the file's name.
    """
    name = name or fs.basename(path)
    with _naming_errors(name):
        if folder is not None:
            return sources.read_folder_file(folder, path, options)
        table = (_plain_jsonl_table(path, options) if _is_plain_jsonl(path)
                 else sources.read_path(path, options))
    return sources.named_table(table, name)


def pipeline_files(source) -> list[str] | ParquetFolder | None:
    """What a Beam pipeline reads a file at a time, the launcher reading no row: the files
    of a source of many table files (`table_files`), or a Parquet folder's or a hive
    folder of CSV or JSONL files' (which `load_table` reads as one table, and the
    pipeline file by file to the same rows: `parquet.parquet_folder`); None for any
    other source."""
    with fs.listings_kept():  # (each of its questions would list the folder again)
        return _pipeline_files(source)


def _pipeline_files(source) -> list[str] | ParquetFolder | None:
    files = table_files(source)
    if files is not None or not isinstance(source, (str, os.PathLike)):
        return files
    try:
        path = fs.local_path(os.fspath(source))
    except ValueError:
        return None
    if not fs.is_folder(path):
        return None
    path = path if fs.is_remote(path) else os.path.abspath(path)
    kind = hive_format(path)
    if kind is None and not parquet.is_parquet_folder(path):
        return None
    return parquet.parquet_folder(path, kind or "Parquet")


def files_table(paths: list[str], options: TableOptions) -> Table:
    """Every file's `file_table`, in the order given, as one table (`concat_tables`:
    one kind of rows, the same inputs of the same types, one label map)."""
    names = file_names(paths)
    parts = {name: file_table(path, options, name) for name, path in zip(names, paths)}
    return sources.concat_tables(parts, dict(zip(names, names)), name_rows=False)


def file_names(paths: list[str]) -> list[str]:
    """What messages and row names call each of a source's files (`file_table`'s
    `name`, which the Beam pipeline passes too): its base name, or where two files
    share one (`a/part-0.csv`, `b/part-0.csv`), its path below their common folder."""
    names = [fs.basename(path) for path in paths]
    if len(set(names)) == len(names):
        return names
    folders = [fs.dirname(path) for path in paths]
    separator = "/" if fs.is_remote(paths[0]) else os.sep
    common = os.path.commonprefix([folder + separator for folder in folders])
    common = common[:common.rfind(separator)]
    return [fs.relative_to(fs.join(folder, name), common)
            for folder, name in zip(folders, names)]


@contextlib.contextmanager
def _naming_errors(name: str) -> Iterator[None]:
    """Raises a SchemaError from within as the same error, its message starting with
    `name` (its column, rows and option kept), so that a message of a file among many
    says which."""
    try:
        yield
    except SchemaError as error:
        named = copy.copy(error)  # its class and fields (`TFRecorderError.__reduce__`)
        named.parts = (f"{name}: ", *error.parts)
        named.args = ("".join(map(str, named.parts)),)
        raise named from None


def _is_plain_jsonl(path: str) -> bool:
    """A JSONL file of plain columns: not Vertex AI's (whose lines name an
    `imageGcsUri`), and for a `.json` file, one object a line that is not COCO's."""
    if file_format(path) != "JSONL":
        return False
    line = csv.head_text(path, 1 << 16).lstrip().split("\n", 1)[0]
    if path.lower().endswith(".jsonl"):
        return f'"{vertex_jsonl.IMAGE}"' not in line
    try:
        first = json.loads(line)
    except ValueError:
        return False  # a JSON document over many lines: the dispatcher's (COCO)
    return isinstance(first, dict) and not {vertex_jsonl.IMAGE, "images"} & first.keys()


def _plain_jsonl_table(path: str, options: TableOptions) -> Table:
    """A JSONL file of plain columns: each line one row, an object of its cells, typed
    as a DataFrame's (JSON numbers stay numbers), its rows named by their line."""
    return tables.frame_table(_plain_jsonl_frame(path), fs.dirname(path), options)


def _plain_jsonl_frame(path: str) -> pd.DataFrame:
    """A JSONL file of plain columns as a DataFrame, its index each row's line."""
    # Lines of bytes, each decoded by `json.loads`: a byte that is not UTF-8 is an error
    # of its line.
    numbered = [(number, line) for number, line in
                enumerate(fs.read_bytes(path).split(b"\n"), 1) if line.strip()]
    if not numbered:
        raise SchemaError(f"the JSONL file {path!r} has no lines.")
    return pd.DataFrame.from_records(
        [_row(path, number, line) for number, line in numbered],
        index=pd.Index([number for number, _ in numbered], name=LINE))


def _row(path: str, number: int, line: bytes) -> dict:
    """Line `number`'s object of cells."""
    with contextlib.suppress(ValueError):  # not JSON, or not UTF-8
        row = json.loads(line)
        if isinstance(row, dict):
            return row
    shown = line.strip()[:120].decode("utf-8", errors="replace")
    raise SchemaError(
        f"line {number} of the JSONL file {path!r} is not a JSON object in UTF-8: "
        f"{shown!r}. A JSONL table holds one object a line, its cells by column: "
        '{"image_uri": ..., "label": ...}.', rows=[number])

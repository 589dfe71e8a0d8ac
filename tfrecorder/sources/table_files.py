"""A source of many table files, read as one table in sorted path order: a glob
(`rows/*.csv`, `gs://bucket/rows/*.parquet`) of CSV, Parquet or JSONL files, or a folder
that holds only CSV files or only JSONL files (a folder of Parquet files is a Parquet
dataset, which `parquet` reads).

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


def file_format(path: str) -> str | None:
    """CSV, Parquet or JSONL, by the file's name; None for any other file."""
    return next((kind for end, kind in _FORMATS.items()
                 if path.rstrip("/").lower().endswith(end)), None)


def file_table(path: str, options: TableOptions, name: str | None = None,
               folder: ParquetFolder | None = None) -> Table:
    """One file's validated table, its images relative to the file's folder, its rows
    named `name[line]` (`name[row]` for Parquet) and its errors prefixed by `name`; or,
    for a file of a Parquet `folder`, as the folder's whole read gives its rows (their
    partition columns, images relative to the folder; rows numbered from 0 in the file,
    their position in the folder's table being the caller's to add).

    Args:
        path: the file, local or remote.
        options: the options of the whole source.
        name: how messages and row names call the file; default its base name.
        folder: the Parquet folder the file is one of (`pipeline_files`).

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
    of a source of many table files (`table_files`), or a Parquet folder's (which
    `load_table` reads as one dataset, and the pipeline file by file to the same rows:
    `parquet.parquet_folder`); None for any other source."""
    files = table_files(source)
    if files is not None or not isinstance(source, (str, os.PathLike)):
        return files
    try:
        path = fs.local_path(os.fspath(source))
    except ValueError:
        return None
    if not fs.is_folder(path) or not parquet.is_parquet_folder(path):
        return None
    return parquet.parquet_folder(path if fs.is_remote(path) else os.path.abspath(path))


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
    # Lines of bytes, each decoded by `json.loads`: a byte that is not UTF-8 is an error
    # of its line.
    numbered = [(number, line) for number, line in
                enumerate(fs.read_bytes(path).split(b"\n"), 1) if line.strip()]
    if not numbered:
        raise SchemaError(f"the JSONL file {path!r} has no lines.")
    frame = pd.DataFrame.from_records(
        [_row(path, number, line) for number, line in numbered],
        index=pd.Index([number for number, _ in numbered], name=LINE))
    return tables.frame_table(frame, fs.dirname(path), options)


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

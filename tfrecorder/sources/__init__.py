"""Every source -> one validated `Table`: the readers, one module per format, and the
dispatcher that picks one.

    csv.py          AutoML Vision CSV files, or any columns under a header row
    parquet.py      Parquet files and folders of them
    folder.py       image folders: label/file or split/label/file
    memory.py       NumPy arrays, dicts of columns or of splits, Hugging Face datasets
    chunked.py      CSV and Parquet files larger than memory, a chunk of rows at a time
    validate.py     the checks every source shares (with labels.py, image_paths.py)

A file format is a module with two functions: `claims(path, folder)`, whether the path
is of that format (by its name, or by its content where the name does not say), and
`read(path, base_dir, options)`, the validated table (relative image paths resolved
against `base_dir`: a folder source's own, or a file's folder). `FILE_FORMATS` asks them
in order; a new format is one module and one entry there. Every reader ends in `validate`, so every
source is checked alike, before a single image is read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import SchemaError, SourceNotFoundError
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv, folder, memory, parquet
from tfrecorder.sources.validate import validate
from tfrecorder.table import Table

# Asked in order: the first that claims a path reads it. CSV claims every file, so last.
FILE_FORMATS = (parquet, folder, csv)


def load_table(source: pd.DataFrame | str | os.PathLike | tuple | Mapping,
               **options) -> Table:
    """Reads and validates `source`: a DataFrame, a CSV or Parquet path, an image folder,
    or images in memory (arrays, dicts of columns or of splits, Hugging Face datasets).

    Args:
        source: the DataFrame; the path of a CSV file; a Parquet file (`.parquet` or `.pq`)
            or a folder of them (`part-*.parquet`, as pandas and Spark write, or in hive
            partitions such as `split=TRAIN/`); an image folder laid out as `label/file`
            or `split/label/file`; or images in memory (`memory`).
        options: `TableOptions`' fields (header, schema, fill_missing, chunk_rows, split).
    """
    options = TableOptions(**options)
    frame, implied, class_names = (memory.as_frame(source) if memory.is_in_memory(source)
                                   else (source, {}, None))  # arrays, dicts, HF datasets
    if isinstance(frame, pd.DataFrame):
        table = validate(frame, base_dir=os.getcwd(),
                         schema={**implied, **(options.schema or {})},
                         fill_missing=options.fill_missing, split=options.split)
        return dataclasses.replace(table, class_names=class_names)
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
    is_folder = fs.is_folder(path)
    if is_folder and not fs.is_remote(path):
        path = os.path.abspath(path)
    elif not is_folder and not fs.exists(path):
        what = "Parquet file or folder" if parquet.has_parquet_name(path) else \
            "CSV file or image folder"
        raise SourceNotFoundError(f"no such {what}: {path!r}")
    reader = next(f for f in FILE_FORMATS if f.claims(path, is_folder))
    # Relative image paths are relative to the source's folder, local or remote.
    base_dir = path.rstrip("/") if is_folder else fs.dirname(path)
    return reader.read(path, base_dir, options)

"""Every source -> one validated `Table`: the readers, one module per format, and the
dispatcher that picks one.

    csv.py          AutoML Vision CSV files, or any columns under a header row
    parquet.py      Parquet files and folders of them
    folder.py       image folders: label/file or split/label/file
    memory.py       NumPy arrays, dicts of columns or of splits, Hugging Face datasets
    chunked.py      CSV and Parquet files larger than memory, a chunk of rows at a time
    tables.py       tables whose columns say their task: `mask_uri` (segmentation.py),
                    a column of boxes (detection.py)
    automl_detection.py  AutoML Vision / Vertex AI object-detection CSV files
    vertex_jsonl.py Vertex AI JSONL import files (classes or boxes)
    coco.py         COCO object-detection JSON files
    detection.py    what detection sources share: the objects' columns and checks
    segmentation.py tables of images and their masks (`mask_uri`)
    validate.py     the checks every source shares (with labels.py, image_paths.py)

A file format is a module with two functions: `claims(path, folder)`, whether the path
is of that format (by its name, or by its content where the name does not say), and
`read(path, base_dir, options)`, the validated table (relative image paths resolved
against `base_dir`: a folder source's own, or a file's folder). `FILE_FORMATS` asks them
in order; a new format is one module and one entry there. Every reader ends in `validate`, so every
source is checked alike, before a single image is read.

A reader reads for the `task` asked where its source allows (a detection CSV read for
classification reads its cells as labels), and the dispatcher refuses a table of
another task than the one asked, saying what that task needs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import Option, SchemaError, SourceNotFoundError
from tfrecorder.options import TableOptions
from tfrecorder.sources import (
    automl_detection,
    coco,
    csv,
    folder,
    memory,
    parquet,
    tables,
    vertex_jsonl,
)
from tfrecorder.table import Table
from tfrecorder.wording import shown

# Asked in order: the first that claims a path reads it. CSV claims every file, so last;
# the formats that look into a file's content to claim it come before it, and `tables`
# (Parquet and CSV files whose columns name their task) before Parquet.
FILE_FORMATS = (tables, parquet, folder, vertex_jsonl, coco, automl_detection, csv)
# What each task needs, for an error when the source is read for another.
_NEEDS = {
    "classification": "labels of whole images",
    "detection": "boxes: an AutoML object-detection CSV, a Vertex AI JSONL file with "
                 "boundingBoxAnnotations, a COCO JSON file, or a table with a 'boxes' "
                 "column (a list of [ymin, xmin, ymax, xmax] an image) and a 'label' "
                 "column of lists, one class a box",
    "segmentation": "a table with an 'image_uri' and a 'mask_uri' column",
}


def load_table(source: pd.DataFrame | str | os.PathLike | tuple | Mapping,
               **options) -> Table:
    """Reads and validates `source`: a DataFrame, a CSV or Parquet path, an image folder,
    or images in memory (arrays, dicts of columns or of splits, Hugging Face datasets).

    Args:
        source: the DataFrame; the path of a CSV file; a Parquet file (`.parquet` or `.pq`)
            or a folder of them (`part-*.parquet`, as pandas and Spark write, or in hive
            partitions such as `split=TRAIN/`); an image folder laid out as `label/file`
            or `split/label/file`; an AutoML object-detection CSV, a Vertex AI JSONL file
            or a COCO JSON file (docs/detection.md); or images in memory (`memory`).
        options: `TableOptions`' fields (header, schema, fill_missing, chunk_rows, split,
            task, image_root).

    Raises:
        SchemaError: for a source that is not what `task` asks for, and for every
            mistake in it (`validate`, and each format's own checks).
    """
    options = TableOptions(**options)
    frame, implied, class_names = (memory.as_frame(source) if memory.is_in_memory(source)
                                   else (source, {}, None))  # arrays, dicts, HF datasets
    if isinstance(frame, pd.DataFrame):
        table = tables.frame_table(frame, os.getcwd(), options, implied)
        return _for_task(dataclasses.replace(table, class_names=class_names), options,
                         "the table")
    if not isinstance(source, (str, os.PathLike)):
        raise SchemaError(
            f"source must be a DataFrame, the path of a CSV file, Parquet file or image "
            f"folder, NumPy arrays (images, labels), a dict of columns or of splits, or a "
            f"Hugging Face Dataset; not {shown(source)}.")
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
    if reader is csv and options.task == "detection":
        reader = automl_detection  # a CSV read for its boxes is AutoML's, whatever its rows
    # Relative image paths are relative to the source's folder, local or remote.
    base_dir = path.rstrip("/") if is_folder else fs.dirname(path)
    return _for_task(reader.read(path, base_dir, options), options, repr(path))


def _for_task(table: Table, options: TableOptions, what: str) -> Table:
    """The table, if it is what `task` asks for (every reader reads for the task asked
    where its source allows)."""
    if options.task in ("auto", table.task):
        return table
    raise SchemaError(
        f"{what} is read as a {table.task} source, and ", Option("task", options.task),
        f" needs {_NEEDS[options.task]}. Pass the source that has them, or leave ",
        Option("task"), " out to read this one.", option="task")

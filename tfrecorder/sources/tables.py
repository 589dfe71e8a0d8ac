"""Tables whose columns say their task: a DataFrame (or arrays and dicts made one), or a
CSV file with a header or a Parquet file, with a `mask_uri` column (segmentation) or a
column of boxes (detection, `detection.frame_table`). Any other table is read for
classification, as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv, detection, parquet, segmentation
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import validate
from tfrecorder.storage import fs

_SNIFFED = 1 << 16


def claims(path: str, folder: bool) -> bool:
    """A Parquet file or folder, or a CSV file with a header, that has a `mask_uri`
    column or a column of boxes (named as `detection.BOX_COLUMNS`, or `objects/...`)."""
    frame = pd.DataFrame(columns=_column_names(path, folder))
    return (segmentation.mask_column(frame, {}) is not None
            or detection.box_column(frame, {}) is not None
            or bool(detection.object_columns(frame, {})))


def _column_names(path: str, folder: bool) -> list[str]:
    """A Parquet source's columns (its schema: no rows read), or the cells of a text
    file's first line; none for anything else, or what cannot be read (the format that
    reads it will say why)."""
    try:
        if parquet.claims(path, folder):
            return parquet.column_names(path)
        if folder or path.lower().endswith((".json", ".jsonl")):
            return []
        head = csv.head_text(path, _SNIFFED)
        records = csv.records_of(head[:head.find("\n") + 1] or head, path)[1]
        return [cell.strip() for cell in records[0]] if records else []
    except (SchemaError, OSError):  # not ours to report: the format that reads it does
        return []


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's table, for the task its columns (or `task`) say."""
    plain = parquet if parquet.claims(path, False) or fs.is_folder(path) else csv
    if options.task == "classification":
        return plain.read(path, base_dir, options)  # as it was: in chunks if large
    if plain is parquet:
        return frame_table(parquet.read_parquet(path, options.header), base_dir, options)
    frame = csv.read_csv(path, options.header, set(options.schema or ()), base_dir)
    return frame_table(frame, base_dir, options, text_numbers=True)


def frame_table(frame: pd.DataFrame, base_dir: str, options: TableOptions,
                implied: Mapping | None = None, text_numbers: bool = False) -> Table:
    """A DataFrame's table, for the task asked, or the one its columns say.

    Args:
        implied: the schema an in-memory source implies (its image column), under the
            options' own.
        text_numbers: the cells are text (a CSV file's), numbers among them found by value.
    """
    schema = {**(implied or {}), **(options.schema or {})}
    task = options.task
    if task == "auto":
        task = ("segmentation" if segmentation.mask_column(frame, schema) is not None
                else "detection" if detection.frame_is_detection(frame, schema)
                else "classification")
    if task == "segmentation":
        return segmentation.frame_table(frame, base_dir, options, schema, text_numbers)
    if task == "detection":
        return detection.frame_table(frame, base_dir, options, schema,
                                     asked=options.task == "detection")
    return validate(frame, base_dir=base_dir, schema=schema,
                    fill_missing=options.fill_missing, text_numbers=text_numbers,
                    split=options.split)

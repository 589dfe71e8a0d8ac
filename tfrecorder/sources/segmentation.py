"""Semantic segmentation tables: each image with its mask, a PNG of the image's size
whose pixel values are class ids, named in a `mask_uri` column (a DataFrame's, or a CSV
or Parquet file's) and resolved as image paths are, against the same folder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources.image_paths import image_uris
from tfrecorder.sources.schema import name_key
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import validate

MASK_URI, MASK_FILE = "mask_uri", "mask_file"


def mask_column(frame: pd.DataFrame, schema: Mapping) -> str | None:
    """The column of masks, by name (`mask_uri` in any case, with `-` or a space for `_`,
    or in the plural), unless the schema drops or types it."""
    found = [name for name in frame.columns if name_key(name) in ("maskuri", "maskuris")
             and name not in schema]
    if len(found) > 1:
        raise SchemaError(f"columns {found} all name the masks, so which one is meant is "
                          "unclear. Keep one: drop the others with ",
                          Option("schema", dict.fromkeys(found[1:])), ".")
    return found[0] if found else None


def frame_table(frame: pd.DataFrame, base_dir: str, options: TableOptions,
                schema: Mapping, text_numbers: bool = False) -> Table:
    """The segmentation table of a DataFrame with image paths and a `mask_uri` column:
    `mask_uri` as given and `mask_file` resolved, beside what `validate` makes of the
    other columns (labels are optional)."""
    column = mask_column(frame, schema)
    if column is None:
        raise SchemaError(
            f"a segmentation table needs a {MASK_URI!r} column: the path of each image's "
            "mask, a PNG of class ids the size of the image. The table's columns are "
            f"{list(frame.columns)}.")
    table = validate(frame, base_dir=base_dir, schema={**schema, column: None},
                     fill_missing=options.fill_missing, text_numbers=text_numbers,
                     split=options.split)
    if not table.image_files:
        raise SchemaError(
            f"a segmentation table needs each image's path beside its mask's, in an "
            f"'image_uri' column; the table's columns are {list(frame.columns)}.")
    masks = pd.Series(frame[column].to_numpy(), index=table.rows.index, name=column)
    given, resolved = image_uris(masks, base_dir)
    rows = table.rows.assign(**{MASK_URI: given, MASK_FILE: resolved})
    return dataclasses.replace(table, rows=rows, task="segmentation")

"""The planned table as workers read it: every column a NumPy (or Arrow) array by table
position, built once in the driver from the table and its `Plan`, and shared with worker
processes by fork (or sent once to each), never pickled row by row.

Apart from `plan`, which decides and holds no rows' values: this is the store both
engines take their rows from (`PlannedTable.rows` a segment at a time for the local
engine, `planned_rows` for the Beam engine), tuned for what a worker pays a row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from tfrecorder.format.layouts import MASK
from tfrecorder.format.splits import Split
from tfrecorder.sources.table import (
    ANNOTATED_SIZE,
    CLIP_END,
    CLIP_START,
    REGIONS,
    SEGMENTS,
    ArrowColumn,
    Table,
    arrow_backed,
)
from tfrecorder.write.plan import Plan, ids_in
from tfrecorder.write.rows import Row


class PlannedTable:
    """The values workers read, by table position: built once in the driver, then shared
    with worker processes by fork (or sent once to each), never pickled row by row.

    Every column is a NumPy array (or, for pandas' Arrow-backed text, an Arrow array),
    so a segment of rows is one take per column (`rows` for rows with images,
    `inputs_at` for a table without, a column at a time). Categorical inputs hold their
    ids; labels their ids.
    """

    def __init__(self, plan: Plan, table: Table):
        rows = table.rows
        # Arrow-backed text stays Arrow: a Python string a row would cost 60-100 bytes.
        self.has_images = table.has_images
        self.uris = _texts(rows["uri"]) if table.image_files else None
        self.image_uris = _texts(rows["image_uri"]) if table.has_images else None
        # Images held in memory: the cells themselves (shared, never copied) and names.
        self.images = None
        if table.images_in_memory:
            column = rows["image"]
            self.images = ArrowColumn.of(column) if arrow_backed(column) else \
                column.to_numpy(dtype=object)
        # Images' names where the source gives them (in memory; a COCO file_name), else
        # the base names of their image_uri.
        self.image_names = _texts(rows["image_name"]) if "image_name" in rows else None
        # Annotations drawn on the image's pixels: COCO's instance masks, or a
        # segmentation row's mask file.
        self.masks = rows[MASK].to_numpy(dtype=object) if MASK in rows else None
        self.mask_files = _texts(rows["mask_file"]) if "mask_file" in rows else None
        # The size each detection row's annotation states (EXIF orientation).
        self.annotated_sizes = (rows[ANNOTATED_SIZE].to_numpy(dtype=object)
                                if ANNOTATED_SIZE in rows else None)
        # A video or audio row's clip span (None: the file's start or end) and timed
        # annotations (segments or regions, paired with its labels).
        self.clip_spans = None
        if CLIP_START in rows:
            self.clip_spans = [_optional_ints(rows[CLIP_START]), _optional_ints(rows[CLIP_END])]
        timed = SEGMENTS if SEGMENTS in rows else REGIONS if REGIONS in rows else None
        self.timed = rows[timed].to_numpy(dtype=object) if timed else None
        self.labels = None
        if plan.label_ids is not None:
            self.labels = (_objects(plan.label_ids) if table.multi_label
                           else np.asarray(plan.label_ids, dtype=np.int64))
        self.inputs: dict[str, np.ndarray] = {}
        for c in table.inputs:
            column = rows[c.name]
            if c.kind == "categorical" and c.shape:
                self.inputs[c.name] = _objects(ids_in(column.tolist(), plan.vocabularies[c.name],
                                                    True))
            elif c.kind == "categorical":
                self.inputs[c.name] = pd.Categorical(
                    column.to_numpy(dtype=object), categories=plan.vocabularies[c.name]
                ).codes.astype(np.int64)
            elif c.name in table.number_grids:  # lists of k floats, as stored
                self.inputs[c.name] = table.number_grids[c.name]
            elif arrow_backed(column):  # text: Arrow buffers, no Python string a row
                self.inputs[c.name] = ArrowColumn.of(column)
            elif column.dtype.kind in "iuf":
                self.inputs[c.name] = column.to_numpy()
            else:
                self.inputs[c.name] = column.to_numpy(dtype=object)

    def labels_at(self, positions: np.ndarray) -> list:
        """The labels at `positions`; None for an unlabelled row (id -1 in the plan)."""
        if self.labels is None:
            return [None] * len(positions)
        taken = self.labels[positions]
        if taken.dtype == object or not (taken < 0).any():
            return taken.tolist()
        return [None if label < 0 else label for label in taken.tolist()]

    def rows(self, positions: np.ndarray, split: Split) -> list[Row]:
        """The rows at `positions`, all of `split`, as `records.encode_row` takes them."""
        positions = np.asarray(positions)
        labels = self.labels_at(positions)
        inputs = {name: _plain_list(_take(values, positions))
                  for name, values in self.inputs.items()}
        uris, image_uris, names, mask_files = (
            [None] * len(positions) if values is None else _plain_list(_take(values, positions))
            for values in (self.uris, self.image_uris, self.image_names, self.mask_files))
        images, masks = ([None] * len(positions) if values is None else _cells(
            _take(values, positions)) for values in (self.images, self.masks))  # as they are
        sizes = ([None] * len(positions) if self.annotated_sizes is None else
                 [None if size is None else tuple(size)
                  for size in self.annotated_sizes[positions].tolist()])
        starts, ends = ([[None] * len(positions)] * 2 if self.clip_spans is None else
                        [values[positions].tolist() for values in self.clip_spans])
        timed = ([None] * len(positions) if self.timed is None else
                 [None if t is None else tuple(map(tuple, t)) for t in self.timed[positions]])
        return [Row(position, uri, image_uri, label, split,
                    {name: values[i] for name, values in inputs.items()}, image, name,
                    mask, mask_file, size, start, end, annotations)
                for i, (position, uri, image_uri, label, image, name, mask, mask_file, size,
                        start, end, annotations)
                in enumerate(zip(positions.tolist(), uris, image_uris, labels, images, names,
                                 masks, mask_files, sizes, starts, ends, timed))]

    def inputs_at(self, positions: np.ndarray) -> dict[str, Sequence]:
        """The input columns' values at `positions`, as stored: NumPy columns (or Arrow
        arrays of text), as `example.encode_examples` takes them."""
        return {name: _take(values, positions) for name, values in self.inputs.items()}


def _objects(values: Sequence) -> np.ndarray:
    """`values` as a one-dimensional object array (lists stay cells, not a dimension)."""
    found = np.empty(len(values), dtype=object)
    found[:] = values if not isinstance(values, np.ndarray) else values.tolist()
    return found


def _optional_ints(column: pd.Series) -> np.ndarray:
    """A nullable integer column as objects: ints, and None for <NA>."""
    return np.array([None if pd.isna(v) else int(v) for v in column], dtype=object)


def _texts(column: pd.Series):
    """A text column as workers read it: its Arrow arrays, or an array of objects."""
    return ArrowColumn.of(column) if arrow_backed(column) else column.to_numpy(dtype=object)


def _take(values, positions: np.ndarray):
    """The values at `positions`: a NumPy array, or from an Arrow column an Arrow array
    (a rows x k NumPy array for lists of k numbers)."""
    if isinstance(values, np.ndarray):
        return values[positions]
    taken = values.take(positions)
    grid = _arrow_number_grid(taken)
    return grid if grid is not None else taken


def _arrow_number_grid(values) -> np.ndarray | None:
    """An Arrow array of lists of k > 0 numbers each as a rows x k array, else None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not (
            pa.types.is_integer(kind.value_type) or pa.types.is_floating(kind.value_type)):
        return None
    lengths = pc.min_max(pc.list_value_length(values)).as_py()
    flat = values.flatten()
    if values.null_count or flat.null_count or not lengths["min"] or \
            lengths["min"] != lengths["max"]:
        return None
    return flat.to_numpy().reshape(len(values), lengths["min"])


def _cells(values) -> list:
    """A column's values as they are: NumPy objects, or Arrow's as Python values."""
    return list(values) if isinstance(values, np.ndarray) else values.to_pylist()


def _plain_list(values) -> list:
    """A column's values as Python objects (array cells as lists), as encoders take them."""
    found = values.tolist() if isinstance(values, np.ndarray) else (
        values if isinstance(values, list) else values.to_pylist())
    if found and isinstance(found[0], np.ndarray):
        found = [v.tolist() if isinstance(v, np.ndarray) else v for v in found]
    return found


def planned_rows(plan: Plan, table: Table) -> Iterator[Row]:
    """Every row of every shard, in writing order (the Beam engine stages them)."""
    planned = PlannedTable(plan, table)
    for shard in plan.shards:
        for start in range(0, len(shard.positions), 4096):
            yield from planned.rows(shard.positions[start:start + 4096], shard.split)

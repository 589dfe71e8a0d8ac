"""Sources that are not tables yet: NumPy arrays, dicts of columns, dicts of splits and
Hugging Face datasets, each made into a DataFrame that `validate` checks like any
other.

Images are never copied here: an array of N images becomes a column of N views of it,
and a Hugging Face image column stays Arrow-backed (its memory-mapped cache file), so
the table costs a few dozen bytes a row beyond the pixels the caller already holds, and
workers read the images from it by fork (`planned_table.PlannedTable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.format.splits import spellings_text, split_named
from tfrecorder.sources.schema import role_by_name
from tfrecorder.wording import shown


def is_in_memory(source) -> bool:
    """Whether `source` is one of this module's: a tuple of arrays, a dict, or a Hugging
    Face Dataset or DatasetDict."""
    return isinstance(source, (tuple, Mapping)) or _is_hf_dataset(source)


def as_frame(source) -> tuple[pd.DataFrame, dict, tuple[str, ...] | None]:
    """The DataFrame of an in-memory source, the schema it implies (its image column is
    `Image`), and its class names (a Hugging Face ClassLabel's), if any.

    Raises:
        SchemaError: for a source whose parts do not make a table (columns of different
            lengths, a dict of splits with an unknown key), naming what is wrong.
    """
    if isinstance(source, Mapping) and not source:
        raise SchemaError("source must be a DataFrame, a path, arrays or a dict of columns "
                          "or of splits, not an empty dict: it holds no rows.",
                          option="source")
    if isinstance(source, Mapping) and all(
            isinstance(key, str) and split_named(key) is not None for key in source):
        return _splits_frame(source)
    if isinstance(source, Mapping) and all(  # sources, under keys that are no splits
            isinstance(v, tuple) or _is_hf_dataset(v) for v in source.values()):
        strangers = [k for k in source if not (isinstance(k, str)
                                               and split_named(k) is not None)]
        raise SchemaError(
            f"a dict of sources by split needs split names as its keys, not {shown(strangers[0])}"
            f" (use {spellings_text()}).", option="source")
    return _part_frame(source, index_prefix=None)


def _splits_frame(source: Mapping) -> tuple[pd.DataFrame, dict, tuple[str, ...] | None]:
    frames, schema, names = [], {}, None
    for key, part in source.items():
        frame, part_schema, part_names = _part_frame(part, index_prefix=key)
        if "split" in frame.columns:
            raise SchemaError(
                f"the {key!r} part of a dict of splits has its own 'split' column: the key "
                "names its split. Drop the column, or pass that part alone.",
                column="split")
        frame.insert(0, "split", split_named(key))
        frames.append(frame)
        schema.update(part_schema)
        if part_names is not None and names is not None and part_names != names:
            raise SchemaError(f"the parts of the dict of splits name their classes "
                              f"differently: {names} and {part_names}.", column="label")
        names = part_names if part_names is not None else names
    columns = [list(f.columns) for f in frames]
    if any(c != columns[0] for c in columns):
        raise SchemaError(f"the parts of the dict of splits have different columns: "
                          f"{dict(zip(source, columns))}. Give every part the same ones.")
    return pd.concat(frames), schema, names


def _part_frame(source, index_prefix: str | None
                ) -> tuple[pd.DataFrame, dict, tuple[str, ...] | None]:
    if _is_hf_dataset(source):
        frame, schema, names = _hf_frame(source)
    elif isinstance(source, tuple):
        frame, schema, names = _tuple_frame(source), {"image": "Image"}, None
    elif isinstance(source, Mapping):
        frame, schema, names = _columns_frame(source), {}, None
    else:
        raise SchemaError(f"a dict of sources by split takes, for each split, an (images, "
                          f"labels) tuple, a dict of columns or a Hugging Face Dataset, not "
                          f"a {type(source).__name__}.", option="source")
    if index_prefix is not None:  # rows named as the caller knows them: "train[17]"
        frame.index = [f"{index_prefix}[{i}]" for i in range(len(frame))]
    return frame, schema, names


def _tuple_frame(source: tuple) -> pd.DataFrame:
    """(images,) or (images, labels): Keras' `(x_train, y_train)`."""
    if len(source) not in (1, 2):
        raise SchemaError(f"an arrays source is (images, labels) or (images,), not a tuple "
                          f"of {len(source)}.", option="source")
    columns = {"image": source[0]}
    if len(source) == 2 and source[1] is not None:
        columns["label"] = source[1]
    return _columns_frame(columns)


def _columns_frame(columns: Mapping) -> pd.DataFrame:
    """A dict of columns: arrays (an array of images, or of rows of numbers, is a column
    of its first axis's items, views not copies), lists or Series, all as long."""
    found, lengths = {}, {}
    for name, values in columns.items():
        if not isinstance(name, str):
            raise SchemaError(f"a dict of columns needs text keys (column names), not "
                              f"{name!r}.", column=name)
        if isinstance(values, pd.Series):
            values = values.to_numpy()
        if isinstance(values, np.ndarray) and values.ndim == 0:
            raise SchemaError(f"column {name!r} is a single value ({shown(values)}), not one "
                              "a row.", column=name)
        if isinstance(values, np.ndarray) and values.ndim > 1 and role_by_name(name) == "label":
            values = _label_array(name, values)
        if isinstance(values, np.ndarray) and values.ndim > 1:
            cells = np.empty(len(values), dtype=object)
            cells[:] = list(values)  # views of `values`: its rows, never copied
            values = cells
        elif not isinstance(values, (np.ndarray, Sequence)) or isinstance(values, (str, bytes)):
            raise SchemaError(f"column {name!r} must be an array or a list with a value a row, "
                              f"not a {type(values).__name__}.", column=name)
        lengths[name] = len(values)
        found[name] = values
    if len(set(lengths.values())) > 1:
        raise SchemaError(f"the columns have different lengths: {lengths}. Every column needs "
                          "one value a row.")
    return pd.DataFrame(found)


def _label_array(name: str, labels: np.ndarray) -> np.ndarray:
    """Labels as an array of one a row: Keras' `(N, 1)` as `(N,)`. A wider array is
    refused: one-hot rows would otherwise be read as lists of labels 0 and 1."""
    if labels.ndim == 2 and labels.shape[1] == 1:
        return labels[:, 0]
    raise SchemaError(
        f"column {name!r} is an array of shape {labels.shape}, and labels are one a row "
        f"(shape (N,) or (N, 1)). For one-hot labels pass {name}.argmax(axis=1); for "
        "several labels a row, pass a list of each row's label ids.", column=name)


# --- Hugging Face datasets -----------------------------------------------------------------

def _is_hf_dataset(source) -> bool:
    kind = type(source)
    return kind.__module__.split(".")[0] == "datasets" and kind.__name__ in (
        "Dataset", "DatasetDict")


def _hf_frame(dataset) -> tuple[pd.DataFrame, dict, tuple[str, ...] | None]:
    """A Hugging Face Dataset: its image columns stay Arrow (struct<bytes, path>, the
    memory-mapped cache), the others become pandas columns; a ClassLabel label column's
    names become the class names."""
    if type(dataset).__name__ == "DatasetDict":
        raise SchemaError("a DatasetDict is a dict of splits: pass it itself as the source, "
                          "not inside another dict.", option="source")
    from datasets import ClassLabel
    from datasets import Image as HFImage

    table = dataset.with_format("arrow")[:]  # its rows in order (indices applied)
    columns, names, schema = {}, None, {}
    for name, feature in dataset.features.items():
        values = table.column(name)
        if isinstance(feature, HFImage):
            columns[name] = pd.Series(pd.arrays.ArrowExtensionArray(values))
            schema[name] = "Image"
        else:
            columns[name] = values.to_pandas()
        if isinstance(feature, ClassLabel) and name.lower() in ("label", "labels"):
            names = tuple(feature.names)
    return pd.DataFrame(columns), schema, names

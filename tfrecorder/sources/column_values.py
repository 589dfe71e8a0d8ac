"""Column values as stored: each input column's cells checked against its type and
normalized to the plain values a record holds (int, float, str, or a flat list of them),
so the records' bytes depend neither on pandas dtypes nor on the engine that writes them.

Whole columns are checked at once where their dtype allows (an int64 array, Arrow-backed
text, lists of k numbers as one grid); anything unusual takes the value-by-value path,
whose errors name the column, the values and the rows.

Apart from `schema`, which decides the type each column gets (by name, dtype or the
user's `schema`): this module takes that type as given and converts the values.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

import numpy as np
import pandas as pd

from tfrecorder.errors import VALUE, Option, SchemaError
from tfrecorder.format.example import number_grid
from tfrecorder.sources import hashing
from tfrecorder.sources.schema import INPUT_KINDS, flat, is_list, is_missing
from tfrecorder.wording import name_rows, shown

_INTEGER = re.compile(r"^[+-]?\d+$")
_INT64 = (-(2**63), 2**63 - 1)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class Column:
    """An input column, as the feature it is stored as.

    Attributes:
        name: the column's (and the feature's) name.
        kind: int64, float32, string, or categorical (text stored as int64 vocabulary ids).
        shape: () for one value per row; (None,) for a list; (None, k) for a list of
            k-value rows (e.g. boxes), stored flat.
        categories: a pandas categorical's categories, the vocabulary's order; None: sorted.
    """

    name: str
    kind: str
    shape: tuple = ()
    categories: tuple[str, ...] | None = None

    @property
    def dtype(self) -> str:
        return "int64" if self.kind == "categorical" else self.kind


def input_column(column: pd.Series, type_name: str, fill
                 ) -> tuple[Column, Sequence, ColumnArrays | None]:
    """The Column for an input, its values normalized to what is stored (NumPy or pandas
    arrays where the values allow, else Python objects), and their cells' words
    (`hashing.cell_words`) and float32 grid where checking the values made them one
    array anyway (lists of k numbers), so that no column is converted twice; else None.

    Args:
        fill: the value for missing cells; None: a missing cell is an error.
    """
    name, kind = column.name, INPUT_KINDS[type_name]
    numbers = _numbers(column, kind, fill)
    if numbers is None:
        numbers = _text_numbers(column, kind)
    if numbers is not None:
        return Column(name, kind), numbers, None
    if kind in ("int64", "float32") and column.dtype == object:
        rows = _row_arrays(column, kind)
        if rows is not None:
            return (*rows, None)
        lists = _number_lists(column, kind)
        if lists is not None:
            cells, arrays = lists
            return Column(name, kind, (None,)), cells, arrays
    texts = _texts(column, kind)
    if texts is not None:
        return (*texts, None)
    categories = None
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = tuple(str(c) for c in column.cat.categories)
        column = column.astype(object)
    items = list(zip(column.index.tolist(), column.tolist()))
    # A blank is a missing number, but text may be empty.
    absent = _is_absent if kind == "string" else is_missing
    missing = [i for i, v in items if not is_list(v) and absent(v)]
    if missing and fill is None:
        raise SchemaError(
            f"column {name!r} has missing values (NaN, None or blank) at "
            f"{name_rows(missing, of=column.index)}. Fill or drop those rows, or pass ",
            Option("fill_missing", {name: VALUE}), ".", column=name, rows=missing)
    if missing:
        missing_rows = set(missing)
        items = [(i, fill if i in missing_rows else v) for i, v in items]
    lists = [i for i, v in items if is_list(v)]
    if lists and len(lists) != len(items):
        single = [i for i, v in items if not is_list(v)]
        raise SchemaError(  # rows: the odd ones out, the fewer
            f"column {name!r} mixes lists ({name_rows(lists, of=column.index)}) and single "
            f"values ({name_rows(single, of=column.index)}). Make every cell a list (e.g. "
            "[x] and []).",
            column=name, rows=min(lists, single, key=len))
    shape, cells = (), items
    if lists:
        shape, cells = _list_shape(name, items), [(i, flat(v)) for i, v in items]
    convert = _CONVERTERS[kind]
    values, bad = [], []
    for i, value in cells:
        try:
            values.append([convert(e) for e in value] if shape else convert(value))
        except (TypeError, ValueError, OverflowError):
            bad.append(i)
    if bad:
        example = dict(items)[bad[0]]
        expected = {"int64": "64-bit integers", "float32": "32-bit floats"}.get(kind, "text")
        raise SchemaError(
            f"column {name!r} is {type_name}, but holds values that are not {expected} at "
            f"{name_rows(bad, of=column.index)} (e.g. {shown(example)}). Fix the values, or ",
            *_retyping(name, kind), ".", column=name, rows=bad)
    if kind == "categorical" and categories is not None:
        unknown = {v for value in values for v in (value if shape else [value])} - set(categories)
        categories = categories + tuple(sorted(unknown))
    return Column(name, kind, shape, categories), values, None


def _retyping(name: str, kind: str) -> tuple:
    """Advice for values a type cannot hold: numbers can be stored as text."""
    if kind in ("int64", "float32"):
        return "store the column as text: ", Option("schema", {name: "StringInput"})
    return "type the column differently with ", Option("schema")


def _numbers(column: pd.Series, kind: str, fill) -> np.ndarray | None:
    """The values of a column of numeric dtype as stored (an int64 or float64 array: 8
    bytes a row, where Python numbers took 32), checked as whole arrays (a million rows
    take milliseconds, not seconds); None leaves anything unusual to the value-by-value
    path, which names the rows at fault."""
    numeric = pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)
    if kind not in ("int64", "float32") or not numeric or \
            isinstance(column.dtype, pd.CategoricalDtype):
        return None
    try:
        if column.isna().any():
            if fill is None or is_list(fill):
                return None
            column = column.fillna(fill)
        values = column.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if np.isnan(values).any():
        return None
    if kind == "float32":
        finite = values[np.isfinite(values)]
        return values if not (np.abs(finite) > _FLOAT32_MAX).any() else None
    if pd.api.types.is_integer_dtype(column) and column.dtype.kind == "i":
        return column.to_numpy(dtype=np.int64)  # exact: no trip through floats
    if not (np.isfinite(values).all() and (values == np.round(values)).all()
            and (np.abs(values) < 2**63).all()):
        return None
    return values.astype(np.int64)


def _text_numbers(column: pd.Series, kind: str) -> np.ndarray | None:
    """A column of numbers written as text (a CSV file's) as an int64 or float64 array:
    each value read by Python's own `int` or `float`, as `_to_int` and `_to_float` read
    it, but in one pass at C speed (0.2 s for a million, against 6 s value by value).
    None for anything else (blanks, NaN, values out of range or not numbers), which the
    value-by-value path reports with their rows."""
    if kind not in ("int64", "float32") or \
            pd.api.types.infer_dtype(column, skipna=False) != "string":
        return None
    texts = list(map(str.strip, column.tolist()))
    try:
        if kind == "float32":
            values = np.fromiter(map(float, texts), np.float64, len(texts))
            finite = values[np.isfinite(values)]
            return None if np.isnan(values).any() or (np.abs(finite) > _FLOAT32_MAX).any() \
                else values
        if any("_" in text for text in texts):  # int() reads 1_000; `_INTEGER` does not
            return None
        return np.fromiter(map(int, texts), np.int64, len(texts))
    except (ValueError, OverflowError):
        return None


def _texts(column: pd.Series, kind: str) -> tuple[Column, Sequence] | None:
    """A text or categorical column whose cells are all text (no blank among a
    categorical's), kept as it is (pandas' Arrow-backed text stays Arrow, with no Python
    string a cell): its values are what is stored, and telling so takes pandas' C type
    inference, not a look at every cell. None: the value-by-value path."""
    if kind not in ("string", "categorical"):
        return None
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = column.cat.categories
        if kind != "categorical" or (column.cat.codes < 0).any() or \
                pd.api.types.infer_dtype(categories, skipna=False) != "string" or \
                any(is_missing(c) for c in categories):
            return None
        return (Column(column.name, kind, (), tuple(categories.tolist())),
                column.to_numpy(dtype=object))
    # (infer_dtype calls ["a", None] "string" even with skipna=False: isna says.)
    if pd.api.types.infer_dtype(column, skipna=False) != "string" or column.isna().any():
        return None
    if kind == "categorical" and any(is_missing(v) for v in pd.unique(column).tolist()):
        return None
    return Column(column.name, kind), column.array


_CHUNK = 1 << 20  # rows checked at once: memory stays flat in the number of rows


class ColumnArrays(NamedTuple):
    """What checking a column of lists of k numbers made of it on the way: its cells'
    words (`hashing.cell_words`), for hashing the table, and for floats the rows x k
    float32 grid the records store (what workers encode: a read of shared pages, where a
    million small arrays cost them 0.45 µs a row to join and a copy of each page their
    reference counts write; 4 bytes a number in the driver)."""

    words: np.ndarray
    grid: np.ndarray | None


def _number_lists(column: pd.Series, kind: str
                  ) -> tuple[np.ndarray, ColumnArrays] | None:
    """A column whose cells are all lists (or arrays) of k numbers, checked as rows x k
    arrays a chunk of rows at a time: 10M rows of 4 floats take a few seconds, where
    checking every number took a minute. The cells are kept as given (no new object a
    number) when they already hold what is stored: Python floats (or ints for int64),
    or float (int) arrays. Returns the cells and their words (`hashing.grid_words`: the
    words of the cells as stored, as `hashing.cell_words` gives them, taken of the
    arrays at hand) and float32 grid (`ColumnArrays`). None leaves anything else to the
    value-by-value path, which names the rows at fault."""
    values = column.to_numpy(dtype=object)
    if not len(values) or not is_list(values[0]) or not len(values[0]):
        return None
    kinds = set(map(type, values))
    dtypes = set(map(attrgetter("dtype"), values)) if kinds == {np.ndarray} else set()
    plain = float if kind == "float32" else int
    kept = (dtypes and {dtype.kind for dtype in dtypes} == {"f" if kind == "float32" else "i"}
            ) or (kinds == {list}
                  and set(map(type, itertools.chain.from_iterable(values))) == {plain})
    dtype = next(iter(dtypes)) if len(dtypes) == 1 else None
    grids, words, stored, width = [], [], [], len(values[0])
    for start in range(0, len(values), _CHUNK):
        grid = _number_grid(values[start:start + _CHUNK], kind, dtype)
        if grid is None or grid.shape[1] != width:
            return None
        words.append(hashing.grid_words(grid))
        if not kept:  # (kept cells: no grid held beyond its chunk)
            grids.append(grid)
        if kind == "float32":
            stored.append(grid.astype(np.float32))
    cells = values if kept else _objects_of(np.concatenate(grids))
    return cells, ColumnArrays(np.concatenate(words),
                               np.concatenate(stored) if stored else None)


def _row_arrays(column: pd.Series, kind: str) -> tuple[Column, list] | None:
    """A column whose cells are all 2-D arrays of k-value rows of the stored kind (a
    detection table's boxes: each image's (n, 4) array), or all 1-D arrays of different
    lengths (its objects' areas), checked as one array: what the value-by-value path
    stores (a flat list of Python numbers a cell), without a Python object a value on the
    way. None leaves anything else to that path."""
    values = column.to_numpy(dtype=object)
    if not len(values) or not isinstance(values[0], np.ndarray) or values[0].ndim not in (
            1, 2) or set(map(type, values)) != {np.ndarray}:  # (the first cell says at once)
        return None
    dtypes = {(v.ndim, v.dtype.kind, v.shape[-1] if v.ndim == 2 else None) for v in values}
    if len(dtypes) != 1:
        return None
    ndim, dtype_kind, width = dtypes.pop()
    if dtype_kind != ("f" if kind == "float32" else "i"):
        return None
    if ndim == 1 and len({v.size for v in values}) == 1:
        return None  # lists of k numbers: a grid (`_number_lists`)
    joined = np.concatenate(values.tolist())
    if kind == "float32" and (np.isnan(joined).any() or
                              (np.abs(joined[np.isfinite(joined)]) > _FLOAT32_MAX).any()):
        return None
    flat = joined.reshape(-1).tolist()
    ends = np.cumsum([v.size for v in values]).tolist()
    cells = [flat[start:end] for start, end in zip([0, *ends[:-1]], ends)]
    shape = (None, width) if len(flat) and ndim == 2 else (None,)
    return Column(column.name, kind, shape), cells


def _number_grid(values: np.ndarray, kind: str, dtype: np.dtype | None = None
                 ) -> np.ndarray | None:
    """Cells of numbers as a rows x k float64 (int64) array, if every cell has k numbers
    that `kind` holds exactly; else None. `dtype`: that of every cell, all NumPy arrays."""
    grid = _array_rows(values, dtype) if dtype is not None else None
    if grid is None:
        grid = number_grid(values.tolist())
    if grid is None or grid.dtype.kind not in ("f" if kind == "float32" else "iu"):
        return None
    if kind == "float32":
        if _float32_unfit(grid):
            return None
        return grid.astype(np.float64, copy=False)
    if grid.dtype.kind == "u" and (grid > np.iinfo(np.int64).max).any():
        return None
    return grid.astype(np.int64, copy=False)


def _float32_unfit(grid: np.ndarray) -> bool:
    """Whether floats hold a NaN or a finite value beyond float32's range: told by the
    largest and smallest (a NaN is both), with no array as large as `grid` but where
    they say there may be."""
    top, bottom = grid.max(), grid.min()
    if np.isnan(top):
        return True
    if bottom >= -_FLOAT32_MAX and top <= _FLOAT32_MAX:
        return False
    return bool((np.abs(grid[np.isfinite(grid)]) > _FLOAT32_MAX).any())


def _array_rows(cells: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """Cells that are all 1-D NumPy arrays of `dtype` (a number's) with k > 0 items each,
    as the rows x k array of `dtype` that `number_grid` makes of them, joined by Arrow
    (2.5x faster than NumPy over a million small arrays); else None (ragged or 2-D cells,
    or a byte order Arrow lacks)."""
    import pyarrow as pa

    if dtype.kind not in "iuf":
        return None
    try:  # (malloc's pages: freed to the system with the array, where Arrow's pool keeps them)
        joined = pa.array(cells, type=pa.large_list(pa.from_numpy_dtype(dtype)),
                          memory_pool=pa.system_memory_pool())
    except (pa.ArrowException, TypeError, ValueError):
        return None
    lengths = np.diff(joined.offsets.to_numpy())
    if not len(lengths) or lengths.min() != lengths.max() or not lengths[0]:
        return None
    return joined.flatten().to_numpy().reshape(len(cells), int(lengths[0]))


def _objects_of(grid: np.ndarray) -> np.ndarray:
    """A 2-D array's rows as an object array of 1-D arrays (views: no copy of the data)."""
    found = np.empty(len(grid), dtype=object)
    found[:] = list(grid)
    return found


def _is_absent(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _list_shape(name: str, items: list) -> tuple:
    """(None,) for flat lists; (None, k) for lists of k-value rows."""
    inner = {len(e) if is_list(e) else None for _, v in items for e in v}
    if inner == {None} or not inner:
        return (None,)
    if len(inner) == 1 and None not in inner and all(
            not is_list(x) for _, v in items for e in v for x in e):
        return (None, inner.pop())
    raise SchemaError(
        f"column {name!r} holds lists of lists of different lengths or depths; a record "
        "holds flat lists, or lists of rows of one length (e.g. boxes of 4 numbers).",
        column=name)


def _to_int(value) -> int:
    if isinstance(value, str):
        if not _INTEGER.match(value.strip()):
            raise ValueError(value)
        value = int(value.strip())
    elif isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise ValueError(value)
    elif not isinstance(value, (bool, np.bool_, int, np.integer)):
        raise TypeError(value)
    value = int(value)
    if not _INT64[0] <= value <= _INT64[1]:
        raise OverflowError(value)
    return value


def _to_float(value) -> float:
    if isinstance(value, (bytes, list, tuple, dict)) or value is None:
        raise TypeError(value)
    result = float(value.strip()) if isinstance(value, str) else float(value)
    if math.isnan(result):
        raise ValueError(value)
    if math.isfinite(result) and abs(result) > _FLOAT32_MAX:
        raise OverflowError(value)
    return result


def _to_text(value) -> str | bytes:
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (bool, np.bool_, int, np.integer, float, np.floating)):
        return str(value.item() if hasattr(value, "item") else value)
    raise TypeError(value)


def _to_category(value) -> str:
    text = _to_text(value)
    return text.decode() if isinstance(text, bytes) else text


_CONVERTERS = {"int64": _to_int, "float32": _to_float, "string": _to_text,
               "categorical": _to_category}

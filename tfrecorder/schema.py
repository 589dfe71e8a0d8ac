"""Column types: what each column of the table becomes in the records.

Without a `schema`, columns are typed by name and dtype: `split`, `image_uri` and `label`
are the AutoML Vision columns (also in another case, with `-` or a space for `_`, or in
the plural: `Label`, `IMAGE_URI`, `labels`), and every other column passes through as a
feature typed from its pandas dtype (integers and booleans -> int64, floats -> float32,
text -> bytes, pandas categoricals -> ids in a saved vocabulary; cells holding lists ->
lists). A `schema` maps column names to TFRecorder's type names to say otherwise, or to
None to drop a column.

Every value is normalized here to the plain Python value it is stored as (int, float,
str, or a flat list of them), so the records' bytes do not depend on pandas dtypes or on
which engine writes them. Errors name the column, the values and the rows.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

import numpy as np
import pandas as pd

from tfrecorder import hashing, image_cells
from tfrecorder.errors import VALUE, Option, SchemaError
from tfrecorder.example import number_grid
from tfrecorder.wording import dropping, name_rows, shown, sole

logger = logging.getLogger(__name__)

# TFRecorder's type names. Label, split and image columns become the features `label`,
# `split` and `image` (+ `image_uri`); inputs keep their column's name.
SPLIT_KEY, IMAGE_URI, IMAGE = "SplitKey", "ImageUri", "Image"  # Image: held in memory
STRING_LABEL, INTEGER_LABEL = "StringLabel", "IntegerLabel"
INPUT_KINDS = {"IntegerInput": "int64", "FloatInput": "float32", "StringInput": "string",
               "CategoricalInput": "categorical"}
IMAGE_TYPES = (IMAGE_URI, IMAGE)
TYPES = (SPLIT_KEY, IMAGE_URI, IMAGE, STRING_LABEL, INTEGER_LABEL, *INPUT_KINDS)
LABEL_TYPES = (STRING_LABEL, INTEGER_LABEL)
_LABEL = "Label"  # a `label` column not named in the schema: text or integer, as found
_DEFAULT_TYPES = {"split": SPLIT_KEY, "image_uri": IMAGE_URI, "label": _LABEL}
ROLES = tuple(_DEFAULT_TYPES)  # the columns read by name: split, image_uri, label
# Names other tools give these columns. Never taken silently (a `class` column may be a
# ticket class, a `set` a Lego set): a table that lacks the role and has such a column is
# asked what it is (see `tfrecorder.table`). Compared by `name_key`.
SYNONYMS = {
    "split": frozenset({"set", "sets", "subset", "subsets", "partition", "mluse",
                        "datasplit", "splitname"}),
    "image_uri": frozenset({"image", "images", "img", "imguri", "imgurl", "imgpath",
                            "imagepath", "imagepaths",
                            "imagefile", "imagename", "imageurl", "imageurls", "path",
                            "paths", "filepath", "filepaths", "file", "files", "filename",
                            "filenames", "uri", "uris", "url", "urls", "gcsuri"}),
    "label": frozenset({"class", "classes", "classname", "classid", "category",
                        "categories", "target", "targets", "labelname", "labelid",
                        "labelids", "labelnames"}),
}
_BY_LOWER_NAME = {re.sub(r"[_\s]", "", name.lower()): name for name in TYPES}


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


def name_key(name) -> str:
    """A column name as compared with the role names: lower case, without '_', '-' and
    spaces."""
    return re.sub(r"[\s_\-]", "", name.lower()) if isinstance(name, str) else ""


def role_by_name(name) -> str | None:
    """`split`, `image_uri` or `label` for a column named so in any case, with `-` or a
    space for `_`, or in the plural (`Split`, `IMAGE_URI`, `Image URI`, `labels`); else
    None. Such a column takes the role unless the schema says otherwise."""
    key = name_key(name)
    for role in ROLES:
        if key in (name_key(role), name_key(role) + "s"):
            return role
    return None


def synonym_role(name) -> str | None:
    """The role another tool's name for a column suggests (`set`, `path`, `class`)."""
    key = name_key(name)
    return next((role for role, names in SYNONYMS.items() if key in names), None)


def misspelled_role(name) -> str | None:
    """The role a column's name is one typing slip away from (`lable`, `spilt`,
    `imge_uri`, `lables`): one letter left out, added, changed or two swapped, in the
    name as `name_key` compares it. Names that are a role or another tool's name for one
    are not slips (`role_by_name`, `synonym_role`)."""
    key = name_key(name)
    if not key or role_by_name(name) or synonym_role(name):
        return None
    return next((role for role in ROLES for spelling in (name_key(role), name_key(role) + "s")
                 if _one_slip_apart(key, spelling)), None)


def _one_slip_apart(typed: str, meant: str) -> bool:
    """Whether `typed` is `meant` with one letter deleted, inserted, replaced, or two
    neighbours swapped (an edit distance of 1, transpositions counted once). Written out:
    the three names it compares against need no fuzzy-matching library, and difflib's
    ratio takes `table` for `label`."""
    if typed == meant or abs(len(typed) - len(meant)) > 1:
        return False
    head = next((i for i, (a, b) in enumerate(zip(typed, meant)) if a != b),
                min(len(typed), len(meant)))
    tail_typed, tail_meant = typed[head:], meant[head:]
    return (tail_typed[1:] == tail_meant[1:]                 # replaced
            or tail_typed[1:] == tail_meant                  # inserted
            or tail_typed == tail_meant[1:]                  # deleted
            or (tail_typed[:2] == tail_meant[1::-1]          # swapped
                and tail_typed[2:] == tail_meant[2:]))


def is_missing(value) -> bool:
    """None, NaN, NA or blank text (a CSV's empty cell)."""
    if isinstance(value, str):  # the common case first: this runs for every cell
        return not value.strip()
    return value is None or value is pd.NA or value is pd.NaT or (
        isinstance(value, float) and value != value)


def column_types(frame: pd.DataFrame, schema: Mapping | None) -> dict[str, str]:
    """Every kept column's type name, from `schema`, else from its name or dtype.

    A column the schema does not name whose name is a role's (`role_by_name`: `Label`,
    `labels`, `IMAGE_URI`) takes the role; that is logged at INFO.

    Raises:
        SchemaError: for an unknown type name, a schema column the table lacks, two
            split or two image columns, or two columns whose names give one role (`label`
            and `Label`): which one is meant is not for tfrecorder to guess.
    """
    schema = dict(schema or {})
    repeated = sorted({name for name in frame.columns if list(frame.columns).count(name) > 1})
    if repeated:
        first = repeated[0]
        raise SchemaError(
            f"the table has several columns named {repeated}. Give each column its own "
            f"name (several label columns: e.g. {first!r} and {f'{first}_2'!r}, with ",
            Option("schema", dict.fromkeys([first, f"{first}_2"], STRING_LABEL)), ").",
            column=sole(repeated))
    missing = [name for name in schema if name not in frame.columns]
    if missing:
        raise SchemaError(
            f"schema names columns the table does not have: {missing} (its columns: "
            f"{list(frame.columns)}). Fix the names, or add the columns.",
            column=sole(missing), option="schema")
    types, by_role, detected = {}, {}, []
    for name in frame.columns:
        if not isinstance(name, str):
            raise SchemaError(f"column names must be text, not {shown(name)}: it names a feature. "
                              "Rename the column, e.g. df.columns = df.columns.astype(str).",
                              column=name)
        if name in schema:
            declared = schema[name]
            if declared is None or (isinstance(declared, str) and declared.lower() == "drop"):
                continue
            types[name] = _type_name(name, declared)
        elif role := role_by_name(name):
            by_role.setdefault(role, []).append(name)
            types[name] = _DEFAULT_TYPES[role]
            if role == "image_uri" and image_cells.holds_images(frame[name]):
                types[name] = IMAGE
        elif image_cells.holds_images(frame[name]):
            types[name] = IMAGE
            detected.append(name)
        else:
            types[name] = _input_type(frame[name])
    for role, names in by_role.items():
        if len(names) > 1:
            raise SchemaError(
                f"columns {names} all name the {role!r} column (names are read in any case, "
                f"with '-' or a space for '_', singular or plural), so which one is meant is "
                "unclear. Keep one: drop the others with ", dropping(*names[1:]),
                ", or say what each is, e.g. ", Option("schema", {names[-1]: "StringInput"}),
                ".")
        if names[0] != role:
            logger.info("Reading column %r as the %r column.", names[0], role)
    images = [name for name, kind in types.items() if kind in IMAGE_TYPES]
    if len(images) > len(detected):  # an image column by name or schema: the others
        for name in detected:       # stay what they were before images in memory existed
            types[name] = _input_type(frame[name])
    elif detected:
        # Before images in memory (issue 17), a column of image bytes was a bytes feature.
        log = logger.warning if image_cells.holds_bytes(frame[detected[0]]) else logger.info
        log("Reading column %r as images held in memory; to store it as bytes instead, "
            "declare schema={%r: 'StringInput'}.", detected[0], detected[0])
    for roles in ((SPLIT_KEY,), IMAGE_TYPES):
        columns = [name for name, kind in types.items() if kind in roles]
        if len(columns) > 1:
            raise SchemaError(
                f"the table has {len(columns)} "
                f"{' and '.join(sorted({types[c] for c in columns}))} columns: {columns}. Keep "
                "one: drop the others with ", dropping(*columns[1:]),
                ", or give them another type.")
    return types


def label_columns(types: Mapping[str, str]) -> list[str]:
    """The label columns, in table order (two or more make multi-label rows)."""
    return [name for name, kind in types.items() if kind in (*LABEL_TYPES, _LABEL)]


def _type_name(column: str, declared) -> str:
    name = getattr(declared, "__name__", declared)  # TFRecorder's types were classes
    found = isinstance(name, str) and _BY_LOWER_NAME.get(re.sub(r"[_\s]", "", name.lower()))
    if not found:
        raise SchemaError(
            f"schema gives column {column!r} the unknown type {shown(declared)}. Use one of "
            f"{', '.join(TYPES)}, or drop the column with ", dropping(column), ".",
            column=column, option="schema")
    return found


def _input_type(column: pd.Series) -> str:
    """The type of a column the schema does not name, from its dtype (or its values)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return "CategoricalInput"
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_integer_dtype(column):
        return "IntegerInput"
    if pd.api.types.is_float_dtype(column):
        return "FloatInput"
    if isinstance(column.dtype, pd.StringDtype):  # text only: nothing to look into
        return "StringInput"
    if pd.api.types.is_string_dtype(column) or column.dtype == object:
        return {"int64": "IntegerInput", "float32": "FloatInput"}.get(
            _element_kind(column), "StringInput")
    raise SchemaError(
        f"column {column.name!r} has dtype {column.dtype}, which a record cannot hold. "
        "Convert it (e.g. to text or to a number), or drop it with ", dropping(column.name),
        ".", column=column.name)


def _element_kind(column: pd.Series) -> str:
    """int64, float32 or string, from the values of an object column (lists looked into).
    Columns of text, and of equal-length lists of numbers, are told at C speed; anything
    else is looked at value by value."""
    if pd.api.types.infer_dtype(column, skipna=False) == "string":
        return "string"
    values = column.to_numpy(dtype=object)
    kind = _array_cells_kind(values)
    if kind is not None:
        return kind
    grid = number_grid(values.tolist()) if len(values) and is_list(values[0]) else None
    if grid is not None and grid.dtype.kind in "biu":
        return "int64"
    if grid is not None and not np.isnan(grid).any():
        return "float32"
    kinds = set()
    for value in column.tolist():
        for element in flat(value):
            if isinstance(element, (bool, np.bool_, int, np.integer)):
                kinds.add("int64")
            elif isinstance(element, (float, np.floating)):
                if not math.isnan(element):
                    kinds.add("float32")
            elif element is not None and element is not pd.NA:
                kinds.add("string")
    if kinds == {"int64"}:
        return "int64"
    if kinds <= {"int64", "float32"} and kinds:
        return "float32"
    return "string"


def _array_cells_kind(values: np.ndarray) -> str | None:
    """`_element_kind` of cells that are all NumPy arrays of integers (or all of floats),
    told by their dtypes, without a look at each number: int64 if any holds a number,
    float32 if any holds a float that is not NaN (NaN says nothing), else string. None
    for any other cells."""
    if not len(values) or set(map(type, values)) != {np.ndarray}:
        return None
    kinds = {dtype.kind for dtype in set(map(attrgetter("dtype"), values))}
    if kinds <= set("biu"):
        return "int64" if any(map(attrgetter("size"), values)) else "string"
    if kinds == {"f"}:
        return "float32" if any(v.size and not np.isnan(v).all() for v in values) \
            else "string"
    return None


def flat(value) -> list:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [e for item in value for e in flat(item)]
    return [value]


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


def is_list(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


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

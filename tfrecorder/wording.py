"""Small helpers for the sentences tfrecorder writes: messages, warnings and pages. Every
error that names rows or advises dropping a column words it here, so the wording is one."""

from __future__ import annotations

import reprlib
from collections.abc import Iterable

from tfrecorder.errors import Option

_MAX_ROWS_NAMED = 5
_MAX_SHOWN = 80  # characters of a value quoted in a message


def shown(value) -> str:
    """`repr(value)` for a message, on one line and cut to about 80 characters: an array
    (NumPy, pandas, a tensor) by its type, shape and dtype, since its repr would fill a
    screen (a 300-line error for `convert(x_train, ...)`)."""
    dims = _dims(getattr(value, "shape", None))
    if dims and hasattr(value, "dtype"):
        return f"{type(value).__name__} of shape {dims}, dtype {value.dtype}"
    if dims and hasattr(value, "dtypes"):  # a DataFrame
        return f"{type(value).__name__} of shape {dims}"
    text = " ".join(_SHORT.repr(value).split("\n"))
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


def _dims(shape) -> tuple:
    """A shape as a plain tuple: (100, 28, 28); () for a scalar, no shape or an unknown
    rank (TensorFlow)."""
    try:
        return tuple(shape)
    except TypeError:
        return ()


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = _MAX_SHOWN
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8


def count(number: int, singular: str, plural: str | None = None) -> str:
    """'1 image', '3 images', '1,200 classes' (give `plural` where "s" is wrong)."""
    return f"{number:,} {singular if number == 1 else plural or singular + 's'}"


_BYTE_UNITS = ((2**30, "GB"), (2**20, "MB"), (2**10, "KB"))


def byte_unit(largest: float) -> tuple[int, str]:
    """The unit to give sizes up to `largest` bytes in, as (its bytes, its name): bytes
    under a kilobyte, so that images of a few hundred bytes are not '0 KB'."""
    return next(((size, name) for size, name in _BYTE_UNITS if largest >= size), (1, "bytes"))


def in_unit(num_bytes: float, unit: int) -> str:
    """`num_bytes` in `unit` (`byte_unit`'s): '0.4', '2.5', '24', '1,200' (a decimal under
    10 units)."""
    value = num_bytes / unit
    return f"{value:,.1f}" if unit > 1 and value < 10 else f"{value:,.0f}"


LINE = "line"  # the index name of a table read from a text file: each row's first line


def row_word(index, plural: bool = False) -> str:
    """What a table's index labels are called in a message: 'line' when they are the
    lines of a file (an index named `LINE`: CSV and JSONL readers), which an editor shows
    and which count the header; else 'row' (a DataFrame's labels, a Parquet row number)."""
    word = LINE if getattr(index, "name", None) == LINE else "row"
    return word + "s" if plural else word


def name_row(label, index) -> str:
    """'line 7' or 'row 6': one label of `index` (`row_word`)."""
    return f"{row_word(index)} {label}"


def name_rows(labels, of=None) -> str:
    """'rows 3, 7 and 12 more' for an error message; 'lines 3, 7 and 12 more' for the
    lines of a file (`row_word`). `labels`: an index, or some labels of the index `of`
    (a list forgets what its labels are)."""
    listed = list(labels)
    shown = ", ".join(str(i) for i in listed[:_MAX_ROWS_NAMED])
    more = (f" and {len(listed) - _MAX_ROWS_NAMED} more" if len(listed) > _MAX_ROWS_NAMED
            else "")
    return f"{row_word(labels if of is None else of, len(listed) > 1)} {shown}{more}"


def sole(names: Iterable):
    """The one column at fault, for an error's `column`; None when several are."""
    names = list(names)
    return names[0] if len(names) == 1 else None


def dropping(*columns: str) -> Option:
    """The advice that drops `columns`: `schema={'notes': None}` (`--schema notes=drop`)."""
    return Option("schema", dict.fromkeys(columns))


def one_slip_apart(typed: str, meant: str) -> bool:
    """Whether `typed` is `meant` with one letter deleted, inserted, replaced, or two
    neighbours swapped (an edit distance of 1, transpositions counted once). Written out:
    the names it compares need no fuzzy-matching library, and difflib's ratio takes
    `table` for `label`. Column names (`lable`) and class names (`dgo`) are checked by it."""
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

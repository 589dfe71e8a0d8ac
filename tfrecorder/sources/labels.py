"""The labels of a table's rows: class names or class ids, one a row or several (a
column of lists, or several label columns), checked before any image is read."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.sources.schema import (
    INTEGER_LABEL,
    LABEL_TYPES,
    STRING_LABEL,
    flat,
    is_list,
    is_missing,
)
from tfrecorder.wording import dropping, name_rows, shown, sole

INTEGER = re.compile(r"^[+-]?\d+$")  # a class id as text


def row_labels(frame: pd.DataFrame, names: list[str], types: Mapping
               ) -> tuple[list | pd.Categorical, bool]:
    """The labels of every row (all str or all int, None where a single label column is
    blank: an unlabelled row, which the plan keeps or refuses by `unlabeled`), and whether
    rows are multi-label: a label column holding lists, or several label columns (their
    blank cells skipped)."""
    declared = next((types[n] for n in names if types[n] in LABEL_TYPES), None)
    what = f"column {names[0]!r}" if len(names) == 1 else f"label columns {names}"
    single = len(names) == 1 and not _holds_lists(frame[names[0]])
    if single:
        labels = _distinct_labels(frame[names[0]], what, declared, names)
        if labels is not None:
            return labels, False
    cells = [frame[name].tolist() for name in names]
    if single:
        items = [(i, v) for i, v in zip(frame.index.tolist(), cells[0]) if not is_missing(v)]
        if not items:
            raise SchemaError(
                f"{what} is empty in every row. Give the rows their labels, or drop the "
                "label column (", dropping(names[0]), ") to write a dataset without "
                "labels.", column=names[0])
        values = iter(_label_values(items, what, declared, names, frame.index))
        return [None if is_missing(v) else next(values) for v in cells[0]], False
    per_row = [[v for cell in row for v in (flat(cell) if is_list(cell) else [cell])
                if not is_missing(v)] for row in zip(*cells)]
    items = [(i, v) for i, labels in zip(frame.index.tolist(), per_row) for v in labels]
    values = iter(_label_values(items, what, declared, names, frame.index))
    return [[next(values) for _ in labels] for labels in per_row], True


def _holds_lists(column: pd.Series) -> bool:
    """Whether an object column holds a list anywhere (text and integers are told by
    pandas' C type inference first)."""
    return column.dtype == object and pd.api.types.infer_dtype(
        column, skipna=False) not in ("string", "integer") and any(map(is_list, column))


def _distinct_labels(column: pd.Series, what: str, declared: str | None,
                     names: list[str]) -> list | pd.Categorical | None:
    """The labels of a column of text or of integers, each distinct value checked and
    mapped once (10M rows of 3 classes: 0.2 s instead of 10); None for a missing value.
    Text labels of a column without a missing one come as a Categorical. None when any
    value is wrong, or the column mixes types: the row-by-row path then
    says which rows are at fault."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, uniques = column.cat.codes.to_numpy(), column.cat.categories.tolist()
    elif pd.api.types.infer_dtype(column, skipna=True) in ("string", "integer"):
        # Arrow-backed text is factorized in Arrow, without a Python string a row.
        codes, uniques = pd.factorize(column.to_numpy() if column.dtype == object
                                      else column.array, use_na_sentinel=True)
        uniques = uniques.tolist()
    else:
        return None
    blank = [i for i, v in enumerate(uniques) if is_missing(v)]  # text: "" or spaces
    if blank:
        codes = np.where(np.isin(codes, blank), -1, codes)
    present = [v for v in uniques if not is_missing(v)]
    if not present or len({type(v) for v in present}) > 1:
        return None
    try:
        mapped = _label_values([(None, v) for v in uniques if not is_missing(v)], what,
                               declared, names)
    except SchemaError:
        return None
    if not (codes < 0).any() and all(isinstance(v, str) for v in mapped):
        # Text labels, every row labelled: a code a row, as the chunked reader holds them,
        # not a string a row (categories of Python strings, as there).
        categories = pd.Index(list(dict.fromkeys(mapped)), dtype=object)
        return pd.Categorical.from_codes(categories.get_indexer(mapped)[codes], categories)
    found = np.empty(len(uniques) + 1, dtype=object)  # the last: a missing label's None
    found[[i for i, v in enumerate(uniques) if not is_missing(v)]] = mapped
    return found[codes].tolist()


def _label_values(items: list[tuple], what: str, declared: str | None,
                  names: list[str], index: pd.Index | None = None) -> list:
    """All-str or all-int labels; raises on numbers mixed with text, on fractions, on
    text declared IntegerLabel, and, unless declared, on two spellings of one class id
    ('01' and '1'): integer-looking text is read as ids, which must not merge classes
    without a word. Whitespace around a label is no part of its spelling. `index`: the
    one `items`' rows are labels of, which says how to name them (lines or rows)."""
    if declared == STRING_LABEL:
        return [v.strip() if isinstance(v, str) else str(v) for _, v in items]
    # Integer strings count as numbers (CSV files are read as text).
    texts = [(i, v) for i, v in items if isinstance(v, str) and not INTEGER.match(v.strip())]
    as_names = Option("schema", dict.fromkeys(names, STRING_LABEL))
    if texts and declared == INTEGER_LABEL:
        raise SchemaError(
            f"{what} is IntegerLabel but holds text at {name_rows(_rows(texts), of=index)} (e.g. "
            f"{shown(texts[0][1])}). Declare it StringLabel to map names to ids: ", as_names, ".",
            column=sole(names), rows=_rows(texts))
    if texts and len(texts) < len(items):
        numbers = [(i, v) for i, v in items
                   if not isinstance(v, str) or INTEGER.match(v.strip())]
        raise SchemaError(  # rows: the odd ones out, the fewer
            f"{what} mixes numbers ({name_rows(_rows(numbers), of=index)}, e.g. "
            f"{numbers[0][1]}) and text ({name_rows(_rows(texts), of=index)}, e.g. "
            f"{shown(texts[0][1])}). Use class names everywhere or integer class ids "
            "everywhere (or read them all as names: ",
            as_names, ").", column=sole(names),
            rows=min(_rows(numbers), _rows(texts), key=len))
    if texts:
        return [v.strip() for _, v in items]
    fractional = [(i, v) for i, v in items if isinstance(v, float) and not v.is_integer()]
    if fractional:
        raise SchemaError(
            f"{what} has non-integer numbers at {name_rows(_rows(fractional), of=index)} "
            f"(e.g. {float(fractional[0][1])}). Labels are class ids or class names.",
            column=sole(names), rows=_rows(fractional))
    ids = [int(v.strip()) if isinstance(v, str) else int(v) for _, v in items]
    if declared != INTEGER_LABEL:
        _check_spellings(items, ids, what, names, index)
    negative = _rows(item for item, label in zip(items, ids) if label < 0)
    if negative:
        raise SchemaError(
            f"{what} has negative class ids at {name_rows(negative, of=index)}. Class ids "
            "count from 0; use class names, or ids 0, 1, 2, ...", column=sole(names), rows=negative)
    return ids


def _rows(items) -> list:
    """The rows of (index, value) pairs, each once (a multi-label row has several)."""
    return list(dict.fromkeys(i for i, _ in items))


def _check_spellings(items: list[tuple], ids: list[int], what: str,
                     names: list[str], index: pd.Index | None) -> None:
    """Raises when two spellings of a label ('01' and '1', '+1' and '1') give one id."""
    if all(not isinstance(v, str) or v.strip() == str(label)
           for (_, v), label in zip(items, ids)):
        return  # every spelling is its id's own: distinct spellings, distinct ids
    spellings: dict[int, dict[str, list]] = {}
    for (i, v), label in zip(items, ids):
        spelling = v.strip() if isinstance(v, str) else str(label)
        spellings.setdefault(label, {}).setdefault(spelling, []).append(i)
    merged = {label: found for label, found in spellings.items() if len(found) > 1}
    if merged:
        label, found = next(iter(merged.items()))
        both = " and ".join(f"{shown(spelling)} ({name_rows(rows, of=index)})"
                            for spelling, rows in found.items())
        more = f" ({len(merged) - 1} more ids are spelt in several ways)" if len(merged) > 1 \
            else ""
        raise SchemaError(
            f"{what} spells class id {label} in different ways: {both}{more}. They would "
            "become one class. To keep them apart as names, declare ",
            Option("schema", dict.fromkeys(names, STRING_LABEL)), "; to merge them as ids, ",
            Option("schema", dict.fromkeys(names, INTEGER_LABEL)), ".", column=sole(names),
            rows=_rows(item for item, id_ in zip(items, ids) if id_ == label))

"""Stable 64-bit hashes of a table's cells and rows, computed a column at a time.

Two decisions rest on them: a row's identity (`plan.row_identities`), from which its
split (for an UNASSIGNED row) and its place in the shuffled order are drawn, which must
never change between runs, machines or versions, and
the digest that tells a resumed run it is converting the same table (`resume`). Every
cell becomes one 64-bit word, defined value by value (so a row's word never depends on
the other rows) but computed with NumPy wherever a column allows:

- a number: its own 64 bits (an int64's two's complement, a float64's IEEE bits, -0.0
  as 0.0);
- text: xxh3-64 of its UTF-8 bytes (bytes: of the bytes);
- a list: its length and then each item's word, folded by splitmix64's mixer (`_mix`);
- anything else: the word of its text (`str`).

A row's word folds its cells' words with each column name's. Words, not a hash of each
row's serialized form, so that a whole column is hashed by NumPy at once: a table of
millions of rows takes seconds (docs/performance.md, "Hashes of cells and rows").
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Sequence
from operator import methodcaller

import numpy as np
import pandas as pd
import xxhash

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_ROW_SEED = 0x243F6A8885A308D3
_LIST_SEED = 0x13198A2E03707344
_LIST_TYPES = (list, tuple, np.ndarray)


def uri_words(uris: Sequence[str]) -> np.ndarray:
    """Each URI's word: the first 8 bytes of its BLAKE2b, big-endian (a row's identity
    when its image is a file)."""
    digest = b"".join(hashlib.blake2b(uri.encode(), digest_size=8).digest() for uri in uris)
    return np.frombuffer(digest, ">u8").astype(np.uint64)


def seeded(words: np.ndarray, seed: int) -> np.ndarray:
    """`words` mixed with `seed` (`_mix` of each word xor the seed's mix): another seed,
    other words, each from its own word alone."""
    seed_word = _mix(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    return _mix(np.asarray(words, dtype=np.uint64) ^ seed_word)


def _mix(words: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, on a whole column of 64-bit words at once."""
    with np.errstate(over="ignore"):
        z = words + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _fold(hashes: np.ndarray, words: np.ndarray, salt: int = 0) -> None:
    """`hashes = _mix(hashes ^ salt ^ words)`, in place, a block of rows at a time: the
    temporary arrays stay in the CPU's cache (10M rows: 30 ms, not 180)."""
    salt = np.uint64(salt)
    for start in range(0, len(hashes), _BLOCK):
        block = hashes[start:start + _BLOCK]
        block ^= words[start:start + _BLOCK]
        block ^= salt
        block[:] = _mix(block)


_BLOCK = 1 << 15  # rows folded at once: 256 kB a temporary array


def row_hashes(words: Iterable[tuple[str, np.ndarray]], num_rows: int | None = None
               ) -> np.ndarray:
    """Each row's word, from its cells' (`cell_words`) in the columns given, in order.
    `words` may be an iterator of `num_rows` words a column: then only one column's
    are held at a time."""
    if num_rows is None:
        words = list(words)
        num_rows = len(words[0][1]) if words else 0
    hashes = np.full(num_rows, _ROW_SEED, dtype=np.uint64)
    for name, column in words:
        _fold(hashes, column, _text_word(name))
    return hashes


_NA_WORD = -(1 << 63)  # a nullable int's <NA>: no time, id or count takes it


def cell_words(column: pd.Series | Sequence) -> np.ndarray:
    """One 64-bit word a cell of `column`; equal cells give equal words. Columns of
    objects are read a chunk of rows at a time, so that Arrow-backed text is never all
    Python strings at once."""
    dtype = getattr(column, "dtype", None)
    if dtype is not None and dtype.kind == "f":
        return (np.asarray(column, dtype=np.float64) + 0.0).view(np.uint64)
    if isinstance(dtype, pd.CategoricalDtype):  # each category once
        categories = cell_words(pd.Series(column.cat.categories.tolist(), dtype=object))
        return categories[column.cat.codes.to_numpy()]
    if dtype is not None and dtype.kind in "iub" and getattr(column, "hasnans", False):
        # pandas' nullable ints (a clip's span, `media`): <NA> is a word of its own
        return np.asarray(column.to_numpy(dtype=np.int64, na_value=_NA_WORD),
                          dtype=np.int64).view(np.uint64)
    if dtype is not None and dtype.kind in "iub":
        return np.asarray(column, dtype=np.int64).view(np.uint64)
    text = _arrow_text(column)
    if text is not None:
        return _arrow_text_words(text)
    if not isinstance(column, (pd.Series, np.ndarray)):
        column = pd.Series(list(column), dtype=object)
    if len(column) > _CHUNK:
        return np.concatenate([cell_words(column[start:start + _CHUNK])
                               for start in range(0, len(column), _CHUNK)])
    values = np.empty(len(column), dtype=object)
    values[:] = column.tolist()
    kinds = set(map(type, values))
    if not kinds & set(_LIST_TYPES):
        return _scalar_words(values)
    if kinds <= set(_LIST_TYPES):
        return _list_words(values)
    words = np.empty(len(values), dtype=np.uint64)
    lists = np.fromiter((isinstance(v, _LIST_TYPES) for v in values), bool, len(values))
    words[lists] = _list_words(values[lists])
    words[~lists] = _scalar_words(values[~lists])
    return words


_CHUNK = 1 << 16  # rows of a column held as Python objects at a time (90 B a path)


def _arrow_text(column):
    """The Arrow chunks of pandas' Arrow-backed text (or bytes) without a missing cell;
    None for any other column."""
    dtype = getattr(column, "dtype", None)
    if not isinstance(dtype, pd.ArrowDtype) and not (
            isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"):
        return None
    import pyarrow as pa

    values = pa.chunked_array(pa.array(column.array))
    kind = values.type
    if values.null_count or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                                 or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        return None
    return values.chunks


def _arrow_text_words(chunks) -> np.ndarray:
    """Words of Arrow text, from Arrow's own UTF-8 bytes (what `_text_word` hashes: Arrow
    holds no lone surrogate), a chunk of rows at a time: no Python string a row, nor its
    encoding (2.3x faster)."""
    import pyarrow as pa

    words = np.empty(sum(map(len, chunks)), dtype=np.uint64)
    at = 0
    for chunk in chunks:
        for start in range(0, len(chunk), _CHUNK):
            cells = chunk.slice(start, _CHUNK).cast(pa.large_binary())
            words[at:at + len(cells)] = np.fromiter(
                map(xxhash.xxh3_64_intdigest, cells.to_numpy(zero_copy_only=False)),
                np.uint64, len(cells))
            at += len(cells)
    return words


def _scalar_words(values: np.ndarray) -> np.ndarray:
    """Words of single values, each distinct value hashed once: text by `pd.factorize`
    (in C); other values by type and value (1 and 1.0 are equal, but not one cell)."""
    if pd.api.types.infer_dtype(values, skipna=False) == "string" and \
            not pd.isna(values).any():  # ("string" lets None in)
        encoded = map(methodcaller("encode", "utf-8", "surrogatepass"), values.tolist())
        return np.fromiter(map(xxhash.xxh3_64_intdigest, encoded), np.uint64, len(values))
    seen: dict = {}
    words = np.empty(len(values), dtype=np.uint64)
    for i, value in enumerate(values.tolist()):
        try:
            word = seen.get((type(value), value))
        except TypeError:  # unhashable
            words[i] = _value_word(value)
            continue
        if word is None:
            word = seen[(type(value), value)] = _value_word(value)
        words[i] = word
    return words


def _list_words(values: np.ndarray) -> np.ndarray:
    """Words of list cells: rows of one length whose items are all floats or all ints
    are folded as one NumPy grid; the rest one by one (the same fold, in Python)."""
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    words = np.empty(len(values), dtype=np.uint64)
    for length in np.unique(lengths).tolist():
        at = np.flatnonzero(lengths == length)
        grid = _number_grid(values[at], length)
        if grid is not None:
            words[at] = grid_words(grid)
            continue
        items = _scalar_items(values[at])  # lists of text (a detection row's classes)
        words[at] = _folded(_scalar_words(items).reshape(len(at), length).T, len(at),
                            length) if items is not None else np.fromiter(
                (_value_word(v) for v in values[at]), np.uint64, len(at))
    return words


def _scalar_items(cells: np.ndarray) -> np.ndarray | None:
    """The items of list cells, flat, as objects, when none is itself a list; else None."""
    flat = [x for cell in cells.tolist()
            for x in (cell.tolist() if isinstance(cell, np.ndarray) else cell)]
    if any(isinstance(x, _LIST_TYPES) for x in flat):
        return None
    found = np.empty(len(flat), dtype=object)
    found[:] = flat
    return found


def grid_words(grid: np.ndarray) -> np.ndarray:
    """The words of list cells held as one rows x k array of float64s (or int64s): the
    same words as the cells' (`_value_word`), a column of items at a time."""
    return _folded((cell_words(grid[:, item]) for item in range(grid.shape[1])),
                   len(grid), grid.shape[1])


def _folded(item_words: Iterable[np.ndarray], num_rows: int, length: int) -> np.ndarray:
    """The words of `num_rows` list cells of `length` items from their items' words, a
    column of items at a time (each cell's first items, then its second...):
    `_value_word`'s fold."""
    folded = np.full(num_rows, _mix(np.uint64(_LIST_SEED ^ length)), dtype=np.uint64)
    for words in item_words:
        _fold(folded, words)
    return folded


def _number_grid(cells: np.ndarray, length: int) -> np.ndarray | None:
    """Cells of `length` items as an array of rows, when every item is a float (or every
    item an int), as `_value_word` tells them; else None."""
    if not length:
        return None
    if {type(v) for v in cells} == {np.ndarray} and {v.ndim for v in cells} == {1}:
        dtypes = {v.dtype for v in cells}  # arrays: their dtypes say, no item looked at
        if len(dtypes) == 1 and next(iter(dtypes)).kind in "fi":
            wide = np.float64 if next(iter(dtypes)).kind == "f" else np.int64
            # (concatenate, then shape: 3.5x faster than np.stack on 1M small arrays)
            return np.concatenate(cells.tolist()).reshape(len(cells), length).astype(wide)
    items = [v.tolist() if isinstance(v, np.ndarray) else v for v in cells.tolist()]
    kinds = {type(x) for cell in items for x in cell}
    if kinds not in ({float}, {int}):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(items, dtype=np.float64 if kinds == {float} else np.int64)
        except (ValueError, OverflowError):
            return None


def _value_word(value) -> int:
    """The word of one cell (see the module's docstring); lists fold their items'."""
    if isinstance(value, str):
        return _text_word(value)
    if isinstance(value, bytes):
        return xxhash.xxh3_64_intdigest(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return int(np.float64(value + 0.0).view(np.uint64))
    if isinstance(value, int):  # bool too
        if not -(2**63) <= value < 2**63:
            return _text_word(str(value))
        return int(np.int64(value).view(np.uint64))
    if isinstance(value, (list, tuple, np.ndarray)):
        items = value.tolist() if isinstance(value, np.ndarray) else list(value)
        word = _mix(np.uint64(_LIST_SEED ^ len(items)))
        for item in items:
            word = _mix(word ^ np.uint64(_value_word(item)))
        return int(word)
    return _text_word(str(value))


def _text_word(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))

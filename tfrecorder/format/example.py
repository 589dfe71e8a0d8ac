"""`tf.train.Example` serialization without TensorFlow.

Worker processes encode every record, and importing TensorFlow there would cost seconds
and hundreds of MB per worker. An Example is a small protobuf (a map from feature name to
a list of bytes, floats or int64s), so it is written here directly in the protobuf wire
format. Keys are written in sorted order, which makes the bytes deterministic: the same
features always serialize identically, whichever engine or worker encodes them.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np

FeatureValue = bytes | str | int | float | Sequence[bytes] | Sequence[str] | Sequence[int]

# Field numbers of the messages in tensorflow/core/example/{example,feature}.proto.
LENGTH_DELIMITED = 2
BYTES_LIST, FLOAT_LIST, INT64_LIST = 1, 2, 3


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]  # most tags and lengths: a lookup

# An empty list of each dtype, as TensorFlow's encoder writes it: the list's field with no
# values (`float_list {}`). A Feature with no list set parses in TensorFlow as an empty
# list of any dtype, but readers that ask the Feature which list it holds (the PyPI
# `tfrecord` package, TFDS's example parser) fail on it.
_EMPTY_LISTS = {"string": bytes((BYTES_LIST << 3 | 2, 0)),
                "float32": bytes((FLOAT_LIST << 3 | 2, 0)),
                "int64": bytes((INT64_LIST << 3 | 2, 0))}


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64s are ten-byte two's complement varints
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field whose payload follows."""
    return _varint(number << 3 | LENGTH_DELIMITED) + _varint(length)


def _feature(value: FeatureValue, dtype: str | None = None) -> list[bytes]:
    """The parts of one Feature message (headers and payloads, not yet joined); `dtype`
    types an empty list."""
    kind = type(value)
    if kind is int:  # the commonest feature: one int64, written in one go
        packed = _varint(value)
        int64s = _header(1, len(packed)) + packed
        return [_header(INT64_LIST, len(int64s)) + int64s]
    if kind is bytes or kind is str:  # one image, name or text: no list built
        data = value.encode() if kind is str else value
        item = _header(1, len(data))
        return [_header(BYTES_LIST, len(item) + len(data)), item, data]
    values = [value] if isinstance(value, (bytes, str, int, float)) else list(value)
    if not values:
        if dtype not in _EMPTY_LISTS:
            raise EmptyListError(dtype=dtype)
        return [_EMPTY_LISTS[dtype]]
    packed = _numbers(values)
    if packed is not None:
        parts, kind = [_header(1, len(packed[0])), packed[0]], packed[1]
    elif all(isinstance(v, (bytes, str)) for v in values):
        parts = []
        for v in values:
            v = v.encode() if isinstance(v, str) else v
            parts += [_header(1, len(v)), v]
        kind = BYTES_LIST
    elif all(isinstance(v, int) for v in values):
        packed = b"".join(_varint(int(v)) for v in values)
        parts, kind = [_header(1, len(packed)), packed], INT64_LIST
    elif all(isinstance(v, (int, float)) for v in values):
        packed = struct.pack(f"<{len(values)}f", *values)
        parts, kind = [_header(1, len(packed)), packed], FLOAT_LIST
    else:
        raise TypeError(f"cannot store {values!r} in a tf.train.Example feature")
    return [_header(kind, sum(map(len, parts))), *parts]


class EmptyListError(TypeError):
    """An empty list without a dtype: which list it is cannot be told from no values."""

    def __init__(self, name: str = "?", dtype=None):
        super().__init__(f"feature {name!r} is an empty list, which is stored with its dtype "
                         f"(one of {', '.join(_EMPTY_LISTS)}); its dtype is {dtype!r}")


def _numbers(values: list) -> tuple[bytes, int] | None:
    """A list of floats (boxes, areas) or of ints (classes), packed in one pass in C,
    with its list kind; None for anything else, which the checks item by item then
    place: a third of the cost of a detection record's features. The packing refuses
    what the checks would not take as that kind (a float among ints, text), so the
    bytes are the same."""
    first = type(values[0])
    try:
        if first is float:
            return struct.pack(f"<{len(values)}f", *values), FLOAT_LIST
        if first is int:
            return b"".join(map(_varint, values)), INT64_LIST
    except (struct.error, TypeError, IndexError):
        return None
    return None


def encode_example(features: Mapping[str, FeatureValue],
                   list_dtypes: Mapping[str, str] = {}) -> bytes:  # noqa: B006 (read only)
    """Serializes `features` exactly as `tf.train.Example(...).SerializeToString()` would:
    bytes/str become a BytesList, ints an Int64List, floats a FloatList. An empty list is
    an empty list of its feature's dtype in `list_dtypes` ("int64", "float32" or
    "string"), as TensorFlow's encoder writes it; one without a dtype is an error.

    Lengths are computed first and the parts joined once, so an image's bytes are copied
    once, not once per level of nesting.
    """
    entries, size = _features(features, list_dtypes)
    return b"".join([_header(1, size), *entries])


def encode_sequence_example(context: Mapping[str, FeatureValue],
                            feature_lists: Mapping[str, Sequence[FeatureValue]],
                            list_dtypes: Mapping[str, str] = {}  # noqa: B006 (read only)
                            ) -> bytes:
    """Serializes a `tf.train.SequenceExample`: `context` as `encode_example`'s features,
    and each of `feature_lists` as one Feature a step (a video's frames, their
    timestamps), keys sorted as there, so the bytes are deterministic too. A step's
    empty list takes its dtype from `list_dtypes`, as a context feature's does."""
    context_entries, context_size = _features(context, list_dtypes)
    lists, lists_size = [], 0
    for name in sorted(feature_lists):
        key = _keys.get(name) or _key(name)
        steps, steps_size = [], 0
        for value in feature_lists[name]:
            try:
                feature = _feature(value, list_dtypes.get(name))
            except EmptyListError:
                raise EmptyListError(name, list_dtypes.get(name)) from None
            length = sum(map(len, feature))
            header = _header(1, length)  # FeatureList.feature, repeated
            steps += [header, *feature]
            steps_size += len(header) + length
        value = _header(2, steps_size)
        length = len(key) + len(value) + steps_size
        entry = _header(1, length)  # FeatureLists.feature_list, a map entry
        lists += [entry, key, value, *steps]
        lists_size += len(entry) + length
    parts = []
    if context:
        parts += [_header(1, context_size), *context_entries]
    if feature_lists:
        parts += [_header(2, lists_size), *lists]
    return b"".join(parts)


def _features(features: Mapping[str, FeatureValue], list_dtypes: Mapping[str, str]
              ) -> tuple[list[bytes], int]:
    """The map entries of a Features message (its body, not yet joined) and their size."""
    entries, size = [], 0
    for name in sorted(features):
        key = _keys.get(name) or _key(name)
        try:
            feature = _feature(features[name], list_dtypes.get(name))
        except EmptyListError:
            raise EmptyListError(name, list_dtypes.get(name)) from None
        length = sum(map(len, feature))
        value = _header(2, length)
        length += len(key) + len(value)
        entry = _header(1, length)
        entries += [entry, key, value, *feature]
        size += len(entry) + length
    return entries, size


def encode_examples(columns: Mapping[str, Sequence[FeatureValue | None]],
                    list_dtypes: Mapping[str, str] = {}):  # noqa: B006 (read only)
    """`encode_example` for many rows at once, a column at a time: the same bytes, as an
    Arrow `large_binary` array of records, for tables whose records carry no image.
    `columns` maps each feature name to its value in every row (NumPy arrays, Arrow text
    arrays or lists); None leaves the feature out of that row's record.

    Each column's map entries (key, lengths and value) are built by NumPy or Arrow
    compute for a whole column, and Arrow joins each row's entries in C
    (`binary_join_element_wise`), a quarter of the time a join of Python bytes a row
    takes (docs/performance.md). Columns of other kinds (lists of text, ids, mixed
    values) are built once per distinct value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    entries = [_column_entries(name, columns[name], list_dtypes.get(name))
               for name in sorted(columns)]
    if not entries or not len(entries[0]):
        return pa.array([], pa.large_binary())
    body = pc.binary_join_element_wise(*entries, no_separator())
    return pc.binary_join_element_wise(
        _varint_cells(pc.binary_length(body).to_numpy(), lambda n: _ONE_BYTE[0x0A]), body,
        no_separator())


def no_separator():
    """The separator `binary_join_element_wise` takes, of the entries' type."""
    import pyarrow as pa

    return pa.scalar(b"", pa.large_binary())


def _column_entries(name: str, values, dtype: str | None):
    """Each row's whole map entry for feature `name` (b"" for None), as `encode_example`
    writes it, as an Arrow `large_binary` array."""
    import pyarrow as pa

    key = _keys.get(name) or _key(name)
    found = _fast_entries(key, values)
    if found is not None:
        return found
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_pylist()
    return pa.array(_entries(name, values, dtype), pa.large_binary())


def _fast_entries(key: bytes, values):
    """The entries of a column of one kind NumPy or Arrow builds whole: single numbers,
    lists of k floats, text. None for anything else, and where float32 would overflow
    (`struct` refuses those: the row path says so) or a float is NaN (whose payload bits
    `struct` alone decides)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or \
                pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
            return _text_entries(key, values.cast(pa.large_binary()))
        return None
    if isinstance(values, np.ndarray) and values.dtype == object:
        values = list(values)  # cells: lists or arrays, text, None
    if not isinstance(values, np.ndarray):
        kinds = set(map(type, values))
        # One value (a split's name): one entry. Not floats, where 0.0 == -0.0.
        if len(kinds) == 1 and kinds <= {str, bytes, int, bool} and \
                list(values).count(values[0]) == len(values):
            entry = np.frombuffer(_entry(key, values[0]), dtype=np.uint8)
            return fixed_width_cells(np.tile(entry, (len(values), 1)))
        if kinds == {str}:
            return _text_entries(key, pa.array(values, pa.large_string()).cast(
                pa.large_binary()))
        if kinds == {float} or kinds == {int}:
            try:
                values = np.asarray(values, dtype=np.float64 if kinds == {float} else np.int64)
            except OverflowError:
                return None
        elif kinds and kinds <= {list, np.ndarray}:
            values = number_grid(values)
            if values is None:
                return None
        else:
            return None
    if values.dtype.kind == "f" and values.ndim in (1, 2):
        grid = values.reshape(len(values), -1)
        return _float_entries(key, grid) if grid.shape[1] else None
    if values.dtype.kind in "iu" and values.ndim == 1:
        return _int_entries(key, values)
    return None


def _float_entries(key: bytes, grid: np.ndarray):
    """A column of k floats a row (rows x k): one prefix, and each row's floats packed
    by NumPy."""
    # (float32 as it is: the plan's grids are; others through float64, as Python's
    # floats go, so that wider floats round as the row path rounds them)
    packed = _float32s(grid if grid.dtype == np.float32 else grid.astype(np.float64))
    if packed is None:
        return None
    width = 4 * grid.shape[1]
    prefix = _entry(key, [0.0] * grid.shape[1])[:-width]
    cells = np.empty((len(grid), len(prefix) + width), dtype=np.uint8)
    cells[:, :len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    cells[:, len(prefix):] = packed.view(np.uint8).reshape(len(grid), width)
    return fixed_width_cells(cells)


def _int_entries(key: bytes, values: np.ndarray):
    """A column of single int64s: varints built by NumPy, after a prefix that depends
    only on the varint's length."""
    return _varint_cells(np.asarray(values, dtype=np.int64),
                         lambda n: _entry(key, 1 << (7 * (n - 1)))[:-n])


def _text_entries(key: bytes, values):
    """A column of single strings (Arrow `large_binary`, nulls for None): a prefix that
    depends only on the text's length, looked up by Arrow for each row, then the text;
    b"" for a null (no feature)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lengths = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False)
    lengths, rows = np.unique(lengths, return_inverse=True)
    prefixes = pa.array([_entry(key, b"x" * n)[:-n or None] for n in lengths.tolist()],
                        pa.large_binary())
    entries = pc.binary_join_element_wise(prefixes.take(rows), values, no_separator())
    return entries.fill_null(b"") if entries.null_count else entries


def _varint_cells(values: np.ndarray, prefix: Callable[[int], bytes]):
    """Each value as `prefix(n)` then its varint of n bytes, as an Arrow array: varints
    built by NumPy, seven bits a step (negative ints are ten-byte two's complement)."""
    rest = np.asarray(values, dtype=np.int64).view(np.uint64).copy()
    groups = np.empty((len(rest), 10), dtype=np.uint8)
    lengths = np.ones(len(rest), dtype=np.int64)
    for i in range(10):
        groups[:, i] = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest >>= np.uint64(7)
        more = rest != 0
        if not more.any():
            break
        groups[more, i] |= 0x80
        lengths += more
    prefixes = {n: prefix(n) for n in np.unique(lengths).tolist()}
    width = max(len(p) + n for n, p in prefixes.items())
    cells = np.zeros((len(rest), width), dtype=np.uint8)
    sizes = np.empty(len(rest), dtype=np.int64)
    for n, head in prefixes.items():
        rows = lengths == n
        cells[rows, :len(head)] = np.frombuffer(head, dtype=np.uint8)
        cells[rows, len(head):len(head) + n] = groups[rows, :n]
        sizes[rows] = len(head) + n
    return ragged_cells(cells, sizes)


def fixed_width_cells(cells: np.ndarray):
    """The rows of a uint8 matrix as an Arrow `large_binary` array, without a copy."""
    import pyarrow as pa

    rows, width = cells.shape
    offsets = np.arange(0, rows * width + 1, width, dtype=np.int64)
    return pa.Array.from_buffers(pa.large_binary(), rows, [
        None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(cells))])


def ragged_cells(cells: np.ndarray, sizes: np.ndarray):
    """The rows of a uint8 matrix, each cut to its size, as an Arrow `large_binary`
    array."""
    import pyarrow as pa

    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    kept = cells[np.arange(cells.shape[1]) < sizes[:, None]]
    return pa.Array.from_buffers(pa.large_binary(), len(sizes), [
        None, pa.py_buffer(offsets), pa.py_buffer(kept)])


_MEMO_TYPES = (str, bytes, int, float, bool)


def _entries(name: str, values: Sequence[FeatureValue | None],
             dtype: str | None = None) -> list[bytes]:
    """Each value's whole map entry for feature `name` (b"" for None), as
    `encode_example` writes it, built once per distinct value: the columns
    `_fast_entries` does not take (lists of text or ids, booleans, mixed values)."""
    key = _keys.get(name) or _key(name)
    values = values.tolist() if isinstance(values, np.ndarray) else values
    built: dict = {}
    found = []
    for value in values:
        kind = type(value)
        memo = (kind, value) if kind in _MEMO_TYPES else None
        entry = built.get(memo) if memo is not None else None
        if entry is None:
            value = value.tolist() if isinstance(value, np.ndarray) else value
            try:
                entry = _entry(key, value, dtype) if value is not None else b""
            except EmptyListError:
                raise EmptyListError(name, dtype) from None
            if memo is not None:
                built[memo] = entry
        found.append(entry)
    return found


def _float32s(wide: np.ndarray) -> np.ndarray | None:
    """`wide` as little-endian float32s, as `struct.pack("<f")` rounds them; None where
    that would refuse one (overflow) or decide its bits alone (NaN)."""
    with np.errstate(over="ignore"):
        packed = wide.astype("<f4")
    if np.isnan(wide).any() or (np.isinf(packed) != np.isinf(wide)).any():
        return None
    return packed


def number_grid(cells: Sequence) -> np.ndarray | None:
    """Cells (lists or 1-D arrays) of k > 0 numbers each, as one rows x k array; None
    when they are ragged, empty or hold anything but numbers."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # ragged cells make an object array: refuse
            grid = np.asarray(cells)
    except (ValueError, TypeError, Warning):
        return None
    if grid.ndim != 2 or grid.dtype.kind not in "biuf" or not grid.shape[1]:
        return None
    return grid


def _entry(key: bytes, value: FeatureValue, dtype: str | None = None) -> bytes:
    feature = b"".join(_feature(value, dtype))
    body = key + _header(2, len(feature)) + feature
    return _header(1, len(body)) + body


_keys: dict[str, bytes] = {}  # feature name -> its encoded key field; names repeat


def _key(name: str) -> bytes:
    key = name.encode()
    _keys[name] = _header(1, len(key)) + key
    return _keys[name]

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
_LENGTH_DELIMITED = 2
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]  # most tags and lengths: a lookup

# An empty list of each dtype, as TensorFlow's encoder writes it: the list's field with no
# values (`float_list {}`). A Feature with no list set parses in TensorFlow as an empty
# list of any dtype, but readers that ask the Feature which list it holds (the PyPI
# `tfrecord` package, TFDS's example parser) fail on it.
_EMPTY_LISTS = {"string": bytes((_BYTES_LIST << 3 | 2, 0)),
                "float32": bytes((_FLOAT_LIST << 3 | 2, 0)),
                "int64": bytes((_INT64_LIST << 3 | 2, 0))}


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
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(length)


def _feature(value: FeatureValue, dtype: str | None = None) -> list[bytes]:
    """The parts of one Feature message (headers and payloads, not yet joined); `dtype`
    types an empty list."""
    kind = type(value)
    if kind is int:  # the commonest feature: one int64, written in one go
        packed = _varint(value)
        int64s = _header(1, len(packed)) + packed
        return [_header(_INT64_LIST, len(int64s)) + int64s]
    if kind is bytes or kind is str:  # one image, name or text: no list built
        data = value.encode() if kind is str else value
        item = _header(1, len(data))
        return [_header(_BYTES_LIST, len(item) + len(data)), item, data]
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
        kind = _BYTES_LIST
    elif all(isinstance(v, int) for v in values):
        packed = b"".join(_varint(int(v)) for v in values)
        parts, kind = [_header(1, len(packed)), packed], _INT64_LIST
    elif all(isinstance(v, (int, float)) for v in values):
        packed = struct.pack(f"<{len(values)}f", *values)
        parts, kind = [_header(1, len(packed)), packed], _FLOAT_LIST
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
            return struct.pack(f"<{len(values)}f", *values), _FLOAT_LIST
        if first is int:
            return b"".join(map(_varint, values)), _INT64_LIST
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
    return b"".join([_header(1, size), *entries])


def encode_examples(columns: Mapping[str, Sequence[FeatureValue | None]],
                    list_dtypes: Mapping[str, str] = {}):  # noqa: B006 (read only)
    """`encode_example` for many rows at once, a column at a time: the same bytes, as an
    Arrow `large_binary` array of records, for tables whose records carry no image.
    `columns` maps each feature name to its value in every row (NumPy arrays, Arrow text
    arrays or lists); None leaves the feature out of that row's record.

    Each column's map entries (key, lengths and value) are built by NumPy or Arrow
    compute for a whole column, and Arrow joins each row's entries in C
    (`binary_join_element_wise`): 1.0 µs a record of bench_structured's table, where a
    join of Python bytes a row took 4.0 µs. Columns of other kinds (lists of text, ids,
    mixed values) are built once per distinct value, as before.
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


# --- decoding ------------------------------------------------------------------------------

_VARINT, _FIXED64, _FIXED32 = 0, 1, 5
_INT64_MASK, _INT64_SIGN = (1 << 64) - 1, 1 << 63


def decode_example(serialized: bytes) -> dict[str, list]:
    """The features of a serialized `tf.train.Example`: name -> list of values (bytes,
    int or float; [] for an empty Feature), as `tf.train.Example.FromString` reads them.

    Readers that only look at a few records (`show`) use this instead of TensorFlow,
    whose import alone takes seconds. Values packed or not, fields in any order, unknown
    fields and a repeated key (the last wins) are read as protobuf reads them. Each
    bytes value is copied once, out of a memoryview of the record.

    Raises:
        ValueError: `serialized` is not a well-formed Example.
    """
    data = bytes(serialized)  # a no-op for bytes; indexing bytes is fastest
    features: dict[str, list] | None = None
    try:
        features = _plain_features(data)
        if features is not None:
            return features
        features, view = {}, memoryview(data)
        for number, wire, start, end in _fields(data, 0, len(data)):
            if number == 1 and wire == _LENGTH_DELIMITED:  # Example.features
                for number, wire, entry_start, entry_end in _fields(data, start, end):
                    if number == 1 and wire == _LENGTH_DELIMITED:  # one map entry
                        name, values = _map_entry(data, view, entry_start, entry_end)
                        features[name] = values
    except (ValueError, IndexError, struct.error) as error:  # UnicodeDecodeError too
        raise ValueError(f"not a serialized tf.train.Example: {error}") from None
    return features


def _plain_features(data: bytes) -> dict[str, list] | None:
    """The features of an Example laid out as TensorFlow and `encode_example` write it
    (one `features` field; each map entry its key, then a Feature of one list; numbers
    packed), read in one loop: under half the time of reading it field by field, which
    is what `open_split` spends most of a record's time on. None for any other layout
    (unpacked numbers, unknown fields, fields out of order), which `decode_example` then
    reads field by field."""
    end = len(data)
    if not end:
        return {}
    if data[0] != 0x0A:  # Example.features
        return None
    length, pos = _length(data, 1)
    if pos + length != end:
        return None
    features = {}
    while pos < end:
        if data[pos] != 0x0A:  # Features.feature: one map entry
            return None
        length, pos = _length(data, pos + 1)
        entry_end = pos + length
        if entry_end > end or data[pos] != 0x0A:  # its key first
            return None
        length, pos = _length(data, pos + 1)
        key_end = pos + length
        if key_end >= entry_end or data[key_end] != 0x12:  # then its Feature
            return None
        name = data[pos:key_end].decode()
        length, pos = _length(data, key_end + 1)
        if pos + length != entry_end:
            return None
        values: list = []
        if pos < entry_end:  # an empty Feature has no list
            kind = data[pos]
            length, pos = _length(data, pos + 1)
            if pos + length != entry_end:
                return None
            if kind == 0x0A:  # BytesList: one field per value
                while pos < entry_end:
                    if data[pos] != 0x0A:
                        return None
                    length, pos = _length(data, pos + 1)
                    if pos + length > entry_end:
                        return None
                    values.append(data[pos:pos + length])
                    pos += length
            elif kind in (0x12, 0x1A) and pos < entry_end:  # packed floats, int64s
                if data[pos] != 0x0A:
                    return None
                length, pos = _length(data, pos + 1)
                if pos + length != entry_end:
                    return None
                if kind == 0x12:
                    if length % 4:
                        return None
                    values = list(struct.unpack_from(f"<{length // 4}f", data, pos))
                else:
                    values = _packed_int64s(data, pos, entry_end)
            elif kind not in (0x12, 0x1A):
                return None
        features[name] = values
        pos = entry_end
    return features


def _length(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at data[pos] (most are one byte) and the position after it."""
    value = data[pos]
    if value < 0x80:
        return value, pos + 1
    return _read_varint(data, pos, len(data))


def _map_entry(data: bytes, view: memoryview, start: int, end: int) -> tuple[str, list]:
    """One entry of the Features map: its key and its Feature's values."""
    name, kind, values = "", None, []
    for number, wire, field_start, field_end in _fields(data, start, end):
        if wire != _LENGTH_DELIMITED:
            continue
        if number == 1:
            name = str(view[field_start:field_end], "utf-8")
        elif number == 2:  # the Feature: its lists, merged as protobuf merges a oneof
            for kind_number, kind_wire, list_start, list_end in _fields(
                    data, field_start, field_end):
                if kind_number in _LIST_READERS and kind_wire == _LENGTH_DELIMITED:
                    if kind_number != kind:
                        kind, values = kind_number, []
                    values += _LIST_READERS[kind_number](data, view, list_start, list_end)
    return name, values


def _bytes_list(data: bytes, view: memoryview, start: int, end: int) -> list[bytes]:
    return [view[a:b].tobytes() for number, wire, a, b in _fields(data, start, end)
            if number == 1 and wire == _LENGTH_DELIMITED]


def _float_list(data: bytes, view: memoryview, start: int, end: int) -> list[float]:
    values = []
    for number, wire, a, b in _fields(data, start, end):
        if number != 1:
            continue
        if wire == _LENGTH_DELIMITED:  # packed, as TensorFlow writes them
            if (b - a) % 4:
                raise ValueError(f"packed floats of {b - a} bytes, not a multiple of 4")
            values += struct.unpack_from(f"<{(b - a) // 4}f", data, a)
        elif wire == _FIXED32:
            values += struct.unpack_from("<f", data, a)
    return values


def _int64_list(data: bytes, view: memoryview, start: int, end: int) -> list[int]:
    values = []
    for number, wire, a, b in _fields(data, start, end):
        if number != 1:
            continue
        if wire == _LENGTH_DELIMITED:  # packed, as TensorFlow writes them
            values += _packed_int64s(data, a, b)
        elif wire == _VARINT:
            values.append(a - (1 << 64) if a & _INT64_SIGN else a)
    return values


def _packed_int64s(data: bytes, pos: int, end: int) -> list[int]:
    """The packed int64s in data[pos:end]: varints, most of one byte; a negative int64 is
    a ten-byte varint of 2**64 + it (two's complement)."""
    values = []
    while pos < end:
        value = data[pos]
        if value < 0x80:
            pos += 1
        else:
            value, pos = _read_varint(data, pos, end)
            value &= _INT64_MASK
            if value & _INT64_SIGN:
                value -= 1 << 64
        values.append(value)
    return values


_LIST_READERS = {_BYTES_LIST: _bytes_list, _FLOAT_LIST: _float_list, _INT64_LIST: _int64_list}


def _fields(data: bytes, pos: int, end: int):
    """(field number, wire type, a, b) of each field of the message in data[pos:end]: a
    length-delimited field's payload is data[a:b], a varint's value is a (64 bits), and
    a fixed-width field starts at a."""
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _read_varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError(f"field number 0 at byte {pos}")
        if wire == _LENGTH_DELIMITED:
            length = data[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _read_varint(data, pos, end)
            a, b = pos, pos + length
        elif wire == _VARINT:
            value, pos = _read_varint(data, pos, end)
            a = b = value & _INT64_MASK
            yield number, wire, a, b
            continue
        elif wire == _FIXED32:
            a, b = pos, pos + 4
        elif wire == _FIXED64:
            a, b = pos, pos + 8
        else:  # groups (3, 4) are long deprecated; 6 and 7 do not exist
            raise ValueError(f"wire type {wire} at byte {pos}")
        if b > end:
            raise ValueError(f"a field runs past the end of its message at byte {pos}")
        pos = b
        yield number, wire, a, b


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at data[pos] and the position after it."""
    value = shift = 0
    while True:
        if pos >= end:
            raise ValueError(f"a varint runs past the end of its message at byte {pos}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError(f"a varint longer than 10 bytes at byte {pos}")

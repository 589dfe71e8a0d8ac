"""`tf.train.Example` serialization without TensorFlow.

Worker processes encode every record, and importing TensorFlow there would cost seconds
and hundreds of MB per worker. An Example is a small protobuf (a map from feature name to
a list of bytes, floats or int64s), so it is written here directly in the protobuf wire
format. Keys are written in sorted order, which makes the bytes deterministic: the same
features always serialize identically, whichever engine or worker encodes them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

FeatureValue = bytes | str | int | float | Sequence[bytes] | Sequence[str] | Sequence[int]

# Field numbers of the messages in tensorflow/core/example/{example,feature}.proto.
_LENGTH_DELIMITED = 2
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]  # most tags and lengths: a lookup


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


def _feature(value: FeatureValue) -> list[bytes]:
    """The parts of one Feature message (headers and payloads, not yet joined)."""
    if type(value) is int:  # the commonest feature: one int64, written in one go
        packed = _varint(value)
        int64s = _header(1, len(packed)) + packed
        return [_header(_INT64_LIST, len(int64s)) + int64s]
    values = [value] if isinstance(value, (bytes, str, int, float)) else list(value)
    if not values:  # an empty Feature, which TensorFlow parses as an empty list of any type
        return []
    if all(isinstance(v, (bytes, str)) for v in values):
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


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """Serializes `features` exactly as `tf.train.Example(...).SerializeToString()` would
    parse them: bytes/str become a BytesList, ints an Int64List, floats a FloatList. An
    empty list becomes an empty Feature (no list set), which parses as an empty list of
    whatever dtype the reader asks for.

    Lengths are computed first and the parts joined once, so an image's bytes are copied
    once, not once per level of nesting.
    """
    entries, size = [], 0
    for name in sorted(features):
        key = _keys.get(name) or _key(name)
        feature = _feature(features[name])
        length = sum(map(len, feature))
        value = _header(2, length)
        length += len(key) + len(value)
        entry = _header(1, length)
        entries += [entry, key, value, *feature]
        size += len(entry) + length
    return b"".join([_header(1, size), *entries])


_keys: dict[str, bytes] = {}  # feature name -> its encoded key field; names repeat


def _key(name: str) -> bytes:
    key = name.encode()
    _keys[name] = _header(1, len(key)) + key
    return _keys[name]

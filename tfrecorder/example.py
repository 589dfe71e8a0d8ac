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


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64s are ten-byte two's complement varints
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def _feature(value: FeatureValue) -> bytes:
    values = [value] if isinstance(value, (bytes, str, int, float)) else list(value)
    if all(isinstance(v, (bytes, str)) for v in values):
        items = (v.encode() if isinstance(v, str) else v for v in values)
        return _field(_BYTES_LIST, b"".join(_field(1, v) for v in items))
    if all(isinstance(v, int) for v in values):
        packed = b"".join(_varint(int(v)) for v in values)
        return _field(_INT64_LIST, _field(1, packed) if values else b"")
    if all(isinstance(v, (int, float)) for v in values):
        packed = struct.pack(f"<{len(values)}f", *values)
        return _field(_FLOAT_LIST, _field(1, packed))
    raise TypeError(f"cannot store {values!r} in a tf.train.Example feature")


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """Serializes `features` exactly as `tf.train.Example(...).SerializeToString()` would
    parse them: bytes/str become a BytesList, ints an Int64List, floats a FloatList."""
    entries = b"".join(
        _field(1, _field(1, name.encode()) + _field(2, _feature(features[name])))
        for name in sorted(features)
    )
    return _field(1, entries)

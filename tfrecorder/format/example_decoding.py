"""`tf.train.Example` parsing without TensorFlow: the inverse of `example`'s encoder.

Readers that look at a few records (`show`, `report`) or hand records to PyTorch and Grain
(`reader`) parse them here, because importing TensorFlow alone takes seconds. It reads
what protobuf reads: values packed or not, fields in any order, unknown fields, a
repeated key. Apart from `example` because the writer's workers never parse a record,
and a reader never encodes one; the two share only the field numbers of the format.
"""

from __future__ import annotations

import struct

from tfrecorder.format.example import BYTES_LIST, FLOAT_LIST, INT64_LIST, LENGTH_DELIMITED

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
            if number == 1 and wire == LENGTH_DELIMITED:  # Example.features
                for number, wire, entry_start, entry_end in _fields(data, start, end):
                    if number == 1 and wire == LENGTH_DELIMITED:  # one map entry
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


def decode_sequence_example(serialized: bytes) -> tuple[dict[str, list], dict[str, list]]:
    """The context and feature lists of a serialized `tf.train.SequenceExample` (a video
    or audio clip's record, `media_sequence`): name -> values, as `decode_example` gives
    them, and name -> one list of values a step, as `FromString` reads them.

    Raises:
        ValueError: `serialized` is not a well-formed SequenceExample.
    """
    data = bytes(serialized)
    view = memoryview(data)
    context: dict[str, list] = {}
    lists: dict[str, list] = {}
    try:
        for number, wire, start, end in _fields(data, 0, len(data)):
            if wire != LENGTH_DELIMITED or number not in (1, 2):
                continue
            for entry, entry_wire, entry_start, entry_end in _fields(data, start, end):
                if entry != 1 or entry_wire != LENGTH_DELIMITED:
                    continue
                if number == 1:  # SequenceExample.context: a Features map entry
                    name, values = _map_entry(data, view, entry_start, entry_end)
                    context[name] = values
                else:  # SequenceExample.feature_lists: a FeatureLists map entry
                    name, steps = _list_entry(data, view, entry_start, entry_end)
                    lists[name] = steps
    except (ValueError, IndexError, struct.error) as error:
        raise ValueError(f"not a serialized tf.train.SequenceExample: {error}") from None
    return context, lists


def _list_entry(data: bytes, view: memoryview, start: int, end: int) -> tuple[str, list]:
    """One entry of the FeatureLists map: its key and each step's values."""
    name, steps = "", []
    for number, wire, field_start, field_end in _fields(data, start, end):
        if wire != LENGTH_DELIMITED:
            continue
        if number == 1:
            name = str(view[field_start:field_end], "utf-8")
        elif number == 2:  # the FeatureList: its repeated Feature, one a step
            steps += [_feature_values(data, view, (a, b)) for step, step_wire, a, b
                      in _fields(data, field_start, field_end)
                      if step == 1 and step_wire == LENGTH_DELIMITED]
    return name, steps


def _map_entry(data: bytes, view: memoryview, start: int, end: int) -> tuple[str, list]:
    """One entry of the Features map: its key and its Feature's values."""
    name, parts = "", []
    for number, wire, field_start, field_end in _fields(data, start, end):
        if wire != LENGTH_DELIMITED:
            continue
        if number == 1:
            name = str(view[field_start:field_end], "utf-8")
        elif number == 2:  # the Feature (given twice, protobuf merges the two)
            parts.append((field_start, field_end))
    return name, _feature_values(data, view, *parts)


def _feature_values(data: bytes, view: memoryview, *parts: tuple[int, int]) -> list:
    """A Feature's values (from each of its serialized `parts`, as one message): its
    lists, merged as protobuf merges a oneof."""
    kind, values = None, []
    for start, end in parts:
        for kind_number, kind_wire, list_start, list_end in _fields(data, start, end):
            if kind_number in _LIST_READERS and kind_wire == LENGTH_DELIMITED:
                if kind_number != kind:
                    kind, values = kind_number, []
                values += _LIST_READERS[kind_number](data, view, list_start, list_end)
    return values


def _bytes_list(data: bytes, view: memoryview, start: int, end: int) -> list[bytes]:
    return [view[a:b].tobytes() for number, wire, a, b in _fields(data, start, end)
            if number == 1 and wire == LENGTH_DELIMITED]


def _float_list(data: bytes, view: memoryview, start: int, end: int) -> list[float]:
    values = []
    for number, wire, a, b in _fields(data, start, end):
        if number != 1:
            continue
        if wire == LENGTH_DELIMITED:  # packed, as TensorFlow writes them
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
        if wire == LENGTH_DELIMITED:  # packed, as TensorFlow writes them
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


_LIST_READERS = {BYTES_LIST: _bytes_list, FLOAT_LIST: _float_list, INT64_LIST: _int64_list}


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
        if wire == LENGTH_DELIMITED:
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

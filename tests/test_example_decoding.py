"""`example_decoding`: Examples parsed without TensorFlow read as TensorFlow reads them,
whoever wrote them."""

import struct

import pytest
import tensorflow as tf
from google.protobuf.message import DecodeError
from test_example import tf_example

from tfrecorder.format.example import encode_example
from tfrecorder.format.example_decoding import _plain_features, decode_example


def tf_values(example: tf.train.Example) -> dict[str, list]:
    """What TensorFlow reads from each feature, as plain lists."""
    found = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        found[name] = [] if kind is None else list(getattr(feature, kind).value)
    return found


def test_decodes_what_tensorflow_writes():
    example = tf_example(
        image=("bytes", [bytes(range(256)) * 4000]),  # ~1 MB, every byte value
        names=("bytes", [b"", b"a", "é".encode()]),
        label=("int64", [3]),
        ids=("int64", [0, 1, -1, -300, 2**63 - 1, -2**63, 127, 128]),
        floats=("float", [0.1, -2.5, 3.4e38, float("inf")]),
        one_float=("float", [1.5]),
        empty_list=("int64", []),
        empty=None,
        **{"clé ünicode": ("bytes", [b"x"]), "": ("int64", [7])},
    )
    decoded = decode_example(example.SerializeToString())
    assert decoded == tf_values(example)
    # TensorFlow's layout is the one read in one loop, typed empty lists and all.
    assert _plain_features(example.SerializeToString()) == decoded
    assert decoded["ids"][2:6] == [-1, -300, 2**63 - 1, -2**63]
    assert decoded["empty"] == [] and decoded["empty_list"] == []
    assert all(type(v) is bytes for v in decoded["names"])


def test_decodes_what_encode_example_writes():
    features = {"image": b"\x00\xff" * 5000, "label": [2, -5], "split": "TRAIN",
                "score": [0.25], "none": []}
    serialized = encode_example(features, {"none": "float32"})
    decoded = decode_example(serialized)
    assert decoded == tf_values(tf.train.Example.FromString(serialized))
    assert decoded == {"image": [b"\x00\xff" * 5000], "label": [2, -5],
                       "split": [b"TRAIN"], "score": [0.25], "none": []}
    # A Feature with no list set: how other writers may write an empty list.
    untyped = tf_example(none=None, n=("int64", [3])).SerializeToString()
    assert decode_example(untyped) == {"none": [], "n": [3]}


def test_decodes_unpacked_numbers_and_what_protobuf_merges():
    # Unpacked floats (wire type 5) and ints (wire type 0), as other writers produce;
    # a key given twice (the last wins); a Feature's list given in two parts (merged),
    # or two lists of different types (the last wins).
    float_list = b"\x0d" + struct.pack("<f", 1.5) + b"\x0d" + struct.pack("<f", -2.0)
    int64_list = b"\x08\x05\x08" + b"\xff" * 9 + b"\x01"  # 5, then -1 in ten bytes

    def entry(key: bytes, feature: bytes) -> bytes:
        body = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(feature)]) + feature
        return b"\x0a" + bytes([len(body)]) + body

    def feature(kind: int, payload: bytes) -> bytes:
        return bytes([kind << 3 | 2, len(payload)]) + payload

    features = (entry(b"f", feature(2, float_list))
                + entry(b"i", feature(3, int64_list))
                + entry(b"k", feature(3, b"\x08\x01"))
                + entry(b"k", feature(1, b"\x0a\x01z"))
                + entry(b"m", feature(3, b"\x0a\x01\x04") + feature(3, b"\x0a\x01\x05"))
                + entry(b"o", feature(3, b"\x0a\x01\x04") + feature(1, b"\x0a\x01z")))
    serialized = b"\x0a" + bytes([len(features)]) + features
    assert decode_example(serialized) == tf_values(tf.train.Example.FromString(serialized))
    assert decode_example(serialized) == {"f": [1.5, -2.0], "i": [5, -1], "k": [b"z"],
                                          "m": [4, 5], "o": [b"z"]}


def test_skips_unknown_fields_as_protobuf_does():
    unknown = b"\x10\x96\x01" + b"\x1d\x00\x00\x00\x00" + b"\x22\x02ab"  # fields 2, 3, 4
    serialized = unknown + encode_example({"a": 1}) + unknown
    assert decode_example(serialized) == {"a": [1]}
    assert decode_example(b"") == {}


@pytest.mark.parametrize("garbage", [
    b"\x0a\x05ab",  # a field longer than the record
    b"\x0a",  # a length that is missing
    b"\x08" + b"\xff" * 10 + b"\x01",  # a varint of eleven bytes
    b"\x0f",  # wire type 7
    b"\x00\x00",  # field number 0
    b"\x0a\x07\x0a\x05\x0a\x03\xff\xfe\xfd",  # a key that is not UTF-8
    b"\x0a\x0a\x0a\x08\x12\x06\x12\x04\x0a\x02\x00\x00"[:-1],  # truncated floats
    b"\x0a\x09\x0a\x07\x12\x05\x12\x03\x0a\x01\x00",  # packed floats of 1 byte
    b"not a protobuf at all, only text",
])
def test_rejects_garbage_with_a_value_error(garbage):
    with pytest.raises(DecodeError):  # as TensorFlow does
        tf.train.Example.FromString(garbage)
    with pytest.raises(ValueError, match="not a serialized tf.train.Example"):
        decode_example(garbage)

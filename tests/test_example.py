import pytest
import tensorflow as tf

from tfrecorder.example import encode_example


def test_tensorflow_parses_every_value_type():
    features = {
        "bytes": b"\x00\xffdata",
        "text": "héllo",
        "int": 7,
        "negative": -3,
        "big": 2**62,
        "float": 0.5,
        "ints": [1, -2, 300],
        "floats": [1.5, -2.25],
        "strings": [b"a", "b"],
    }
    parsed = tf.train.Example.FromString(encode_example(features)).features.feature
    assert parsed["bytes"].bytes_list.value == [b"\x00\xffdata"]
    assert parsed["text"].bytes_list.value == ["héllo".encode()]
    assert parsed["int"].int64_list.value == [7]
    assert parsed["negative"].int64_list.value == [-3]
    assert parsed["big"].int64_list.value == [2**62]
    assert parsed["float"].float_list.value == [0.5]
    assert parsed["ints"].int64_list.value == [1, -2, 300]
    assert parsed["floats"].float_list.value == [1.5, -2.25]
    assert parsed["strings"].bytes_list.value == [b"a", b"b"]


def test_same_as_tensorflow_serialization_when_parsed():
    features = {"image": b"x" * 1000, "label": 3, "split": "TRAIN"}
    ours = tf.train.Example.FromString(encode_example(features))
    theirs = tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x" * 1000])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[3])),
        "split": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"TRAIN"])),
    }))
    assert ours == theirs


def test_bytes_do_not_depend_on_key_order():
    assert encode_example({"a": 1, "b": b"x"}) == encode_example({"b": b"x", "a": 1})


def test_rejects_values_tf_example_cannot_hold():
    with pytest.raises(TypeError, match="cannot store"):
        encode_example({"mixed": [1, b"x"]})

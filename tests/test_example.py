import pytest
import tensorflow as tf

from tfrecorder.format.example import encode_example, encode_examples


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


@pytest.mark.parametrize("values, kind", [
    ([0.1, 0.2, 0.6, 0.3], "float"), ([3, 1, 2], "int64"), ([1, 2.5], "float"),
    ([0.5, True], "float"), ([True, 2, -7, 2**40], "int64"), ([2.0, 3], "float"),
    ([-1.5, 1e30, 0.0], "float"),
])
def test_lists_of_numbers_are_the_bytes_tensorflow_writes(values, kind):
    """Lists of numbers are packed in one pass (`example._numbers`); the kind is the one
    the item-by-item rules give: ints only -> int64, any float -> float."""
    theirs = tf_example(x=(kind, values)).SerializeToString()
    assert encode_example({"x": values}) == theirs


@pytest.mark.parametrize("dtype, kind", [("float32", "float"), ("int64", "int64"),
                                         ("string", "bytes")])
def test_an_empty_list_is_the_typed_empty_list_tensorflow_writes(dtype, kind):
    """TensorFlow's encoder writes `float_list {}`; a Feature with no list set parses in
    TensorFlow too, but crashes readers that ask which list it holds (PyPI `tfrecord`)."""
    theirs = tf_example(x=(kind, [])).SerializeToString()
    assert encode_example({"x": []}, {"x": dtype}) == theirs
    assert tf.train.Example.FromString(theirs).features.feature["x"].WhichOneof("kind") == \
        f"{kind}_list"
    columnar = encode_examples({"x": [[], []]}, {"x": dtype}).to_pylist()
    assert columnar == [theirs, theirs]


def test_an_empty_list_without_its_dtype_is_an_error_naming_the_feature():
    with pytest.raises(TypeError, match="feature 'boxes' is an empty list"):
        encode_example({"boxes": [], "n": 1})
    with pytest.raises(TypeError, match="feature 'boxes' is an empty list"):
        encode_examples({"boxes": [[1.0], []]})


def test_rejects_values_tf_example_cannot_hold():
    for mixed in ([1, b"x"], [0.5, "a"], [1.5, None], [2, [3]]):
        with pytest.raises(TypeError, match="cannot store"):
            encode_example({"mixed": mixed})


def tf_example(**features) -> tf.train.Example:
    """An Example built by TensorFlow: each value a (kind, values) pair, or None for an
    empty Feature."""
    lists = {"bytes": tf.train.BytesList, "float": tf.train.FloatList,
             "int64": tf.train.Int64List}
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature() if value is None else
        tf.train.Feature(**{f"{value[0]}_list": lists[value[0]](value=value[1])})
        for name, value in features.items()}))


def test_a_column_at_a_time_writes_the_bytes_of_row_by_row():
    """`encode_examples` (the column-at-a-time path) against the row encoder, which is the
    reference, and TensorFlow's parser: every kind of value, absent ones, float32 edges."""
    import math

    rows = 300
    columns = {
        "key": [f"customer-{i} \u00e9" for i in range(rows)],
        "spend": [(i * 0.37) % 3 - 1.5 for i in range(rows)],
        "edges": [[1e300, -0.0, 1e-45, math.inf][i % 4] if i % 5 else math.nan
                  for i in range(rows)],
        "visits": [i * 7919 % 1000 for i in range(rows)],
        "negative": [-(i ** 5) for i in range(rows)],
        "label": [i % 3 if i % 7 else None for i in range(rows)],
        "split": [("TRAIN", "TEST")[i % 2] for i in range(rows)],
        "box": [[i / rows, 0.5, 1.0, 2.0] for i in range(rows)],
        "tags": [[b"a", b"b"][: i % 3] for i in range(rows)],
        "flag": [bool(i % 2) for i in range(rows)],
        "constant": ["TRAIN"] * rows,
        "seven": [7] * rows,
        "zeros": [-0.0 if i % 2 else 0.0 for i in range(rows)],  # equal, not the same bits
    }
    spread = [{name: values[i] for name, values in columns.items() if values[i] is not None}
              for i in range(rows)]
    expected = []
    for features in spread:
        try:
            expected.append(encode_example(features, {"tags": "string"}))
        except OverflowError:  # 1e300 does not fit a float32: both paths refuse it
            expected.append(None)
    ok = [i for i, record in enumerate(expected) if record is not None]
    kept = {name: [values[i] for i in ok] for name, values in columns.items()}
    assert encode_examples(kept, {"tags": "string"}).to_pylist() == [expected[i] for i in ok]
    parsed = tf.train.Example.FromString(encode_examples(kept, {"tags": "string"})[1].as_py()
                                         ).features.feature
    assert parsed["key"].bytes_list.value == [kept["key"][1].encode()]
    assert parsed["visits"].int64_list.value == [kept["visits"][1]]
    with pytest.raises(OverflowError):
        encode_examples({"x": [1.0, 1e300]})


def cells(values: list):
    import numpy as np

    found = np.empty(len(values), dtype=object)
    found[:] = values
    return found


def test_columns_as_numpy_arrays_write_the_bytes_of_python_values():
    """Workers hand `encode_examples` NumPy columns (numbers, and object arrays of
    array cells): the bytes must equal the row encoder's on the same values as Python's."""
    import numpy as np

    rows = 257
    ints = np.array([0, 1, 127, 128, 16383, 16384, -1, -(2**63), 2**63 - 1]
                    * 29, dtype=np.int64)[:rows]
    columns = {
        "spend": np.linspace(-3.5, 1e30, rows),
        "visits": ints,
        "box": cells([np.arange(i, i + 4) / 7 for i in range(rows)]),
        "small": cells([np.arange(3, dtype=np.float32) * i for i in range(rows)]),
        "grid": np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) / 9,
        "int_grid": np.arange(rows * 2, dtype=np.int64).reshape(rows, 2) - 300,
    }
    expected = [encode_example({name: values[i].tolist() for name, values in columns.items()})
                for i in range(rows)]
    assert encode_examples(columns).to_pylist() == expected
    parsed = tf.train.Example.FromString(encode_examples(columns)[7].as_py()).features.feature
    assert parsed["visits"].int64_list.value == [-(2**63)]
    assert parsed["box"].float_list.value == pytest.approx((np.arange(7, 11) / 7).tolist())


def test_arrow_text_columns_write_the_bytes_of_python_values():
    """Workers hand `encode_examples` Arrow-backed text as Arrow arrays (sliced, with
    nulls for absent values, of either offset width): the row encoder's bytes."""
    import pyarrow as pa

    texts = ["a", None, "ccc", "", "\u00e9t\u00e9", "x" * 300]
    for kind in (pa.string(), pa.large_string(), pa.binary()):
        column = pa.array(["before", *texts], kind).slice(1)
        expected = [encode_example({name: value for name, value in
                                    (("text", text), ("n", n)) if value is not None})
                    for n, text in enumerate(texts)]
        assert encode_examples({"text": column, "n": list(range(len(texts)))}
                               ).to_pylist() == expected

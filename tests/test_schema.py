"""Flexible schemas: typed input columns, `schema=`, multi-label rows, tables without images.

Records are read back here with TensorFlow's own `tf.train.Example` parser, independently
of tfrecorder's reader, and compared with the source table.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import shard_bytes, write_image
from test_column_values import cells_of

import tfrecorder
from tfrecorder import SchemaError
from tfrecorder.errors import VALUE, Option
from tfrecorder.sources import load_table


def records(output_dir) -> dict[str, dict]:
    """Every record of every split, by image URI (or by `key` column): feature -> values."""
    import tensorflow as tf

    manifest = json.loads(Path(output_dir, "dataset.json").read_text())
    found = {}
    for split in manifest["splits"].values():
        for shard in split["shards"]:
            for record in tf.data.TFRecordDataset(str(Path(output_dir, shard["file"]))):
                example = tf.train.Example.FromString(record.numpy())
                features = {}
                for name, feature in example.features.feature.items():
                    kind = feature.WhichOneof("kind")
                    features[name] = list(getattr(feature, kind).value) if kind else []
                key = features.get("image_uri", features.get("key"))[0]
                found[key.decode() if isinstance(key, bytes) else key] = features
    return found


@pytest.fixture
def images(tmp_path) -> list[str]:
    return [write_image(tmp_path / "img" / f"{i}.jpg", size=(20 + i, 16), seed=i)
            for i in range(6)]


@pytest.fixture
def every_type(images) -> pd.DataFrame:
    """Six rows with a column of every kind."""
    return pd.DataFrame({
        "split": ["TRAIN", "TRAIN", "TRAIN", "VALIDATION", "TEST", "TRAIN"],
        "image_uri": images,
        "label": ["cat", "dog", "cat", "bird", "dog", "cat"],
        "count": [3, 0, -2, 7, 2**40, 1],
        "ratio": [0.5, 1.25, -3.0, 1e-3, 2.0, 0.1],
        "caption": ["a cat", "", "ünïcode", "x", "y", "z"],
        "seen": [True, False, True, True, False, False],
        "nullable": pd.array([1, 2, 3, 4, 5, 6], dtype="Int64"),
        "tags": [["a", "b"], [], ["c"], ["a"], ["b", "c", "a"], []],
        "scores": [[0.5], [1.0, 2.0], [], [3.5], [0.25, 0.75], [1.0]],
        "boxes": [[[0.1, 0.2, 0.3, 0.4]], [], [[0, 0, 1, 1], [0.5, 0.5, 1, 1]],
                  [[0.2, 0.2, 0.4, 0.4]], [], [[0.0, 0.1, 0.2, 0.3]]],
        "color": pd.Categorical(["red", "blue", "red", "green", "red", "blue"],
                                categories=["red", "green", "blue"]),
    })


def test_every_column_passes_through_typed_by_its_dtype(every_type, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(every_type, out, progress=False)
    manifest = json.loads((out / "dataset.json").read_text())
    kinds = {name: (f["dtype"], f["shape"], f["role"]) for name, f in manifest["features"].items()
             if f["role"] == "input"}
    assert kinds == {
        "count": ("int64", [], "input"), "ratio": ("float32", [], "input"),
        "caption": ("string", [], "input"), "seen": ("int64", [], "input"),
        "nullable": ("int64", [], "input"), "tags": ("string", [None], "input"),
        "scores": ("float32", [None], "input"), "boxes": ("float32", [None, 4], "input"),
        "color": ("int64", [], "input"),
    }
    # a pandas categorical keeps its categories' order as the vocabulary
    assert manifest["features"]["color"]["vocabulary"] == ["red", "green", "blue"]
    assert {f["role"] for f in manifest["features"].values()} == {"image", "label", "split",
                                                                  "input"}

    found = records(out)
    assert len(found) == len(every_type)
    for row in every_type.to_dict("records"):
        record = found[row["image_uri"]]
        assert record["count"] == [row["count"]]
        assert record["ratio"] == [pytest.approx(np.float32(row["ratio"]), abs=0)]
        assert record["caption"] == [row["caption"].encode()]
        assert record["seen"] == [int(row["seen"])]
        assert record["nullable"] == [row["nullable"]]
        assert record["tags"] == [t.encode() for t in row["tags"]]
        assert record["scores"] == [np.float32(s) for s in row["scores"]]
        assert record["boxes"] == [np.float32(v) for box in row["boxes"] for v in box]
        assert record["color"] == [["red", "green", "blue"].index(row["color"])]
        assert record["split"] == [row["split"].encode()]
        assert record["label"] == [["bird", "cat", "dog"].index(row["label"])]
        assert record["image_height"] == [16]


def test_schema_uses_tfrecorders_type_names(images, tmp_path):
    table = pd.DataFrame({
        "set": ["TRAIN"] * 3 + ["TEST"] * 3,
        "path": images,
        "class_id": [3, 1, 3, 2, 1, 1],
        "zip": ["02139", "10001", "02139", "94105", "60601", "02139"],
        "city": ["b", "a", "b", "c", "a", "a"],
        "weight": [1, 2, 3, 4, 5, 6],
        "id_as_text": [10, 11, 12, 13, 14, 15],
        "notes": ["x"] * 6,
        "junk": [object()] * 6,
    })

    class FloatInput:  # TFRecorder's types were classes: their names are accepted
        pass

    out = tmp_path / "out"
    tfrecorder.convert(table, out, progress=False, schema={
        "set": "SplitKey", "path": "ImageUri", "class_id": "StringLabel",
        "zip": "StringInput", "city": "CategoricalInput", "weight": FloatInput,
        "id_as_text": "string_input", "notes": None, "junk": "drop"})
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["labels"]["vocabulary"] == ["1", "2", "3"]  # integers, named as text
    assert manifest["features"]["city"]["vocabulary"] == ["a", "b", "c"]
    assert set(manifest["features"]) >= {"zip", "city", "weight", "id_as_text"}
    assert not {"notes", "junk", "set", "path", "class_id"} & set(manifest["features"])
    assert manifest["splits"]["train"]["num_records"] == 3
    found = records(out)
    first = found[images[0]]
    assert first["zip"] == [b"02139"]  # not read as the number 2139
    assert first["weight"] == [1.0] and first["id_as_text"] == [b"10"]
    assert first["label"] == [2] and first["city"] == [1]


def test_csv_columns_under_a_header_are_typed_from_their_text(images, tmp_path):
    csv = tmp_path / "table.csv"
    csv.write_text("split,image_uri,label,count,ratio,name,zip\n" + "".join(
        f"TRAIN,{uri},cat,{i},{i / 2},n{i},0{i}000\n" for i, uri in enumerate(images)))
    table = load_table(csv, schema={"zip": "StringInput"})
    kinds = {c.name: c.kind for c in table.inputs}
    assert kinds == {"count": "int64", "ratio": "float32", "name": "string", "zip": "string"}
    assert table.rows["count"].tolist() == list(range(6))
    assert table.rows["zip"].tolist()[1] == "01000"


@pytest.mark.parametrize("cells,kind", [
    ([np.array([np.nan, 1.0]), np.array([2.0, 3.0])], "float32"),
    ([np.array([np.nan]), np.array([], dtype=np.float32), np.array([0.5])], "float32"),
    ([np.array([np.nan, np.nan]), np.array([np.nan])], "string"),  # NaN says nothing
    ([np.array([1, 2]), np.array([3], dtype=np.uint8)], "int64"),
    ([np.array([True, False])], "int64"),
    ([np.array([], dtype=np.int64)] * 2, "string"),
    ([np.array([1, 2]), np.array([0.5, 1.0])], "float32"),
    ([np.array(["a", "b"])], "string"),
])
def test_a_column_of_arrays_is_typed_as_its_values_say(cells, kind):
    """Arrays are typed by their dtypes, as their values one by one would type them."""
    from tfrecorder.sources import schema

    assert schema._element_kind(cells_of(cells)) == kind
    values = [v.tolist() for v in cells]  # the same numbers as Python's: the slow path
    assert schema._element_kind(cells_of(values)) == kind


@pytest.mark.parametrize("frame,schema,message", [
    ({"image_uri": ["/a.jpg"], "x": [1]}, {"x": "FancyInput"},
     r"column 'x' the unknown type 'FancyInput'. Use one of SplitKey, ImageUri"),
    ({"image_uri": ["/a.jpg"], "split": ["TRAIN"], "fold": ["TEST"]}, {"fold": "SplitKey"},
     r"2 SplitKey columns: \['split', 'fold'\]"),
    ({"image_uri": ["/a.jpg"], "path": ["/b.jpg"]}, {"path": "ImageUri"},
     r"2 ImageUri columns"),
    ({"image_uri": ["/a.jpg"]}, {"label": "StringLabel"},
     r"schema names columns the table does not have: \['label'\]"),
    ({"image_uri": ["/a.jpg", "/b.jpg"], "age": [1.0, float("nan")]}, None,
     r"column 'age' has missing values .* at row 1\. .*fill_missing=\{'age': value\}"),
    ({"image_uri": ["/a.jpg", "/b.jpg"], "n": ["1", "two"]}, {"n": "IntegerInput"},
     r"column 'n' is IntegerInput, but holds values that are not 64-bit integers at row 1 "
     r"\(e\.g\. 'two'\)"),
    ({"image_uri": ["/a.jpg", "/b.jpg"], "v": [[1.0], 2.0]}, None,
     r"column 'v' mixes lists \(row 0\) and single values \(row 1\)"),
    ({"image_uri": ["/a.jpg"], "image_width": [3]}, None,
     r"column 'image_width' would replace a feature tfrecorder writes"),
    ({"image_uri": ["/a.jpg"], "when": pd.to_datetime(["2024-01-01"])}, None,
     r"column 'when' has dtype datetime64.*schema=\{'when': None\}"),
    ({"image_uri": ["/a.jpg"], "x": [1]}, {"label": None, "x": "IntegerLabel"},
     r"schema names columns the table does not have: \['label'\]"),
    ({"image_uri": ["/a.jpg", "/b.jpg"], "label": ["cat", "dog"]}, {"label": "IntegerLabel"},
     r"column 'label' is IntegerLabel but holds text at rows 0, 1"),
    ({"image_uri": ["/a.jpg"], "big": [1e39]}, {"big": "FloatInput"},
     r"column 'big' is FloatInput, but holds values that are not 32-bit floats"),
    ({"image_uri": ["/a.jpg", "/b.jpg"], "label": [[0, -1], [2]]}, None,
     r"column 'label' has negative class ids at row 0"),
    ({"image_uri": ["/a.jpg"], "b": [[[1, 2], [3]]]}, None,
     r"column 'b' holds lists of lists of different lengths"),
])
def test_schema_mistakes_are_named_before_any_work(frame, schema, message, tmp_path):
    with pytest.raises(SchemaError, match=message):
        tfrecorder.convert(pd.DataFrame(frame), tmp_path / "out", schema=schema,
                           progress=False)
    assert not (tmp_path / "out").exists()


def with_images(**columns) -> pd.DataFrame:
    return pd.DataFrame({"image_uri": [f"/{i}.jpg" for i in range(3)], **columns})


# A bad table, its schema, and the data its error carries: (column, rows, option, fix).
@pytest.mark.parametrize("table,schema,data", [
    pytest.param(with_images(age=[1.0, np.nan, np.nan]), None,
                 ("age", [1, 2], None, (Option("fill_missing", {"age": VALUE}),)),
                 id="missing values in an input"),
    pytest.param(with_images(x=[1, 2, 3]), {"x": "Strng"},
                 ("x", None, "schema", (Option("schema", {"x": None}),)), id="unknown type"),
    pytest.param(with_images(label=list("abc"), Label=list("abc")), None,
                 (None, None, None, (Option("schema", {"Label": None}),
                                     Option("schema", {"Label": "StringInput"}))),
                 id="two columns for one role"),
    pytest.param(with_images(x=[1, 2, 3]), {"nope": None, "x": "IntegerInput"},
                 ("nope", None, "schema", ()), id="schema names a column the table lacks"),
    pytest.param(with_images(s=["TRAIN"] * 3, t=["TEST"] * 3, u=[""] * 3),
                 {"s": "SplitKey", "t": "SplitKey", "u": "SplitKey"},
                 (None, None, None, (Option("schema", {"t": None, "u": None}),)),
                 id="three split columns"),
    pytest.param(with_images(when=pd.to_datetime(["2024-01-01"] * 3)), None,
                 ("when", None, None, (Option("schema", {"when": None}),)), id="a dtype"),
    pytest.param(with_images(big=[1.0, 1e39, 2.0]), {"big": "FloatInput"},
                 ("big", [1], None, (Option("schema", {"big": "StringInput"}),)),
                 id="numbers too large"),
    pytest.param(with_images(v=[[1.0], 2.0, [3.0]]), None, ("v", [1], None, ()),
                 id="lists and single values: the fewer"),
    pytest.param(pd.DataFrame([["/a.jpg", 1, 2]], columns=["image_uri", "tag", "tag"]), None,
                 ("tag", None, None, (Option("schema", {"tag": "StringLabel",
                                                        "tag_2": "StringLabel"}),)),
                 id="two columns of one name"),
])
def test_errors_carry_the_column_rows_and_options_at_fault(table, schema, data):
    with pytest.raises(SchemaError) as caught:
        load_table(table, schema=schema)
    error = caught.value
    assert (error.column, error.rows, error.option, error.fix) == data
    assert all(str(option) in str(error) for option in data[3])


def test_missing_values_can_be_filled(images, tmp_path):
    table = pd.DataFrame({"image_uri": images[:3], "age": [1.0, np.nan, 3.0],
                          "name": ["a", None, "c"], "tags": [["x"], None, []]})
    with pytest.raises(SchemaError, match="fill_missing names columns that are not inputs"):
        load_table(table, fill_missing={"agee": 0})
    out = tmp_path / "out"
    tfrecorder.convert(table, out, fill_missing={"age": -1, "name": "", "tags": []},
                       progress=False)
    filled = records(out)[images[1]]
    assert (filled["age"], filled["name"], filled["tags"]) == ([-1.0], [b""], [])
    out = tmp_path / "one_value"
    tfrecorder.convert(table[["image_uri", "age"]], out, fill_missing=0, progress=False)
    assert records(out)[images[1]]["age"] == [0.0]


def test_multi_label_rows_store_lists_of_ids(images, tmp_path):
    lists = pd.DataFrame({"image_uri": images[:4],
                          "label": [["cat", "dog"], ["dog"], [], ("bird", "cat")]})
    columns = pd.DataFrame({"image_uri": images[:4], "label": ["cat", "dog", None, "bird"],
                            "label_2": ["dog", "", None, "cat"]})
    for name, table, schema in [("lists", lists, None),
                                ("columns", columns, {"label_2": "StringLabel"})]:
        out = tmp_path / name
        tfrecorder.convert(table, out, schema=schema, progress=False)
        manifest = json.loads((out / "dataset.json").read_text())
        assert manifest["labels"] == {"type": "text", "vocabulary": ["bird", "cat", "dog"],
                                      "multi_label": True, "num_classes": 3}
        assert manifest["features"]["label"] == {"dtype": "int64", "shape": [None],
                                                 "role": "label"}
        found = records(out)
        assert [found[uri]["label"] for uri in images[:4]] == [[1, 2], [2], [], [0, 1]]


def test_integer_multi_labels_count_their_classes(images, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(pd.DataFrame({"image_uri": images[:3], "label": [[0, 4], [1], []]}),
                       out, progress=False)
    labels = json.loads((out / "dataset.json").read_text())["labels"]
    assert labels == {"type": "integer", "vocabulary": None, "multi_label": True,
                      "num_classes": 5}
    assert records(out)[images[0]]["label"] == [0, 4]


def structured(n=40) -> pd.DataFrame:
    rng = np.random.RandomState(0)
    return pd.DataFrame({"key": [f"row-{i}" for i in range(n)],
                         "x": rng.randn(n), "y": rng.randint(0, 5, n),
                         "label": rng.choice(["yes", "no"], n)})


def test_a_table_without_images_converts(tmp_path):
    table = structured()
    out = tmp_path / "out"
    result = tfrecorder.convert(table, out, progress=False)
    assert result.num_records == len(table) and result.num_rejected == 0
    manifest = json.loads((out / "dataset.json").read_text())
    assert set(manifest["features"]) == {"key", "x", "y", "label", "split"}
    found = records(out)
    for row in table.to_dict("records"):
        record = found[row["key"]]
        assert record["x"] == [np.float32(row["x"])] and record["y"] == [row["y"]]
        assert record["label"] == [["no", "yes"].index(row["label"])]
    # splits come from a stable hash of each row's values: the same on every run
    again = tmp_path / "again"
    tfrecorder.convert(table, again, progress=False)
    assert shard_bytes(out) == shard_bytes(again)
    assert set(result.counts) == {"train", "validation", "test"}


def test_both_engines_write_the_same_bytes_for_any_schema(every_type, tmp_path):
    multi = every_type.assign(label=[["cat"], ["dog", "cat"], [], ["bird"], ["dog"], ["cat"]])
    for name, table in [("every_type", multi), ("no_images", structured(30))]:
        local, beam = tmp_path / f"{name}_local", tmp_path / f"{name}_beam"
        tfrecorder.convert(table, local, progress=False, num_shards=2)
        tfrecorder.convert(table, beam, progress=False, num_shards=2, runner="DirectRunner")
        assert shard_bytes(local) == shard_bytes(beam)
        manifests = [json.loads((out / "dataset.json").read_text()) for out in (local, beam)]
        assert manifests[0]["features"] == manifests[1]["features"]


def test_a_dataflow_job_for_a_table_without_images(gcs_bucket):
    """Nothing to upload first: the checks on image paths do not apply."""
    result = tfrecorder.convert(
        structured(), f"gs://{gcs_bucket}/structured/out", runner="DataflowRunner",
        project="my-project", region="us-central1", num_shards=2,
        temp_location=f"gs://{gcs_bucket}/structured/tmp", beam_options={"dry_run": True},
        progress=False)
    assert result.pipeline.job.proto_pipeline.ByteSize() > 0 and result.counts == {}


def test_a_csv_of_structured_data_is_read_by_its_header(tmp_path):
    csv = tmp_path / "churn.csv"
    csv.write_text("customer,tenure,plan,label\nc1,12,basic,no\nc2,3,pro,yes\nc3,,pro,no\n")
    table = load_table(csv, fill_missing={"tenure": 0}, schema={"plan": "CategoricalInput"})
    assert not table.has_images and table.rows["label"].tolist() == ["no", "yes", "no"]
    assert table.rows["tenure"].tolist() == [12, 3, 0]
    with pytest.raises(SchemaError, match=r"column 'tenure' has missing values .* at line 4"):
        load_table(csv)  # the CSV's line number

"""TFRecorder 2.0's code runs: its README, notebook and test cases, as users call the API.

2.0's test data is rebuilt here: a `data.csv` of TRAIN/VALIDATION/TEST rows over six
JPEGs (cats and goats). Every 2.0 spelling runs with a DeprecationWarning that names ours;
each deliberate difference has a test that shows the new behaviour.
"""

import csv
import glob
import importlib
import os
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from helpers import pixels, read_manifest, read_split, run_cli, write_image

import tfrecorder
from tfrecorder.errors import OptionError, SchemaError

ROWS = [("TRAIN", "cat", 0), ("TRAIN", "goat", 1), ("TRAIN", "goat", 2),
        ("VALIDATION", "cat", 3), ("TEST", "goat", 4), ("TEST", "cat", 5)]


@pytest.fixture
def data_csv(tmp_path) -> str:
    """2.0's test_data/data.csv, with images of our own (absolute paths, as 2.0's were)."""
    path = tmp_path / "data.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["split", "image_uri", "label"])
        for split, label, seed in ROWS:
            image = write_image(tmp_path / "images" / f"{label}-{seed}.jpg",
                                size=(32 + seed, 24), seed=seed)
            writer.writerow([split, image, label])
    return str(path)


def deprecated(match: str):
    return pytest.warns(DeprecationWarning, match=match)


def assert_written_as_sources(out, table: pd.DataFrame):
    """Every record's pixels are its source image's; counts per split are the table's."""
    sources = dict(zip(table["image_uri"], table["split"]))
    total = 0
    for split in ("train", "validation", "test"):
        records = read_split(out, split)
        assert len(records) == sum(s == split.upper() for s in sources.values())
        for record in records:
            assert np.array_equal(record["pixels"], pixels(record["image_uri"].decode()))
        total += len(records)
    assert total == len(sources)


def test_readme_create_tfrecords_with_the_accessor_and_the_function(data_csv, tmp_path):
    df = pd.read_csv(data_csv)
    with deprecated("dataflow_options= is TFRecorder 2.0's spelling; use beam_options="):
        result = df.tensorflow.to_tfr(output_dir=str(tmp_path / "a"), runner="DirectRunner",
                                      dataflow_options={"direct_num_workers": 1},
                                      job_label="my-job", num_shards=0, progress=False)
    # 2.0's result dict: job_id names the runner, metrics, tfrecord_dir
    assert (result["job_id"], result["tfrecord_dir"]) == ("DirectRunner", str(tmp_path / "a"))
    assert result["metrics"]["records_written"] == 6
    assert_written_as_sources(tmp_path / "a", df)
    with deprecated(r"create_tfrecords\(\) is TFRecorder 2.0's spelling"):
        result = tfrecorder.create_tfrecords(data_csv, output_dir=str(tmp_path / "b"),
                                             progress=False)
    assert result["job_id"] == "local" and result.num_records == 6


def test_header_and_names_are_read_as_2_0_read_them(data_csv, tmp_path, monkeypatch):
    """2.0 passed header= and names= to pandas: image paths are then relative to the
    working folder, as they were in 2.0 (and relative to the CSV without names=)."""
    table = pd.read_csv(data_csv)
    headless = tmp_path / "headless.csv"
    table.to_csv(headless, header=False, index=False)
    with deprecated("names= is TFRecorder 2.0's spelling"):
        tfrecorder.convert(str(headless), str(tmp_path / "out"), header=None,
                           names=["split", "image_uri", "label"], progress=False)
    assert_written_as_sources(tmp_path / "out", table)
    with deprecated("header='infer'"):
        tfrecorder.convert(data_csv, str(tmp_path / "infer"), header="infer", progress=False)
    assert read_manifest(tmp_path / "infer")["splits"]["train"]["num_records"] == 3


@pytest.mark.parametrize("name", ["table.parquet", "table.data", "folder"])
def test_names_is_refused_for_a_source_that_names_its_own_columns(data_csv, tmp_path, name):
    """2.0 read any path with pandas' read_csv; a Parquet file (by its name or its first
    bytes) or a folder is not a CSV, and names= would misread it."""
    from tfrecorder.errors import OptionError

    source = tmp_path / name
    if name == "folder":
        source.mkdir()
    else:
        pd.read_csv(data_csv).to_parquet(source)
    with pytest.raises(OptionError, match="names its own columns") as caught:
        tfrecorder.convert(str(source), str(tmp_path / "out"), progress=False,
                           names=["split", "image_uri", "label"])
    assert caught.value.option == "names" and not (tmp_path / "out").exists()


def test_types_and_input_schema_modules(data_csv, tmp_path):
    for name in ("tfrecorder.types", "tfrecorder.input_schema"):
        sys.modules.pop(name, None)
    with deprecated("tfrecorder.types is TFRecorder 2.0's"):
        from tfrecorder import types
    with deprecated("tfrecorder.input_schema is TFRecorder 2.0's"):
        input_schema = importlib.import_module("tfrecorder.input_schema")
    df = pd.read_csv(data_csv).rename(columns={"image_uri": "path", "label": "kind"})
    schema = input_schema.Schema({"split": types.SplitKey, "path": types.ImageUri,
                                  "kind": types.StringLabel})
    tfrecorder.convert(df, str(tmp_path / "schema"), schema=schema, progress=False)
    with deprecated("schema_map= is TFRecorder 2.0's spelling; use schema="):
        tfrecorder.convert(df, str(tmp_path / "schema_map"), progress=False,
                           schema_map=schema.input_schema_map)
    for out in ("schema", "schema_map"):
        assert read_manifest(tmp_path / out)["labels"]["vocabulary"] == ["cat", "goat"]
    assert input_schema.IMAGE_CSV_SCHEMA.get_input_keys() == {
        "split": 0, "image_uri": 0, "label": 0}.keys()


def test_without_output_dir_it_writes_into_tfrecords_as_2_0_did(data_csv, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    with deprecated("without output_dir"):
        result = pd.read_csv(data_csv).tensorflow.to_tfr(progress=False)
    assert result.output_dir == "./tfrecords" and (tmp_path / "tfrecords/dataset.json").exists()


def test_upper_case_splits_and_tfrecord_dir_when_loading(data_csv, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(data_csv, out, progress=False)
    with deprecated(r"tfrecord_dir= is TFRecorder 2.0's spelling; use load\(path\). Unlike "
                    r"2.0's, the elements' 'image' is the decoded image"):
        datasets = tfrecorder.load(tfrecord_dir=out)
    with deprecated("split='TRAIN' is TFRecorder 2.0's spelling; use split='train'"):
        assert len(datasets["TRAIN"]) == 3 and "TRAIN" in datasets
    with deprecated("split='TEST'"):
        assert len(tfrecorder.load(out, "TEST")) == 2
    assert "BOGUS" not in datasets
    with pytest.raises(KeyError):
        datasets["BOGUS"]
    with pytest.raises(OptionError, match=r"no 'BOGUS' split; it has \['test', 'train', "):
        tfrecorder.load(out, "BOGUS")


def test_check_tfrecords_writes_2_0s_layout(data_csv, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(data_csv, out, progress=False, image_format="raw")
    with deprecated(r"check_tfrecords\(\) is TFRecorder 2.0's spelling"):
        folder = tfrecorder.check_tfrecords(out, split="TRAIN", num_records=2,
                                            output_dir=str(tmp_path / "check"))
    assert os.path.dirname(folder) == str(tmp_path / "check")
    assert os.path.basename(folder).startswith("check-tfrecords-")
    with open(os.path.join(folder, "data.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and "image" not in rows[0] and rows[0]["split"] == "TRAIN"
    for row in rows:  # each image under its own name, saved in its extension's format
        image = os.path.join(folder, row["image_name"])
        assert np.array_equal(pixels(image), pixels(row["image_uri"])) or \
            np.abs(pixels(image).astype(int) - pixels(row["image_uri"])).mean() < 8
    assert sorted(os.listdir(folder)) == sorted(["data.csv", *(r["image_name"] for r in rows)])
    with deprecated("tfrecord_dir="):
        again = tfrecorder.inspect(tfrecord_dir=out, split="TRAIN", num_records=1,
                                   output_dir=str(tmp_path / "again"))
    assert os.listdir(again) and glob.glob(os.path.join(again, "data.csv"))


def test_dataflow_runner_in_2_0s_spelling_goes_through_our_checks():
    table = pd.DataFrame({"image_uri": ["gs://bucket/a.jpg"], "label": ["cat"]})
    with deprecated("runner='DataFlowRunner'"), \
            pytest.raises(OptionError, match="DataflowRunner needs project"):
        tfrecorder.convert(table, "gs://bucket/out", runner="DataFlowRunner")


@pytest.mark.parametrize("source", [0, [], {}, "no/such/data.csv"])
def test_a_source_that_is_no_table_is_a_value_error(source, tmp_path):
    with pytest.raises(ValueError, match="DataFrame|no such CSV file"):
        tfrecorder.convert(source, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_csv_paths_relative_to_the_working_folder_say_2_0_read_them_so(tmp_path,
                                                                       monkeypatch):
    """2.0 read a CSV's relative paths from the working folder; we read them from the
    CSV's. The error says where we looked, and that 2.0 looked elsewhere."""
    monkeypatch.chdir(tmp_path)
    for i in range(3):
        write_image(tmp_path / "images" / f"{i}.jpg", seed=i)
    (tmp_path / "csvs").mkdir()
    table = tmp_path / "csvs" / "data.csv"
    table.write_text("".join(f"TRAIN,images/{i}.jpg,cat\n" for i in range(3)))
    with pytest.raises(tfrecorder.TooManyRejectedError) as caught:
        tfrecorder.convert(str(table), str(tmp_path / "out"), progress=False)
    message = str(caught.value)
    assert str(tmp_path / "csvs") in message and "TFRecorder 2.0 read them relative to " \
        "the working directory" in message
    assert not (tmp_path / "out" / "dataset.json").exists()


def test_the_2_0_command_line(data_csv, tmp_path):
    out = tmp_path / "out"
    process = run_cli("create-tfrecords", f"--source={data_csv}", f"--output_dir={out}",
                      "--num_shards=0", "--compression=gzip")
    assert process.returncode == 0, process.stderr
    assert "use: tfrecorder convert" in process.stderr and ": 6 records" in process.stdout
    assert read_manifest(out)["compression"] == "gzip"
    process = run_cli("check-tfrecords", f"--tfrecord_dir={out}", "--split=TRAIN",
                      "--num_records=3", f"--output_dir={tmp_path / 'check'}")
    assert process.returncode == 0, process.stderr
    folder = process.stdout.strip().splitlines()[-1]
    assert folder.startswith(str(tmp_path / "check" / "check-tfrecords-"))
    assert len(os.listdir(folder)) == 4  # data.csv and three images
    look = tmp_path / "look"
    process = run_cli("inspect", out, "--split", "TRAIN", "--output-dir", look)
    assert process.returncode == 0, process.stderr
    assert len(os.listdir(look)) == 4  # records.csv and three images


def test_our_own_spellings_do_not_warn(data_csv, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out = str(tmp_path / "out")
        tfrecorder.convert(data_csv, out, progress=False)
        tfrecorder.load(out, "train")
        tfrecorder.load(out)["train"]
        tfrecorder.inspect(out, split="test", output_dir=str(tmp_path / "look"))


def test_schema_errors_are_not_hidden_by_the_translation(tmp_path):
    with pytest.raises(SchemaError):
        tfrecorder.convert(pd.DataFrame({"split": ["TRAIN"], "image_uri": [""],
                                         "label": ["cat"]}), str(tmp_path / "out"))


def test_2_0s_image_folders_and_split_names_in_num_shards(tmp_path):
    """2.0 read image_dir/<SPLIT>/<label>/<file>, with upper-case split folders."""
    for split, label, seed in ROWS:
        write_image(tmp_path / "images" / split / label / f"{seed}.jpg", seed=seed)
    with deprecated("split='TRAIN'"):
        tfrecorder.convert(str(tmp_path / "images"), str(tmp_path / "out"),
                           num_shards={"TRAIN": 2}, progress=False)
    splits = read_manifest(tmp_path / "out")["splits"]
    assert {name: split["num_records"] for name, split in splits.items()} == {
        "train": 3, "validation": 1, "test": 2}
    assert len(splits["train"]["shards"]) == 2


def test_2_0s_records_are_two_options_away(data_csv, tmp_path):
    """By default images keep their bytes and shards are not gzipped; image_format="raw"
    and compression="gzip" write what 2.0 wrote, which 2.0's own reading decodes."""
    import tensorflow as tf

    default, old_style = str(tmp_path / "default"), str(tmp_path / "old")
    tfrecorder.convert(data_csv, default, progress=False)
    tfrecorder.convert(data_csv, old_style, image_format="raw", compression="gzip",
                       progress=False)
    assert read_manifest(default)["compression"] is None
    assert all(r["image_format"] == b"jpeg" and r["image"][:2] == b"\xff\xd8"
               for r in read_split(default, "train"))
    manifest = read_manifest(old_style)
    assert manifest["compression"] == "gzip"
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "image_height": tf.io.FixedLenFeature([], tf.int64),
            "image_width": tf.io.FixedLenFeature([], tf.int64),
            "image_channels": tf.io.FixedLenFeature([], tf.int64),
            "image_name": tf.io.FixedLenFeature([], tf.string)}
    files = [os.path.join(old_style, s["file"]) for s in manifest["splits"]["train"]["shards"]]
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        example = tf.io.parse_single_example(record, spec)  # as 2.0's check.py decoded
        shape = [int(example[k]) for k in ("image_height", "image_width", "image_channels")]
        image = tf.reshape(tf.io.decode_raw(tf.io.decode_base64(example["image"]), tf.uint8),
                           shape).numpy()
        source = str(tmp_path / "images" / example["image_name"].numpy().decode())
        assert np.array_equal(image, pixels(source))


def test_the_structured_data_notebook(tmp_path):
    """2.0's samples/Convert-structured-data.ipynb, on a small table of our own."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from tfrecorder import input_schema, types
    df = pd.DataFrame({"Survived": [0, 1, 1, 0], "Pclass": [3, 1, 2, 3],
                       "Name": ["Mr. A", "Mrs. B", "Miss C", "Mr. D"],
                       "Sex": ["male", "female", "female", "male"],
                       "Age": [22.0, 38.0, 26.0, 35.0],
                       "Siblings/Spouses Aboard": [1, 1, 0, 0], "Fare": [7.25, 71.28, 7.9, 8.05]})
    df["split"] = "train"
    results = tfrecorder.convert(df, str(tmp_path / "tfrecords"), schema=input_schema.Schema({
        "Survived": types.IntegerInput, "Pclass": types.IntegerInput,
        "Name": types.StringInput, "Sex": types.StringInput, "Age": types.FloatInput,
        "Siblings/Spouses Aboard": types.IntegerInput, "Fare": types.FloatInput,
        "split": types.SplitKey}), progress=False)
    datasets = tfrecorder.load(results["tfrecord_dir"])
    (x,) = datasets["train"].take(1)
    dtypes = {k: v.dtype.name for k, v in x.items()}
    assert dtypes == {"Survived": "int64", "Pclass": "int64", "Name": "string",
                      "Sex": "string", "Age": "float32", "Siblings/Spouses Aboard": "int64",
                      "Fare": "float32", "split": "string"}
    assert sum(1 for _ in datasets["train"]) == 4


def test_warnings_point_at_the_callers_line(data_csv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "out")
    calls = [
        lambda: tfrecorder.convert(data_csv, out, progress=False, num_shards=0),
        lambda: tfrecorder.convert(data_csv, progress=False),
        lambda: tfrecorder.convert(pd.read_csv(data_csv), str(tmp_path / "names"),
                                   names=["split", "image_uri", "label"], progress=False),
        lambda: tfrecorder.load(tfrecord_dir=out),
        lambda: tfrecorder.load(out, "TRAIN"),
        lambda: tfrecorder.load(out)["TRAIN"],
        lambda: pd.read_csv(data_csv).tensorflow.to_tfr(progress=False, overwrite=True),
        lambda: tfrecorder.create_tfrecords(data_csv, out, overwrite=True, progress=False),
        lambda: tfrecorder.convert_and_load(data_csv, out, overwrite=True, progress=False,
                                            num_shards=0),
    ]
    for call in calls:
        with pytest.warns(DeprecationWarning) as caught:
            call()
        assert [w.filename for w in caught] == [__file__] * len(caught), \
            [(w.filename, str(w.message)) for w in caught]


def test_convert_and_load_as_2_0_called_it(data_csv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        datasets = tfrecorder.convert_and_load(data_csv, compression="gzip", progress=False)
        assert len(datasets["TRAIN"]) == 3
    assert (tmp_path / "tfrecords" / "dataset.json").exists()


def test_2_0s_metrics_beside_ours(data_csv, tmp_path):
    """2.0's Beam counters `rows`, `good_images`, `bad_images` (a row, an image read, an
    image that could not be): code that reads them runs, with truthful values."""
    table = pd.read_csv(data_csv)
    with open(table.loc[5, "image_uri"], "wb") as broken:
        broken.write(b"not a JPEG")
    result = tfrecorder.convert(data_csv, str(tmp_path / "out"), progress=False,
                                max_rejected=0.5)
    assert result["metrics"] == {"rows_read": 6, "records_written": 5, "rows_rejected": 1,
                                 "rows": 6, "good_images": 5, "bad_images": 1}
    table["weight"] = range(6)
    without_images = tfrecorder.convert(table.drop(columns="image_uri"),
                                        str(tmp_path / "no-images"), progress=False)
    assert without_images["metrics"] == {"rows_read": 6, "records_written": 6,
                                         "rows_rejected": 0, "rows": 6, "good_images": 0,
                                         "bad_images": 0}


def test_2_0s_schema_names_its_key_columns():
    from tfrecorder.legacy import input_schema, types

    schema = input_schema.Schema({"set": types.SplitKey, "path": types.ImageUri,
                                  "kind": types.IntegerLabel, "age": types.IntegerInput})
    assert (schema.split_key, schema.image_uri_key, schema.label_key) == ("set", "path", "kind")
    assert list(schema.get_input_keys()) == ["set", "path", "kind", "age"]
    bare = input_schema.Schema({"path": "ImageUri"})  # our type names too
    assert (bare.split_key, bare.image_uri_key, bare.label_key) == (None, "path", None)
    csv = input_schema.IMAGE_CSV_SCHEMA
    assert (csv.split_key, csv.image_uri_key, csv.label_key) == ("split", "image_uri", "label")

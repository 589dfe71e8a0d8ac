"""End to end: tables in, datasets read back with TensorFlow and compared with the sources."""

import csv
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import LABELS
from helpers import (
    TFDS_FILES,
    children,
    download,
    image_bytes,
    make_image,
    partly_labelled_csv,
    pixels,
    read_manifest,
    read_split,
    shard_and_index_names,
    shard_bytes,
    start_slow_run,
    write_image,
)

import tfrecorder
from tfrecorder import DatasetExistsError, ImageError
from tfrecorder.errors import OptionError

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def read_all(output_dir) -> list[dict]:
    return [r for split in ("train", "validation", "test") for r in read_split(output_dir, split)]


def assert_matches_sources(output_dir, table: pd.DataFrame, vocabulary=None):
    """Every row is in the dataset once, with its source's pixels and its label."""
    records = read_all(output_dir)
    manifest = read_manifest(output_dir)
    assert len(records) == len(table) == sum(
        s["num_records"] for s in manifest["splits"].values())
    by_uri = {r["image_uri"].decode(): r for r in records}
    assert len(by_uri) == len(table)
    for _, row in table.iterrows():
        record = by_uri[row["image_uri"]]
        np.testing.assert_array_equal(record["pixels"], pixels(row["image_uri"]))
        label = row["label"] if vocabulary is None else vocabulary.index(row["label"])
        assert record["label"] == label
    return records


def test_dataframe_accessor_writes_a_dataset_equal_to_its_sources(image_table, tmp_path):
    out = str(tmp_path / "out")
    result = image_table.tensorflow.to_tfrecord(output_dir=out, progress=False)
    manifest = read_manifest(out)
    assert manifest["labels"] == {"type": "text", "vocabulary": sorted(LABELS),
                                  "multi_label": False, "num_classes": len(LABELS)}
    records = assert_matches_sources(out, image_table, vocabulary=sorted(LABELS))
    given = dict(zip(image_table["image_uri"], image_table["split"].str.upper()))
    for record in records:  # given splits are kept; UNASSIGNED rows got one of the three
        split = record["split"].decode()
        assert split == given[record["image_uri"].decode()] or (
            given[record["image_uri"].decode()] == "UNASSIGNED")
    assert result["tfrecord_dir"] == result.output_dir == out
    assert result.counts == {k: v["num_records"] for k, v in manifest["splits"].items()}
    assert result.num_records == 24 and result.num_rejected == 0
    assert sorted(os.listdir(out)) == sorted(
        ["dataset.json", "rejected.csv", *TFDS_FILES] + shard_and_index_names(result.shards))
    assert result.elapsed_seconds > 0
    # TFRecorder 2.0's result was a dict: this one is a read-only mapping, with 2.0's keys.
    as_dict = dict(result)
    assert as_dict["metrics"] == result.metrics == {
        "rows_read": 24, "records_written": 24, "rows_rejected": 0,
        "rows": 24, "good_images": 24, "bad_images": 0}  # and 2.0's counters
    assert (as_dict["job_id"], as_dict["dataflow_url"]) == ("local", None)
    assert "metrics" in result and "bogus" not in result and "tfrecord_dir" in set(result.keys())
    assert list(result) == list(as_dict) and len(result) == len(as_dict)
    assert result.get("num_rejected") == 0 and result.get("bogus") is None


def test_to_tfr_is_an_alias(image_table, tmp_path):
    result = image_table.tensorflow.to_tfr(str(tmp_path / "out"), progress=False)
    assert result.num_records == 24


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_output_is_byte_identical_for_any_number_of_workers(image_table, tmp_path,
                                                            compression):
    outputs = []
    for workers in (1, 2, 3):
        out = str(tmp_path / f"out{workers}")
        tfrecorder.convert(image_table, out, num_workers=workers, num_shards=2,
                           compression=compression, progress=False)
        outputs.append(shard_bytes(out))
    assert len(outputs[0]) == 6
    assert outputs[0] == outputs[1] == outputs[2]


def test_shards_mix_rows_and_respect_num_shards(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, num_shards={"train": 3}, progress=False)
    manifest = read_manifest(out)
    train = manifest["splits"]["train"]
    assert [s["file"] for s in train["shards"]] == [
        f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert sum(s["num_records"] for s in train["shards"]) == train["num_records"]
    assert len(manifest["splits"]["test"]["shards"]) == 1
    assert_matches_sources(out, image_table, vocabulary=sorted(LABELS))


def test_shard_size_target_splits_large_splits(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, shard_size_mb=0.005, progress=False)  # ~5 kB shards
    train = read_manifest(out)["splits"]["train"]
    assert len(train["shards"]) > 1
    assert_matches_sources(out, image_table, vocabulary=sorted(LABELS))


def test_raw_and_resized_datasets_read_back(image_table, tmp_path):
    raw = str(tmp_path / "raw")
    tfrecorder.convert(image_table, raw, image_format="raw", progress=False)
    assert_matches_sources(raw, image_table, vocabulary=sorted(LABELS))
    small = str(tmp_path / "small")
    tfrecorder.convert(image_table, small, image_size=(16, 24), progress=False)
    assert {r["pixels"].shape[:2] for r in read_all(small)} == {(16, 24)}


def test_bad_images_go_to_rejected_csv_with_their_reasons(image_table, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "zero.jpg").write_bytes(b"")
    (bad / "text.jpg").write_text("hello")
    jpeg = image_bytes(make_image((300, 300)), "JPEG")
    (bad / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 3])
    (bad / "bad_header.jpg").write_bytes(jpeg[:200] + b"\x00" * 50 + jpeg[250:300])
    png = bytearray(image_bytes(make_image((64, 64)), "PNG"))
    png[len(png) // 2] ^= 0xFF
    (bad / "corrupt.png").write_bytes(bytes(png))
    bad_rows = pd.DataFrame({
        "split": "TRAIN", "label": "cat",
        "image_uri": [str(bad / n) for n in
                      ("zero.jpg", "text.jpg", "truncated.jpg", "bad_header.jpg", "corrupt.png",
                       "missing.jpg")],
    })
    table = pd.concat([image_table, bad_rows], ignore_index=True)
    out = str(tmp_path / "out")
    result = tfrecorder.convert(table, out, progress=False)

    assert result.num_rejected == 6 and result.num_records == 24
    assert_matches_sources(out, image_table, vocabulary=sorted(LABELS))
    with open(os.path.join(out, "rejected.csv")) as f:
        rejected = list(csv.DictReader(f))
    assert [r["row"] for r in rejected] == ["24", "25", "26", "27", "28", "29"]
    assert [r["image_uri"] for r in rejected] == bad_rows["image_uri"].tolist()
    assert set(rejected[0]) == {"row", "split", "image_uri", "label", "reason"}
    reasons = [r["reason"] for r in rejected]
    assert reasons[0] == "empty file (0 bytes)"
    assert reasons[1].startswith("not an image")
    assert reasons[2].startswith("corrupt or truncated image")
    assert reasons[3].startswith("corrupt or truncated image")  # a JPEG with a broken header
    assert reasons[4].startswith("corrupt or truncated image")
    assert reasons[5] == "cannot read file: no such file or directory"
    manifest = read_manifest(out)
    assert manifest["rejected"]["file"] == "rejected.csv"
    assert manifest["rejected"]["num_rows"] == 6 == sum(manifest["rejected"]["reasons"].values())
    assert "empty file (0 bytes)" in manifest["rejected"]["reasons"]
    assert manifest["splits"]["train"]["num_rejected"] == 6


def test_on_error_raise_stops_and_leaves_nothing(image_table, tmp_path):
    table = pd.concat([image_table, pd.DataFrame(
        {"split": ["TEST"], "image_uri": [str(tmp_path / "gone.jpg")], "label": ["cat"]})],
        ignore_index=True)
    out = tmp_path / "out"
    with pytest.raises(ImageError, match=r"row 24 .*gone.jpg'\): not a file \(no such file"):
        tfrecorder.convert(table, str(out), on_error="raise", num_workers=2, progress=False)
    assert not out.exists()  # found before any work


def test_an_existing_dataset_is_kept_unless_overwrite(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), num_shards=3, progress=False)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(DatasetExistsError, match="already holds a dataset.*overwrite=True"):
        tfrecorder.convert(image_table, str(out), progress=False)
    tfrecorder.convert(image_table.iloc[:6], str(out), overwrite=True, progress=False)
    assert read_manifest(out)["num_source_rows"] == 6
    assert sorted(os.listdir(out)) == sorted(
        ["dataset.json", "notes.txt", "rejected.csv", *TFDS_FILES] + shard_and_index_names(
            ["train-00000-of-00001.tfrecord", "validation-00000-of-00001.tfrecord",
             "test-00000-of-00001.tfrecord"]))


def test_leftovers_of_an_interrupted_run_are_not_taken_for_a_dataset(image_table, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "train-00000-of-00001.tfrecord.tmp-abc").write_bytes(b"partial")
    with pytest.raises(DatasetExistsError, match="incomplete dataset"):
        tfrecorder.convert(image_table, str(out), progress=False)


def test_input_errors_come_before_any_file_is_touched(image_table, tmp_path):
    out = tmp_path / "out"
    bad = image_table.assign(split=["TRAIN"] * 23 + ["PROD"])
    with pytest.raises(tfrecorder.SchemaError, match="'PROD' at row 23"):
        tfrecorder.convert(bad, str(out), progress=False)
    with pytest.raises(ValueError, match="num_shards"):
        tfrecorder.convert(image_table, str(out), num_shards=-1)
    with pytest.raises(ValueError, match="on_error"):
        tfrecorder.convert(image_table, str(out), on_error="ignore")
    assert not out.exists()
    out.write_text("a file")
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        tfrecorder.convert(image_table, str(out))


def test_csv_and_folder_sources_of_the_bundled_samples(tmp_path):
    from_csv = str(tmp_path / "csv")
    result = tfrecorder.convert(os.path.join(EXAMPLES, "images.csv"), from_csv, progress=False)
    assert result.num_records == 16 and result.num_rejected == 0
    from_folder = str(tmp_path / "folder")
    tfrecorder.convert(os.path.join(EXAMPLES, "images"), from_folder, progress=False)
    for out in (from_csv, from_folder):
        manifest = read_manifest(out)
        assert manifest["labels"]["vocabulary"] == ["cat", "coffee", "rocket", "texture"]
        for record in read_all(out):
            source = record["image_uri"].decode()
            path = source if os.path.isabs(source) else os.path.join(EXAMPLES, source)
            np.testing.assert_array_equal(record["pixels"], pixels(path))
            assert manifest["labels"]["vocabulary"][record["label"]] == \
                os.path.basename(os.path.dirname(path))


def test_a_conversion_imports_neither_tensorflow_nor_beam(tmp_path):
    """Workers fork from the driver, so this keeps them small and quick to start."""
    code = ("import sys, tfrecorder; tfrecorder.convert(sys.argv[1], sys.argv[2], num_workers=2);"
            "print('tensorflow' in sys.modules, 'apache_beam' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(EXAMPLES, "images.csv"),
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"], out.stderr
    assert read_manifest(tmp_path / "out")["num_source_rows"] == 16


SPAWN_RUN = """
import multiprocessing, sys
import tfrecorder
asked, get_context = [], multiprocessing.get_context
multiprocessing.get_context = lambda method=None: asked.append(method) or get_context(method)
sys.platform = "darwin"  # read when workers start: macOS and Windows start them by spawn
tfrecorder.convert(sys.argv[1], sys.argv[2], num_workers=2, progress=False)
print(asked)
"""


def test_workers_started_by_spawn_write_the_same_bytes(tmp_path):
    """macOS and Windows cannot fork; their workers import tfrecorder afresh."""
    source = os.path.join(EXAMPLES, "images.csv")
    out = subprocess.run([sys.executable, "-c", SPAWN_RUN, source, str(tmp_path / "spawn")],
                         capture_output=True, text=True)
    assert out.stdout.split() == ["['spawn']"], out.stderr
    tfrecorder.convert(source, str(tmp_path / "fork"), num_workers=2, progress=False)
    assert shard_bytes(tmp_path / "spawn") == shard_bytes(tmp_path / "fork")


@pytest.mark.parametrize("short_writes", [False, True])
def test_segment_files_hold_every_record_framed_however_they_are_written(tmp_path, monkeypatch,
                                                                         short_writes):
    """A worker gathers a segment's frames and writes them a MiB (or 250 records) at a
    time; the file is the frames as `framed` joins them, even when the system writes
    less than it was asked to."""
    from tfrecorder.format.tfrecord import framed
    from tfrecorder.write.engines import local

    if short_writes:  # at most 1,000 bytes a call
        monkeypatch.setattr(local, "_writev",
                            lambda fd, parts: os.write(fd, b"".join(parts)[:1000]))
    rng = np.random.default_rng(0)
    records = [rng.bytes(size) for size in rng.integers(0, 9000, 600).tolist()]
    records += [rng.bytes(700_000), b"", rng.bytes(1_500_000)]  # past a MiB in one
    path = str(tmp_path / "segment")
    with local._SegmentFile(path) as file:
        for record in records:
            file.add(record)
    with open(path, "rb") as f:
        assert f.read() == bytes(framed(records).data)
    assert file.frame_sizes == framed(records).sizes.tolist()  # for the index


def test_progress_false_prints_nothing(image_table, tmp_path, capfd):
    tfrecorder.convert(image_table, str(tmp_path / "out"), num_workers=2, progress=False)
    assert capfd.readouterr().err == ""


# --- interrupted runs, in a real subprocess --------------------------------------------

@pytest.fixture
def slow_run(tmp_path):
    """A conversion that takes a minute: 3000 decodes of one large PNG."""
    out = tmp_path / "out"
    process = start_slow_run(tmp_path, out)
    yield process, out
    process.kill()


def assert_no_dataset_left(out):
    """Not even the folder, which the run made."""
    assert not os.path.exists(out), os.listdir(out)


def test_ctrl_c_leaves_no_manifest_and_no_temporary_files(slow_run):
    process, out = slow_run
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode != 0
    assert "KeyboardInterrupt" in stderr and "No dataset was written" in stderr
    assert_no_dataset_left(out)


def test_a_killed_worker_aborts_cleanly(slow_run):
    process, out = slow_run
    workers = children(process.pid)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode != 0
    assert "ConversionAborted: a worker process died" in stderr
    assert_no_dataset_left(out)


# --- gs:// through a real local GCS emulator ---------------------------------------------

def upload_table(table: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """The same table with every image copied under the gs:// `prefix`, as label/file."""
    from gcs_emulator import upload

    uris = [upload(p, f"{prefix}/{label}/{os.path.basename(p)}")
            for p, label in zip(table["image_uri"], table["label"])]
    return table.assign(image_uri=uris)


def test_gs_images_to_a_gs_dataset(image_table, tmp_path, gcs_bucket):
    remote = upload_table(image_table, f"gs://{gcs_bucket}/convert/images")
    out = f"gs://{gcs_bucket}/convert/out"
    result = tfrecorder.convert(remote, out, num_workers=2, num_shards=2, progress=False)
    assert result.num_records == 24 and result["tfrecord_dir"] == out
    local = download(out, tmp_path / "copy")
    assert not any(".tmp-" in name for name in os.listdir(local))
    records = read_all(local)
    sources = dict(zip(remote["image_uri"], image_table["image_uri"]))
    assert sorted(r["image_uri"].decode() for r in records) == sorted(sources)
    for record in records:
        source = sources[record["image_uri"].decode()]
        np.testing.assert_array_equal(record["pixels"], pixels(source))
    with pytest.raises(DatasetExistsError):
        tfrecorder.convert(remote, out, progress=False)


def test_gs_folder_source(image_table, tmp_path, gcs_bucket):
    prefix = f"gs://{gcs_bucket}/folder/images"  # no trailing slash: found by listing
    remote = upload_table(image_table, prefix)
    tfrecorder.convert(prefix, str(tmp_path / "out"), progress=False)
    records = read_all(tmp_path / "out")
    assert read_manifest(tmp_path / "out")["labels"]["vocabulary"] == sorted(LABELS)
    labels = dict(zip(remote["image_uri"], remote["label"]))
    assert sorted(r["image_uri"].decode() for r in records) == sorted(labels)
    for record in records:
        assert sorted(LABELS)[record["label"]] == labels[record["image_uri"].decode()]


@pytest.mark.parametrize(("name", "value"), [
    ("image_size", 224), ("image_size", (224, "224")), ("max_image_side", "big"),
    ("jpeg_quality", "90"), ("validate", "no"), ("image_format", None),
    ("shard_size_mb", "big"), ("seed", "a"), ("num_shards", "x"), ("unassigned_split", 0.8),
    ("compression", "zip"), ("num_workers", 0), ("on_error", "skip"),
    ("max_rejected", "lots"), ("header", "yes"), ("overwrite", "yes"), ("resume", 1),
    ("progress", "no"), ("schema", ["x"]), ("runner", 5), ("beam_options", [1]),
    ("wait", "no"), ("tfrecorder_wheel", 5),
])
def test_a_bad_option_is_a_value_error_that_names_it(tmp_path, name, value):
    table = pd.DataFrame({"x": [1.0, 2.0], "label": ["a", "b"]})
    with pytest.raises(OptionError, match=f"^{name} must be .*, not {re.escape(repr(value))}"
                       ) as caught:
        tfrecorder.convert(table, tmp_path / "out", **{"progress": False, name: value})
    assert caught.value.option == name
    assert not (tmp_path / "out").exists()


def test_an_unknown_keyword_is_a_type_error_that_suggests_the_option(tmp_path):
    table = pd.DataFrame({"x": [1.0, 2.0], "label": ["a", "b"]})
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_shard'; did you "
                                        "mean 'num_shards'"):
        tfrecorder.convert(table, tmp_path / "out", num_shard=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'zzz'$"):
        table.tensorflow.to_tfrecord(tmp_path / "out", zzz=2)
    assert not (tmp_path / "out").exists()


def test_rejected_csv_names_a_csv_files_physical_lines_and_reads_back_whole(tmp_path):
    """A CSV source's rejected rows are named by the physical line their record starts
    on (as its errors are), past a file name quoted over two lines and a blank line; and
    a cell holding a lone carriage return is quoted, so rejected.csv holds one record a
    rejected row."""
    images = tmp_path / "images"
    images.mkdir()
    for name in ("a.jpg", "b.jpg", "two\nlines.jpg"):
        write_image(images / name, seed=len(name))
    (images / "bad.jpg").write_text("hello")
    (images / "carriage\rreturn.jpg").write_text("hello")
    source = tmp_path / "t.csv"
    source.write_text('TRAIN,images/a.jpg,cat\nTRAIN,"images/two\nlines.jpg",dog\n\n'
                      'TRAIN,images/bad.jpg,cat\nTRAIN,"images/carriage\rreturn.jpg",dog\n'
                      "TRAIN,images/b.jpg,dog\n", newline="")
    out = tmp_path / "out"
    result = tfrecorder.convert(str(source), str(out), progress=False, num_workers=1)

    assert (result.num_records, result.num_rejected) == (3, 2)
    with open(out / "rejected.csv", newline="") as f:
        rejected = list(csv.DictReader(f))
    assert [(r["line"], r["image_uri"]) for r in rejected] == [
        ("5", "images/bad.jpg"), ("6", "images/carriage\rreturn.jpg")]
    assert tfrecorder.verify(str(out)).ok


def test_unlabelled_rows_are_written_without_a_label_and_counted(tmp_path):
    """A partly labelled AutoML CSV converts: a blank label's record holds no label
    feature at all (no id a reader could train on), and the manifest counts it."""
    source = partly_labelled_csv(tmp_path)
    out = str(tmp_path / "out")
    result = tfrecorder.convert(source, out, progress=False, num_workers=1)
    assert (result.num_records, result.num_rejected) == (8, 0)
    import tensorflow as tf

    labels = {}
    for split in ("train", "validation", "test"):
        for path in tf.io.gfile.glob(os.path.join(out, f"{split}-*")):
            for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
                features = tf.train.Example.FromString(record).features.feature
                name = features["image_name"].bytes_list.value[0].decode()
                labels[name] = (list(features["label"].int64_list.value)
                                if "label" in features else None)
    assert labels == {"0.jpg": [0], "1.jpg": None, "2.jpg": [1], "3.jpg": None,
                      "4.jpg": [0], "5.jpg": [1], "6.jpg": None, "7.jpg": [1]}
    manifest = read_manifest(out)
    assert {split: s["unlabeled"] for split, s in manifest["statistics"].items()} == {
        "train": 2, "validation": 0, "test": 1}
    assert manifest["labels"]["vocabulary"] == ["cat", "dog"]
    chunked = str(tmp_path / "chunked")
    tfrecorder.convert(source, chunked, progress=False, num_workers=1, chunk_rows=3)
    assert shard_bytes(chunked) == shard_bytes(out)


def test_unlabeled_error_refuses_a_partly_labelled_csv_naming_its_lines(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(tfrecorder.SchemaError, match=r"column 'label' is blank at lines 2, 4, "
                       r"7 \(3 of 8 rows\)\. .* unlabeled='keep'"):
        tfrecorder.convert(partly_labelled_csv(tmp_path), str(out), progress=False,
                           unlabeled="error")
    assert not out.exists()


def test_stratify_is_recorded_and_gives_exact_splits(tmp_path):
    """90 UNASSIGNED rows of 3 labels: 72/9/9 with stratify, recorded in the manifest
    (a resumed run with other splits is refused); without it the manifest is as before."""
    table = pd.DataFrame({"x": np.arange(90.0), "label": ["a", "b", "c"] * 30})
    out = tmp_path / "out"
    tfrecorder.convert(table, str(out), progress=False, stratify=True)
    manifest = read_manifest(out)
    assert manifest["options"]["stratify"] is True
    assert [manifest["splits"][s]["num_records"] for s in ("train", "validation", "test")] \
        == [72, 9, 9]
    assert [manifest["statistics"]["test"]["class_counts"]] == [[3, 3, 3]]
    tfrecorder.convert(table, str(tmp_path / "hashed"), progress=False)
    assert "stratify" not in read_manifest(tmp_path / "hashed")["options"]

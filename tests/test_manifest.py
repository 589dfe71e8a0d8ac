"""The on-disk contract in `tfrecorder/format/manifest.py`: the manifest's types read and write
the file exactly, the declared features are the features records hold, and file names
are built and recognized by the same module."""

import json
from pathlib import Path

import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tfrecorder.format import manifest
from tfrecorder.format.manifest import IMAGE_FEATURES, Manifest, Split

SAMPLES = Path(__file__).parents[1] / "examples" / "images.csv"


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("manifest")
    table = pd.DataFrame({
        "split": ["TRAIN", "TEST", "UNASSIGNED"] * 4, "label": [["a", "b"], ["b"], []] * 4,
        "count": range(12), "colour": pd.Categorical(["red", "blue", "red"] * 4),
        "box": [[0.1, 0.2, 0.3, 0.4]] * 12,
    })
    found = {"samples": root / "samples", "structured": root / "structured"}
    (root / "images").symlink_to(SAMPLES.parent / "images")  # the CSV's relative paths
    (root / "images.csv").write_text(SAMPLES.read_text() + "TRAIN,images/gone.jpg,cat\n")
    tfrecorder.convert(root / "images.csv", found["samples"], progress=False,
                       compression="gzip")
    tfrecorder.convert(table, found["structured"], progress=False)
    return found


@pytest.mark.parametrize("name", ["samples", "structured"])
def test_the_manifest_type_writes_the_file_it_reads(datasets, name):
    written = (datasets[name] / "dataset.json").read_bytes()
    parsed = manifest.read_manifest(str(datasets[name]))
    assert parsed.to_bytes() == written
    assert Manifest.from_json(json.loads(written)) == parsed
    assert sum(s.num_rejected for s in parsed.splits.values()) == parsed.rejected.num_rows \
        == (name == "samples")


@pytest.mark.parametrize("name", ["samples", "structured"])
def test_records_hold_exactly_the_declared_features(datasets, name):
    """A feature added to every record in manifest.py, and only there, reaches both the
    records and the manifest; this fails if the two drift apart."""
    parsed = manifest.read_manifest(str(datasets[name]))
    compression = "GZIP" if parsed.compression else ""
    for split, shard in parsed.shards:
        path = str(datasets[name] / shard.file)
        for record in tf.data.TFRecordDataset(path, compression_type=compression):
            example = tf.train.Example.FromString(record.numpy())
            assert set(example.features.feature) == set(parsed.features)
            stored = example.features.feature["split"].bytes_list.value[0].decode()
            assert stored == Split(split).stored
    assert parsed.has_images == (name == "samples")
    if parsed.has_images:
        assert {n: parsed.features[n] for n in IMAGE_FEATURES} == IMAGE_FEATURES


def test_shard_names_are_built_and_recognized_in_one_place(tmp_path):
    names = [manifest.shard_filename(split, 1, 3, compression)
             for split in Split for compression in (None, "gzip")]
    assert names[:2] == ["train-00001-of-00003.tfrecord", "train-00001-of-00003.tfrecord.gz"]
    others = ["notes.txt", "dev-00000-of-00001.tfrecord", "train-0-of-1.tfrecord"]
    for name in names + others:
        (tmp_path / name).write_bytes(b"")
    assert sorted(manifest.dataset_files(str(tmp_path))) == sorted(names)


def test_a_manifest_without_its_parts_is_a_clear_error(tmp_path):
    (tmp_path / "dataset.json").write_text(json.dumps({"format": "tfrecorder"}))
    with pytest.raises(ValueError, match="dataset.json is not a tfrecorder manifest"):
        manifest.read_manifest(str(tmp_path))


def test_a_path_without_a_dataset_says_what_is_there(tmp_path):
    """A typo is said as such: nothing there, a file, or a folder without a manifest."""
    cases = [(tmp_path / "nothere", "'{}' does not exist: no dataset is there. Check the path"),
             (tmp_path / "table.csv", "'{}' is a file; give the dataset's folder"),
             (tmp_path, "'{}' holds no dataset.json: it is not a finished tfrecorder")]
    (tmp_path / "table.csv").write_text("a\n")
    for path, said in cases:
        with pytest.raises(FileNotFoundError) as raised:
            manifest.read_manifest(str(path))
        assert str(raised.value).startswith(said.format(path)), raised.value


def test_older_manifests_without_newer_fields_still_read():
    """Shards before the SHA-256, labels before num_classes and multi_label."""
    old = {"compression": None, "num_source_rows": 1, "options": {},
           "features": {"label": {"dtype": "int64", "shape": []}},
           "labels": {"vocabulary": ["cat"]},
           "splits": {"train": {"num_records": 1, "num_bytes": 9, "shards": [
               {"file": "train-00000-of-00001.tfrecord", "num_records": 1, "num_bytes": 9}]}},
           "rejected": {"file": "rejected.csv", "num_rows": 0}}
    parsed = Manifest.from_json(old)
    assert parsed.splits[Split.TRAIN].shards[0].sha256 == ""
    assert parsed.labels.type == "text" and parsed.labels.num_classes is None
    assert parsed.features["label"].role == ""

"""`tfrecorder.legacy`: datasets TFRecorder 2.0 wrote, and `migrate`, on a 2.0 dataset
written with TensorFlow's own writer (`legacy_dataset`)."""

import csv
import gzip
import os

import numpy as np
import pytest
from helpers import make_image
from legacy_dataset import Row, write_legacy_dataset

import tfrecorder
from tfrecorder.format.manifest import read_manifest
from tfrecorder.legacy import is_legacy_dataset, legacy_hint, migrate

# TRAIN has cat 3 times, dog and bird once each: 2.0's vocabulary is cat, dog, bird (by
# count, then reverse byte order), not the sorted bird, cat, dog.
_SPEC = [("TRAIN", "cat", "RGB"), ("TRAIN", "dog", "L"), ("TRAIN", "cat", "RGB"),
         ("TRAIN", "bird", "RGB"), ("TRAIN", "cat", "L"), ("VALIDATION", "dog", "RGB"),
         ("VALIDATION", "cat", "L"), ("TEST", "bird", "RGB")]


def _rows(spec=_SPEC) -> list[Row]:
    return [Row(split, f"img_{i}.png", make_image((20 + i, 12 + i), mode, seed=i), label)
            for i, (split, label, mode) in enumerate(spec)]


@pytest.fixture
def old(tmp_path):
    folder = tmp_path / "tfrecorder-20201005-161123-convert"
    write_legacy_dataset(folder, _rows(), num_shards={"train": 2})
    return folder


def _pixels(image) -> np.ndarray:
    array = np.asarray(image)
    return array[..., None] if array.ndim == 2 else array


def test_migrate_keeps_pixels_label_ids_and_vocabulary(old, tmp_path):
    new = tmp_path / "new"
    manifest = migrate(old, new)

    assert manifest.labels.vocabulary == ("cat", "dog", "bird")  # 2.0's order, not sorted
    assert read_manifest(str(new)).labels.vocabulary == ("cat", "dog", "bird")
    assert {str(s): info.num_records for s, info in manifest.splits.items()} == \
        {"train": 5, "validation": 2, "test": 1}
    assert [s.file for s in manifest.splits["train"].shards] == \
        ["train-00000-of-00002.tfrecord.gz", "train-00001-of-00002.tfrecord.gz"]
    assert manifest.compression == "gzip" and manifest.rejected.num_rows == 0
    report = tfrecorder.verify(new)
    assert report.num_images_decoded == 8

    sources = {row.image_name: row for row in _rows()}
    vocabulary = ["cat", "dog", "bird"]
    seen = set()
    for split, ds in tfrecorder.load(new, channels=0, shuffle=False).items():
        for record in ds:
            name = record["image_name"].numpy().decode()
            source = sources[name]
            assert split == source.split.lower()
            assert record["split"].numpy() == source.split.encode()
            assert record["label"].numpy() == vocabulary.index(source.label)
            assert record["image_format"].numpy() == b"raw"
            assert record["image_uri"].numpy() == name.encode()
            np.testing.assert_array_equal(record["image"].numpy(), _pixels(source.image))
            seen.add(name)
    assert seen == set(sources)


def test_records_2_0_could_not_read_back_are_rejected_with_reasons(tmp_path):
    # 2.0 recorded 3 channels for RGBA (4 bytes a pixel), and id -1 for a label TRAIN lacks.
    spec = [*_SPEC, ("TRAIN", "dog", "RGBA"), ("TEST", "fish", "RGB")]
    old = tmp_path / "old"
    write_legacy_dataset(old, _rows(spec))
    new = tmp_path / "new"
    manifest = migrate(old, new)

    assert manifest.num_records == 8 and manifest.num_source_rows == 10
    assert manifest.splits["train"].num_rejected == 1
    assert manifest.splits["test"].num_rejected == 1
    with open(new / "rejected.csv", newline="") as f:
        rejected = {row["image_name"]: row for row in csv.DictReader(f)}
    assert set(rejected) == {"img_8.png", "img_9.png"}
    assert "RGBA" in rejected["img_8.png"]["reason"]
    assert rejected["img_9.png"]["label"] == "-1"
    assert "vocabulary" in rejected["img_9.png"]["reason"]
    tfrecorder.verify(new)


def test_uncompressed_2_0_shards_stay_uncompressed(tmp_path):
    old = tmp_path / "old"
    write_legacy_dataset(old, _rows(), compression=None)
    manifest = migrate(old, tmp_path / "new")
    assert manifest.compression is None
    assert manifest.splits["test"].shards[0].file == "test-00000-of-00001.tfrecord"
    tfrecorder.verify(tmp_path / "new")


def test_is_legacy_dataset_and_its_hint(old, tmp_path):
    assert is_legacy_dataset(old)
    assert f"tfrecorder migrate {old} " in legacy_hint(old)
    migrate(old, tmp_path / "new")
    assert not is_legacy_dataset(tmp_path / "new")
    assert legacy_hint(tmp_path / "new") == ""
    assert not is_legacy_dataset(tmp_path / "missing")
    os.remove(old / "transformed_metadata" / "schema.pbtxt")
    assert not is_legacy_dataset(old)


def test_migrate_refuses_a_folder_holding_a_dataset_unless_overwrite(old, tmp_path):
    new = tmp_path / "new"
    migrate(old, new)
    before = (new / "dataset.json").read_bytes()
    with pytest.raises(tfrecorder.DatasetExistsError, match="overwrite"):
        migrate(old, new)
    assert (new / "dataset.json").read_bytes() == before
    migrate(old, new, overwrite=True)
    tfrecorder.verify(new)


def test_migrate_refuses_its_own_folder_and_other_folders(old, tmp_path):
    with pytest.raises(tfrecorder.TFRecorderError, match="new_dir"):
        migrate(old, old, overwrite=True)
    assert is_legacy_dataset(old) and (old / "test-00000-of-00001.tfrecord.gz").exists()
    with pytest.raises(FileNotFoundError, match="not a TFRecorder 2.0 dataset"):
        migrate(tmp_path / "new", tmp_path / "other")


def test_a_corrupt_old_shard_is_named_and_leaves_nothing(old, tmp_path):
    shard = old / "validation-00000-of-00001.tfrecord.gz"
    data = bytearray(gzip.decompress(shard.read_bytes()))
    data[40] ^= 0xFF  # inside the first record: its data checksum no longer matches
    shard.write_bytes(gzip.compress(bytes(data)))
    new = tmp_path / "new"
    with pytest.raises(tfrecorder.VerificationError,
                       match="validation-00000-of-00001.tfrecord.gz is damaged"):
        migrate(old, new)
    assert not new.exists()


def test_migrate_from_and_to_a_bucket(old, s3_store):
    prefix = f"{s3_store.root}/legacy"
    for path in sorted(old.rglob("*")):
        if path.is_file():
            s3_store.upload(path, f"{prefix}/old/{path.relative_to(old).as_posix()}")
    assert is_legacy_dataset(f"{prefix}/old")
    assert "tfrecorder migrate" in legacy_hint(f"{prefix}/old")

    manifest = migrate(f"{prefix}/old", f"{prefix}/new")

    assert manifest.labels.vocabulary == ("cat", "dog", "bird")
    assert tfrecorder.verify(f"{prefix}/new").num_images_decoded == 8


def test_readers_name_migrate_and_the_command_line_runs_it(old, tmp_path):
    """A 2.0 folder read as a dataset says what to run; `tfrecorder migrate` runs it, and
    2.0's ids survive into label_vocabulary= of a new conversion."""
    from helpers import assert_one_error_line, run_cli

    with pytest.raises(FileNotFoundError, match="tfrecorder migrate"):
        tfrecorder.load(old)
    assert_one_error_line(run_cli("info", old), "TFRecorder 2.0", "tfrecorder migrate")
    new = tmp_path / "new"
    process = run_cli("migrate", old, new)
    assert process.returncode == 0, process.stderr
    assert process.stdout.startswith(f"Wrote {new}: 8 records, 0 rows rejected")
    assert run_cli("verify", new).returncode == 0
    assert tfrecorder.inspect(str(new), split="validation", output_dir=str(tmp_path / "look"))
    assert_one_error_line(run_cli("migrate", old, new), "--overwrite")


def test_the_loading_notebook_on_a_migrated_dataset(old, tmp_path):
    """2.0's samples/Loading-a-TF-Dataset.ipynb, after `migrate`."""
    new = tmp_path / "new"
    migrate(old, new)
    datasets = tfrecorder.load(str(new))
    with pytest.warns(DeprecationWarning, match="split='TRAIN'"):
        train = datasets["TRAIN"]
    names = sorted(d["image_name"].numpy().decode() for d in train)
    assert names == [f"img_{i}.png" for i in range(5)]

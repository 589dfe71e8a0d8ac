"""inspect(): records as a CSV and image files, under names no record can subvert."""

import csv
import os
import re

import numpy as np
import pytest
from helpers import features_of, pixels, read_manifest, read_split, rewrite_split

import tfrecorder


def read_csv(folder) -> list[dict]:
    with open(os.path.join(folder, "records.csv"), newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("image_format", ["auto", "raw"])
def test_inspect_writes_the_first_records_as_a_csv_and_images(
        image_table, tmp_path, image_format):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False, image_format=image_format)
    inspected = tfrecorder.inspect(out, "train", num_records=3,
                                   output_dir=tmp_path / "inspected")
    assert inspected == str(tmp_path / "inspected")

    records = read_split(out, "train")[:3]
    rows = read_csv(inspected)
    features = [name for name in read_manifest(out)["features"] if name != "image"]
    assert list(rows[0]) == features + ["image_file"]
    assert sorted(os.listdir(inspected)) == sorted(
        ["records.csv"] + [row["image_file"] for row in rows])
    for index, (row, record) in enumerate(zip(rows, records, strict=True)):
        assert row["image_name"] == record["image_name"].decode()
        assert int(row["label"]) == record["label"]
        assert row["image_uri"] == record["image_uri"].decode()
        assert int(row["image_height"]) == record["image_height"]
        stem, extension = os.path.splitext(record["image_name"].decode())
        stored = "png" if image_format == "raw" else record["image_format"].decode()
        assert row["image_file"] == f"{index:05d}-{stem}.{'jpg' if stored == 'jpeg' else stored}"
        image_file = os.path.join(inspected, row["image_file"])
        np.testing.assert_array_equal(pixels(image_file), record["pixels"])
        if image_format == "auto":  # the stored bytes, as they are
            with open(image_file, "rb") as f:
                assert f.read() == record["image"]


def test_inspect_defaults_to_a_new_temporary_folder_and_stops_at_the_split_end(
        image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    inspected = tfrecorder.inspect(out, "test", num_records=1000)
    assert os.path.basename(inspected).startswith("tfrecorder-inspect-")
    assert len(read_csv(inspected)) == len(read_split(out, "test"))
    assert tfrecorder.inspect(out, "test") != inspected  # each call a fresh folder


def test_inspect_refuses_a_split_the_dataset_lacks(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table[image_table["split"] == "TEST"], out, progress=False)
    with pytest.raises(ValueError, match="no 'train' split"):
        tfrecorder.inspect(out, "train", output_dir=tmp_path / "inspected")


HOSTILE_NAMES = ["../../evil.jpg", "/etc/passwd", "..", "", "a/b\\c.jpg", ".bashrc",
                 "évil name;rm -rf.png", "../../evil.jpg", "x" * 300 + ".jpg"]


def test_hostile_image_names_become_safe_files_inside_the_output_folder(
        image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    manifest = read_manifest(out)
    record = read_split(out, "train")[0]
    rewrite_split(out, "train", [features_of(record, manifest, image_name=name)
                                 for name in HOSTILE_NAMES])
    inspected = tmp_path / "deep" / "inspected"
    tfrecorder.inspect(out, "train", num_records=len(HOSTILE_NAMES), output_dir=inspected)

    rows = read_csv(inspected)
    assert [row["image_name"] for row in rows] == HOSTILE_NAMES  # recorded as they are
    files = [row["image_file"] for row in rows]
    extension = ".jpg" if record["image_format"] == b"jpeg" else ".png"
    assert files[:5] == [f"00000-evil{extension}", f"00001-passwd{extension}",
                         f"00002-image{extension}", f"00003-image{extension}",
                         f"00004-c{extension}"]
    assert len(set(files)) == len(files)
    for name in files:
        assert re.fullmatch(r"\d{5}-[A-Za-z0-9_-][A-Za-z0-9._-]*", name), name
        assert len(name) < 120
    assert sorted(os.listdir(inspected)) == sorted(files + ["records.csv"])
    assert sorted(os.listdir(tmp_path)) == ["deep", "images", "out"]  # nothing escaped
    assert not os.path.exists(tmp_path / "evil.jpg")

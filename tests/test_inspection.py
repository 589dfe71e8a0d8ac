"""inspect(): records as a CSV and image files, under names no record can subvert."""

import csv
import json
import os
import re
import tempfile

import numpy as np
import pandas as pd
import pytest
from conftest import LABELS
from helpers import features_of, pixels, read_manifest, read_split, rewrite_split, write_image

import tfrecorder
from tfrecorder.errors import OptionError


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
    manifest = read_manifest(out)
    features = [name for name in manifest["features"] if name != "image"]
    vocabulary = manifest["labels"]["vocabulary"]
    assert sorted(vocabulary) == sorted(LABELS)
    features.insert(features.index("label") + 1, "label_name")
    assert list(rows[0]) == features + ["image_file"]
    assert sorted(os.listdir(inspected)) == sorted(
        ["records.csv"] + [row["image_file"] for row in rows])
    for index, (row, record) in enumerate(zip(rows, records, strict=True)):
        assert row["image_name"] == record["image_name"].decode()
        assert int(row["label"]) == record["label"]
        assert row["label_name"] == vocabulary[record["label"]]
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
        image_table, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # pytest removes them
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    inspected = tfrecorder.inspect(out, "test", num_records=1000)
    assert os.path.basename(inspected).startswith("tfrecorder-inspect-")
    assert len(read_csv(inspected)) == len(read_split(out, "test"))
    assert tfrecorder.inspect(out, "test") != inspected  # each call a fresh folder


@pytest.mark.parametrize("num_records", [-1, "3", 2.5])
def test_inspect_refuses_a_number_of_records_it_cannot_take(tmp_path, num_records):
    """Before reading anything, with the OptionError convert and load raise."""
    with pytest.raises(OptionError, match=r"^num_records must be an int of 0 or more, not "):
        tfrecorder.inspect(tmp_path / "nothere", num_records=num_records)


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


def test_nothing_is_written_through_links_planted_in_the_output_folder(
        image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    inspected = tmp_path / "inspected"
    inspected.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    first_image = tfrecorder.inspect(out, "train", num_records=1, output_dir=tmp_path / "x")
    image_file = next(n for n in os.listdir(first_image) if n != "records.csv")
    for name in ("records.csv", image_file):
        os.symlink(outside, inspected / name)

    tfrecorder.inspect(out, "train", num_records=1, output_dir=inspected)
    assert outside.read_text() == "precious"
    for name in ("records.csv", image_file):
        assert not os.path.islink(inspected / name) and os.path.isfile(inspected / name)
    assert read_csv(inspected)[0]["image_file"] == image_file


def schema_table(tmp_path, images: bool) -> pd.DataFrame:
    table = pd.DataFrame({
        "split": ["TRAIN"] * 4,
        "label": [["cat", "dog"], ["dog"], [], ["=bird"]],
        "age": [1, -2, 3, 4],
        "score": [0.1, -1.5, 2.5, 2.0],
        "boxes": [[[0.1, 0.2, 0.3, 0.4]], [], [[0, 0, 1, 1], [0.5, 0.5, 1, 1]], []],
        "classes": [["cat"], [], ["dog", "cat"], ["bird"]],
    })
    if images:
        table["image_uri"] = [write_image(tmp_path / "images" / f"s{i}.png", size=(5, 4),
                                          fmt="PNG", seed=i) for i in range(len(table))]
    return table


@pytest.mark.parametrize("images", [True, False], ids=["images", "no_images"])
def test_records_csv_holds_every_feature_with_lists_as_json_and_ids_with_names(
        tmp_path, images):
    out = str(tmp_path / "out")
    tfrecorder.convert(schema_table(tmp_path, images), out, progress=False, num_workers=1,
                       schema={"classes": "CategoricalInput"})
    inspected = tfrecorder.inspect(out, "train", num_records=4,
                                   output_dir=tmp_path / "inspected")
    rows = read_csv(inspected)
    manifest = read_manifest(out)
    assert manifest["labels"]["vocabulary"] == ["=bird", "cat", "dog"]
    assert manifest["features"]["classes"]["vocabulary"] == ["bird", "cat", "dog"]
    image_columns = ["image_format", "image_height", "image_width", "image_channels",
                     "image_name", "image_uri"] if images else []
    assert list(rows[0]) == [*image_columns, "label", "label_name", "split", "age", "score",
                             "boxes", "classes", "classes_value",
                             *(["image_file"] if images else [])]
    images_written = [row["image_file"] for row in rows] if images else []
    assert sorted(os.listdir(inspected)) == sorted(["records.csv", *images_written])

    by_age = {int(row["age"]): row for row in rows}  # records are shuffled across rows
    assert set(by_age) == {1, -2, 3, 4}
    first, second, third, fourth = (by_age[age] for age in (1, -2, 3, 4))
    assert (first["label"], first["label_name"]) == ("[1, 2]", '["cat", "dog"]')
    assert (third["label"], third["label_name"]) == ("[]", "[]")
    assert json.loads(fourth["label_name"]) == ["=bird"]  # inside JSON: no formula
    assert first["boxes"] == "[[0.1, 0.2, 0.3, 0.4]]"  # float32 by its shortest decimals
    assert third["boxes"] == "[[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.0, 1.0]]"
    assert second["boxes"] == "[]"
    assert (first["score"], second["score"]) == ("0.1", "-1.5")  # numbers are not quoted
    assert (third["classes"], third["classes_value"]) == ("[2, 1]", '["dog", "cat"]')
    assert first["split"] == "TRAIN"


def test_text_that_a_spreadsheet_would_run_as_a_formula_is_quoted(tmp_path):
    texts = ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "-3", "+4.5e2",
             "plain", "a=b", "-", "'quoted"]
    out = str(tmp_path / "out")
    table = pd.DataFrame({"split": ["TRAIN"] * len(texts), "text": texts,
                          "order": range(len(texts)), "delta": [-1.5] * len(texts),
                          "label": ["=cmd|' /C calc'!A0"] * len(texts)})
    tfrecorder.convert(table, out, progress=False, num_workers=1,
                       schema={"text": "StringInput"})
    rows = sorted(read_csv(tfrecorder.inspect(out, "train", num_records=len(texts),
                                              output_dir=tmp_path / "inspected")),
                  key=lambda row: int(row["order"]))
    assert [row["text"] for row in rows] == [
        "'=HYPERLINK(\"http://x\")", "'+1+1", "'-2+3", "'@SUM(A1)", "'\tx", "-3", "+4.5e2",
        "plain", "a=b", "'-", "'quoted"]
    assert {row["label_name"] for row in rows} == {"'=cmd|' /C calc'!A0"}
    assert {row["delta"] for row in rows} == {"-1.5"}
    assert {row["label"] for row in rows} == {"0"}


def test_a_hostile_image_name_is_quoted_in_the_csv(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    manifest = read_manifest(out)
    record = read_split(out, "train")[0]
    rewrite_split(out, "train", [features_of(record, manifest, image_name="=1+2.jpg")])
    (row,) = read_csv(tfrecorder.inspect(out, "train", output_dir=tmp_path / "inspected"))
    assert row["image_name"] == "'=1+2.jpg"
    assert row["image_file"].startswith("00000-_1_2.")

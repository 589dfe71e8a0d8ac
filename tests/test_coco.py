"""COCO files converted as Google's converters write them (issue 38): class ids from the
categories, the same in every file of one dataset; the image id as `image/source_id` and
the file_name as `image/filename`; annotations the references skip, skipped and listed
by the run. And rows a source rejects itself (`Table.rejected_rows`), which the run
lists in rejected.csv and counts against `max_rejected`, in both engines."""

from __future__ import annotations

import codecs
import dataclasses
import importlib
import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from helpers import read_manifest
from PIL import Image

import tfrecorder
from tfrecorder import TooManyRejectedError, cli
from tfrecorder.errors import ImageError, SchemaError
from tfrecorder.format.manifest import REJECTED, SKIPPED_ANNOTATIONS
from tfrecorder.sources import load_table

# Ids with gaps, in no order, one category used by no annotation (18, "dog").
CATEGORIES = [{"id": 90, "name": "toothbrush"}, {"id": 2, "name": "bicycle"},
              {"id": 18, "name": "dog"}, {"id": 3, "name": "car"}]


def coco_file(folder, images, annotations, categories=CATEGORIES, name="instances.json"):
    """A COCO file and its images (PNGs of each image's size) in `folder`."""
    os.makedirs(folder, exist_ok=True)
    for image in images:
        path = os.path.join(folder, image["file_name"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(np.full((image["height"], image["width"], 3), 30 + image["id"],
                                np.uint8)).save(path)
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations,
                   "categories": categories}, f)
    return path


def image(image_id, file_name, width=64, height=48):
    return {"id": image_id, "file_name": file_name, "width": width, "height": height}


def box(annotation_id, image_id, category_id, bbox=(4, 6, 20, 10)):
    return {"id": annotation_id, "image_id": image_id, "category_id": category_id,
            "bbox": list(bbox), "area": 200.0, "iscrowd": 0}


def examples(folder) -> list[dict]:
    """Every record's features, by key, as plain lists."""
    found = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".tfrecord"):
            for record in tf.data.TFRecordDataset(os.path.join(folder, name)):
                feature = tf.train.Example.FromString(record.numpy()).features.feature
                found.append({k: list(v.float_list.value or v.int64_list.value
                                      or v.bytes_list.value) for k, v in feature.items()})
    return found


def convert(source, out, **options):
    return tfrecorder.convert(source, str(out), progress=False, num_workers=1, **options)


# --- ids and names -------------------------------------------------------------------------

def test_train_and_val_converted_apart_give_every_class_the_same_id(tmp_path):
    """COCO ships train and val as two files; each converted alone must number the
    classes alike (they use different classes: the categories give the ids)."""
    train = coco_file(tmp_path / "train", [image(21, "a.png"), image(22, "b.png")],
                      [box(1, 21, 90), box(2, 21, 3), box(3, 22, 2)])
    val = coco_file(tmp_path / "val", [image(5, "c.png")], [box(4, 5, 90), box(5, 5, 2)])
    for layout in ("tfrecorder", "tf_models"):
        seen = {}
        for name, path in (("train", train), ("val", val)):
            out = tmp_path / f"{name}-{layout}"
            convert(path, out, split="train", layout=layout)
            labels = read_manifest(str(out))["labels"]
            # Every category, used or not, ordered by id.
            assert labels["vocabulary"] == ["bicycle", "car", "dog", "toothbrush"]
            for record in examples(out):
                if layout == "tf_models":
                    pairs = zip(record["image/object/class/text"],
                                record["image/object/class/label"])
                else:
                    pairs = ((labels["vocabulary"][i].encode(), i)
                             for i in record["objects/label"])
                for text, number in pairs:
                    assert seen.setdefault(text, number) == number
        expected = ({b"bicycle": 2, b"car": 3, b"toothbrush": 90} if layout == "tf_models"
                    else {b"bicycle": 0, b"car": 1, b"toothbrush": 3})
        assert seen == expected
    label_map = (tmp_path / "train-tf_models" / "label_map.pbtxt").read_text()
    assert [int(i) for i in label_map.split("id: ")[1:] for i in [i.split()[0]]] == \
        [2, 3, 18, 90]
    assert 'name: "dog"' in label_map  # used by no annotation, listed all the same


def test_source_id_is_the_image_id_and_filename_the_file_name(tmp_path):
    path = coco_file(tmp_path, [image(0, "sub/a.png"), image(139, "b.png")],
                     [box(1, 139, 3)])
    convert(path, tmp_path / "tf", split="validation", layout="tf_models")
    found = {r["image/source_id"][0]: r["image/filename"][0]
             for r in examples(tmp_path / "tf")}
    assert found == {b"0": b"sub/a.png", b"139": b"b.png"}
    convert(path, tmp_path / "ours", split="validation")
    found = {r["image_id"][0]: r["image_name"][0] for r in examples(tmp_path / "ours")}
    assert found == {0: b"sub/a.png", 139: b"b.png"}


def test_a_file_without_categories_keeps_its_ids_as_labels(tmp_path):
    path = coco_file(tmp_path, [image(1, "a.png")], [box(1, 1, 7), box(2, 1, 3)],
                     categories=None)
    table = load_table(path)
    assert table.label_map is None and table.rows["label"].tolist() == [[7, 3]]


# --- annotations the references skip ----------------------------------------------------

SKIPPED = [box(11, 1, 3, (4, 6, 0, 10)),          # zero width
           box(12, 1, 3, (4, 6, 20, -1)),         # negative height
           box(13, 1, 2, (50, 6, 14.5, 10)),      # x + width = 64.5 > 64
           box(14, 2, 2, (4, 40, 20, 8.01)),      # y + height > 48
           box(15, 2, 90, (-0.5, 6, 20, 10))]     # starts left of the image (ours)
KEPT = [box(16, 1, 2, (50, 6, 14, 42)),           # touches the right and bottom edges
        box(17, 2, 3, (0, 0, 64, 48))]            # the whole image


def test_the_run_skips_lists_and_counts_what_the_references_skip(tmp_path, capsys):
    path = coco_file(tmp_path, [image(1, "a.png"), image(2, "b.png"), image(3, "c.png")],
                     [*SKIPPED, *KEPT])
    # (5 of its 7 boxes: more than max_rejected's default half, which stops a run)
    result = convert(path, tmp_path / "out", split="train", layout="tf_models",
                     max_rejected=1.0)
    assert result.counts == {"train": 3} and result.num_rejected == 0  # images all written
    reasons = {"zero or negative width or height": 2,
               "beyond the image's right or bottom edge": 2,
               "starting left of or above the image": 1}
    assert result.skipped_annotations == reasons
    assert "5 annotations skipped" in repr(result)
    listed = pd.read_csv(tmp_path / "out" / SKIPPED_ANNOTATIONS)
    assert listed.columns.tolist() == ["source", "annotation", "image", "reason", "written"]
    assert listed["annotation"].tolist() == [11, 12, 13, 14, 15]
    assert listed["image"].tolist() == [1, 1, 1, 2, 2]
    assert set(listed["source"]) == {path}
    manifest = read_manifest(str(tmp_path / "out"))
    assert manifest["skipped_annotations"] == {
        "file": SKIPPED_ANNOTATIONS, "num_annotations": 5, "reasons": reasons}
    info = tfrecorder.info(str(tmp_path / "out"))
    assert info.skipped_annotations == reasons
    assert info.to_json()["skipped_annotations"]["num_annotations"] == 5
    capsys.readouterr()
    assert cli.main(["info", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "Skipped:      5 annotations" in printed
    assert "2  zero or negative width or height" in printed
    kept = {r["image/source_id"][0]: r.get("image/object/class/label", [])
            for r in examples(tmp_path / "out")}
    assert kept == {b"1": [2], b"2": [3], b"3": []}
    boxes = {r["image/source_id"][0]: r.get("image/object/bbox/xmax", [])
             for r in examples(tmp_path / "out")}
    assert boxes[b"1"] == [1.0] and boxes[b"2"] == [1.0]


def test_invalid_annotations_error_keeps_the_strict_refusal(tmp_path):
    path = coco_file(tmp_path, [image(1, "a.png"), image(2, "b.png")], [*SKIPPED, *KEPT])
    with pytest.raises(SchemaError, match=r"2 annotations whose bbox is zero or negative "
                                          r"width or height: annotation id 11: bbox \[4, 6, "
                                          r"0, 10\] in image 1 of 64 x 48 pixels") as error:
        convert(path, tmp_path / "out", invalid_annotations="error")
    assert error.value.option == "invalid_annotations"
    assert not os.path.exists(tmp_path / "out")  # refused before anything was written


def test_a_file_that_skips_nothing_says_so(tmp_path):
    path = coco_file(tmp_path, [image(1, "a.png")], KEPT[:1])
    result = convert(path, tmp_path / "out", split="train")
    assert result.skipped_annotations == {}
    assert not os.path.exists(tmp_path / "out" / SKIPPED_ANNOTATIONS)
    assert "skipped_annotations" not in read_manifest(str(tmp_path / "out"))


# --- rows the source rejects itself ------------------------------------------------------

# `tfrecorder.convert` is the function; its module reads the source by `load_table`.
CONVERT = importlib.import_module("tfrecorder.write.convert")


def with_rejected_rows(path, reasons):
    """A loaded table with rows its source could not give an image for, as the Pascal
    VOC reader makes them (an empty XML file...): what `load_table` gives `convert` in
    these tests, until a reader of this repository makes them."""
    table = load_table(path, split="train")
    rows = pd.DataFrame({"annotation_file": [f"x{i}.xml" for i in range(len(reasons))],
                         "reason": reasons}, index=pd.Index(range(len(reasons)), name="file"))
    return dataclasses.replace(table, rejected_rows=rows)


@pytest.mark.parametrize("engine", ["local", "beam"])
def test_rows_the_source_rejects_go_to_rejected_csv(tmp_path, monkeypatch, engine):
    path = coco_file(tmp_path, [image(1, "a.png"), image(2, "b.png")], KEPT)
    table = with_rejected_rows(path, ["empty XML file", "names no image"])
    monkeypatch.setattr(CONVERT, "load_table", lambda *a, **k: table)
    options = {"runner": "DirectRunner"} if engine == "beam" else {}
    result = convert(path, tmp_path / "out", **options)
    assert result.counts == {"train": 2} and result.num_rejected == 2
    assert result.metrics["rows_rejected"] == 2 and result.metrics["rows_read"] == 4
    rejected = pd.read_csv(tmp_path / "out" / REJECTED)
    assert rejected["reason"].tolist() == ["empty XML file", "names no image"]
    assert rejected["annotation_file"].tolist() == ["x0.xml", "x1.xml"]
    manifest = read_manifest(str(tmp_path / "out"))
    assert manifest["rejected"] == {"file": REJECTED, "num_rows": 2, "reasons": {
        "empty XML file": 1, "names no image": 1}}
    assert manifest["num_source_rows"] == 4


def test_rows_the_source_rejects_count_against_max_rejected(tmp_path, monkeypatch):
    path = coco_file(tmp_path, [image(1, "a.png")], KEPT[:1])
    table = with_rejected_rows(path, ["empty XML file"] * 3)
    monkeypatch.setattr(CONVERT, "load_table", lambda *a, **k: table)
    with pytest.raises(TooManyRejectedError, match=r"3 rows were rejected.*3 x empty XML"):
        convert(path, tmp_path / "out")  # 3 of 4 rows: more than half
    assert not os.path.exists(tmp_path / "out")  # before any image was read
    result = convert(path, tmp_path / "out", max_rejected=1.0)
    assert result.num_rejected == 3 and result.counts == {"train": 1}
    with pytest.raises(ImageError, match=r"row 0 of the source .*: empty XML file"):
        convert(path, tmp_path / "raise", on_error="raise")


# --- the file as downloaded ----------------------------------------------------------------

def test_a_file_starting_with_a_byte_order_mark_is_read(tmp_path):
    """Windows tools (Notepad, PowerShell's Out-File) save UTF-8 with a byte-order mark,
    which JSON does not allow and msgspec refuses at line 1, column 1."""
    path = coco_file(tmp_path, [image(1, "a.png")], [box(1, 1, 3)])
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(codecs.BOM_UTF8 + data)
    table = load_table(path, split="train")
    assert table.rows["label"].tolist() == [["car"]]
    convert(path, tmp_path / "out")
    assert [r["objects/bbox"] for r in examples(tmp_path / "out")] == [
        pytest.approx([6 / 48, 4 / 64, 16 / 48, 24 / 64])]

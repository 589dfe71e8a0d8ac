"""A corpus of hostile detection files (issue 48): truncated XML, byte-order marks, NaN,
boxes past the edge, label files without images, images without label files, category id
0, ids with spaces, a misspelt class. Each image ends as a record or a listed rejection,
each object as a written box, a listed skipped annotation or an object of a rejected
image: objects in = objects written + objects listed, counted here by reading the files
with the standard library and the records with TensorFlow, never with tfrecorder's own
readers.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder
from tfrecorder import cli
from tfrecorder.errors import SchemaError

WIDTH, HEIGHT = 64, 48


def image(path: Path, seed: int = 0, size=(WIDTH, HEIGHT)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), np.uint8)
    Image.fromarray(pixels).save(path, quality=95)


def phone_photo(path: Path, orientation: int, seed: int = 0) -> None:
    """A JPEG stored landscape (WIDTH x HEIGHT) whose EXIF orientation turns it, as a
    phone writes a portrait photo."""
    image(path, seed=seed)
    exif = Image.Exif()
    exif[0x0112] = orientation
    with Image.open(path) as stored:
        stored.load()
        stored.save(path, quality=95, exif=exif)


# --- counters independent of the library -------------------------------------------------

def coco_objects(path: Path) -> int:
    return len(json.loads(path.read_text(encoding="utf-8-sig"))["annotations"])


def voc_objects(folder: Path) -> int:
    """<object> elements in every XML, by their text (a truncated file's too)."""
    return sum(len(re.findall(rb"<object[\s>]", xml.read_bytes()))
               for xml in folder.rglob("*.xml"))


def yolo_objects(folder: Path) -> int:
    """Lines that are not blank, in every label file but the class lists."""
    return sum(sum(1 for line in text.read_bytes().splitlines() if line.strip())
               for text in folder.rglob("*.txt")
               if text.name not in ("classes.txt", "train.txt", "val.txt"))


def records(out: Path) -> list[tf.train.Example]:
    return [tf.train.Example.FromString(record.numpy())
            for shard in sorted(out.glob("*.tfrecord"))
            for record in tf.data.TFRecordDataset(str(shard))]


def boxes_of(example: tf.train.Example) -> int:
    features = example.features.feature
    key = next(k for k in ("image/object/bbox/xmin", "objects/bbox") if k in features)
    values = len(features[key].float_list.value)
    return values if key.endswith("xmin") else values // 4


def listed(out: Path, name: str) -> list[dict]:
    path = out / name
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def assert_accounted(out: Path, objects_in: int, images_in: int) -> dict:
    """Every object and every image of the source is written or listed, and the
    manifest says so; returns the manifest's counts."""
    found = records(out)
    written = sum(boxes_of(example) for example in found)
    skipped = [row for row in listed(out, "skipped_annotations.csv") if row["annotation"]]
    rejected = listed(out, "rejected.csv")
    in_rejected = sum(int(row.get("objects") or 0) for row in rejected)
    assert objects_in == written + len(skipped) + in_rejected
    assert images_in == len(found) + len(rejected)
    counts = json.loads((out / "dataset.json").read_text())["annotations"]
    assert (counts["objects"], counts["written"], counts["skipped"],
            counts["in_rejected_images"]) == (objects_in, written, len(skipped), in_rejected)
    tfrecorder.verify(str(out))  # every file the run wrote is one verify expects
    return counts


# --- COCO --------------------------------------------------------------------------------

def hostile_coco(folder: Path) -> Path:
    """Six images (one without a size); a Roboflow-style unused category id 0; box-only
    annotations with `"segmentation": []`; one of each slip a tool or a hand makes; a
    byte-order mark."""
    for k in range(6):
        image(folder / f"{k}.jpg", seed=k)
    images = [{"id": k, "file_name": f"{k}.jpg", "width": WIDTH, "height": HEIGHT}
              for k in range(5)] + [{"id": 5, "file_name": "5.jpg"}]
    good = [{"id": 100 + k, "image_id": k % 6, "category_id": 1 + k % 3,
             "bbox": [2 + k, 3, 20, 10], "area": 200, "iscrowd": 0, "segmentation": []}
            for k in range(12)]
    slips = [
        {"id": 1, "image_id": 0, "category_id": 1, "bbox": [float("nan"), 3, 20, 10]},
        {"id": 2, "image_id": 0, "category_id": 1, "bbox": [3, 20, 10]},
        {"id": 3, "image_id": 1, "category_id": 9, "bbox": [3, 3, 20, 10]},
        {"id": 4, "image_id": 1, "category_id": 2, "bbox": [50, 3, 20, 10]},  # past right
        {"id": 5, "image_id": 2, "category_id": 2, "bbox": [3, 3, -4, 10]},
        {"id": 6, "image_id": 77, "category_id": 3, "bbox": [3, 3, 20, 10]},
    ]
    data = {"images": images, "annotations": good + slips,
            "categories": [{"id": 0, "name": "vehicles", "supercategory": "none"},
                           {"id": 1, "name": "car", "supercategory": "vehicles"},
                           {"id": 2, "name": "bus", "supercategory": "vehicles"},
                           {"id": 3, "name": "traffic light", "supercategory": "vehicles"}]}
    path = folder / "coco.json"
    # NaN as JavaScript writes it, after a byte-order mark as Windows tools write one
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(data).encode())
    return path


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
def test_hostile_coco_loses_nothing(tmp_path, layout):
    path = hostile_coco(tmp_path / "coco")
    out = tmp_path / "out"
    result = tfrecorder.convert(str(path), str(out), split="train", layout=layout)
    counts = assert_accounted(out, coco_objects(path), images_in=6)
    assert counts["skipped"] == 6 and counts["in_rejected_images"] == 2  # image 5's
    assert result.num_rejected == 1 and sum(result.skipped_annotations.values()) == 6
    reasons = {row["annotation"]: row["reason"]
               for row in listed(out, "skipped_annotations.csv")}
    assert reasons.keys() == {"1", "2", "3", "4", "5", "6"}
    assert reasons["3"] == "unknown category id" and reasons["6"] == "unknown image id"
    # No masks from `"segmentation": []`, and the unused id 0 is dropped, and said so.
    assert not any("image/object/mask" in e.features.feature or "objects/mask"
                   in e.features.feature for e in records(out))
    assert any("category id 0" in note for note in counts["notes"])
    if layout == "tf_models":
        label_map = (out / "label_map.pbtxt").read_text()
        assert "id: 0" not in label_map and label_map.count("item {") == 3
        ids = {i for e in records(out)
               for i in e.features.feature["image/object/class/label"].int64_list.value}
        assert 0 not in ids and ids <= {1, 2, 3}


def test_coco_with_a_used_category_id_0_is_remapped_and_noted(tmp_path):
    path = hostile_coco(tmp_path / "coco")
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    data["annotations"] = [a for a in data["annotations"] if a["id"] >= 100]
    data["annotations"][0]["category_id"] = 0
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    tfrecorder.convert(str(path), str(out), split="train", layout="tf_models")
    found = tfrecorder.info(str(out))
    assert 0 not in found.label_map_ids.values()
    assert found.label_map_ids["vehicles"] >= 1
    assert any("category id 0" in warning for warning in found.warnings)


def test_a_coco_file_that_is_not_json_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"images": [\n  {"id": 1,\n  "file_name": "a.jpg" oops}]}')
    with pytest.raises(SchemaError, match=r"broken\.json.*line 3"):
        tfrecorder.convert(str(path), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "dataset.json").exists()


# --- Pascal VOC --------------------------------------------------------------------------

def voc(filename: str, objects, size=(WIDTH, HEIGHT)) -> str:
    found = "".join(
        f"<object><name>{name}</name><difficult>0</difficult><bndbox><xmin>{x0}</xmin>"
        f"<ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
        for name, x0, y0, x1, y1 in objects)
    return (f"<annotation><folder>VOC</folder><filename>{filename}</filename><size><width>"
            f"{size[0]}</width><height>{size[1]}</height><depth>3</depth></size>{found}"
            "</annotation>")


def hostile_voc(root: Path) -> Path:
    """VOC2012's layout, as CVAT and datumaro write it: ids with spaces, a listed image
    without XML, a byte-order mark, a truncated file, boxes a pixel and far past the
    edge, and one `dgo` among many `dog`s."""
    dogs = [("dog", 2 + k, 2, 30 + k, 30) for k in range(4)]
    files = {
        "harbour view 09": voc("harbour view 09.jpg", dogs),
        "plain 01": "\ufeff" + voc("plain 01.jpg", [
            ("dog", 1, 1, WIDTH + 1, 20),  # one pixel past: clipped
            ("cat", 1, 1, WIDTH + 30, 20),  # far past: skipped
            *dogs]),
        "broken 02": voc("broken 02.jpg", dogs)[:-60],  # cut mid-object
        "slip 04": voc("slip 04.jpg", [*dogs, ("dgo", 5, 5, 20, 20)]),
        "more 05": voc("more 05.jpg", dogs),
        # a phone photo (EXIF 6), labelled as CVAT shows it: turned, <size> 48 x 64
        "phone 06": voc("phone 06.jpg", [("dog", 2, 2, 30, 50)], size=(HEIGHT, WIDTH)),
    }
    for k, (stem, text) in enumerate(files.items()):
        image(root / "JPEGImages" / f"{stem}.jpg", seed=k)
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"{stem}.xml").write_bytes(text.encode("utf-8"))
    phone_photo(root / "JPEGImages" / "phone 06.jpg", 6)
    image(root / "JPEGImages" / "empty 03.jpg", seed=9)  # listed, no XML (no objects)
    main = root / "ImageSets" / "Main"
    main.mkdir(parents=True)
    (main / "train.txt").write_text(
        "plain 01\nbroken 02\nempty 03\nslip 04\nmore 05\nphone 06\n")
    (main / "val.txt").write_text("harbour view 09\n")
    return root


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
def test_hostile_voc_loses_nothing(tmp_path, layout, capsys):
    root = hostile_voc(tmp_path / "voc")
    out = tmp_path / "out"
    tfrecorder.convert(str(root), str(out), layout=layout)
    counts = assert_accounted(out, voc_objects(root), images_in=7)
    assert counts["clipped"] == 1 and counts["unannotated_images"] == 1
    assert counts["skipped"] == 1 and counts["in_rejected_images"] == 4  # broken 02's
    found = tfrecorder.info(str(out))
    assert found.splits["validation"].num_records == 1  # "harbour view 09" kept its split
    assert found.splits["train"].num_records == 5  # broken 02 rejected, empty 03 kept
    assert found.orientation == {"train": {"turned_pixels": 1}}  # the phone photo
    phone = next(e.features.feature for e in records(out)
                 if b"phone" in e.features.feature[
                     "image/filename" if layout == "tf_models" else "image_name"
                 ].bytes_list.value[0])
    key = "image/encoded" if layout == "tf_models" else "image"
    stored = tf.io.decode_jpeg(phone[key].bytes_list.value[0])
    assert stored.shape[:2] == (WIDTH, HEIGHT)  # the pixels its boxes describe: turned
    warned = " ".join(found.warnings)
    assert "'dgo'" in warned and "'dog'" in warned and "slip" in warned
    assert "1 image had no annotation file" in warned and "empty 03.jpg" in warned
    if layout == "tf_models":
        ids = [e.features.feature["image/source_id"].bytes_list.value[0]
               for e in records(out)]
        assert all(i.decode().isdigit() for i in ids)  # Model Garden's process_source_id
        names = {e.features.feature["image/filename"].bytes_list.value[0].decode()
                 for e in records(out)}
        assert "harbour view 09.jpg" in names and "empty 03.jpg" in names
    capsys.readouterr()
    assert cli.main(["info", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Objects:      24 in the source: 19 written, 1 skipped, 4 in rejected images" \
        in printed and "1  image without an annotation file" in printed
    if layout == "tf_models":
        assert "Label map:    1 dgo, 2 dog" in printed


# --- YOLO --------------------------------------------------------------------------------

def hostile_yolo(root: Path) -> Path:
    """Ultralytics' layout: boxes inside, a hair past (clipped, as Ultralytics does up to
    1%) and far past the edge, an unknown class, a malformed line, an image without a
    label file, a label file without an image, one with a byte-order mark and one that
    is not text; a phone photo turned by its EXIF orientation."""
    for k, stem in enumerate("abcd"):
        image(root / "images" / "train" / f"{stem}.jpg", seed=k)
    labels = root / "labels" / "train"
    labels.mkdir(parents=True)
    (labels / "a.txt").write_text(
        "0 0.5 0.5 0.2 0.2\n1 0.5 0.5 1.01 0.4\n\n0 0.5 0.5 1.5 0.4\n7 0.5 0.5 0.2 0.2\n"
        "1 0.5 x 0.2 0.2\n")
    (labels / "c.txt").write_text("\ufeff1 0.25 0.25 0.1 0.1\n")  # a byte-order mark
    (labels / "d.txt").write_bytes(b"0 0.5 0.5 0.2 0.2\n\xff\xfe\x00\x81 0.1\n")
    (labels / "orphan.txt").write_text("0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n")
    phone_photo(root / "images" / "train" / "e.jpg", 8)  # Ultralytics labels it as shown
    (labels / "e.txt").write_text("1 0.3 0.7 0.2 0.2\n")
    # b.jpg has no label file: an image without objects, as Ultralytics means it.
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nnames:\n  0: dog\n  1: cat\n")
    return root


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
def test_hostile_yolo_loses_nothing(tmp_path, layout):
    root = hostile_yolo(tmp_path / "yolo")
    out = tmp_path / "out"
    tfrecorder.convert(str(root), str(out), layout=layout)
    counts = assert_accounted(out, yolo_objects(root), images_in=5)
    assert counts["clipped"] == 1 and counts["unannotated_images"] == 1
    assert tfrecorder.info(str(out)).orientation == {"train": {"turned_pixels": 1}}
    assert any("had no annotation file" in w and "b.jpg" in w
               for w in tfrecorder.info(str(out)).warnings)
    reasons = [row["reason"] for row in listed(out, "skipped_annotations.csv")]
    assert len(reasons) == 5 and reasons.count("label file without an image") == 2
    rejected = listed(out, "rejected.csv")
    assert len(rejected) == 1 and "d.txt" in json.dumps(rejected)


def test_labelimg_yolo_folder_with_classes_txt(tmp_path):
    """LabelImg's own YOLO output: images, a .txt beside each, and classes.txt."""
    folder = tmp_path / "labelimg"
    for k, stem in enumerate(["x", "y", "z"]):
        image(folder / f"{stem}.jpg", seed=k)
    (folder / "classes.txt").write_text("dog\ncat\n")
    (folder / "x.txt").write_text("0 0.5 0.5 0.5 0.5\n1 0.25 0.25 0.1 0.2\n")
    (folder / "y.txt").write_text("1 0.5 0.5 0.2 0.2\n")
    out = tmp_path / "out"
    tfrecorder.convert(str(folder), str(out), split="train", layout="tf_models")
    counts = assert_accounted(out, yolo_objects(folder), images_in=3)
    assert counts["unannotated_images"] == 1  # z.jpg
    by_name = {e.features.feature["image/filename"].bytes_list.value[0].decode():
               e.features.feature for e in records(out)}
    x = by_name["x.jpg"]
    assert list(x["image/object/class/text"].bytes_list.value) == [b"dog", b"cat"]
    assert [round(v, 4) for v in x["image/object/bbox/xmin"].float_list.value] == [0.25, 0.2]
    assert math.isclose(x["image/object/bbox/ymax"].float_list.value[1], 0.35, abs_tol=1e-6)


def test_a_source_whose_objects_are_mostly_bad_stops_before_any_image(tmp_path):
    """More than max_rejected of the objects skipped: the files are wrong (boxes in
    pixels where fractions are meant), not a few slips."""
    path = hostile_coco(tmp_path / "coco")
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    for annotation in data["annotations"]:
        annotation["bbox"] = [5, 5, 500, 500]  # every box far past its image
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    with pytest.raises(tfrecorder.errors.TooManyRejectedError,
                       match=r"16 of its 18 objects would be skipped.*max_rejected=0\.5"):
        tfrecorder.convert(str(path), str(out), split="train")
    assert not out.exists() or not any(out.iterdir())
    tfrecorder.convert(str(path), str(out), split="train", max_rejected=1.0)
    assert_accounted(out, coco_objects(path), images_in=6)


def test_the_result_counts_the_objects(tmp_path):
    path = hostile_coco(tmp_path / "coco")
    result = tfrecorder.convert(str(path), str(tmp_path / "out"), split="train")
    counts = result.annotations
    assert (counts.objects, counts.written, counts.skipped, counts.in_rejected_images) == \
        (coco_objects(path), 10, 6, 2)


@pytest.mark.parametrize(("rare", "common", "warned"), [
    ("dgo", "dog", True), ("persn", "person", True), ("bicylce", "bicycle", True),
    ("cat", "car", False), ("b", "a", False), ("bus", "buses", False),
])
def test_a_class_is_warned_of_as_a_slip_only_where_it_looks_like_one(rare, common, warned):
    from tfrecorder.read.info import _slip
    assert _slip(rare, common) is warned


@pytest.mark.parametrize("source", ["coco", "automl_csv"])
def test_beam_counts_the_objects_as_the_local_writer_does(tmp_path, source):
    """Both engines count the objects of an image a worker rejects (here, one whose file
    is not an image) in the same manifest; an AutoML CSV is read by the pipeline itself,
    which looks the rejected rows up in its files."""
    path = hostile_coco(tmp_path / "coco")
    (tmp_path / "coco" / "0.jpg").write_bytes(b"not an image")
    if source == "automl_csv":
        lines = [f"TRAIN,{k}.jpg,car,0.1,0.1,,,0.{k + 2},0.3,,\n"
                 for k in range(5) for _ in range(2)]
        lines.append("TRAIN,1.jpg,car,0.1,0.1,,,1.4,0.3,,\n")  # skipped
        (tmp_path / "coco" / "boxes-0.csv").write_text("".join(lines))
        path = tmp_path / "coco" / "boxes-*.csv"  # a glob: the pipeline reads the files
    found = {}
    for runner in (None, "DirectRunner"):
        out = tmp_path / f"out-{runner}"
        split = {"split": "train"} if source == "coco" else {}  # (the CSV names its own)
        tfrecorder.convert(str(path), str(out), runner=runner, max_rejected=1.0,
                           progress=False, **split)
        found[runner] = json.loads((out / "dataset.json").read_text())["annotations"]
        tfrecorder.verify(str(out))
    assert found[None] == found["DirectRunner"]
    assert found[None]["in_rejected_images"] == (4 if source == "coco" else 2)

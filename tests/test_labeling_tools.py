"""Exports of real labeling libraries convert with nothing lost, moved or invalid (issue 48).

supervision, globox and Datumaro each export one ground truth (tests/labeling_tools.py:
15 pictures, a class with a space, an image without boxes, file names with spaces) as
COCO, Pascal VOC and YOLO; `tfrecorder.convert` reads each export in both layouts, and the
records are read back with TensorFlow's own parser (`tf.data.TFRecordDataset`,
`tf.io.parse_single_example`) and compared with the truth image by image: splits, sizes,
boxes (within a pixel: supervision writes VOC's 1-based corners), class names and ids, and
no masks (the tools write `"segmentation": []` for a box). Then the readers downstream:
pycocotools' COCOeval scores the records' boxes as detections at AP 1.000, Model Garden's
`TfExampleDecoder` and `process_source_id` read every tf_models record, and the Object
Detection API's `label_map_util` loads every `label_map.pbtxt` written. Reading an export
counts every box and says what it decided (globox's category id 0, shifted up by 1).

COCO exports are given as their files by split where the images lie beside each file
(supervision's, globox's), and as the export's folder (Roboflow's layout, Datumaro's
`annotations/` + `images/<subset>/`, which has no other form). A Datumaro VOC export of images whose
size it never read has no `<size>`, and is refused for it, with that reason.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from labeling_tools import (
    CLASSES,
    EMPTY,
    FORMATS,
    SPLITS,
    TOOLS,
    export,
    ground_truth,
    source_of,
    write_images,
)
from model_garden import coco_tools, decode_detection, process_source_id
from object_detection_api import label_map_util

import tfrecorder
from tfrecorder.errors import TooManyRejectedError
from tfrecorder.sources import load_table

LAYOUTS = ("tfrecorder", "tf_models")
TRUTH = {picture.name: picture for picture in ground_truth()}


def cases(layouts=LAYOUTS):
    return [pytest.param(tool, fmt, layout, id=f"{tool}-{fmt}-{layout}")
            for tool in TOOLS for fmt in FORMATS for layout in layouts]


def class_order(tool: str, fmt: str) -> tuple[str, ...]:
    """The vocabulary an export gives: the tool's class list where the format keeps one
    (YOLO's names, COCO's categories in id order: globox numbers them in sorted order),
    else (Pascal VOC) the names in sorted order."""
    if fmt == "yolo" or (fmt == "coco" and tool != "globox"):
        return CLASSES
    return tuple(sorted(CLASSES))


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, str]:
    return write_images(tmp_path_factory.mktemp("truth"))


@pytest.fixture(scope="module")
def exports(images, tmp_path_factory):
    """(tool, fmt) -> the export's folder; a tool exports every format on first use."""
    root = tmp_path_factory.mktemp("labeling_tools")

    @functools.cache
    def exported(tool: str) -> dict[str, Path]:
        return export(tool, images, root / tool)

    return lambda tool, fmt: exported(tool)[fmt]


@pytest.fixture(scope="module")
def converted(exports, tmp_path_factory):
    """(tool, fmt, layout) -> the converted dataset's folder, converted on first use; a
    conversion that failed raises its error again, without another try."""
    root = tmp_path_factory.mktemp("converted")

    @functools.cache
    def outcome(tool: str, fmt: str, layout: str, folder: bool) -> Path | Exception:
        out = root / f"{tool}-{fmt}-{layout}{'-folder' if folder else ''}"
        try:
            tfrecorder.convert(source_of(tool, fmt, exports(tool, fmt), folder), str(out),
                               layout=layout, progress=False, num_workers=1)
        except Exception as error:  # noqa: BLE001  (raised again by every caller)
            return error
        return out

    def convert(tool: str, fmt: str, layout: str, folder: bool = False) -> Path:
        found = outcome(tool, fmt, layout, folder)
        if isinstance(found, Exception):
            raise found
        return found

    return convert


@functools.cache
def read_records(folder: Path) -> list[dict]:
    """Every record, parsed by TensorFlow with the features the manifest lists, as
    {"split", "keys" (every key the Example holds), "serialized", feature: numpy}."""
    manifest = json.loads((folder / "dataset.json").read_text())
    dtypes = {"string": tf.string, "int64": tf.int64, "float32": tf.float32}
    spec = {name: tf.io.FixedLenFeature([], dtypes[f["dtype"]]) if not f["shape"]
            else tf.io.VarLenFeature(dtypes[f["dtype"]])
            for name, f in manifest["features"].items()}
    records = []
    for split, info in manifest["splits"].items():
        for shard in info["shards"]:
            for serialized in tf.data.TFRecordDataset(str(folder / shard["file"])):
                parsed = tf.io.parse_single_example(serialized, spec)
                record = {k: (tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v)
                          .numpy() for k, v in parsed.items()}
                record["split"] = split
                record["serialized"] = serialized.numpy()
                record["keys"] = set(tf.train.Example.FromString(
                    record["serialized"]).features.feature)
                records.append(record)
    return records


def objects_of(record: dict, manifest: dict) -> dict:
    """A record's image and objects in either layout: name, size, boxes (ymin, xmin,
    ymax, xmax) and each object's class name and id, as stored."""
    if manifest.get("layout") == "tf_models":
        boxes = np.stack([record[f"image/object/bbox/{c}"]
                          for c in ("ymin", "xmin", "ymax", "xmax")], axis=-1)
        return {"name": record["image/filename"].decode(),
                "size": (int(record["image/width"]), int(record["image/height"])),
                "boxes": boxes.reshape(-1, 4),
                "names": [t.decode() for t in record["image/object/class/text"]],
                "ids": record["image/object/class/label"].tolist()}
    vocabulary = manifest["features"]["objects/label"]["vocabulary"]
    return {"name": record["image_name"].decode(),
            "size": (int(record["image_width"]), int(record["image_height"])),
            "boxes": record["objects/bbox"].reshape(-1, 4),
            "names": [vocabulary[k] for k in record["objects/label"]],
            "ids": record["objects/label"].tolist()}


def assert_boxes_match(found: dict, picture) -> None:
    """Every box of the truth, once, in its class and within a pixel (or 1e-3) of it."""
    assert sorted(found["names"]) == sorted(b.label for b in picture.boxes), picture.name
    tolerance = np.array([1 / picture.height, 1 / picture.width] * 2) + 1e-6
    tolerance = np.maximum(tolerance, 1e-3)
    left = list(range(len(found["boxes"])))
    for box in picture.boxes:
        truth = np.array(box.normalized(picture.width, picture.height))
        match = next((k for k in left if found["names"][k] == box.label and np.all(
            np.abs(found["boxes"][k] - truth) <= tolerance)), None)
        assert match is not None, (picture.name, box, found["boxes"], found["names"])
        left.remove(match)


@pytest.mark.parametrize("tool,fmt,layout", cases())
def test_export_converts_with_nothing_lost_or_moved(converted, tool, fmt, layout):
    folder = converted(tool, fmt, layout)
    manifest = json.loads((folder / "dataset.json").read_text())
    records = read_records(folder)
    by_split = {split: sum(p.split == split for p in TRUTH.values()) for split in SPLITS}
    assert {s: i["num_records"] for s, i in manifest["splits"].items()} == by_split
    assert sorted(objects_of(r, manifest)["name"] for r in records) == sorted(TRUTH)
    order = class_order(tool, fmt)
    assert manifest["labels"]["vocabulary"] == list(order)
    assert manifest["rejected"]["num_rows"] == 0
    boxes = sum(len(p.boxes) for p in TRUTH.values())
    counts = manifest["annotations"]  # every object in the source written, none listed
    assert (counts["objects"], counts["written"], counts["skipped"],
            counts["in_rejected_images"]) == (boxes, boxes, 0, 0)
    # The tools write "segmentation": [] (COCO) or no polygons for boxes: no masks.
    assert not [name for name in manifest["features"] if "mask" in name]
    first_id = 1 if layout == "tf_models" else 0  # tf_models: 0 is the background
    for record in records:
        found = objects_of(record, manifest)
        picture = TRUTH[found["name"]]
        assert record["split"] == picture.split, found["name"]
        assert found["size"] == (picture.width, picture.height), found["name"]
        assert not [key for key in record["keys"] if "mask" in key], found["name"]
        assert_boxes_match(found, picture)
        assert found["ids"] == [order.index(name) + first_id for name in found["names"]]
    if layout == "tf_models":
        for split in SPLITS:
            ids = [r["image/source_id"] for r in records if r["split"] == split]
            assert all(i.decode().isdigit() for i in ids), ids
            assert len(set(ids)) == len(ids), (split, ids)


@pytest.mark.parametrize("tool,fmt,layout", cases(["tf_models"]))
def test_model_garden_reads_every_record(converted, tool, fmt, layout):
    folder = converted(tool, fmt, layout)
    manifest = json.loads((folder / "dataset.json").read_text())
    for record in read_records(folder):
        found = objects_of(record, manifest)
        decoded = decode_detection(record["serialized"], include_mask=False)
        assert decoded["groundtruth_boxes"].shape == (len(found["names"]), 4)
        np.testing.assert_allclose(decoded["groundtruth_boxes"], found["boxes"], atol=1e-7)
        assert decoded["groundtruth_classes"].tolist() == found["ids"]
        assert not decoded["groundtruth_is_crowd"].any()
        assert decoded["image"].shape == (found["size"][1], found["size"][0], 3)
        assert process_source_id(decoded["source_id"]) == int(record["image/source_id"])


@pytest.mark.parametrize("tool,fmt,layout", cases(["tf_models"]))
def test_object_detection_api_loads_the_label_map(converted, tool, fmt, layout):
    path = str(converted(tool, fmt, layout) / "label_map.pbtxt")
    util = label_map_util()
    expected = {name: k + 1 for k, name in enumerate(class_order(tool, fmt))}
    assert util.get_label_map_dict(path) == expected
    assert util.get_label_map_dict(path, use_display_name=True) == expected
    assert util.create_categories_from_labelmap(path) == [
        {"id": i, "name": name} for name, i in expected.items()]


def truth_coco() -> dict:
    """The ground truth as a COCO file: image k is the k-th picture; category k + 1 the
    k-th of CLASSES."""
    images, annotations = [], []
    for k, picture in enumerate(TRUTH.values()):
        images.append({"id": k, "file_name": picture.name, "width": picture.width,
                       "height": picture.height})
        for box in picture.boxes:
            w, h = box.xmax - box.xmin, box.ymax - box.ymin
            annotations.append({"id": len(annotations) + 1, "image_id": k,
                                "category_id": CLASSES.index(box.label) + 1,
                                "bbox": [box.xmin, box.ymin, w, h], "area": w * h,
                                "iscrowd": 0})
    return {"images": images, "annotations": annotations,
            "categories": [{"id": k + 1, "name": n} for k, n in enumerate(CLASSES)]}


@pytest.mark.parametrize("tool,fmt,layout", cases())
def test_cocoeval_scores_the_records_boxes_at_ap_1(converted, tool, fmt, layout):
    folder = converted(tool, fmt, layout)
    manifest = json.loads((folder / "dataset.json").read_text())
    image_ids = {name: k for k, name in enumerate(TRUTH)}
    detections = []
    for record in read_records(folder):
        found = objects_of(record, manifest)
        width, height = found["size"]
        for (ymin, xmin, ymax, xmax), name in zip(found["boxes"], found["names"]):
            detections.append({
                "image_id": image_ids[found["name"]], "category_id": CLASSES.index(name) + 1,
                "bbox": [float(xmin * width), float(ymin * height),
                         float((xmax - xmin) * width), float((ymax - ymin) * height)],
                "score": 1.0})
    evaluation = coco_tools().coco_evaluator
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints as it goes
        truth = evaluation.coco_utils.coco.COCO()
        truth.dataset = truth_coco()
        truth.createIndex()
        scored = evaluation.cocoeval.COCOeval(truth, truth.loadRes(detections), "bbox")
        scored.evaluate()
        scored.accumulate()
        scored.summarize()
    assert scored.stats[0] == pytest.approx(1.0) and scored.stats[1] == pytest.approx(1.0)


@pytest.mark.parametrize("tool", ["supervision", "datumaro"])
def test_coco_export_folders_convert(converted, tool):
    """Roboflow's layout (supervision: `train/_annotations.coco.json` beside the images)
    and Datumaro's (`annotations/instances_train.json`, `images/train/`) given as the
    export's folder."""
    folder = converted(tool, "coco", "tfrecorder", folder=True)
    manifest = json.loads((folder / "dataset.json").read_text())
    assert {s: i["num_records"] for s, i in manifest["splits"].items()} == {
        split: sum(p.split == split for p in TRUTH.values()) for split in SPLITS}
    for record in read_records(folder):
        found = objects_of(record, manifest)
        assert record["split"] == TRUTH[found["name"]].split
        assert_boxes_match(found, TRUTH[found["name"]])


@pytest.mark.parametrize("tool,fmt,layout", cases(["tfrecorder"]))
def test_the_source_counts_every_object_and_says_what_it_decided(exports, tool, fmt, layout):
    """Every box read, none skipped, clipped or in a rejected file; the image without
    boxes that has no XML (Datumaro's VOC lists it in ImageSets only) counted as such; and
    globox's category id 0 shifted with a note."""
    table = load_table(source_of(tool, fmt, exports(tool, fmt)), task="detection")
    counts = table.annotations
    assert counts.objects == sum(len(p.boxes) for p in TRUTH.values())
    assert (counts.skipped, counts.clipped) == (0, 0)
    assert table.skipped_annotations is None and table.rejected_rows is None
    assert counts.unannotated_images == ((tool, fmt) == ("datumaro", "voc"))
    if (tool, fmt) == ("globox", "coco"):  # sorted ids from 0: 'car' is category 0
        assert len(counts.notes) == 3 and all(
            "uses category id 0 ('car')" in note and "shifted up by 1" in note
            for note in counts.notes)
    else:
        assert counts.notes == ()


def test_a_datumaro_voc_export_without_sizes_is_refused_for_its_size(images, tmp_path):
    """Datumaro writes no `<size>` for an image whose size it has not read
    (`Image.from_file(path)`); boxes are fractions of it, so each such XML is a rejected
    row with that reason, as the Object Detection API's converter refuses it (a KeyError
    there), never records with boxes made of a guess."""
    folder = export("datumaro", images, tmp_path / "datumaro", formats=["voc"],
                    sizes=False)["voc"]
    xml = (folder / "Annotations" / "harbour view 09.xml").read_text()
    assert "<bndbox>" in xml and "<size>" not in xml
    with pytest.raises(TooManyRejectedError, match="no usable <size>"):
        tfrecorder.convert(str(folder), str(tmp_path / "out"), progress=False, num_workers=1)


def test_ground_truth_is_what_the_exports_need():
    """The truth holds what the exports are to carry over (module doc)."""
    assert len(TRUTH) == 15 and len({(p.width, p.height) for p in TRUTH.values()}) == 15
    assert TRUTH["harbour view 09.jpg"].split == "validation"
    assert TRUTH["alley 16.jpg"].split == "test"
    assert [p.name for p in TRUTH.values() if not p.boxes] == [EMPTY]
    assert {b.label for p in TRUTH.values() for b in p.boxes} == set(CLASSES)
    assert {len(p.boxes) for p in TRUTH.values()} == {0, 1, 2, 3, 4}
    assert all(min(b.xmax - b.xmin, b.ymax - b.ymin) >= 40 and b.xmax <= p.width
               and b.ymax <= p.height for p in TRUTH.values() for b in p.boxes)
    assert os.sep not in "".join(TRUTH)

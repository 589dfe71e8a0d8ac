"""COCO files through Model Garden's own converter and through tfrecorder (issue 38).

The same COCO files go through `official/vision/data/create_coco_tf_record.py`'s
`create_tf_example` (tf-models-official 2.20.0, pinned in tests/interop.py, with
pycocotools; `include_masks=True`) and through `tfrecorder.convert(layout="tf_models")`,
and the records are compared key by key: boxes to 1e-6, class ids and text, area,
is_crowd, masks pixel for pixel, source_id, filename, the image's bytes and sha256.
The fixtures: the annotations of the Object Detection API's create_coco_tf_record_test.py,
a crowd RLE, category ids with gaps, images without annotations, and annotations the
converter skips. Model Garden writes `image/format` "jpg" whatever the file; we write
what the bytes are ("jpeg", "png"): that key is left out of the comparison.

Then Model Garden's `COCOEvaluator`, given the original instances.json (its standard
set-up), scores perfect predictions read back from our records at AP 1.000, also for a
file whose image ids start at 0.
"""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from model_garden import coco_tools
from PIL import Image

import tfrecorder

OD_API_CATEGORIES = [{"id": 1, "name": "dog"}, {"id": 2, "name": "cat"},
                     {"id": 3, "name": "human"}]


def rle_of_box(x, y, w, h, height, width) -> list[int]:
    """An uncompressed RLE (as COCO's crowds are written) of a box's pixels."""
    mask = np.zeros((height, width), np.uint8)
    mask[y:y + h, x:x + w] = 1
    runs, values = [], mask.T.reshape(-1)  # down the columns
    current, length = 0, 0
    for value in values.tolist():
        if value != current:
            runs.append(length)
            current, length = value, 0
        length += 1
    runs.append(length)
    return runs


FIXTURES = {
    # create_coco_tf_record_test.py's test_create_tf_example: area .5, iscrowd False.
    "od_api_box": ([{"file_name": "tmp_image.jpg", "height": 256, "width": 256, "id": 11}],
                   [{"area": .5, "iscrowd": False, "image_id": 11, "bbox": [64, 64, 128, 128],
                     "category_id": 2, "id": 1000,
                     "segmentation": [[64, 64, 192, 64, 192, 192, 64, 192]]}],
                   OD_API_CATEGORIES),
    # its test_create_tf_example_with_instance_masks: two triangles, one mask.
    "od_api_mask": ([{"file_name": "tmp_image.jpg", "height": 8, "width": 8, "id": 11}],
                    [{"area": .5, "iscrowd": False, "image_id": 11, "bbox": [0, 0, 8, 8],
                      "segmentation": [[4, 0, 0, 0, 0, 4], [8, 4, 4, 8, 8, 8]],
                      "category_id": 1, "id": 1000}],
                    [{"id": 1, "name": "dog"}]),
    # ids with gaps (18, 90; 44 unused), a crowd RLE, an image without annotations, the
    # annotations the converter skips (zero size, beyond the right or bottom edge) and
    # one it keeps touching both edges; file names in a folder; image ids from 0.
    "mixed": ([{"file_name": "sub/a.jpg", "height": 48, "width": 64, "id": 0},
               {"file_name": "b.png", "height": 40, "width": 30, "id": 7},
               {"file_name": "c.jpg", "height": 48, "width": 64, "id": 139}],
              [{"id": 1, "image_id": 0, "category_id": 90, "bbox": [4.5, 6.25, 20, 10.5],
                "area": 180.5, "iscrowd": 0,
                "segmentation": [[4.5, 6.25, 24.5, 6.25, 24.5, 16.75, 4.5, 16.75]]},
               {"id": 2, "image_id": 0, "category_id": 18, "bbox": [30, 10, 20, 30],
                "area": 600, "iscrowd": 1,
                "segmentation": {"counts": rle_of_box(30, 10, 20, 30, 48, 64),
                                 "size": [48, 64]}},
               {"id": 3, "image_id": 0, "category_id": 18, "bbox": [10, 10, 0, 5],
                "area": 0, "iscrowd": 0, "segmentation": [[10, 10, 10, 15, 10, 12]]},
               {"id": 4, "image_id": 0, "category_id": 1, "bbox": [50, 30, 14.5, 10],
                "area": 145, "iscrowd": 0,
                "segmentation": [[50, 30, 64.5, 30, 64.5, 40, 50, 40]]},
               {"id": 5, "image_id": 0, "category_id": 1, "bbox": [44, 28, 20, 20],
                "area": 400, "iscrowd": 0,
                "segmentation": [[44, 28, 64, 28, 64, 48, 44, 48], [50, 30, 55, 30, 55, 35]]},
               {"id": 6, "image_id": 139, "category_id": 90, "bbox": [1, 40, 10, 8.5],
                "area": 85, "iscrowd": 0, "segmentation": [[1, 40, 11, 40, 11, 48.5]]},
               {"id": 7, "image_id": 139, "category_id": 1, "bbox": [1, 2, 3, 4],
                "area": 12, "iscrowd": 0, "segmentation": [[1, 2, 4, 2, 4, 6, 1, 6]]}],
              [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"},
               {"id": 44, "name": "bottle"}, {"id": 90, "name": "toothbrush"}]),
}


def write_fixture(folder, name) -> tuple[str, dict]:
    images, annotations, categories = FIXTURES[name]
    rng = np.random.default_rng(0)
    for image in images:
        path = os.path.join(folder, image["file_name"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pixels = rng.integers(0, 256, (image["height"], image["width"], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path)
    path = os.path.join(folder, "instances.json")
    data = {"images": images, "annotations": annotations, "categories": categories}
    with open(path, "w") as f:
        json.dump(data, f)
    return path, data


def features(serialized: bytes) -> dict:
    feature = tf.train.Example.FromString(serialized).features.feature
    return {key: list(value.float_list.value or value.int64_list.value
                      or value.bytes_list.value) for key, value in feature.items()}


def model_garden_records(folder, data) -> tuple[dict, int]:
    """Model Garden's record of each image, by source_id, and the annotations it skipped."""
    convert = coco_tools().create_coco_tf_record.create_tf_example
    names = {c["id"]: c["name"] for c in data["categories"]}
    found, skipped = {}, 0
    for image in data["images"]:
        annotations = [a for a in data["annotations"] if a["image_id"] == image["id"]]
        example, num_skipped = convert(image, [str(folder)], bbox_annotations=annotations,
                                       id_to_name_map=names, include_masks=True)
        skipped += num_skipped
        found[str(image["id"])] = features(example.SerializeToString())
    return found, skipped


def our_records(folder) -> dict:
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".tfrecord"):
            for record in tf.data.TFRecordDataset(os.path.join(folder, name)):
                values = features(record.numpy())
                found[values["image/source_id"][0].decode()] = values
    return found


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))


FLOATS = ("image/object/bbox/xmin", "image/object/bbox/xmax", "image/object/bbox/ymin",
          "image/object/bbox/ymax", "image/object/area")


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_records_are_model_gardens_key_by_key(tmp_path, fixture):
    path, data = write_fixture(tmp_path, fixture)
    theirs, skipped = model_garden_records(tmp_path, data)
    result = tfrecorder.convert(path, str(tmp_path / "out"), layout="tf_models",
                                split="train", progress=False, num_workers=1)
    ours = our_records(tmp_path / "out")
    assert ours.keys() == theirs.keys()
    assert sum(result.skipped_annotations.values()) == skipped
    for source_id, reference in theirs.items():
        record = ours[source_id]
        for key, expected in reference.items():
            found = record.get(key, [])  # no objects: we write empty lists, they none
            if key == "image/format":  # "jpg" for any file there; what the bytes are here
                continue
            if key in FLOATS:
                np.testing.assert_allclose(found, expected, atol=1e-6, err_msg=key)
            elif key == "image/object/mask":
                assert len(found) == len(expected)
                for ours_png, their_png in zip(found, expected):
                    np.testing.assert_array_equal(pixels(ours_png), pixels(their_png))
            else:
                assert found == expected, (source_id, key)
        # Where they write no objects (none, or all skipped) we write empty lists.
        assert all(not record[key] for key in set(record) - set(reference)
                   if key.startswith("image/object/")), source_id
    label_map = (tmp_path / "out" / "label_map.pbtxt").read_text()
    assert [int(line.split()[1]) for line in label_map.splitlines()
            if line.strip().startswith("id:")] == [c["id"] for c in sorted(
                data["categories"], key=lambda c: c["id"])]


def test_the_od_api_tests_values_hold(tmp_path):
    """create_coco_tf_record_test.py's own expectations, of our records."""
    path, _ = write_fixture(tmp_path, "od_api_mask")
    tfrecorder.convert(path, str(tmp_path / "out"), layout="tf_models", split="train",
                       progress=False, num_workers=1)
    record = our_records(tmp_path / "out")["11"]
    assert record["image/object/bbox/xmax"] == [1.0] and record["image/filename"] == [
        b"tmp_image.jpg"]
    assert pixels(record["image/object/mask"][0]).tolist() == [
        [1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1]]


def perfect_predictions(records: dict) -> list[dict]:
    """One batch a record with objects, as a detector's output: its boxes in pixels
    (ymin, xmin, ymax, xmax), its classes, score 1, keyed by its source_id read as Model
    Garden's eval does; padded, as a detector pads them, to the most objects an image
    has with class 0 and score 0 (the evaluator reads every batch's detections up to the
    first batch's number)."""
    found, most = [], max(len(v.get("image/object/class/label", [])) for v in records.values())
    for values in records.values():
        classes = values.get("image/object/class/label", [])
        if not classes:
            continue
        height, width = values["image/height"][0], values["image/width"][0]
        boxes = np.zeros((most, 4), np.float32)
        boxes[:len(classes)] = np.stack([
            np.array(values[f"image/object/bbox/{k}"]) * size for k, size in
            (("ymin", height), ("xmin", width), ("ymax", height), ("xmax", width))], axis=1)
        padding = most - len(classes)
        found.append({"source_id": np.array([int(values["image/source_id"][0])]),
                      "num_detections": np.array([len(classes)]),
                      "detection_boxes": boxes[None],
                      "detection_classes": np.array([classes + [0] * padding]),
                      "detection_scores": np.array([[1.0] * len(classes) + [0.0] * padding],
                                                   np.float32)})
    return found


@pytest.mark.parametrize("first_id", [0, 21])
def test_coco_evaluator_scores_perfect_predictions_from_our_records_at_ap_1(tmp_path,
                                                                           first_id):
    # Listed in no order of their ids: an image's position is not its id.
    images = [{"file_name": f"{i}.jpg", "height": 48, "width": 64, "id": first_id + i}
              for i in (2, 0, 1)]
    annotations = [{"id": 1, "image_id": first_id, "category_id": 90,
                    "bbox": [4, 6, 20, 10.5], "area": 210, "iscrowd": 0},
                   {"id": 2, "image_id": first_id, "category_id": 3,
                    "bbox": [30, 20, 30, 25], "area": 750, "iscrowd": 0},
                   {"id": 3, "image_id": first_id + 2, "category_id": 2,
                    "bbox": [0, 0, 64, 48], "area": 3072, "iscrowd": 0}]
    categories = [{"id": 2, "name": "bicycle"}, {"id": 3, "name": "car"},
                  {"id": 90, "name": "toothbrush"}]
    FIXTURES["evaluated"] = (images, annotations, categories)
    try:
        path, _ = write_fixture(tmp_path, "evaluated")
    finally:
        del FIXTURES["evaluated"]
    tfrecorder.convert(path, str(tmp_path / "out"), layout="tf_models", split="validation",
                       progress=False, num_workers=1)
    evaluator = coco_tools().coco_evaluator.COCOEvaluator(
        annotation_file=path, include_mask=False, need_rescale_bboxes=False)
    for predictions in perfect_predictions(our_records(tmp_path / "out")):
        evaluator.update_state({}, {k: tf.constant(v) for k, v in predictions.items()})
    metrics = evaluator.result()
    assert metrics["AP"] == pytest.approx(1.0) and metrics["AP50"] == pytest.approx(1.0)

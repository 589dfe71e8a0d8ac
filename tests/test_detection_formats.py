"""The same annotations as a COCO file, a Pascal VOC folder, a YOLO dataset and an AutoML
CSV give the same records (issue 38): boxes (YOLO's rounded centres to 1e-6 relative),
class ids and names under one label map, the image, its size and file name, read back
with TensorFlow from each dataset's shards."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import tfrecorder

HEIGHT, WIDTH = 60, 80
# The classes, with the ids of a label map that every conversion is given.
IDS = {"cat": 17, "dog": 18, "zebra": 24}
LABEL_MAP = "".join(f"item {{ id: {i} name: '{name}' }}\n" for name, i in IDS.items())
# Each image's boxes, (class, x, y, width, height) in pixels; the third has none.
SCENES = {
    "a.png": [("cat", 4, 6, 20, 30), ("zebra", 40, 2, 39, 57)],
    "b.png": [("dog", 0, 0, 80, 60)],
    "c.png": [],
    "d.png": [("dog", 10, 11, 13, 17), ("cat", 50, 20, 7, 9), ("dog", 1, 40, 70, 19)],
}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One folder holding the images and every format's annotations of them."""
    root = str(tmp_path_factory.mktemp("formats"))
    images = os.path.join(root, "images", "train")
    labels = os.path.join(root, "labels", "train")
    os.makedirs(images)
    os.makedirs(labels)
    rng = np.random.RandomState(0)
    coco = {"images": [], "annotations": [],
            "categories": [{"id": i, "name": name} for name, i in IDS.items()]}
    csv_lines = []
    for k, (name, objects) in enumerate(SCENES.items(), start=1):
        Image.fromarray(rng.randint(0, 255, (HEIGHT, WIDTH, 3), np.uint8)).save(
            os.path.join(images, name))
        coco["images"].append({"id": k, "file_name": f"images/train/{name}",
                               "width": WIDTH, "height": HEIGHT})
        yolo, voc = [], []
        for label, x, y, w, h in objects:
            coco["annotations"].append({
                "id": len(coco["annotations"]) + 1, "image_id": k,
                "category_id": IDS[label], "bbox": [x, y, w, h], "area": w * h,
                "iscrowd": 0})
            yolo.append(f"{sorted(IDS).index(label)} {(x + w / 2) / WIDTH:.6f} "
                        f"{(y + h / 2) / HEIGHT:.6f} {w / WIDTH:.6f} {h / HEIGHT:.6f}\n")
            voc.append(f"<object><name>{label}</name><difficult>0</difficult><bndbox>"
                       f"<xmin>{x}</xmin><ymin>{y}</ymin><xmax>{x + w}</xmax>"
                       f"<ymax>{y + h}</ymax></bndbox></object>")
            csv_lines.append(f"TRAIN,images/train/{name},{label},{x / WIDTH!r},"
                             f"{y / HEIGHT!r},,,{(x + w) / WIDTH!r},{(y + h) / HEIGHT!r},,\n")
        if not objects:
            csv_lines.append(f"TRAIN,images/train/{name}\n")
        with open(os.path.join(labels, name[:-4] + ".txt"), "w") as f:
            f.writelines(yolo)
        with open(os.path.join(images, name[:-4] + ".xml"), "w") as f:
            f.write(f"<annotation><filename>{name}</filename><size><width>{WIDTH}</width>"
                    f"<height>{HEIGHT}</height><depth>3</depth></size>{''.join(voc)}"
                    "</annotation>")
    with open(os.path.join(root, "instances.json"), "w") as f:
        json.dump(coco, f)
    with open(os.path.join(root, "automl.csv"), "w") as f:
        f.writelines(csv_lines)
    with open(os.path.join(root, "data.yaml"), "w") as f:
        f.write(f"names: {sorted(IDS)}\ntrain: images/train\n")
    with open(os.path.join(root, "label_map.pbtxt"), "w") as f:
        f.write(LABEL_MAP)
    return root


def records_by_file(folder) -> dict[str, dict]:
    """Every record of every split, by its image's file name."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.tfrecord"))):
        for serialized in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(serialized.numpy()).features.feature
            values = {key: list(getattr(value, value.WhichOneof("kind")).value)
                      for key, value in feature.items()}
            found[os.path.basename(values["image/filename"][0].decode())] = values
    return found


SOURCES = {"coco": "instances.json", "voc": "images/train", "yolo": "data.yaml",
           "automl": "automl.csv"}


@pytest.fixture(scope="module")
def written(root, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    found = {}
    for name, source in SOURCES.items():
        folder = str(out / name)
        tfrecorder.convert(os.path.join(root, source), folder, layout="tf_models",
                           label_vocabulary=os.path.join(root, "label_map.pbtxt"),
                           task="detection", progress=False, num_workers=1)
        found[name] = records_by_file(folder)
    return found


@pytest.mark.parametrize("name", ["voc", "yolo", "automl"])
def test_every_format_gives_the_records_coco_gives(written, name):
    coco, other = written["coco"], written[name]
    assert sorted(other) == sorted(coco) == sorted(SCENES)
    for file_name, theirs in coco.items():
        ours = other[file_name]
        for key in ("image/encoded", "image/key/sha256", "image/height", "image/width",
                    "image/format", "image/object/class/label", "image/object/class/text"):
            assert ours[key] == theirs[key], (name, file_name, key)
        for corner in ("ymin", "xmin", "ymax", "xmax"):
            key = f"image/object/bbox/{corner}"
            np.testing.assert_allclose(ours[key], theirs[key], atol=1e-6, rtol=0,
                                       err_msg=f"{name} {file_name} {key}")


def test_the_records_hold_the_label_maps_ids_and_the_pixel_boxes(written):
    for file_name, objects in SCENES.items():
        record = written["coco"][file_name]
        assert record["image/object/class/label"] == [IDS[label] for label, *_ in objects]
        np.testing.assert_allclose(record["image/object/bbox/xmax"],
                                   [(x + w) / WIDTH for _, x, _, w, _ in objects],
                                   atol=1e-7)

"""Detection and segmentation records as written, read back with TensorFlow's own parser
(`tf.train.Example`), in both layouts: boxes, classes, instance masks, class masks, and
what resizing does to each."""

from __future__ import annotations

import glob
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from detection_data import CLASSES, HEIGHT, WIDTH, scenes, write_detection, write_segmentation
from helpers import read_manifest
from PIL import Image

import tfrecorder
from tfrecorder.errors import OptionError
from tfrecorder.write.annotations import instance_masks, rle_decode


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    return scenes(str(tmp_path_factory.mktemp("scenes")))


def records(folder) -> list[dict]:
    """Every record, as TensorFlow parses it, keyed by its image's file name."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.tfrecord"))):
        for serialized in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(serialized.numpy()).features.feature
            values = {k: list(v.float_list.value or v.int64_list.value or v.bytes_list.value)
                      for k, v in feature.items()}
            name = (values.get("image_name") or values["image/filename"])[0].decode()
            found[name] = values
    return found


def by_name(drawn) -> dict:
    return {os.path.basename(scene["image_uri"]): scene for scene in drawn}


def test_tfrecorder_layout_stores_every_box_and_class(drawn, tmp_path):
    write_detection(str(tmp_path), drawn)
    manifest = read_manifest(tmp_path)
    assert manifest["task"] == "detection" and "layout" not in manifest
    assert manifest["features"]["objects/bbox"] == {"dtype": "float32", "shape": [None, 4],
                                                    "role": "objects"}
    assert manifest["features"]["objects/label"]["vocabulary"] == sorted(
        {c for s in drawn for c in s["labels"]})
    vocabulary = manifest["labels"]["vocabulary"]
    found = records(tmp_path)
    assert len(found) == len(drawn)
    for name, scene in by_name(drawn).items():
        record = found[name]
        boxes = np.reshape(record.get("objects/bbox", []), (-1, 4))
        np.testing.assert_allclose(boxes, np.reshape(scene["boxes"], (-1, 4)), atol=1e-6)
        assert [vocabulary[i] for i in record.get("objects/label", [])] == scene["labels"]
        assert "label" not in record
    assert any(not s["boxes"] for s in drawn)  # images without boxes are records too


def test_tf_models_layout_stores_the_object_detection_apis_keys(drawn, tmp_path):
    write_detection(str(tmp_path), drawn, layout="tf_models")
    manifest = read_manifest(tmp_path)
    assert manifest["layout"] == "tf_models"
    vocabulary = manifest["labels"]["vocabulary"]
    label_map = (tmp_path / "label_map.pbtxt").read_text()
    for i, name in enumerate(vocabulary, start=1):
        assert f'item {{\n  id: {i}\n  name: "{name}"\n  display_name: "{name}"\n}}' in label_map
    for name, scene in by_name(drawn).items():
        record = found = records(tmp_path)[name]
        boxes = np.reshape(scene["boxes"], (-1, 4))
        for column, key in enumerate(("ymin", "xmin", "ymax", "xmax")):
            np.testing.assert_allclose(found.get(f"image/object/bbox/{key}", []),
                                       boxes[:, column], atol=1e-6)
        ids = record.get("image/object/class/label", [])
        assert [vocabulary[i - 1] for i in ids] == scene["labels"]  # 1-based
        assert [t.decode() for t in record.get("image/object/class/text", [])] == \
            scene["labels"]
        assert record["image/height"] == [HEIGHT] and record["image/width"] == [WIDTH]
        assert record["image/format"] == [b"png"]
        stored = record["image/encoded"][0]
        import hashlib
        assert record["image/key/sha256"] == [hashlib.sha256(stored).hexdigest().encode()]
        assert int(record["image/source_id"][0]) in range(len(drawn))
        np.testing.assert_array_equal(tf.io.decode_png(stored).numpy(), scene["pixels"])
        assert not any(k in record for k in ("image", "split", "label", "objects/bbox"))


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
def test_resizing_keeps_boxes_exact_and_masks_binary(drawn, tmp_path, layout):
    """Boxes are relative, so a resize changes none; each object's mask is its polygon
    drawn at the stored size: 0s and 1s, the rectangle scaled."""
    write_detection(str(tmp_path), drawn, masks=True, layout=layout, image_size=(24, 32))
    mask_key = "objects/mask" if layout == "tfrecorder" else "image/object/mask"
    found = records(tmp_path)
    for name, scene in by_name(drawn).items():
        record = found[name]
        masks = [tf.io.decode_png(m).numpy()[:, :, 0] for m in record.get(mask_key, [])]
        assert len(masks) == len(scene["boxes"])
        for mask, (ymin, xmin, ymax, xmax) in zip(masks, scene["boxes"]):
            assert mask.shape == (24, 32) and set(np.unique(mask)) <= {0, 1}
            ys, xs = np.nonzero(mask)
            # PIL fills a polygon's edges inclusively: within a pixel of the scaled box.
            assert abs(ys.min() - ymin * 24) <= 1 and abs(ys.max() + 1 - ymax * 24) <= 1
            assert abs(xs.min() - xmin * 32) <= 1 and abs(xs.max() + 1 - xmax * 32) <= 1
        key = "objects/bbox" if layout == "tfrecorder" else None
        if key:
            np.testing.assert_allclose(np.reshape(record.get(key, []), (-1, 4)),
                                       np.reshape(scene["boxes"], (-1, 4)), atol=1e-6)


def test_segmentation_masks_keep_their_class_ids_when_resized(drawn, tmp_path):
    write_segmentation(str(tmp_path), drawn, image_size=(24, 32), layout="tf_models")
    found = records(tmp_path)
    for name, scene in by_name(drawn).items():
        stored = tf.io.decode_png(found[name]["image/segmentation/class/encoded"][0]).numpy()
        assert stored.shape == (24, 32, 1)
        expected = np.asarray(Image.fromarray(scene["mask"]).resize(
            (32, 24), Image.Resampling.NEAREST))
        np.testing.assert_array_equal(stored[:, :, 0], expected)
        assert set(np.unique(stored)) <= set(np.unique(scene["mask"]))
        assert found[name]["image/segmentation/class/format"] == [b"png"]


def test_a_mask_of_another_size_than_its_image_is_a_rejected_row(drawn, tmp_path):
    bad = dict(drawn[1], mask_uri=str(tmp_path / "small_mask.png"))
    Image.fromarray(np.zeros((10, 10), np.uint8)).save(bad["mask_uri"])
    result = write_segmentation(str(tmp_path / "out"), [drawn[0], bad, drawn[2]])
    assert result.num_records == 2 and result.num_rejected == 1
    rejected = pd.read_csv(tmp_path / "out" / "rejected.csv")
    assert "is 10x10 but its image is 64x48" in rejected["reason"][0]


def test_run_length_encoded_masks_decode_as_pycocotools_writes_them():
    """COCO's RLE runs go down the columns, starting with 0s; the compressed string is
    pycocotools' own encoding (this one is its encoding of the same mask)."""
    mask = np.zeros((4, 5), np.uint8)
    mask[1:3, 1:4] = 1
    runs = [5, 2, 2, 2, 2, 2, 5]
    np.testing.assert_array_equal(rle_decode({"size": [4, 5], "counts": runs}), mask)
    np.testing.assert_array_equal(rle_decode({"size": [4, 5], "counts": "5220003"}), mask)


def test_both_engines_write_the_same_detection_and_segmentation_bytes(drawn, tmp_path):
    write_detection(str(tmp_path / "local"), drawn, masks=True, layout="tf_models")
    write_detection(str(tmp_path / "beam"), drawn, masks=True, layout="tf_models",
                    runner="DirectRunner")
    for name in ("train-00000-of-00001.tfrecord", "label_map.pbtxt", "dataset.json"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "beam" / name).read_bytes()
    write_segmentation(str(tmp_path / "local-seg"), drawn, image_size=(24, 32))
    write_segmentation(str(tmp_path / "beam-seg"), drawn, image_size=(24, 32),
                       runner="DirectRunner")
    for name in ("train-00000-of-00001.tfrecord", "dataset.json"):
        assert (tmp_path / "local-seg" / name).read_bytes() == \
            (tmp_path / "beam-seg" / name).read_bytes()
    assert records(tmp_path / "beam-seg")["scene_01.png"]["segmentation_mask"]


def test_tf_models_needs_images_that_decode(drawn, tmp_path):
    with pytest.raises(OptionError, match="image_format"):
        write_detection(str(tmp_path / "raw"), drawn, layout="tf_models", image_format="raw")
    table = pd.DataFrame({"x": [1, 2], "label": [0, 1]})
    with pytest.raises(OptionError, match="no images"):
        tfrecorder.convert(table, str(tmp_path / "none"), layout="tf_models", progress=False)
    assert CLASSES


@pytest.fixture(scope="module")
def coco_mask():
    """pycocotools' `mask` module (COCO's own C mask code), from its own folder."""
    import sys

    from interop import interop_path

    folder = str(interop_path("pycocotools"))
    sys.path.insert(0, folder)
    try:
        from pycocotools import mask
    finally:
        sys.path.remove(folder)
    return mask


# pycocotools 2.0.11's decode passes copy= to an old-style __array__ (NumPy 2 warns).
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_polygons_are_drawn_pixel_for_pixel_as_pycocotools_draws_them(coco_mask):
    rng = np.random.default_rng(0)
    for _ in range(40):
        height, width = (int(v) for v in rng.integers(5, 60, 2))
        k = int(rng.integers(3, 12))
        polygon = np.stack([rng.uniform(-2, width + 2, k), rng.uniform(-2, height + 2, k)],
                           axis=1).ravel().round(2).tolist()
        expected = coco_mask.decode(coco_mask.merge(
            coco_mask.frPyObjects([polygon], height, width)))
        found = instance_masks({"size": [height, width], "masks": [[polygon]]},
                               (height, width))[0]
        np.testing.assert_array_equal(found, expected)


def test_run_length_encoded_masks_decode_as_pycocotools_does(coco_mask):
    rng = np.random.default_rng(1)
    for _ in range(20):
        height, width = (int(v) for v in rng.integers(1, 50, 2))
        mask = (rng.random((height, width)) < rng.random()).astype(np.uint8)
        rle = coco_mask.encode(np.asfortranarray(mask))
        as_json = {"size": rle["size"], "counts": rle["counts"].decode()}  # as COCO stores it
        np.testing.assert_array_equal(rle_decode(as_json), mask)


def test_automl_csv_jsonl_and_coco_of_the_same_objects_write_the_same_records(tmp_path):
    """tests/data/detection's three files describe the same objects: the CSV and the
    JSONL give the same shard bytes; COCO (no splits; areas and crowds besides) the same
    boxes and classes, image by image."""
    import shutil

    data = os.path.join(os.path.dirname(__file__), "data", "detection")
    (tmp_path / "img").mkdir()
    for name, size in (("a", (200, 100)), ("b", (50, 50)), ("c", (400, 300))):
        Image.new("RGB", size, (40, 90, 140)).save(tmp_path / "img" / f"{name}.jpg")
    for name in ("automl.csv", "vertex.jsonl", "coco.json"):
        shutil.copy(os.path.join(data, name), tmp_path / name)
    written = {}
    for name in ("automl.csv", "vertex.jsonl", "coco.json"):
        out = tmp_path / f"out-{name}"
        tfrecorder.convert(str(tmp_path / name), str(out), progress=False,
                           **({"split": "train"} if name == "coco.json" else {}))
        written[name] = out
    shards = sorted(os.listdir(written["automl.csv"]))
    assert shards == sorted(os.listdir(written["vertex.jsonl"]))
    for name in shards:
        if name.endswith(".tfrecord"):
            assert (written["automl.csv"] / name).read_bytes() == \
                (written["vertex.jsonl"] / name).read_bytes()
    csv_records, coco_records = records(written["automl.csv"]), records(written["coco.json"])
    # COCO's image_name is its file_name as written (img/a.jpg), as Model Garden's
    # converter writes image/filename; a CSV's, its path's base name.
    assert csv_records.keys() == {"a.jpg", "b.jpg", "c.jpg"}
    assert coco_records.keys() == {"img/a.jpg", "img/b.jpg", "img/c.jpg"}
    for name, record in csv_records.items():
        coco_record = coco_records[f"img/{name}"]
        np.testing.assert_allclose(record.get("objects/bbox", []),
                                   coco_record.get("objects/bbox", []), atol=1e-6)
        assert record.get("objects/label", []) == coco_record.get("objects/label", [])
        assert coco_record["image_id"] == [{"a.jpg": 7, "b.jpg": 3, "c.jpg": 9}[name]]

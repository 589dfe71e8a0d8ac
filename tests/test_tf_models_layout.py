"""`layout="tf_models"` records, as tfrecorder writes them, decoded by TensorFlow Model
Garden's own decoders and parsers (tests/model_garden.py loads the real files of
tf-models-official): detection with instance masks, classification, segmentation."""

from __future__ import annotations

import glob
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from detection_data import scenes, write_detection, write_segmentation
from helpers import read_manifest, write_image
from model_garden import (
    classification_eval_input,
    decode_classification,
    decode_detection,
    decode_segmentation,
    detection_eval_groundtruths,
    model_garden,
)
from PIL import Image

import tfrecorder


@pytest.fixture(scope="module", autouse=True)
def garden():
    return model_garden()


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    return scenes(str(tmp_path_factory.mktemp("scenes")))


def serialized_records(folder) -> list[bytes]:
    return [r.numpy() for path in sorted(glob.glob(os.path.join(folder, "*.tfrecord")))
            for r in tf.data.TFRecordDataset(path)]


def scene_of(serialized: bytes, drawn) -> dict:
    """The scene a record holds, by its image/filename."""
    name = tf.train.Example.FromString(serialized).features.feature[
        "image/filename"].bytes_list.value[0].decode()
    return next(s for s in drawn if os.path.basename(s["image_uri"]) == name)


@pytest.mark.parametrize("image_size", [None, (24, 32)])
def test_detection_records_decode_with_model_gardens_decoder(drawn, tmp_path, image_size):
    write_detection(str(tmp_path), drawn, masks=True, layout="tf_models",
                    image_size=image_size)
    vocabulary = read_manifest(tmp_path)["labels"]["vocabulary"]
    records = serialized_records(tmp_path)
    assert len(records) == len(drawn)
    for serialized in records:
        decoded = decode_detection(serialized)
        height, width = decoded["image"].shape[:2]
        assert (decoded["height"], decoded["width"]) == (height, width)
        scene = scene_of(serialized, drawn)
        boxes = np.reshape(scene["boxes"], (-1, 4))
        np.testing.assert_allclose(decoded["groundtruth_boxes"], boxes, atol=1e-6)
        assert [vocabulary[i - 1] for i in decoded["groundtruth_classes"]] == scene["labels"]
        assert not decoded["groundtruth_is_crowd"].any()
        masks = decoded["groundtruth_instance_masks"]
        assert masks.shape == (len(boxes), height, width)
        for mask, (ymin, xmin, ymax, xmax) in zip(masks, boxes):
            assert set(np.unique(mask)) <= {0.0, 1.0}
            ys, xs = np.nonzero(mask)
            assert abs(ys.min() - ymin * height) <= 1 and abs(ys.max() + 1 - ymax * height) <= 1
            assert abs(xs.min() - xmin * width) <= 1 and abs(xs.max() + 1 - xmax * width) <= 1
        # Its evaluation parser reads the source id as a number, and boxes in pixels.
        truths = detection_eval_groundtruths(serialized)
        assert truths["source_id"] >= 0
        np.testing.assert_allclose(truths["boxes"][:len(boxes)],
                                   boxes * [height, width, height, width], atol=1e-3)


def test_source_ids_are_distinct_numbers(drawn, tmp_path):
    write_detection(str(tmp_path), drawn, masks=True, layout="tf_models")
    ids = [detection_eval_groundtruths(s)["source_id"] for s in serialized_records(tmp_path)]
    assert len(set(ids)) == len(drawn)


def test_classification_records_decode_with_model_gardens_decoder(tmp_path):
    paths = [write_image(tmp_path / f"{i}.jpg", size=(40, 30), seed=i) for i in range(4)]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": paths,
                          "label": ["cat", "dog", "cat", "emu"]})
    tfrecorder.convert(table, str(tmp_path / "out"), layout="tf_models", progress=False)
    vocabulary = read_manifest(tmp_path / "out")["labels"]["vocabulary"]
    from pathlib import Path
    sources = {Path(p).read_bytes(): label for p, label in zip(paths, table["label"])}
    for serialized in serialized_records(tmp_path / "out"):
        decoded = decode_classification(serialized)
        assert vocabulary[decoded["image/class/label"]] == sources[decoded["image/encoded"]]
        image, label = classification_eval_input(serialized)  # ImageNet's JPEG-only path
        assert label == decoded["image/class/label"] and image.shape == (32, 32, 3)


@pytest.mark.parametrize("image_size", [None, (24, 32)])
def test_segmentation_records_decode_with_model_gardens_decoder(drawn, tmp_path, image_size):
    write_segmentation(str(tmp_path), drawn, layout="tf_models", image_size=image_size)
    for serialized in serialized_records(tmp_path):
        decoded = decode_segmentation(serialized)
        image = tf.io.decode_png(decoded["image/encoded"]).numpy()
        scene = scene_of(serialized, drawn)
        height, width = image.shape[:2]
        expected = np.asarray(Image.fromarray(scene["mask"]).resize(
            (width, height), Image.Resampling.NEAREST))
        np.testing.assert_array_equal(decoded["label"], expected)
        np.testing.assert_array_equal(decoded["image"], image)

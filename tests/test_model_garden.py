"""Records in TensorFlow Model Garden's layout decode with Model Garden's own decoders.

The records here are built by hand with tf.train.Example, in the layout Model Garden's COCO
converter writes; they show the harness (tests/model_garden.py, tests/interop.py) works and
pin down what the decoders ask of a record. The writer's `layout="tf_models"` output is to be
run through the same `decode_*` helpers.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers import image_bytes, make_image
from model_garden import (
    classification_eval_input,
    decode_classification,
    decode_detection,
    decode_segmentation,
    detection_eval_groundtruths,
    model_garden,
    process_source_id,
)
from PIL import Image

H, W = 24, 32


@pytest.fixture(scope="module", autouse=True)
def garden():
    """Loads Model Garden once (installing it on first use); skips the module if PyPI is
    out of reach and it is not installed yet."""
    return model_garden()


def _bytes(*values: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def _ints(*values: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _floats(*values: float) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def _record(features: dict) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _png(array: np.ndarray, mode: str | None = None) -> bytes:
    return image_bytes(Image.fromarray(array, mode), "PNG")


def _pixels(encoded: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB"))


IMAGE_PNG = image_bytes(make_image((W, H), seed=3), "PNG")
IMAGE_JPEG = image_bytes(make_image((W, H), seed=4), "JPEG", quality=90)

# Two objects, in pixels of the 24x32 image: a cat (a rectangle) and a crowd of birds (a
# triangle inside its box).
BOXES_PX = np.array([[6, 4, 18, 12], [2, 16, 10, 30]], np.float32)  # ymin, xmin, ymax, xmax
MASKS = np.zeros((2, H, W), np.uint8)
MASKS[0, 6:18, 4:12] = 1
for row in range(8):
    MASKS[1, 2 + row, 16:16 + 2 * row + 1] = 1
AREAS = MASKS.sum(axis=(1, 2)).astype(np.float32)  # 96 and 64


def _image_features(encoded=IMAGE_PNG, fmt=b"png", source_id=b"17") -> dict:
    return {
        "image/encoded": _bytes(encoded),
        "image/format": _bytes(fmt),
        "image/height": _ints(H),
        "image/width": _ints(W),
        "image/filename": _bytes(b"images/cat_and_birds.png"),
        "image/source_id": _bytes(source_id),
        "image/key/sha256": _bytes(hashlib.sha256(encoded).hexdigest().encode()),
    }


def _detection_features(masks=MASKS, **image) -> dict:
    ymin, xmin, ymax, xmax = (BOXES_PX / [H, W, H, W]).T
    return {
        **_image_features(**image),
        "image/object/bbox/xmin": _floats(*xmin),
        "image/object/bbox/ymin": _floats(*ymin),
        "image/object/bbox/xmax": _floats(*xmax),
        "image/object/bbox/ymax": _floats(*ymax),
        "image/object/class/label": _ints(1, 3),
        "image/object/class/text": _bytes(b"cat", b"bird"),
        "image/object/area": _floats(*AREAS),
        "image/object/is_crowd": _ints(0, 1),
        "image/object/mask": _bytes(*(_png(m) for m in masks)),
    }


def test_a_detection_record_with_two_boxes_and_masks_decodes():
    out = decode_detection(_record(_detection_features()))

    assert out["source_id"] == b"17"
    assert out["height"] == H and out["height"].dtype == np.int64
    assert out["width"] == W and out["width"].dtype == np.int64
    assert out["image"].dtype == np.uint8
    np.testing.assert_array_equal(out["image"], _pixels(IMAGE_PNG))
    # [ymin, xmin, ymax, xmax], normalized as stored.
    assert out["groundtruth_boxes"].dtype == np.float32
    np.testing.assert_allclose(out["groundtruth_boxes"], BOXES_PX / [H, W, H, W], atol=1e-7)
    assert out["groundtruth_classes"].dtype == np.int64
    assert out["groundtruth_classes"].tolist() == [1, 3]
    assert out["groundtruth_is_crowd"].dtype == bool
    assert out["groundtruth_is_crowd"].tolist() == [False, True]
    assert out["groundtruth_area"].dtype == np.float32
    np.testing.assert_array_equal(out["groundtruth_area"], [96, 64])
    masks = out["groundtruth_instance_masks"]
    assert masks.dtype == np.float32 and masks.shape == (2, H, W)
    np.testing.assert_array_equal(masks, MASKS)
    assert out["groundtruth_instance_masks_png"].tolist() == [_png(m) for m in MASKS]
    assert set(out) == {"source_id", "image", "height", "width", "groundtruth_classes",
                        "groundtruth_is_crowd", "groundtruth_area", "groundtruth_boxes",
                        "groundtruth_instance_masks", "groundtruth_instance_masks_png"}


def test_the_mask_rcnn_eval_parser_takes_the_decoded_record():
    gt = detection_eval_groundtruths(_record(_detection_features()))

    assert gt["source_id"] == 17 and gt["source_id"].dtype == np.int64
    assert (gt["height"], gt["width"], gt["num_detections"]) == (H, W, 2)
    np.testing.assert_allclose(gt["boxes"][:2], BOXES_PX, atol=1e-4)  # back in pixels
    assert (gt["boxes"][2:] == -1).all()  # padded to 100 objects
    assert gt["classes"][:3].tolist() == [1, 3, -1]
    assert gt["is_crowds"][:2].tolist() == [0, 1]
    np.testing.assert_array_equal(gt["areas"][:2], AREAS)
    assert gt["masks"].shape == (100, 28, 28)
    assert gt["masks"][:2].min() >= 0 and gt["masks"][:2].max() <= 1


@pytest.mark.parametrize("fmt, ndim", [("PNG", 3), ("JPEG", 3), ("BMP", 3),
                                       ("WEBP", 4), ("GIF", 4)])
def test_detection_images_must_be_jpeg_png_or_bmp(fmt, ndim):
    encoded = image_bytes(make_image((W, H), seed=5), fmt)
    image = decode_detection(_record(_detection_features(encoded=encoded)))["image"]
    # WebP and GIF come out as one-frame animations despite the decoder's set_shape.
    assert image.shape == (1, H, W, 3)[4 - ndim:]


def test_keys_the_detection_decoder_does_not_read_change_nothing():
    features = _detection_features()
    for key in ("image/format", "image/filename", "image/key/sha256",
                "image/object/class/text"):
        del features[key]
    bare = decode_detection(_record(features))
    full = decode_detection(_record(_detection_features()))
    assert bare.keys() == full.keys()
    for key in full:
        np.testing.assert_array_equal(bare[key], full[key])


def test_what_the_detection_decoder_makes_of_a_record_with_only_the_required_keys():
    out = decode_detection(_record({"image/encoded": _bytes(IMAGE_PNG),
                                    "image/source_id": _bytes(b"5")}))
    assert (out["height"], out["width"]) == (H, W)  # from the decoded image
    assert out["groundtruth_boxes"].shape == (0, 4)
    assert out["groundtruth_classes"].shape == out["groundtruth_area"].shape == (0,)
    assert out["groundtruth_is_crowd"].shape == (0,)
    assert out["groundtruth_instance_masks"].shape == (0, H, W)


def test_without_area_and_is_crowd_the_decoder_derives_them_but_needs_height_and_width():
    features = _detection_features()
    del features["image/object/area"], features["image/object/is_crowd"]
    out = decode_detection(_record(features))
    np.testing.assert_allclose(out["groundtruth_area"], [96, 112], rtol=1e-5)  # box areas
    assert out["groundtruth_is_crowd"].tolist() == [False, False]

    del features["image/height"], features["image/width"]
    out = decode_detection(_record(features))
    assert (out["height"], out["width"]) == (H, W)
    # The fallback multiplies by the height and width features' default, -1, before the
    # decoder replaces them by the image's: the areas come out as fractions of the image.
    np.testing.assert_allclose(out["groundtruth_area"], [96 / (H * W), 112 / (H * W)],
                               rtol=1e-5)


def test_the_detection_decoder_requires_a_source_id_and_makes_one_of_an_empty_one():
    features = _detection_features()
    del features["image/source_id"]
    with pytest.raises(tf.errors.InvalidArgumentError):
        decode_detection(_record(features))
    # The decoder's option for records without one.
    assert decode_detection(_record(features), regenerate_source_id=True)["source_id"].isdigit()

    generated = decode_detection(_record(_detection_features(source_id=b"")))["source_id"]
    assert generated.isdigit() and int(generated) < 2**22  # a hash of the encoded image


@pytest.mark.parametrize("source_id", [b"img_1.jpg", b"cat_and_birds",
                                       hashlib.sha256(IMAGE_PNG).hexdigest().encode()])
def test_evaluation_needs_a_source_id_that_is_a_decimal_integer(source_id):
    assert process_source_id(b"17") == 17
    assert process_source_id(b"0042") == 42
    with pytest.raises(tf.errors.InvalidArgumentError, match="could not correctly convert"):
        process_source_id(source_id)
    with pytest.raises(tf.errors.InvalidArgumentError):
        detection_eval_groundtruths(_record(_detection_features(source_id=source_id)))
    # ... while the decoder itself passes any string through.
    assert decode_detection(_record(_detection_features(source_id=source_id)))[
        "source_id"] == source_id


def _palette_red(mask: np.ndarray) -> bytes:
    image = Image.fromarray(mask, "P")
    image.putpalette([0, 0, 0, 255, 0, 0])
    return image_bytes(image, "PNG")


@pytest.mark.parametrize("encode, values", [
    (lambda m: _png(m), [0, 1]),  # 8-bit gray ("L") of 0/1: what Model Garden writes
    (lambda m: _png(m * 255), [0, 255]),  # not scaled back: 255 reaches the mask loss
    (lambda m: _png(m.astype(bool)), [0, 255]),  # 1-bit PNG: libpng widens 1 to 255
    (_palette_red, [0, 76]),  # palette index 1 -> red -> gray luminance 76
    (lambda m: _png(np.stack([m] * 3, axis=-1)), [0, 1]),  # RGB gray -> luminance
], ids=["L-0-1", "L-0-255", "1-bit", "palette", "RGB"])
def test_masks_are_decoded_as_gray_pixel_values_without_scaling(encode, values):
    features = _detection_features()
    features["image/object/mask"] = _bytes(*(encode(m) for m in MASKS))
    masks = decode_detection(_record(features))["groundtruth_instance_masks"]
    np.testing.assert_array_equal(masks, MASKS * values[1])


def test_a_classification_record_decodes():
    record = _record({**_image_features(IMAGE_JPEG, b"jpeg"), "image/class/label": _ints(2)})
    out = decode_classification(record)
    assert out["image/class/label"] == 2 and out["image/class/label"].dtype == np.int64
    assert out["image/encoded"] == IMAGE_JPEG
    # TensorFlow's and Pillow's JPEG decoders round differently.
    assert np.abs(out["image"].astype(int) - _pixels(IMAGE_JPEG)).max() <= 8
    assert set(out) == {"image/encoded", "image/class/label", "image"}

    image, label = classification_eval_input(record)  # the ImageNet configs' defaults
    assert label == 2 and image.shape == (32, 32, 3) and image.dtype == np.float32


def test_the_default_classification_parser_reads_only_jpeg():
    record = _record({**_image_features(), "image/class/label": _ints(2)})  # a PNG
    assert decode_classification(record)["image/class/label"] == 2
    with pytest.raises(tf.errors.InvalidArgumentError):
        classification_eval_input(record)
    assert classification_eval_input(record, decode_jpeg_only=False)[1] == 2


SEGMENTATION = np.zeros((H, W), np.uint8)
SEGMENTATION[4:20, 2:14] = 1
SEGMENTATION[10:22, 18:30] = 2
SEGMENTATION[0, :] = 255  # ignore_label


def test_a_segmentation_record_decodes():
    label_png = _png(SEGMENTATION)
    out = decode_segmentation(_record({**_image_features(),
                                       "image/segmentation/class/encoded": _bytes(label_png)}))
    assert (out["image/height"], out["image/width"]) == (H, W)
    assert out["image/height"].dtype == np.int64
    assert out["image/encoded"] == IMAGE_PNG
    assert out["image/segmentation/class/encoded"] == label_png
    assert out["label"].dtype == np.uint8 and out["label"].shape == (H, W)
    np.testing.assert_array_equal(out["label"], SEGMENTATION)
    assert out["image"].dtype == np.uint8
    np.testing.assert_array_equal(out["image"], _pixels(IMAGE_PNG))


def test_a_palette_segmentation_label_is_read_as_gray_not_as_class_ids():
    # PASCAL VOC's SegmentationClass PNGs are palette images: index 1 is (128, 0, 0).
    label = Image.fromarray(SEGMENTATION, "P")
    label.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0, 0, 0] * 252 + [224, 224, 192])
    out = decode_segmentation(_record({**_image_features(), "image/segmentation/class/encoded":
                                       _bytes(image_bytes(label, "PNG"))}))
    assert sorted(np.unique(out["label"])) == [0, 38, 75, 220]  # luminance, not 0/1/2/255


def test_the_segmentation_parser_needs_height_and_width():
    features = {**_image_features(), "image/segmentation/class/encoded": _bytes(
        _png(SEGMENTATION))}
    del features["image/height"], features["image/width"]
    with pytest.raises(tf.errors.InvalidArgumentError):
        decode_segmentation(_record(features))


def test_the_decoders_are_the_packages_own_files_and_leave_the_session_alone(garden):
    for name in ("tf_example_decoder", "decoder", "segmentation_input",
                 "classification_input", "maskrcnn_input", "utils"):
        module = getattr(garden, name)
        assert module.__file__.startswith(str(garden.folders[0]))
        assert _unmodified(module.__file__, garden.folders[0]), module.__file__
    assert not [m for m in sys.modules if m.split(".")[0] in ("official", "tf_keras")]
    assert not {str(f) for f in garden.folders} & set(sys.path)
    import keras

    assert keras.__version__.startswith("3.")
    assert tf.keras.layers.Dense is keras.layers.Dense


def _unmodified(path: str, site) -> bool:
    """Whether `path` has the sha256 the wheel's RECORD gives it."""
    [dist_info] = site.glob("tf_models_official-*.dist-info")
    relative = Path(path).relative_to(site).as_posix()
    with open(dist_info / "RECORD", newline="") as f:
        hashes = {row[0]: row[1] for row in csv.reader(f)}
    digest = hashlib.sha256(Path(path).read_bytes()).digest()
    return hashes[relative] == "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

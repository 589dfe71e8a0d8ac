"""TensorFlow Datasets reads a tfrecorder dataset as it is: `tfds.builder_from_directory`
on the output folder, with the files `tfrecorder.format.tfds_metadata` writes beside the shards.

TFDS 4.9.10 is the real one, pinned in tests/interop.py and installed in a folder of its
own with the packages it imports that the project lacks; the `tfds` fixture puts that
folder on `sys.path` for this module's tests only (see `tfds`).
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from detection_data import CLASSES, HEIGHT, WIDTH, scenes, write_detection, write_segmentation
from helpers import read_manifest, write_image
from interop import interop_path

import tfrecorder
from tfrecorder.format.example_decoding import decode_example
from tfrecorder.format.manifest import (
    MANIFEST,
    TFDS_FEATURES,
    TFDS_INFO,
    Feature,
    Labels,
    Manifest,
    ShardInfo,
    Split,
    SplitInfo,
    dataset_files,
    folder_files,
)
from tfrecorder.format.manifest import read_manifest as manifest_of
from tfrecorder.format.tfds_metadata import SHARD_TEMPLATE, tfds_files
from tfrecorder.format.tfrecord import open_read, read_records

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "examples"
TFDS_FILES = {TFDS_INFO, TFDS_FEATURES}


@pytest.fixture(scope="module")
def tfds():
    """`tensorflow_datasets`, imported from its interop folder, which is on `sys.path` for
    this module's tests (TFDS imports lazily as it reads) and taken off after them, with
    every module loaded from it. `promise` is an empty stand-in: only TFDS's download
    manager uses it, and it has no wheel to install."""
    folder = str(interop_path("tensorflow-datasets"))
    saved_path, saved_promise = list(sys.path), sys.modules.get("promise")
    sys.path.insert(0, folder)
    sys.modules["promise"] = types.ModuleType("promise")
    sys.modules["promise"].Promise = type("Promise", (), {
        "__class_getitem__": classmethod(lambda cls, item: cls)})
    try:
        yield importlib.import_module("tensorflow_datasets")
    finally:
        sys.path[:] = saved_path
        for name, module in list(sys.modules.items()):
            if (getattr(module, "__file__", None) or "").startswith(folder):
                del sys.modules[name]
        sys.modules.pop("promise")
        if saved_promise is not None:
            sys.modules["promise"] = saved_promise
        importlib.invalidate_caches()


# --- the datasets ---------------------------------------------------------------------------

TAGS = [[1, 2], [], [3], [], [4, 5, 6], [], [7], [], [8], [9, 9], [], [10]]
POINTS = [[[0.5, 1.5]], [], [[1, 2], [3, 4]], [], [], [[5, 6]], [], [], [[7, 8]], [], [], []]


@pytest.fixture(scope="module")
def photos_table() -> pd.DataFrame:
    """The bundled photos of three classes in two splits, with input columns of every
    kind, their lists empty in some rows."""
    rows = pd.read_csv(SAMPLES / "images.csv", names=["split", "image_uri", "label"])
    rows = rows[rows["label"] != "texture"].reset_index(drop=True)
    rows["split"] = ["TEST" if i % 4 == 3 else "TRAIN" for i in range(len(rows))]
    rows["image_uri"] = [str(SAMPLES / uri) for uri in rows["image_uri"]]
    rows["tags"] = TAGS
    rows["points"] = POINTS
    rows["weight"] = [i / 4 for i in range(len(rows))]
    rows["note"] = [f"note {i}" for i in range(len(rows))]
    return rows


@pytest.fixture(scope="module")
def photos(photos_table, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("tfds") / "photos")
    tfrecorder.convert(photos_table, out, num_shards={"train": 2, "test": 1}, progress=False)
    return out


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> list[dict]:
    return scenes(str(tmp_path_factory.mktemp("scenes")), count=8)


def builder(tfds, out):
    return tfds.builder_from_directory(out)


def tfds_records(tfds, out: str, split: str, **options) -> dict[str, dict]:
    """Every record TFDS reads from `split`, as numpy, by its image's URI."""
    dataset = builder(tfds, out).as_dataset(split=split, shuffle_files=False, **options)
    found = {}
    for record in tfds.as_numpy(dataset):
        found[record["image_uri"].decode()] = record
    return found


def loaded(out: str, split: str) -> dict[str, dict]:
    """Every record `tfrecorder.load` reads from `split`, by its image's URI."""
    found = {}
    for element in tfrecorder.load(out, split, shuffle=False):
        found[element["image_uri"].numpy().decode()] = {k: v.numpy() for k, v in element.items()}
    return found


def stored(out: str) -> list[dict]:
    """Every record as stored (lists, as tfrecorder's own reader decodes them)."""
    manifest = manifest_of(out)
    found = []
    for _, shard in manifest.shards:
        with open_read(os.path.join(out, shard.file), manifest.compression) as file:
            found += [decode_example(record) for record in read_records(file)]
    return found


# --- classification -------------------------------------------------------------------------

def test_a_finished_run_writes_the_files_tfds_reads_and_the_manifest_last(photos):
    names = set(folder_files(photos))  # index/ too
    assert {TFDS_INFO, TFDS_FEATURES, "label.labels.txt"} <= names
    assert set(dataset_files(photos)) == names  # the output folder's own files
    manifest = manifest_of(photos)
    assert tfds_files(manifest) == {name: Path(photos, name).read_bytes()
                                    for name in tfds_files(manifest)}
    assert Path(photos, "label.labels.txt").read_text() == "cat\ncoffee\nrocket\n"
    assert tfrecorder.verify(photos, decode_images=False).ok  # no strangers to verify


def test_tfds_reads_every_split_with_its_shard_lengths(tfds, photos):
    manifest = manifest_of(photos)
    info = builder(tfds, photos).info
    assert sorted(info.splits) == ["test", "train"]
    for name, split in manifest.splits.items():
        assert info.splits[name].shard_lengths == [s.num_records for s in split.shards]
        assert info.splits[name].num_examples == split.num_records
        assert len(tfds_records(tfds, photos, name)) == split.num_records
    assert len(manifest.splits["train"].shards) == 2
    assert info.full_name == "tfrecorder/1.0.0"


def test_labels_are_class_ids_with_the_vocabularys_names(tfds, photos, photos_table):
    features = builder(tfds, photos).info.features
    names = features["label"].names
    assert names == ["cat", "coffee", "rocket"]
    truth = dict(zip(photos_table["image_uri"], photos_table["label"], strict=True))
    for split in ("train", "test"):
        ours = loaded(photos, split)
        for uri, record in tfds_records(tfds, photos, split).items():
            assert names[record["label"]] == truth[uri]
            assert record["label"] == ours[uri]["label"]
            assert record["split"] == split.upper().encode()


def test_list_features_read_back_including_empty_lists(tfds, photos, photos_table):
    spec = builder(tfds, photos).info.features
    assert spec["tags"].shape == (None,) and spec["points"].shape == (None, 2)
    rows = photos_table.set_index("image_uri")
    seen_empty = 0
    for split in ("train", "test"):
        for uri, record in tfds_records(tfds, photos, split).items():
            assert record["tags"].dtype == np.int64 and record["points"].dtype == np.float32
            np.testing.assert_array_equal(record["tags"], rows.at[uri, "tags"])
            np.testing.assert_array_equal(
                record["points"], np.reshape(rows.at[uri, "points"], (-1, 2)))
            assert record["weight"] == np.float32(rows.at[uri, "weight"])
            assert record["note"] == rows.at[uri, "note"].encode()
            seen_empty += len(record["tags"]) == 0 and len(record["points"]) == 0
    assert seen_empty == 4


def test_images_are_the_stored_bytes_and_decode_to_loads_pixels(tfds, photos):
    image = builder(tfds, photos).info.features["image"]
    assert (image.shape, image.encoding_format) == ((None, None, 3), "jpeg")
    stored_bytes = {r["image_uri"][0].decode(): r["image"][0] for r in stored(photos)}
    for split in ("train", "test"):
        ours = loaded(photos, split)
        raw = tfds_records(tfds, photos, split,
                           decoders={"image": tfds.decode.SkipDecoding()})
        for uri, record in tfds_records(tfds, photos, split).items():
            assert raw[uri]["image"] == stored_bytes[uri]
            assert record["image"].shape == ours[uri]["image"].shape
            # TFDS decodes JPEGs with TensorFlow's default (fast) IDCT; load() with the
            # accurate one, which matches Pillow: a few levels apart at most.
            difference = np.abs(record["image"].astype(int) - ours[uri]["image"].astype(int))
            assert difference.max() <= 8, uri


def test_as_supervised_gives_image_label_pairs(tfds, photos):
    dataset = builder(tfds, photos).as_dataset(split="test", as_supervised=True)
    pairs = list(tfds.as_numpy(dataset))
    assert len(pairs) == 3
    for image, label in pairs:
        assert image.ndim == 3 and image.shape[2] == 3 and 0 <= label < 3


def test_the_recipe_in_the_docs_runs_and_shows_what_it_says(tfds, photos):
    """docs/reading.md's TFDS block, on this module's dataset of three classes."""
    section = (REPO / "docs" / "reading.md").read_text().split("## TensorFlow Datasets")[1]
    code = section.split("```python\n")[1].split("```")[0]
    namespace: dict = {}
    exec(code.replace('"datasets/flowers"', repr(photos)), namespace)
    builder = namespace["builder"]
    assert builder.info.features["label"].names == ["cat", "coffee", "rocket"]
    assert builder.info.splits["train"].num_examples == manifest_of(photos).splits[
        "train"].num_records
    image, label = next(iter(tfds.as_numpy(namespace["pairs"])))
    assert image.shape[2] == 3 and label in (0, 1, 2)
    assert len(list(namespace["train"])) == 9


# --- what changes the description -----------------------------------------------------------

@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[str, pd.DataFrame]:
    """PNG and JPEG images of 1, 3 and 4 channels; integer labels, one row unlabelled."""
    folder = tmp_path_factory.mktemp("mixed")
    kinds = [("RGB", "JPEG"), ("L", "PNG"), ("RGBA", "PNG"), ("L", "JPEG"), ("RGB", "PNG")]
    uris = [write_image(folder / f"{i}.{fmt.lower()}", size=(12 + i, 9), mode=mode, fmt=fmt,
                        seed=i) for i, (mode, fmt) in enumerate(kinds)]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": uris,
                          "label": [2, None, 0, 1, 2]})
    out = str(folder / "out")
    tfrecorder.convert(table, out, unlabeled="keep", progress=False)
    return out, table


def test_images_of_several_formats_and_channels_decode_to_rgb_as_load_does(tfds, mixed):
    out, _ = mixed
    image = builder(tfds, out).info.features["image"]
    assert (image.shape, image.encoding_format) == ((None, None, 3), None)
    ours = loaded(out, "train")  # RGB too, by default
    found = tfds_records(tfds, out, "train")
    assert sorted(found) == sorted(ours)
    for uri, record in found.items():
        if uri.endswith(".png"):  # lossless: exactly load()'s pixels
            np.testing.assert_array_equal(record["image"], ours[uri]["image"])
        else:
            assert record["image"].shape == ours[uri]["image"].shape


def test_a_label_some_records_lack_is_a_sequence_empty_for_them(tfds, mixed):
    out, table = mixed
    label = builder(tfds, out).info.features["label"]
    assert type(label).__name__ == "Sequence"
    assert label.feature.num_classes == 3  # integer labels: ids 0..2
    truth = dict(zip(table["image_uri"], table["label"], strict=True))
    for uri, record in tfds_records(tfds, out, "train").items():
        expected = [] if pd.isna(truth[uri]) else [int(truth[uri])]
        assert record["label"].tolist() == expected, uri


def test_multi_label_rows_are_a_sequence_of_class_labels(tfds, tmp_path):
    uris = [write_image(tmp_path / f"{i}.png", size=(8, 6), fmt="PNG", seed=i)
            for i in range(4)]
    labels = [["cat", "dog"], ["dog"], [], ["bird", "cat"]]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": labels})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    label = builder(tfds, out).info.features["label"]
    assert label.feature.names == ["bird", "cat", "dog"]
    for uri, record in tfds_records(tfds, out, "train").items():
        names = [label.feature.names[i] for i in record["label"]]
        assert sorted(names) == sorted(labels[uris.index(uri)])


def test_raw_pixels_are_a_string_tensor_of_the_stored_base64(tfds, tmp_path):
    uris = [write_image(tmp_path / f"{i}.png", size=(6, 4), fmt="PNG", seed=i)
            for i in range(3)]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": ["a", "b", "a"]})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, image_format="raw", progress=False)
    image = builder(tfds, out).info.features["image"]
    assert type(image).__name__ == "Tensor" and image.dtype == np.object_
    ours = loaded(out, "train")
    for uri, record in tfds_records(tfds, out, "train").items():
        pixels = np.frombuffer(base64.urlsafe_b64decode(record["image"]), np.uint8)
        np.testing.assert_array_equal(pixels.reshape(ours[uri]["image"].shape),
                                      ours[uri]["image"])


def test_a_table_without_images_reads_too_nested_names_and_empty_shards_included(
        tfds, tmp_path):
    table = pd.DataFrame({"split": ["TRAIN"] * 3 + ["TEST"], "label": ["x", "y", "x", "y"],
                          "size": [1.5, 2.5, 3.5, 4.5], "ids": [[1], [], [2, 3], []],
                          "words": [["p", "q"], [], ["r"], []],
                          "grid": [[[1, 2, 3]], [], [[4, 5, 6], [7, 8, 9]], []],
                          "camera/iso": [100, 200, 400, 800]})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, num_shards={"train": 5, "test": 1}, progress=False)
    info = builder(tfds, out).info
    assert "image" not in info.features and info.supervised_keys is None
    assert 0 in info.splits["train"].shard_lengths  # more shards than records
    records = list(tfds.as_numpy(builder(tfds, out).as_dataset(split="train")))
    found = sorted((float(r["size"]), r["ids"].tolist(), [w.decode() for w in r["words"]],
                    r["grid"].tolist(), int(r["camera"]["iso"]),
                    info.features["label"].names[r["label"]]) for r in records)
    assert found == [(1.5, [1], ["p", "q"], [[1, 2, 3]], 100, "x"),
                     (2.5, [], [], [], 200, "y"),
                     (3.5, [2, 3], ["r"], [[4, 5, 6], [7, 8, 9]], 400, "x")]


def test_a_name_tfds_cannot_nest_beside_another_gets_no_tfds_files(tmp_path):
    table = pd.DataFrame({"split": "TRAIN", "label": ["x", "y"], "a": [1, 2], "a/b": [3, 4]})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    assert not set(os.listdir(out)) & TFDS_FILES
    assert read_manifest(out)["features"]["a/b"]  # the dataset itself is whole


# --- detection and segmentation -------------------------------------------------------------

def test_detection_objects_are_a_sequence_of_boxes_and_class_labels(tfds, drawn, tmp_path):
    out = str(tmp_path / "det")
    write_detection(out, drawn, masks=True)
    objects = builder(tfds, out).info.features["objects"]
    assert type(objects).__name__ == "Sequence"
    assert type(objects.feature["bbox"]).__name__ == "BBoxFeature"
    assert objects.feature["label"].names == list(CLASSES)
    found = tfds_records(tfds, out, "train")
    assert len(found) == len(drawn)
    for scene in drawn:
        record = found[scene["image_uri"]]["objects"]
        boxes = np.reshape(scene["boxes"], (-1, 4)).astype(np.float32)
        np.testing.assert_allclose(record["bbox"], boxes, atol=1e-6)
        assert [CLASSES[i] for i in record["label"]] == scene["labels"]
        assert len(record["mask"]) == len(boxes)
        if len(boxes):
            assert record["mask"].shape[1:] == (HEIGHT, WIDTH, 1)
        for box, mask in zip(boxes, record["mask"], strict=True):  # 1 inside its box
            top, left = int(round(box[0] * HEIGHT)), int(round(box[1] * WIDTH))
            assert mask[top, left, 0] == 1
    empty = found[drawn[0]["image_uri"]]["objects"]  # scene 0 has no boxes
    assert empty["bbox"].shape == (0, 4) and empty["label"].shape == (0,)


def test_a_segmentation_mask_is_a_one_channel_png_image(tfds, drawn, tmp_path):
    out = str(tmp_path / "seg")
    write_segmentation(out, drawn)
    mask = builder(tfds, out).info.features["segmentation_mask"]
    assert (mask.shape, mask.encoding_format) == ((None, None, 1), "png")
    found = tfds_records(tfds, out, "train")
    for scene in drawn:
        np.testing.assert_array_equal(found[scene["image_uri"]]["segmentation_mask"][..., 0],
                                      scene["mask"])
        np.testing.assert_array_equal(found[scene["image_uri"]]["image"], scene["pixels"])


# --- what TFDS cannot read ------------------------------------------------------------------

def test_gzip_shards_get_no_tfds_files_and_the_docs_say_why(tfds, photos_table, tmp_path):
    out = str(tmp_path / "gzip")
    tfrecorder.convert(photos_table, out, compression="gzip", progress=False)
    assert not TFDS_FILES & set(os.listdir(out))
    with pytest.raises(Exception, match="dataset_info.json") as raised:
        builder(tfds, out)
    assert type(raised.value).__name__ == "DatasetInfoFileError"  # as the docs say
    reading = (REPO / "docs" / "reading.md").read_text()
    section = reading.split("## TensorFlow Datasets")[1].split("\n## ")[0]
    assert "gzip" in section and "tf_models" in section


def test_overwriting_with_gzip_removes_the_tfds_files_of_the_dataset_before(photos_table,
                                                                           tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(photos_table, out, progress=False)
    assert set(os.listdir(out)) >= TFDS_FILES
    tfrecorder.convert(photos_table, out, compression="gzip", overwrite=True, progress=False)
    assert not TFDS_FILES & set(os.listdir(out))
    assert "label.labels.txt" not in os.listdir(out)


def test_the_tf_models_layout_gets_no_tfds_files(drawn, tmp_path):
    out = str(tmp_path / "tf_models")
    write_detection(out, drawn, layout="tf_models")
    assert not TFDS_FILES & set(os.listdir(out))
    assert tfds_files(manifest_of(out)) == {}


def test_class_names_tfds_would_read_back_otherwise_are_left_to_their_ids():
    """TFDS strips each line of a names file and skips blank ones: names it would change
    are not written, and the ClassLabel keeps only their count."""
    manifest = Manifest(
        compression=None, num_source_rows=2, options={},
        features={"label": Feature("int64", role="label"), "split": Feature("string")},
        labels=Labels("text", (" padded", "plain"), num_classes=2),
        splits={Split.TRAIN: SplitInfo.of((ShardInfo("train-00000-of-00001.tfrecord", 2, 9),),
                                          0)})
    files = tfds_files(manifest)
    assert sorted(files) == [TFDS_INFO, TFDS_FEATURES]
    features = json.loads(files[TFDS_FEATURES])["featuresDict"]["features"]
    assert features["label"]["classLabel"] == {"numClasses": "2"}
    info = json.loads(files[TFDS_INFO])
    assert info["splits"] == [{"name": "train", "filepathTemplate": SHARD_TEMPLATE,
                               "numBytes": "9", "shardLengths": ["2"]}]


def test_the_tfds_files_are_what_tfds_itself_writes_for_the_same_features(tfds, photos,
                                                                         tmp_path):
    """TFDS's own `DatasetInfo` round-trips our files unchanged: the same proto JSON."""
    info = builder(tfds, photos).info
    copy = tmp_path / "copy"
    copy.mkdir()
    info.write_to_directory(copy)
    ours = json.loads(Path(photos, TFDS_FEATURES).read_text())
    assert json.loads((copy / TFDS_FEATURES).read_text()) == ours
    theirs = json.loads((copy / TFDS_INFO).read_text())
    mine = json.loads(Path(photos, TFDS_INFO).read_text())
    assert {k: theirs[k] for k in mine} == mine
    assert (copy / "label.labels.txt").read_text() == Path(photos, "label.labels.txt").read_text()
    assert read_manifest(photos)["splits"]  # the manifest is untouched by TFDS
    assert tf.io.gfile.exists(os.path.join(photos, MANIFEST))

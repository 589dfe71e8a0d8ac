"""load(): what was written comes back, decoded, batched and counted."""

import math
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from conftest import LABELS
from helpers import download, image_bytes, make_image, pixels, read_manifest

import tfrecorder
from tfrecorder.load import shard_files


@pytest.fixture
def dataset(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, num_shards=2, progress=False)
    return out


def by_uri(ds) -> dict:
    return {f["image_uri"].numpy().decode(): f for f in ds}


def test_every_record_comes_back_with_its_source_pixels_and_label(dataset, image_table):
    datasets = tfrecorder.load(dataset, channels=0)
    manifest = read_manifest(dataset)
    assert set(datasets) == set(manifest["splits"])
    loaded = {}
    for split, ds in datasets.items():
        assert len(ds) == manifest["splits"][split]["num_records"]
        records = by_uri(ds)
        assert len(records) == len(ds)
        loaded.update(records)
    assert len(loaded) == len(image_table)
    for _, row in image_table.iterrows():
        record = loaded[row["image_uri"]]
        np.testing.assert_array_equal(record["image"].numpy(), pixels(row["image_uri"]))
        assert sorted(LABELS)[int(record["label"])] == row["label"]


def test_images_are_rgb_by_default(dataset):
    for features in tfrecorder.load(dataset, "train"):
        assert features["image"].shape[-1] == 3 and features["image"].dtype == tf.uint8


@pytest.mark.parametrize("channels", [1, 4])
def test_channels_convert_every_image(dataset, channels):
    shapes = {f["image"].shape[-1] for f in tfrecorder.load(dataset, "train", channels=channels)}
    assert shapes == {channels}


def test_batches_stack_with_image_size_and_length_is_known(dataset):
    n = read_manifest(dataset)["splits"]["train"]["num_records"]
    ds = tfrecorder.load(dataset, "train", batch_size=4, image_size=(24, 32))
    assert len(ds) == math.ceil(n / 4)
    batches = list(ds)
    assert len(batches) == len(ds)
    assert sum(b["image"].shape[0] for b in batches) == n
    assert all(b["image"].shape[1:] == (24, 32, 3) and b["image"].dtype == tf.uint8
               for b in batches)
    dropped = tfrecorder.load(dataset, "train", batch_size=4, image_size=(8, 8),
                              drop_remainder=True)
    assert len(dropped) == n // 4


def test_resizing_decodes_large_jpegs_at_a_reduced_scale_faithfully(tmp_path):
    photo = make_image((64, 48)).resize((800, 600))  # smooth, like a photo
    path = tmp_path / "big.jpg"
    path.write_bytes(image_bytes(photo, "JPEG", quality=95))
    out = str(tmp_path / "out")
    tfrecorder.convert(pd.DataFrame({"image_uri": [str(path)], "split": ["TRAIN"]}), out,
                       progress=False)
    (fast,) = [f["image"].numpy() for f in tfrecorder.load(out, "train", image_size=(60, 80))]
    full = tf.image.resize(pixels(path), (60, 80), antialias=True).numpy()  # area-faithful
    assert fast.shape == (60, 80, 3)
    assert np.abs(fast.astype(float) - full).mean() < 3


def test_shuffle_is_seeded_and_on_for_train_only(dataset):
    def order(split, **options):
        return [f["image_uri"].numpy() for f in tfrecorder.load(dataset, split, **options)]

    assert order("train", seed=1) == order("train", seed=1)
    assert order("train", seed=1) != order("train", shuffle=False)
    assert sorted(order("train", seed=1)) == sorted(order("train", shuffle=False))
    assert order("validation") == order("validation", shuffle=False)


def test_augment_changes_only_the_train_split(dataset):
    plain = tfrecorder.load(dataset, shuffle=False)
    inverted = tfrecorder.load(dataset, shuffle=False, augment=lambda image: 255 - image)
    for split in plain:
        for a, b in zip(plain[split], inverted[split]):
            expected = 255 - a["image"] if split == "train" else a["image"]
            np.testing.assert_array_equal(b["image"], expected)
    preset = tfrecorder.load(dataset, "train", augment="basic", image_size=(32, 32))
    assert all(f["image"].shape == (32, 32, 3) for f in preset)


def test_supervised_pairs_train_a_keras_model(dataset):
    train = tfrecorder.load(dataset, "train", batch_size=8, image_size=(16, 16),
                            as_supervised=True)
    model = tf.keras.Sequential([
        tf.keras.Input((16, 16, 3)), tf.keras.layers.Rescaling(1 / 255),
        tf.keras.layers.Flatten(), tf.keras.layers.Dense(3),
    ])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2


def test_raw_and_gzip_datasets_load_transparently(image_table, tmp_path):
    out = str(tmp_path / "raw")
    tfrecorder.convert(image_table, out, image_format="raw", compression="gzip",
                       progress=False)
    loaded = {}
    for ds in tfrecorder.load(out, channels=0).values():
        loaded.update(by_uri(ds))
    for uri in image_table["image_uri"]:
        np.testing.assert_array_equal(loaded[uri]["image"].numpy(), pixels(uri))


def test_cache_and_repeat(dataset):
    n = read_manifest(dataset)["splits"]["train"]["num_records"]
    ds = tfrecorder.load(dataset, "train", cache=True, repeat=True, image_size=(8, 8))
    assert ds.cardinality() == tf.data.INFINITE_CARDINALITY
    assert len(list(ds.take(2 * n))) == 2 * n


def test_convert_and_load(image_table, tmp_path):
    train = tfrecorder.convert_and_load(image_table, str(tmp_path / "out"), split="train",
                                        progress=False, load_options={"batch_size": 2})
    assert train.element_spec["image"].shape.rank == 4


def test_clear_errors(dataset, image_table, tmp_path):
    with pytest.raises(ValueError, match=r"no 'dev' split; it has \['test', 'train', 'valid"):
        tfrecorder.load(dataset, "dev")
    with pytest.raises(FileNotFoundError, match="not a finished tfrecorder dataset"):
        tfrecorder.load(tmp_path)
    unlabelled = str(tmp_path / "unlabelled")
    tfrecorder.convert(image_table.drop(columns="label"), unlabelled, progress=False)
    with pytest.raises(ValueError, match="as_supervised needs labels"):
        tfrecorder.load(unlabelled, as_supervised=True)


def test_gs_paths_come_from_the_manifest(dataset, gcs_bucket):
    """TensorFlow reads gs:// itself (and cannot be pointed at the emulator), so this
    checks the dataset is built from the right gs:// shard paths, without reading them."""
    from gcs_emulator import upload

    prefix = f"gs://{gcs_bucket}/load/out"
    for name in os.listdir(dataset):
        upload(os.path.join(dataset, name), f"{prefix}/{name}")
    manifest = read_manifest(download(prefix, os.path.join(dataset, "..", "copy")))
    datasets = tfrecorder.load(prefix)
    assert {k: len(v) for k, v in datasets.items()} == {
        k: v["num_records"] for k, v in manifest["splits"].items()}
    assert shard_files(prefix, manifest, "train") == [
        f"{prefix}/train-0000{i}-of-00002.tfrecord" for i in range(2)]


def test_fixed_shape_batches_decode_exactly_like_single_records(dataset):
    """With batch_size and image_size, records are parsed a batch at a time (the fast
    path); the images must be the same as record by record."""
    options = dict(image_size=(20, 28), shuffle=False)
    single = [f["image"].numpy() for f in tfrecorder.load(dataset, "train", **options)]
    batched = tfrecorder.load(dataset, "train", batch_size=3, **options)
    np.testing.assert_array_equal(np.concatenate([b["image"] for b in batched]), single)
    augmented = tfrecorder.load(dataset, "train", batch_size=3, augment="basic", **options)
    images = np.concatenate([b["image"] for b in augmented])
    assert images.shape == (len(single), 20, 28, 3) and not np.array_equal(images, single)
    pairs = tfrecorder.load(dataset, "train", batch_size=3, as_supervised=True, **options)
    assert [tuple(x.shape) for x in pairs.element_spec] == [(None, 20, 28, 3), (None,)]

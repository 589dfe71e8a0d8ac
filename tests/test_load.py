"""load(): what was written comes back, decoded, batched and counted."""

import json
import math
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from conftest import LABELS
from helpers import (
    dataset_folder_files,
    download,
    image_bytes,
    make_image,
    partly_labelled_csv,
    pixels,
    read_manifest,
    write_image,
)

import tfrecorder
from tfrecorder.errors import OptionError, VerificationError
from tfrecorder.format.manifest import Manifest
from tfrecorder.read.shards import shard_files


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
    # The sizes describe the pixels handed over, as objects' areas do.
    assert all((b["image_height"].numpy() == 24).all() and (b["image_width"].numpy() == 32).all()
               for b in batches)
    stored = next(iter(tfrecorder.load(dataset, "train", shuffle=False)))
    assert (stored["image_height"], stored["image_width"]) == stored["image"].shape[:2]
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


def test_resized_pixels_are_each_kinds_documented_decode(tmp_path):
    """With image_size, a JPEG is decoded at the largest DCT scale that still covers the
    target (TensorFlow's default IDCT) and resized bilinearly, rounded; an image at the
    target size is decoded exactly; a PNG is decoded exactly, then resized. Batched or
    not, and whether or not the manifest says all images are JPEGs (which leaves the
    other decoders out of the graph)."""
    target = (20, 24)  # (height, width)
    sizes = {"x1": (30, 25), "x2": (60, 45), "x4": (110, 90), "x8": (200, 170),
             "same": (24, 20), "png": (50, 40), "png_same": (24, 20)}  # (width, height)
    paths = {name: write_image(tmp_path / "images" / f"{name}.{'png' if 'png' in name else 'jpg'}",
                               size=size, fmt="PNG" if "png" in name else "JPEG", seed=i)
             for i, (name, size) in enumerate(sizes.items())}

    def expected(name, raw=False):
        data = tf.io.read_file(paths[name])
        width, height = sizes[name]
        if (height, width) == target:
            return pixels(paths[name])
        if raw:  # the source's exact pixels, stored
            image = pixels(paths[name])
        elif "png" in name:
            image = tf.io.decode_png(data, channels=3)
        else:
            scale = max(r for r in (1, 2, 4, 8) if height >= r * target[0]
                        and width >= r * target[1])
            assert scale == int(name[1:]) if name.startswith("x") else scale == 1
            image = tf.io.decode_jpeg(data, channels=3, ratio=scale)
        return tf.cast(tf.image.resize(image, target) + 0.5, tf.uint8).numpy()

    def loaded(names, out, **options):
        tfrecorder.convert(pd.DataFrame({"image_uri": [paths[n] for n in names],
                                         "split": "TRAIN"}), out, progress=False, **options)
        single = {f["image_uri"].numpy().decode(): f["image"].numpy() for f in
                  tfrecorder.load(out, "train", image_size=target, shuffle=False)}
        batches = tfrecorder.load(out, "train", image_size=target, batch_size=3, shuffle=False)
        batched = {uri.decode(): image for b in batches
                   for uri, image in zip(b["image_uri"].numpy(), b["image"].numpy())}
        return single, batched

    jpegs = [n for n in sizes if "png" not in n]
    for names, out, options in [(list(sizes), "mixed", {}), (jpegs, "jpegs", {}),
                                (list(sizes), "raw", {"image_format": "raw"})]:
        for found in loaded(names, str(tmp_path / out), **options):
            assert sorted(found) == sorted(paths[n] for n in names)
            for name in names:
                np.testing.assert_array_equal(found[paths[name]], expected(name, out == "raw"),
                                              err_msg=f"{out}: {name}")


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


def test_basic_augmentation_repeats_with_its_seed_record_by_record(dataset):
    """Each record draws its own seed, in record order: the same seed gives the same
    augmentation of every record, however the parallel map schedules them."""
    def epochs(seed):
        ds = tfrecorder.load(dataset, "train", augment="basic", image_size=(24, 24),
                             seed=seed)
        return [[f["image"].numpy() for f in ds] for _ in range(2)]

    first = epochs(2)
    for _ in range(3):
        again = epochs(2)
        for epoch, repeated in zip(first, again):
            np.testing.assert_array_equal(np.stack(epoch), np.stack(repeated))
    assert not np.array_equal(np.stack(first[0]), np.stack(first[1]))  # a new epoch


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
                                        progress=False,
                                        load_options={"batch_size": 2, "image_size": (8, 8)})
    assert train.element_spec["image"].shape.as_list() == [None, 8, 8, 3]


def test_clear_errors(dataset, image_table, tmp_path):
    with pytest.raises(TypeError, match="load[(][)] takes the dataset's folder, a path or a "
                                        "URI such as 'gs://bucket/data', not 123"):
        tfrecorder.load(123)
    with pytest.raises(OptionError, match=r"split must be the name of one split \('train', "
                                          r"'validation', 'test'\) or None, not \['train'\]"):
        tfrecorder.load(dataset, ["train"])
    with pytest.raises(ValueError, match=r"no 'holdout' split; it has \['test', 'train', 'valid"):
        tfrecorder.load(dataset, "holdout")
    with pytest.raises(FileNotFoundError, match="not a finished tfrecorder dataset"):
        tfrecorder.load(tmp_path)
    unlabelled = str(tmp_path / "unlabelled")
    tfrecorder.convert(image_table.drop(columns="label"), unlabelled, progress=False)
    with pytest.raises(ValueError, match="as_supervised needs labels"):
        tfrecorder.load(unlabelled, as_supervised=True)


@pytest.mark.parametrize(("options", "said"), [
    ({"image_size": 224}, "image_size must be (height, width) with positive ints, not 224"),
    ({"image_size": (0, 8)}, "image_size must be (height, width) with positive ints"),
    ({"augment": True}, "augment must be 'basic', 'random_resized_crop', a "
                        "RandomResizedCrop, a function (image -> image), or None, not True"),
    ({"augment": "flips"}, "augment must be 'basic', 'random_resized_crop'"),
    ({"crop": "middle"}, "crop must be 'center', a CenterCrop, or None, not 'middle'"),
    ({"augment": "random_resized_crop"}, "augment='random_resized_crop' resizes its crops "
                                         "to image_size, which is not given. Pass "
                                         "image_size=(height, width) too"),
    ({"crop": "center"}, "crop='center' resizes its crops to image_size"),
    ({"channels": True}, "channels must be 0, 1, 3, 4 or None, not True"),
    ({"batch_size": 0}, "batch_size must be a positive int or None, not 0"),
    ({"batch_size": "32"}, "batch_size must be a positive int or None, not '32'"),
    ({"shuffle_buffer": None}, "shuffle_buffer must be a positive int (records), not None"),
    ({"seed": 1.5}, "seed must be an int or None, not 1.5"),
    ({"repeat": "yes"}, "repeat must be True or False, not 'yes'"),
    ({"cache": 1}, "cache must be True, False or a local folder, not 1"),
])
def test_option_values_are_refused_when_called_as_convert_refuses_them(dataset, tmp_path,
                                                                         options, said):
    """Before anything is read, with convert's OptionError, not TensorFlow's TypeError."""
    for path in (dataset, tmp_path / "nothere"):  # checked before the manifest is read
        with pytest.raises(OptionError) as raised:
            tfrecorder.load(path, "train", **options)
        assert str(raised.value).startswith(said), raised.value
        assert raised.value.option == next(iter(options))


def test_a_missing_shard_is_refused_when_called_not_mid_epoch(dataset):
    shard = read_manifest(dataset)["splits"]["train"]["shards"][1]["file"]
    os.remove(os.path.join(dataset, shard))
    for split in ("train", None):
        with pytest.raises(VerificationError) as raised:
            tfrecorder.load(dataset, split)
        assert str(raised.value) == (
            f"the dataset in {dataset!r} lacks 1 shard that its manifest lists: {shard}. "
            "Restore the files from a copy, or write the dataset again with overwrite=True.")
    assert len(list(tfrecorder.load(dataset, "test"))) == read_manifest(dataset)["splits"][
        "test"]["num_records"]


def test_gs_paths_come_from_the_manifest(dataset, gcs_bucket):
    """Shard paths are the manifest's file names under the gs:// folder (reading them
    back: tests/test_remote_read.py)."""
    from gcs_emulator import upload

    prefix = f"gs://{gcs_bucket}/load/out"
    for name in dataset_folder_files(dataset):
        upload(os.path.join(dataset, name), f"{prefix}/{name}")
    manifest = read_manifest(download(prefix, os.path.join(dataset, "..", "copy")))
    datasets = tfrecorder.load(prefix)
    assert {k: len(v) for k, v in datasets.items()} == {
        k: v["num_records"] for k, v in manifest["splits"].items()}
    assert shard_files(prefix, Manifest.from_json(manifest), "train") == [
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


# Flexible schemas: input features of every shape, multi-label labels, tables without images.

NAMES = ["a", "b", "c", "d", "e", "f"]


@pytest.fixture
def rich_table(tmp_path) -> pd.DataFrame:
    """Six tiny images with a multi-label label (one row without labels) and an input
    column of every kind, empty lists included."""
    uris = [write_image(tmp_path / "rich" / f"{i}.{fmt.lower()}", size=(8, 6), fmt=fmt, seed=i)
            for i, fmt in enumerate(["PNG", "JPEG"] * 3)]
    return pd.DataFrame({
        "split": "TRAIN",
        "image_uri": uris,
        "label": [["cat", "dog"], ["dog"], [], ["bird"], ["bird", "cat", "dog"], ["cat"]],
        "age": [1, -2, 3, 2**40, 5, 0],
        "score": [0.1, 1.5, -2.25, 1e-3, 7.0, 3.3],
        "name": NAMES,
        "tags": [["x", "y"], [], ["z"], ["x"], [], ["y", "y", "x"]],
        "boxes": [[[0.1, 0.2, 0.3, 0.4]], [], [[0, 0, 1, 1], [0.5, 0.5, 1, 1]],
                  [[0.2, 0.2, 0.4, 0.4]], [], [[0.7, 0.1, 0.9, 0.3]] * 3],
        "classes": [["cat"], [], ["dog", "cat"], ["bird"], ["dog"], []],
        "color": pd.Categorical(["red", "blue", "red", "green", "blue", "red"],
                                categories=["red", "green", "blue"]),
    })


@pytest.fixture
def rich(rich_table, tmp_path) -> str:
    out = str(tmp_path / "rich_out")
    tfrecorder.convert(rich_table, out, schema={"classes": "CategoricalInput"}, num_shards=1,
                       progress=False)
    return out


def records(ds, batched: bool, key: str = "name") -> dict:
    """Every record of `ds` by its `key` feature, as numpy values (a batch's rows split
    apart; a RaggedTensor's row is a dense tensor)."""
    found = {}
    for element in ds:
        rows = ([{k: v[i] for k, v in element.items()} for i in range(len(element[key]))]
                if batched else [element])
        for row in rows:
            value = row[key].numpy()
            value = value.decode() if isinstance(value, bytes) else int(value)
            found[value] = {k: v.numpy() for k, v in row.items()}
    return found


def expected_inputs(table: pd.DataFrame, manifest: dict) -> dict[str, dict]:
    """What the input features of each row should read back as."""
    features = manifest["features"]
    classes, colors = features["classes"]["vocabulary"], features["color"]["vocabulary"]
    return {row["name"]: {
        "age": row["age"],
        "score": np.float32(row["score"]),
        "name": row["name"].encode(),
        "tags": [t.encode() for t in row["tags"]],
        "boxes": np.array(row["boxes"], np.float32).reshape(-1, 4),
        "classes": [classes.index(c) for c in row["classes"]],
        "color": colors.index(row["color"]),
    } for _, row in table.iterrows()}


def assert_inputs(found: dict, expected: dict) -> None:
    assert sorted(found) == sorted(expected)
    for name, values in expected.items():
        for feature, value in values.items():
            got = found[name][feature]
            assert np.shape(got) == np.shape(value), (name, feature)
            np.testing.assert_array_equal(got, value, err_msg=f"{name}: {feature}")


def test_every_input_feature_comes_back_as_written(rich, rich_table):
    manifest = read_manifest(rich)
    assert manifest["features"]["boxes"]["shape"] == [None, 4]
    ds = tfrecorder.load(rich, "train", shuffle=False)
    spec = ds.element_spec
    assert [spec[n].dtype for n in ("age", "score", "name", "classes", "color")] == [
        tf.int64, tf.float32, tf.string, tf.int64, tf.int64]
    assert spec["boxes"].shape.as_list() == [None, 4]
    found = records(ds, batched=False)
    assert_inputs(found, expected_inputs(rich_table, manifest))
    for uri, name in zip(rich_table["image_uri"], rich_table["name"]):
        np.testing.assert_array_equal(found[name]["image"], pixels(uri))


@pytest.mark.parametrize("options", [
    {},
    {"image_size": (5, 7)},
    {"cache": True},
    {"image_size": (5, 7), "cache": True},
    {"repeat": True},
    {"image_size": (5, 7), "repeat": True},
], ids=lambda options: "-".join(options) or "plain")
def test_batches_hold_lists_as_ragged_tensors(rich, rich_table, options):
    single = records(tfrecorder.load(rich, "train", shuffle=False,
                                     image_size=options.get("image_size")), batched=False)
    ds = tfrecorder.load(rich, "train", batch_size=4, shuffle=False, **options)
    spec = ds.element_spec
    assert isinstance(spec["boxes"], tf.RaggedTensorSpec)
    assert spec["boxes"].shape.as_list() == [None, None, 4]
    assert [spec[n].shape.as_list() for n in ("tags", "classes", "label")] == [[None, None]] * 3
    assert spec["age"].shape.as_list() == [None]
    assert isinstance(spec["image"], tf.TensorSpec) and spec["image"].shape.rank == 4
    batches = list(ds.take(3) if options.get("repeat") else ds)
    assert [len(b["name"]) for b in batches] == ([4, 4, 4] if options.get("repeat") else [4, 2])
    if options.get("repeat"):  # every record twice; the second time is checked below
        names = sorted(n.decode() for b in batches for n in b["name"].numpy())
        assert names == sorted(NAMES * 2)
    batched = records(batches, batched=True)
    assert sorted(batched) == sorted(single)
    for name, features in single.items():
        assert sorted(batched[name]) == sorted(features)
        for feature, value in features.items():
            assert np.shape(batched[name][feature]) == np.shape(value), (name, feature)
            np.testing.assert_array_equal(batched[name][feature], value)
    assert_inputs(batched, expected_inputs(rich_table, read_manifest(rich)))


def test_multi_label_labels_are_lists_of_ids_or_multi_hot_vectors(rich, rich_table):
    manifest = read_manifest(rich)
    assert manifest["labels"]["multi_label"] and manifest["labels"]["num_classes"] == 3
    vocabulary = manifest["labels"]["vocabulary"]
    ids = {row["name"]: [vocabulary.index(c) for c in row["label"]]
           for _, row in rich_table.iterrows()}
    hot = {name: np.isin(np.arange(3), row).astype(np.float32) for name, row in ids.items()}
    assert hot["c"].tolist() == [0, 0, 0] and hot["e"].tolist() == [1, 1, 1]

    lists = records(tfrecorder.load(rich, "train"), batched=False)
    assert {name: r["label"].tolist() for name, r in lists.items()} == ids
    for options in ({}, {"batch_size": 4}, {"batch_size": 4, "image_size": (5, 7)}):
        ds = tfrecorder.load(rich, "train", multi_hot=True, **options)
        batched = "batch_size" in options
        assert ds.element_spec["label"] == tf.TensorSpec([None, 3] if batched else [3],
                                                         tf.float32)
        found = records(ds, batched)
        assert sorted(found) == sorted(hot)
        for name, vector in hot.items():
            np.testing.assert_array_equal(found[name]["label"], vector, err_msg=name)
    pairs = tfrecorder.load(rich, "train", batch_size=4, image_size=(5, 7),
                            as_supervised=True, multi_hot=True)
    images, labels = next(iter(pairs))
    assert images.shape == (4, 5, 7, 3) and labels.shape == (4, 3)
    ragged = tfrecorder.load(rich, "train", batch_size=4, as_supervised=True)
    assert isinstance(ragged.element_spec[1], tf.RaggedTensorSpec)


def test_feature_spec_parses_lists_densely_per_record_and_raggedly_per_batch(rich):
    """verify and inspect parse single records with this spec."""
    manifest = Manifest.from_json(read_manifest(rich))
    spec = manifest.parse_spec()
    assert isinstance(spec["age"], tf.io.FixedLenFeature)
    assert isinstance(spec["tags"], tf.io.RaggedFeature)
    assert isinstance(spec["boxes"], tf.io.RaggedFeature)
    serialized = list(tf.data.TFRecordDataset(shard_files(rich, manifest, "train")))
    for record in serialized:
        one = tf.io.parse_single_example(record, spec)
        assert all(isinstance(v, tf.Tensor) for v in one.values())
        assert one["boxes"].shape[1:] == (4,) and one["tags"].shape.rank == 1
    batch = tf.io.parse_example(tf.stack(serialized), spec)
    assert isinstance(batch["boxes"], tf.RaggedTensor) and batch["boxes"].shape[2] == 4
    assert isinstance(batch["age"], tf.Tensor) and batch["age"].shape == (len(serialized),)
    with pytest.raises(ValueError, match=r"feature 'grid' has shape \[None, None\]; only"):
        Manifest.from_json({"features": {"grid": {"dtype": "int64", "shape": [None, None]}}}
                           ).parse_spec()


@pytest.fixture
def table(tmp_path) -> tuple[str, pd.DataFrame]:
    """A dataset without images: numbers, a list and multi-label labels."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "split": ["TRAIN"] * 10 + ["TEST"] * 2,
        "x": rng.normal(size=12).round(3),
        "n": np.arange(12),
        "tags": [["p"] * (i % 3) for i in range(12)],
        "label": [[["a"], ["b", "a"], [], ["c"]][i % 4] for i in range(12)],
    })
    out = str(tmp_path / "table")
    tfrecorder.convert(frame, out, progress=False)
    return out, frame


def test_a_table_without_images_loads_batches_and_pairs(table):
    out, frame = table
    manifest = read_manifest(out)
    assert not any(f["role"] == "image" for f in manifest["features"].values())
    vocabulary = manifest["labels"]["vocabulary"]
    train = frame[frame["split"] == "TRAIN"]
    expected = {int(row["n"]): (np.float32(row["x"]), [b"p"] * len(row["tags"]),
                                [vocabulary.index(c) for c in row["label"]])
                for _, row in train.iterrows()}

    def by_n(ds, batched):
        found = records(ds, batched, key="n")
        assert all(sorted(r) == ["label", "n", "split", "tags", "x"] for r in found.values())
        return {n: (r["x"], r["tags"].tolist(), r["label"].tolist()) for n, r in found.items()}

    assert by_n(tfrecorder.load(out, "train"), batched=False) == expected
    for options in ({}, {"cache": True}, {"drop_remainder": True}):
        ds = tfrecorder.load(out, "train", batch_size=4, **options)
        assert isinstance(ds.element_spec["tags"], tf.RaggedTensorSpec)
        assert isinstance(ds.element_spec["label"], tf.RaggedTensorSpec)
        assert len(ds) == (2 if options.get("drop_remainder") else 3) == len(list(ds))
        if not options.get("drop_remainder"):
            assert by_n(ds, batched=True) == expected
    repeated = tfrecorder.load(out, "train", batch_size=4, repeat=True, cache=True)
    assert by_n(repeated.take(6), batched=True) == expected  # 24 records: all 10, twice, and 4
    assert repeated.cardinality() == tf.data.INFINITE_CARDINALITY

    features, labels = next(iter(tfrecorder.load(out, "test", batch_size=2, as_supervised=True,
                                                 multi_hot=True)))
    assert sorted(features) == ["n", "tags", "x"]
    test = frame[frame["split"] == "TEST"]
    assert sorted(features["n"].numpy().tolist()) == test["n"].tolist()
    hot = {"a": [1, 0, 0], "b": [0, 1, 0], "c": [0, 0, 1]}
    expected_hot = {int(row["n"]): np.sum([hot[c] for c in row["label"]] + [[0, 0, 0]], 0)
                    for _, row in test.iterrows()}
    for n, vector in zip(features["n"].numpy(), labels.numpy()):
        np.testing.assert_array_equal(vector, expected_hot[int(n)])


def test_a_keras_model_trains_on_a_multi_label_table(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 2)).round(3)
    out = str(tmp_path / "table")
    tfrecorder.convert(pd.DataFrame({
        "x0": x[:, 0], "x1": x[:, 1],
        "label": [[c for c, on in zip("ab", row > 0) if on] for row in x],
    }), out, progress=False)
    train = tfrecorder.load(out, "train", batch_size=8, as_supervised=True, multi_hot=True)
    inputs = {name: tf.keras.Input((), name=name) for name in ("x0", "x1")}
    stacked = tf.keras.layers.Concatenate()(
        [tf.keras.layers.Reshape((1,))(inputs[name]) for name in ("x0", "x1")])
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation="sigmoid")(stacked))
    model.compile("adam", "binary_crossentropy")
    history = model.fit(train, epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])
    assert model.predict(train.map(lambda f, y: f), verbose=0).shape == (
        read_manifest(out)["splits"]["train"]["num_records"], 2)


def test_options_that_do_not_apply_are_refused(dataset, rich, table, tmp_path):
    out, _ = table
    for options, named in [({"image_size": (8, 8)}, "image_size"), ({"channels": 3}, "channels"),
                           ({"augment": "basic"}, "augment"),
                           ({"image_size": (8, 8), "channels": 1}, "image_size and channels")]:
        with pytest.raises(ValueError, match=f"has no images, so {named} cannot apply"):
            tfrecorder.load(out, "train", **options)
    with pytest.raises(ValueError, match="multi_hot is for multi-label datasets, and this one "
                                         "has a single label per record"):
        tfrecorder.load(dataset, multi_hot=True)
    unlabelled = str(tmp_path / "unlabelled")
    tfrecorder.convert(pd.DataFrame({"x": [1.0, 2.0]}), unlabelled, progress=False)
    with pytest.raises(ValueError, match="multi_hot needs labels, and this dataset has none"):
        tfrecorder.load(unlabelled, multi_hot=True)
    bare = tmp_path / "bare"  # labels alone: refused since, but older versions wrote them
    tfrecorder.convert(pd.DataFrame({"x": [1.0], "label": ["a"]}), bare, progress=False)
    manifest = json.loads((bare / "dataset.json").read_text())
    del manifest["features"]["x"]
    (bare / "dataset.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="neither images nor input features"):
        tfrecorder.load(bare, as_supervised=True)
    assert len(tfrecorder.load(rich, "train", multi_hot=True, channels=1)) == len(NAMES)


def test_a_cache_folder_keeps_each_split_apart(dataset, table, tmp_path):
    for path in (dataset, table[0]):
        folder = tmp_path / f"cache-{os.path.basename(path)}"
        plain = tfrecorder.load(path, shuffle=False)
        cached = tfrecorder.load(path, shuffle=False, cache=str(folder))
        for split, ds in plain.items():
            expected = [(f["split"].numpy(), f["label"].numpy().tolist()) for f in ds]
            for _ in range(2):  # writes the cache, then reads it
                assert [(f["split"].numpy(), f["label"].numpy().tolist())
                        for f in cached[split]] == expected and expected
        assert sorted(os.listdir(folder)) == sorted(
            f"{split}{suffix}" for split in plain for suffix in (".index", ".data-00000-of-00001"))


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
def test_supervised_pairs_leave_out_unlabelled_records_and_dicts_mark_them(tmp_path, caplog,
                                                                            layout):
    """A record stored without a label is never a pair with class 0: as_supervised
    leaves it out (len(ds) counts the rest, a warning says so); a dict's label is -1."""
    out = str(tmp_path / "out")
    tfrecorder.convert(partly_labelled_csv(tmp_path), out, progress=False, layout=layout)
    pairs = tfrecorder.load(out, "train", as_supervised=True, batch_size=2,
                            image_size=(8, 8))
    assert len(pairs) == 2  # 3 labelled records of 5, in batches of 2
    assert sorted(int(label) for _, labels in pairs for label in labels) == [0, 1, 1]
    assert "2 of 5 records of the train split have no label" in caplog.text
    assert len(tfrecorder.load(out, "test", as_supervised=True)) == 1
    elements = tfrecorder.load(out, "train")
    assert len(elements) == 5
    assert sorted(int(e["label"]) for e in elements) == [-1, -1, 0, 1, 1]

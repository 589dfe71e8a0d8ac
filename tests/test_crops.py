"""load()'s crops on classification datasets, in both layouts: augment="random_resized_crop"
and crop="center" give the pixels that TensorFlow's public ops give for the same window
(the window drawn by `stateless_sample_distorted_bounding_box`, or Model Garden's central
one; a JPEG decoded by `decode_and_crop_jpeg` at the largest DCT ratio that covers
image_size, a PNG or raw image decoded whole and sliced; then a bilinear resize), with
seeds that repeat. Detection and segmentation crops: tests/test_crops_detection.py."""

import glob
import logging
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from helpers import make_image, pixels

import tfrecorder
from tfrecorder import CenterCrop, RandomResizedCrop
from tfrecorder.errors import OptionError

SAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "examples",
                                        "images", "*", "*")))
SIZE = (40, 32)  # (height, width): small, so that windows take DCT ratios up to 1/8
LAYOUTS = ("tfrecorder", "tf_models")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    """The bundled photos (JPEGs, and a PNG) and a large smooth JPEG, by file name."""
    folder = tmp_path_factory.mktemp("photos")
    big = folder / "big.jpg"
    make_image((80, 60), seed=5).resize((1200, 900)).save(big, "JPEG", quality=92)
    return {os.path.basename(p): os.path.abspath(p) for p in [*SAMPLES, str(big)]}


@pytest.fixture(scope="module")
def written(tmp_path_factory, sources):
    """written(layout, image_format) -> a dataset of every source in its train split."""
    folders = {}

    def write(layout: str, image_format: str = "auto") -> str:
        if (layout, image_format) not in folders:
            out = str(tmp_path_factory.mktemp(f"{layout}_{image_format}"))
            table = pd.DataFrame({"split": "TRAIN", "image_uri": list(sources.values()),
                                  "label": [os.path.basename(os.path.dirname(p)) or "big"
                                            for p in sources.values()]})
            tfrecorder.convert(table, out, layout=layout, image_format=image_format,
                               progress=False, num_workers=1)
            folders[layout, image_format] = out
        return folders[layout, image_format]

    return write


def name_of(features) -> str:
    """A loaded record's source file name, in either layout."""
    uri = features["image_uri"] if "image_uri" in features else features["image_name"]
    return os.path.basename(uri.numpy().decode())


def element_seeds(seed: int, count: int) -> list:
    """Each record's seed, as documented: a stream of `tf.data.Dataset.random(seed)`, two
    numbers a record, split into the window's seed and the flip's."""
    stream = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    return [tf.random.experimental.stateless_split(s, 2) for s in stream.take(count)]


def inception_window(height: int, width: int, seed, crop=None):
    crop = crop or RandomResizedCrop()
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        [height, width, 1], tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed,
        min_object_covered=crop.area[0], aspect_ratio_range=crop.aspect_ratio,
        area_range=crop.area, max_attempts=10)
    return [int(v) for v in [*begin[:2], *size[:2]]]


def central_window(height: int, width: int, fraction: float = 0.875):
    """Model Garden's `center_crop_image_v2` window (a square target)."""
    side = fraction * min(height, width)
    return [int((height - side) / 2), int((width - side) / 2), int(side), int(side)]


def expected_pixels(path: str, window, stored_raw: bool = False) -> np.ndarray:
    """The window of the source, by TensorFlow's public ops, resized to SIZE."""
    y, x, h, w = window
    if path.endswith(".jpg") and not stored_raw:
        ratio = max(r for r in (1, 2, 4, 8) if h >= r * SIZE[0] and w >= r * SIZE[1])
        image = tf.io.decode_and_crop_jpeg(
            tf.io.read_file(path), [y // ratio, x // ratio, h // ratio, w // ratio],
            channels=3, ratio=ratio)
    else:
        image = rgb(pixels(path))[y:y + h, x:x + w]
    return tf.cast(tf.image.resize(image, SIZE) + 0.5, tf.uint8).numpy()


def rgb(image: np.ndarray) -> np.ndarray:
    """A source's pixels as RGB, as load() gives them (channels=3)."""
    image = image.reshape(*image.shape[:2], -1)
    return np.repeat(image[..., :1], 3, -1) if image.shape[-1] <= 2 else image[..., :3]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_random_resized_crops_are_the_public_ops_window_decoded_alone(written, sources,
                                                                      layout):
    out = written(layout)
    loaded = list(tfrecorder.load(out, "train", image_size=SIZE, shuffle=False, seed=7,
                                  augment="random_resized_crop"))
    seeds = element_seeds(7, len(loaded))
    flipped, ratios, differences = 0, set(), []
    for features, (window_seed, flip_seed) in zip(loaded, seeds):
        path = sources[name_of(features)]
        height, width = pixels(path).shape[:2]
        window = inception_window(height, width, window_seed)
        found = features["image"].numpy()
        if tf.random.stateless_uniform([], flip_seed) < 0.5:
            found, flipped = found[:, ::-1], flipped + 1
        np.testing.assert_array_equal(found, expected_pixels(path, window),
                                      err_msg=name_of(features))
        ratios.add(max(r for r in (1, 2, 4, 8) if window[2] >= r * SIZE[0]
                       and window[3] >= r * SIZE[1]))
        # In the place of the window of the exact decode: alike, seen at a coarse scale
        # (which averages away bilinear's aliasing on textures).
        y, x, h, w = window
        exact = tf.image.resize(rgb(pixels(path))[y:y + h, x:x + w], (8, 8), antialias=True)
        coarse = tf.image.resize(found, (8, 8), antialias=True)
        differences.append((name_of(features), np.abs(coarse - exact).mean()))
    assert 0 < flipped < len(loaded)
    assert len(ratios) >= 2, ratios  # the DCT ratio follows each window's size
    assert max(d for _, d in differences) < 6, differences


@pytest.mark.parametrize("image_format", ["png", "raw"])
def test_png_and_raw_images_are_decoded_whole_then_cut(written, sources, image_format):
    out = written("tfrecorder", image_format)
    crop = RandomResizedCrop(area=(0.3, 0.6), flip=False)
    loaded = list(tfrecorder.load(out, "train", image_size=SIZE, shuffle=False, seed=3,
                                  augment=crop))
    for features, (window_seed, _) in zip(loaded, element_seeds(3, len(loaded))):
        path = sources[name_of(features)]
        height, width = pixels(path).shape[:2]
        window = inception_window(height, width, window_seed, crop)
        assert 0.3 * height * width * 0.97 <= window[2] * window[3] <= 0.6 * height * width
        np.testing.assert_array_equal(features["image"].numpy(),
                                      expected_pixels(path, window, stored_raw=True))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_center_crop_is_model_gardens_window_decoded_alone(written, sources, layout):
    out = written(layout)
    square = (SIZE[0], SIZE[0])
    for fraction, crop in [(0.875, "center"), (0.5, CenterCrop(0.5))]:
        datasets = tfrecorder.load(out, image_size=square, crop=crop, shuffle=False)
        for features in datasets["train"]:
            path = sources[name_of(features)]
            height, width = pixels(path).shape[:2]
            window = central_window(height, width, fraction)
            y, x, h, w = window
            if path.endswith(".jpg"):
                ratio = max(r for r in (1, 2, 4, 8) if min(h, w) >= r * square[0])
                image = tf.io.decode_and_crop_jpeg(
                    tf.io.read_file(path), [y // ratio, x // ratio, h // ratio, w // ratio],
                    channels=3, ratio=ratio)
            else:
                image = rgb(pixels(path))[y:y + h, x:x + w]
            expected = tf.cast(tf.image.resize(image, square) + 0.5, tf.uint8).numpy()
            np.testing.assert_array_equal(features["image"].numpy(), expected,
                                          err_msg=f"{name_of(features)} {fraction}")


def test_a_non_square_center_crop_keeps_the_image_size_shape(written, sources):
    """For image_size (40, 32), the central window of aspect 32/40 whose short side is
    0.875 of the largest such window's."""
    out = written("tfrecorder")
    for features in tfrecorder.load(out, "train", image_size=SIZE, crop="center",
                                    shuffle=False):
        path = sources[name_of(features)]
        height, width = pixels(path).shape[:2]
        scale = Fraction(7, 8) * min(Fraction(height, SIZE[0]), Fraction(width, SIZE[1]))
        h, w = SIZE[0] * scale, SIZE[1] * scale  # exact: the rounding is the test's
        window = [int((height - h) / 2), int((width - w) / 2), int(h), int(w)]
        np.testing.assert_array_equal(features["image"].numpy(), expected_pixels(path, window),
                                      err_msg=f"{name_of(features)} {window}")


def test_crops_repeat_with_their_seed_and_change_every_epoch(written):
    out = written("tfrecorder")

    def epochs(seed, count=2, **options):
        ds = tfrecorder.load(out, "train", image_size=SIZE, augment="random_resized_crop",
                             seed=seed, **options)
        return [[f["image"].numpy() for f in ds] for _ in range(count)]

    first, second = epochs(5)
    assert all(np.array_equal(a, b) for a, b in zip(epochs(5)[0], first))
    assert not all(np.array_equal(a, b) for a, b in zip(first, second))
    assert not all(np.array_equal(a, b) for a, b in zip(epochs(6)[0], first))
    # Cached, the records are: their crops still change every epoch.
    cached_first, cached_second = epochs(5, cache=True)
    assert not all(np.array_equal(a, b) for a, b in zip(cached_first, cached_second))
    assert len(cached_first) == len(first)
    # Batched, the same crops (the record order is the same).
    batches = tfrecorder.load(out, "train", image_size=SIZE, augment="random_resized_crop",
                              seed=5, batch_size=4)
    np.testing.assert_array_equal(np.concatenate([b["image"] for b in batches]), first)


def test_the_train_split_is_cropped_at_random_and_the_others_at_the_center(tmp_path,
                                                                           sources):
    table = pd.DataFrame({"image_uri": list(sources.values())[:8],
                          "split": ["TRAIN"] * 4 + ["VALIDATION"] * 2 + ["TEST"] * 2})
    out = str(tmp_path / "splits")
    tfrecorder.convert(table, out, progress=False, num_workers=1)
    square = (SIZE[0], SIZE[0])
    both = tfrecorder.load(out, image_size=square, augment="random_resized_crop",
                           crop="center", shuffle=False)
    center = tfrecorder.load(out, image_size=square, crop="center", shuffle=False)
    for split in ("validation", "test"):
        for a, b in zip(both[split], center[split]):
            np.testing.assert_array_equal(a["image"], b["image"])
    assert not all(np.array_equal(a["image"], b["image"])
                   for a, b in zip(both["train"], center["train"]))


@pytest.mark.parametrize(("make", "said"), [
    (lambda: RandomResizedCrop(area=(0.5, 0.2)),
     "RandomResizedCrop's area must be (low, high) with 0 < low <= high <= 1, not (0.5, 0.2)"),
    (lambda: RandomResizedCrop(aspect_ratio=(0, 2)), "RandomResizedCrop's aspect_ratio"),
    (lambda: RandomResizedCrop(min_visible=2), "RandomResizedCrop's min_visible must be"),
    (lambda: CenterCrop(1.5), "CenterCrop's fraction must be above 0 and at most 1"),
])
def test_crop_parameters_out_of_range_are_refused_when_made(make, said):
    with pytest.raises(OptionError) as raised:
        make()
    assert str(raised.value).startswith(said)
    assert raised.value.option == ("crop" if "CenterCrop" in said else "augment")


def test_images_stored_far_larger_than_loaded_are_warned_of_once(written, caplog):
    out = written("tfrecorder")
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        tfrecorder.load(out, image_size=(300, 300))
    assert not [r for r in caplog.records if "max_image_side" in r.message]
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        tfrecorder.load(out, image_size=(16, 16), augment="random_resized_crop")
    (warning,) = [r.message for r in caplog.records if "max_image_side" in r.message]
    assert "over 4 times larger than the 16x16" in warning
    assert "max_image_side=36 (--max-image-side 36)" in warning
    assert "Written for training" in warning


def test_the_recipes_of_docs_reading_run(tmp_path, sources, monkeypatch, caplog):
    """docs/reading.md, "Training crops, decoded alone" and "Written for training": its
    code blocks, in order, on a table of the photos and the large image."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "reading.md").read_text()
    section = text.split("## Training crops, decoded alone")[1].split("\n## ")[0]
    blocks = [block.split("```")[0] for block in section.split("```python\n")[1:]]
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    paths = list(sources.values())
    table = pd.DataFrame({"split": ["TRAIN"] * 12 + ["VALIDATION"] * (len(paths) - 12),
                          "image_uri": paths, "label": [os.path.basename(os.path.dirname(p))
                                                        for p in paths]})
    tfrecorder.convert(table, "out/", progress=False, num_workers=1)
    table.to_csv("images.csv", index=False)
    namespace = {"tfrecorder": tfrecorder}
    exec(compile(blocks[0], "docs/reading.md", "exec"), namespace)
    images, labels = next(iter(namespace["train"]))
    assert images.shape == (8, 64, 64, 3) and labels.shape == (8,)
    assert next(iter(namespace["validation"]))[0].shape[1:] == (64, 64, 3)
    exec(compile(blocks[1], "docs/reading.md", "exec"), namespace)
    stats = tfrecorder.info("train_224/").statistics["train"]
    assert stats.image_width.max == 512 and stats.image_height.max <= 512  # big.jpg, shrunk
    assert stats.image_width.min == 315  # the others, as they were
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        tfrecorder.load("train_224/", image_size=(224, 224), augment="random_resized_crop")
    assert not [r for r in caplog.records if "max_image_side" in r.message]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_photos_under_twice_the_size_are_crop_decoded_at_full_scale(tmp_path, sources,
                                                                   layout):
    # JPEGs only, none 920 px high (the big one is 900), so no window can take a DCT
    # ratio above 1 at 460x460 and load() decodes without choosing one: the pixels are
    # still the public ops' window, and (image, label) pairs hold the dicts' images and
    # labels.
    size = (460, 460)
    jpegs = [path for path in sources.values() if path.endswith(".jpg")]
    out = str(tmp_path / "out")
    tfrecorder.convert(pd.DataFrame({"split": "TRAIN", "image_uri": jpegs, "label": "x"}),
                       out, layout=layout, progress=False, num_workers=1)
    stats = tfrecorder.info(out).manifest.statistics
    assert max(s.image_height.max for s in stats.values()) < 2 * size[0] or \
        max(s.image_width.max for s in stats.values()) < 2 * size[1]
    loaded = list(tfrecorder.load(out, "train", image_size=size, shuffle=False, seed=3,
                                  augment="random_resized_crop"))
    pairs = list(tfrecorder.load(out, "train", image_size=size, shuffle=False, seed=3,
                                 augment="random_resized_crop", as_supervised=True))
    for features, (window_seed, flip_seed), (image, label) in zip(
            loaded, element_seeds(3, len(loaded)), pairs):
        path = sources[name_of(features)]
        y, x, h, w = inception_window(*pixels(path).shape[:2], window_seed)
        expected = tf.cast(tf.image.resize(tf.io.decode_and_crop_jpeg(
            tf.io.read_file(path), [y, x, h, w], channels=3), size) + 0.5, tf.uint8).numpy()
        found = features["image"].numpy()
        if tf.random.stateless_uniform([], flip_seed) < 0.5:
            found = found[:, ::-1]
        np.testing.assert_array_equal(found, expected, err_msg=name_of(features))
        np.testing.assert_array_equal(image.numpy(), features["image"].numpy())
        assert int(label) == int(features["label"])
    assert len(pairs) == len(loaded) == len(jpegs)


def test_the_largest_dct_scale_follows_the_largest_stored_sides():
    from tfrecorder.read.decoding import largest_dct_scale

    assert largest_dct_scale(447, 2000, (224, 224)) == 0
    assert largest_dct_scale(448, 448, (224, 224)) == 1
    assert largest_dct_scale(900, 1800, (224, 224)) == 2
    assert largest_dct_scale(1792, 1800, (224, 224)) == 3
    assert largest_dct_scale(100, 100, (10, 20)) == 2  # (height, width): 100 >= 4 x 20
    assert largest_dct_scale(None, None, (224, 224)) == 3  # not known: any
    assert largest_dct_scale(448, 448, None) == 3

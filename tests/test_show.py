"""show(): a contact sheet of a split's first images per class, read without TensorFlow.

The datasets hold solid-colour images, one colour per class, so a thumbnail's place on the
sheet can be checked by its colour. What the sheet should show is read back with
TensorFlow, independently of the pure-Python reader under test.
"""

import io
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from helpers import (
    dataset_folder_files,
    features_of,
    read_manifest,
    read_split,
    rewrite_split,
    run_without_tensorflow,
)
from PIL import Image, ImageChops, ImageFont

import tfrecorder
from tfrecorder.errors import OptionError
from tfrecorder.read.show import ContactSheet, show
from tfrecorder.read.thumbnails import MAX_ROWS, Item, Thumbnail, thumbnails

COLOURS = {"red": (220, 40, 40), "green": (40, 190, 70), "blue": (40, 70, 220)}
PLACEHOLDER = (200, 200, 200)
WHITE = (255, 255, 255)


def colour_table(folder, per_class: int = 6, fmt: str = "JPEG",
                 labels=None) -> pd.DataFrame:
    """`per_class` images of each colour in COLOURS, labelled by it (or by `labels`, one
    per row); sizes differ, so no two images are the same bytes."""
    rows = []
    for i in range(per_class * len(COLOURS)):
        name = list(COLOURS)[i % len(COLOURS)]
        path = os.path.join(folder, f"{name}_{i:02d}.{fmt.lower()}")
        os.makedirs(folder, exist_ok=True)
        Image.new("RGB", (30 + i, 20 + i), COLOURS[name]).save(path, fmt)
        rows.append(("TRAIN", path, name if labels is None else labels[i]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


@pytest.fixture(scope="module")
def colours(tmp_path_factory) -> str:
    """Six JPEGs per class in three shards."""
    folder = tmp_path_factory.mktemp("colours")
    out = str(folder / "out")
    tfrecorder.convert(colour_table(folder / "images"), out, num_shards=3, progress=False)
    return out


def records_in_shards(out) -> list[dict]:
    """Every train record's shard, index in it, labels (names) and image name, in order,
    read by TensorFlow."""
    manifest = read_manifest(out)
    vocabulary = manifest["labels"]["vocabulary"] if "labels" in manifest else None
    compression = "GZIP" if manifest["compression"] == "gzip" else ""
    found = []
    for shard in manifest["splits"]["train"]["shards"]:
        path = os.path.join(out, shard["file"])
        for index, record in enumerate(tf.data.TFRecordDataset(path, compression)):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            ids = list(feature["label"].int64_list.value) if vocabulary else []
            found.append({"shard": shard["file"], "record": index,
                          "labels": tuple(vocabulary[i] for i in ids),
                          "image_name": feature["image_name"].bytes_list.value[0].decode()})
    return found


def expected_items(out, per_class: int, classes) -> list[tuple]:
    """(class, image name, shard, record) of the first `per_class` records of each class,
    class by class."""
    records = records_in_shards(out)
    return [(name, r["image_name"], r["shard"], r["record"]) for name in classes
            for r in [r for r in records if name in r["labels"]][:per_class]]


def shown(sheet: ContactSheet) -> list[tuple]:
    return [(i.class_name, i.image_name, i.shard, i.record) for i in sheet.items]


def cell_colour(sheet: ContactSheet, row: int, column: int) -> np.ndarray:
    """The mean colour at the centre of a thumbnail's square."""
    left, top, right, bottom = sheet.layout.thumbnail_box(row, column)
    x, y = (left + right) // 2, (top + bottom) // 2
    return np.asarray(sheet.crop((x - 4, y - 4, x + 4, y + 4))).reshape(-1, 3).mean(axis=0)


def cells(sheet: ContactSheet) -> list[tuple[int, int]]:
    """(row, column) of each item: its class's row, left to right."""
    found, columns = [], {}
    for item in sheet.items:
        row = sheet.classes.index(item.class_name or item.split)
        columns[row] = columns.get(row, -1) + 1
        found.append((row, columns[row]))
    return found


def assert_colours(sheet: ContactSheet, tolerance: float = 12) -> None:
    """Each thumbnail is the colour its file name says, centred where its class's row
    has it."""
    for item, (row, column) in zip(sheet.items, cells(sheet), strict=True):
        colour = COLOURS[item.image_name.split("_")[0]]
        np.testing.assert_allclose(cell_colour(sheet, row, column), colour, atol=tolerance)
        square = sheet.crop(sheet.layout.thumbnail_box(row, column))
        left, top, right, bottom = ImageChops.difference(
            square, Image.new("RGB", square.size, WHITE)).getbbox()
        assert abs(left - (square.width - right)) <= 1
        assert abs(top - (square.height - bottom)) <= 1


def ink_bands(image: Image.Image) -> list[tuple[int, int]]:
    """(left, right) of each band of pixel rows with ink (text), top to bottom."""
    dark = np.asarray(image.convert("L")) < 200  # text is #222222; the rules #dddddd
    inked = dark.any(axis=1)
    bands, start = [], None
    for y, on in enumerate([*inked, False]):
        if on and start is None:
            start = y
        elif not on and start is not None:
            columns = np.flatnonzero(dark[start:y].any(axis=0))
            bands.append((int(columns[0]), int(columns[-1]) + 1))
            start = None
    return bands


def saved(sheet: ContactSheet) -> Image.Image:
    """The sheet as a PNG file holds it."""
    buffer = io.BytesIO()
    sheet.save(buffer, "PNG")
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def header(sheet: ContactSheet, row: int) -> Image.Image:
    """The header cell of a row (its title and caption), from the saved sheet."""
    layout = sheet.layout
    return saved(sheet).crop((0, row * layout.cell_height + 1, layout.header_width,
                              (row + 1) * layout.cell_height))


def text_width(text: str, sheet: ContactSheet) -> int:
    """The width of `text`'s ink in the sheet's font."""
    left, _, right, _ = ImageFont.load_default(size=sheet.layout.font_size).getbbox(text)
    return right - left


def assert_headers(sheet: ContactSheet, lines: list[tuple[str, str]]) -> None:
    """Each row's header holds two lines of text as wide as `lines` say: its title and
    its caption."""
    for row, texts in enumerate(lines):
        bands = ink_bands(header(sheet, row))
        assert [right - left for left, right in bands] == pytest.approx(
            [text_width(text, sheet) for text in texts], abs=2), texts


# --- the sheet -----------------------------------------------------------------------------

def test_a_row_per_class_of_its_first_records(colours):
    sheet = show(colours, per_class=4, thumbnail_size=48)

    assert isinstance(sheet, Image.Image) and sheet.mode == "RGB"
    assert sheet.classes == ("blue", "green", "red") and sheet.grid == (3, 4)
    layout = sheet.layout
    assert layout.cell_width > 48 and layout.cell_height > 48 + layout.font_size
    # four cells a row, and a header column as wide as a cell, for the class names
    assert sheet.size == (5 * layout.cell_width, 3 * layout.cell_height)
    assert shown(sheet) == expected_items(colours, 4, sheet.classes)
    assert {i.split for i in sheet.items} == {"train"} and sheet.split_name == "train"
    assert all(i.labels == (i.class_name,) and i.problem == "" for i in sheet.items)
    assert_colours(sheet)
    assert sheet.getpixel((layout.header_width // 2, 2)) == WHITE


def caption_lines(sheet: ContactSheet, row: int, column: int) -> int:
    """The lines of text drawn under a thumbnail: bands of pixel rows with ink."""
    left, _, right, bottom = sheet.layout.thumbnail_box(row, column)
    strip = sheet.crop((left, bottom, right, (row + 1) * sheet.layout.cell_height))
    inked = (np.asarray(strip.convert("L")) < 160).any(axis=1)
    return int(inked[0]) + int(np.sum(inked[1:] & ~inked[:-1]))


def test_the_sheet_is_as_wide_as_its_fullest_row(tmp_path):
    """per_class=8 for classes of 1, 2 and 3 images: three columns, not eight."""
    labels = ["red", "green", "blue", "green", "blue", "blue"]
    out = str(tmp_path / "out")
    tfrecorder.convert(colour_table(tmp_path / "images", 2, labels=labels), out,
                       progress=False)
    sheet = show(out, per_class=8, thumbnail_size=32)
    assert sheet.classes == ("blue", "green", "red") and sheet.grid == (3, 3)
    assert sheet.width == sheet.layout.header_width + 3 * sheet.layout.cell_width
    assert shown(sheet) == expected_items(out, 8, sheet.classes)
    for row, filled in enumerate([3, 2, 1]):  # a row of fewer ends in empty cells
        for column in range(filled, 3):
            assert sheet.crop(sheet.layout.thumbnail_box(row, column)).getcolors() == [
                (32 * 32, WHITE)]


def test_a_caption_is_the_file_name_not_the_rows_class_again(colours):
    sheet = show(colours, per_class=2, thumbnail_size=64)
    layout = sheet.layout
    assert layout.caption_lines == 1
    assert layout.cell_height == 64 + layout.line_height + 3 * layout.padding
    for row, column in cells(sheet):
        assert caption_lines(sheet, row, column) == 1


def test_thumbnails_are_what_the_sheet_lays_out(colours):
    found = thumbnails(colours, "train", per_class=2, size=16)
    sheet = show(colours, per_class=2, thumbnail_size=16)
    assert [t.item for t in found] == sheet.items
    assert all(isinstance(t, Thumbnail) and isinstance(t.item, Item) for t in found)
    for thumbnail in found:  # shrunk to fit, keeping the aspect ratio
        source = Image.open(next(r for r in read_split(colours, "train")
                                 if r["image_name"].decode() == thumbnail.image_name)
                            ["image_uri"].decode())
        assert max(thumbnail.image.size) == 16
        assert abs(thumbnail.image.width / thumbnail.image.height
                   - source.width / source.height) < 0.1
        np.testing.assert_allclose(np.asarray(thumbnail.image).mean(axis=(0, 1)),
                                   COLOURS[thumbnail.class_name], atol=12)


def test_classes_chooses_the_rows_and_their_order(colours):
    sheet = show(colours, per_class=3, thumbnail_size=32, classes=["red", "blue"])
    assert sheet.classes == ("red", "blue") and sheet.grid == (2, 3)
    assert shown(sheet) == expected_items(colours, 3, ["red", "blue"])
    assert_colours(sheet)
    with pytest.raises(OptionError, match="no class 'cat'; its classes are 'blue', 'green', "
                                          "'red'") as error:
        show(colours, classes=["red", "cat"])
    assert error.value.option == "classes"


def test_the_sheet_is_a_pillow_image_and_displays_in_notebooks(colours, tmp_path):
    sheet = show(colours, per_class=2, thumbnail_size=32)
    sheet.save(tmp_path / "sheet.png")
    with Image.open(tmp_path / "sheet.png") as saved:
        assert saved.size == sheet.size and saved.tobytes() == sheet.tobytes()
    assert sheet.copy().tobytes() == sheet.tobytes()
    assert sheet.resize((10, 10)).size == (10, 10)
    assert len(sheet.split()) == 3  # Pillow's bands: hence split_name, not split

    unpickled = pickle.loads(pickle.dumps(sheet))
    assert isinstance(unpickled, ContactSheet) and unpickled == sheet
    assert unpickled.items == sheet.items and unpickled.layout == sheet.layout

    width, height = sheet.size
    assert repr(sheet) == f"<ContactSheet train: 6 images, 3 classes x 2, {width}x{height}>"
    page = sheet._repr_html_()
    assert page.startswith("<figure") and "data:image/png;base64," in page
    assert "train: 6 images; 3 classes x 2: blue, green, red" in page


# --- what records hold ----------------------------------------------------------------------

def test_raw_pixels_and_gzip_shards_show_the_same(colours, tmp_path):
    table = colour_table(tmp_path / "images")
    for options in ({"image_format": "raw"}, {"compression": "gzip"}):
        out = str(tmp_path / "_".join(options.values()))
        tfrecorder.convert(table, out, num_shards=3, progress=False, **options)
        sheet = show(out, per_class=4, thumbnail_size=32)
        assert shown(sheet) == expected_items(out, 4, sheet.classes)
        assert all(i.problem == "" for i in sheet.items)
        assert_colours(sheet, tolerance=2 if "image_format" in options else 12)


def test_raw_pixels_of_one_and_four_channels(tmp_path):
    paths = []
    for i, (mode, colour) in enumerate([("L", 90), ("RGBA", (40, 70, 220, 255)),
                                        ("RGBA", (40, 70, 220, 0))]):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.new(mode, (20, 10 + i), colour).save(paths[-1])
    out = str(tmp_path / "out")
    tfrecorder.convert(pd.DataFrame({"split": "TRAIN", "image_uri": paths}), out,
                       image_format="raw", progress=False)
    found = {t.image_name: t.image for t in thumbnails(out, size=32)}
    assert found["0.png"].getpixel((5, 5)) == (90, 90, 90)
    assert found["1.png"].getpixel((5, 5)) == (40, 70, 220)
    assert found["2.png"].getpixel((5, 5)) == WHITE  # transparent: the sheet's white


def test_a_multi_label_record_shows_in_the_row_of_each_label(tmp_path):
    labels = [["red"], ["green", "red"], ["blue"], ["red", "blue"], [], ["green"]] * 2
    out = str(tmp_path / "out")
    tfrecorder.convert(colour_table(tmp_path / "images", 4, labels=labels), out,
                       num_shards=2, progress=False)
    sheet = show(out, per_class=3, thumbnail_size=32)
    assert shown(sheet) == expected_items(out, 3, sheet.classes)
    by_record = {(i.shard, i.record): i for i in sheet.items}
    for record in records_in_shards(out):
        item = by_record.get((record["shard"], record["record"]))
        if item is not None:
            assert item.labels == record["labels"]
    assert any(len(i.labels) == 2 for i in sheet.items)
    assert not any(i.labels == () for i in sheet.items)  # no label, no row
    # Under a record of two labels, a second line names the other one.
    assert sheet.layout.caption_lines == 2
    for item, (row, column) in zip(sheet.items, cells(sheet)):
        assert caption_lines(sheet, row, column) == len(item.labels), item
    rows_of = {}
    for thumbnail in thumbnails(out, per_class=3, size=32):
        rows_of.setdefault((thumbnail.shard, thumbnail.record), []).append(thumbnail)
    twice = [found for found in rows_of.values() if len(found) == 2]
    assert twice and all(a.image is b.image for a, b in twice)  # decoded once


def test_integer_labels_and_more_classes_than_rows(tmp_path, caplog):
    paths = []
    for i in range(MAX_ROWS + 5):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.new("RGB", (10, 10 + i), COLOURS["red"]).save(paths[-1])
    out = str(tmp_path / "out")
    tfrecorder.convert(pd.DataFrame({"split": "TRAIN", "image_uri": paths,
                                     "label": range(MAX_ROWS + 5)}), out, progress=False)
    sheet = show(out, per_class=2, thumbnail_size=16)
    assert sheet.classes == tuple(str(i) for i in range(MAX_ROWS)) and sheet.grid == (50, 1)
    assert [i.image_name for i in sheet.items] == [f"{i}.png" for i in range(MAX_ROWS)]
    assert "showing the first 50 of the dataset's 55 classes" in caplog.text
    chosen = show(out, per_class=2, thumbnail_size=16, classes=[54, "7"])
    assert [(i.class_name, i.image_name) for i in chosen.items] == [("54", "54.png"),
                                                                    ("7", "7.png")]


def test_a_dataset_without_labels_has_one_row_named_after_the_split(tmp_path):
    table = colour_table(tmp_path / "images", 2).drop(columns="label")
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    sheet = show(out, per_class=4, thumbnail_size=32)
    assert sheet.classes == ("train",) and sheet.grid == (1, 4)
    records = records_in_shards(out)[:4]
    assert [(i.class_name, i.image_name, i.labels) for i in sheet.items] == [
        (None, r["image_name"], ()) for r in records]
    with pytest.raises(OptionError, match="no labels"):
        show(out, classes=["red"])


def test_an_image_that_cannot_be_decoded_is_a_placeholder(colours, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(colour_table(tmp_path / "images", 2), out, progress=False)
    manifest = read_manifest(out)
    records = read_split(out, "train")
    broken = records[1]["image_name"].decode()
    records[1]["image"] = records[1]["image"][:40]  # a JPEG cut short
    rewrite_split(out, "train", [features_of(r, manifest) for r in records])

    sheet = show(out, per_class=2, thumbnail_size=48)
    assert len(sheet.items) == 6
    problems = {i.image_name: i.problem for i in sheet.items}
    assert problems.pop(broken).startswith("cannot decode")
    assert set(problems.values()) == {""}
    row, column = next(cell for item, cell in zip(sheet.items, cells(sheet))
                       if item.image_name == broken)
    left, top, right, bottom = sheet.layout.thumbnail_box(row, column)
    corner = sheet.crop((left, top, left + 8, top + 8)).getcolors()
    assert corner == [(64, PLACEHOLDER)]


# --- reading no more than it needs, and no TensorFlow ---------------------------------------

def without_later_shards(out, copy) -> None:
    """A copy of the dataset `out` without its train shards but the first."""
    _, *later = [s["file"] for s in read_manifest(out)["splits"]["train"]["shards"]]
    os.makedirs(os.path.join(copy, "index"))
    for name in dataset_folder_files(out):
        if name not in later:
            shutil.copy(os.path.join(out, name), os.path.join(copy, name))


def first_shard_with_every_class(table: pd.DataFrame, folder) -> str:
    """`table` converted into 3 train shards whose first holds a record of each of its
    train classes: which records a shard holds follows their paths' hashes and the seed,
    so seeds are drawn until it does. Returns the dataset's folder."""
    classes = set(table.loc[table["split"] == "TRAIN", "label"])
    for seed in range(20):
        out = str(folder / f"out-{seed}")
        tfrecorder.convert(table, out, num_shards={"train": 3}, seed=seed, progress=False)
        first = read_manifest(out)["splits"]["train"]["shards"][0]["file"]
        if {name for r in records_in_shards(out) if r["shard"] == first
                for name in r["labels"]} == classes:
            return out
    pytest.fail("no seed of 20 puts every class in the first shard")


def test_stops_reading_once_every_class_is_full(tmp_path):
    out = first_shard_with_every_class(colour_table(tmp_path / "images"), tmp_path)
    copy = tmp_path / "copy"
    without_later_shards(out, copy)

    sheet = show(str(copy), per_class=1, thumbnail_size=16)  # later shards are gone
    assert shown(sheet) == expected_items(out, 1, sheet.classes)
    with pytest.raises(FileNotFoundError):  # ... and would be read for more
        show(str(copy), per_class=6, thumbnail_size=16)


def test_a_class_the_split_lacks_does_not_make_it_read_to_the_end(tmp_path):
    table = colour_table(tmp_path / "images", 6)
    table.loc[table["label"] == "blue", "split"] = "VALIDATION"
    out = first_shard_with_every_class(table, tmp_path)  # red and green
    copy = tmp_path / "copy"
    without_later_shards(out, copy)

    sheet = show(str(copy), per_class=1, thumbnail_size=16)  # the writer counted no blue
    assert sheet.classes == ("blue", "green", "red")
    assert shown(sheet) == expected_items(out, 1, sheet.classes)
    assert show(str(copy), per_class=1, classes=["blue"]).items == []


def test_every_row_counts_its_images_and_an_empty_one_says_so(tmp_path):
    table = colour_table(tmp_path / "images", 6)
    table.loc[table["label"] == "blue", "split"] = "VALIDATION"
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    sheet = show(out, per_class=2, thumbnail_size=48)
    assert sheet.classes == ("blue", "green", "red") and sheet.grid == (3, 2)
    assert_headers(sheet, [("blue", "none in train"), ("green", "6 images"),
                           ("red", "6 images")])
    # A header is as wide as its text needs, at most twice a cell.
    assert sheet.layout.header_width > sheet.layout.cell_width
    assert sheet.width == sheet.layout.header_width + 2 * sheet.layout.cell_width

    alone = show(out, per_class=2, thumbnail_size=48, classes=["blue"])
    assert alone.grid == (1, 0) and alone.width == alone.layout.header_width
    assert_headers(alone, [("blue", "none in train")])
    unlabelled = str(tmp_path / "unlabelled")
    tfrecorder.convert(table.drop(columns="label"), unlabelled, progress=False)
    assert_headers(show(unlabelled, "validation", per_class=2, thumbnail_size=48),
                   [("validation", "6 images")])


def test_shows_without_importing_tensorflow(colours):
    run_without_tensorflow("import sys; from tfrecorder.read.show import show; "
                           "sheet = show(sys.argv[1], per_class=2); "
                           "assert len(sheet.items) == 6, sheet.items", colours)


# --- what it refuses ------------------------------------------------------------------------

def test_a_dataset_without_images_has_nothing_to_show(tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(pd.DataFrame({"label": ["a", "b"], "x": [1, 2]}), out, progress=False)
    with pytest.raises(OptionError, match="has no images to show"):
        show(out)


@pytest.mark.parametrize("options", [{"per_class": 0}, {"per_class": 2.5},
                                     {"thumbnail_size": -1}, {"split": "nonsense"}])
def test_refuses_options_it_cannot_take(colours, options):
    with pytest.raises(OptionError):
        show(colours, **options)


def test_a_split_the_dataset_lacks(colours):
    with pytest.raises(OptionError, match="no 'test' split"):
        show(colours, "test")


def test_png_sources_and_file_uris(tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(colour_table(tmp_path / "images", 2, fmt="PNG"), out, progress=False)
    sheet = show("file://" + out, per_class=2, thumbnail_size=32)
    assert shown(sheet) == expected_items(out, 2, sheet.classes)
    assert_colours(sheet, tolerance=0)
    assert io.BytesIO(sheet._repr_png_()).getvalue().startswith(b"\x89PNG")


@pytest.mark.parametrize("store_name", ["gcs_store", "s3_store"])
def test_a_dataset_in_a_bucket_shows_like_its_local_copy(colours, store_name, request):
    store = request.getfixturevalue(store_name)
    prefix = f"{store.root}/show"
    for name in dataset_folder_files(colours):
        store.upload_bytes(Path(colours, name).read_bytes(), f"{prefix}/{name}")
    sheet, local = show(prefix, per_class=3, thumbnail_size=32), show(colours, per_class=3,
                                                                      thumbnail_size=32)
    assert sheet.items == local.items and sheet.tobytes() == local.tobytes()

"""Looking at detection and segmentation datasets: `info`'s objects per class, box
distributions and warnings; `show`'s boxes and masks; the report's boxes over its
thumbnails. Datasets are written by `convert` from scenes whose boxes, classes and masks
are known exactly (`detection_data`), in both record layouts."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import shutil
import warnings
from array import array
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from detection_data import (
    CLASSES,
    HEIGHT,
    WIDTH,
    detection_frame,
    scenes,
    write_detection,
    write_segmentation,
)
from PIL import Image
from test_report import (
    CHROMIUM,
    NO_BROWSER,
    by_id,
    dom,
    measured,
    needs_browser,
    screenshot,
    table_rows,
)
from test_report import text as element_text
from test_show import assert_headers, ink_bands, saved, text_width

import tfrecorder
from tfrecorder.format.layouts import BBOX
from tfrecorder.format.manifest import Split
from tfrecorder.format.manifest_statistics import SplitStatistics
from tfrecorder.read.drawing import CLASS_COLOURS, MASK_OPACITY, edge_colour
from tfrecorder.read.report import render
from tfrecorder.read.show import show
from tfrecorder.read.thumbnails import thumbnails
from tfrecorder.write.rows import Record, Row, StoredImage
from tfrecorder.write.statistics import ShardFacts, candidate_duplicates, split_statistics

LAYOUTS = ("tfrecorder", "tf_models")
pytestmark = pytest.mark.filterwarnings("ignore::tfrecorder.errors.DatasetWarning")


def written(folder: Path, drawn: list[dict], task: str = "detection", **options) -> str:
    out = str(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfrecorder.DatasetWarning)
        if task == "detection":
            write_detection(out, drawn, **options)
        else:
            write_segmentation(out, drawn, **options)
    return out


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> list[dict]:
    return scenes(str(tmp_path_factory.mktemp("scenes")), count=12)


@pytest.fixture(scope="module")
def detection(drawn, tmp_path_factory) -> dict[str, str]:
    """The scenes as a detection dataset with instance masks, in each layout."""
    folder = tmp_path_factory.mktemp("detection")
    return {layout: written(folder / layout, drawn, masks=True, layout=layout)
            for layout in LAYOUTS}


def rgb(colour: str) -> np.ndarray:
    return np.asarray([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.float64)


def by_name(drawn: list[dict]) -> dict[str, dict]:
    return {Path(scene["image_uri"]).name: scene for scene in drawn}


# --- info ----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_info_counts_the_objects_of_each_class(drawn, detection, layout):
    info = tfrecorder.info(detection[layout])
    labels = [label for scene in drawn for label in scene["labels"]]
    assert info.task == "detection" and info.counted == "objects"
    assert info.class_counts == {"train": {name: labels.count(name) for name in CLASSES}}
    assert info.class_images == {"train": {
        name: sum(name in scene["labels"] for scene in drawn) for name in CLASSES}}
    objects = info.objects["train"]
    assert objects.num_boxes == len(labels)
    assert objects.without_boxes == sum(not scene["boxes"] for scene in drawn)
    assert (objects.unlabeled_boxes, objects.all_unlabeled) == (0, 0)
    assert f"{len(labels)} objects" in repr(info)
    assert "class (objects)" in info._repr_html_()
    assert info.to_json()["statistics"]["train"]["objects"]["num_boxes"] == len(labels)


def test_the_command_line_prints_objects_and_boxes(drawn, detection):
    from helpers import run_cli

    out = run_cli("info", detection["tf_models"]).stdout
    labels = [label for scene in drawn for label in scene["labels"]]
    assert "Objects per class:" in out and "Records per class" not in out
    assert re.search(rf"train +{len(labels)} boxes; 0-3 an image", out)
    assert "Task:         detection, in the tf_models layout" in out
    assert "3 classes, one per object: cat, dog, zebra" in out


KNOWN_BOXES = [  # relative [ymin, xmin, ymax, xmax]; sqrt(relative area) after each
    [],
    [[0, 0, 0.5, 0.5]],  # 0.5
    [[0, 0, 0.25, 1.0], [0, 0, 0.25, 0.25]],  # 0.5, 0.25
    [[0, 0, 1, 1], [0.5, 0.5, 0.625, 1.0], [0.25, 0.25, 1.0, 1.0]],  # 1, 0.25, 0.75
]


def known_case(drawn: list[dict]) -> list[dict]:
    return [dict(scene, boxes=boxes, labels=[CLASSES[0]] * len(boxes))
            for scene, boxes in zip(drawn, KNOWN_BOXES)]


def test_box_distributions_on_a_known_case(drawn, tmp_path):
    out = written(tmp_path / "known", known_case(drawn))
    objects = tfrecorder.info(out).objects["train"]
    per_image = objects.boxes_per_image  # 0, 1, 2, 3 boxes
    assert (per_image.min, per_image.q1, per_image.median, per_image.q3, per_image.max,
            per_image.mean) == (0, 0.75, 1.5, 2.25, 3, 1.5)
    sizes = np.asarray([0.5, 0.5, 0.25, 1.0, 0.25, 0.75])
    size = objects.box_size
    assert (size.min, size.q1, size.median, size.q3, size.max, size.mean) == (
        0.25, *np.percentile(sizes, [25, 50, 75]).tolist(), 1.0, round(sizes.mean(), 4))
    # In pixels of the 64x48 image: 768, 768, 192, 3072, 192 (6 pixels high: tiny), 1728.
    assert objects.box_areas == {"small": 4, "medium": 2, "large": 0}
    assert objects.tiny_boxes == 1 and objects.without_boxes == 1

    # Stored four times larger, the boxes' sizes are the same; their pixels are not.
    larger = tfrecorder.info(written(tmp_path / "larger", known_case(drawn),
                                     image_size=(4 * HEIGHT, 4 * WIDTH))).objects["train"]
    assert larger.box_size == size and larger.boxes_per_image == per_image
    assert larger.box_areas == {"small": 0, "medium": 2, "large": 4}
    assert larger.tiny_boxes == 0


def planted_boxes(drawn: list[dict], planted: bool) -> list[dict]:
    """Ten scenes with a box of each class; `planted` makes one image without boxes and
    one of a single cat, adds two tiny cats (an edge of 5 pixels, under AutoML's 8; one
    0.5% of the image wide) and keeps only one zebra and eight dogs."""
    found = []
    for i, scene in enumerate(drawn[:10]):
        boxes = [[0.1, 0.1, 0.4, 0.4], [0.5, 0.1, 0.9, 0.4], [0.1, 0.5, 0.9, 0.9]]
        labels = list(CLASSES)
        if planted and i >= 3:
            boxes, labels = boxes[:2], labels[:2]
        found.append(dict(scene, boxes=boxes, labels=labels))
    if planted:
        found[0] = dict(found[0], boxes=[], labels=[])
        found[1] = dict(found[1], boxes=[[0.2, 0.2, 0.6, 0.6]], labels=["cat"])
        tiny = [[0.1, 0.1, 0.1 + 5 / HEIGHT, 0.5], [0.1, 0.5, 0.6, 0.505]]
        found[4] = dict(found[4], boxes=[*found[4]["boxes"], *tiny],
                        labels=[*found[4]["labels"], "cat", "cat"])
    return found


def test_warnings_fire_on_a_dataset_planted_with_what_they_warn_of(drawn, tmp_path):
    clean = tfrecorder.info(written(tmp_path / "clean", planted_boxes(drawn, False)))
    assert clean.objects["train"].num_boxes == 30 and clean.warnings == ()

    out = written(tmp_path / "planted", planted_boxes(drawn, True))
    info = tfrecorder.info(out)
    objects = info.objects["train"]
    assert (objects.without_boxes, objects.unlabeled_boxes, objects.tiny_boxes) == (1, 0, 2)
    found = "\n".join(info.warnings)
    assert "train has fewer than 10 boxes of 2 classes: 'dog' (8), 'zebra' (1)" in found
    assert info.class_counts["train"] == {"cat": 11, "dog": 8, "zebra": 1}
    assert "in train, 2 of 20 boxes are tiny (an edge under 1% of the image's side or " \
           "under 8 pixels" in found
    assert "in train, 1 of 10 images has no boxes" in found
    assert len(info.warnings) == 3
    with pytest.warns(tfrecorder.DatasetWarning, match="tiny"):  # convert warns of them
        write_detection(str(tmp_path / "again"), planted_boxes(drawn, True))


def test_boxes_without_a_class_are_counted_and_warned_of(detection):
    """Detection sources refuse such boxes; a record may still hold fewer classes than
    boxes (written otherwise, or a label of None), and the statistics say so."""
    facts = ShardFacts()
    image = StoredImage("png", HEIGHT, WIDTH, 3, 100, bytes(16))
    box = [0.1, 0.1, 0.5, 0.5]
    for position, (label, boxes) in enumerate([([0], box), ([], box * 2), (None, box),
                                               ([1], box * 2), ([], [])]):
        facts.add(Row(position, "x", "x", label, "TRAIN", {BBOX: boxes}), Record(b"", image))
    statistics = split_statistics([facts], len(CLASSES), objects=True)
    objects = statistics.objects
    assert (objects.num_boxes, objects.unlabeled_boxes, objects.all_unlabeled,
            objects.without_boxes) == (6, 4, 2, 1)
    assert objects.class_images == (1, 1, 0)
    assert split_statistics([facts], len(CLASSES)).objects is None  # not a detection table
    info = tfrecorder.info(detection["tfrecorder"])
    info = dataclasses.replace(info, manifest=dataclasses.replace(
        info.manifest, statistics={Split.TRAIN: statistics}))
    assert "in train, 2 images have boxes of which none has a class (4 boxes without a " \
           "class in all)" in info.warnings


def test_manifests_from_before_object_statistics_read_without_them(detection, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(detection["tfrecorder"], old)
    manifest = json.loads((old / "dataset.json").read_text())
    statistics = manifest["statistics"]["train"]
    assert SplitStatistics.from_json(statistics).to_json() == statistics
    del statistics["objects"]
    assert SplitStatistics.from_json(statistics).objects is None
    (old / "dataset.json").write_text(json.dumps(manifest))
    info = tfrecorder.info(old)
    assert info.objects == {} and info.class_images == {}
    assert not any("box" in warning for warning in info.warnings)
    page = render(info, per_class=2)
    assert 'id="objects"' not in page and "Objects per class and split" in page
    assert page.count('<svg class="objects"') == 2 * len(CLASSES)  # read from the records


def test_facts_keep_each_records_boxes_through_drops_and_receipts():
    facts = ShardFacts()
    image = StoredImage("png", 48, 64, 3, 100, bytes(16))
    for position, boxes in enumerate([[0, 0, 0.5, 0.25], [], [0, 0, 1, 1, 0.5, 0.5, 0.75,
                                                                0.625]]):
        facts.add(Row(position, "x", "x", [0] * (len(boxes) // 4), "TRAIN", {BBOX: boxes}),
                  Record(b"", image))
    assert list(facts.boxes) == [1, 0, 2]
    classification = ShardFacts()
    classification.add(Row(3, "x", "x", 0, "TRAIN"), Record(b"", image))
    assert not classification.boxes and not classification.box_heights  # nothing noted
    kept = facts.without({0})
    assert list(kept.boxes) == [0, 2] and list(kept.positions) == [1, 2]
    assert list(kept.box_heights) == [1, 0.25] and list(kept.box_widths) == [1, 0.125]
    again = ShardFacts.from_json(json.loads(json.dumps(kept.to_json())))
    assert again == kept
    old_receipt = {k: v for k, v in kept.to_json().items() if not k.startswith("box")}
    assert not ShardFacts.from_json(old_receipt).boxes


def test_receipts_from_before_narrow_columns_read_as_they_were():
    """Receipts once stored every integer column as int64, and did not say so."""
    facts = ShardFacts()
    facts.add(Row(7, "x", "x", 0, "TRAIN"),
              Record(b"", StoredImage("jpeg", 48, 64, 3, 1000, bytes(16))))
    old = facts.to_json()
    del old["typecodes"]
    for name in ("heights", "widths", "channels", "sizes"):
        old[name] = base64.b64encode(array("q", getattr(facts, name)).tobytes()).decode()
    assert ShardFacts.from_json(json.loads(json.dumps(old))) == facts


def test_duplicate_candidates_share_their_whole_hash_not_its_first_half():
    first, second = ShardFacts(), ShardFacts()
    digests = [b"A" * 8 + b"1" * 8, b"A" * 8 + b"2" * 8, b"B" * 16, b"A" * 8 + b"1" * 8]
    for position, digest in enumerate(digests):
        facts = first if position < 2 else second
        facts.add(Row(position, "x", "x", 0, "TRAIN"),
                  Record(b"", StoredImage("png", 4, 4, 3, 10, digest)))
    for facts in (first, second):  # records without an image: never duplicates
        facts.add(Row(9, "x", "x", 0, "TRAIN"), Record(b"", None))
    groups = candidate_duplicates([("train", "a", first), ("train", "b", second)])
    assert [[(c.shard, c.record, c.position) for c in group] for group in groups] == [
        [(0, 0, 0), (1, 1, 3)]]


def test_dropped_duplicates_take_their_boxes_with_them(drawn, tmp_path):
    copy = dict(drawn[3], boxes=[[0, 0, 0.01, 0.01]], labels=["zebra"])  # row 12: dropped
    with_copy = written(tmp_path / "drop", [*drawn, copy], duplicates="drop")
    without = written(tmp_path / "without", drawn)
    info = tfrecorder.info(with_copy)
    assert [c.kept for c in info.duplicates[0].copies] == [True, False]
    assert info.statistics["train"] == tfrecorder.info(without).statistics["train"]


def test_local_and_beam_engines_write_the_same_statistics(drawn, tmp_path):
    """The same manifests: statistics, and shards (by their SHA-256) masks and all."""
    options = dict(masks=True, layout="tf_models")
    local = written(tmp_path / "local", drawn[:6], **options)
    beam = written(tmp_path / "beam", drawn[:6], runner="DirectRunner", **options)
    manifests = [json.loads(Path(out, "dataset.json").read_text()) for out in (local, beam)]
    assert manifests[0]["statistics"]["train"]["objects"]["num_boxes"] > 0
    assert manifests[0] == manifests[1]


# --- show ----------------------------------------------------------------------------------

def placed(sheet) -> list[tuple[object, int, int]]:
    """Each item of a sheet with where its thumbnail's top left pixel is."""
    columns, found = Counter(), []
    rows = {name: row for row, name in enumerate(sheet.classes)}
    # Images without boxes: the row after the classes (a sheet without labels: its one row)
    rows[None] = len(sheet.classes) if getattr(sheet, "no_boxes", 0) else 0
    for item in sheet.items:
        row = rows[item.class_name]
        left, top, _, _ = sheet.layout.thumbnail_box(row, columns[row])
        columns[row] += 1
        size = sheet.layout.thumbnail_size
        found.append((item, left + (size - WIDTH) // 2, top + (size - HEIGHT) // 2))
    return found


def outline(box: list[float]) -> list[tuple[int, int]]:
    """The pixels (x, y) of a box's one-pixel outline in a WIDTH x HEIGHT image."""
    top, left = round(box[0] * HEIGHT), round(box[1] * WIDTH)
    bottom, right = round(box[2] * HEIGHT) - 1, round(box[3] * WIDTH) - 1
    return sorted({*((x, y) for x in range(left, right + 1) for y in (top, bottom)),
                   *((x, y) for y in range(top, bottom + 1) for x in (left, right))})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_show_draws_each_box_in_its_class_colour(drawn, detection, layout):
    sheet = show(detection[layout], per_class=12, thumbnail_size=128)
    pixels = np.asarray(sheet)
    scenes_named = by_name(drawn)
    assert sheet.classes == CLASSES
    shown = coloured = 0
    for item, x0, y0 in placed(sheet):
        scene = scenes_named[item.image_name]
        assert [o.class_name for o in item.objects] == scene["labels"]
        np.testing.assert_allclose([[o.ymin, o.xmin, o.ymax, o.xmax] for o in item.objects],
                                   scene["boxes"], atol=1e-6)
        for box, label in zip(scene["boxes"], scene["labels"]):
            colour = rgb(CLASS_COLOURS[CLASSES.index(label)])
            edge = outline(box)
            hits = sum(np.array_equal(pixels[y0 + y, x0 + x], colour) for x, y in edge)
            # Other boxes and the class names' tags may cover part of an outline.
            assert hits >= len(edge) // 2, (item.image_name, box, hits, len(edge))
            shown, coloured = shown + len(edge), coloured + hits
    assert coloured > 0.85 * shown


def blended(scene: dict) -> np.ndarray:
    """The scene's pixels with its class mask over them, as `show` draws masks."""
    pixels = scene["pixels"].astype(np.float64)
    mask = scene["mask"]
    for class_id in range(1, len(CLASSES) + 1):
        where = mask == class_id
        pixels[where] = ((1 - MASK_OPACITY) * pixels[where]
                         + MASK_OPACITY * rgb(CLASS_COLOURS[class_id - 1]))
    return pixels


@pytest.mark.parametrize("task, layout", [("segmentation", "tfrecorder"),
                                          ("segmentation", "tf_models"),
                                          ("detection", "tf_models")])
def test_masks_are_translucent_colours_over_the_image(drawn, detection, tmp_path, task,
                                                      layout):
    """A segmentation mask's classes, and a detection record's instance masks (drawn
    in the scenes' order, as the class mask is), in the class's colour at MASK_OPACITY,
    each region outlined by a darker line of its colour."""
    out = (detection[layout] if task == "detection" else
           written(tmp_path / "segmentation", drawn, "segmentation", layout=layout))
    found = thumbnails(out, per_class=len(drawn), size=128)
    scenes_named = by_name(drawn)
    assert {t.image_name for t in found} == set(scenes_named) - (
        {n for n, s in scenes_named.items() if not s["boxes"]} if task == "detection" else
        set())
    for thumbnail in found:
        scene = scenes_named[thumbnail.image_name]
        assert thumbnail.problem == ""
        # Away from the regions' edges, where outlines are (two objects of a class are two
        # regions), and from the class mask's, which the instances' need not follow.
        regions = scene["mask"] if task == "segmentation" else instances(scene)
        inside = same_around(scene["mask"]) & same_around(regions)
        image = np.asarray(thumbnail.image)
        np.testing.assert_allclose(image[inside], blended(scene)[inside], atol=1)
        assert (image != scene["pixels"]).any() == bool(scene["boxes"])
        if task == "segmentation":  # the outlines, exactly: the scene is not shrunk
            edge = (scene["mask"] > 0) & ~same_around(scene["mask"], diagonals=False)
            assert edge.any() == bool(scene["boxes"])
            expected = [edge_colour(CLASS_COLOURS[i - 1]) for i in scene["mask"][edge]]
            np.testing.assert_array_equal(image[edge], np.asarray(expected).reshape(-1, 3))


def same_around(regions: np.ndarray, diagonals: bool = True) -> np.ndarray:
    """The pixels whose neighbours (8, or 4 without `diagonals`) are of their region;
    beyond the image's border counts as the border's region."""
    padded = np.pad(regions, 1, mode="edge")
    steps = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)
             if diagonals or not (dy and dx)]
    return np.all([padded[1 + dy:padded.shape[0] - 1 + dy, 1 + dx:padded.shape[1] - 1 + dx]
                   == regions for dy, dx in steps], axis=0)


def instances(scene: dict) -> np.ndarray:
    """Which object each pixel shows (the last drawn over the others; -1: none)."""
    found = np.full(scene["mask"].shape, -1)
    for index, [[left, top, right, _, _, bottom, _, _]] in enumerate(scene["polygons"]):
        found[top:bottom, left:right] = index
    return found


# --- the report ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def page(detection) -> Path:
    out = detection["tf_models"]
    return Path(tfrecorder.report(out, Path(out).parent / "report.html", per_class=12))


@pytest.fixture(scope="module")
def document(page):
    if CHROMIUM is None:
        pytest.skip(NO_BROWSER)
    return dom(page)


@needs_browser
def test_the_report_draws_each_box_over_its_thumbnail(drawn, document):
    scenes_named = by_name(drawn)
    figures = by_id(document, "thumbnails").findall(".//figure")
    assert figures and all(f.get("class") == "boxed" for f in figures)
    for figure in figures:
        image, svg = figure.find("img"), figure.find("svg")
        scene = scenes_named[image.get("alt")]
        width, height = float(svg.get("width")), float(svg.get("height"))
        assert (width, height) == (float(image.get("width")), float(image.get("height")))
        rects = svg.findall("rect")
        found = [[float(r.get("y")) / height, float(r.get("x")) / width,
                  (float(r.get("y")) + float(r.get("height"))) / height,
                  (float(r.get("x")) + float(r.get("width"))) / width] for r in rects]
        np.testing.assert_allclose(found, scene["boxes"], atol=0.005)
        assert [r.get("data-class") for r in rects] == scene["labels"]
        assert [r.get("stroke") for r in rects] == [
            CLASS_COLOURS[CLASSES.index(label)] for label in scene["labels"]]
        tags = [element_text(t) for t in svg.iter("text")]
        assert tags == scene["labels"]


@needs_browser
def test_the_report_lays_each_boxes_svg_exactly_over_its_thumbnail(page):
    images = measured(page, "#thumbnails figure img")
    boxes = measured(page, "#thumbnails figure svg.objects")
    assert len(images) == len(boxes) > 0
    for image, svg in zip(images, boxes):
        assert image == pytest.approx(svg, abs=0.5)


@needs_browser
def test_the_reports_class_table_counts_objects(drawn, detection, document):
    labels = Counter(label for scene in drawn for label in scene["labels"])
    assert element_text(by_id(document, "class-counts").find("h2")) == \
        "Objects per class and split"
    rows = {row[0]: row[1:] for row in table_rows(by_id(document, "class-table"))}
    assert {name: int(rows[name][0]) for name in CLASSES} == dict(labels)
    assert rows["all objects"] == [str(sum(labels.values()))] * 2
    assert rows["all images"] == [str(len(drawn))] * 2
    checks = table_rows(by_id(document, "box-checks-table"))
    assert checks[1] == ["train", str(sum(not s["boxes"] for s in drawn)), "0", "0", "0"]


@needs_browser
def test_the_report_paints_the_boxes(page, tmp_path):
    """Zebra's red appears on the page only in the boxes' outlines and tags (the
    thumbnails' masks blend it with the image)."""
    red = tuple(rgb(CLASS_COLOURS[CLASSES.index("zebra")]).astype(int))
    without_boxes = tmp_path / "without-boxes.html"
    without_boxes.write_text(re.sub(r'<svg class="objects".*?</svg>', "", page.read_text()))

    def reds(path: Path) -> int:
        return dict((colour, n) for n, colour in
                    screenshot(path, height=6000).getcolors(1 << 24)).get(red, 0)

    assert reds(without_boxes) == 0
    assert reds(page) > 100


def test_a_segmentation_report_has_mask_thumbnails_and_no_boxes(drawn, tmp_path):
    out = written(tmp_path / "segmentation", drawn, "segmentation", layout="tf_models")
    html = render(tfrecorder.info(out), per_class=4)
    assert "<dt>task</dt><dd>segmentation</dd>" in html
    assert 'class="objects"' not in html and 'id="objects"' not in html
    assert html.count("<figure") == 4


# --- what the sheets tell of themselves: rows without images, and the masks' legend -------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_images_without_boxes_have_a_row_of_their_own(drawn, detection, layout):
    sheet = show(detection[layout], per_class=12, thumbnail_size=64)
    empty = [Path(s["image_uri"]).name for s in drawn if not s["boxes"]]
    assert sheet.classes == CLASSES and sheet.no_boxes == len(empty) == 3
    assert sheet.grid[0] == len(CLASSES) + 1  # the classes, then "no boxes"
    without = [i for i in sheet.items if i.class_name is None]
    assert sorted(i.image_name for i in without) == empty
    assert all(i.labels == () and i.objects == () for i in without)
    pixels = np.asarray(saved(sheet))
    for item, x0, y0 in placed(sheet):  # each image where its row has it
        scene = by_name(drawn)[item.image_name]
        if item.class_name is None:
            assert y0 > len(CLASSES) * sheet.layout.cell_height
            np.testing.assert_array_equal(pixels[y0:y0 + HEIGHT, x0:x0 + WIDTH],
                                          scene["pixels"])
    # Its header names the row and counts its images.
    assert_headers(sheet, [(name, f"{sum(name in s['labels'] for s in drawn)} images")
                           for name in CLASSES] + [("no boxes", "3 images")])


def test_a_class_absent_from_the_split_says_so(drawn, tmp_path):
    """Validation holds the scenes without a zebra: zebra's row says there is none, and
    every other row counts its images."""
    frame = detection_frame(drawn)
    frame["split"] = ["VALIDATION" if "zebra" not in s["labels"] else "TRAIN" for s in drawn]
    out = str(tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfrecorder.DatasetWarning)
        tfrecorder.convert(frame, out, progress=False, task="detection")
    validation = [s for s in drawn if "zebra" not in s["labels"]]
    sheet = show(out, "validation", per_class=2, thumbnail_size=64)
    assert sheet.classes == CLASSES
    expected = [
        *(f"{sum(name in s['labels'] for s in validation)} images" for name in CLASSES[:2]),
        "none in validation", f"{sum(not s['boxes'] for s in validation)} images"]
    assert_headers(sheet, list(zip([*CLASSES, "no boxes"], expected)))


def segmentation_of(folder: Path, photos: dict[str, tuple[np.ndarray, np.ndarray]]) -> str:
    """A segmentation dataset of images and their class masks, by file name."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (pixels, mask) in photos.items():
        Image.fromarray(pixels).save(folder / f"{name}.png")
        Image.fromarray(mask).save(folder / f"{name}_mask.png")
        rows.append((str(folder / f"{name}.png"), str(folder / f"{name}_mask.png")))
    frame = pd.DataFrame(rows, columns=["image_uri", "mask_uri"]).assign(split="TRAIN")
    out = str(folder / "out")
    tfrecorder.convert(frame, out, progress=False, task="segmentation")
    return out


def test_a_segmentation_sheet_has_a_legend_of_its_mask_colours(drawn, tmp_path):
    out = written(tmp_path / "segmentation", drawn, "segmentation")
    sheet = show(out, per_class=12, thumbnail_size=64)
    ids = sorted({int(i) for s in drawn for i in np.unique(s["mask"]) if i})
    assert [entry.class_id for entry in sheet.legend] == ids
    pixels = np.asarray(saved(sheet)).astype(int)
    rows_end = sheet.grid[0] * sheet.layout.cell_height
    for entry in sheet.legend:
        left, top, right, bottom = entry.swatch
        assert top >= rows_end and bottom <= sheet.height  # under the rows
        colour = rgb(CLASS_COLOURS[(entry.class_id - 1) % len(CLASS_COLOURS)])
        inside = pixels[top + 2:bottom - 2, left + 2:right - 2].reshape(-1, 3)
        assert (inside == colour).all(), entry  # the colour its class is drawn in
        # Beside the swatch, its label: the class id.
        assert entry.text == str(entry.class_id)
        label = saved(sheet).crop((right, top - 2, right + 8 + round(
            text_width(entry.text, sheet)), bottom + 2))
        (left_ink, right_ink), = ink_bands(label)
        assert left_ink < 6
        assert right_ink - left_ink == pytest.approx(text_width(entry.text, sheet), abs=2)


def test_every_mask_class_is_visible_on_a_photo_of_its_own_colour(tmp_path):
    """For each colour, a region of its class on a photo of that colour, where the blend
    alone would leave the photo as it was: the region's outline stands out from the photo
    around it. And on a photo of the outline's colour, the blend does."""
    mask = np.zeros((48, 64), np.uint8)
    mask[10:30, 20:50] = 1
    edge = mask.astype(bool)
    edge[11:29, 21:49] = False
    around = ~np.pad(np.ones((24, 34), bool), ((8, 16), (18, 12)))  # 2 pixels away, or more
    photos = {}
    for class_id, colour in enumerate(CLASS_COLOURS, start=1):
        for photo, background in (("fill", rgb(colour)), ("edge", edge_colour(colour))):
            pixels = np.broadcast_to(np.asarray(background, np.uint8), (48, 64, 3))
            photos[f"{photo}_{class_id}"] = pixels.copy(), mask * class_id
    sheet = show(segmentation_of(tmp_path, photos), per_class=len(photos),
                 thumbnail_size=64)
    assert len(sheet.items) == len(photos)
    for item, x0, y0 in placed(sheet):
        pixels, _ = photos[item.image_name.removesuffix(".png")]
        drawn = np.asarray(saved(sheet)).astype(int)[y0:y0 + 48, x0:x0 + 64]
        difference = np.abs(drawn - pixels.astype(int)).sum(axis=-1)
        assert (difference[around] == 0).all()  # the photo, untouched
        if item.image_name.startswith("fill"):
            assert (difference[edge] > 100).all(), item.image_name  # the outline
        else:
            assert (difference[mask.astype(bool) & ~edge] > 60).all(), item.image_name


@needs_browser
def test_a_segmentation_reports_thumbnails_have_a_legend_of_their_mask_colours(drawn,
                                                                                tmp_path):
    out = written(tmp_path / "segmentation", drawn, "segmentation")
    page = Path(tfrecorder.report(out, tmp_path / "report.html", per_class=12))
    ids = sorted({int(i) for s in drawn for i in np.unique(s["mask"]) if i})
    legend = by_id(dom(page), "mask-legend")
    swatches = legend.findall(".//*[@data-class-id]")
    assert [int(s.get("data-class-id")) for s in swatches] == ids
    assert [element_text(s) for s in swatches] == [str(i) for i in ids]
    # Each swatch is painted in its class's colour (the thumbnails blend it with the
    # image; the charts may use it too): 12 x 12 more pixels of it than without the legend.
    without_legend = tmp_path / "without-legend.html"
    without_legend.write_text(re.sub(r'<p class="note" id="mask-legend">.*?</p>', "",
                                     page.read_text()))
    painted = [dict((colour, n) for n, colour in
                    screenshot(path, height=3000).getcolors(1 << 24))
               for path in (page, without_legend)]
    for class_id in ids:
        colour = tuple(rgb(CLASS_COLOURS[class_id - 1]).astype(int))
        assert painted[0].get(colour, 0) - painted[1].get(colour, 0) == 144, class_id

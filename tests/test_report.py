"""report(): one self-contained HTML file, checked as a browser shows it.

Headless Chromium (Debian's `chromium`; .ci/run installs it) renders each report:
`--dump-dom` gives the DOM after parsing, which the tests read with the standard library,
and `--screenshot` the painted page. The numbers on the page are checked against the
records, read back with TensorFlow.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest
from helpers import make_image, read_manifest, read_split, run_without_tensorflow, write_image
from PIL import Image

import tfrecorder
from tfrecorder.errors import DatasetWarning
from tfrecorder.read.charts import SPLIT_COLOURS
from tfrecorder.read.info import info
from tfrecorder.read.report import render, report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_BROWSER = "chromium is not installed (apt-get install chromium; .ci/run installs it)"
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)

HOSTILE_CLASS = "<script>alert(1)</script>"
HOSTILE_FILE = "<img src=x onerror=alert(2)>.jpg"  # a kept image: a thumbnail's caption
HOSTILE_REJECTED = "<svg onload=alert(3)>.jpg"  # an unreadable one: a rejected row
CLASSES = ["cat", "dog", HOSTILE_CLASS]
SPLITS = ["TRAIN", "TRAIN", "TRAIN", "VALIDATION", "TEST"]
THUMBNAIL_SIZE = 64

# The planted datasets warn of what they plant; the report shows those warnings.
pytestmark = pytest.mark.filterwarnings("ignore::tfrecorder.errors.DatasetWarning")


# --- the browser ---------------------------------------------------------------------------

def chromium(page: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Chromium on `page`, with its own profile (tests may run at once) and a short TMPDIR:
    its Unix sockets go there, and a test's folder under pytest-xdist is too deep for one
    (Chromium aborts)."""
    profile = page.parent / f".chromium-{page.stem}"
    with tempfile.TemporaryDirectory(prefix="chromium-", dir="/tmp") as temporary:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True, timeout=timeout, check=True,
            env={**os.environ, "TMPDIR": temporary})


def dom(page: Path, timeout: float = 120) -> ElementTree.Element:
    """The document as Chromium built it."""
    return parse_html(chromium(page, "--dump-dom", timeout=timeout).stdout.decode())


def screenshot(page: Path, height: int = 4000) -> Image.Image:
    shot = page.with_suffix(".png")
    chromium(page, f"--screenshot={shot}", f"--window-size=1280,{height}",
             "--hide-scrollbars")
    return Image.open(shot).convert("RGB")


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
         "source", "track", "wbr"}


class _Builder(HTMLParser):
    """Serialized HTML (as Chromium dumps it: every element closed) to an ElementTree."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tree = ElementTree.TreeBuilder()
        self.tree.start("document", {})

    def handle_starttag(self, tag, attrs):
        self.tree.start(tag, {name: value or "" for name, value in attrs})
        if tag in _VOID:
            self.tree.end(tag)

    def handle_startendtag(self, tag, attrs):
        self.tree.start(tag, {name: value or "" for name, value in attrs})
        self.tree.end(tag)

    def handle_endtag(self, tag):
        if tag not in _VOID:
            self.tree.end(tag)

    def handle_data(self, data):
        self.tree.data(data)


def parse_html(text: str) -> ElementTree.Element:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    builder.tree.end("document")
    return builder.tree.close()


def text(element: ElementTree.Element) -> str:
    return "".join(element.itertext()).strip()


def by_id(document: ElementTree.Element, key: str) -> ElementTree.Element:
    found = document.find(f".//*[@id='{key}']")
    assert found is not None, f"no element with id {key!r}"
    return found


def table_rows(table: ElementTree.Element) -> list[list[str]]:
    return [[text(cell) for cell in row if cell.tag in ("th", "td")]
            for row in table.iter("tr")]


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def decode_data_uri(uri: str) -> Image.Image:
    kind, data = re.fullmatch(r"data:image/(jpeg|png);base64,(.+)", uri).groups()
    image = Image.open(io.BytesIO(base64.b64decode(data, validate=True)))
    assert image.format.lower() == kind
    image.load()
    return image


# --- datasets ------------------------------------------------------------------------------

@dataclasses.dataclass
class Dataset:
    out: str
    images: dict[int, str]  # row -> image file
    rejected: dict[int, str]  # row -> unreadable file


def planted_dataset(folder: Path, duplicates: str = "warn") -> Dataset:
    """30 images in three splits and classes (one class named like a script, one file
    named like an image tag), two unreadable files (one named like a tag), and planted
    duplicates: row 32 repeats row 1's image in train under the same label, row 33 row 2's
    (train) in test under another label: a leak and a label conflict."""
    rows, images = [], {}
    for i in range(30):
        name = HOSTILE_FILE if i == 0 else f"img_{i:02d}.jpg"
        images[i] = write_image(folder / "images" / name, size=(40 + i, 30 + i), seed=i)
        rows.append((SPLITS[i % 5], images[i], CLASSES[i % 3]))
    rejected = {}
    for row, name in [(30, "broken.jpg"), (31, HOSTILE_REJECTED)]:
        rejected[row] = str(folder / "images" / name)
        Path(rejected[row]).write_bytes(b"not a JPEG at all")
        rows.append(("TRAIN", rejected[row], "cat"))
    rows.append(("TRAIN", images[1], CLASSES[1]))
    rows.append(("TEST", images[2], "cat"))
    out = str(folder / "dataset")
    with pytest.warns(DatasetWarning, match="more than once"):
        tfrecorder.convert(pd.DataFrame(rows, columns=["split", "image_uri", "label"]), out,
                           progress=False, duplicates=duplicates)
    return Dataset(out, images, rejected)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Dataset:
    return planted_dataset(tmp_path_factory.mktemp("planted"))


@pytest.fixture(scope="module")
def page(planted) -> Path:
    """The planted dataset's report, with every train record's thumbnail."""
    return Path(report(planted.out, Path(planted.out).parent / "report.html", per_class=30,
                       thumbnail_size=THUMBNAIL_SIZE))


@pytest.fixture(scope="module")
def document(page) -> ElementTree.Element:
    if CHROMIUM is None:
        pytest.skip(NO_BROWSER)
    return dom(page)


def records_by_class(out: str) -> dict[str, Counter]:
    """Split -> class name -> records, from the records themselves."""
    vocabulary = read_manifest(out)["labels"]["vocabulary"]
    return {split: Counter(vocabulary[record["label"]] for record in read_split(out, split))
            for split in read_manifest(out)["splits"]}


# --- what the page shows -------------------------------------------------------------------

@needs_browser
def test_the_counts_per_class_and_split_are_those_of_the_records(planted, document):
    expected = records_by_class(planted.out)
    splits = list(expected)
    assert splits == ["train", "validation", "test"]

    rows = table_rows(by_id(document, "class-table"))
    assert rows[0] == ["class", *splits, "all splits"]
    assert [row[0] for row in rows[1:-1]] == sorted(CLASSES)
    for name, *cells in rows[1:-1]:
        assert [number(c) for c in cells] == [expected[s][name] for s in splits] + [
            sum(expected[s][name] for s in splits)], name
    assert rows[-1] == ["all records", *(str(sum(expected[s].values())) for s in splits),
                        str(sum(sum(c.values()) for c in expected.values()))]

    chart = by_id(document, "class-counts").find(".//svg")
    assert [text(t) for t in chart.find("g[@class='legend']").iter("text")] == splits
    legend_colours = [r.get("fill") for r in chart.find("g[@class='legend']").iter("rect")]
    assert legend_colours == [SPLIT_COLOURS[s] for s in splits]
    groups = chart.findall("g[@class='bars']")
    assert [text(g.find("title")) for g in groups] == sorted(CLASSES)
    for group in groups:
        name = text(group.find("title"))
        values = [number(text(t)) for t in group.findall("text[@class='value']")]
        assert values == [expected[s][name] for s in splits], name
        assert [r.get("fill") for r in group.iter("rect")] == legend_colours


@needs_browser
def test_the_header_shows_the_dataset_and_its_warnings_first(planted, document):
    header = by_id(document, "summary")
    facts = dict(zip([text(t) for t in header.iter("dt")], [text(d) for d in header.iter("dd")]))
    assert facts["dataset"] == planted.out
    assert facts["records"] == "32" and facts["classes"] == "3" and facts["rejected rows"] == "2"
    assert facts["written by"].startswith("tfrecorder ")
    warnings = [text(item) for item in by_id(document, "warnings").iter("li")]
    assert warnings == list(info(planted.out).warnings) and len(warnings) >= 3
    sections = [s.get("id") for s in document.iter("section")]
    assert sections == ["class-counts", "image-statistics", "thumbnails", "rejected",
                        "duplicates", "options"]
    links = [a.get("href") for a in document.find(".//nav").iter("a")]
    assert links == [f"#{key}" for key in sections]


@needs_browser
def test_image_sizes_formats_and_channels_are_those_of_the_manifest(planted, document):
    statistics = read_manifest(planted.out)["statistics"]
    section = by_id(document, "image-statistics")
    for name in ("image_height", "image_width", "image_bytes"):
        rows = table_rows(by_id(section, f"{name}-table"))
        assert rows[0] == ["split", "min", "q1", "median", "q3", "max", "mean"]
        for split, *cells in rows[1:]:
            found = statistics[split][name]
            assert [float(c.replace(",", "")) for c in cells] == pytest.approx(
                [found[q] for q in ("min", "q1", "median", "q3", "max", "mean")], abs=0.05)
    assert len(section.findall(".//svg[@class='chart box-plot']")) == 3
    assert table_rows(by_id(section, "formats-table")) == [
        ["split", "jpeg", "3 channels"],
        *([split, str(s["image_formats"]["jpeg"]), str(s["image_channels"]["3"])]
          for split, s in statistics.items())]


@needs_browser
def test_the_thumbnails_are_the_train_records_by_class(planted, document):
    vocabulary = read_manifest(planted.out)["labels"]["vocabulary"]
    expected = {}
    for record in read_split(planted.out, "train"):
        expected.setdefault(vocabulary[record["label"]], Counter())[
            record["image_name"].decode()] += 1
    found = {}
    for group in by_id(document, "thumbnails").findall(".//div[@class='class-thumbnails']"):
        captions = Counter()
        for figure in group.iter("figure"):
            image = decode_data_uri(figure.find("img").get("src"))
            assert max(image.size) <= THUMBNAIL_SIZE
            assert image.size == (int(figure.find("img").get("width")),
                                  int(figure.find("img").get("height")))
            captions[text(figure.find("figcaption"))] += 1
        found[text(group.find("h3"))] = captions
    assert found == expected
    assert HOSTILE_FILE in found["cat"]


@needs_browser
def test_the_page_paints_the_thumbnails_and_the_split_colours(page, tmp_path):
    painted = screenshot(page)
    without_images = tmp_path / "without-images.html"
    without_images.write_text(re.sub(r'src="data:image/[^"]+"', 'src=""', page.read_text()))
    blank = screenshot(without_images)

    def colours(image):
        return len(image.getcolors(1 << 24))

    assert colours(painted) > colours(blank) + 2000, "the thumbnails are not painted"
    pixels = dict((colour, count) for count, colour in painted.getcolors(1 << 24))
    for split, colour in SPLIT_COLOURS.items():
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        assert pixels.get(rgb, 0) > 500, f"{split}'s colour is not painted"


@needs_browser
def test_the_duplicates_list_the_planted_rows_with_the_image_and_mark_the_leak(
        planted, document):
    section = by_id(document, "duplicates")
    groups = {}
    for group in section.findall(".//div[@class='duplicate']"):
        rows = table_rows(group.find(".//table"))
        assert rows[0] == ["row", "image_uri", "split", "label", "stored"]
        marks = sorted(text(mark) for mark in group.iter("span"))
        groups[tuple(number(row[0]) for row in rows[1:])] = (rows[1:], marks, group)
    assert set(groups) == {(1, 32), (2, 33)}

    images = planted.images
    rows, marks, _ = groups[(1, 32)]
    assert rows == [["1", images[1], "train", "dog", "kept"],
                    ["32", images[1], "train", "dog", "kept"]]
    assert marks == []
    rows, marks, _ = groups[(2, 33)]
    assert rows == [["2", images[2], "train", HOSTILE_CLASS, "kept"],
                    ["33", images[2], "test", "cat", "kept"]]
    assert marks == ["conflicting labels", "leak: in train and test"]
    for (first, _), (_, _, group) in groups.items():
        assert closest_source(group.find("img").get("src"), images) == first


def closest_source(data_uri: str, images: dict[int, str]) -> int:
    """The row whose source image the thumbnail shows: the nearest in pixels."""
    thumbnail = decode_data_uri(data_uri).convert("RGB")
    assert max(thumbnail.size) <= THUMBNAIL_SIZE

    def distance(path):
        source = np.asarray(Image.open(path).convert("RGB").resize(thumbnail.size), float)
        return np.abs(source - np.asarray(thumbnail, float)).mean()

    return min(images, key=lambda row: distance(images[row]))


@needs_browser
def test_dropped_copies_are_marked_and_the_kept_record_is_shown(tmp_path):
    dataset = planted_dataset(tmp_path, duplicates="drop")
    document = dom(Path(report(dataset.out, tmp_path / "report.html",
                               thumbnail_size=THUMBNAIL_SIZE)))
    groups = by_id(document, "duplicates").findall(".//div[@class='duplicate']")
    found = {}
    for group in groups:
        rows = table_rows(group.find(".//table"))[1:]
        found[number(rows[0][0])] = [(row[0], row[4]) for row in rows]
        assert closest_source(group.find("img").get("src"), dataset.images) == number(
            rows[0][0])
    assert found == {1: [("1", "kept"), ("32", "dropped")],
                     2: [("2", "kept"), ("33", "dropped")]}


@needs_browser
def test_the_rejected_rows_appear_with_their_reasons(planted, document):
    manifest = read_manifest(planted.out)["rejected"]
    section = by_id(document, "rejected")
    reasons = table_rows(by_id(section, "reasons-table"))
    assert reasons == [["reason", "rows"], *([r, str(n)] for r, n in
                                             manifest["reasons"].items())]
    assert sum(manifest["reasons"].values()) == 2
    rows = table_rows(by_id(section, "rejected-table"))
    assert rows[0] == ["row", "image_uri", "split", "label", "reason"]
    source = pd.read_csv(Path(planted.out, "rejected.csv"), dtype=str)
    assert rows[1:] == [[str(row), planted.rejected[row], "TRAIN", "cat", reason]
                        for row, reason in zip(source["row"].astype(int), source["reason"])]
    assert {row[0] for row in rows[1:]} == {"30", "31"}
    assert all(row[-1] for row in rows[1:])
    assert "more" not in text(section)


@needs_browser
def test_the_options_table_holds_the_options_written_with(planted, document):
    rows = table_rows(by_id(document, "options-table"))
    options = read_manifest(planted.out)["options"]
    assert rows[0] == ["option", "value"]
    shown = dict(rows[1:])
    assert list(shown) == list(options)
    # As the options are spelled in Python (convert(image_size=None, ...)), not in JSON.
    assert (shown["duplicates"], shown["image_size"], shown["validate"]) == (
        "'warn'", "None", "True")
    assert shown["unassigned_split"] == "[0.8, 0.1, 0.1]"


def measured(page: Path, selector: str) -> list[dict[str, float]]:
    """Where Chromium lays out each element `selector` finds: a copy of the page with a
    script that writes each one's box into the DOM, which Chromium dumps."""
    script = (f"<script>document.querySelectorAll({selector!r}).forEach(e => {{"
              "const r = e.getBoundingClientRect(); e.setAttribute('data-box', "
              "[r.left, r.top, r.width, r.height].join(','))});</script>")
    copy = page.with_name(f"measured-{page.name}")
    copy.write_text(page.read_text().replace("</body>", script + "</body>"))
    boxes = [element.get("data-box") for element in dom(copy).iter()
             if element.get("data-box")]
    return [dict(zip(("left", "top", "width", "height"), map(float, box.split(","))))
            for box in boxes]


@needs_browser
def test_the_captions_of_a_row_of_thumbnails_line_up(page):
    """The planted images differ in height; their captions start at one height a row."""
    figures = measured(page, "#thumbnails figure")
    captions = measured(page, "#thumbnails figcaption")
    images = measured(page, "#thumbnails figure img")
    assert len(figures) == len(captions) == len(images) > 10
    assert len({image["height"] for image in images}) > 3  # images of many heights
    rows = {}
    for figure, caption in zip(figures, captions):
        rows.setdefault(round(figure["top"]), []).append(caption["top"])
    assert len(rows) >= 3  # one or more rows of figures for each class
    for tops in rows.values():
        assert max(tops) - min(tops) < 1, tops


@needs_browser
def test_no_warnings_is_said_plainly_not_in_the_warnings_box(planted, page, tmp_path):
    rows = [(split, write_image(tmp_path / f"{split}-{label}.jpg", seed=i), label)
            for i, (split, label) in enumerate(
                (split, label) for split in ("TRAIN", "VALIDATION", "TEST")
                for label in ("cat", "dog"))]
    tfrecorder.convert(pd.DataFrame(rows, columns=["split", "image_uri", "label"]),
                       tmp_path / "clean", progress=False)
    assert info(tmp_path / "clean").warnings == ()
    clean = Path(report(tmp_path / "clean", tmp_path / "clean.html"))
    assert text(by_id(dom(clean), "warnings")) == "No warnings."
    box = (0xe6, 0x7e, 0x22)  # the warnings box's orange border

    def orange(image):
        return sum(n for n, colour in image.getcolors(1 << 24) if colour == box)

    assert orange(screenshot(clean, 1200)) == 0
    assert orange(screenshot(page, 1200)) > 100  # the planted dataset's warnings


# --- what the file is ----------------------------------------------------------------------

def test_the_file_needs_no_network_and_runs_no_script(page):
    html = re.sub(r"data:image/(jpeg|png);base64,[A-Za-z0-9+/=]+", "data:", page.read_text())
    assert not re.search(r"https?:|//[a-z]|\bsrcset=", html, re.IGNORECASE)
    for element in ("<script", "<link", "<iframe", "<object", "@import", "url("):
        assert element not in html.lower()
    sources = re.findall(r'\b(?:src|href)="([^"]*)"', html)
    assert sources and all(s == "data:" or s.startswith("#") for s in sources)


@needs_browser
def test_values_from_the_data_render_as_text(planted, tmp_path):
    dataset = info(planted.out)
    options = {**dataset.options, HOSTILE_CLASS: "</td><b onclick=alert(4)>bold</b>"}
    hostile = dataclasses.replace(dataset, manifest=dataclasses.replace(
        dataset.manifest, options=options))
    page = tmp_path / "hostile.html"
    page.write_text(render(hostile, thumbnail_size=THUMBNAIL_SIZE))
    try:
        document = dom(page, timeout=30)  # it takes a second
    except subprocess.TimeoutExpired:
        pytest.fail("Chromium hung: a script from the data opened a dialog")

    elements = [element.tag for element in document.iter()]
    assert "script" not in elements and "b" not in elements
    handlers = [(e.tag, name) for e in document.iter() for name in e.attrib
                if name.startswith("on")]
    assert handlers == []
    everything = text(document)
    for value in (HOSTILE_CLASS, HOSTILE_FILE, HOSTILE_REJECTED,
                  "</td><b onclick=alert(4)>bold</b>"):
        assert value in everything, value
    assert [HOSTILE_CLASS, "'</td><b onclick=alert(4)>bold</b>'"] in table_rows(
        by_id(document, "options-table"))


@needs_browser
def test_a_dataset_without_images_still_has_a_report(tmp_path):
    table = pd.DataFrame({"length": [1.5, 2.0, 3.5, 4.0, 5.5],
                          "label": ["short", "long", "short", "long", "long"],
                          "split": ["TRAIN", "TRAIN", "TRAIN", "TEST", "TEST"]})
    tfrecorder.convert(table, tmp_path / "dataset", progress=False)
    document = dom(Path(report(tmp_path / "dataset", tmp_path / "report.html")))
    assert table_rows(by_id(document, "class-table"))[1:] == [
        ["long", "1", "2", "3"], ["short", "2", "0", "2"], ["all records", "3", "2", "5"]]
    assert "no images" in text(by_id(document, "image-statistics"))
    assert "no images" in text(by_id(document, "thumbnails"))
    assert "No rows were rejected" in text(by_id(document, "rejected"))
    assert "No image is stored more than once" in text(by_id(document, "duplicates"))
    assert document.find(".//img") is None


@needs_browser
def test_a_dataset_without_labels_still_has_a_report(tmp_path):
    rows = [(["TRAIN", "TEST"][i % 2], write_image(tmp_path / f"{i}.png", fmt="PNG", seed=i))
            for i in range(6)]
    tfrecorder.convert(pd.DataFrame(rows, columns=["split", "image_uri"]),
                       tmp_path / "dataset", progress=False)
    document = dom(Path(report(tmp_path / "dataset", tmp_path / "report.html")))
    assert "no labels" in text(by_id(document, "class-counts"))
    captions = sorted(text(c) for c in by_id(document, "thumbnails").iter("figcaption"))
    assert captions == ["0.png", "2.png", "4.png"]
    for image in document.iter("img"):
        decode_data_uri(image.get("src"))
    assert table_rows(by_id(document, "formats-table"))[1:] == [["train", "3", "3"],
                                                                ["test", "3", "3"]]


def test_a_thousand_classes_chart_the_largest_fifty_and_tabulate_all(tmp_path):
    rows = []
    for i in range(2000):
        label = f"class_{i % 1000:04d}" if i < 1900 else "class_0007"  # one class is large
        path = tmp_path / "images" / f"{i}.png"
        os.makedirs(path.parent, exist_ok=True)
        make_image((8, 8), seed=i).save(path)
        rows.append(("TRAIN", str(path), label))
    tfrecorder.convert(pd.DataFrame(rows, columns=["split", "image_uri", "label"]),
                       tmp_path / "dataset", progress=False)
    page = Path(report(tmp_path / "dataset", tmp_path / "report.html"))
    assert page.stat().st_size < 1_000_000
    document = parse_html(page.read_text())
    groups = by_id(document, "class-counts").findall(".//g[@class='bars']")
    assert len(groups) == 50 and text(groups[0].find("title")) == "class_0007"
    assert "50 largest of 1,000 classes" in text(by_id(document, "class-counts"))
    assert len(table_rows(by_id(document, "class-table"))) == 1 + 1000 + 1
    assert len(by_id(document, "thumbnails").findall(".//div[@class='class-thumbnails']")) == 50


def test_a_long_list_of_rejected_rows_is_cut_and_says_how_many_more(tmp_path):
    rows = []
    for i in range(120):
        path = tmp_path / "images" / f"{i}.jpg"
        if i < 105:
            os.makedirs(path.parent, exist_ok=True)
            path.write_bytes(b"garbage")
        else:
            write_image(path, seed=i)
        rows.append(("TRAIN", str(path), "a"))
    tfrecorder.convert(pd.DataFrame(rows, columns=["split", "image_uri", "label"]),
                       tmp_path / "dataset", progress=False, max_rejected=1.0)
    document = parse_html(Path(report(tmp_path / "dataset", tmp_path / "r.html")).read_text())
    section = by_id(document, "rejected")
    assert len(table_rows(by_id(section, "rejected-table"))) == 1 + 100
    assert "and 5 more rows" in text(section)


def test_the_report_never_imports_tensorflow(planted, tmp_path):
    run_without_tensorflow("import sys; from tfrecorder.read.report import report; "
                           "report(sys.argv[1], sys.argv[2])", planted.out, tmp_path / "r.html")
    assert (tmp_path / "r.html").stat().st_size > 10_000


def test_a_report_reads_from_and_writes_to_a_bucket(planted, page, s3_store):
    prefix = f"{s3_store.root}/report-test"
    for name in os.listdir(planted.out):
        s3_store.upload(Path(planted.out, name), f"{prefix}/dataset/{name}")
    written = report(f"{prefix}/dataset", f"{prefix}/report.html", per_class=30,
                     thumbnail_size=THUMBNAIL_SIZE)
    assert written == f"{prefix}/report.html"
    remote = s3_store.read_bytes(written).decode()
    assert remote == page.read_text().replace(planted.out, f"{prefix}/dataset")

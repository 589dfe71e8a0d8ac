"""EXIF orientation (issue 48): a phone photo stored sideways with an EXIF orientation,
labelled in a tool that shows it turned, is written with its boxes on their objects in
every `orientation` mode; a stated size that fits neither view is rejected; what was
turned is counted; classification images stay byte for byte as before by default."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers import read_manifest, shard_bytes
from PIL import Image, ImageOps

import tfrecorder
from tfrecorder import cli
from tfrecorder.write import orientation

T = Image.Transpose
# How to make the stored pixels of a photo whose shown view is given: the turn that EXIF
# orientation o undoes (written out here, not taken from the code under test).
STORED_FROM_SHOWN = {1: None, 2: T.FLIP_LEFT_RIGHT, 3: T.ROTATE_180, 4: T.FLIP_TOP_BOTTOM,
                     5: T.TRANSPOSE, 6: T.ROTATE_90, 7: T.TRANSVERSE, 8: T.ROTATE_270}
WIDTH, HEIGHT = 60, 40  # the shown view
RED = (10, 5, 25, 20)  # the red object in the shown view: x0, y0, x1, y1 pixels
ORIENTATIONS = (1, 2, 3, 5, 6, 8)  # upright, mirrored, upside down, and quarter turns


def shown_view(size=(WIDTH, HEIGHT), red=RED) -> Image.Image:
    pixels = np.zeros((size[1], size[0], 3), np.uint8)
    pixels[:] = (40, 60, 200)
    x0, y0, x1, y1 = red
    pixels[y0:y1, x0:x1] = (230, 20, 20)
    return Image.fromarray(pixels)


def write_photo(path: Path, o: int, size=(WIDTH, HEIGHT), red=RED) -> Path:
    """A JPEG whose EXIF orientation `o` shows it as `shown_view` (stored turned)."""
    shown = shown_view(size, red)
    stored = shown if STORED_FROM_SHOWN[o] is None else shown.transpose(STORED_FROM_SHOWN[o])
    exif = Image.Exif()
    exif[0x0112] = o
    path.parent.mkdir(parents=True, exist_ok=True)
    stored.save(path, quality=95, exif=exif)
    return path


def voc_xml(name: str, size, box) -> str:
    (width, height), (x0, y0, x1, y1) = size, box
    return (f"<annotation><folder>images</folder><filename>{name}</filename><size>"
            f"<width>{width}</width><height>{height}</height><depth>3</depth></size>"
            f"<object><name>red</name><difficult>0</difficult><bndbox><xmin>{x0}</xmin>"
            f"<ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
            f"</annotation>")


def voc_source(root: Path, orientations=ORIENTATIONS) -> Path:
    for o in orientations:
        write_photo(root / f"o{o}.jpg", o)
        (root / f"o{o}.xml").write_text(voc_xml(f"o{o}.jpg", (WIDTH, HEIGHT), RED))
    return root


def coco_source(root: Path, orientations=ORIENTATIONS, masks: bool = False) -> Path:
    x0, y0, x1, y1 = RED
    images, annotations = [], []
    for i, o in enumerate(orientations, 1):
        write_photo(root / f"o{o}.jpg", o)
        images.append({"id": i, "file_name": f"o{o}.jpg", "width": WIDTH, "height": HEIGHT})
        annotation = {"id": i, "image_id": i, "category_id": 1, "iscrowd": 0,
                      "bbox": [x0, y0, x1 - x0, y1 - y0], "area": (x1 - x0) * (y1 - y0)}
        if masks:
            annotation["segmentation"] = [[x0, y0, x1, y0, x1, y1, x0, y1]]
        annotations.append(annotation)
    path = root / "instances.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": 1, "name": "red"}]}))
    return path


def yolo_source(root: Path, orientations=ORIENTATIONS) -> Path:
    x0, y0, x1, y1 = RED
    for o in orientations:
        write_photo(root / "images" / "train" / f"o{o}.jpg", o)
        labels = root / "labels" / "train"
        labels.mkdir(parents=True, exist_ok=True)
        (labels / f"o{o}.txt").write_text(
            f"0 {(x0 + x1) / 2 / WIDTH} {(y0 + y1) / 2 / HEIGHT} {(x1 - x0) / WIDTH} "
            f"{(y1 - y0) / HEIGHT}\n")
    (root / "data.yaml").write_text("names: [red]\ntrain: images/train\n")
    return root / "data.yaml"


SOURCES = {"voc": voc_source, "coco": coco_source, "yolo": yolo_source}


def convert(source, out, **options):
    options = {"num_workers": 1, "progress": False, "max_rejected": 1.0, **options}
    return tfrecorder.convert(str(source), str(out), **options)


def records(out) -> dict[str, dict]:
    """Every record, by its image's base name: the image's bytes and decoded pixels (by
    TensorFlow, which ignores EXIF), boxes, and masks if any."""
    found = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".tfrecord"):
            continue
        for serialized in tf.data.TFRecordDataset(os.path.join(out, name)):
            feature = tf.train.Example.FromString(serialized.numpy()).features.feature
            data = feature["image"].bytes_list.value[0]
            record = {"bytes": data,
                      "pixels": tf.io.decode_image(data, expand_animations=False).numpy(),
                      "boxes": np.asarray(feature["objects/bbox"].float_list.value
                                          if "objects/bbox" in feature else []).reshape(-1, 4),
                      "masks": [tf.io.decode_png(m).numpy()[..., 0]
                                for m in feature["objects/mask"].bytes_list.value]
                      if "objects/mask" in feature else []}
            uri = feature["image_uri"].bytes_list.value[0].decode()
            found[os.path.basename(uri)] = record
    return found


def mean_colour(pixels: np.ndarray, box) -> np.ndarray:
    """The mean colour inside a relative [ymin, xmin, ymax, xmax] box, a pixel in from
    its edges (JPEG blurs them)."""
    height, width = pixels.shape[:2]
    ymin, xmin, ymax, xmax = box
    inside = pixels[round(ymin * height) + 1:round(ymax * height) - 1,
                    round(xmin * width) + 1:round(xmax * width) - 1]
    assert inside.size, (box, pixels.shape)
    return inside.reshape(-1, 3).mean(axis=0)


def assert_on_red(record: dict, name: str) -> None:
    assert len(record["boxes"]) == 1, name
    r, g, b = mean_colour(record["pixels"], record["boxes"][0])
    assert r > 180 and g < 80 and b < 80, (name, (r, g, b), record["boxes"][0])


def turned_counts(out) -> dict[str, int]:
    """The manifest's orientation counts, summed over the splits."""
    found: dict[str, int] = {}
    for statistics in read_manifest(out)["statistics"].values():
        for name, n in statistics.get("orientation", {}).items():
            found[name] = found.get(name, 0) + n
    return found


def swaps(o: int) -> bool:
    return o in (5, 6, 7, 8)


def test_the_photos_show_as_their_shown_view(tmp_path):
    """The fixture itself: Pillow's exif_transpose (what viewers do) shows the red object
    where the annotations say, and TensorFlow's decoder, which ignores EXIF, does not."""
    for o in ORIENTATIONS:
        path = write_photo(tmp_path / f"o{o}.jpg", o)
        shown = np.asarray(ImageOps.exif_transpose(Image.open(path)))
        assert shown.shape[:2] == (HEIGHT, WIDTH)
        box = [RED[1] / HEIGHT, RED[0] / WIDTH, RED[3] / HEIGHT, RED[2] / WIDTH]
        assert mean_colour(shown, box)[0] > 180
        if o in (2, 3):  # the stored pixels' red is elsewhere
            assert mean_colour(tf.io.decode_jpeg(path.read_bytes()).numpy(), box)[0] < 180


@pytest.mark.parametrize("mode", ["auto", "shown", "stored"])
@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_boxes_land_on_their_objects_in_every_mode(tmp_path, kind, mode):
    source = SOURCES[kind](tmp_path / "source")
    with pytest.warns(tfrecorder.DatasetWarning):
        convert(source, tmp_path / "out", orientation=mode)
    found = records(tmp_path / "out")
    assert sorted(found) == sorted(f"o{o}.jpg" for o in ORIENTATIONS)
    files = {p.name: p.read_bytes() for p in Path(tmp_path, "source").rglob("*.jpg")}
    for o in ORIENTATIONS:
        name = f"o{o}.jpg"
        record = found[name]
        assert_on_red(record, name)
        stored = mode == "stored" and swaps(o)
        assert record["pixels"].shape[:2] == ((WIDTH, HEIGHT) if stored else (HEIGHT, WIDTH))
        if mode == "stored" or o == 1:  # the file's bytes, kept
            assert record["bytes"] == files[name]
        else:  # turned, and a JPEG still, without the orientation that turned it
            assert record["bytes"][:2] == b"\xff\xd8"
            assert Image.open(io.BytesIO(record["bytes"])).getexif().get(0x0112, 1) == 1
    turned = len(ORIENTATIONS) - 1
    # VOC and COCO state sizes that cannot tell the views of 2 (mirrored) and 3 (upside
    # down) apart; YOLO states none: its images are taken as shown, as Ultralytics shows.
    ambiguous = {"ambiguous": 2} if kind != "yolo" else {}
    assert turned_counts(tmp_path / "out") == {
        ("turned_boxes" if mode == "stored" else "turned_pixels"): turned, **ambiguous}


@pytest.mark.parametrize("options", [{"max_image_side": 30}, {"image_size": (20, 30)},
                                     {"image_format": "png"}])
def test_turned_images_are_resized_and_converted_in_their_shown_view(tmp_path, options):
    source = voc_source(tmp_path / "source", (1, 6, 8))
    convert(source, tmp_path / "out", **options)
    for name, record in records(tmp_path / "out").items():
        assert record["pixels"].shape[:2] == ((HEIGHT, WIDTH) if "image_format" in options
                                              else (20, 30)), name
        assert_on_red(record, name)
        assert (record["bytes"][:4] == b"\x89PNG") == ("image_format" in options)


def test_annotations_of_the_stored_view_stay_as_they_are_by_default(tmp_path):
    """A VOC file whose <size> is the stored pixels' (LabelImg does not turn images)
    describes the stored view: "auto" keeps the bytes and boxes; "shown" turns both."""
    source = tmp_path / "source"
    path = write_photo(source / "o6.jpg", 6)
    # In the stored view (40 x 60), the object is the shown box turned back a quarter.
    x0, y0, x1, y1 = RED
    stored_box = (y0, WIDTH - x1, y1, WIDTH - x0)
    (source / "o6.xml").write_text(voc_xml("o6.jpg", (HEIGHT, WIDTH), stored_box))
    write_photo(source / "plain.jpg", 1)
    (source / "plain.xml").write_text(voc_xml("plain.jpg", (WIDTH, HEIGHT), RED))
    convert(source, tmp_path / "auto", num_shards=1)
    kept = records(tmp_path / "auto")["o6.jpg"]
    assert kept["bytes"] == path.read_bytes()
    assert_on_red(kept, "auto")
    assert turned_counts(tmp_path / "auto") == {}
    convert(source, tmp_path / "shown", orientation="shown")
    shown = records(tmp_path / "shown")["o6.jpg"]
    assert shown["pixels"].shape[:2] == (HEIGHT, WIDTH)
    assert_on_red(shown, "shown")
    assert turned_counts(tmp_path / "shown") == {"turned_pixels": 1, "turned_boxes": 1}


@pytest.mark.parametrize("kind", ["voc", "coco"])
def test_a_stated_size_of_neither_view_is_rejected_with_the_sizes(tmp_path, kind):
    source = tmp_path / "source"
    write_photo(source / "o6.jpg", 6)
    write_photo(source / "plain.jpg", 1)
    if kind == "voc":
        (source / "o6.xml").write_text(voc_xml("o6.jpg", (50, 50), (5, 5, 20, 20)))
        (source / "plain.xml").write_text(voc_xml("plain.jpg", (WIDTH, HEIGHT), RED))
    else:
        (source / "instances.json").write_text(json.dumps({
            "images": [{"id": 1, "file_name": "o6.jpg", "width": 50, "height": 50},
                       {"id": 2, "file_name": "plain.jpg", "width": WIDTH, "height": HEIGHT}],
            "annotations": [{"id": i, "image_id": i, "category_id": 1, "iscrowd": 0,
                             "bbox": [5, 5, 15, 15], "area": 225} for i in (1, 2)],
            "categories": [{"id": 1, "name": "red"}]}))
        source = source / "instances.json"
    result = convert(source, tmp_path / "out")
    assert result.num_rejected == 1
    assert sorted(records(tmp_path / "out")) == ["plain.jpg"]
    with open(tmp_path / "out" / "rejected.csv", newline="") as f:
        rejected = list(csv.DictReader(f))
    assert len(rejected) == 1
    reason = rejected[0]["reason"]
    assert "o6.jpg" in json.dumps(rejected[0])
    assert "50x50" in reason and "40x60 as stored" in reason and "60x40 as shown" in reason
    assert "EXIF orientation 6" in reason


def test_masks_are_turned_with_their_boxes(tmp_path):
    """COCO polygons in the shown view: drawn turned back onto the stored pixels."""
    source = coco_source(tmp_path / "source", (1, 3, 6, 8, 5), masks=True)
    for mode in ("auto", "stored"):
        with pytest.warns(tfrecorder.DatasetWarning):
            convert(source, tmp_path / mode, orientation=mode)
        for name, record in records(tmp_path / mode).items():
            assert_on_red(record, f"{mode} {name}")
            (mask,) = record["masks"]
            assert mask.shape == record["pixels"].shape[:2]
            colour = record["pixels"][mask > 0].mean(axis=0)
            assert colour[0] > 180 and colour[2] < 80, (mode, name, colour)
            assert (mask > 0).sum() == pytest.approx(15 * 15, rel=0.3)


def test_mirrored_keypoints_are_refused_when_boxes_would_turn(tmp_path):
    source = coco_source(tmp_path / "source", (2, 6))
    data = json.loads(source.read_text())
    data["categories"][0]["keypoints"] = ["left_eye", "right_eye"]
    for annotation in data["annotations"]:
        annotation["keypoints"] = [12, 8, 2, 20, 8, 2]
        annotation["num_keypoints"] = 2
    source.write_text(json.dumps(data))
    result = convert(source, tmp_path / "out", orientation="stored")
    assert result.num_rejected == 1
    rejected = (tmp_path / "out" / "rejected.csv").read_text()
    assert "o2.jpg" in rejected and "left and right" in rejected
    (record,) = records(tmp_path / "out").values()
    assert_on_red(record, "o6")
    # The quarter turn's keypoints are turned with the box: each on the red object.
    (serialized,) = [s for name in os.listdir(tmp_path / "out") if name.endswith(".tfrecord")
                     for s in tf.data.TFRecordDataset(str(tmp_path / "out" / name))]
    feature = tf.train.Example.FromString(serialized.numpy()).features.feature
    points = np.asarray(feature["objects/keypoints"].float_list.value).reshape(-1, 2)
    height, width = record["pixels"].shape[:2]
    assert (height, width) == (WIDTH, HEIGHT) and len(points) == 2
    for y, x in points:
        assert record["pixels"][int(y * height), int(x * width)][0] > 180, (y, x)


def classification_source(root: Path) -> Path:
    for label in ("red", "blue"):
        for o in (1, 6, 8):
            write_photo(root / label / f"{label}{o}.jpg", o,
                        red=RED if label == "red" else (0, 0, 0, 0))
    return root


def test_classification_is_byte_identical_by_default_and_turned_when_shown(tmp_path):
    source = classification_source(tmp_path / "source")
    convert(source, tmp_path / "auto")
    convert(source, tmp_path / "stored", orientation="stored")
    assert shard_bytes(tmp_path / "auto") == shard_bytes(tmp_path / "stored")
    manifest = read_manifest(tmp_path / "auto")
    assert "orientation" not in manifest["options"]
    assert all("orientation" not in s for s in manifest["statistics"].values())
    files = {p.name: p.read_bytes() for p in source.rglob("*.jpg")}
    for name, record in records(tmp_path / "auto").items():
        assert record["bytes"] == files[name]  # EXIF and all, as before
    convert(source, tmp_path / "shown", orientation="shown")
    assert read_manifest(tmp_path / "shown")["options"]["orientation"] == "shown"
    box = [RED[1] / HEIGHT, RED[0] / WIDTH, RED[3] / HEIGHT, RED[2] / WIDTH]
    for name, record in records(tmp_path / "shown").items():
        assert record["pixels"].shape[:2] == (HEIGHT, WIDTH), name
        if name.startswith("red"):
            assert mean_colour(record["pixels"], box)[0] > 180, name
    assert turned_counts(tmp_path / "shown") == {"turned_pixels": 4}


def test_info_shows_the_counts_and_warns_of_ambiguous_images(tmp_path, capsys):
    with pytest.warns(tfrecorder.DatasetWarning, match="EXIF orientation"):
        convert(voc_source(tmp_path / "source"), tmp_path / "out", num_shards=1)
    found = tfrecorder.info(str(tmp_path / "out"))
    total = {}
    for counts in found.orientation.values():
        for name, n in counts.items():
            total[name] = total.get(name, 0) + n
    assert total == {"turned_pixels": 5, "ambiguous": 2}
    assert any("EXIF orientation" in w for w in found.warnings)
    assert cli.main(["info", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "Oriented:" in printed and "turned pixels" in printed and "ambiguous" in printed


@pytest.mark.parametrize("o", range(2, 9))
def test_boxes_turn_as_pillow_turns_the_pixels(o):
    """`turned_boxes` with each orientation's turn, against Pillow's transpose of an
    image with a marked rectangle; and the inverse turn undoes it."""
    size, red = (30, 20), (3, 2, 11, 7)
    stored = shown_view(size, red)
    box = [red[1] / size[1], red[0] / size[0], red[3] / size[1], red[2] / size[0]]
    turned = stored.transpose(orientation.TRANSPOSES[o])
    pixels = np.asarray(turned)
    ys, xs = np.nonzero((pixels[..., 0] > 180) & (pixels[..., 2] < 80))
    height, width = pixels.shape[:2]
    expected = [ys.min() / height, xs.min() / width, (ys.max() + 1) / height,
                (xs.max() + 1) / width]
    found = orientation.turned_boxes(box, o)
    assert np.allclose(found, expected), (o, found, expected)
    assert np.allclose(orientation.turned_boxes(found, orientation.INVERSE[o]), box)


def test_the_beam_engine_writes_the_same_bytes(tmp_path):
    source = voc_source(tmp_path / "source")
    with pytest.warns(tfrecorder.DatasetWarning):
        convert(source, tmp_path / "local", orientation="stored", num_shards=1)
    with pytest.warns(tfrecorder.DatasetWarning):
        convert(source, tmp_path / "beam", orientation="stored", num_shards=1,
                runner="DirectRunner")
    assert shard_bytes(tmp_path / "beam") == shard_bytes(tmp_path / "local")
    assert read_manifest(tmp_path / "beam") == read_manifest(tmp_path / "local")
    with pytest.warns(tfrecorder.DatasetWarning):
        convert(source, tmp_path / "beam_auto", num_shards=1, runner="DirectRunner")
    with pytest.warns(tfrecorder.DatasetWarning):
        convert(source, tmp_path / "local_auto", num_shards=1)
    assert shard_bytes(tmp_path / "beam_auto") == shard_bytes(tmp_path / "local_auto")


def _jpeg_with(exif=None, xmp=None) -> bytes:
    pixels = Image.fromarray(np.random.default_rng(0).integers(0, 255, (30, 40, 3), np.uint8))
    buffer = io.BytesIO()
    pixels.save(buffer, "JPEG", **({"exif": exif} if exif is not None else {}),
                **({"xmp": xmp} if xmp is not None else {}))
    return buffer.getvalue()


def _pillows(data: bytes) -> tuple[int, tuple[int, int]]:
    with Image.open(io.BytesIO(data)) as image:
        value = image.getexif().get(0x0112, 1)
        return (value if isinstance(value, int) and 1 <= value <= 8 else 1), image.size


def _tagged(value, **tags) -> Image.Exif:
    exif = Image.Exif()
    exif.update({0x010F: "phone", **tags})
    if value is not None:
        exif[0x0112] = value
    return exif


_XMP = b'<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>'
_BIG_ENDIAN = b"Exif\0\0MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x08\0\0\0\0\0\0"


@pytest.mark.parametrize(("data", "read_here"), [
    *((_jpeg_with(_tagged(v)), True) for v in (None, 0, 1, 3, 5, 6, 8, 9, 300)),
    (_jpeg_with(_BIG_ENDIAN), True), (_jpeg_with(), True), (_jpeg_with(xmp=_XMP), False),
    (_jpeg_with(_tagged(None), xmp=_XMP), False), (_jpeg_with(_tagged(8), xmp=_XMP), True),
], ids=lambda value: str(len(value)) if isinstance(value, bytes) else str(value))
def test_a_jpegs_orientation_is_read_from_its_exif_as_pillow_reads_it(data, read_here):
    """The JPEG path reads the Exif segment itself, Pillow only where XMP may decide: the
    same orientation and size as Pillow's `getexif`, big- and little-endian, values out
    of range, XMP alone."""
    from tfrecorder.format.image_checks import jpeg_header

    assert orientation.exif_orientation(data) == _pillows(data)
    segments = jpeg_header(data).segments
    assert (orientation._jpeg_orientation(data, segments) is not None) is read_here

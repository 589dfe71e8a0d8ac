"""The thumbnails of `show`'s sheets and the report: a split's first records of each
class, read without TensorFlow, each image decoded small, with its masks drawn in (boxes
are listed in each thumbnail's `objects`: each page draws them its own way).

A look at the images is the quickest check that labels match pictures, so it must be
quick: records are read in pure Python (`reader.SplitDataset`, the reader `open_split`
gives), shards in order, and reading stops as soon as every class has its images, so a
large dataset is not read to the end. JPEGs are decoded at a reduced DCT scale (Pillow's
`draft`), which skips most of a full decode: a sheet of 100 photos takes a fraction of a
second.

A video clip's thumbnail is a strip of a few of its frames, evenly spread over the clip,
side by side within the thumbnail's square (only those frames are decoded); an audio
clip's is its waveform's envelope with its duration and rate. So `show`, the report and
`info`'s strip draw clips as they draw images.

Apart from `show`, which lays the thumbnails out on a sheet, because the report and
`info`'s thumbnail strip lay them out themselves.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import io
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np
from PIL import Image, ImageDraw

from tfrecorder.errors import OptionError
from tfrecorder.format.layouts import BBOX, MASK, OBJECT_LABEL, SEGMENTATION_MASK
from tfrecorder.format.manifest import (
    BASE64_ALTCHARS,
    IMAGE_FEATURES,
    LABEL,
    Manifest,
    Split,
    read_manifest,
)
from tfrecorder.read.drawing import (
    BACKGROUND,
    TEXT,
    caption_font_size,
    class_colour,
    draw_masks,
    font,
    mask_colour,
)
from tfrecorder.read.reader import split_dataset
from tfrecorder.wording import count, shown

logger = logging.getLogger(__name__)

# Rows shown unless `classes` names them: a sheet of 1000 classes would be a picture some
# 180,000 pixels tall, and would read 8 records of every class to draw it.
MAX_ROWS = 50
_RAW_MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # raw pixels' channels -> Pillow mode
_PLACEHOLDER = "#c8c8c8"
STRIP_FRAMES = 4  # frames of a video clip its thumbnail shows
_WAVE = "#1f5f9f"
NO_BOXES = "no boxes"  # the title of a detection sheet's row of images without boxes


@dataclass(frozen=True)
class Box:
    """An object of a detection record: its box, relative to the image (0 to 1, as
    stored), and its class (None for a box without one)."""

    ymin: float
    xmin: float
    ymax: float
    xmax: float
    class_id: int | None
    class_name: str | None

    @property
    def colour(self) -> str:
        return class_colour(self.class_id)


@dataclass(frozen=True)
class Item:
    """Where one image of a sheet comes from, and what it shows."""

    class_name: str | None  # its row's class; None in a dataset without labels
    image_name: str
    split: str
    shard: str  # the shard's file name in the dataset folder
    record: int  # the record's index in its shard
    labels: tuple[str, ...]  # all the record's classes (several for multi-label records)
    problem: str  # why its image could not be decoded; "" when it was
    objects: tuple[Box, ...] = field(default=(), kw_only=True)  # a detection record's


@dataclass(frozen=True)
class Thumbnail(Item):
    """An `Item` with its image, at most `size` pixels a side (a grey placeholder saying
    "cannot decode" when `problem` says why not), with the record's instance or
    segmentation masks drawn over it. Its boxes (`objects`) are not drawn in: each page
    draws them its own way (`draw_objects` in Pillow)."""

    image: Image.Image
    # The class ids of a segmentation record's mask (0, the background, left out), read at
    # full size, so that a class too small to survive the thumbnail is still named.
    mask_classes: tuple[int, ...] = field(default=(), kw_only=True)

    @property
    def item(self) -> Item:
        return Item(**{f.name: getattr(self, f.name) for f in fields(Item)})


def thumbnails(path: str | os.PathLike, split: str = "train", per_class: int = 8,
               size: int = 128, *,
               classes: Sequence[str | int] | None = None) -> list[Thumbnail]:
    """The thumbnails `show` lays out, class by class (a multi-label record once per
    class, sharing one image), for pages that lay them out themselves. (Not a detection
    sheet's images without boxes: they belong to no class.)"""
    rows = sample(os.fspath(path), split, per_class, size, classes).rows
    return [thumbnail for row_thumbnails in rows.values() for thumbnail in row_thumbnails]


# --- sampling ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """What `sample` read of a split: each row's thumbnails, a detection split's images
    without boxes (None: no such row), and how many images each row has in the split,
    as the writer counted them (None: not counted, in manifests from before)."""

    split: str
    rows: dict[str, list[Thumbnail]]
    without_boxes: list[Thumbnail] | None = None
    counts: dict[str, int] | None = None
    without_boxes_counted: int | None = None
    noun: str = "image"  # what a row counts: "clip" for a video or audio dataset

    @property
    def no_boxes(self) -> int:
        """The split's images without boxes (those found, where they were not counted)."""
        if self.without_boxes is None:
            return 0
        counted = self.without_boxes_counted
        return len(self.without_boxes) if counted is None else counted

    def titled_rows(self) -> list[tuple[str, str, list[Thumbnail]]]:
        """Each row's title, caption and thumbnails: the classes', then the images'
        without boxes."""
        found = [(name, self._caption(self.counts.get(name) if self.counts else None,
                                      row_thumbnails), row_thumbnails)
                 for name, row_thumbnails in self.rows.items()]
        if self.without_boxes is not None:
            found.append((NO_BOXES, self._caption(self.no_boxes, self.without_boxes),
                          self.without_boxes))
        return found

    def _caption(self, counted: int | None, row_thumbnails: list[Thumbnail]) -> str:
        """The line under a row's title: its images in the split ("12 images", "none in
        validation"), or "" where they were not counted."""
        if counted is None and not row_thumbnails:  # read to the end, and none found
            counted = 0
        if counted is None:
            return ""
        return count(counted, self.noun) if counted else f"none in {self.split}"


def sample(path: str, split: str, per_class: int, size: int,
           classes: Sequence[str | int] | None, no_boxes: bool = False) -> Sample:
    """Each row's name with up to `per_class` thumbnails: the first records of its class,
    read shard by shard until every row is full; with `no_boxes` (and every class's row),
    a detection split's first images without boxes too."""
    _check_positive(per_class=per_class, thumbnail_size=size)
    manifest = read_manifest(path)
    if not manifest.has_images and manifest.media is None:
        raise OptionError(f"the dataset in {path!r} has no images to show: it was written "
                          "from a table without an image column. Read its records with "
                          "tfrecorder.load or tfrecorder.inspect.", option="path")
    records = split_dataset(path, manifest, split, decode=False)
    class_names = manifest.labels.class_names if manifest.labels is not None else ()
    if manifest.media is not None and manifest.task != "classification":
        class_names = ()  # a clip's classes are its boxes' or segments': one row
    detection = manifest.task == "detection"
    rows: dict[str, list[Thumbnail]] = {name: [] for name in _rows(class_names, classes,
                                                                   split)}
    counts = _counted(manifest, split, class_names)
    wanted = {name: min(per_class, counts.get(name, per_class)) if counts else per_class
              for name in rows}
    without_counted = _without_boxes(manifest, split)
    without_wanted = 0
    if no_boxes and detection and classes is None:
        without_wanted = min(per_class, per_class if without_counted is None else without_counted)
    without: list[Thumbnail] = []
    missing = sum(wanted.values()) + without_wanted
    noun = "clip" if manifest.media is not None else "image"
    if not missing:  # no shard need be opened
        return Sample(split, rows, None, counts, without_counted, noun)
    in_order = records.in_order()
    with contextlib.closing(in_order):  # a shard is opened when its first record is asked
        for shard, index, record in in_order:
            values = record_values(record, class_names, detection)
            labels = tuple(dict.fromkeys(values.class_names))
            takers = [name for name in (labels if class_names else [split])
                      if len(rows.get(name, ())) < wanted.get(name, 0)]
            bare = not values.objects and len(without) < without_wanted
            if not takers and not bare:
                continue
            image, problem = record_thumbnail(values, size)
            drawn = functools.partial(Thumbnail, split=split, shard=shard, record=index,
                                      problem=problem, image=image, objects=values.objects,
                                      mask_classes=mask_classes(values))
            for name in takers:
                rows[name].append(drawn(name if class_names else None, values.image_name,
                                        labels=labels))
            if bare:
                without.append(drawn(None, values.image_name, labels=()))
            missing -= len(takers) + bare
            if not missing:
                break
    return Sample(split, rows, without or None, counts, without_counted, noun)


def _check_positive(**numbers: int) -> None:
    for name, value in numbers.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise OptionError(f"{name} must be a whole number of 1 or more, not {shown(value)}.",
                              option=name)


def _rows(class_names: tuple[str, ...], classes: Sequence[str | int] | None,
          split: str) -> list[str]:
    """The rows' names: the classes asked for, or the first MAX_ROWS; a dataset without
    labels has one row, its split's."""
    if classes is None:
        if len(class_names) > MAX_ROWS:
            logger.warning("showing the first %d of the dataset's %d classes; choose the "
                           "rows with classes=[...]", MAX_ROWS, len(class_names))
        return list(class_names[:MAX_ROWS]) or [split]
    if isinstance(classes, (str, int)):
        classes = [classes]
    if not class_names:
        raise OptionError("the dataset has no labels, so no classes to choose: leave out "
                          "classes=.", option="classes")
    asked = [str(name) for name in classes]
    unknown = [name for name in asked if name not in class_names]
    if unknown:
        listed = ", ".join(map(repr, class_names[:20]))
        more = f" and {len(class_names) - 20} more" if len(class_names) > 20 else ""
        raise OptionError(f"the dataset has no class {unknown[0]!r}; its classes are "
                          f"{listed}{more}.", option="classes")
    return list(dict.fromkeys(asked))


def _counted(manifest: Manifest, split: str,
             class_names: tuple[str, ...]) -> dict[str, int] | None:
    """Each row's images in the split, as the writer counted them (for detection, the
    images holding an object of the class; without labels, the split's records), so that
    a rare class does not make the reader read to the end, looking for images that are
    not there; None where the manifest has no counts."""
    if not class_names:
        return {split: manifest.splits[Split(split)].num_records}
    statistics = manifest.statistics.get(Split(split))
    counted = statistics and (statistics.objects.class_images if statistics.objects
                              else statistics.class_counts)
    if not counted or len(counted) != len(class_names):
        return None
    return dict(zip(class_names, counted))


def _without_boxes(manifest: Manifest, split: str) -> int | None:
    """A detection split's images without boxes, as the writer counted them (None: not
    counted)."""
    statistics = manifest.statistics.get(Split(split))
    return statistics.objects.without_boxes if statistics and statistics.objects else None


# --- reading a record, in either layout ---------------------------------------------------

@dataclass(frozen=True)
class RecordValues:
    """What `show` and the report draw of one record, by canonical name: its image's
    features, its classes (0-based ids, with their names), a detection record's objects
    and instance masks (PNG bytes, one per object), and a segmentation mask (PNG bytes,
    class ids)."""

    image: dict  # IMAGE_FEATURES' names -> value (bytes, or an int), those the record has
    image_name: str
    class_ids: tuple[int, ...]
    class_names: tuple[str, ...]
    objects: tuple[Box, ...] = ()
    masks: tuple[bytes, ...] = ()
    segmentation: bytes | None = None
    # A video clip's frames to draw (JPEG bytes), or an audio clip's waveform and rate.
    frames: tuple[bytes, ...] = ()
    waveform: np.ndarray | None = None
    sample_rate: float = 0.0


def record_values(record: Mapping, class_names: Sequence[str],
                  detection: bool) -> RecordValues:
    """What `show` and the report draw of a record as `SplitDataset` reads it undecoded
    (`decode=False`: canonical names, either layout), with the dataset's class names.
    A clip's (`clips`: `video` as its frames' bytes, or `audio`) draws a strip of
    frames or its waveform, named by its file."""
    if "video" in record or "audio" in record:
        return _clip_values(record, class_names)
    image = {name: _plain(record[name]) for name in IMAGE_FEATURES if name in record}
    ids = tuple(np.atleast_1d(record.get(OBJECT_LABEL if detection else LABEL, ())).tolist())
    known = tuple(i for i in ids if 0 <= i < len(class_names))
    objects = ()
    if detection:
        objects = tuple(
            Box(*(float(v) for v in box), ids[i] if i < len(ids) else None,
                class_names[ids[i]] if i < len(ids) and 0 <= ids[i] < len(class_names)
                else None)
            for i, box in enumerate(record.get(BBOX, ())))
    return RecordValues(
        image, _text(image.get("image_name", b"")), known,
        tuple(class_names[i] for i in known), objects, tuple(record.get(MASK, ())),
        record.get(SEGMENTATION_MASK))


def _clip_values(record: Mapping, class_names: Sequence[str]) -> RecordValues:
    ids = tuple(np.atleast_1d(record.get(LABEL, ())).tolist())
    known = tuple(i for i in ids if 0 <= i < len(class_names))
    frames = list(record.get("video", ()))
    if len(frames) > STRIP_FRAMES:  # evenly spread, first and last included
        frames = [frames[i] for i in np.linspace(0, len(frames) - 1, STRIP_FRAMES).round()
                  .astype(int).tolist()]
    return RecordValues({}, _text(record.get("data_path", b"")), known,
                        tuple(class_names[i] for i in known), frames=tuple(frames),
                        waveform=record.get("audio"),
                        sample_rate=float(record.get("sample_rate", 0.0)))


def _plain(value):
    """A NumPy scalar as Python's (Pillow takes sizes as ints); bytes as they are."""
    return value.item() if isinstance(value, np.generic) else value


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


# --- decoding ------------------------------------------------------------------------------

# What Pillow raises for bytes it cannot decode: many types, so a broad but named set.
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, TypeError,
                  binascii.Error, Image.DecompressionBombError)


def record_thumbnail(values: RecordValues, size: int) -> tuple[Image.Image, str]:
    """The image of a record (`record_values`), RGB, at most `size` a side,
    with its masks drawn over it; or a placeholder and why not. The report draws
    duplicates with it too."""
    try:
        if values.frames:
            return _strip(values.frames, size), ""
        if values.waveform is not None:
            return _waveform(values.waveform, values.sample_rate, size), ""
        image = _decode(values.image, size)
        image.thumbnail((size, size))
    except _DECODE_ERRORS as error:
        return _placeholder(size), f"cannot decode: {error}"
    try:
        return _with_masks(image, values), ""
    except _DECODE_ERRORS as error:  # the image without them, and why
        return image, f"cannot decode its masks: {error}"


def _decode(image: dict, size: int) -> Image.Image:
    data = image.get("image", b"")
    image_format = image.get("image_format", b"")
    if image_format == b"raw":
        shape = [image.get(name, 0) for name in ("image_width", "image_height",
                                                  "image_channels")]
        width, height, channels = shape
        if channels not in _RAW_MODES:
            raise ValueError(f"raw pixels of {channels} channels")
        pixels = base64.b64decode(data, altchars=BASE64_ALTCHARS)
        image = Image.frombytes(_RAW_MODES[channels], (width, height), pixels)
    else:  # JPEG or PNG, whatever the record says: the bytes tell which
        image = Image.open(io.BytesIO(data), formats=["JPEG", "PNG"])
        if image.format == "JPEG":
            image.draft("RGB", (size, size))  # decodes at 1/2, 1/4 or 1/8 scale
    return _on_white(image)


def _strip(frames: Sequence[bytes], size: int) -> Image.Image:
    """A clip's frames side by side, `size` wide in all, each decoded small."""
    each = max(1, size // len(frames))
    shown = []
    for data in frames:
        frame = Image.open(io.BytesIO(data), formats=["JPEG"])
        frame.draft("RGB", (each, each))
        frame = frame.convert("RGB")
        frame.thumbnail((each, size))
        shown.append(frame)
    height = max(frame.height for frame in shown)
    strip = Image.new("RGB", (each * len(shown), height), BACKGROUND)
    for k, frame in enumerate(shown):
        strip.paste(frame, (k * each + (each - frame.width) // 2, (height - frame.height) // 2))
    return strip


def _waveform(samples: np.ndarray, rate: float, size: int) -> Image.Image:
    """An audio clip's first channel as its envelope (the least and most sample of each
    column), with its duration and rate written in."""
    samples = np.asarray(samples, np.float32).reshape(len(samples), -1)[:, 0]
    height = max(16, size // 2)
    image = Image.new("RGB", (size, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    if len(samples):
        columns = np.array_split(samples, min(size, len(samples)))
        middle, half = height / 2, height / 2 - 1
        for x, column in enumerate(columns):
            low, high = float(np.clip(column.min(), -1, 1)), float(np.clip(column.max(), -1, 1))
            draw.line([(x, middle - high * half), (x, middle - low * half)], fill=_WAVE)
    seconds = len(samples) / rate if rate else 0.0
    draw.text((2, 1), f"{seconds:.2f} s, {rate:g} Hz", fill=TEXT,
              font=font(caption_font_size(size)))
    return image


def _with_masks(image: Image.Image, values: RecordValues) -> Image.Image:
    """`image` with a record's masks over it (`drawing.draw_masks`: translucent, and
    outlined): instance masks, each in its object's class's colour, or a segmentation
    mask's classes (class id 0, the background, left clear). Masks are decoded and shrunk
    to the thumbnail by nearest neighbour, so class ids stay ids."""
    if not values.masks and values.segmentation is None:
        return image
    owners = np.full((image.height, image.width), -1, dtype=np.int32)
    colours: list[str] = []  # of each region: a segmentation class, or an instance
    if values.segmentation is not None:
        ids = _mask_pixels(values.segmentation, image.size)
        for class_id in np.unique(ids[ids > 0]).tolist():
            owners[ids == class_id] = len(colours)
            colours.append(mask_colour(class_id))
    for mask, box in zip(values.masks, values.objects):  # a later object over an earlier
        owners[_mask_pixels(mask, image.size) > 0] = len(colours)
        colours.append(box.colour)
    return draw_masks(image, owners, colours)


def mask_classes(values: RecordValues) -> tuple[int, ...]:
    """The class ids of a segmentation record's mask at full size (0, the background,
    left out), for the sheet's legend; () for a record without one, or whose mask cannot
    be decoded (its thumbnail says why)."""
    if values.segmentation is None:
        return ()
    try:
        ids = _mask_pixels(values.segmentation)
    except _DECODE_ERRORS:
        return ()
    present = np.bincount(ids.ravel().astype(np.int64))  # class ids: PNG values, not negative
    return tuple((np.flatnonzero(present[1:]) + 1).tolist())


def _mask_pixels(data: bytes, size: tuple[int, int] | None = None) -> np.ndarray:
    """A stored mask (a PNG of 0s and 1s, or of class ids) at `size` (width, height; None:
    as stored)."""
    mask = Image.open(io.BytesIO(data), formats=["PNG"])
    if size is not None and mask.size != size:
        mask = mask.resize(size, Image.Resampling.NEAREST)
    return np.asarray(mask)


def _on_white(image: Image.Image) -> Image.Image:
    """RGB; transparent pixels shown on the sheet's white, not as whatever colour they
    hide."""
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("RGBA", "LA", "PA"):
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, BACKGROUND)
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")


def _placeholder(size: int) -> Image.Image:
    image = Image.new("RGB", (size, size), _PLACEHOLDER)
    ImageDraw.Draw(image).text((size / 2, size / 2), "cannot decode", fill=TEXT,
                               font=font(caption_font_size(size)), anchor="mm")
    return image

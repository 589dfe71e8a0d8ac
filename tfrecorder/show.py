"""`show()`: a contact sheet of a dataset's images, one row per class, without TensorFlow.
A detection record's boxes are drawn on its image with their classes' names, and
instance and segmentation masks as translucent, outlined colours over it, in either record
layout. Colours, text and the legend are drawn by `tfrecorder.drawing`.

A look at the images is the quickest check that labels match pictures, so it must be
quick: records are read in pure Python (`tfrecord`, `example.decode_example`), shards in
order, and reading stops as soon as every class has its images, so a large dataset is
not read to the end. JPEGs are decoded at a reduced DCT scale (Pillow's `draft`), which
skips most of a full decode: a sheet of 100 photos takes a fraction of a second.

`thumbnails` is the sampling and decoding alone (masks drawn in, boxes listed in each
thumbnail's `objects`); the HTML report (`report`, and `info.thumbnail_strip`) lays them
out itself.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import html
import io
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np
from PIL import Image, ImageDraw

from tfrecorder import fs
from tfrecorder.drawing import (  # noqa: F401  (the colours, as tfrecorder.show names them)
    CLASS_COLOURS,
    MASK_OPACITY,
    NO_CLASS_COLOUR,
    LegendEntry,
    class_colour,
    draw_legend,
    draw_masks,
    fit,
    font,
    mask_colour,
    place_legend,
)
from tfrecorder.errors import OptionError
from tfrecorder.example import decode_example
from tfrecorder.layouts import BBOX, MASK, OBJECT_LABEL, SEGMENTATION_MASK, layout_of
from tfrecorder.manifest import (
    BASE64_ALTCHARS,
    IMAGE_FEATURES,
    LABEL,
    Manifest,
    Split,
    read_manifest,
)
from tfrecorder.tfrecord import open_read, read_records
from tfrecorder.wording import count, shown

logger = logging.getLogger(__name__)

# Rows shown unless `classes` names them: a sheet of 1000 classes would be a picture some
# 180,000 pixels tall, and would read 8 records of every class to draw it.
MAX_ROWS = 50
_RAW_MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # raw pixels' channels -> Pillow mode
_BACKGROUND, _TEXT, _RULE, _PLACEHOLDER = "white", "#222222", "#dddddd", "#c8c8c8"
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


@dataclass(frozen=True)
class Layout:
    """Where things go on a sheet: a header column of class names (each with its row's
    caption under it), then cells of a thumbnail with its caption under it: its file
    name, and on a second line (on sheets that need one) the record's other labels. The
    header is as wide as a cell, or as its widest text (`header_text`, in pixels) needs."""

    thumbnail_size: int
    caption_lines: int = 1
    header_text: float = 0

    @property
    def padding(self) -> int:
        return max(4, self.thumbnail_size // 16)

    @property
    def font_size(self) -> int:
        return min(14, max(9, self.thumbnail_size // 10))

    @property
    def line_height(self) -> int:
        return self.font_size + 3

    @property
    def cell_width(self) -> int:
        return self.thumbnail_size + 2 * self.padding

    @property
    def cell_height(self) -> int:
        return self.thumbnail_size + self.caption_lines * self.line_height + 3 * self.padding

    @property
    def header_width(self) -> int:
        # At most twice a cell (or 120 pixels): longer names are shortened in the middle.
        needed = round(self.header_text) + 2 * self.padding
        return max(self.cell_width, min(needed, max(2 * self.cell_width, 120)))

    def size(self, rows: int, columns: int) -> tuple[int, int]:
        return self.header_width + columns * self.cell_width, rows * self.cell_height

    def thumbnail_box(self, row: int, column: int) -> tuple[int, int, int, int]:
        """(left, top, right, bottom) of the square a thumbnail is centred in."""
        left = self.header_width + column * self.cell_width + self.padding
        top = row * self.cell_height + self.padding
        return left, top, left + self.thumbnail_size, top + self.thumbnail_size


class ContactSheet(Image.Image):
    """A Pillow image of a split's thumbnails (save, resize, or display it in a notebook),
    with what it shows.

    Attributes:
        items: the `Item` of each thumbnail, row by row, left to right.
        classes: the rows' names (class names; the split's name without labels).
        grid: (rows, columns): the rows of `classes`, and a detection sheet's row of
            images without boxes, titled "no boxes", after them.
        split_name: the split shown. (Not `split`, which is Pillow's method for bands.)
        layout: where each row and thumbnail is (`Layout.thumbnail_box`).
        no_boxes: a detection sheet's images without boxes in the split, shown in its
            last row (their items' `class_name` is None); 0 on other sheets.
        legend: a segmentation sheet's mask classes, under its rows: each class id's
            colour and where its swatch is.
    """

    items: list[Item]
    classes: tuple[str, ...]
    grid: tuple[int, int]
    split_name: str
    layout: Layout
    no_boxes: int
    legend: tuple[LegendEntry, ...]

    @classmethod
    def of(cls, image: Image.Image, **attributes) -> ContactSheet:
        """`image` as a ContactSheet. Pillow builds images with factories that return
        plain Images, so the subclass takes over a built image's state instead."""
        sheet = cls.__new__(cls)
        sheet.__dict__.update(image.__dict__)
        sheet.__dict__.update(attributes)
        return sheet

    def _attributes(self) -> dict:
        return {name: self.__dict__[name]
                for name in ("items", "classes", "grid", "split_name", "layout",
                             "no_boxes", "legend")}

    def __getstate__(self) -> list:
        return [*super().__getstate__(), self._attributes()]

    def __setstate__(self, state: list) -> None:
        super().__setstate__(state[:-1])
        self.__dict__.update(state[-1])

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and self._attributes() == other._attributes()

    def caption(self) -> str:
        rows = len(self.classes)
        names = ", ".join(self.classes[:10]) + (", ..." if rows > 10 else "")
        return (f"{self.split_name}: {count(len(self.items), 'image')}; {self._rows()}: {names}"
                + (f"; {self.no_boxes:,} without boxes" if self.no_boxes else ""))

    def __repr__(self) -> str:
        return (f"<ContactSheet {self.split_name}: {count(len(self.items), 'image')}, "
                f"{self._rows()}, {self.width}x{self.height}>")

    def _rows(self) -> str:
        """'3 classes x 4', or with a row of images without boxes, '3 classes + no
        boxes x 4'."""
        rows = count(len(self.classes), "class", "classes")
        return f"{rows}{f' + {NO_BOXES}' if self.no_boxes else ''} x {self.grid[1]}"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str:
        return (f"<figure style='margin:0'><img src='{png_data_uri(self)}' "
                f"width='{self.width}' height='{self.height}'>"
                f"<figcaption>{html.escape(self.caption())}</figcaption></figure>")


def show(path: str | os.PathLike, split: str = "train", per_class: int = 8, *,
         thumbnail_size: int = 128,
         classes: Sequence[str | int] | None = None) -> ContactSheet:
    """A contact sheet of a split's images: one row per class, its first `per_class`
    images in the order the shards hold them, each captioned with its file name (and a
    multi-label record's other labels). Each row's header counts its images in the
    split ("12 images"), or says there are none ("none in validation"). As wide as its
    fullest row: a class of two images leaves no room for eight. Reads no more records
    than that takes, and never imports TensorFlow.

    A detection record shows in the row of each class it has a box of, with every box
    drawn in its class's colour (`class_colour`) and named; images without boxes have a
    row of their own, "no boxes", after the classes (unless `classes` chooses the rows).
    Instance masks and a segmentation record's class mask are drawn as translucent
    colours over the image, outlined in a darker shade (`drawing.draw_masks`), and a
    segmentation sheet has a legend of its masks' class ids under its rows.

    Args:
        path: the dataset folder: local, or a gs://, s3:// (or other fsspec) URI.
        split: "train", "validation" or "test".
        per_class: images per row. A multi-label record shows in the row of each of its
            classes. A dataset without labels (segmentation too) has one row, named
            after the split.
        thumbnail_size: the largest side of a thumbnail, in pixels.
        classes: the class names of the rows to show, in this order; by default all, or
            the first `MAX_ROWS` (50) of a dataset of more.

    Returns:
        A Pillow image (`.save("sheet.png")`; notebooks display it), with `items`, what
        each thumbnail shows and where it was read. An image that cannot be decoded is
        a grey cell saying so, and its item's `problem` says why.
    """
    sampled = _sample(os.fspath(path), split, per_class, thumbnail_size, classes,
                      no_boxes=True)
    rows = sampled.titled_rows()
    columns = max((len(row_thumbnails) for *_, row_thumbnails in rows), default=0)
    others = any(_other_labels(title, thumbnail) for title, _, row_thumbnails in rows
                 for thumbnail in row_thumbnails)
    layout = Layout(thumbnail_size, caption_lines=2 if others else 1)
    text_font = font(layout.font_size)
    layout = replace(layout, header_text=max(
        (text_font.getlength(text) for title, caption, _ in rows for text in (title, caption)),
        default=0))
    width, height = layout.size(len(rows), columns)
    legend, legend_height = place_legend(
        sorted({class_id for *_, row_thumbnails in rows for thumbnail in row_thumbnails
                for class_id in thumbnail.mask_classes}),
        height, width, layout.font_size, layout.padding)
    image = Image.new("RGB", (width, height + legend_height), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    for row, titled in enumerate(rows):
        _draw_row(image, draw, layout, row, *titled)
    if legend:
        draw.line([(0, height), (width, height)], fill=_RULE)
        draw_legend(draw, legend, height, layout.font_size, layout.padding)
    items = [thumbnail.item for *_, row_thumbnails in rows for thumbnail in row_thumbnails]
    return ContactSheet.of(image, items=items, classes=tuple(sampled.rows),
                           grid=(len(rows), columns), split_name=sampled.split,
                           layout=layout, no_boxes=sampled.no_boxes, legend=legend)


def thumbnails(path: str | os.PathLike, split: str = "train", per_class: int = 8,
               size: int = 128, *,
               classes: Sequence[str | int] | None = None) -> list[Thumbnail]:
    """The thumbnails `show` lays out, class by class (a multi-label record once per
    class, sharing one image), for pages that lay them out themselves. (Not a detection
    sheet's images without boxes: they belong to no class.)"""
    rows = _sample(os.fspath(path), split, per_class, size, classes).rows
    return [thumbnail for row_thumbnails in rows.values() for thumbnail in row_thumbnails]


# --- sampling ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Sample:
    """What `_sample` read of a split: each row's thumbnails, a detection split's images
    without boxes (None: no such row), and how many images each row has in the split,
    as the writer counted them (None: not counted, in manifests from before)."""

    split: str
    rows: dict[str, list[Thumbnail]]
    without_boxes: list[Thumbnail] | None = None
    counts: dict[str, int] | None = None
    without_boxes_counted: int | None = None

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
        return count(counted, "image") if counted else f"none in {self.split}"


def _sample(path: str, split: str, per_class: int, size: int,
            classes: Sequence[str | int] | None, no_boxes: bool = False) -> _Sample:
    """Each row's name with up to `per_class` thumbnails: the first records of its class,
    read shard by shard until every row is full; with `no_boxes` (and every class's row),
    a detection split's first images without boxes too."""
    _check_positive(per_class=per_class, thumbnail_size=size)
    manifest = read_manifest(path)
    if not manifest.has_images:
        raise OptionError(f"the dataset in {path!r} has no images to show: it was written "
                          "from a table without an image column. Read its records with "
                          "tfrecorder.load or tfrecorder.inspect.", option="path")
    shards = manifest.split(split, path).shards
    reader = RecordReader(manifest)
    class_names = reader.class_names
    rows: dict[str, list[Thumbnail]] = {name: [] for name in _rows(class_names, classes,
                                                                   split)}
    counts = _counted(manifest, split, class_names)
    wanted = {name: min(per_class, counts.get(name, per_class)) if counts else per_class
              for name in rows}
    without_counted = _without_boxes(manifest, split)
    without_wanted = 0
    if no_boxes and reader.detection and classes is None:
        without_wanted = min(per_class, per_class if without_counted is None else without_counted)
    without: list[Thumbnail] = []
    missing = sum(wanted.values()) + without_wanted
    if not missing:  # no shard need be opened
        return _Sample(split, rows, None, counts, without_counted)
    records = _records(path, [s.file for s in shards], manifest.compression)
    with contextlib.closing(records):  # a shard is opened when its first record is asked
        for shard, index, features in records:
            values = reader.read(features)
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
    return _Sample(split, rows, without or None, counts, without_counted)


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


def _records(path: str, shard_files: Iterable[str],
             compression: str | None) -> Iterator[tuple[str, int, dict[str, list]]]:
    """(shard file, index in the shard, features) of each record, shard by shard; a
    shard is opened only when the records before it were not enough."""
    for file in shard_files:
        with open_read(fs.join(path, file), compression) as stream:
            for index, record in enumerate(read_records(stream)):
                yield file, index, decode_example(record)


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


class RecordReader:
    """A record's canonical values from its features as stored (`decode_example`'s dict
    of lists), for the manifest's layout, in pure Python (no TensorFlow): the layout's
    read form (`Layout.values`) names them; nothing here names a layout."""

    def __init__(self, manifest: Manifest):
        self.layout = layout_of(manifest)
        labels = manifest.labels
        self.class_names = labels.class_names if labels is not None else ()
        self.detection = manifest.task == "detection"

    def read(self, features: dict[str, list]) -> RecordValues:
        values = self.layout.values(features)
        image = {name: values[name][0] for name in IMAGE_FEATURES if values.get(name)}
        names = self.class_names
        ids = tuple(values.get(OBJECT_LABEL if self.detection else LABEL, ()))
        known = tuple(i for i in ids if 0 <= i < len(names))
        objects = ()
        if self.detection:
            flat = values.get(BBOX, [])
            corners = [tuple(float(v) for v in flat[i:i + 4])
                       for i in range(0, len(flat) - 3, 4)]
            objects = tuple(
                Box(*box, ids[i] if i < len(ids) else None,
                    names[ids[i]] if i < len(ids) and 0 <= ids[i] < len(names) else None)
                for i, box in enumerate(corners))
        segmentation = values.get(SEGMENTATION_MASK)
        return RecordValues(
            image, _text(image.get("image_name", b"")), known,
            tuple(names[i] for i in known), objects, tuple(values.get(MASK, ())),
            segmentation[0] if segmentation else None)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


# --- decoding ------------------------------------------------------------------------------

# What Pillow raises for bytes it cannot decode: many types, so a broad but named set.
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, TypeError,
                  binascii.Error, Image.DecompressionBombError)


def record_thumbnail(values: RecordValues, size: int) -> tuple[Image.Image, str]:
    """The image of a record (`RecordReader.read`'s values), RGB, at most `size` a side,
    with its masks drawn over it; or a placeholder and why not. The report draws
    duplicates with it too."""
    try:
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


def draw_objects(image: Image.Image, objects: Sequence[Box], font_size: int) -> None:
    """Draws each box on `image` (in place) in its class's colour, with the class's name
    on a tag of that colour at its top left corner: above the box where there is room,
    else inside it."""
    if not objects:
        return
    draw = ImageDraw.Draw(image)
    box_font = font(font_size)
    width, height = image.size
    line = max(1, round(max(width, height) / 64))
    for box in objects:  # whole pixels: from the first the box covers to its last
        left, top = round(box.xmin * width), round(box.ymin * height)
        right, bottom = round(box.xmax * width) - 1, round(box.ymax * height) - 1
        draw.rectangle([left, top, max(left, right), max(top, bottom)], outline=box.colour,
                       width=line)
    for box in objects:  # the names last, over every outline
        if box.class_name is None:
            continue
        left, top = round(box.xmin * width), round(box.ymin * height)
        text = fit(box.class_name, box_font, max(width - left, 1))
        text_width, text_height = box_font.getlength(text) + 2, font_size + 1
        tag_top = top - text_height if top >= text_height else top
        draw.rectangle([left, tag_top, left + text_width, tag_top + text_height],
                       fill=box.colour)
        draw.text((left + 1, tag_top), text, fill="white", font=box_font)


def _on_white(image: Image.Image) -> Image.Image:
    """RGB; transparent pixels shown on the sheet's white, not as whatever colour they
    hide."""
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("RGBA", "LA", "PA"):
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, _BACKGROUND)
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert("RGB")


def _placeholder(size: int) -> Image.Image:
    image = Image.new("RGB", (size, size), _PLACEHOLDER)
    ImageDraw.Draw(image).text((size / 2, size / 2), "cannot decode", fill=_TEXT,
                               font=font(Layout(size).font_size), anchor="mm")
    return image


# --- drawing -------------------------------------------------------------------------------

def _draw_row(sheet: Image.Image, draw: ImageDraw.ImageDraw, layout: Layout, row: int,
              title: str, caption: str, row_thumbnails: list[Thumbnail]) -> None:
    """One row: its title (a class's name) at the left with its caption under it (its
    images in the split), then its thumbnails, each captioned with its file name and the
    labels it has besides the row's (the row's name is not repeated)."""
    text_font = font(layout.font_size)
    top = row * layout.cell_height
    if row:
        draw.line([(0, top), (sheet.width, top)], fill=_RULE)
    header_text = layout.header_width - 2 * layout.padding
    lines = [title, caption] if caption else [title]
    middle = top + layout.padding + layout.thumbnail_size / 2
    for line, text in enumerate(lines):
        y = middle + (line - (len(lines) - 1) / 2) * layout.line_height
        draw.text((layout.padding, y), fit(text, text_font, header_text), fill=_TEXT,
                  font=text_font, anchor="lm")
    text_width = layout.cell_width - 2 * layout.padding
    for column, thumbnail in enumerate(row_thumbnails):
        left, box_top, right, bottom = layout.thumbnail_box(row, column)
        image = thumbnail.image
        if thumbnail.objects:
            image = image.copy()
            draw_objects(image, thumbnail.objects, _box_font_size(layout.thumbnail_size))
        sheet.paste(image, (left + (layout.thumbnail_size - image.width) // 2,
                            box_top + (layout.thumbnail_size - image.height) // 2))
        others = _other_labels(title, thumbnail)
        lines = [thumbnail.image_name, *([f"also {', '.join(others)}"] if others else [])]
        for line, text in enumerate(lines):
            draw.text((left, bottom + layout.padding + line * layout.line_height),
                      fit(text, text_font, text_width), fill=_TEXT, font=text_font)


def _other_labels(row: str, thumbnail: Thumbnail) -> list[str]:
    """A record's labels besides its row's: a multi-label record's, a detection record's
    other classes."""
    return [label for label in thumbnail.labels if label != row]


def _box_font_size(thumbnail_size: int) -> int:
    """Class names on boxes: smaller than the captions, so a small box stays visible."""
    return max(8, Layout(thumbnail_size).font_size - 3)


def png_data_uri(image: Image.Image) -> str:
    """A Pillow image as a `data:` URI, for HTML that needs no other file (the contact
    sheet's, `info`'s thumbnail strip, the report)."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

"""`show()`: a contact sheet of a dataset's images, one row per class, without TensorFlow.
A detection record's boxes are drawn on its image with their classes' names, and
instance and segmentation masks as translucent colours over it, in either record layout.

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
from dataclasses import dataclass, field, fields

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from tfrecorder import fs
from tfrecorder.errors import OptionError
from tfrecorder.example import decode_example
from tfrecorder.layouts import BBOX, MASK, OBJECT_LABEL, SEGMENTATION_MASK, layout_of
from tfrecorder.legacy import spellings
from tfrecorder.manifest import (
    BASE64_ALTCHARS,
    IMAGE_FEATURES,
    LABEL,
    Manifest,
    Split,
    read_manifest,
)
from tfrecorder.tfrecord import open_read, read_records
from tfrecorder.wording import shown

logger = logging.getLogger(__name__)

# Rows shown unless `classes` names them: a sheet of 1000 classes would be a picture some
# 180,000 pixels tall, and would read 8 records of every class to draw it.
MAX_ROWS = 50
_RAW_MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # raw pixels' channels -> Pillow mode
_BACKGROUND, _TEXT, _RULE, _PLACEHOLDER = "white", "#222222", "#dddddd", "#c8c8c8"
# A class's colour (boxes, masks): Tableau 10 without its grey, which marks a box without
# a class. Detection class id i takes CLASS_COLOURS[i % 9]; a segmentation mask's class
# id k (0 is the background, not drawn) CLASS_COLOURS[(k - 1) % 9], so that masks drawn
# as 1 + the class id colour as their boxes do.
CLASS_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f")
NO_CLASS_COLOUR = "#bab0ac"
MASK_OPACITY = 0.45  # of a mask's colour over the image


def class_colour(class_id: int | None) -> str:
    """The colour of a detection class id's boxes and masks (`CLASS_COLOURS`)."""
    return NO_CLASS_COLOUR if class_id is None else CLASS_COLOURS[class_id % len(CLASS_COLOURS)]


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

    @property
    def item(self) -> Item:
        return Item(**{f.name: getattr(self, f.name) for f in fields(Item)})


@dataclass(frozen=True)
class Layout:
    """Where things go on a sheet: a header column of class names, then cells of a
    thumbnail with its caption under it: its file name, and on a second line (on sheets
    that need one) the record's other labels."""

    thumbnail_size: int
    caption_lines: int = 1

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
        return self.cell_width

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
        grid: (rows, columns).
        split_name: the split shown. (Not `split`, which is Pillow's method for bands.)
        layout: where each row and thumbnail is (`Layout.thumbnail_box`).
    """

    items: list[Item]
    classes: tuple[str, ...]
    grid: tuple[int, int]
    split_name: str
    layout: Layout

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
                for name in ("items", "classes", "grid", "split_name", "layout")}

    def __getstate__(self) -> list:
        return [*super().__getstate__(), self._attributes()]

    def __setstate__(self, state: list) -> None:
        super().__setstate__(state[:-1])
        self.__dict__.update(state[-1])

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and self._attributes() == other._attributes()

    def caption(self) -> str:
        rows, columns = self.grid
        names = ", ".join(self.classes[:10]) + (", ..." if rows > 10 else "")
        return (f"{self.split_name}: {len(self.items)} images; {rows} "
                f"{'class' if rows == 1 else 'classes'} x {columns}: {names}")

    def __repr__(self) -> str:
        rows, columns = self.grid
        return (f"<ContactSheet {self.split_name}: {len(self.items)} images, {rows} "
                f"{'class' if rows == 1 else 'classes'} x {columns}, "
                f"{self.width}x{self.height}>")

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
    multi-label record's other labels). As wide as its fullest row: a class of two
    images leaves no room for eight. Reads no more records than that takes, and never
    imports TensorFlow.

    A detection record shows in the row of each class it has a box of, with every box
    drawn in its class's colour (`class_colour`) and named; instance masks and a
    segmentation record's class mask are drawn as translucent colours over the image.

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
    split, rows = _sample(os.fspath(path), split, per_class, thumbnail_size, classes)
    columns = max(map(len, rows.values()), default=0)
    others = any(_other_labels(name, thumbnail) for name, row_thumbnails in rows.items()
                 for thumbnail in row_thumbnails)
    layout = Layout(thumbnail_size, caption_lines=2 if others else 1)
    image = Image.new("RGB", layout.size(len(rows), columns), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = _font(layout.font_size)
    for row, (name, row_thumbnails) in enumerate(rows.items()):
        _draw_row(image, draw, layout, font, row, name, row_thumbnails)
    items = [thumbnail.item for row_thumbnails in rows.values() for thumbnail in row_thumbnails]
    return ContactSheet.of(image, items=items, classes=tuple(rows),
                           grid=(len(rows), columns), split_name=split, layout=layout)


def thumbnails(path: str | os.PathLike, split: str = "train", per_class: int = 8,
               size: int = 128, *,
               classes: Sequence[str | int] | None = None) -> list[Thumbnail]:
    """The thumbnails `show` lays out, class by class (a multi-label record once per
    class, sharing one image), for pages that lay them out themselves."""
    rows = _sample(os.fspath(path), split, per_class, size, classes)[1]
    return [thumbnail for row_thumbnails in rows.values() for thumbnail in row_thumbnails]


# --- sampling ------------------------------------------------------------------------------

def _sample(path: str, split: str, per_class: int, size: int,
            classes: Sequence[str | int] | None) -> tuple[str, dict[str, list[Thumbnail]]]:
    """The split's name, and each row's name with up to `per_class` thumbnails: the first
    records of its class, read shard by shard until every row is full."""
    _check_positive(per_class=per_class, thumbnail_size=size)
    manifest = read_manifest(path)
    if not manifest.has_images:
        raise OptionError(f"the dataset in {path!r} has no images to show: it was written "
                          "from a table without an image column. Read its records with "
                          "tfrecorder.load or tfrecorder.inspect.", option="path")
    split = spellings.split_name(split)
    shards = manifest.split(split, path).shards
    reader = RecordReader(manifest)
    class_names = reader.class_names
    rows: dict[str, list[Thumbnail]] = {name: [] for name in _rows(class_names, classes,
                                                                   split)}
    wanted = _wanted(manifest, split, class_names, list(rows), per_class)
    missing = sum(wanted.values())
    if not missing:  # no shard need be opened
        return split, rows
    records = _records(path, [s.file for s in shards], manifest.compression)
    with contextlib.closing(records):  # a shard is opened when its first record is asked
        for shard, index, features in records:
            values = reader.read(features)
            labels = tuple(dict.fromkeys(values.class_names))
            takers = [name for name in (labels if class_names else [split])
                      if len(rows.get(name, ())) < wanted.get(name, 0)]
            if not takers:
                continue
            image, problem = record_thumbnail(values, size)
            for name in takers:
                rows[name].append(Thumbnail(name if class_names else None, values.image_name,
                                            split, shard, index, labels, problem, image,
                                            objects=values.objects))
            missing -= len(takers)
            if not missing:
                break
    return split, rows


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


def _wanted(manifest: Manifest, split: str, class_names: tuple[str, ...],
            rows: list[str], per_class: int) -> dict[str, int]:
    """How many images each row can get: `per_class`, or fewer where the writer counted
    fewer records of the class in the split (so a rare class does not make the reader
    read to the end, looking for images that are not there): for detection, images
    holding an object of the class."""
    statistics = manifest.statistics.get(Split(split))
    counted = statistics and (statistics.objects.class_images if statistics.objects
                              else statistics.class_counts)
    if not counted or len(counted) != len(class_names):
        return dict.fromkeys(rows, per_class)
    counts = dict(zip(class_names, counted))
    return {name: min(per_class, counts.get(name, per_class)) for name in rows}


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
    """`image` with a record's masks over it, each in its class's colour at
    MASK_OPACITY: instance masks (one per object), or a segmentation mask's classes
    (class id 0, the background, left clear). Masks are decoded and shrunk to the
    thumbnail by nearest neighbour, so class ids stay ids."""
    if not values.masks and values.segmentation is None:
        return image
    size = image.size
    colours = np.zeros((size[1], size[0], 3), dtype=np.float32)
    covered = np.zeros((size[1], size[0]), dtype=bool)
    if values.segmentation is not None:
        ids = _mask_pixels(values.segmentation, size)
        for class_id in np.unique(ids[ids > 0]).tolist():
            where = ids == class_id
            colours[where] = _rgb(CLASS_COLOURS[(class_id - 1) % len(CLASS_COLOURS)])
            covered |= where
    for mask, box in zip(values.masks, values.objects):
        where = _mask_pixels(mask, size) > 0
        colours[where] = _rgb(box.colour)
        covered |= where
    pixels = np.asarray(image, dtype=np.float32)
    pixels[covered] = ((1 - MASK_OPACITY) * pixels[covered]
                       + MASK_OPACITY * colours[covered])
    return Image.fromarray(np.rint(pixels).astype(np.uint8), "RGB")


def _mask_pixels(data: bytes, size: tuple[int, int]) -> np.ndarray:
    """A stored mask (a PNG of 0s and 1s, or of class ids) at `size` (width, height)."""
    mask = Image.open(io.BytesIO(data), formats=["PNG"])
    if mask.size != size:
        mask = mask.resize(size, Image.Resampling.NEAREST)
    return np.asarray(mask)


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def draw_objects(image: Image.Image, objects: Sequence[Box], font_size: int) -> None:
    """Draws each box on `image` (in place) in its class's colour, with the class's name
    on a tag of that colour at its top left corner: above the box where there is room,
    else inside it."""
    if not objects:
        return
    draw = ImageDraw.Draw(image)
    font = _font(font_size)
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
        text = _fit(box.class_name, font, max(width - left, 1))
        text_width, text_height = font.getlength(text) + 2, font_size + 1
        tag_top = top - text_height if top >= text_height else top
        draw.rectangle([left, tag_top, left + text_width, tag_top + text_height],
                       fill=box.colour)
        draw.text((left + 1, tag_top), text, fill="white", font=font)


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
                               font=_font(Layout(size).font_size), anchor="mm")
    return image


# --- drawing -------------------------------------------------------------------------------

def _draw_row(sheet: Image.Image, draw: ImageDraw.ImageDraw, layout: Layout, font,
              row: int, name: str, row_thumbnails: list[Thumbnail]) -> None:
    """One class: its name at the left, its thumbnails, each captioned with its file name
    and the labels it has besides the row's (the row's name is not repeated)."""
    top = row * layout.cell_height
    if row:
        draw.line([(0, top), (sheet.width, top)], fill=_RULE)
    text_width = layout.cell_width - 2 * layout.padding
    draw.text((layout.padding, top + layout.padding + layout.thumbnail_size / 2),
              _fit(name, font, text_width), fill=_TEXT, font=font, anchor="lm")
    for column, thumbnail in enumerate(row_thumbnails):
        left, box_top, right, bottom = layout.thumbnail_box(row, column)
        image = thumbnail.image
        if thumbnail.objects:
            image = image.copy()
            draw_objects(image, thumbnail.objects, _box_font_size(layout.thumbnail_size))
        sheet.paste(image, (left + (layout.thumbnail_size - image.width) // 2,
                            box_top + (layout.thumbnail_size - image.height) // 2))
        others = _other_labels(name, thumbnail)
        lines = [thumbnail.image_name, *([f"also {', '.join(others)}"] if others else [])]
        for line, text in enumerate(lines):
            draw.text((left, bottom + layout.padding + line * layout.line_height),
                      _fit(text, font, text_width), fill=_TEXT, font=font)


def _other_labels(row: str, thumbnail: Thumbnail) -> list[str]:
    """A record's labels besides its row's: a multi-label record's, a detection record's
    other classes."""
    return [label for label in thumbnail.labels if label != row]


def _box_font_size(thumbnail_size: int) -> int:
    """Class names on boxes: smaller than the captions, so a small box stays visible."""
    return max(8, Layout(thumbnail_size).font_size - 3)


def _fit(text: str, font, width: int) -> str:
    """`text` on one line of at most `width` pixels: shortened in the middle with an
    ellipsis, which keeps a file name's end (its number and extension) readable."""
    text = "".join(c if c.isprintable() else "?" for c in text)  # no line breaks
    if font.getlength(text) <= width:
        return text
    keep_low, keep_high = 0, len(text)  # how many characters fit around the ellipsis
    while keep_low < keep_high:
        keep = (keep_low + keep_high + 1) // 2
        if font.getlength(_middle_cut(text, keep)) <= width:
            keep_low = keep
        else:
            keep_high = keep - 1
    return _middle_cut(text, keep_low)


def _middle_cut(text: str, keep: int) -> str:
    head = (keep + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - head):]


def png_data_uri(image: Image.Image) -> str:
    """A Pillow image as a `data:` URI, for HTML that needs no other file (the contact
    sheet's, `info`'s thumbnail strip, the report)."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@functools.cache
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)

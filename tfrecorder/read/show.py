"""`show()`: a contact sheet of a dataset's images, one row per class, without TensorFlow.
A detection record's boxes are drawn on its image with their classes' names, and
instance and segmentation masks as translucent, outlined colours over it, in either record
layout. The thumbnails come from `tfrecorder.read.thumbnails` (which reads the records);
colours, boxes, text and the legend are drawn by `tfrecorder.read.drawing`; this module lays
them out on the sheet (`SheetGeometry`).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from PIL import Image, ImageDraw

from tfrecorder.read.drawing import (  # noqa: F401  (the colours and boxes, as tfrecorder.show names them)
    BACKGROUND,
    CLASS_COLOURS,
    MASK_OPACITY,
    NO_CLASS_COLOUR,
    TEXT,
    LegendEntry,
    caption_font_size,
    class_colour,
    draw_legend,
    draw_objects,
    fit,
    font,
    mask_colour,
    place_legend,
    png_data_uri,
)
from tfrecorder.read.thumbnails import (  # noqa: F401  (thumbnails: documented as show's)
    NO_BOXES,
    Item,
    Thumbnail,
    sample,
    thumbnails,
)
from tfrecorder.wording import count

_RULE = "#dddddd"


@dataclass(frozen=True)
class SheetGeometry:
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
        return caption_font_size(self.thumbnail_size)

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
        layout: where each row and thumbnail is (`SheetGeometry.thumbnail_box`).
        no_boxes: a detection sheet's images without boxes in the split, shown in its
            last row (their items' `class_name` is None); 0 on other sheets.
        legend: a segmentation sheet's mask classes, under its rows: each class id's
            colour and where its swatch is.
    """

    items: list[Item]
    classes: tuple[str, ...]
    grid: tuple[int, int]
    split_name: str
    layout: SheetGeometry
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
    sampled = sample(os.fspath(path), split, per_class, thumbnail_size, classes,
                      no_boxes=True)
    rows = sampled.titled_rows()
    columns = max((len(row_thumbnails) for *_, row_thumbnails in rows), default=0)
    others = any(_other_labels(title, thumbnail) for title, _, row_thumbnails in rows
                 for thumbnail in row_thumbnails)
    layout = SheetGeometry(thumbnail_size, caption_lines=2 if others else 1)
    text_font = font(layout.font_size)
    layout = replace(layout, header_text=max(
        (text_font.getlength(text) for title, caption, _ in rows for text in (title, caption)),
        default=0))
    width, height = layout.size(len(rows), columns)
    legend, legend_height = place_legend(
        sorted({class_id for *_, row_thumbnails in rows for thumbnail in row_thumbnails
                for class_id in thumbnail.mask_classes}),
        height, width, layout.font_size, layout.padding)
    image = Image.new("RGB", (width, height + legend_height), BACKGROUND)
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


# --- drawing -------------------------------------------------------------------------------

def _draw_row(sheet: Image.Image, draw: ImageDraw.ImageDraw, layout: SheetGeometry, row: int,
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
        draw.text((layout.padding, y), fit(text, text_font, header_text), fill=TEXT,
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
                      fit(text, text_font, text_width), fill=TEXT, font=text_font)


def _other_labels(row: str, thumbnail: Thumbnail) -> list[str]:
    """A record's labels besides its row's: a multi-label record's, a detection record's
    other classes."""
    return [label for label in thumbnail.labels if label != row]


def _box_font_size(thumbnail_size: int) -> int:
    """Class names on boxes: smaller than the captions, so a small box stays visible."""
    return max(8, caption_font_size(thumbnail_size) - 3)

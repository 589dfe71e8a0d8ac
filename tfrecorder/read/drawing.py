"""Pillow drawing shared by `show`'s sheets, the report's thumbnails and `info`'s strip:
the classes' colours, the outline that keeps a mask visible on any photo, boxes with
their classes' names, fitted text, the legend from a segmentation sheet's colours to its
class ids, and an image as a `data:` URI for pages that need no other file.

A mask is drawn as Detectron2's `Visualizer` draws one: its class's colour blended over
the image, and an opaque outline in a darker shade of that colour. The blend alone
vanishes where the photo is the class's colour (a blue car under blue); the outline then
stands out, and where the photo is as dark as the outline, the blend does.
"""

from __future__ import annotations

import base64
import colorsys
import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

# A class's colour (boxes, masks): Tableau 10 without its grey, which marks a box without
# a class. Detection class id i takes CLASS_COLOURS[i % 9]; a segmentation mask's class
# id k (0 is the background, not drawn) CLASS_COLOURS[(k - 1) % 9], so that masks drawn
# as 1 + the class id colour as their boxes do.
CLASS_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f")
NO_CLASS_COLOUR = "#bab0ac"
MASK_OPACITY = 0.45  # of a mask's colour over the image
# A mask's outline keeps this share of its colour's lightness (Detectron2 darkens its
# masks' edges by 70%), so it differs from a photo of the mask's own colour.
EDGE_LIGHTNESS = 0.3
LEGEND_TITLE = "mask class ids:"
TEXT, BACKGROUND = "#222222", "white"  # of captions and titles; of a sheet


def class_colour(class_id: int | None) -> str:
    """The colour of a detection class id's boxes and masks (`CLASS_COLOURS`)."""
    return NO_CLASS_COLOUR if class_id is None else CLASS_COLOURS[class_id % len(CLASS_COLOURS)]


def mask_colour(class_id: int) -> str:
    """The colour of a segmentation mask's class id (1 or more: 0 is not drawn)."""
    return class_colour(class_id - 1)


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def edge_colour(colour: str) -> tuple[int, int, int]:
    """The outline of a mask of `colour`: the same hue, EDGE_LIGHTNESS as light."""
    hue, lightness, saturation = colorsys.rgb_to_hls(*(v / 255 for v in rgb(colour)))
    return tuple(round(v * 255) for v in colorsys.hls_to_rgb(
        hue, EDGE_LIGHTNESS * lightness, saturation))


def outlines(owners: np.ndarray, width: int) -> np.ndarray:
    """The pixels of each region of `owners` (an int array, -1 where no mask is) within
    `width` pixels of its edge with another region or none. Not along the image's border:
    the region goes on beyond it, for all the picture tells."""
    covered = owners >= 0
    inner = covered.copy()
    for _ in range(width):
        padded = np.pad(np.where(inner, owners, -1), 1, mode="edge")
        same = [padded[1 + dy:padded.shape[0] - 1 + dy, 1 + dx:padded.shape[1] - 1 + dx]
                == owners for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1))]
        inner &= np.logical_and.reduce(same)
    return covered & ~inner


def draw_masks(image: Image.Image, owners: np.ndarray, colours: Sequence[str]) -> Image.Image:
    """`image` (RGB) with regions over it: `owners` holds each pixel's region (an index
    into `colours`; -1: none), drawn in its colour at MASK_OPACITY and outlined by a line
    of its `edge_colour`, a pixel wide on a thumbnail of 128 pixels (two on one of 256)."""
    if not colours:
        return image
    fills = np.asarray([rgb(colour) for colour in colours], dtype=np.float32)
    edges = np.asarray([edge_colour(colour) for colour in colours], dtype=np.float32)
    pixels = np.asarray(image, dtype=np.float32).copy()
    covered = owners >= 0
    pixels[covered] = ((1 - MASK_OPACITY) * pixels[covered]
                       + MASK_OPACITY * fills[owners[covered]])
    edge = outlines(owners, max(1, round(max(image.size) / 128)))
    pixels[edge] = edges[owners[edge]]
    return Image.fromarray(np.rint(pixels).astype(np.uint8), "RGB")


# --- text ----------------------------------------------------------------------------------

def caption_font_size(thumbnail_size: int) -> int:
    """The font size of captions under thumbnails `thumbnail_size` pixels a side."""
    return min(14, max(9, thumbnail_size // 10))


@functools.cache
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def fit(text: str, text_font, width: int) -> str:
    """`text` on one line of at most `width` pixels: shortened in the middle with an
    ellipsis, which keeps a file name's end (its number and extension) readable."""
    text = "".join(c if c.isprintable() else "?" for c in text)  # no line breaks
    if text_font.getlength(text) <= width:
        return text
    keep_low, keep_high = 0, len(text)  # how many characters fit around the ellipsis
    while keep_low < keep_high:
        keep = (keep_low + keep_high + 1) // 2
        if text_font.getlength(_middle_cut(text, keep)) <= width:
            keep_low = keep
        else:
            keep_high = keep - 1
    return _middle_cut(text, keep_low)


def _middle_cut(text: str, keep: int) -> str:
    head = (keep + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - head):]


# --- the legend ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LegendEntry:
    """A class of a segmentation sheet's masks: its id, its label's text, its colour
    (`mask_colour`) and where its swatch is on the sheet (left, top, right, bottom)."""

    class_id: int
    text: str
    colour: str
    swatch: tuple[int, int, int, int]


def place_legend(class_ids: Sequence[int], top: int, width: int, font_size: int,
                 padding: int) -> tuple[tuple[LegendEntry, ...], int]:
    """The entries of a legend under a sheet's rows, from `top`, after its title, left to
    right and on as many lines as `width` takes; and the legend's height (0 without
    entries)."""
    if not class_ids:
        return (), 0
    text_font, side = font(font_size), font_size
    line_height, gap, spacing = font_size + padding, max(3, font_size // 3), font_size * 3 // 2
    x, y = padding + text_font.getlength(LEGEND_TITLE) + spacing, top + padding
    entries = []
    for class_id in class_ids:
        text = str(class_id)
        needed = side + gap + text_font.getlength(text)
        if x + needed > width - padding and x > padding:
            x, y = padding, y + line_height
        left = round(x)
        entries.append(LegendEntry(class_id, text, mask_colour(class_id),
                                   (left, y, left + side, y + side)))
        x += needed + spacing
    return tuple(entries), y + line_height + padding - top


def draw_legend(draw: ImageDraw.ImageDraw, entries: Sequence[LegendEntry], top: int,
                font_size: int, padding: int) -> None:
    """The legend `place_legend` placed from `top`: its title, then each class's swatch,
    filled and outlined as its masks are, with its id beside it."""
    text_font, gap = font(font_size), max(3, font_size // 3)
    draw.text((padding, top + padding + font_size / 2), LEGEND_TITLE, fill=TEXT,
              font=text_font, anchor="lm")
    for entry in entries:
        left, top, right, bottom = entry.swatch
        draw.rectangle([left, top, right - 1, bottom - 1], fill=entry.colour,
                       outline=edge_colour(entry.colour))
        draw.text((right + gap, (top + bottom) / 2), entry.text, fill=TEXT, font=text_font,
                  anchor="lm")


# --- boxes ---------------------------------------------------------------------------------

def draw_objects(image: Image.Image, objects: Sequence, font_size: int) -> None:
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


def png_data_uri(image: Image.Image) -> str:
    """A Pillow image as a `data:` URI, for HTML that needs no other file (the contact
    sheet's, `info`'s thumbnail strip, the report)."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

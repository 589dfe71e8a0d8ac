"""Which view of an EXIF-oriented image a record stores, and its annotations turned to
match it.

A phone stores a photo taken sideways as the sensor read it, with an EXIF orientation
(tag 0x0112: 2 to 8) that tells viewers how to turn it. Labelling tools (Ultralytics,
CVAT, Roboflow, browsers) show it turned, and their boxes describe that *shown* view;
TensorFlow's decoders ignore the tag and give the *stored* view. A record whose pixels
are one view and whose boxes describe the other puts every box off its object. Which
view a record stores is the `orientation` option's (`ImageOptions`):

- "shown": the pixels turned as viewers show them (re-encoded); "stored": as the file
  stores them (its bytes kept where they can be).
- "auto": a detection image is stored in the view its annotation describes, so its
  boxes are written as given; a classification image is kept as it is, as before this
  option (its bytes, EXIF and all, or pixels as stored where it is re-encoded).

The view an annotation describes is told by the size it states (a Pascal VOC `<size>`, a
COCO image's `width` and `height`, `Row.annotated_size`): the stored size, or the shown
one (width and height swapped for orientations 5 to 8). Where both are the same (a
square image, or orientations 2 to 4, which do not swap sides) the size cannot tell: the
image is taken as labelled in the shown view, as the tools show it, and counted
`ambiguous`. A source that states no size (YOLO, whose Ultralytics labels the shown
view; Vertex JSONL; AutoML CSV; DataFrames) is taken as labelled in the shown view. A
stated size that is neither view rejects the image, naming the sizes: its boxes would
fit no pixels. Images without an orientation (or orientation 1) are never compared: a
size that differs there is an image resized after labelling, whose relative boxes still
fit.

Called by `records.encode_row` in the worker; imports neither TensorFlow nor Beam.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
from PIL import Image

from tfrecorder.format.image_checks import ImageRejected, jpeg_header
from tfrecorder.format.layouts import BBOX, KEYPOINT_VISIBILITY, KEYPOINTS
from tfrecorder.format.manifest import SIGNATURES
from tfrecorder.write.rows import AMBIGUOUS, TURNED_BOXES, TURNED_PIXELS

ORIENTATION_TAG = 0x0112  # EXIF's Orientation
_T = Image.Transpose
# Pillow's transpose that turns the stored pixels into the shown view, by orientation
# (as `PIL.ImageOps.exif_transpose`).
TRANSPOSES = {2: _T.FLIP_LEFT_RIGHT, 3: _T.ROTATE_180, 4: _T.FLIP_TOP_BOTTOM,
              5: _T.TRANSPOSE, 6: _T.ROTATE_270, 7: _T.TRANSVERSE, 8: _T.ROTATE_90}
# The orientation whose turn undoes each one's: 6 and 8 (a quarter turn each way) undo
# each other; the others (flips, a half turn) undo themselves.
INVERSE = {2: 2, 3: 3, 4: 4, 5: 5, 6: 8, 7: 7, 8: 6}
SWAPS_SIDES = frozenset((5, 6, 7, 8))  # the shown view's width is the stored height
MIRRORED = frozenset((2, 4, 5, 7))
NAMES = {2: "mirrored", 3: "upside down", 4: "mirrored upside down",
         5: "mirrored, turned a quarter", 6: "turned a quarter clockwise",
         7: "mirrored, turned a quarter", 8: "turned a quarter anticlockwise"}



class Turn(NamedTuple):
    """What becomes of one oriented image: its EXIF orientation; whether its pixels are
    turned to the shown view; the orientation whose turn takes its annotation's view to
    the stored pixels' (0: none, the annotation describes the pixels stored); whether the
    view was a guess."""

    orientation: int
    pixels: bool
    boxes: int
    ambiguous: bool = False

    @property
    def flags(self) -> int:
        return ((TURNED_PIXELS if self.pixels else 0) | (TURNED_BOXES if self.boxes else 0)
                | (AMBIGUOUS if self.ambiguous else 0))


def exif_orientation(data: bytes) -> tuple[int, tuple[int, int]]:
    """The image's EXIF orientation (1 without one, or with a value outside 1..8) and its
    stored (width, height), from its header. A JPEG's is read from its Exif segment
    directly (`_jpeg_orientation`: 5 us where Pillow's `getexif` took 150, a quarter of
    the rest of a detection image's work); other formats, and a JPEG whose orientation
    only XMP gives, through Pillow, which reads no pixels for it."""
    if data.startswith(SIGNATURES["jpeg"]):
        header = jpeg_header(data)
        found = _jpeg_orientation(data, header.segments)
        if found is not None:
            return found, (header.width, header.height)
    with Image.open(io.BytesIO(data)) as image:
        value = image.getexif().get(ORIENTATION_TAG, 1)
        return (value if isinstance(value, int) and 1 <= value <= 8 else 1), image.size


_EXIF = b"Exif\0\0"
_XMP = b"http://ns.adobe.com/xap/1.0/"
_APP1 = 0xE1


def _jpeg_orientation(data: bytes, segments) -> int | None:
    """The orientation in a JPEG's first Exif segment (APP1: a TIFF header, then IFD0's
    12-byte entries), as Pillow's `getexif` reads it: 1 for one outside 1..8, or where
    there is none and no XMP; None where Pillow must decide (none in Exif but an XMP
    segment, whose tiff:Orientation Pillow takes; or an Exif segment too short or strange
    to read here)."""
    xmp = any(marker == _APP1 and data.startswith(_XMP, offset + 4)
              for marker, offset in segments)
    start = next((offset + 4 for marker, offset in segments
                  if marker == _APP1 and data.startswith(_EXIF, offset + 4)), None)
    if start is None:
        return None if xmp else 1
    tiff = start + len(_EXIF)
    order = {b"II": "<", b"MM": ">"}.get(data[tiff:tiff + 2])
    try:
        if order is None or struct.unpack_from(order + "H", data, tiff + 2)[0] != 42:
            return None
        ifd = tiff + struct.unpack_from(order + "I", data, tiff + 4)[0]
        for k in range(struct.unpack_from(order + "H", data, ifd)[0]):
            tag, kind, number = struct.unpack_from(order + "HHI", data, ifd + 2 + 12 * k)
            if tag == ORIENTATION_TAG:
                if kind != 3 or number != 1:  # not one SHORT: Pillow's reading decides
                    return None
                value = struct.unpack_from(order + "H", data, ifd + 2 + 12 * k + 8)[0]
                return value if 1 <= value <= 8 else 1
    except struct.error:
        return None
    # None in IFD0: Pillow then looks for XMP's tiff:Orientation, in its own APP1 segment
    return None if xmp else 1


def applies(mode: str, detection: bool) -> bool:
    """Whether an image's EXIF orientation is read at all: not for a classification
    image under "auto" or "stored", which is kept as it is (and pays nothing for it)."""
    return detection or mode == "shown"


def decided(data: bytes, mode: str, detection: bool,
            annotated_size: tuple[int, int] | None) -> Turn | None:
    """What becomes of an image of `data` under the `orientation` option `mode` (None:
    nothing), where it `applies`. `detection`: the row has boxes, whose view matters;
    `annotated_size` the (height, width) its annotation states. Raises ImageRejected
    where the stated size is neither view's."""
    orientation, (width, height) = exif_orientation(data)
    if orientation == 1:
        return None
    if not detection:
        return Turn(orientation, pixels=True, boxes=0)
    stored = (height, width)
    shown = stored[::-1] if orientation in SWAPS_SIDES else stored
    ambiguous = False
    if annotated_size is None:
        view = "shown"  # the labelling tools' view (module docstring)
    else:
        annotated = tuple(annotated_size)
        if annotated not in (stored, shown):
            raise ImageRejected(
                f"its annotation states a size of {annotated[1]}x{annotated[0]} pixels "
                f"(width x height), but the image (EXIF orientation {orientation}: "
                f"{NAMES[orientation]}) is {width}x{height} as stored and "
                f"{shown[1]}x{shown[0]} as shown; its boxes fit neither view: correct "
                f"the annotation's size, or re-export the image")
        ambiguous = shown == stored
        view = "shown" if annotated == shown else "stored"
    kept = view if mode == "auto" else mode
    boxes = 0 if kept == view else orientation if kept == "shown" else INVERSE[orientation]
    return Turn(orientation, pixels=kept == "shown", boxes=boxes, ambiguous=ambiguous)


def turned_points(x: np.ndarray, y: np.ndarray, orientation: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Relative points (0 to 1) of one view, in the view `orientation`'s turn makes of
    it (stored -> shown for the orientation's own)."""
    return {2: (1 - x, y), 3: (1 - x, 1 - y), 4: (x, 1 - y), 5: (y, x), 6: (1 - y, x),
            7: (1 - y, 1 - x), 8: (y, 1 - x)}[orientation]


def turned_boxes(boxes, orientation: int) -> list[float]:
    """Relative [ymin, xmin, ymax, xmax] boxes turned by `orientation`'s turn: their
    corners turned, then sorted again; flat, as a record's values are."""
    corners = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    x, y = turned_points(corners[:, [1, 3]], corners[:, [0, 2]], orientation)
    return np.stack([y.min(axis=1), x.min(axis=1), y.max(axis=1), x.max(axis=1)],
                    axis=1).reshape(-1).tolist()


def turned_annotations(features: Mapping, turn: Turn) -> dict:
    """The features a turn of the boxes changes: the boxes, and the keypoints (those
    labelled; unlabelled ones stay at (0, 0)). Raises ImageRejected for keypoints of a
    mirrored orientation: a mirror would swap their left and right."""
    found = {BBOX: turned_boxes(features[BBOX], turn.boxes)}
    if KEYPOINTS in features and len(features[KEYPOINTS]):
        if turn.boxes in MIRRORED:
            raise ImageRejected(
                f"its EXIF orientation {turn.orientation} ({NAMES[turn.orientation]}) "
                f"mirrors the image, and its boxes describe the other view than the pixels "
                f"stored: its keypoints' left and right would swap. Store it with "
                f"orientation='auto', or remove the EXIF orientation")
        points = np.asarray(features[KEYPOINTS], dtype=np.float64)
        shape = points.shape
        points = points.reshape(-1, 2)  # [y, x] pairs
        x, y = turned_points(points[:, 1].copy(), points[:, 0].copy(), turn.boxes)
        labelled = np.asarray(features.get(KEYPOINT_VISIBILITY, np.ones(len(points))),
                              dtype=np.int64).reshape(-1) > 0
        points[:, 0] = np.where(labelled, y, points[:, 0])
        points[:, 1] = np.where(labelled, x, points[:, 1])
        found[KEYPOINTS] = points.reshape(shape).tolist()
    return found


def turned_mask(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """A mask (one value a pixel) turned by `orientation`'s turn, as Pillow turns the
    image."""
    return np.asarray(Image.fromarray(np.ascontiguousarray(pixels)).transpose(
        TRANSPOSES[orientation]))

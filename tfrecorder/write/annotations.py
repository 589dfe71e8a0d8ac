"""Annotations drawn on an image's pixels, stored at the stored image's size: COCO's
instance masks (polygons or run-length encoded), a segmentation row's class-id mask, and
the objects' areas. Boxes need nothing here: they are relative, so a resize keeps them
exact.

Called by `records.encode_row` once the image is encoded, in the worker; imports neither
TensorFlow nor Beam.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping

import numpy as np
from PIL import Image

from tfrecorder.format.image_checks import ImageRejected
from tfrecorder.format.layouts import AREA, MASK, SEGMENTATION_MASK
from tfrecorder.storage import fs, store_errors
from tfrecorder.write.orientation import SWAPS_SIDES, Turn, turned_mask
from tfrecorder.write.rows import Row


def drawn(row: Row, features: Mapping, source: tuple[int, int], stored: tuple[int, int],
          read_mask: Callable[[], bytes] | None = None, turn: Turn | None = None) -> dict:
    """The features a row's annotations add, for an image of `source` (height, width, as
    its file stores it) stored at `stored`: `objects/mask` (one PNG of 0s and 1s per
    object), a rescaled `objects/area`, or `segmentation_mask` (its file read by
    `read_mask`, a read started ahead, or now). Raises ImageRejected for a mask that does
    not fit its image.

    With a `turn` (`orientation`): instance masks are drawn in the view their annotation
    describes and turned as its boxes are; a class mask, of the file's stored pixels, is
    turned as the image is. Areas do not change with a turn."""
    found = {}
    if AREA in features and source != stored:  # pixels of the stored image
        scale = stored[0] * stored[1] / (source[0] * source[1])
        found[AREA] = [float(np.float32(area * scale)) for area in features[AREA]]
    if row.masks is not None:
        if turn is not None and turn.boxes:
            drawn_at = stored[::-1] if turn.boxes in SWAPS_SIDES else stored
            found[MASK] = [_png(turned_mask(mask, turn.boxes))
                           for mask in instance_masks(row.masks, drawn_at)]
        else:
            found[MASK] = [_png(mask) for mask in instance_masks(row.masks, stored)]
    if row.mask_uri is not None:
        found[SEGMENTATION_MASK] = _png(class_mask(
            row.mask_uri, source, stored, read_mask,
            turn.orientation if turn is not None and turn.pixels else None))
    return found


def instance_masks(masks: Mapping, size: tuple[int, int]) -> list[np.ndarray]:
    """Each object's mask, 0 or 1, at `size` (height, width): COCO polygons drawn at that
    size from coordinates scaled from the source image's (`masks["size"]`; None for
    polygons in fractions of the image's width and height, as YOLO-seg gives them); RLE
    decoded at its own size and resized by nearest neighbour."""
    source_height, source_width = masks["size"] or (1, 1)
    height, width = size
    found = []
    for mask in map(segmentation, masks["masks"]):
        if isinstance(mask, Mapping):  # run-length encoded
            pixels = rle_decode(mask)
            if pixels.shape != (height, width):
                pixels = np.asarray(Image.fromarray(pixels).resize(
                    (width, height), Image.Resampling.NEAREST))
            found.append(pixels)
            continue
        pixels = np.zeros((height, width), dtype=np.uint8)
        for polygon in mask:  # an object's polygons are one mask: their union
            points = np.asarray(polygon, dtype=np.float64).reshape(-1, 2)
            points *= (width / source_width, height / source_height)
            if len(points) >= 3:
                pixels |= _runs_to_mask(polygon_runs(points, height, width), height, width)
        found.append(pixels)
    return found


def segmentation(mask):
    """An object's COCO segmentation (polygons, or an RLE dict), from the JSON text a
    COCO file's reader keeps (`msgspec.Raw` or bytes: its floats are made only here, in
    the worker that draws it) or as given (a DataFrame's lists)."""
    import msgspec

    if isinstance(mask, (msgspec.Raw, bytes)):
        return msgspec.json.decode(mask)
    return mask


def polygon_runs(points: np.ndarray, height: int, width: int) -> list[int]:
    """The run lengths pycocotools' `frPyObjects` gives a polygon ([k, 2] x, y points in
    pixels) on an image of `height` x `width`: its C `rleFrPoly`, step for step, so a
    mask here is pixel for pixel the one COCO's own tools (and their evaluation) draw.
    Pillow's polygon fill differs: it fills the closing edges, one pixel wider and
    taller."""
    scale = 5.0
    x = np.trunc(scale * points[:, 0] + 0.5).astype(np.int64)
    y = np.trunc(scale * points[:, 1] + 0.5).astype(np.int64)
    x, y = np.append(x, x[0]), np.append(y, y[0])
    us, vs = [], []  # the boundary, densely, upsampled
    for j in range(len(points)):
        xs, xe, ys, ye = int(x[j]), int(x[j + 1]), int(y[j]), int(y[j + 1])
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            step = np.arange(dx + 1)
            t = dx - step if flip else step
            s = (ye - ys) / dx if dx else 0.0
            us.append(t + xs)
            vs.append(np.trunc(ys + s * t + 0.5).astype(np.int64))
        else:
            step = np.arange(dy + 1)
            t = dy - step if flip else step
            s = (xe - xs) / dy
            vs.append(t + ys)
            us.append(np.trunc(xs + s * t + 0.5).astype(np.int64))
    u, v = np.concatenate(us), np.concatenate(vs)
    # The points where the boundary crosses a column, downsampled.
    changed = np.nonzero(u[1:] != u[:-1])[0] + 1
    xd = np.where(u[changed] < u[changed - 1], u[changed], u[changed] - 1).astype(np.float64)
    xd = (xd + 0.5) / scale - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= width - 1)
    yd = np.minimum(v[changed], v[changed - 1]).astype(np.float64)
    yd = np.ceil(np.clip((yd + 0.5) / scale - 0.5, 0, height))
    starts = np.sort(np.append(xd[keep].astype(np.int64) * height
                               + yd[keep].astype(np.int64), height * width))
    differences = np.diff(starts, prepend=0).tolist()
    runs, j = [differences[0]], 1
    while j < len(differences):  # a zero-length run merges its neighbours
        if differences[j] > 0:
            runs.append(differences[j])
            j += 1
        else:
            j += 1
            if j < len(differences):
                runs[-1] += differences[j]
                j += 1
    return runs


def rle_decode(rle: Mapping) -> np.ndarray:
    """A COCO run-length encoded mask ({"size": [h, w], "counts": a list of run lengths,
    or COCO's compressed string}) as an h x w array of 0s and 1s. Runs alternate 0s and
    1s, starting with 0s, down the columns (Fortran order), as pycocotools writes them."""
    height, width = rle["size"]
    return _runs_to_mask(rle_runs(rle), height, width)


def rle_runs(rle: Mapping) -> list[int]:
    """An RLE mask's run lengths, from a list or COCO's compressed string."""
    counts = rle["counts"]
    return _compressed_runs(counts) if isinstance(counts, (str, bytes)) else list(counts)


def _runs_to_mask(runs: list[int], height: int, width: int) -> np.ndarray:
    values = np.zeros(height * width, dtype=np.uint8)
    position = 0
    for index, run in enumerate(runs):
        if index % 2:
            values[position:position + run] = 1
        position += run
    if position != height * width:
        raise ImageRejected(f"a run-length encoded mask covers {position} pixels, not "
                            f"{height}x{width}")
    return values.reshape((width, height)).T


def _compressed_runs(counts: str | bytes) -> list[int]:
    """pycocotools' compressed RLE string (`rleFrString`): each run in 5-bit groups of
    characters from '0', the sixth bit saying another group follows, and runs after the
    second stored as the difference from the run two before."""
    text = counts.decode() if isinstance(counts, bytes) else counts
    runs, position = [], 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            c = ord(text[position]) - 48
            value |= (c & 0x1F) << (5 * shift)
            more = bool(c & 0x20)
            position += 1
            shift += 1
            if not more and c & 0x10:
                value |= -1 << (5 * shift)
        if len(runs) > 2:
            value += runs[-2]
        runs.append(value)
    return runs


def class_mask(uri: str, source: tuple[int, int], stored: tuple[int, int],
               read: Callable[[], bytes] | None = None, turned: int | None = None
               ) -> np.ndarray:
    """A segmentation row's mask as class ids, checked to be its image's size, turned by
    its image's EXIF orientation `turned` where the image is (None: not), and resized, by
    nearest neighbour so its values stay class ids, to the stored image's. `read` gives
    the file's bytes (a read started ahead); by default it is read now."""
    try:
        data = read() if read is not None else fs.read_bytes(uri)
    except Exception as e:  # any I/O failure is this row's problem, not the run's
        raise ImageRejected(f"cannot read mask {uri!r}: {store_errors.answer(e)}") from None
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as e:
        raise ImageRejected(f"mask {uri!r} is not an image Pillow reads ({e})") from None
    if image.mode not in ("L", "P", "I", "I;16", "1"):
        raise ImageRejected(f"mask {uri!r} has {image.mode} pixels; a class mask has one "
                            f"channel of class ids (an 8- or 16-bit grey or palette PNG)")
    width, height = image.size
    if (height, width) != source:
        raise ImageRejected(f"mask {uri!r} is {width}x{height} but its image is "
                            f"{source[1]}x{source[0]}; a mask must be its image's size")
    pixels = np.asarray(image)
    if pixels.dtype != np.uint8:
        if pixels.max(initial=0) > 255:
            raise ImageRejected(f"mask {uri!r} has class ids up to {int(pixels.max())}; "
                                "stored masks hold ids 0 to 255")
        pixels = pixels.astype(np.uint8)
    if turned is not None:
        pixels = turned_mask(pixels, turned)
    if pixels.shape[:2] != stored:
        pixels = np.asarray(Image.fromarray(pixels).resize(
            (stored[1], stored[0]), Image.Resampling.NEAREST))
    return pixels


def _png(pixels: np.ndarray) -> bytes:
    """An 8-bit grey PNG of `pixels` (deterministic: Pillow's encoder, level 6)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).save(
        buffer, "PNG", compress_level=6)
    return buffer.getvalue()


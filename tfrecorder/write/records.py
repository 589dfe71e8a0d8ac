"""One planned row in, one serialized `tf.train.Example` (or the reason it failed) out.

This is the only place that reads and encodes images, and both engines call it, which is
why their shards can be byte-identical. It is a pure function of the row and the options,
and imports neither TensorFlow nor Beam, so worker processes start fast.

Every image written decodes with TensorFlow's own decoders (`tf.io.decode_image`,
`decode_jpeg`, `decode_png`). Which bytes are kept as they are is decided by what
TensorFlow's bundled libjpeg and libpng read, found by experiment with TF 2.21:

- JPEG: kept when its frame (SOF marker) is a process TensorFlow decodes: baseline (SOF0),
  extended (SOF1), progressive (SOF2) and their arithmetic-coded forms (SOF9, SOF10), at
  8 bits, with 1, 3 or 4 (CMYK) components. Lossless JPEGs (SOF3, SOF11), which
  libjpeg-turbo 3 (Pillow) decodes but TensorFlow does not ("Unsupported JPEG process"),
  are converted losslessly to PNG. Hierarchical JPEGs and 12- or 16-bit ones, which
  neither reads, are rejected.
- PNG: kept when every chunk's CRC is right (libpng refuses a bad CRC in IHDR, PLTE, IDAT
  or IEND; Pillow does not check IDAT's), IHDR declares a bit depth and colour type PNG
  allows (TensorFlow reads them all, 16-bit ones too) and the file ends with IEND.
  A bad CRC means damaged data: the image is rejected, naming the chunk.
- Other formats are converted to PNG, losslessly (see `ImageOptions` for bit depths).
- Images held in memory (`image_cells`): bytes are read as a file's bytes; arrays are
  written as PNG by `_png` (8 or 16 bits, 1 to 4 channels), PIL images as their pixels.

Unless `validate=False`, every image is also fully decoded once here, strictly: a JPEG
whose data libjpeg warns is damaged is rejected, not written with grey blocks. The header
readers and these checks are `image_checks`', which `verify` applies to stored bytes too.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import xxhash
from PIL import Image

from tfrecorder.format.example import encode_example, encode_examples
from tfrecorder.format.image_checks import (
    CORRUPT,
    TOO_LARGE,
    UNSUPPORTED,
    ImageRejected,
    check_jpeg_data,
    decode_fully,
    describe_error,
    jpeg_header,
    png_header,
    with_pillow,
)
from tfrecorder.format.layouts import BBOX, record_layout
from tfrecorder.format.manifest import (
    BASE64_ALTCHARS,
    SIGNATURES,
    image_features,
    record_columns,
    record_values,
)
from tfrecorder.options import ImageOptions, RecordOptions
from tfrecorder.sources.image_cells import image_data
from tfrecorder.storage import fs, store_errors
from tfrecorder.write import annotations, orientation
from tfrecorder.write.clip_records import encode_clip
from tfrecorder.write.rows import Record, Rejection, Row, StoredImage

# Channels of each mode images are stored in ("I;16": 16-bit greyscale).
_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "I;16": 1}


def encode_row(row: Row, options: RecordOptions, read: Callable[[], bytes] | None = None,
               read_mask: Callable[[], bytes] | None = None) -> Record | Rejection:
    """The `Record` for `row` (its serialized Example and what its image is), or a
    Rejection that says why there is none.

    `read` returns the image's bytes (or raises what the store answered), and `read_mask`
    a segmentation row's mask's; by default the files are read now. The engines pass
    readers that fetched ahead (`prefetch`).
    """
    features = record_values(row.split, row.label, row.inputs)
    layout = record_layout(options)
    if row.image is not None:  # held in memory: bytes as a file's, or pixels
        data = image_data(row.image)
        if isinstance(data, bytes) and not data:
            return Rejection(row.position, "empty image (0 bytes)")
    elif row.uri is None:
        return Record(encode_example(layout.record(features, row.position),
                                     options.dtype_of_list))
    else:
        try:
            data = read() if read is not None else fs.read_bytes(row.uri)
        except Exception as e:  # any I/O failure is this row's problem, not the run's
            return Rejection(row.position, f"cannot read file: {store_errors.answer(e)}")
        if not data:
            return Rejection(row.position, "empty file (0 bytes)")
    if getattr(options, "media", None):  # a video or audio clip (ImageOptions have none)
        return encode_clip(row, data, options)
    turn = None
    try:
        if isinstance(data, bytes) and orientation.applies(options.orientation,
                                                            BBOX in features):
            turn = with_pillow(orientation.decided, data, options.orientation,
                               BBOX in features, row.annotated_size)
            if turn is not None and turn.boxes:
                features.update(orientation.turned_annotations(features, turn))
        image, stored_format, height, width, channels, source_size = (
            _encode_image(data, options, turn) if isinstance(data, bytes)
            else _encode_pixels(data, options))
        features.update(annotations.drawn(row, features, source_size, (height, width),
                                          read_mask, turn))
    except ImageRejected as e:
        return Rejection(row.position, e.reason)
    except Image.UnidentifiedImageError:
        return Rejection(row.position, "not an image, or an image format Pillow cannot read")
    except Exception as e:  # Pillow raises many types for corrupt data
        return Rejection(row.position, f"{CORRUPT}: {describe_error(e)}")
    features.update(image_features(image, stored_format, height, width, channels,
                                   row.image_uri, row.image_name))
    stored = StoredImage(stored_format, height, width, channels, len(image),
                         xxhash.xxh3_128_digest(image), 0 if turn is None else turn.flags)
    return Record(encode_example(layout.record(features, row.position),
                                 options.dtype_of_list), stored,
                  features[BBOX] if turn is not None and turn.boxes else None)


def encode_rows_without_images(split: str, labels: Sequence, inputs: Mapping[str, Sequence],
                               options: RecordOptions):
    """The records of many rows of a table without images, of one split, as an Arrow
    binary array: the bytes `encode_row` gives each, built a column at a time
    (`example.encode_examples`), at about a tenth of the cost. Such rows cannot be
    rejected: validation checked them."""
    return encode_examples(record_columns(split, labels, inputs), options.dtype_of_list)


def _encode_image(data: bytes, options: ImageOptions, turn: orientation.Turn | None = None
                  ) -> tuple[bytes, str, int, int, int, tuple[int, int]]:
    """Returns (stored bytes, format name, height, width, channels, the source's (height,
    width), as the file stores it); raises ImageRejected. With a `turn` of its pixels,
    the image is turned to its shown view and re-encoded."""
    can_draft = True
    kept = turn is None or not turn.pixels
    if data.startswith(SIGNATURES["jpeg"]):
        jpeg = jpeg_header(data)
        _check_pixels(jpeg.width, jpeg.height, options.max_image_pixels)
        if options.validate:
            check_jpeg_data(data, jpeg)
        if kept and jpeg.tf_problem is None and _kept(options, "jpeg", jpeg.width,
                                                      jpeg.height):
            return (data, "jpeg", jpeg.height, jpeg.width, jpeg.channels,
                    (jpeg.height, jpeg.width))
        # Lossless JPEGs cannot be decoded at a reduced scale: libjpeg-turbo 3 ignores the
        # scale and Pillow's draft then overruns its buffer (heap corruption, abort).
        can_draft = not jpeg.lossless
    elif data.startswith(SIGNATURES["png"]):
        png = png_header(data)
        _check_pixels(png.width, png.height, options.max_image_pixels)
        if kept and _kept(options, "png", png.width, png.height):
            if options.validate:
                with_pillow(decode_fully, data)
            return data, "png", png.height, png.width, png.channels, (png.height, png.width)
    return with_pillow(_converted, data, options, can_draft,
                       None if kept else turn.orientation)


def _kept(options: ImageOptions, image_format: str, width: int, height: int) -> bool:
    """Whether an image TensorFlow reads in `image_format` is stored as it is."""
    return options.image_format in ("auto", image_format) and _target_size(
        (width, height), options) is None


def _check_pixels(width: int, height: int, limit: int | None) -> None:
    if limit is not None and width * height > limit:
        raise ImageRejected(f"{TOO_LARGE}: {width}x{height} is {width * height:,} pixels, "
                            f"more than the limit of {limit:,}")


def _converted(data: bytes, options: ImageOptions, can_draft: bool,
               turned: int | None = None
               ) -> tuple[bytes, str, int, int, int, tuple[int, int]]:
    """The image decoded by Pillow, turned to its shown view by its EXIF orientation
    `turned` (None: as stored), resized and encoded as `options` say. A turned JPEG stays
    a JPEG (at jpeg_quality, as a resized one) where the format is "auto"."""
    image = Image.open(io.BytesIO(data))
    _check_pixels(*image.size, options.max_image_pixels)
    source_size = image.size[::-1]
    swaps = turned in orientation.SWAPS_SIDES
    target = _target_size(image.size[::-1] if swaps else image.size, options)
    was_jpeg = image.format == "JPEG"
    if target is not None and can_draft and was_jpeg:
        image.draft(image.mode if image.mode in ("L", "RGB") else "RGB",
                    target[::-1] if swaps else target)
    image.load()
    if turned is not None:
        image = image.transpose(orientation.TRANSPOSES[turned])
    return (*_stored(image, target, options, lossy=turned is not None and was_jpeg),
            source_size)


def _encode_pixels(pixels, options: ImageOptions
                   ) -> tuple[bytes, str, int, int, int, tuple[int, int]]:
    """An image held in memory as pixels (a NumPy array `image_cells` checked, or a PIL
    image), stored as `options` say: losslessly as PNG by default."""
    if not isinstance(pixels, np.ndarray):  # a PIL image: its pixels, in a mode PNG holds
        _check_pixels(*pixels.size, options.max_image_pixels)  # before any conversion
        pixels = np.asarray(_normalized(pixels))  # L, LA, RGB, RGBA, or I;16 as uint16
    height, width = source_size = pixels.shape[:2]
    _check_pixels(width, height, options.max_image_pixels)
    target = _target_size((width, height), options)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
    if _output_format(mode, target is not None, options) == "png":
        if target is not None:
            pixels = _resized(pixels, target)
        height, width = pixels.shape[:2]
        return _png(pixels), "png", height, width, channels, source_size
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)  # as TensorFlow reads 16 bits as 8
    return (*_stored(Image.fromarray(np.ascontiguousarray(pixels)), target, options),
            source_size)


def _resized(pixels: np.ndarray, target: tuple[int, int]) -> np.ndarray:
    """Pixels resized to `target` (width, height) as Pillow resizes an image of them;
    16-bit colour, which Pillow cannot hold, a channel at a time as 16-bit grey."""
    if pixels.dtype == np.uint8:
        resized = Image.fromarray(np.ascontiguousarray(pixels)).resize(
            target, Image.Resampling.BICUBIC)
        return np.asarray(resized)
    planes = pixels[..., None] if pixels.ndim == 2 else pixels
    resized = [Image.frombytes("I;16", plane.shape[::-1], plane.astype("<u2").tobytes())
               .resize(target, Image.Resampling.BICUBIC)
               for plane in np.moveaxis(planes, 2, 0)]
    found = np.stack([np.asarray(image, dtype=np.uint16) for image in resized], axis=2)
    return found[:, :, 0] if pixels.ndim == 2 else found


def _png(pixels: np.ndarray) -> bytes:
    """A lossless PNG of uint8 or uint16 pixels (H x W, or H x W x 2, 3 or 4 channels).

    Written here rather than by Pillow, which has no mode for 16-bit colour, and whose
    encoder tries five filters on every row: 115 us for a 32x32 image, against 50 us for
    this one, whose rows all take the Up filter (each byte minus the one above it): its
    files were within 4% of Pillow's in size, smaller on photos (docs/performance.md)."""
    height, width = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    data = pixels.astype(f">u{pixels.dtype.itemsize}", copy=False).reshape(height, -1)
    data = data.view(np.uint8)
    rows = np.empty((height, 1 + data.shape[1]), dtype=np.uint8)
    rows[:, 0] = 2  # Up
    rows[0, 1:] = data[0]
    np.subtract(data[1:], data[:-1], out=rows[1:, 1:])

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))

    colour_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]  # PNG's: grey, +alpha, RGB, RGBA
    header = struct.pack(">IIBBBBB", width, height, pixels.dtype.itemsize * 8, colour_type,
                         0, 0, 0)
    return (SIGNATURES["png"] + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def _stored(image: Image.Image, target: tuple[int, int] | None, options: ImageOptions,
            lossy: bool = False) -> tuple[bytes, str, int, int, int]:
    """A decoded image, resized to `target` (None: kept) and encoded as `options` say;
    `lossy`: its source was a JPEG re-encoded anyway (turned), which "auto" keeps JPEG."""
    image = _normalized(image)
    if target is not None and image.size != target:
        image = image.resize(target, Image.Resampling.BICUBIC)
    width, height = image.size
    if options.image_format == "raw":
        image = _eight_bits(image)
        pixels = base64.b64encode(image.tobytes(), altchars=BASE64_ALTCHARS)
        return pixels, "raw", height, width, _CHANNELS[image.mode]
    stored_format = _output_format(image.mode, resized=target is not None or lossy,
                                   options=options)
    buffer = io.BytesIO()
    if stored_format == "jpeg":
        image = _eight_bits(image)
        if image.mode not in ("L", "RGB"):
            image = image.convert("RGB")
        image.save(buffer, "JPEG", quality=options.jpeg_quality)
    else:
        image.save(buffer, "PNG", compress_level=6)
    return buffer.getvalue(), stored_format, height, width, _CHANNELS[image.mode]


def _target_size(size: tuple[int, int], options: ImageOptions) -> tuple[int, int] | None:
    """The (width, height) to resize to, or None to keep the image's size."""
    width, height = size
    if options.image_size is not None:
        target_height, target_width = options.image_size
        return None if (width, height) == (target_width, target_height) else (
            target_width, target_height)
    side = options.max_image_side
    if side is None or max(width, height) <= side:
        return None
    scale = side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _normalized(image: Image.Image) -> Image.Image:
    """The image in L, LA, RGB, RGBA or I;16 (16-bit grey): modes PNG stores exactly and
    TensorFlow reads. Raises ImageRejected for pixels no PNG holds without loss."""
    mode = image.mode
    if mode in _CHANNELS:
        return image
    if mode in ("P", "PA"):
        has_alpha = mode == "PA" or "transparency" in image.info
        return image.convert("RGBA" if has_alpha else "RGB")
    if mode == "1":
        return image.convert("L")  # 0 and 255
    if mode in ("I;16L", "I;16B", "I;16N"):  # 16-bit grey in another byte order
        return _grey16(np.asarray(image), image.size)
    if mode == "I":  # 32-bit signed: what Pillow makes of 16-bit PGM and 32-bit TIFF
        low, high = image.getextrema()
        if low < 0 or high > 65535:
            raise ImageRejected(
                f"{UNSUPPORTED}: 32-bit integer pixels from {low} to {high}; no lossless "
                f"PNG holds values outside 0..65535: scale them to 16 bits (0..65535) or 8 "
                f"bits first")
        return _grey16(np.asarray(image), image.size)
    if mode == "F":
        raise ImageRejected(f"{UNSUPPORTED}: 32-bit floating-point pixels; no lossless PNG "
                            f"holds them and their scale is unknown: convert the image to 8-bit "
                            f"(0..255) or 16-bit (0..65535) integers first")
    return image.convert("RGBA" if "A" in image.getbands() else "RGB")


def _grey16(pixels: np.ndarray, size: tuple[int, int]) -> Image.Image:
    # Not Image.convert: Pillow clips I;16B to 255 when it converts it to I;16.
    return Image.frombytes("I;16", size, pixels.astype("<u2").tobytes())


def _eight_bits(image: Image.Image) -> Image.Image:
    """16-bit grey as 8 bits by `value >> 8`: what TensorFlow decodes from a 16-bit PNG
    with dtype=uint8, so every path gives the same pixels; 8-bit images as they are."""
    if image.mode != "I;16":
        return image
    pixels = np.asarray(image).astype(np.uint16) >> 8
    return Image.frombytes("L", image.size, pixels.astype(np.uint8).tobytes())


def _output_format(mode: str, resized: bool, options: ImageOptions) -> str:
    """The format an image of Pillow's `mode` is stored in (as 8 bits: raw or JPEG; or as
    PNG)."""
    if options.image_format in ("jpeg", "png", "raw"):
        return options.image_format
    # auto: resized images become JPEG unless they carry transparency; conversions of
    # formats TensorFlow cannot read, and pixels held in memory, stay lossless.
    if resized and mode in ("L", "RGB", "I;16"):
        return "jpeg"
    return "png"

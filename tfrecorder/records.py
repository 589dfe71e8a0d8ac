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
whose data libjpeg warns is damaged (see `_HARMLESS_JPEG_WARNINGS` for the few warnings
that are not) is rejected, not written with grey blocks. `stored_image_problem` applies
the same checks to stored bytes, for `verify`.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
import threading
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import simplejpeg
import xxhash
from PIL import Image

from tfrecorder import fs
from tfrecorder.example import encode_example, encode_examples
from tfrecorder.image_cells import image_data
from tfrecorder.manifest import SIGNATURES, image_features, record_columns, record_features
from tfrecorder.options import ImageOptions
from tfrecorder.rows import Record, Rejection, Row, StoredImage

# Channels of each mode images are stored in ("I;16": 16-bit greyscale).
_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "I;16": 1}

# TFRecorder stored raw pixels as base64 with these characters (TensorFlow's web-safe
# alphabet), so `tf.io.decode_base64` reads them.
_BASE64_ALTCHARS = b"-_"


# How reasons begin, so that rejected.csv and the error for too many rejections group them.
_CORRUPT = "corrupt or truncated image"
_UNSUPPORTED = "unsupported image"


class _Rejected(Exception):
    """Why an image cannot be written (or, for verify, was not written as it should be)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def encode_row(row: Row, options: ImageOptions,
               read: Callable[[], bytes] | None = None) -> Record | Rejection:
    """The `Record` for `row` (its serialized Example and what its image is), or a
    Rejection that says why there is none.

    `read` returns the image's bytes (or raises what the store answered); by default the
    file is read now. The engines pass readers that fetched ahead (`prefetch`).
    """
    features = record_features(row.split, row.label, row.inputs)
    if row.image is not None:  # held in memory: bytes as a file's, or pixels
        data = image_data(row.image)
        if isinstance(data, bytes) and not data:
            return Rejection(row.position, "empty image (0 bytes)")
    elif row.uri is None:
        return Record(encode_example(features))
    else:
        try:
            data = read() if read is not None else fs.read_bytes(row.uri)
        except Exception as e:  # any I/O failure is this row's problem, not the run's
            return Rejection(row.position, f"cannot read file: {fs.answer(e)}")
        if not data:
            return Rejection(row.position, "empty file (0 bytes)")
    try:
        image, stored_format, height, width, channels = (
            _encode_image(data, options) if isinstance(data, bytes)
            else _encode_pixels(data, options))
    except _Rejected as e:
        return Rejection(row.position, e.reason)
    except Image.UnidentifiedImageError:
        return Rejection(row.position, "not an image, or an image format Pillow cannot read")
    except Exception as e:  # Pillow raises many types for corrupt data
        return Rejection(row.position, f"{_CORRUPT}: {_describe(e)}")
    features.update(image_features(image, stored_format, height, width, channels,
                                   row.image_uri, row.image_name))
    stored = StoredImage(stored_format, height, width, channels, len(image),
                         xxhash.xxh3_128_digest(image))
    return Record(encode_example(features), stored)


def encode_rows_without_images(split: str, labels: Sequence,
                               inputs: Mapping[str, Sequence]) -> list[bytes]:
    """The records of many rows of a table without images, of one split: the bytes
    `encode_row` gives each, built a column at a time (`example.encode_examples`), at
    about a third of the cost. Such rows cannot be rejected: validation checked them."""
    return encode_examples(record_columns(split, labels, inputs))


def stored_image_problem(data: bytes, image_format: str) -> str | None:
    """None if TensorFlow decodes `data`, an image stored as `image_format` ("jpeg",
    "png" or "raw"), exactly as it was meant to be; else what is wrong with it.

    These are the writer's own checks (JPEG process, strict decode; PNG chunks and their
    CRCs, bit depth, full decode), so `verify` flags any stored image that the writer
    would not have written as it is, including those TensorFlow decodes with a mere
    warning (damaged JPEG data comes out with grey blocks).
    """
    if isinstance(image_format, bytes):
        image_format = image_format.decode("utf-8", errors="replace")
    try:
        if image_format == "jpeg":
            if not data.startswith(SIGNATURES["jpeg"]):
                return "not a JPEG (its first bytes are not a JPEG signature)"
            header = _jpeg_header(data)
            if header.tf_problem is not None:
                return header.tf_problem
            _check_jpeg_data(data, header)
        elif image_format == "png":
            if not data.startswith(SIGNATURES["png"]):
                return "not a PNG (its first bytes are not the PNG signature)"
            _png_header(data)
            _with_pillow(_decode, data)
        elif image_format == "raw":
            base64.b64decode(data, altchars=_BASE64_ALTCHARS, validate=True)
        else:
            return f"unknown image_format {image_format!r}; expected 'jpeg', 'png' or 'raw'"
    except _Rejected as e:
        return e.reason
    except binascii.Error as e:
        return f"raw pixels that are not web-safe base64: {e}"
    except Exception as e:  # Pillow raises many types for corrupt data
        return f"{_CORRUPT}: {_describe(e)}"
    return None


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}".strip().rstrip(":")


def _encode_image(data: bytes, options: ImageOptions) -> tuple[bytes, str, int, int, int]:
    """Returns (stored bytes, format name, height, width, channels); raises _Rejected."""
    can_draft = True
    if data.startswith(SIGNATURES["jpeg"]):
        jpeg = _jpeg_header(data)
        _check_pixels(jpeg.width, jpeg.height, options.max_image_pixels)
        if options.validate:
            _check_jpeg_data(data, jpeg)
        if jpeg.tf_problem is None and _kept(options, "jpeg", jpeg.width, jpeg.height):
            # TensorFlow decodes grey JPEGs to one channel, colour (and CMYK) ones to three.
            return data, "jpeg", jpeg.height, jpeg.width, 1 if jpeg.components == 1 else 3
        # Lossless JPEGs cannot be decoded at a reduced scale: libjpeg-turbo 3 ignores the
        # scale and Pillow's draft then overruns its buffer (heap corruption, abort).
        can_draft = not jpeg.lossless
    elif data.startswith(SIGNATURES["png"]):
        png = _png_header(data)
        _check_pixels(png.width, png.height, options.max_image_pixels)
        if _kept(options, "png", png.width, png.height):
            if options.validate:
                _with_pillow(_decode, data)
            return data, "png", png.height, png.width, png.channels
    return _with_pillow(_converted, data, options, can_draft)


def _kept(options: ImageOptions, image_format: str, width: int, height: int) -> bool:
    """Whether an image TensorFlow reads in `image_format` is stored as it is."""
    return options.image_format in ("auto", image_format) and _target_size(
        (width, height), options) is None


def _check_pixels(width: int, height: int, limit: int | None) -> None:
    if limit is not None and width * height > limit:
        raise _Rejected(f"image too large: {width}x{height} is {width * height:,} pixels, "
                        f"more than max_image_pixels={limit:,} (raise it, or None for no "
                        f"limit, to convert such images)")


def _decode(data: bytes) -> None:
    """Decodes the whole image with Pillow (for formats whose header was checked)."""
    Image.open(io.BytesIO(data)).load()


def _converted(data: bytes, options: ImageOptions, can_draft: bool
               ) -> tuple[bytes, str, int, int, int]:
    """The image decoded by Pillow, resized and encoded as `options` say."""
    image = Image.open(io.BytesIO(data))
    _check_pixels(*image.size, options.max_image_pixels)
    target = _target_size(image.size, options)
    if target is not None and can_draft and image.format == "JPEG":
        image.draft(image.mode if image.mode in ("L", "RGB") else "RGB", target)
    image.load()
    return _stored(image, target, options)


def _encode_pixels(pixels, options: ImageOptions) -> tuple[bytes, str, int, int, int]:
    """An image held in memory as pixels (a NumPy array `image_cells` checked, or a PIL
    image), stored as `options` say: losslessly as PNG by default."""
    if not isinstance(pixels, np.ndarray):  # a PIL image: its pixels, in a mode PNG holds
        _check_pixels(*pixels.size, options.max_image_pixels)  # before any conversion
        pixels = np.asarray(_normalized(pixels))  # L, LA, RGB, RGBA, or I;16 as uint16
    height, width = pixels.shape[:2]
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
        return _png(pixels), "png", height, width, channels
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)  # as TensorFlow reads 16 bits as 8
    return _stored(Image.fromarray(np.ascontiguousarray(pixels)), target, options)


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


def _stored(image: Image.Image, target: tuple[int, int] | None, options: ImageOptions
            ) -> tuple[bytes, str, int, int, int]:
    """A decoded image, resized to `target` (None: kept) and encoded as `options` say."""
    image = _normalized(image)
    if target is not None and image.size != target:
        image = image.resize(target, Image.Resampling.BICUBIC)
    width, height = image.size
    if options.image_format == "raw":
        image = _eight_bits(image)
        pixels = base64.b64encode(image.tobytes(), altchars=_BASE64_ALTCHARS)
        return pixels, "raw", height, width, _CHANNELS[image.mode]
    stored_format = _output_format(image.mode, resized=target is not None, options=options)
    buffer = io.BytesIO()
    if stored_format == "jpeg":
        image = _eight_bits(image)
        if image.mode not in ("L", "RGB"):
            image = image.convert("RGB")
        image.save(buffer, "JPEG", quality=options.jpeg_quality)
    else:
        image.save(buffer, "PNG", compress_level=6)
    return buffer.getvalue(), stored_format, height, width, _CHANNELS[image.mode]


# --- JPEG ------------------------------------------------------------------------------

# JPEG processes by SOF marker (ITU T.81, table B.1). TensorFlow's libjpeg decodes those of
# _TF_JPEG (measured: TF 2.21 decodes SOF0, 1, 2, 9 and 10; it refuses SOF3, 5, 11 and 13
# with "Unsupported JPEG process", and every precision but 8). libjpeg-turbo 3, which
# Pillow and simplejpeg bundle, also decodes the lossless ones; nothing we have decodes
# the hierarchical ones.
_JPEG_PROCESSES = {
    0xC0: "baseline", 0xC1: "extended sequential", 0xC2: "progressive", 0xC3: "lossless",
    0xC5: "hierarchical sequential", 0xC6: "hierarchical progressive",
    0xC7: "hierarchical lossless", 0xC9: "arithmetic-coded sequential",
    0xCA: "arithmetic-coded progressive", 0xCB: "arithmetic-coded lossless",
    0xCD: "hierarchical arithmetic-coded sequential",
    0xCE: "hierarchical arithmetic-coded progressive",
    0xCF: "hierarchical arithmetic-coded lossless",
}
_TF_JPEG = {0xC0, 0xC1, 0xC2, 0xC9, 0xCA}
_LOSSLESS_JPEG = {0xC3, 0xCB}
_SOS, _APP0, _APP14, _APP15 = 0xDA, 0xE0, 0xEE, 0xEF
_STANDALONE_MARKERS = {0x01, *range(0xD0, 0xD8)}  # TEM, RST0-7: no length follows


class _JpegHeader(NamedTuple):
    sof: int  # the second byte of the frame's SOF marker: its process
    precision: int  # bits per sample
    height: int
    width: int
    components: int
    segments: tuple[tuple[int, int], ...]  # (marker, offset) of each segment up to SOS

    @property
    def lossless(self) -> bool:
        return self.sof in _LOSSLESS_JPEG

    @property
    def tf_problem(self) -> str | None:
        """Why TensorFlow cannot decode these bytes (they are converted), or None."""
        if self.sof in _TF_JPEG:
            return None
        return f"{_UNSUPPORTED}: {_a(self.name)}, which TensorFlow cannot decode"

    @property
    def name(self) -> str:
        return f"{_JPEG_PROCESSES[self.sof]} JPEG (SOF{self.sof - 0xC0})"


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _jpeg_header(data: bytes) -> _JpegHeader:
    """The frame header, read from the markers up to the first scan (never the scan data,
    so this is cheap); raises _Rejected for a JPEG nothing we have can decode."""
    segments, frame, position, end = [], None, 2, len(data)
    while True:
        if position + 4 > end:
            raise _Rejected(f"{_CORRUPT}: a JPEG that ends before its image data")
        if data[position] != 0xFF:
            raise _Rejected(f"{_CORRUPT}: a corrupt JPEG header (bytes that are not a marker "
                            f"between its segments)")
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _STANDALONE_MARKERS:
            position += 2
            continue
        if marker in (0xD8, 0xD9):  # SOI, EOI
            raise _Rejected(f"{_CORRUPT}: a JPEG without image data")
        length = int.from_bytes(data[position + 2:position + 4], "big")
        if length < 2 or position + 2 + length > end:
            raise _Rejected(f"{_CORRUPT}: a JPEG that ends before its image data")
        segments.append((marker, position))
        if marker == _SOS:
            if length != 6 + 2 * data[position + 4]:
                raise _Rejected(f"{_CORRUPT}: a corrupt JPEG header (a bad SOS segment)")
            break
        if marker in _JPEG_PROCESSES and frame is None:
            if length < 8:
                raise _Rejected(f"{_CORRUPT}: a corrupt JPEG header (a bad SOF segment)")
            precision, height, width, components = struct.unpack_from(
                ">BHHB", data, position + 4)
            frame = (marker, precision, height, width, components)
        position += 2 + length
    if frame is None:
        raise _Rejected(f"{_CORRUPT}: a corrupt JPEG header (no frame header, SOF, before "
                        f"the image data)")
    header = _JpegHeader(*frame, tuple(segments))
    name = header.name
    if header.sof not in _TF_JPEG | _LOSSLESS_JPEG:
        raise _Rejected(f"{_UNSUPPORTED}: {_a(name)}, a process that neither TensorFlow nor "
                        f"Pillow decodes")
    if header.precision != 8:
        raise _Rejected(f"{_UNSUPPORTED}: a {header.precision}-bit {name}; TensorFlow and "
                        f"Pillow read only 8-bit JPEGs")
    if header.components not in (1, 3, 4):
        raise _Rejected(f"{_UNSUPPORTED}: {_a(name)} with {header.components} colour "
                        f"components; TensorFlow reads 1 (grey), 3 (colour) or 4 (CMYK)")
    if header.width == 0 or header.height == 0:
        raise _Rejected(f"{_UNSUPPORTED}: {_a(name)} of {header.width}x{header.height} pixels "
                        f"(a height given later, in a DNL marker, is not supported)")
    return header


# libjpeg warnings that say nothing about the pixels: each is about a header field that
# libjpeg, TensorFlow's libjpeg included, ignores or guesses around, so both decode the
# file alike. libjpeg-turbo stops at the first warning, so each is cured in a scratch copy
# and the rest of the file is still checked strictly. Every other warning rejects the
# image: "Corrupt JPEG data: ..." (N extraneous bytes before a marker, premature end of a
# data segment, a wrong RST marker, bad Huffman or arithmetic code), "Premature end of
# JPEG file", "Inconsistent progression sequence": bytes of the image were damaged or lost
# (libjpeg fills them in with grey). Extraneous bytes are rejected even before EOI, where
# they may be junk an encoder appended: libjpeg reports the same when damage desynchronises
# the decoder, which then stops short of the marker. (A few stray bytes right before a
# marker go unseen, read ahead into libjpeg's bit buffer: such files are kept, and
# TensorFlow decodes them alike.)
_HARMLESS_JPEG_WARNINGS = {
    "unknown jfif revision number": _APP0,  # JFIF 2.x or later in APP0: metadata only
    "unknown adobe color transform code": _APP14,  # libjpeg guesses the colour space
    "invalid sos parameters for sequential jpeg": _SOS,  # fields sequential decoders ignore
}
# How libjpeg's messages about damaged or lost data begin or read (for the reason only:
# any warning not in _HARMLESS_JPEG_WARNINGS rejects the image).
_DAMAGE_SIGNS = ("corrupt jpeg data", "premature end", "bad huffman code",
                 "bad arithmetic code", "inconsistent progression", "invalid jpeg data")


def _check_jpeg_data(data: bytes, header: _JpegHeader) -> None:
    """Decodes all of the image's data strictly; raises _Rejected with libjpeg's warning
    if it is damaged or lost."""
    # Decoded at 1/8 scale and in grey: libjpeg still reads and entropy-decodes every byte,
    # which is where damage shows, but skips most of the IDCT and colour work. Lossless
    # JPEGs cannot be scaled (simplejpeg would overrun its buffer) nor turned grey.
    colorspace = {1: "GRAY", 4: "CMYK"}.get(header.components,
                                            "RGB" if header.lossless else "GRAY")
    scale = {} if header.lossless else {"min_height": 1, "min_width": 1}
    checked, cured = data, set()
    while True:
        try:
            simplejpeg.decode_jpeg(checked, colorspace=colorspace, fastdct=True,
                                   fastupsample=True, strict=True, **scale)
            return
        except Exception as error:  # libjpeg errors, and warnings (strict=True)
            message = str(error).strip()
            marker = next((m for sign, m in _HARMLESS_JPEG_WARNINGS.items()
                           if sign in message.lower()), None)
            if marker is None or marker in cured:
                raise _Rejected(_jpeg_reason(message)) from None
            cured.add(marker)
            checked = _cured(checked, header, marker)


def _jpeg_reason(message: str) -> str:
    lowered = message.lower()
    if any(sign in lowered for sign in _DAMAGE_SIGNS):
        return f"{_CORRUPT}: {message}"
    return f"{_UNSUPPORTED}: a JPEG that libjpeg cannot decode: {message}"


def _cured(data: bytes, header: _JpegHeader, marker: int) -> bytes:
    """A copy of `data` without the harmless quirk of its `marker` segments: APPn renamed
    APP15 (which libjpeg skips), or the first scan's header set to a sequential one's."""
    copy = bytearray(data)
    for kind, offset in header.segments:
        if kind == marker == _SOS:
            spectral = offset + 5 + 2 * copy[offset + 4]  # Ss, Se, Ah/Al
            copy[spectral:spectral + 3] = b"\x00\x3f\x00"
        elif kind == marker:
            copy[offset + 1] = _APP15
    return bytes(copy)


# --- PNG -------------------------------------------------------------------------------

# Bit depths PNG allows for each colour type, and the channels TensorFlow decodes (a
# palette with a tRNS chunk gives 4; grey or RGB with tRNS keep 1 and 3: measured).
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


class _PngHeader(NamedTuple):
    width: int
    height: int
    channels: int


def _png_header(data: bytes) -> _PngHeader:
    """IHDR, after checking every chunk's length and CRC (zlib.crc32 runs at GB/s) up
    to IEND; raises _Rejected naming the first chunk that is wrong."""
    view, position, end = memoryview(data), 8, len(data)
    ihdr, has_trns, has_idat = None, False, False
    while True:
        if position + 12 > end:
            raise _Rejected(f"{_CORRUPT}: a truncated PNG (it ends before its IEND chunk)")
        length = int.from_bytes(view[position:position + 4], "big")
        kind = bytes(view[position + 4:position + 8])
        name = kind.decode("ascii") if kind.isalpha() else kind.hex()
        following = position + 12 + length
        if following > end:
            raise _Rejected(f"{_CORRUPT}: a truncated PNG (it ends inside its {name} chunk)")
        crc = int.from_bytes(view[following - 4:following], "big")
        if zlib.crc32(view[position + 4:following - 4]) != crc:
            raise _Rejected(f"{_CORRUPT}: a damaged PNG (its {name} chunk fails its CRC "
                            f"check)")
        if ihdr is None:
            if kind != b"IHDR" or length != 13:
                raise _Rejected(f"{_CORRUPT}: a corrupt PNG (its first chunk is {name}, not IHDR)")
            ihdr = struct.unpack_from(">IIBBBBB", view, position + 8)
            _check_ihdr(*ihdr)
        has_trns |= kind == b"tRNS"
        has_idat |= kind == b"IDAT"
        if kind == b"IEND":
            break
        position = following
    if not has_idat:
        raise _Rejected(f"{_CORRUPT}: a corrupt PNG (no image data: no IDAT chunk)")
    width, height, _, colour_type = ihdr[:4]
    channels = 4 if colour_type == 3 and has_trns else _PNG_CHANNELS[colour_type]
    return _PngHeader(width, height, channels)


def _check_ihdr(width, height, bit_depth, colour_type, compression, filter_method,
                interlace) -> None:
    if bit_depth not in _PNG_DEPTHS.get(colour_type, ()):
        raise _Rejected(f"{_CORRUPT}: a corrupt PNG (IHDR declares bit depth {bit_depth} "
                        f"with colour type {colour_type}, which PNG does not allow)")
    if not (0 < width < 2**31 and 0 < height < 2**31):
        raise _Rejected(f"{_CORRUPT}: a corrupt PNG (IHDR declares {width}x{height} pixels)")
    if compression or filter_method or interlace not in (0, 1):
        raise _Rejected(f"{_CORRUPT}: a corrupt PNG (IHDR declares an unknown compression, "
                        f"filter or interlace method)")


# --- Pillow ----------------------------------------------------------------------------

_PILLOW_LIMIT = threading.Lock()


def _with_pillow(work: Callable, *args):
    """`work(*args)`, which uses Pillow, with Pillow's warnings off and without Pillow's
    process-wide pixel limit.

    `max_image_pixels` is the one limit, checked on the header before any decode on every
    path; `PIL.Image.MAX_IMAGE_PIXELS` (89 MP by default, an error past twice that, or
    whatever the user's program set) would be a second, hidden one. Pillow reads that
    global when it checks, so nothing overrides it for one call: when it refuses an image,
    `work` runs again with it lifted, under a lock so that concurrent calls restore the
    user's value, never each other's. Pillow is never touched otherwise, and other threads
    see no limit only for the moments an image past Pillow's limit is decoded here (one
    that `max_image_pixels` allowed: it is checked right after `Image.open`).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's warnings (EXIF, palette) are not errors
        try:
            return work(*args)
        except Image.DecompressionBombError:
            pass
        with _PILLOW_LIMIT:
            saved, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
            try:
                return work(*args)
            finally:
                Image.MAX_IMAGE_PIXELS = saved


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
    TensorFlow reads. Raises _Rejected for pixels no PNG holds without loss."""
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
            raise _Rejected(
                f"{_UNSUPPORTED}: 32-bit integer pixels from {low} to {high}; no lossless "
                f"PNG holds values outside 0..65535: scale them to 16 bits (0..65535) or 8 "
                f"bits first")
        return _grey16(np.asarray(image), image.size)
    if mode == "F":
        raise _Rejected(f"{_UNSUPPORTED}: 32-bit floating-point pixels; no lossless PNG "
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

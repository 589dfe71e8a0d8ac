"""Whether TensorFlow decodes an image's bytes exactly as they were meant: the checks the
writer makes before it keeps an image's bytes as they are (`records`), and `verify` makes
on the bytes stored (`stored_image_problem`).

One home for both, so that verify flags exactly what the writer would not have written,
and so that `verify_records`, a reader, checks stored images without importing the
writer (`records` brings the options, the image cells and the encoders). Which bytes
TensorFlow's bundled libjpeg and libpng read was found by experiment (see `records`):

- JPEG (`jpeg_header`, `check_jpeg_data`): the frame's process, precision and components
  from the markers alone; then the image's data decoded strictly by libjpeg-turbo, where
  any warning but a few harmless ones (`_HARMLESS_JPEG_WARNINGS`) means damaged data.
- PNG (`png_header`): every chunk's length and CRC up to IEND, and IHDR's bit depth and
  colour type; then a full decode by Pillow (`with_pillow`, without Pillow's hidden
  pixel limit).

Imports Pillow and simplejpeg, neither TensorFlow nor Beam: workers import it.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
import threading
import warnings
import zlib
from collections.abc import Callable
from typing import NamedTuple

import simplejpeg
from PIL import Image

from tfrecorder.errors import Option
from tfrecorder.format.manifest import BASE64_ALTCHARS, SIGNATURES

# How reasons begin, so that rejected.csv and the error for too many rejections group them.
CORRUPT = "corrupt or truncated image"
UNSUPPORTED = "unsupported image"
TOO_LARGE = "image too large"  # more pixels than `max_image_pixels`


def rejection_advice(reason: str) -> tuple[str | Option, ...]:
    """What lets rows rejected for `reason` through, as parts of an error's message: the
    reason itself is data (rejected.csv) and says no option's spelling, which the error
    renders in the user's own (`max_image_pixels=None`, `--max-image-pixels none`)."""
    if reason.startswith(TOO_LARGE):
        return (" To convert such images, pass a larger ", Option("max_image_pixels"),
                ", or ", Option("max_image_pixels", None), " for no limit.")
    return ()


class ImageRejected(Exception):
    """Why an image cannot be written (or, for verify, was not written as it should be)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
            header = jpeg_header(data)
            if header.tf_problem is not None:
                return header.tf_problem
            check_jpeg_data(data, header)
        elif image_format == "png":
            if not data.startswith(SIGNATURES["png"]):
                return "not a PNG (its first bytes are not the PNG signature)"
            png_header(data)
            with_pillow(decode_fully, data)
        elif image_format == "raw":
            base64.b64decode(data, altchars=BASE64_ALTCHARS, validate=True)
        else:
            return f"unknown image_format {image_format!r}; expected 'jpeg', 'png' or 'raw'"
    except ImageRejected as e:
        return e.reason
    except binascii.Error as e:
        return f"raw pixels that are not web-safe base64: {e}"
    except Exception as e:  # Pillow raises many types for corrupt data
        return f"{CORRUPT}: {describe_error(e)}"
    return None


def decoded_shape(data: bytes, image_format: str) -> tuple[int, int, int]:
    """(height, width, channels) of the pixels TensorFlow decodes a stored "jpeg" or
    "png" image to, read from its header, as the writer records them: for an image that
    passes `stored_image_problem`, whose decode is full and strict, that is what a decode
    gives, so `verify` need not decode it again."""
    if image_format in ("jpeg", b"jpeg"):
        jpeg = jpeg_header(data)
        return jpeg.height, jpeg.width, jpeg.channels
    png = png_header(data)
    return png.height, png.width, png.channels


def tensorflow_decodes(data: bytes, image_format: str) -> bool:
    """Whether TensorFlow decodes an image that `stored_image_problem` refused all the
    same: damaged JPEG data, which libjpeg only warns about (and fills with grey), or a
    PNG whose one fault is an ancillary chunk that fails its CRC (libpng drops it). Such
    an image loads, wrong; any other fault (a header it cannot read, a process it
    lacks, a JPEG that ends before its EOI marker, damaged PNG data) stops TensorFlow's
    decode. Measured with TensorFlow 2.21 (`tests/test_hostile_images.py`). Called only for
    refused images: it decodes a JPEG again, leniently."""
    if isinstance(image_format, bytes):
        image_format = image_format.decode("utf-8", errors="replace")
    try:
        if image_format == "jpeg" and data.startswith(SIGNATURES["jpeg"]):
            header = jpeg_header(data)
            # TensorFlow's reader makes up no EOI for data that ends early (libjpeg's does).
            if header.tf_problem is not None or data.find(b"\xff\xd9",
                                                          header.segments[-1][1]) < 0:
                return False
            simplejpeg.decode_jpeg(data, colorspace=_CHECK_COLORSPACES.get(
                header.components, "GRAY"), fastdct=True, fastupsample=True, strict=False,
                **_SMALLEST_SCALE)
            return True
        if image_format == "png" and data.startswith(SIGNATURES["png"]):
            return stored_image_problem(_without_damaged_ancillary_chunks(data),
                                        "png") is None
    except Exception:  # libjpeg's errors, a header that cannot be read
        return False
    return False


def describe_error(error: Exception) -> str:
    return f"{type(error).__name__}: {error}".strip().rstrip(":")


def decode_fully(data: bytes) -> None:
    """Decodes the whole image with Pillow (for formats whose header was checked)."""
    Image.open(io.BytesIO(data)).load()


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
_READABLE_JPEG = _TF_JPEG | _LOSSLESS_JPEG  # by TensorFlow, or by Pillow to convert
_SOS, _APP0, _APP14, _APP15 = 0xDA, 0xE0, 0xEE, 0xEF
_STANDALONE_MARKERS = {0x01, *range(0xD0, 0xD8)}  # TEM, RST0-7: no length follows


class JpegHeader(NamedTuple):
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
    def channels(self) -> int:
        """The channels TensorFlow decodes it to: one for grey, three for colour (and for
        CMYK, which it converts to RGB)."""
        return 1 if self.components == 1 else 3

    @property
    def tf_problem(self) -> str | None:
        """Why TensorFlow cannot decode these bytes (they are converted), or None."""
        if self.sof in _TF_JPEG:
            return None
        return f"{UNSUPPORTED}: {_a(self.name)}, which TensorFlow cannot decode"

    @property
    def name(self) -> str:
        return f"{_JPEG_PROCESSES[self.sof]} JPEG (SOF{self.sof - 0xC0})"


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def jpeg_header(data: bytes) -> JpegHeader:
    """The frame header, read from the markers up to the first scan (never the scan data,
    so this is cheap); raises ImageRejected for a JPEG nothing we have can decode."""
    segments, frame, position, end = [], None, 2, len(data)
    while True:
        if position + 4 > end:
            raise ImageRejected(f"{CORRUPT}: a JPEG that ends before its image data")
        # One call, half the time of two indexes and a slice (79 against 152 ns).
        prefix, marker, length = _MARKER.unpack_from(data, position)
        if prefix != 0xFF:
            raise ImageRejected(f"{CORRUPT}: a corrupt JPEG header (bytes that are not a marker "
                                f"between its segments)")
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _STANDALONE_MARKERS:
            position += 2
            continue
        if marker in (0xD8, 0xD9):  # SOI, EOI
            raise ImageRejected(f"{CORRUPT}: a JPEG without image data")
        if length < 2 or position + 2 + length > end:
            raise ImageRejected(f"{CORRUPT}: a JPEG that ends before its image data")
        segments.append((marker, position))
        if marker == _SOS:
            if length != 6 + 2 * data[position + 4]:
                raise ImageRejected(f"{CORRUPT}: a corrupt JPEG header (a bad SOS segment)")
            break
        if marker in _JPEG_PROCESSES and frame is None:
            if length < 8:
                raise ImageRejected(f"{CORRUPT}: a corrupt JPEG header (a bad SOF segment)")
            frame = (marker, *_FRAME.unpack_from(data, position + 4))
        position += 2 + length
    if frame is None:
        raise ImageRejected(f"{CORRUPT}: a corrupt JPEG header (no frame header, SOF, before "
                            f"the image data)")
    header = JpegHeader(*frame, tuple(segments))
    sof, precision, height, width, components = frame
    if sof in _READABLE_JPEG and precision == 8 and components in (1, 3, 4) and width \
            and height:
        return header  # (the checks below, in one test: names are built only to refuse)
    name = header.name
    if sof not in _READABLE_JPEG:
        raise ImageRejected(f"{UNSUPPORTED}: {_a(name)}, a process that neither TensorFlow nor "
                            f"Pillow decodes")
    if precision != 8:
        raise ImageRejected(f"{UNSUPPORTED}: a {precision}-bit {name}; TensorFlow and "
                            f"Pillow read only 8-bit JPEGs")
    if components not in (1, 3, 4):
        raise ImageRejected(f"{UNSUPPORTED}: {_a(name)} with {components} colour "
                            f"components; TensorFlow reads 1 (grey), 3 (colour) or 4 (CMYK)")
    raise ImageRejected(f"{UNSUPPORTED}: {_a(name)} of {width}x{height} pixels "
                        f"(a height given later, in a DNL marker, is not supported)")


_MARKER = struct.Struct(">BBH")  # a marker's 0xFF, its code and (if it has one) its length
_FRAME = struct.Struct(">BHHB")  # a frame header's precision, height, width, components


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


def check_jpeg_data(data: bytes, header: JpegHeader) -> None:
    """Decodes all of the image's data strictly; raises ImageRejected with libjpeg's warning
    if it is damaged or lost."""
    # Decoded at 1/8 scale and in grey: libjpeg still reads and entropy-decodes every byte,
    # which is where damage shows, but skips most of the IDCT and colour work. Lossless
    # JPEGs cannot be scaled (simplejpeg would overrun its buffer) nor turned grey.
    lossless = header.lossless
    colorspace = _CHECK_COLORSPACES.get(header.components, "RGB" if lossless else "GRAY")
    scale = _NO_SCALE if lossless else _SMALLEST_SCALE
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
                raise ImageRejected(_jpeg_reason(message)) from None
            cured.add(marker)
            checked = _cured(checked, header, marker)


_CHECK_COLORSPACES = {1: "GRAY", 4: "CMYK"}
_NO_SCALE: dict = {}
_SMALLEST_SCALE = {"min_height": 1, "min_width": 1}


def _jpeg_reason(message: str) -> str:
    lowered = message.lower()
    if any(sign in lowered for sign in _DAMAGE_SIGNS):
        return f"{CORRUPT}: {message}"
    return f"{UNSUPPORTED}: a JPEG that libjpeg cannot decode: {message}"


def _cured(data: bytes, header: JpegHeader, marker: int) -> bytes:
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


class PngHeader(NamedTuple):
    width: int
    height: int
    channels: int


def png_header(data: bytes) -> PngHeader:
    """IHDR, after checking every chunk's length and CRC (zlib.crc32 runs at GB/s) up
    to IEND; raises ImageRejected naming the first chunk that is wrong."""
    view, position, end = memoryview(data), 8, len(data)
    ihdr, has_trns, has_idat = None, False, False
    while True:
        if position + 12 > end:
            raise ImageRejected(f"{CORRUPT}: a truncated PNG (it ends before its IEND chunk)")
        length = int.from_bytes(view[position:position + 4], "big")
        kind = bytes(view[position + 4:position + 8])
        name = kind.decode("ascii") if kind.isalpha() else kind.hex()
        following = position + 12 + length
        if following > end:
            raise ImageRejected(f"{CORRUPT}: a truncated PNG (it ends inside its {name} chunk)")
        crc = int.from_bytes(view[following - 4:following], "big")
        if zlib.crc32(view[position + 4:following - 4]) != crc:
            raise ImageRejected(f"{CORRUPT}: a damaged PNG (its {name} chunk fails its CRC "
                                f"check)")
        if ihdr is None:
            if kind != b"IHDR" or length != 13:
                raise ImageRejected(f"{CORRUPT}: a corrupt PNG (its first chunk is {name}, "
                                    "not IHDR)")
            ihdr = struct.unpack_from(">IIBBBBB", view, position + 8)
            _check_ihdr(*ihdr)
        has_trns |= kind == b"tRNS"
        has_idat |= kind == b"IDAT"
        if kind == b"IEND":
            break
        position = following
    if not has_idat:
        raise ImageRejected(f"{CORRUPT}: a corrupt PNG (no image data: no IDAT chunk)")
    width, height, _, colour_type = ihdr[:4]
    channels = 4 if colour_type == 3 and has_trns else _PNG_CHANNELS[colour_type]
    return PngHeader(width, height, channels)


def _without_damaged_ancillary_chunks(data: bytes) -> bytes:
    """A PNG without its ancillary chunks (a lowercase first letter: tEXt, iCCP, ...)
    that fail their CRC, as libpng reads it (it warns, and drops them)."""
    kept, position, end = [data[:8]], 8, len(data)
    while position + 12 <= end:
        length = int.from_bytes(data[position:position + 4], "big")
        following = position + 12 + length
        chunk = data[position:following]
        if not (chunk[4] & 0x20 and zlib.crc32(chunk[4:-4]) != int.from_bytes(chunk[-4:],
                                                                               "big")):
            kept.append(chunk)
        position = following
    kept.append(data[position:])
    return b"".join(kept)


def _check_ihdr(width, height, bit_depth, colour_type, compression, filter_method,
                interlace) -> None:
    if bit_depth not in _PNG_DEPTHS.get(colour_type, ()):
        raise ImageRejected(f"{CORRUPT}: a corrupt PNG (IHDR declares bit depth {bit_depth} "
                            f"with colour type {colour_type}, which PNG does not allow)")
    if not (0 < width < 2**31 and 0 < height < 2**31):
        raise ImageRejected(f"{CORRUPT}: a corrupt PNG (IHDR declares {width}x{height} pixels)")
    if compression or filter_method or interlace not in (0, 1):
        raise ImageRejected(f"{CORRUPT}: a corrupt PNG (IHDR declares an unknown compression, "
                            f"filter or interlace method)")


# --- Pillow ----------------------------------------------------------------------------

_PILLOW_LIMIT = threading.Lock()


class _WarningsOff:
    """Python's warnings off while any thread is inside: the first in turns them off, the
    last out puts the filters back. `warnings.catch_warnings` saves and restores the
    process's one list of filters, so threads each inside one (verify checks images on
    threads) restore each other's lists, and the last could leave every warning ignored
    for good."""

    def __init__(self):
        self._lock = threading.Lock()
        self._inside = 0
        self._saved: warnings.catch_warnings | None = None

    def __enter__(self) -> None:
        with self._lock:
            if not self._inside:
                self._saved = warnings.catch_warnings()
                self._saved.__enter__()
                warnings.simplefilter("ignore")
            self._inside += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._inside -= 1
            if not self._inside:
                self._saved.__exit__(None, None, None)
                self._saved = None


_PILLOW_WARNINGS_OFF = _WarningsOff()


def with_pillow(work: Callable, *args):
    """`work(*args)`, which uses Pillow, with Pillow's warnings off (on any thread:
    `_WarningsOff`) and without Pillow's process-wide pixel limit.

    `max_image_pixels` is the one limit, checked on the header before any decode on every
    path; `PIL.Image.MAX_IMAGE_PIXELS` (89 MP by default, an error past twice that, or
    whatever the user's program set) would be a second, hidden one. Pillow reads that
    global when it checks, so nothing overrides it for one call: when it refuses an image,
    `work` runs again with it lifted, under a lock so that concurrent calls restore the
    user's value, never each other's. Pillow is never touched otherwise, and other threads
    see no limit only for the moments an image past Pillow's limit is decoded here (one
    that `max_image_pixels` allowed: it is checked right after `Image.open`).
    """
    with _PILLOW_WARNINGS_OFF:  # Pillow's warnings (EXIF, palette) are not errors
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

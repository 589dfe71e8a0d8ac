"""One planned row in, one serialized `tf.train.Example` (or the reason it failed) out.

This is the only place that reads and encodes images, and both engines call it, which is
why their shards can be byte-identical. It is a pure function of the row and the options,
and imports neither TensorFlow nor Beam, so worker processes start fast.

Images are stored as their original bytes when TensorFlow can decode them as they are
(JPEG, PNG); other formats are converted losslessly to PNG. Unless `validate=False`, every
image is fully decoded once here, so every record written is known to decode.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import simplejpeg
from PIL import Image

from tfrecorder import fs
from tfrecorder.example import encode_example

IMAGE_FORMATS = ("auto", "jpeg", "png", "raw")

# Formats whose bytes tf.io.decode_image reads exactly as Pillow does (MPO is a JPEG with
# extra images appended; TensorFlow, like Pillow, decodes its first image).
_KEPT_AS_IS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png"}

# Channels tf.io.decode_image returns for stored bytes, by Pillow mode (measured).
_TF_CHANNELS = {"1": 1, "L": 1, "I": 1, "I;16": 1, "LA": 2, "RGB": 3, "YCbCr": 3,
                "CMYK": 3, "RGBA": 4}
_CHANNELS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}

# TFRecorder stored raw pixels as base64 with these characters (TensorFlow's web-safe
# alphabet), so `tf.io.decode_base64` reads them.
_BASE64_ALTCHARS = b"-_"


@dataclass(frozen=True)
class ImageOptions:
    """How images are stored; part of the plan, identical for every row.

    Attributes:
        image_format: "auto" keeps JPEG/PNG bytes and converts other formats to PNG
            (resized images become JPEG, or PNG when they have transparency); "jpeg" and
            "png" store every image in that format; "raw" stores base64 pixels as
            TFRecorder did.
        image_size: (height, width) to resize every image to, or None.
        max_image_side: shrink images whose longer side exceeds this (aspect kept).
        jpeg_quality: quality of re-encoded JPEGs.
        validate: fully decode every image, so corrupt files are rejected, not written.
    """

    image_format: str = "auto"
    image_size: tuple[int, int] | None = None
    max_image_side: int | None = None
    jpeg_quality: int = 90
    validate: bool = True

    def __post_init__(self):
        if self.image_format not in IMAGE_FORMATS:
            raise ValueError(
                f"image_format must be one of {IMAGE_FORMATS}, not {self.image_format!r}"
            )
        if self.image_size is not None and self.max_image_side is not None:
            raise ValueError("give image_size or max_image_side, not both")
        if self.image_size is not None:
            size = tuple(self.image_size)
            if len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
                raise ValueError(f"image_size must be (height, width) > 0, not {size!r}")
            object.__setattr__(self, "image_size", size)
        if self.max_image_side is not None and not (
            isinstance(self.max_image_side, int) and self.max_image_side > 0
        ):
            raise ValueError(f"max_image_side must be a positive int, not {self.max_image_side!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be in 1..100, not {self.jpeg_quality!r}")


class Row(NamedTuple):
    """What a worker needs to encode one row (small, so it pickles fast)."""

    position: int  # the row's position in the table; the key for rejections
    uri: str | None  # where to read the image (resolved); None: a table without images
    image_uri: str | None  # the URI as the user gave it, stored in the record
    label: int | list[int] | None  # a list for multi-label rows
    split: str  # TRAIN, VALIDATION or TEST
    inputs: Mapping = {}  # the input columns' values, as stored (never mutated)


class Rejection(NamedTuple):
    position: int
    reason: str


# Feature name -> dtype of the image features of every record with an image.
IMAGE_FEATURES = {
    "image": "string",
    "image_format": "string",
    "image_height": "int64",
    "image_width": "int64",
    "image_channels": "int64",
    "image_name": "string",
    "image_uri": "string",
}


def encode_row(row: Row, options: ImageOptions,
               read: Callable[[], bytes] | None = None) -> bytes | Rejection:
    """The serialized Example for `row`, or a Rejection that says why there is none.

    `read` returns the image's bytes (or raises what the store answered); by default the
    file is read now. The engines pass readers that fetched ahead (`prefetch`).
    """
    features = {**row.inputs, "split": row.split}
    if row.label is not None:
        features["label"] = row.label
    if row.uri is None:
        return encode_example(features)
    try:
        data = read() if read is not None else fs.read_bytes(row.uri)
    except Exception as e:  # any I/O failure is this row's problem, not the run's
        return Rejection(row.position, f"cannot read file: {fs.answer(e)}")
    if not data:
        return Rejection(row.position, "empty file (0 bytes)")
    try:
        image, stored_format, height, width, channels = _encode_image(data, options)
    except Image.DecompressionBombError as e:
        return Rejection(row.position, f"image too large: {e}")
    except Image.UnidentifiedImageError:
        return Rejection(row.position, "not an image, or an image format Pillow cannot read")
    except Exception as e:  # Pillow raises many types for corrupt data
        return Rejection(row.position, f"corrupt or truncated image: {_describe(e)}")
    features.update({
        "image": image,
        "image_format": stored_format,
        "image_height": height,
        "image_width": width,
        "image_channels": channels,
        "image_name": fs.basename(row.image_uri),
        "image_uri": row.image_uri,
    })
    return encode_example(features)


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}".strip().rstrip(":")


def _encode_image(data: bytes, options: ImageOptions) -> tuple[bytes, str, int, int, int]:
    """Returns (stored bytes, format name, height, width, channels)."""
    if data.startswith(SIGNATURES["jpeg"]):
        kept = _kept_jpeg(data, options)
        if kept is not None:
            return kept
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's warnings (EXIF, palette) are not errors
        image = Image.open(io.BytesIO(data))
        target = _target_size(image.size, options)
        kept_format = _KEPT_AS_IS.get(image.format)
        keep_bytes = target is None and kept_format is not None and (
            options.image_format in ("auto", kept_format)
        )
        if keep_bytes:
            channels = _tf_channels(image)
            if options.validate:
                image.load()
            width, height = image.size
            return data, kept_format, height, width, channels
        if target is not None and image.format == "JPEG":
            image.draft(image.mode if image.mode in ("L", "RGB") else "RGB", target)
        image.load()
        image = _normalized(image)
        if target is not None and image.size != target:
            image = image.resize(target, Image.Resampling.BICUBIC)
    width, height = image.size
    channels = _CHANNELS[image.mode]
    if options.image_format == "raw":
        pixels = base64.b64encode(image.tobytes(), altchars=_BASE64_ALTCHARS)
        return pixels, "raw", height, width, channels
    stored_format = _output_format(image, resized=target is not None, options=options)
    buffer = io.BytesIO()
    if stored_format == "jpeg":
        if image.mode not in ("L", "RGB"):
            image = image.convert("RGB")
            channels = 3
        image.save(buffer, "JPEG", quality=options.jpeg_quality)
    else:
        image.save(buffer, "PNG", compress_level=6)
    return buffer.getvalue(), stored_format, height, width, channels


# How files of each stored format begin (verify checks stored images against these).
SIGNATURES = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n"}

# libjpeg-turbo warnings that mean damaged pixels (libjpeg decodes such files anyway,
# filling what it lost with grey); other warnings are harmless quirks.
_DAMAGED_JPEG = ("premature end", "bad huffman code", "bad arithmetic code", "resync")


def _kept_jpeg(data: bytes, options: ImageOptions) -> tuple | None:
    """The fast path for the commonest case, a JPEG stored as it is.

    simplejpeg (libjpeg-turbo) reads the header in microseconds and decodes with
    TensorFlow's default fast IDCT, 1.5x faster than Pillow. It is also strict: it
    rejects corrupt data that Pillow silently decodes to grey blocks. None hands the
    image to Pillow: when it is to be resized, or simplejpeg declines it for a reason
    other than damage (a harmless warning, a variant it does not read), so that Pillow's
    full decode judges it.
    """
    if options.image_format not in ("auto", "jpeg") or options.image_size is not None:
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except Exception:  # not a JPEG simplejpeg reads; Pillow decides
        return None
    if options.max_image_side is not None and max(height, width) > options.max_image_side:
        return None
    if options.validate:
        try:
            simplejpeg.decode_jpeg(data, fastdct=True, fastupsample=True, strict=True)
        except Exception as error:  # libjpeg errors and strict-mode warnings
            if any(sign in str(error).lower() for sign in _DAMAGED_JPEG):
                raise
            return None
    # TensorFlow decodes grey JPEGs to one channel, colour (and CMYK) ones to three.
    return data, "jpeg", height, width, 1 if colorspace == "Gray" else 3


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


def _tf_channels(image: Image.Image) -> int:
    """Channels TensorFlow decodes from these bytes (palettes expand; tRNS adds alpha)."""
    if image.mode == "P":
        return 4 if "transparency" in image.info else 3
    return _TF_CHANNELS.get(image.mode, 3)


def _normalized(image: Image.Image) -> Image.Image:
    """The image in L, LA, RGB or RGBA: the modes every format and TensorFlow agree on."""
    if image.mode in _CHANNELS:
        return image
    if image.mode in ("P", "PA"):
        has_alpha = image.mode == "PA" or "transparency" in image.info
        return image.convert("RGBA" if has_alpha else "RGB")
    if image.mode in ("1", "I", "I;16", "I;16B", "I;16L", "F"):
        return image.convert("L")
    return image.convert("RGB")


def _output_format(image: Image.Image, resized: bool, options: ImageOptions) -> str:
    if options.image_format in ("jpeg", "png"):
        return options.image_format
    # auto: resized images become JPEG unless they carry transparency; conversions of
    # formats TensorFlow cannot read stay lossless.
    if resized and image.mode in ("L", "RGB"):
        return "jpeg"
    return "png"

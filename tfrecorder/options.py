"""Options of a conversion as frozen data, each checked once, when it is made.

Light on purpose (no Pillow, no pandas): the plan, the workers and the readers of a
manifest all hold these.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

IMAGE_FORMATS = ("auto", "jpeg", "png", "raw")

# Larger images are rejected unless the user raises ImageOptions.max_image_pixels: 100
# megapixels decode to 300 MB of RGB (a 10,000 x 10,000 scan), and far larger sizes are
# what a decompression bomb declares.
DEFAULT_MAX_IMAGE_PIXELS = 100_000_000


def is_int(value) -> bool:
    """An int (NumPy ints too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class ImageOptions:
    """How images are stored; part of the plan, identical for every row.

    Attributes:
        image_format: "auto" keeps JPEG/PNG bytes that TensorFlow decodes as they are and
            converts other images to PNG (resized images become JPEG, or PNG when they
            have transparency); "jpeg" and "png" store every image in that format; "raw"
            stores base64 pixels as TFRecorder did.
        image_size: (height, width) to resize every image to, or None.
        max_image_side: shrink images whose longer side exceeds this (aspect kept).
        jpeg_quality: quality of re-encoded JPEGs.
        validate: fully decode every image, strictly, so corrupt files are rejected, not
            written. Without it only headers are checked (and PNG chunks' CRCs).
        max_image_pixels: reject images that declare more pixels (width x height) than
            this, from their header, before anything is decoded (a decompression bomb
            declares billions in a few KB); None: no limit. It applies on every path,
            and it alone: Pillow's process-wide `PIL.Image.MAX_IMAGE_PIXELS` does not
            add a second limit.

    Bit depths are never clipped. 16-bit greyscale images (16-bit PNG, TIFF, PGM, and
    32-bit integer images whose values fit in 0..65535) stay 16-bit wherever the stored
    format is PNG: `tf.io.decode_png(..., dtype=tf.uint16)` reads them exactly, and the
    default uint8 decode gives `value >> 8`. Where 8 bits are forced (image_format "jpeg"
    or "raw", or a resized image stored as JPEG) the same rule applies, `value >> 8`, so
    every path gives the pixels TensorFlow's own uint8 decode would; Pillow reads 16-bit
    colour images (RGB, RGBA) as 8 bits by that rule too. Floating-point images, and
    integer ones with values outside 0..65535, are rejected: no lossless PNG holds them
    and their scale is unknown.
    """

    image_format: str = "auto"
    image_size: tuple[int, int] | None = None
    max_image_side: int | None = None
    jpeg_quality: int = 90
    validate: bool = True
    max_image_pixels: int | None = DEFAULT_MAX_IMAGE_PIXELS

    def __post_init__(self):
        if not (isinstance(self.image_format, str) and self.image_format in IMAGE_FORMATS):
            raise ValueError(f"image_format must be one of "
                             f"{', '.join(map(repr, IMAGE_FORMATS))}, not {self.image_format!r}")
        size = self.image_size
        if size is not None:
            if not (isinstance(size, (tuple, list)) and len(size) == 2
                    and all(is_int(v) and v > 0 for v in size)):
                raise ValueError(
                    f"image_size must be (height, width) with positive ints, not {size!r}")
            object.__setattr__(self, "image_size", (int(size[0]), int(size[1])))
        self._check_int("max_image_side", "a positive int (pixels) or None", minimum=1)
        self._check_int("jpeg_quality", "an int from 1 to 100", minimum=1, maximum=100,
                        optional=False)
        if not isinstance(self.validate, (bool, np.bool_)):
            raise ValueError(f"validate must be True or False, not {self.validate!r}")
        object.__setattr__(self, "validate", bool(self.validate))
        self._check_int("max_image_pixels", "a positive int (width x height) or None for "
                        "no limit", minimum=1)
        if self.image_size is not None and self.max_image_side is not None:
            raise ValueError(f"give image_size or max_image_side, not both (image_size="
                             f"{self.image_size!r}, max_image_side={self.max_image_side!r})")

    def _check_int(self, name: str, expected: str, minimum: int, maximum: int | None = None,
                   optional: bool = True) -> None:
        value = getattr(self, name)
        if value is None and optional:
            return
        if not (is_int(value) and minimum <= value and (maximum is None or value <= maximum)):
            raise ValueError(f"{name} must be {expected}, not {value!r}")
        object.__setattr__(self, name, int(value))  # a NumPy int would not go into JSON

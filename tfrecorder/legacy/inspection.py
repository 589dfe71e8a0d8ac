"""What TFRecorder 2.0's `check_tfrecords` wrote, which `inspect(tfrecord_dir=...)` writes
for the scripts that read it: a new folder `check-tfrecords-<timestamp>` in `output_dir`
(default "output"), holding `data.csv` (without our `image_file` column) and each image
under its own `image_name`, in the format its extension names.

`inspection` reads and writes the records; this is only how 2.0 named them, a `Naming`.
"""

from __future__ import annotations

import io
import os
import time

from tfrecorder.read.inspection import UNSAFE, Naming, base_name

# `inspect`'s docstring entry for the keyword (see `edge`).
DOCUMENTED = """\
        tfrecord_dir: TFRecorder 2.0's name for `path`. Called so, `inspect` writes what
            2.0's `check_tfrecords` wrote, for the scripts that read it: a new folder
            `check-tfrecords-<timestamp>` in `output_dir` (default "output"), holding
            `data.csv` and each image under its own `image_name`."""


class CheckTfrecords(Naming):
    """2.0's `check_tfrecords` names."""

    csv_file = "data.csv"
    image_file_column = False

    def folder(self, output_dir: str | os.PathLike | None) -> str:
        folder = os.path.join(os.fspath(output_dir or "output"), "check-tfrecords-"
                              + time.strftime("%Y%m%d-%H%M%S"))
        os.makedirs(folder)
        return folder

    def image_file(self, image_name: bytes, safe_name: str, image: bytes,
                   folder: str) -> tuple[str, bytes]:
        """By its own name, as 2.0 wrote it (the first of a name wins)."""
        file_name = _own_file_name(image_name, safe_name, folder)
        return file_name, _as_named(image, file_name)


CHECK_TFRECORDS = CheckTfrecords()


def _own_file_name(image_name: bytes, safe_name: str, folder: str) -> str:
    """The image's own base name where it is safe and free, else `safe_name`."""
    name = base_name(image_name)
    if UNSAFE.sub("_", name) != name or name.startswith(".") or \
            os.path.lexists(os.path.join(folder, name)):
        return safe_name
    return name


def _as_named(image: bytes, file_name: str) -> bytes:
    """The image in the format its name's extension says (2.0 saved every image so)."""
    from PIL import Image

    wanted = Image.registered_extensions().get(os.path.splitext(file_name)[1].lower())
    with Image.open(io.BytesIO(image)) as opened:
        if wanted is None or wanted == opened.format:
            return image
        buffer = io.BytesIO()
        (opened.convert("RGB") if wanted == "JPEG" else opened).save(buffer, wanted)
    return buffer.getvalue()

"""`inspect()`: a few records as files a person can look at.

The file names come from the records' `image_name`, which is whatever the source table
held, so they are treated as hostile: reduced to a safe base name, prefixed with the
record's index (names cannot collide), and checked to land inside the output folder.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile

from tfrecorder.dataset import read_manifest
from tfrecorder.load import decode_image, feature_spec, shard_files
from tfrecorder.tfrecord import open_read, read_records

CSV_FILE = "records.csv"
_EXTENSIONS = {"jpeg": ".jpg", "png": ".png", "raw": ".png"}  # raw pixels are saved as PNG
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 100  # characters of the image name kept in a file name


def inspect(path: str | os.PathLike, split: str = "train", num_records: int = 5,
            output_dir: str | os.PathLike | None = None) -> str:
    """Writes the first records of a split as files: their images, and their other
    features in `records.csv` (one row per record, with the `image_file` it wrote).

    Args:
        path: the dataset folder (local or gs://).
        split: "train", "validation" or "test".
        num_records: how many records: the first of the split, in shard order.
        output_dir: a local folder to write into (created if needed); by default a new
            temporary folder.

    Returns:
        The folder written to. JPEG and PNG images are written as they are stored; raw
        pixels are written as PNG. Each file is named `{index:05d}-{image name}.{ext}`.
    """
    if num_records < 0:
        raise ValueError(f"num_records must be 0 or more, not {num_records!r}")
    path = os.fspath(path)
    manifest = read_manifest(path)
    files = shard_files(path, manifest, split)
    output_dir = (tempfile.mkdtemp(prefix="tfrecorder-inspect-") if output_dir is None
                  else os.fspath(output_dir))
    os.makedirs(output_dir, exist_ok=True)

    columns = [name for name in manifest["features"] if name != "image"]
    spec = feature_spec(manifest)
    rows = []
    for index, record in enumerate(_first_records(files, manifest.get("compression"),
                                                  num_records)):
        features = {name: value.numpy() for name, value in _parse(record, spec).items()}
        file_name = _safe_file_name(index, features.get("image_name", b""),
                                    features.get("image_format", b""))
        with open(_inside(output_dir, file_name), "wb") as f:
            f.write(_image_file_bytes(features))
        rows.append([_cell(features[name]) for name in columns] + [file_name])

    with open(os.path.join(output_dir, CSV_FILE), "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns + ["image_file"])
        writer.writerows(rows)
    return output_dir


def _first_records(files: list[str], compression: str | None, count: int):
    """The first `count` serialized records across `files`, in order."""
    if count == 0:
        return
    for file in files:
        with open_read(file, compression) as stream:
            for record in read_records(stream):
                yield record
                count -= 1
                if count == 0:
                    return


def _parse(record: bytes, spec: dict) -> dict:
    import tensorflow as tf

    return tf.io.parse_single_example(record, spec)


def _image_file_bytes(features: dict) -> bytes:
    """The stored bytes for JPEG and PNG (and anything unknown); raw pixels as a PNG."""
    if features.get("image_format") != b"raw":
        return features["image"]
    from PIL import Image

    pixels = decode_image(features).numpy()
    image = Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _safe_file_name(index: int, image_name: bytes, image_format: bytes) -> str:
    """`{index:05d}-{stem}{ext}`: only [A-Za-z0-9._-], no folders, no leading dot, never
    empty, and unique by its index; the extension comes from the format, not the name."""
    name = image_name.decode("utf-8", errors="replace")
    base = re.split(r"[/\\]", name)[-1]  # both separators, whatever the platform
    stem = os.path.splitext(base)[0]
    stem = _UNSAFE.sub("_", stem).lstrip(".")[:_MAX_STEM] or "image"
    extension = _EXTENSIONS.get(image_format.decode("ascii", errors="replace"), ".bin")
    return f"{index:05d}-{stem}{extension}"


def _inside(folder: str, file_name: str) -> str:
    """The path of `file_name` in `folder`, refusing any that would resolve elsewhere."""
    real_folder = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(real_folder, file_name))
    if os.path.dirname(target) != real_folder:
        raise ValueError(f"refusing to write {file_name!r} outside {folder!r}")
    return target


def _cell(value) -> str | int | float:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value.item() if hasattr(value, "item") else value

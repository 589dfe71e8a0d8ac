"""`inspect()`: a few records as files a person can look at.

The file names come from the records' `image_name`, which is whatever the source table
held, so they are treated as hostile: reduced to a safe base name, prefixed with the
record's index (names cannot collide), and checked to land inside the output folder.
Text cells of records.csv are as hostile: one a spreadsheet would run as a formula
(starting with =, +, -, @, a tab or a carriage return) gets a leading single quote.

Columns are the features as stored, under the keys of the dataset's layout; the image,
and the ids that label names are looked up for, are read through the layout's read form
(`Layout.canonical`), so a tf_models record's 1-based object classes get the right names.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import tempfile

from tfrecorder._tensorflow import check_installed, tensorflow
from tfrecorder.format.layouts import OBJECT_LABEL, layout_of
from tfrecorder.format.manifest import LABEL, Manifest, read_manifest
from tfrecorder.option_checks import checked_int
from tfrecorder.read.decoding import decode_image
from tfrecorder.read.shards import shard_files, shard_records
from tfrecorder.storage import fs

CSV_FILE = "records.csv"
_EXTENSIONS = {"jpeg": ".jpg", "png": ".png", "raw": ".png"}  # raw pixels are saved as PNG
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 100  # characters of the image name kept in a file name
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets may run as a formula
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # ...but read as a number


def inspect(path: str | os.PathLike, split: str = "train", num_records: int = 5,
            output_dir: str | os.PathLike | None = None) -> str:
    """Writes the first records of a split as files: their images, and their other
    features in `records.csv`, one row per record, under their stored keys: lists as
    JSON, label (or object class) and categorical ids followed by their names (columns
    `{label}_name` and `{feature}_value`), and the `image_file` it wrote. A dataset
    without images gives records.csv alone.

    Args:
        path: the dataset folder: local, or a gs://, s3:// (or other fsspec) URI.
        split: "train", "validation" or "test".
        num_records: how many records: the first of the split, in shard order.
        output_dir: a local folder to write into (created if needed); by default a new
            temporary folder.

    Returns:
        The folder written to. JPEG and PNG images are written as they are stored; raw
        pixels are written as PNG. Each file is named `{index:05d}-{image name}.{ext}`.
        Text cells that a spreadsheet would read as a formula start with a single quote.
    """
    return write_first_records(path, split, num_records, output_dir, Naming())


class Naming:
    """How `inspect` names what it writes: a folder, a CSV file with an `image_file`
    column, and each image by its index. Another program's names (TFRecorder 2.0's
    `check_tfrecords`, in `legacy/`) are a subclass, so that `inspect` has one way of
    reading and writing records."""

    csv_file = CSV_FILE
    image_file_column = True  # records.csv names each record's image file

    def folder(self, output_dir: str | os.PathLike | None) -> str:
        """The folder to write into, created."""
        folder = (tempfile.mkdtemp(prefix="tfrecorder-inspect-") if output_dir is None
                  else os.fspath(output_dir))
        os.makedirs(folder, exist_ok=True)
        return folder

    def image_file(self, image_name: bytes, safe_name: str, image: bytes,
                   folder: str) -> tuple[str, bytes]:
        """The image's file name in `folder` (`safe_name`: `{index:05d}-{stem}{ext}`),
        and its bytes."""
        return safe_name, image


def write_first_records(path: str, split: str, num_records: int,
                        output_dir: str | os.PathLike | None, naming: Naming) -> str:
    """`inspect`, naming what it writes by `naming`."""
    checked_int("num_records", num_records, "an int of 0 or more", minimum=0, optional=False)
    check_installed("tfrecorder.inspect()", "tfrecorder.show() draws a split's images "
                    "without it.")
    manifest = read_manifest(path)
    files = shard_files(path, manifest, split)
    output_dir = naming.folder(output_dir)

    has_images = manifest.has_images
    layout = layout_of(manifest)
    columns = [name for name in manifest.features if name != layout.key("image")]
    vocabularies = _vocabularies(manifest)
    header = []
    for name in columns:
        header.append(name)
        if name in vocabularies:
            header.append(_unused(f"{name}_name" if vocabularies[name][0] else
                                  f"{name}_value", manifest.features))
    spec = manifest.parse_spec()
    rows = []
    for index, record in enumerate(_first_records(files, manifest.compression,
                                                  num_records)):
        parsed = _parse(record, spec)
        features = {name: _plain(value) for name, value in parsed.items()}
        canonical = {name: _plain(value) for name, value in layout.canonical(parsed).items()}
        row = []
        for name in columns:
            row.append(_cell(features[name]))
            if name in vocabularies:
                read_as, vocabulary = vocabularies[name]
                ids = canonical[read_as] if read_as else features[name]
                row.append(_cell(_names(ids, vocabulary)))
        features = canonical  # the image, by canonical names
        if has_images:
            image_name = features.get("image_name", b"")
            file_name = _safe_file_name(index, image_name, features.get("image_format", b""))
            image = _image_file_bytes(features)
            file_name, image = naming.image_file(image_name, file_name, image, output_dir)
            if naming.image_file_column:
                row.append(file_name)
            fs.write_bytes(_inside(output_dir, file_name), image)
        rows.append(row)

    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header + (["image_file"] if has_images and naming.image_file_column
                              else []))
    writer.writerows(rows)
    fs.write_bytes(_inside(output_dir, naming.csv_file),
                   text.getvalue().encode("utf-8"))
    return output_dir


def _vocabularies(manifest: Manifest) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """By stored key: the names of the ids of a label or a detection record's object
    classes (text labels), with the canonical name their ids are read by; and of
    categorical inputs (None: read as stored)."""
    found = {name: (None, manifest.features[name].vocabulary) for name in manifest.inputs
             if manifest.features[name].vocabulary is not None}
    labels = manifest.labels
    layout = layout_of(manifest)
    if labels is not None and labels.vocabulary is not None:
        for name in (LABEL, OBJECT_LABEL):
            if layout.key(name) in manifest.features:
                found[layout.key(name)] = (name, labels.vocabulary)
    return found


def _unused(name: str, features) -> str:
    """`name`, or with underscores added until no feature has it."""
    while name in features:
        name += "_"
    return name


def _first_records(files: list[str], compression: str | None, count: int):
    """The first `count` serialized records across `files`, in order."""
    if count == 0:
        return
    for file in files:
        with contextlib.closing(shard_records(file, compression)) as records:
            for record in records:
                yield record
                count -= 1
                if count == 0:
                    return


def _parse(record: bytes, spec: dict) -> dict:
    tf = tensorflow()

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
    stem = os.path.splitext(base_name(image_name))[0]
    stem = UNSAFE.sub("_", stem).lstrip(".")[:_MAX_STEM] or "image"
    extension = _EXTENSIONS.get(image_format.decode("ascii", errors="replace"), ".bin")
    return f"{index:05d}-{stem}{extension}"


def base_name(image_name: bytes) -> str:
    """The last part of an image's name, split at both separators, whatever the platform."""
    return re.split(r"[/\\]", image_name.decode("utf-8", errors="replace"))[-1]


def _inside(folder: str, file_name: str) -> str:
    """The path of `file_name` in `folder`, refusing a name that leads elsewhere. Files
    are then written by `fs.write_bytes`, which replaces a link planted at that path
    instead of writing through it."""
    if os.path.basename(file_name) != file_name or file_name in ("", ".", ".."):
        raise ValueError(f"refusing to write {file_name!r} outside {folder!r}")
    return os.path.join(folder, file_name)


def _plain(value):
    """A parsed feature as plain Python: a value, or (nested) lists of values, whether
    TensorFlow parsed it dense or ragged."""
    tf = tensorflow()

    if isinstance(value, tf.RaggedTensor):
        return value.to_list()
    value = value.numpy()
    return value.tolist() if hasattr(value, "tolist") else value  # a string is bytes


def _names(ids, vocabulary: list[str]):
    """The vocabulary's names for `ids` (one id or a list); None for an id outside it."""
    if isinstance(ids, list):
        return [_names(i, vocabulary) for i in ids]
    return vocabulary[ids] if 0 <= ids < len(vocabulary) else None


def _cell(value) -> str | int | float:
    """A CSV cell: numbers as they are, lists as JSON, text safe from spreadsheets."""
    if isinstance(value, list):
        return json.dumps(_readable(value), ensure_ascii=False)
    value = _readable(value)
    if value is None:
        return ""
    return _no_formula(value) if isinstance(value, str) else value


def _readable(value):
    """Text decoded, and float32 values by their shortest decimals (0.1, not
    0.10000000149011612), inside lists too."""
    import numpy as np

    if isinstance(value, list):
        return [_readable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, float):
        return float(str(np.float32(value)))
    return value


def _no_formula(text: str) -> str:
    """`text`, with a leading single quote if a spreadsheet would run it as a formula."""
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text

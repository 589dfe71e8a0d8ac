"""Datasets written by Google's TFRecorder 2.0, and `migrate`, which makes a tfrecorder
dataset of one.

TFRecorder 2.0 (github.com/google/tensorflow-recorder, 2020) ran a Beam pipeline with
TensorFlow Transform into `OUTPUT_DIR/tfrecorder-<time>-<label>/`:

    train-00000-of-00001.tfrecord.gz     gzip unless compression=None; also validation-,
    validation-00000-of-00001.tfrecord.gz  test- (Beam's names: -SSSSS-of-NNNNN)
    discarded-data-00000-of-00001        rows it could not use, as text
    transformed_metadata/schema.pbtxt    the records' TF Metadata schema (text proto)
    transform_fn/assets/vocab_compute_and_apply_vocabulary_vocabulary
                                         the label vocabulary: one per line, most frequent
                                         first (ties in reverse byte order); a label's id
                                         is its line number. Built from TRAIN only, so a
                                         label seen only in another split has id -1.

Its records carry `image` (web-safe base64 of Pillow's `tobytes()`, padded), the int64s
`image_height`, `image_width`, `image_channels`, `image_name` (the file's base name),
`label` (int64) and `split` ("TRAIN"), and any other column as a scalar. Ours carry the
same, plus `image_format` and `image_uri`, and `load` reads images by `image_format`, so
the shards cannot be reused as they are: `migrate` reads every record and writes it again
with those two added (`raw`, and the name, as 2.0 kept no more of the URI). The pixels,
the label ids, the vocabulary's order, the splits and the shards' order stay as 2.0 wrote
them.

This module writes (it claims the new folder through `output`); telling such a folder
from others is `detect`'s, which readers use.
"""

from __future__ import annotations

import ast
import base64
import binascii
import csv
import io
import logging
import os
import re
import zlib
from collections import Counter
from dataclasses import dataclass

from tfrecorder._tensorflow import check_installed, tensorflow
from tfrecorder._version import __version__
from tfrecorder.errors import (
    ConversionAborted,
    Option,
    OptionError,
    SchemaError,
    StorageError,
    VerificationError,
)
from tfrecorder.format import manifest
from tfrecorder.format.example import encode_example
from tfrecorder.format.tfrecord import CorruptRecordError, ShardWriter, open_read, read_records
from tfrecorder.legacy.detect import SCHEMA, TRANSFORM_FN, is_legacy_dataset
from tfrecorder.storage import fs
from tfrecorder.write import output
from tfrecorder.write.rows import rejection_reasons

logger = logging.getLogger(__name__)

_ASSETS = (TRANSFORM_FN, "assets")
_VOCABULARY = re.compile(r"^vocab_compute_and_apply_vocabulary(?:_\d+)?_vocabulary$")
_SHARD = re.compile(r"^(train|validation|test)-(\d{5,})-of-(\d{5,})\.tfrecord(\.gz)?$")
# 2.0's features of an image, in ours but `image_format` and `image_uri`.
_IMAGE = ("image", "image_height", "image_width", "image_channels", "image_name")
_DTYPES = {"INT": "int64", "FLOAT": "float32", "BYTES": "string"}
_REJECTED_COLUMNS = ("shard", "record", "split", "image_name", "label", "reason")


# --- reading what 2.0 wrote ----------------------------------------------------------------

@dataclass(frozen=True)
class _OldFolder:
    """What a 2.0 folder holds, read from its schema, vocabulary and file names."""

    features: dict[str, str]  # 2.0's feature -> our dtype, as its schema lists them
    label: str | None  # the feature holding the label, if any
    vocabulary: tuple[str, ...] | None  # text labels' vocabulary, in 2.0's id order
    shards: dict[manifest.Split, list[str]]  # file names by split, in index order
    compression: str | None

    @property
    def has_images(self) -> bool:
        return "image" in self.features

    @property
    def inputs(self) -> list[str]:
        return [name for name in self.features
                if name not in (*_IMAGE, manifest.SPLIT) and name != self.label]


def _read_old_folder(old_dir: str) -> _OldFolder:
    schema = _parse_text_proto(_read_text(old_dir, *SCHEMA))
    features, categorical = {}, []
    for feature in schema.get("feature", []):
        name = _scalar(feature, "name")
        kind = _scalar(feature, "type")
        shape = feature.get("shape")
        if kind not in _DTYPES or not shape or shape[0].get("dim"):
            raise SchemaError(
                f"the TFRecorder 2.0 schema in {old_dir!r} has feature {name!r} of type "
                f"{kind} and shape {shape}; migrate reads scalar INT, FLOAT and BYTES "
                "features, which is all TFRecorder 2.0 wrote. Convert the source table "
                "again with tfrecorder.convert.", column=name)
        features[name] = _DTYPES[kind]
        domain = feature.get("int_domain")
        if domain and _scalar(domain[0], "is_categorical") == "true":
            categorical.append(name)
    present = [name for name in _IMAGE if name in features]
    if present and len(present) != len(_IMAGE):
        raise SchemaError(
            f"the TFRecorder 2.0 schema in {old_dir!r} has {present} but not "
            f"{sorted(set(_IMAGE) - set(present))}: it is not what TFRecorder 2.0 writes. "
            "Convert the source table again with tfrecorder.convert.")
    if len(categorical) > 1:
        raise SchemaError(
            f"the TFRecorder 2.0 dataset in {old_dir!r} has {len(categorical)} text labels "
            f"({categorical}); migrate reads one. Convert the source table again with "
            "tfrecorder.convert.", column=categorical[1])
    integer_label = features.get(manifest.LABEL) == "int64"
    label = categorical[0] if categorical else manifest.LABEL if integer_label else None
    vocabulary = _read_vocabulary(old_dir) if categorical else None
    shards, compression = _find_shards(old_dir)
    return _OldFolder(features, label, vocabulary, shards, compression)


def _read_text(old_dir: str, *parts: str) -> str:
    path = fs.join(old_dir, *parts)
    try:
        return fs.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"the TFRecorder 2.0 dataset in {old_dir!r} has no "
                                f"{'/'.join(parts)}: copy it whole from where 2.0 wrote "
                                "it.") from None
    except UnicodeDecodeError as error:
        raise VerificationError(f"{path} is not UTF-8 text ({error}): the TFRecorder 2.0 "
                                "dataset is damaged. Restore it from a copy.") from None


def _read_vocabulary(old_dir: str) -> tuple[str, ...]:
    """The text labels, one per line, in 2.0's id order (never re-sorted)."""
    assets = fs.join(old_dir, *_ASSETS)
    names = [name for name in fs.list_dir(assets) if _VOCABULARY.match(name)]
    if len(names) != 1:
        raise VerificationError(
            f"{assets} holds {len(names)} label vocabularies ({names}), where TFRecorder "
            "2.0 writes one (vocab_compute_and_apply_vocabulary_vocabulary) for its text "
            "label: restore the folder from a copy.")
    text = _read_text(old_dir, *_ASSETS, names[0])
    return tuple(text.removesuffix("\n").split("\n")) if text else ()


def _find_shards(old_dir: str) -> tuple[dict[manifest.Split, list[str]], str | None]:
    """The shards by split, each split's complete (every index of its `-of-N`)."""
    found: dict[manifest.Split, dict[int, str]] = {}
    counts: dict[manifest.Split, set[int]] = {}
    suffixes = set()
    for name in fs.list_dir(old_dir):
        match = _SHARD.match(name)
        if match:
            split = manifest.Split(match[1])
            found.setdefault(split, {})[int(match[2])] = name
            counts.setdefault(split, set()).add(int(match[3]))
            suffixes.add(match[4] or "")
    if not found:
        raise FileNotFoundError(
            f"the TFRecorder 2.0 dataset in {old_dir!r} holds no shards "
            "(train-00000-of-00001.tfrecord.gz and the like): copy it whole from where "
            "2.0 wrote it.")
    if len(suffixes) > 1:
        raise VerificationError(f"{old_dir!r} holds both gzipped and plain shards: it "
                                "mixes two runs of TFRecorder 2.0. Keep one run's shards.")
    shards = {}
    for split in manifest.SPLITS:
        if split not in found:
            continue
        total = max(counts[split])
        missing = sorted(set(range(total)) - set(found[split]))
        if len(counts[split]) > 1 or missing or len(found[split]) != total:
            raise VerificationError(
                f"the {split} shards of the TFRecorder 2.0 dataset in {old_dir!r} are "
                f"incomplete or from several runs (indexes {sorted(found[split])} of "
                f"{sorted(counts[split])}): restore the folder from a copy.")
        shards[split] = [found[split][index] for index in range(total)]
    return shards, "gzip" if suffixes == {".gz"} else None


_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[{}:<>]|[^\s{}:<>"\']+')


def _parse_text_proto(text: str) -> dict:
    """A text-format protobuf as nested dicts: field -> list of values (strings, with
    quoted ones unquoted, or dicts for messages). Enough for a TF Metadata schema."""
    text = "\n".join(line.split("#", 1)[0] if '"' not in line else line
                     for line in text.splitlines())
    tokens = _TOKEN.findall(text)
    position = 0

    def message(end: str | None) -> dict:
        nonlocal position
        fields: dict[str, list] = {}
        while position < len(tokens) and tokens[position] != end:
            name = tokens[position]
            position += 1
            if position < len(tokens) and tokens[position] == ":":
                position += 1
            if position < len(tokens) and tokens[position] in ("{", "<"):
                close = "}" if tokens[position] == "{" else ">"
                position += 1
                value = message(close)
                position += 1
            elif position < len(tokens):
                value = tokens[position]
                if value[:1] in "\"'":
                    value = ast.literal_eval(value)
                position += 1
            else:
                raise ValueError(f"{name!r} has no value")
            fields.setdefault(name, []).append(value)
        if end is not None and position >= len(tokens):
            raise ValueError(f"a message is not closed with {end!r}")
        return fields

    try:
        return message(None)
    except (ValueError, SyntaxError) as error:
        raise VerificationError(f"transformed_metadata/schema.pbtxt is not a text "
                                f"protobuf ({error}): restore the TFRecorder 2.0 dataset "
                                "from a copy.") from None


def _scalar(fields: dict, name: str) -> str | None:
    values = fields.get(name)
    return values[0] if values and isinstance(values[0], str) else None


# --- migrating -----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rejection:
    shard: str
    record: int
    split: str
    image_name: str
    label: str
    reason: str


def migrate(old_dir: str | os.PathLike, new_dir: str | os.PathLike, *,
            overwrite: bool = False) -> manifest.Manifest:
    """Writes a tfrecorder dataset into `new_dir` from a TFRecorder 2.0 dataset.

    Every record is read and written again as `image_format="raw"` (2.0's base64 pixels,
    untouched), with `image_uri` set to 2.0's `image_name`, since 2.0 kept no more of it.
    Label ids and the vocabulary's order are 2.0's (most frequent first, not sorted), so
    a model trained on the old dataset reads the new one the same. Shards keep their
    names, order and compression. Records 2.0 could not have read back go to
    `rejected.csv` with the reason: a label it left out of its vocabulary (id -1), or an
    image whose bytes do not fill its recorded shape (2.0 stored RGBA, palette and
    16-bit images so).

    Args:
        old_dir: the 2.0 run folder (holding `transform_fn/`), local or a bucket URI.
        new_dir: the folder to write, as `convert`'s output_dir.
        overwrite: replace a dataset already in `new_dir`.

    Returns:
        The new dataset's manifest.

    Raises:
        FileNotFoundError: `old_dir` is not a TFRecorder 2.0 dataset.
        VerificationError: a file of `old_dir` is damaged; nothing is left in `new_dir`.
        SchemaError: the 2.0 schema has features 2.0 never wrote.
        DatasetExistsError: `new_dir` holds a dataset and `overwrite` is False.
    """
    old_dir, new_dir = os.fspath(old_dir), os.fspath(new_dir)
    if not is_legacy_dataset(old_dir):
        fs.check_access([old_dir])
        raise FileNotFoundError(
            f"{old_dir!r} is not a TFRecorder 2.0 dataset: it has no transform_fn/ and "
            f"{'/'.join(SCHEMA)}. Pass the folder 2.0 wrote its shards to "
            "(OUTPUT_DIR/tfrecorder-<time>-convert).")
    if _same_folder(old_dir, new_dir):
        raise OptionError(f"new_dir {new_dir!r} is old_dir: migrate writes a new dataset "
                          "beside the old one. Choose another ", Option("new_dir"),
                          ".", option="new_dir")
    check_installed("tfrecorder.migrate()")  # before a file is written
    old = _read_old_folder(old_dir)
    run_id = output.new_run_id()
    # One request per bucket, before any shard is read: credentials, buckets, permissions.
    fs.check_access([old_dir], new_dir, f".tfrecorder-probe-{run_id}")
    with output.claim(new_dir, run_id, overwrite=overwrite, resume=False) as folder:
        folder.clear(folder.existing)
        try:
            written = _write(old_dir, old, folder)
        except BaseException:
            folder.clean_up(keep_committed=False)
            logger.warning("Migration stopped; removed the files it wrote. No dataset was "
                           "written to %s.", new_dir)
            raise
    logger.info("Migrated %s to %s: %d records, %d rejected.", old_dir, new_dir,
                written.num_records, written.rejected.num_rows)
    return written


def _same_folder(a: str, b: str) -> bool:
    if fs.is_remote(a) or fs.is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(fs.local_path(a)) == os.path.realpath(fs.local_path(b))


def _write(old_dir: str, old: _OldFolder, folder) -> manifest.Manifest:
    """Writes every shard, then rejected.csv, then the manifest, into the claimed folder."""
    splits, rejections, largest_label = {}, [], -1
    for split, names in old.shards.items():
        shards = []
        for index, name in enumerate(names):
            new_name = manifest.shard_filename(split, index, len(names), old.compression)
            with ShardWriter(folder.uri(new_name), folder.temp_suffix,
                             old.compression) as writer:
                for record, label in _records(old_dir, name, split, old, rejections):
                    writer.write(record)
                    largest_label = max(largest_label, -1 if label is None else label)
            shards.append(manifest.ShardInfo(new_name, writer.num_records,
                                             writer.num_bytes, writer.sha256,
                                             manifest.index_filename(new_name) or ""))
        info = manifest.SplitInfo.of(tuple(shards),
                                     sum(r.split == split.stored for r in rejections))
        if info.num_records:
            splits[split] = info
        else:  # every record rejected: like convert, no split without records
            fs.delete([folder.uri(shard.file) for shard in shards])
    num_records = sum(info.num_records for info in splits.values())
    if not num_records:
        reasons = Counter(r.reason for r in rejections).most_common(3)
        raise ConversionAborted(
            f"every one of the {len(rejections)} records of {old_dir!r} was rejected "
            f"({'; '.join(f'{n} x {reason}' for reason, n in reasons) or 'no records'}): "
            "nothing to migrate. Convert the source images again with tfrecorder.convert.")
    folder.write_bytes(manifest.REJECTED, _rejected_csv(rejections))
    finished = manifest.Manifest(
        compression=old.compression, features=_features(old),
        num_source_rows=num_records + len(rejections),
        options={"image_format": "raw", "compression": old.compression,
                 "migrated_from": "TFRecorder 2.0", "source": old_dir},
        labels=_labels(old, largest_label), splits=splits,
        rejected=manifest.Rejected(manifest.REJECTED, len(rejections),
                                   rejection_reasons(rejections)),
        created_by=f"tfrecorder {__version__} (migrate from TFRecorder 2.0)")
    folder.write_bytes(manifest.MANIFEST, finished.to_bytes())
    return finished


def _features(old: _OldFolder) -> dict[str, manifest.Feature]:
    """Ours, in the order `convert` lists them: image, label and split, then inputs."""
    found = dict(manifest.IMAGE_FEATURES) if old.has_images else {}
    found.update(manifest.record_feature_types(old.label is not None, multi_label=False))
    found.update({name: manifest.Feature(old.features[name]) for name in old.inputs})
    return found


def _labels(old: _OldFolder, largest_label: int) -> manifest.Labels | None:
    """2.0's vocabulary as it is; for integer labels, as `convert` has them, the
    largest id + 1 classes."""
    if old.label is None:
        return None
    if old.vocabulary is not None:
        return manifest.Labels("text", old.vocabulary, num_classes=len(old.vocabulary))
    return manifest.Labels("integer", None, num_classes=largest_label + 1)


def _records(old_dir: str, name: str, split: manifest.Split, old: _OldFolder,
             rejections: list):
    """Our records (with their label id) for the records of one 2.0 shard; those 2.0
    could not have read back go to `rejections`. A damaged shard is a VerificationError
    naming it."""
    from google.protobuf.message import DecodeError

    tensorflow()  # quietly, before its protocol buffers import it
    from tensorflow.core.example.example_pb2 import Example  # TensorFlow: 2.0's users have it

    path = fs.join(old_dir, name)
    number = 0
    try:
        with open_read(path, old.compression) as stream:
            for number, serialized in enumerate(read_records(stream)):
                values = _values(Example.FromString(serialized))
                reason = _problem(values, split, old)
                if reason is None:
                    label = values[old.label][0] if old.label is not None else None
                    yield _our_record(values, split, old, label), label
                else:
                    rejections.append(_Rejection(
                        name, number, split.stored, _text(values.get("image_name")),
                        str(_first(values.get(old.label or ""), "")), reason))
    except StorageError:  # the store failed, not the shard
        raise
    except (CorruptRecordError, DecodeError, OSError, EOFError, zlib.error) as error:
        raise VerificationError(
            f"{path} is damaged ({type(error).__name__}: {error}) near record {number}: "
            "restore the TFRecorder 2.0 dataset from a copy, or convert its source images "
            "again with tfrecorder.convert. Nothing was written.") from None


def _values(example) -> dict[str, list]:
    """A parsed Example's features: name -> list of values."""
    found = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        found[key] = list(getattr(feature, kind).value) if kind else []
    return found


def _first(values, default=None):
    return values[0] if values else default


def _text(values) -> str:
    value = _first(values, b"")
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _problem(values: dict[str, list], split: manifest.Split, old: _OldFolder) -> str | None:
    """Why 2.0 could not have read this record back, or None."""
    for name in old.features:
        if len(values.get(name, ())) != 1:
            return (f"{len(values.get(name, ()))} values of {name!r}, where TFRecorder 2.0's "
                    "schema has one")
    stored = values.get(manifest.SPLIT, [split.stored.encode()])[0]
    if stored != split.stored.encode():
        return f"split {stored!r} in a {split} shard"
    if old.label is not None:
        label = values[old.label][0]
        size = len(old.vocabulary) if old.vocabulary is not None else None
        if label < 0 or (size is not None and label >= size):
            return (f"label id {label}, outside TFRecorder 2.0's vocabulary of {size}: it "
                    "held only the labels of TRAIN, so a label seen only in another split "
                    "lost its name" if size is not None else
                    f"label id {label}: ids are 0 or more")
    if old.has_images:
        height, width, channels = (values[k][0] for k in _IMAGE[1:4])
        try:
            size = len(base64.b64decode(values["image"][0], altchars=manifest.BASE64_ALTCHARS,
                                        validate=True))
        except binascii.Error as error:
            return f"raw pixels that are not web-safe base64: {error}"
        if size != height * width * channels or height <= 0 or width <= 0:
            return (f"{size} bytes of pixels for a {height}x{width} image with {channels} "
                    "channels: TFRecorder 2.0 stored RGBA, palette and 16-bit images so, "
                    "and they cannot be read back. Convert the source image again")
    return None


def _our_record(values: dict[str, list], split: manifest.Split, old: _OldFolder,
                label) -> bytes:
    """The record as `convert` writes it: 2.0's values, untouched, under our names, with
    `image_format` and `image_uri` added."""
    inputs = {name: values[name][0] for name in old.inputs}
    features = manifest.record_values(split, label, inputs)
    if old.has_images:
        name = _text(values["image_name"])
        height, width, channels = (values[k][0] for k in _IMAGE[1:4])
        features.update(manifest.image_features(values["image"][0], "raw", height, width,
                                                channels, name))
    return encode_example(features)


def _rejected_csv(rejections: list[_Rejection]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(_REJECTED_COLUMNS)
    for r in rejections:
        writer.writerow([r.shard, r.record, r.split, r.image_name, r.label, r.reason])
    return buffer.getvalue().encode()

"""`verify()`: prove a dataset on disk is exactly what its manifest says.

Checks run in three layers, cheapest first, each on what passed the one before:

1. files: every shard the manifest lists is there, and no other file a run writes (an
   unlisted shard, a crashed run's `*.tmp-*` file) is, since a glob would pick it up;
2. framing: every record's length and data checksum (`read_records`, which names the byte
   offset of a bad one), and every count and size against the manifest;
3. images: every record parses with the manifest's feature spec and its image decodes to
   the recorded shape. Decoding is nearly all of the cost, so it runs as one `tf.data`
   pipeline (a parallel map) that only says which records failed; those few are then
   decoded again, one by one, to say why. A shard whose framing is broken is not decoded.

Every problem is collected as a sentence naming the file, so one run lists them all.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from tfrecorder import fs
from tfrecorder.dataset import MANIFEST, dataset_files, read_manifest
from tfrecorder.errors import VerificationError
from tfrecorder.load import decode_image, feature_spec
from tfrecorder.records import SIGNATURES
from tfrecorder.tfrecord import TEMP_MARKER, CorruptRecordError, open_read, read_records

logger = logging.getLogger(__name__)

_SHOWN_PROBLEMS = 5  # problems quoted in the error message; the report holds all
_BATCH = 256  # records per batch handed from the decoding pipeline to Python
_IMAGE_FEATURES = ("image", "image_format", "image_height", "image_width", "image_channels")


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` checked and every problem it found (empty when the dataset is sound)."""

    dataset_dir: str
    num_records: dict[str, int]  # records with sound framing and checksums, per split
    num_shards: int  # shards the manifest lists
    num_images_decoded: int  # records that parsed and decoded to their recorded shape
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class _Shard:
    """A shard whose framing is sound, so its records can be decoded."""

    name: str
    path: str
    num_records: int


def verify(path: str | os.PathLike, *, decode_images: bool = True,
           progress: bool = False) -> VerifyReport:
    """Reads every shard and checks it against the manifest.

    Args:
        path: the dataset folder (local or gs://).
        decode_images: also parse every record and decode its image (the slow part);
            False checks files, framing, checksums, counts and sizes only.
        progress: show a progress bar over records.

    Returns:
        The report, when the dataset is sound.

    Raises:
        VerificationError: with the number of problems and the first few; its `.report`
            lists every one.
        FileNotFoundError: the folder holds no manifest.
    """
    from tqdm.auto import tqdm  # here, not at import: it costs ~80 ms

    path = os.fspath(path)
    manifest = read_manifest(path)
    compression = manifest.get("compression")
    listed = [(split, shard) for split, info in manifest["splits"].items()
              for shard in info["shards"]]
    problems = _check_totals(manifest)
    file_problems, missing = _check_files(path, manifest)
    problems += file_problems

    num_records = {split: 0 for split in manifest["splits"]}
    readable: list[_Shard] = []
    total = sum(shard["num_records"] for _, shard in listed)
    with tqdm(total=total, unit="rec", desc="Checking records", disable=not progress) as bar:
        for split, shard in listed:
            if shard["file"] in missing:
                bar.update(shard["num_records"])
                continue
            file = fs.join(path, shard["file"])
            count, error = _read_shard(file, compression, bar)
            bar.update(max(0, shard["num_records"] - count))  # those it could not read
            num_records[split] += count
            problems += _check_shard(shard, count, error, fs.size(file))
            if error is None:
                readable.append(_Shard(shard["file"], file, count))

    num_decoded = 0
    if decode_images and readable:
        spec_problems = _check_spec(manifest)
        problems += spec_problems
        if not spec_problems:
            num_decoded, image_problems = _check_images(manifest, readable, progress)
            problems += image_problems

    report = VerifyReport(path, num_records, len(listed), num_decoded, problems)
    if problems:
        raise VerificationError(_message(path, problems), report)
    logger.info("Verified %s: %d records in %d shards.", path, sum(num_records.values()),
                len(listed))
    return report


def _message(path: str, problems: Sequence[str]) -> str:
    shown = "".join(f"\n  - {problem}" for problem in problems[:_SHOWN_PROBLEMS])
    more = len(problems) - _SHOWN_PROBLEMS
    if more > 0:
        shown += f"\n  ... and {more} more (see the error's .report.problems)"
    return (
        f"The dataset in {path!r} does not match its manifest: {len(problems)} "
        f"problem{'s' if len(problems) != 1 else ''}:{shown}\n"
        "Restore the files from a copy, or write the dataset again "
        "(tfrecorder.convert(..., overwrite=True))."
    )


def _check_totals(manifest: dict) -> list[str]:
    """The manifest agrees with itself: each split's totals are the sums of its shards."""
    problems = []
    for split, info in manifest["splits"].items():
        for key in ("num_records", "num_bytes"):
            total = sum(shard[key] for shard in info["shards"])
            if info[key] != total:
                problems.append(f"{MANIFEST}: the {split} split has {key} {info[key]}, but "
                                f"its shards add up to {total}")
    return problems


def _check_files(path: str, manifest: dict) -> tuple[list[str], set[str]]:
    """Problems with the folder's files, and the names of the listed shards it lacks."""
    present = set(dataset_files(path))
    shards = {shard["file"] for info in manifest["splits"].values()
              for shard in info["shards"]}
    # A listed name the pattern does not match (a hand-edited manifest) is looked up alone.
    missing = {name for name in shards
               if name not in present and not fs.exists(fs.join(path, name))}
    problems = [f"{name}: missing; the manifest lists it" for name in sorted(missing)]
    rejected = manifest.get("rejected")
    expected = shards | {MANIFEST} | ({rejected["file"]} if rejected else set())
    for name in sorted(present - expected):
        problems.append(
            f"{name}: a temporary file left by an interrupted run" if TEMP_MARKER in name
            else f"{name}: a shard the manifest does not list")
    if rejected:
        problems += _check_rejected(path, rejected, present)
    return problems, missing


def _check_rejected(path: str, rejected: dict, present: set[str]) -> list[str]:
    name = rejected["file"]
    if name not in present:
        return [f"{name}: missing; the manifest lists it with {rejected['num_rows']} rows"]
    text = fs.read_bytes(fs.join(path, name)).decode("utf-8", errors="replace")
    rows = max(0, sum(1 for _ in csv.reader(io.StringIO(text))) - 1)  # less the header
    if rows != rejected["num_rows"]:
        return [f"{name}: {rows} rows, but the manifest says {rejected['num_rows']}"]
    return []


def _read_shard(file: str, compression: str | None, bar) -> tuple[int, str | None]:
    """The number of sound records at the start of a shard, and what stopped the reading
    short (None when the whole file was read)."""
    count = 0
    try:
        with open_read(file, compression) as stream:
            for _ in read_records(stream):
                count += 1
                bar.update(1)
    except CorruptRecordError as error:
        return count, str(error) + (" of the uncompressed stream" if compression else "")
    except (OSError, EOFError, zlib.error) as error:  # gzip: truncated or garbled
        return count, f"unreadable {'gzip data' if compression else 'file'}: {error}"
    return count, None


def _check_shard(shard: dict, count: int, error: str | None, size: int) -> list[str]:
    name, problems = shard["file"], []
    if error is not None:
        problems.append(f"{name}: {error}, after {count} sound records; the rest of the "
                        "shard cannot be read")
    elif count != shard["num_records"]:
        problems.append(f"{name}: {count} records, but the manifest says "
                        f"{shard['num_records']}")
    if size != shard["num_bytes"]:
        problems.append(f"{name}: {size} bytes, but the manifest says {shard['num_bytes']}")
    return problems


def _check_spec(manifest: dict) -> list[str]:
    absent = [name for name in _IMAGE_FEATURES if name not in manifest["features"]]
    return [f"{MANIFEST}: lists no {name!r} feature, so images cannot be checked"
            for name in absent]


def _check_images(manifest: dict, shards: Sequence[_Shard], progress: bool
                  ) -> tuple[int, list[str]]:
    """Decodes every record of `shards`; returns how many are sound, and a problem for
    each that is not."""
    import numpy as np
    from tqdm.auto import tqdm

    spec = feature_spec(manifest)
    compression = manifest.get("compression")
    ds = _decoding_pipeline(shards, spec, compression)
    arrived = [np.zeros(shard.num_records, dtype=bool) for shard in shards]
    total = sum(shard.num_records for shard in shards)
    with tqdm(total=total, unit="img", desc="Decoding images", disable=not progress) as bar:
        num_decoded, problems = _collect(ds, shards, arrived, bar)
        for shard, seen in zip(shards, arrived):
            failed = np.flatnonzero(~seen)
            if failed.size:
                found, recovered = _describe_failures(shard, set(failed.tolist()), spec,
                                                      compression)
                problems += found
                num_decoded += recovered
                bar.update(failed.size)
    return num_decoded, problems


def _decoding_pipeline(shards: Sequence[_Shard], spec: dict, compression: str | None):
    """Batches of (shard index, record number, decoded shape, recorded shape, format,
    format matches, image name), one per record that parses and decodes."""
    import tensorflow as tf

    def records(index, file):
        return tf.data.TFRecordDataset(
            file, compression_type="GZIP" if compression == "gzip" else ""
        ).enumerate().map(lambda number, record: (index, number, record))

    def summary(index, number, record):
        features = tf.io.parse_single_example(record, spec)
        shape = tf.shape(decode_image(features), out_type=tf.int64)
        recorded = tf.stack([features["image_height"], features["image_width"],
                             features["image_channels"]])
        return (index, number, shape, recorded, features["image_format"],
                _format_matches(features), features.get("image_name", ""))

    autotune = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(shards), dtype=tf.int64), [shard.path for shard in shards]))
    ds = ds.interleave(records, cycle_length=min(len(shards), 16),
                       num_parallel_calls=autotune, deterministic=False)
    # A record that fails to parse or decode raises inside the map; ignore_errors drops
    # it, and the record numbers that never arrive are the failures.
    ds = ds.map(summary, num_parallel_calls=autotune, deterministic=False).ignore_errors()
    return ds.batch(_BATCH).prefetch(autotune)


def _collect(ds, shards: Sequence[_Shard], arrived: list, bar) -> tuple[int, list[str]]:
    """Reads the pipeline's batches: marks the records that arrived, and describes those
    that decoded to another shape or are not in their recorded format."""
    import numpy as np

    problems, num_decoded = [], 0
    for index, number, shape, recorded, fmt, fmt_ok, name in ds.as_numpy_iterator():
        for i in np.unique(index):
            arrived[i][number[index == i]] = True
        good = (shape == recorded).all(axis=1) & fmt_ok
        num_decoded += int(good.sum())
        for k in np.flatnonzero(~good):
            where = _where(shards[index[k]].name, number[k], name[k])
            if not fmt_ok[k]:
                problems.append(f"{where}: image_format is {_text(fmt[k])!r}, but the image "
                                "bytes are not in that format")
            if (shape[k] != recorded[k]).any():
                problems.append(f"{where}: the image decodes to {_hwc(shape[k])}, but the "
                                f"record says {_hwc(recorded[k])} (height x width x channels)")
        bar.update(len(index))
    return num_decoded, problems


def _format_matches(features: dict):
    """Whether the bytes are in the recorded image_format (raw: checked by decoding)."""
    import tensorflow as tf

    fmt, head = features["image_format"], tf.strings.substr(features["image"], 0, 8)
    matches = [tf.equal(fmt, "raw")] + [
        tf.logical_and(tf.equal(fmt, name),
                       tf.equal(tf.strings.substr(head, 0, len(magic)), magic))
        for name, magic in SIGNATURES.items()
    ]
    return tf.reduce_any(tf.stack(matches))


def _describe_failures(shard: _Shard, numbers: set[int], spec: dict,
                       compression: str | None) -> tuple[list[str], int]:
    """Decodes the records `numbers` of `shard` one by one, eagerly, to say why each
    failed; returns the problems and the number that decoded after all."""
    import tensorflow as tf

    problems, recovered, last = [], 0, max(numbers)
    with open_read(shard.path, compression) as stream:
        for number, record in enumerate(read_records(stream)):
            if number in numbers:
                try:
                    features = tf.io.parse_single_example(record, spec)
                except tf.errors.OpError as error:
                    problems.append(f"{_where(shard.name, number)}: does not parse with the "
                                    f"manifest's features: {_tf_message(error)}")
                    continue
                name = features["image_name"].numpy() if "image_name" in features else b""
                try:
                    decode_image(features)
                except tf.errors.OpError as error:
                    problems.append(f"{_where(shard.name, number, name)}: the image does not "
                                    f"decode: {_tf_message(error)}")
                    continue
                logger.warning("%s, record %d: failed in the decoding pipeline but decoded "
                               "alone; counted as sound.", shard.name, number)
                recovered += 1
            if number >= last:
                break
    return problems, recovered


def _where(shard: str, number: int, image_name: bytes = b"") -> str:
    name = f" ({_text(image_name)!r})" if image_name else ""
    return f"{shard}, record {number}{name}"


def _hwc(shape) -> str:
    return "x".join(str(int(v)) for v in shape)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="backslashreplace")


def _tf_message(error) -> str:
    """TensorFlow's message without its op and device decorations."""
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", error.message)
    return re.sub(r"\s*\[Op:\w+\].*$", "", message, flags=re.S).strip()

"""`verify()`: prove a dataset on disk is exactly what its manifest says.

Checks run in three layers, cheapest first, each on what passed the one before:

1. files: every shard the manifest lists is there, and no other file a run writes (an
   unlisted shard, a crashed run's `*.tmp-*` file) is, since a glob would pick it up;
2. framing: every record's length and data checksum (`read_records`, which names the byte
   offset of a bad one), and every count and size against the manifest;
3. records: every record parses with the manifest's feature spec; its label and
   categorical ids fall inside their vocabularies, its `split` names the split of its
   shard, and its image (when the dataset has images) decodes to the recorded shape and
   format, and passes the writer's own strict checks (`records.stored_image_problem`:
   TensorFlow decodes damaged JPEG data with a warning only). Decoding is nearly all of
   the cost, so this runs as one `tf.data` pipeline (a parallel map) that only says which
   records failed; those few are then parsed again, one by one, to say why. A shard
   whose framing is broken is not parsed.

Every problem is collected as a sentence naming the file (and the record), so one run
lists them all.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import logging
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from tfrecorder import fs
from tfrecorder.errors import StorageError, VerificationError
from tfrecorder.load import decode_image, shard_reader, shard_records
from tfrecorder.manifest import (
    DECODE_FEATURES,
    LABEL,
    LOCK,
    MANIFEST,
    SIGNATURES,
    SPLIT,
    Manifest,
    ShardInfo,
    dataset_files,
    is_temporary,
    read_manifest,
)
from tfrecorder.tfrecord import CorruptRecordError

logger = logging.getLogger(__name__)

_SHOWN_PROBLEMS = 5  # problems quoted in the error message; the report holds all
_BATCH = 256  # records per batch handed from the checking pipeline to Python
_SHOWN_IDS = 5  # out-of-range ids quoted per record


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` checked and every problem it found (empty when the dataset is sound)."""

    dataset_dir: str
    num_records: dict[str, int]  # records with sound framing and checksums, per split
    num_shards: int  # shards the manifest lists
    num_images_decoded: int  # records that parsed and decoded to their recorded shape
    num_records_parsed: int  # records that parsed with the manifest's features
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class _Shard:
    """A shard whose framing is sound, so its records can be parsed."""

    name: str
    path: str
    split: str
    num_records: int


def verify(path: str | os.PathLike, *, decode_images: bool = True,
           progress: bool = False) -> VerifyReport:
    """Reads every shard and checks it against the manifest.

    Args:
        path: the dataset folder: local, or a gs://, s3:// (or other fsspec) URI.
        decode_images: also parse every record, check its ids and split, and decode its
            image (the slow part); False checks files, framing, checksums, counts and
            sizes only, without TensorFlow.
        progress: show a progress bar over records.

    Returns:
        The report, when the dataset is sound.

    Raises:
        VerificationError: with the number of problems and the first few; its `.report`
            lists every one.
        FileNotFoundError: the folder holds no manifest.
        StorageError: the store could not be read (this says nothing of the dataset).
    """
    from tqdm.auto import tqdm  # here, not at import: it costs ~80 ms

    path = os.fspath(path)
    manifest = read_manifest(path)
    compression = manifest.compression
    listed = manifest.shards
    problems = _check_totals(manifest)
    file_problems, missing = _check_files(path, manifest)
    problems += file_problems

    num_records = {str(split): 0 for split in manifest.splits}
    readable: list[_Shard] = []
    total = sum(shard.num_records for _, shard in listed)
    with tqdm(total=total, unit="rec", desc="Checking records", disable=not progress) as bar:
        for split, shard in listed:
            if shard.file in missing:
                bar.update(shard.num_records)
                continue
            file = fs.join(path, shard.file)
            count, error, sha256 = _read_shard(file, compression, bar)
            bar.update(max(0, shard.num_records - count))  # those it could not read
            num_records[split] += count
            problems += _check_shard(shard, count, error, fs.size(file), sha256)
            if error is None:
                readable.append(_Shard(shard.file, file, split, count))

    num_parsed = num_decoded = 0
    if decode_images:
        checks, manifest_problems = _record_checks(manifest)
        problems += manifest_problems
        if readable:
            num_parsed, num_decoded, record_problems = _check_records(manifest, readable,
                                                                      checks, progress)
            problems += record_problems

    report = VerifyReport(path, num_records, len(listed), num_decoded, num_parsed, problems)
    if problems:
        raise VerificationError(_message(path, problems), report=report)
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


def _check_totals(manifest: Manifest) -> list[str]:
    """The manifest agrees with itself: each split's totals are the sums of its shards;
    and it holds records (a run that rejected every row wrote nothing to train on)."""
    problems = []
    if not manifest.num_records:
        rejected = manifest.rejected.num_rows if manifest.rejected else 0
        problems.append(f"{MANIFEST}: the dataset holds no records"
                        + (f" ({rejected} rows were rejected)" if rejected else ""))
    for split, info in manifest.splits.items():
        for key in ("num_records", "num_bytes"):
            total = sum(getattr(shard, key) for shard in info.shards)
            if getattr(info, key) != total:
                problems.append(f"{MANIFEST}: the {split} split has {key} "
                                f"{getattr(info, key)}, but its shards add up to {total}")
    return problems


def _check_files(path: str, manifest: Manifest) -> tuple[list[str], set[str]]:
    """Problems with the folder's files (every file the manifest does not list is one),
    and the names of the listed shards it lacks."""
    present = set(fs.list_dir(path))
    shards = {shard.file for _, shard in manifest.shards}
    # A listed name the pattern does not match (a hand-edited manifest) is looked up alone.
    missing = {name for name in shards
               if name not in present and not fs.exists(fs.join(path, name))}
    problems = [f"{name}: missing; the manifest lists it" for name in sorted(missing)]
    rejected = manifest.rejected
    expected = shards | {MANIFEST} | ({rejected.file} if rejected else set())
    ours = set(dataset_files(path))
    for name in sorted(present - expected):
        problems.append(
            f"{name}: a temporary file left by an interrupted run" if is_temporary(name)
            else f"{name}: the lock of a run writing here now (or of one that was killed)"
            if name == LOCK
            else f"{name}: a shard the manifest does not list" if name in ours
            else f"{name}: a file the manifest does not list")
    if rejected:
        problems += _check_rejected(path, rejected, present)
    return problems, missing


def _check_rejected(path: str, rejected, present: set[str]) -> list[str]:
    name = rejected.file
    if name not in present:
        return [f"{name}: missing; the manifest lists it with {rejected.num_rows} rows"]
    text = fs.read_bytes(fs.join(path, name)).decode("utf-8", errors="replace")
    rows = max(0, sum(1 for _ in csv.reader(io.StringIO(text))) - 1)  # less the header
    if rows != rejected.num_rows:
        return [f"{name}: {rows} rows, but the manifest says {rejected.num_rows}"]
    return []


def _read_shard(file: str, compression: str | None, bar) -> tuple[int, str | None, str]:
    """The number of sound records at the start of a shard, what stopped the reading
    short (None when the whole file was read) and the SHA-256 of its bytes."""
    count, digest = 0, hashlib.sha256()
    try:
        for _ in shard_records(file, compression, digest):
            count += 1
            bar.update(1)
    except CorruptRecordError as error:
        return count, str(error) + (" of the uncompressed stream" if compression else ""), ""
    except StorageError:  # the store failed, not the shard
        raise
    except (OSError, EOFError, zlib.error) as error:  # gzip: truncated or garbled
        return count, f"unreadable {'gzip data' if compression else 'file'}: {error}", ""
    return count, None, digest.hexdigest()


def _check_shard(shard: ShardInfo, count: int, error: str | None, size: int,
                 sha256: str) -> list[str]:
    name, problems = shard.file, []
    if error is not None:
        problems.append(f"{name}: {error}, after {count} sound records; the rest of the "
                        "shard cannot be read")
    elif count != shard.num_records:
        problems.append(f"{name}: {count} records, but the manifest says "
                        f"{shard.num_records}")
    if size != shard.num_bytes:
        problems.append(f"{name}: {size} bytes, but the manifest says {shard.num_bytes}")
    # Manifests before the SHA-256 have none; a file changed in place (a record swapped
    # for another valid one, with its checksums redone) differs only here.
    elif error is None and shard.sha256 and sha256 != shard.sha256:
        problems.append(f"{name}: its SHA-256 is {sha256[:16]}..., but the manifest says "
                        f"{shard.sha256[:16]}...: the file was changed after it was "
                        "written")
    return problems


@dataclass(frozen=True)
class _IdRange:
    """The ids a feature's values must be: 0 to `size` - 1."""

    feature: str
    size: int
    described: str  # what the ids index, for the message

    def outside(self, ids):
        """Which of `ids` (a NumPy array or a tensor) are out of range."""
        return (ids >= self.size) | (ids < 0)


@dataclass(frozen=True)
class _Checks:
    """What is checked in each record besides parsing, as the manifest allows."""

    images: bool  # decode the image to its recorded shape and format
    id_ranges: tuple[_IdRange, ...]  # label and categorical ids inside their vocabularies
    split: bool  # the `split` feature names the split of the record's shard


def _record_checks(manifest: Manifest) -> tuple[_Checks, list[str]]:
    """The checks the manifest allows, and its problems that rule some out."""
    features, problems = manifest.features, []
    present = [name for name in DECODE_FEATURES if name in features]
    if present:  # a dataset without images has none of them
        problems += [f"{MANIFEST}: lists no {name!r} feature, so images cannot be checked"
                     for name in DECODE_FEATURES if name not in features]
    ranges = []
    labels = manifest.labels
    if labels and LABEL in features:
        vocabulary = labels.vocabulary
        size = labels.num_classes if labels.num_classes is not None or vocabulary is None \
            else len(vocabulary)
        if vocabulary is not None and size != len(vocabulary):
            problems.append(f"{MANIFEST}: labels has num_classes {size}, but a vocabulary "
                            f"of {len(vocabulary)} classes")
        elif vocabulary is not None:
            ranges.append(_IdRange(LABEL, size, f"the {_count(size, 'class', 'classes')} "
                                   f"of the manifest's labels (ids 0 to {size - 1})"))
        elif size is not None:  # integer labels: num_classes is the largest id + 1
            ranges.append(_IdRange(LABEL, size,
                                   f"the manifest's num_classes {size} (ids 0 to {size - 1})"))
    for name, feature in features.items():
        if feature.vocabulary is not None:
            size = len(feature.vocabulary)
            ranges.append(_IdRange(name, size, f"the {_count(size, 'value')} of its "
                                   f"vocabulary (ids 0 to {size - 1})"))
    checks = _Checks(len(present) == len(DECODE_FEATURES), tuple(ranges), SPLIT in features)
    return checks, problems


def _check_records(manifest: Manifest, shards: Sequence[_Shard], checks: _Checks,
                   progress: bool) -> tuple[int, int, list[str]]:
    """Parses every record of `shards` and checks it; returns how many parsed, how many
    images decoded to their recorded shape, and a problem for each record that failed."""
    import numpy as np
    from tqdm.auto import tqdm

    try:
        spec = manifest.parse_spec()
    except ValueError as error:  # a feature of a shape this version cannot parse
        return 0, 0, [f"{MANIFEST}: {error}"]
    compression = manifest.compression
    ds = _checking_pipeline(shards, spec, checks, compression)
    arrived = [np.zeros(shard.num_records, dtype=bool) for shard in shards]
    flagged = [np.zeros(shard.num_records, dtype=bool) for shard in shards]
    total = sum(shard.num_records for shard in shards)
    desc, unit = ("Decoding images", "img") if checks.images else ("Parsing records", "rec")
    with tqdm(total=total, unit=unit, desc=desc, disable=not progress) as bar:
        num_parsed, num_decoded, problems = _collect(ds, shards, arrived, flagged, bar)
        for shard, seen, bad in zip(shards, arrived, flagged):
            failed = np.flatnonzero(~seen)
            if failed.size or bad.any():
                found, parsed, decoded = _describe_failures(
                    shard, set(failed.tolist()), set(np.flatnonzero(bad).tolist()), spec,
                    checks, compression)
                problems += found
                num_parsed += parsed
                num_decoded += decoded
                bar.update(failed.size)
    return num_parsed, num_decoded, problems


def _checking_pipeline(shards: Sequence[_Shard], spec: dict, checks: _Checks,
                       compression: str | None):
    """Batches of one summary per record that parses (and whose image decodes): its
    shard index and record number, whether its values are sound, how many values it
    holds, and for images the decoded shape, recorded shape, format, whether the format
    matches, and the image's name."""
    import tensorflow as tf

    from tfrecorder.records import stored_image_problem  # Pillow: only when decoding

    def strict(image: bytes, image_format: bytes) -> bytes:
        return (stored_image_problem(image, image_format) or "").encode()

    read = shard_reader(fs.is_remote(shards[0].path), compression)

    def records(index, file, split):
        return read(file).enumerate().map(lambda number, record: (index, split, number, record))

    def summary(index, split, number, record):
        features = tf.io.parse_single_example(record, spec)
        # Lists of k-value rows are cut into rows after parsing, by ops that run only if
        # an output uses them (graph optimization drops mere control dependencies), so
        # every feature's values are counted: that checks every feature.
        parts = tf.nest.flatten(features, expand_composites=True)
        found = {"index": index, "number": number,
                 "values_ok": _values_sound(features, checks, split),
                 "num_values": tf.add_n([tf.constant(0, tf.int64)] + [
                     tf.size(part, out_type=tf.int64) for part in parts])}
        if checks.images:
            found.update(
                shape=tf.shape(decode_image(features), out_type=tf.int64),
                recorded=tf.stack([features["image_height"], features["image_width"],
                                   features["image_channels"]]),
                format=features["image_format"], format_ok=_format_matches(features),
                name=features["image_name"],
                # TensorFlow decodes damaged JPEG data with a mere warning (grey blocks):
                # the writer's strict checks say what TensorFlow does not.
                strict=tf.numpy_function(strict, [features["image"],
                                                  features["image_format"]], tf.string,
                                         stateful=False))
        return found

    autotune = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(shards), dtype=tf.int64), [shard.path for shard in shards],
         [shard.split for shard in shards]))
    ds = ds.interleave(records, cycle_length=min(len(shards), 16),
                       num_parallel_calls=autotune, deterministic=False)
    # A record that fails to parse or decode raises inside the map; ignore_errors drops
    # it, and the record numbers that never arrive are the failures.
    ds = ds.map(summary, num_parallel_calls=autotune, deterministic=False).ignore_errors()
    return ds.batch(_BATCH).prefetch(autotune)


def _values_sound(features: dict, checks: _Checks, split):
    """In the pipeline: whether every id is in range and the split matches the shard's;
    `_value_problems` says what is wrong with the few records where this is False."""
    import tensorflow as tf

    sound = [tf.constant(True)]
    sound += [tf.logical_not(tf.reduce_any(rule.outside(_flat(features[rule.feature]))))
              for rule in checks.id_ranges]
    if checks.split:
        sound.append(tf.equal(tf.strings.lower(features["split"]), split))
    return tf.reduce_all(tf.stack(sound))


def _value_problems(features: dict, checks: _Checks, split: str) -> list[str]:
    """What is wrong with one parsed record's values (eagerly), without naming it."""
    problems = []
    for rule in checks.id_ranges:
        ids = _flat(features[rule.feature]).numpy()
        bad = ids[rule.outside(ids)].tolist()
        if bad:
            shown = ", ".join(map(str, bad[:_SHOWN_IDS])) + (", ..." if len(bad) > _SHOWN_IDS
                                                              else "")
            problems.append(f"{rule.feature} id{'s' if len(bad) > 1 else ''} {shown} "
                            f"{'are' if len(bad) > 1 else 'is'} outside {rule.described}")
    if checks.split:
        recorded = _text(features["split"].numpy())
        if recorded.lower() != split:
            problems.append(f"split is {recorded!r}, but the record is in a shard of the "
                            f"{split} split")
    return problems


def _flat(tensor):
    """A feature's values as one flat tensor, whether it parsed dense or ragged."""
    import tensorflow as tf

    if isinstance(tensor, tf.RaggedTensor):
        return tensor.flat_values
    return tf.reshape(tensor, [-1])


def _collect(ds, shards: Sequence[_Shard], arrived: list, flagged: list, bar
             ) -> tuple[int, int, list[str]]:
    """Reads the pipeline's batches: marks the records that arrived and those whose values
    are not sound, and describes images that decoded to another shape or are not in their
    recorded format. Returns the records parsed, the images decoded and the problems."""
    import numpy as np

    problems, num_parsed, num_decoded = [], 0, 0
    for batch in ds.as_numpy_iterator():
        index, number = batch["index"], batch["number"]
        for i in np.unique(index):
            arrived[i][number[index == i]] = True
            flagged[i][number[(index == i) & ~batch["values_ok"]]] = True
        num_parsed += len(index)
        bar.update(len(index))
        if "shape" not in batch:
            continue
        shape, recorded, fmt_ok = batch["shape"], batch["recorded"], batch["format_ok"]
        strict_ok = batch["strict"] == b""
        good = (shape == recorded).all(axis=1) & fmt_ok & strict_ok
        num_decoded += int(good.sum())
        for k in np.flatnonzero(~good):
            where = _where(shards[index[k]].name, number[k], batch["name"][k])
            if not fmt_ok[k]:
                problems.append(f"{where}: image_format is {_text(batch['format'][k])!r}, "
                                "but the image bytes are not in that format")
            if (shape[k] != recorded[k]).any():
                problems.append(f"{where}: the image decodes to {_hwc(shape[k])}, but the "
                                f"record says {_hwc(recorded[k])} (height x width x channels)")
            elif fmt_ok[k] and not strict_ok[k]:
                problems.append(f"{where}: {_text(batch['strict'][k])}")
    return num_parsed, num_decoded, problems


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


def _describe_failures(shard: _Shard, failed: set[int], flagged: set[int], spec: dict,
                       checks: _Checks, compression: str | None
                       ) -> tuple[list[str], int, int]:
    """Parses the records `failed` (they never left the pipeline) and `flagged` (their
    values are not sound) of `shard` one by one, eagerly, to say why. Returns the
    problems, and how many of `failed` parsed and decoded after all."""
    import tensorflow as tf

    problems, parsed, decoded, last = [], 0, 0, max(failed | flagged)
    with contextlib.closing(shard_records(shard.path, compression)) as records:
        for number, record in enumerate(records):
            if number in failed or number in flagged:
                try:
                    features = tf.io.parse_single_example(record, spec)
                except tf.errors.OpError as error:
                    problems.append(f"{_where(shard.name, number)}: does not parse with the "
                                    f"manifest's features: {_parse_errors(record, spec, error)}")
                    continue
                name = features["image_name"].numpy() if "image_name" in features else b""
                where = _where(shard.name, number, name)
                problems += [f"{where}: {problem}"
                             for problem in _value_problems(features, checks, shard.split)]
                if number in failed:
                    parsed += 1
                    if checks.images:
                        try:
                            decode_image(features)
                        except tf.errors.OpError as error:
                            problems.append(f"{where}: the image does not decode: "
                                            f"{_tf_message(error)}")
                            continue
                        decoded += 1
                    logger.warning("%s, record %d: failed in the checking pipeline but "
                                   "parsed%s alone.", shard.name, number,
                                   " and decoded" if checks.images else "")
            if number >= last:
                break
    return problems, parsed, decoded


def _parse_errors(record: bytes, spec: dict, error) -> str:
    """Why a record does not parse, feature by feature (TensorFlow's message does not
    always name the feature)."""
    import tensorflow as tf

    errors = []
    for name, feature in spec.items():
        try:
            tf.io.parse_single_example(record, {name: feature})
        except tf.errors.OpError as one:
            errors.append(f"{name}: {_tf_message(one)}")
    return "; ".join(errors) or _tf_message(error)


def _where(shard: str, number: int, image_name: bytes = b"") -> str:
    name = f" ({_text(image_name)!r})" if image_name else ""
    return f"{shard}, record {number}{name}"


def _hwc(shape) -> str:
    return "x".join(str(int(v)) for v in shape)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="backslashreplace")


def _tf_message(error) -> str:
    """TensorFlow's message without its op and device decorations."""
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", error.message)
    return re.sub(r"\s*\[Op:\w+\].*$", "", message, flags=re.S).strip()

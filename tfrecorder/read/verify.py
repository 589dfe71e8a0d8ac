"""`verify()`: prove a dataset on disk is exactly what its manifest says.

Checks run in three layers, cheapest first, each on what passed the one before:

1. files: every shard the manifest lists is there, and no other file a run writes (an
   unlisted shard, a crashed run's `*.tmp-*` file) is, since a glob would pick it up;
2. framing: every record's length and data checksum (`read_records`, which names the byte
   offset of a bad one), and every count, size and SHA-256 against the manifest;
3. records (`decode_images=True`): every record parses, its ids and split are sound, its
   image decodes as recorded, and a detection or segmentation record's boxes, objects and
   masks are sound (`verify_records`; a video or audio dataset's clips: `verify_clips`).
   Those decode, with libjpeg-turbo and Pillow, so they are imported only then; none
   imports TensorFlow. A shard whose framing is broken is not parsed.

Records of either layout (`tfrecorder.format.layouts`) are checked: the layout says under which
keys it stores each feature, and which files besides the shards it writes (tf_models'
`label_map.pbtxt`, checked against the manifest's classes).

Every problem is collected as a `Problem` naming the file (and the record), so one run
lists them all.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tfrecorder.errors import StorageError, VerificationError
from tfrecorder.format.layouts import label_map_of
from tfrecorder.format.manifest import (
    LABEL_MAP,
    LOCK,
    MANIFEST,
    Manifest,
    ShardInfo,
    dataset_files,
    folder_files,
    is_temporary,
    read_manifest,
)
from tfrecorder.format.tfds_metadata import tfds_files
from tfrecorder.format.tfrecord import CorruptRecordError, index_text
from tfrecorder.read.shards import shard_records
from tfrecorder.storage import fs

logger = logging.getLogger(__name__)

_SHOWN_PROBLEMS = 5  # problems quoted in the error message; the report holds all


class Check(StrEnum):
    """The kind of a `Problem`: a short, stable name to filter or count problems by."""

    # The folder's files.
    MISSING = "missing"  # a file the manifest lists is not there
    UNLISTED = "unlisted"  # a shard, or any other file, the manifest does not list
    TEMPORARY = "temporary"  # a `*.tmp-*` file left by an interrupted run
    LOCK = "lock"  # the lock of a run writing now, or of one that was killed
    REJECTED = "rejected"  # rejected.csv (or skipped_annotations.csv) holds another
    # number of rows than the manifest says
    LABEL_MAP = "label_map"  # label_map.pbtxt does not list the manifest's classes
    # The manifest itself.
    MANIFEST = "manifest"  # it contradicts itself, or cannot be checked against
    EMPTY = "empty"  # it lists no records
    # Each shard's bytes.
    FRAMING = "framing"  # a record's length or checksum is bad: the rest is unreadable
    COUNT = "count"  # another number of records than listed
    SIZE = "size"  # another number of bytes than listed
    SHA256 = "sha256"  # the file was changed after it was written
    INDEX = "index"  # its record index does not list its records
    # Each record (decode_images=True).
    PARSE = "parse"  # it does not parse with the manifest's features
    IDS = "ids"  # a label or categorical id outside its vocabulary
    SPLIT = "split"  # its split is not its shard's
    DECODE = "decode"  # its image does not decode
    SHAPE = "shape"  # its image decodes to another shape than recorded
    FORMAT = "format"  # its image bytes are not in the recorded image_format
    STRICT = "strict"  # its image fails the writer's strict checks (damaged data)
    BOXES = "boxes"  # a detection record's box is outside [0, 1], or its min >= its max
    OBJECTS = "objects"  # a detection record has another number of classes than boxes
    MASK = "mask"  # a mask is not of its image's size, or an object's not 0s and 1s
    # Each clip of a video or audio dataset (`verify_clips`).
    TIMESTAMPS = "timestamps"  # its frames' or audio's times do not increase
    SAMPLES = "samples"  # an audio packet holds another number of samples than recorded


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One way the dataset differs from its manifest; `str()` gives it as one sentence."""

    file: str  # a shard, dataset.json, rejected.csv, or a file the manifest does not list
    record: int | None = None  # the record's number in the shard, if one record is at fault
    check: Check
    detail: str  # the sentence after the file (and record)
    image_name: str | None = None  # the faulty record's image_name, if known

    def __str__(self) -> str:
        where = self.file
        if self.record is not None:
            where += f", record {self.record}"
            if self.image_name:
                where += f" ({self.image_name!r})"
        return f"{where}: {self.detail}"


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` checked and every problem it found (empty when the dataset is sound)."""

    dataset_dir: str
    num_records: dict[str, int]  # records with sound framing and checksums, per split
    num_shards: int  # shards the manifest lists
    # records that parsed and decoded to their recorded shape (a clip dataset's: frames)
    num_images_decoded: int
    num_records_parsed: int  # records that parsed with the manifest's features
    problems: list[Problem] = field(default_factory=list)
    decoded: str = "image"  # what `num_images_decoded` counts: "image", or a clip's "frame"

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class ReadableShard:
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
            image (the slow part, on a thread per core); False checks files, framing,
            checksums, counts and sizes only. For a video or audio dataset: decode every
            stored frame, and check times, audio packets, label ids and the manifest's
            clip and frame counts. Neither imports TensorFlow.
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
    readable: list[ReadableShard] = []
    total = sum(shard.num_records for _, shard in listed)
    with tqdm(total=total, unit="rec", desc="Checking records", disable=not progress) as bar:
        for split, shard in listed:
            if shard.file in missing:
                bar.update(shard.num_records)
                continue
            file = fs.join(path, shard.file)
            count, error, sha256, sizes = _read_shard(file, compression, bar)
            bar.update(max(0, shard.num_records - count))  # those it could not read
            num_records[split] += count
            problems += _check_shard(shard, count, error, fs.size(file), sha256)
            if shard.index and shard.index not in missing and error is None:
                problems += _check_index(path, shard.index, sizes)
            if error is None:
                readable.append(ReadableShard(shard.file, file, split, count))

    num_parsed = num_decoded = 0
    if decode_images and manifest.media is not None:
        from tfrecorder.read.verify_clips import check_clips  # Pillow, libjpeg: to decode

        num_parsed, num_decoded, found = check_clips(manifest, readable, progress)
        problems += [Problem(file=f.file, record=f.record, check=Check(f.check),
                             detail=f.detail) for f in found]
    elif decode_images:
        from tfrecorder.read.verify_records import check_records  # likewise

        num_parsed, num_decoded, record_problems = check_records(manifest, readable,
                                                                 progress)
        problems += record_problems

    report = VerifyReport(path, num_records, len(listed), num_decoded, num_parsed, problems,
                          "image" if manifest.media is None else "frame")
    if problems:
        raise VerificationError(_message(path, problems), report=report)
    logger.info("Verified %s: %d records in %d shards.", path, sum(num_records.values()),
                len(listed))
    return report


def _message(path: str, problems: Sequence[Problem]) -> str:
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


def _check_totals(manifest: Manifest) -> list[Problem]:
    """The manifest agrees with itself: each split's totals are the sums of its shards;
    and it holds records (a run that rejected every row wrote nothing to train on)."""
    problems = []
    if not manifest.num_records:
        rejected = manifest.rejected.num_rows if manifest.rejected else 0
        problems.append(Problem(file=MANIFEST, check=Check.EMPTY,
                                detail="the dataset holds no records"
                                + (f" ({rejected} rows were rejected)" if rejected else "")))
    for split, info in manifest.splits.items():
        for key in ("num_records", "num_bytes"):
            total = sum(getattr(shard, key) for shard in info.shards)
            if getattr(info, key) != total:
                problems.append(Problem(
                    file=MANIFEST, check=Check.MANIFEST,
                    detail=f"the {split} split has {key} {getattr(info, key)}, but its "
                           f"shards add up to {total}"))
    return problems


def _check_files(path: str, manifest: Manifest) -> tuple[list[Problem], set[str]]:
    """Problems with the folder's files (every file the manifest does not list is one),
    and the names of the listed shards it lacks."""
    present = set(folder_files(path))
    shards = {shard.file for _, shard in manifest.shards}
    indexes = {shard.index for _, shard in manifest.shards if shard.index}
    # A listed name the pattern does not match (a hand-edited manifest) is looked up alone.
    missing = {name for name in shards | indexes
               if name not in present and not fs.exists(fs.join(path, name))}
    problems = [Problem(file=name, check=Check.MISSING, detail="missing; the manifest lists it")
                for name in sorted(missing)]
    shards |= indexes
    listings = [(listed.file, listed.num_rows) for listed in [manifest.rejected] if listed]
    skipped = manifest.skipped_annotations
    if skipped is not None:
        listings.append((skipped.file, skipped.num_annotations))
    label_map = _label_map(manifest)
    expected = shards | {MANIFEST} | {name for name, _ in listings} | (
        {LABEL_MAP} if label_map is not None else set()) | set(tfds_files(manifest))
    ours = set(dataset_files(path))
    problems += [_unlisted(name, ours) for name in sorted(present - expected)]
    for name, num_rows in listings:
        problems += _check_listing(path, name, num_rows, present)
    if label_map is not None:
        problems += _check_label_map(path, label_map, present)
    problems += _check_annotation_counts(manifest)
    return problems, missing


def _check_annotation_counts(manifest: Manifest) -> list[Problem]:
    """A detection source's objects are each written, skipped or in a rejected image,
    each counted apart by the writer: they must add up."""
    counts = manifest.annotations
    if counts is None:
        return []
    accounted = counts.written + counts.skipped + counts.in_rejected_images
    written = sum(s.objects.num_boxes for s in manifest.statistics.values()
                  if s.objects is not None)
    found = []
    if accounted != counts.objects:
        found.append(Problem(file=MANIFEST, check=Check.MANIFEST, detail=(
            f"its annotations do not add up: {counts.objects} objects in the source, but "
            f"{counts.written} written + {counts.skipped} skipped + "
            f"{counts.in_rejected_images} in rejected images = {accounted}")))
    if manifest.statistics and written != counts.written:
        found.append(Problem(file=MANIFEST, check=Check.MANIFEST, detail=(
            f"its annotations say {counts.written} objects were written, its splits' "
            f"statistics {written}")))
    return found


def _label_map(manifest: Manifest) -> str | None:
    """The `label_map.pbtxt` the dataset must hold (the tf_models layout writes one for
    detection, its classes with ids from 1), or None."""
    return label_map_of(manifest)


def _check_label_map(path: str, expected: str, present: set[str]) -> list[Problem]:
    if LABEL_MAP not in present:
        return [Problem(file=LABEL_MAP, check=Check.MISSING,
                        detail="missing; the models that read this layout take their "
                               "classes from it")]
    if fs.read_bytes(fs.join(path, LABEL_MAP)).decode("utf-8", "replace") != expected:
        return [Problem(file=LABEL_MAP, check=Check.LABEL_MAP,
                        detail="does not list the manifest's classes (ids from 1, in the "
                               "order of its labels' vocabulary)")]
    return []


def _unlisted(name: str, ours: set[str]) -> Problem:
    """A file the manifest does not list; `ours` are the names a run gives its shards."""
    if is_temporary(name):
        return Problem(file=name, check=Check.TEMPORARY,
                       detail="a temporary file left by an interrupted run")
    if name == LOCK:
        return Problem(file=name, check=Check.LOCK,
                       detail="the lock of a run writing here now (or of one that was killed)")
    return Problem(file=name, check=Check.UNLISTED,
                   detail=f"a {'shard' if name in ours else 'file'} the manifest does not list")


def _check_listing(path: str, name: str, num_rows: int, present: set[str]
                   ) -> list[Problem]:
    """A CSV listing of what was not written (rejected.csv, skipped_annotations.csv)
    holds the rows the manifest counts."""
    if name not in present:
        return [Problem(file=name, check=Check.MISSING,
                        detail=f"missing; the manifest lists it with {num_rows} rows")]
    text = fs.read_bytes(fs.join(path, name)).decode("utf-8", errors="replace")
    rows = max(0, sum(1 for _ in csv.reader(io.StringIO(text))) - 1)  # less the header
    if rows != num_rows:
        return [Problem(file=name, check=Check.REJECTED,
                        detail=f"{rows} rows, but the manifest says {num_rows}")]
    return []


def _read_shard(file: str, compression: str | None, bar
                ) -> tuple[int, str | None, str, list[int]]:
    """The number of sound records at the start of a shard, what stopped the reading
    short (None when the whole file was read), the SHA-256 of its bytes and the size of
    each record's frame."""
    count, digest, sizes = 0, hashlib.sha256(), []
    try:
        for record in shard_records(file, compression, digest):
            count += 1
            sizes.append(16 + len(record))
            bar.update(1)
    except CorruptRecordError as error:
        return (count, str(error) + (" of the uncompressed stream" if compression else ""),
                "", sizes)
    except StorageError:  # the store failed, not the shard
        raise
    except (OSError, EOFError, zlib.error) as error:  # gzip: truncated or garbled
        return count, f"unreadable {'gzip data' if compression else 'file'}: {error}", "", sizes
    return count, None, digest.hexdigest(), sizes


def _check_index(path: str, name: str, sizes: list[int]) -> list[Problem]:
    """A shard's index lists exactly its records (`index_text` of their frames): a stale
    or damaged index sends seeking readers (DALI, `tfrecord`) into the middle of one."""
    found = fs.read_bytes(fs.join(path, name)).decode("utf-8", "replace").splitlines()
    expected = index_text(sizes).decode().splitlines()
    if found == expected:
        return []
    wrong = next((i for i, (a, b) in enumerate(zip(found, expected)) if a != b), None)
    detail = (f"line {wrong + 1} is {found[wrong]!r}, but the shard's record {wrong} is at "
              f"{expected[wrong]!r} (offset, length)" if wrong is not None else
              f"{len(found)} lines, but the shard holds {len(expected)} records")
    return [Problem(file=name, check=Check.INDEX,
                    detail=f"does not index its shard: {detail}")]


def _check_shard(shard: ShardInfo, count: int, error: str | None, size: int,
                 sha256: str) -> list[Problem]:
    name, problems = shard.file, []
    if error is not None:
        problems.append(Problem(file=name, check=Check.FRAMING,
                                detail=f"{error}, after {count} sound records; the rest of "
                                       "the shard cannot be read"))
    elif count != shard.num_records:
        problems.append(Problem(file=name, check=Check.COUNT,
                                detail=f"{count} records, but the manifest says "
                                       f"{shard.num_records}"))
    if size != shard.num_bytes:
        problems.append(Problem(file=name, check=Check.SIZE,
                                detail=f"{size} bytes, but the manifest says {shard.num_bytes}"))
    # Manifests before the SHA-256 have none; a file changed in place (a record swapped
    # for another valid one, with its checksums redone) differs only here.
    elif error is None and shard.sha256 and sha256 != shard.sha256:
        problems.append(Problem(file=name, check=Check.SHA256,
                                detail=f"its SHA-256 is {sha256[:16]}..., but the manifest "
                                       f"says {shard.sha256[:16]}...: the file was changed "
                                       "after it was written"))
    return problems

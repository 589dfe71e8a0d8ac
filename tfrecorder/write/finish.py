"""The writer's last step: the manifest's content, `rejected.csv`, and how many rows a
run may reject.

File names and reading a manifest live in `manifest`, which readers use; the manifest is
written last, so a folder without one is never a dataset. Readers (load, inspect, verify)
trust the manifest, never file names.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd

from tfrecorder._version import __version__
from tfrecorder.errors import (
    ConversionAborted,
    DuplicateImagesError,
    ImageError,
    Option,
    SchemaError,
    TooManyRejectedError,
)
from tfrecorder.format.example_decoding import decode_example
from tfrecorder.format.image_checks import rejection_advice
from tfrecorder.format.layouts import label_map_of, layout_of
from tfrecorder.format.manifest import (
    LABEL_MAP,
    MANIFEST,
    REJECTED,
    SKIPPED_ANNOTATIONS,
    SPLITS,
    AnnotationCounts,
    Labels,
    Manifest,
    Rejected,
    ShardInfo,
    SkippedAnnotations,
    Split,
    SplitInfo,
    index_filename,
)
from tfrecorder.format.manifest_statistics import Duplicate
from tfrecorder.format.media_sequence import Media
from tfrecorder.format.tfds_metadata import tfds_files
from tfrecorder.format.tfrecord import ShardWriter, open_read, read_records
from tfrecorder.options import DEFAULT_MAX_REJECTED
from tfrecorder.read.info import DatasetInfo
from tfrecorder.sources import image_cells
from tfrecorder.sources.table import Table, rows_at
from tfrecorder.storage import fs
from tfrecorder.wording import count, name_row
from tfrecorder.write.plan import Plan, RowColumn
from tfrecorder.write.rows import (
    Rejection,
    merged_reasons,
    reason_counts,
    rejection_reasons,
)
from tfrecorder.write.statistics import (
    Located,
    ShardFacts,
    SplitTally,
    candidate_duplicates,
    describe_duplicates,
    dropped_copies,
)


@dataclass(frozen=True)
class WrittenShard:
    """What an engine wrote for one shard of the plan."""

    split: Split
    filename: str
    num_records: int
    num_bytes: int
    num_rejected: int
    sha256: str = ""  # of the file's bytes, as written
    facts: ShardFacts | None = None  # of its records; None from a journal before facts


@dataclass(frozen=True)
class Written:
    """What an engine wrote: every shard of the plan in writing order, and every row it
    rejected. Both engines return this, and `finish` turns it into the dataset."""

    shards: list[WrittenShard]
    rejections: list[Rejection]

    @property
    def metrics(self) -> dict[str, int]:
        written = sum(shard.num_records for shard in self.shards)
        return {"rows_read": written + len(self.rejections), "records_written": written,
                "rows_rejected": len(self.rejections)}


_REASONS_SHOWN = 3


@dataclass(frozen=True)
class SourceReport:
    """What the source set aside before any image was read: rows it could not give an
    image for (`Table.rejected_rows`, with their `reason` and, for detection, their
    `objects`), which join rejected.csv; annotations it skipped
    (`Table.skipped_annotations`), listed in their own file; and a detection source's
    count of its objects (`Table.annotations`), which `finish` completes. Small and
    picklable: a Beam job that finishes the dataset itself carries it."""

    rejected_rows: pd.DataFrame | None = None
    skipped_annotations: pd.DataFrame | None = None
    annotations: AnnotationCounts | None = None

    @classmethod
    def of(cls, table: Table) -> SourceReport:
        return cls(table.rejected_rows, table.skipped_annotations, table.annotations)

    @classmethod
    def joined(cls, reports: Sequence[SourceReport]) -> SourceReport:
        """The reports of a table's files (a pipeline reads them apart) as one."""
        def frames(name: str) -> pd.DataFrame | None:
            found = [f for f in (getattr(r, name) for r in reports)
                     if f is not None and len(f)]
            return pd.concat(found) if found else None

        counts = [r.annotations for r in reports if r.annotations is not None]
        return cls(frames("rejected_rows"), frames("skipped_annotations"),
                   sum(counts[1:], counts[0]) if counts else None)

    @property
    def num_rejected_rows(self) -> int:
        return 0 if self.rejected_rows is None else len(self.rejected_rows)

    @property
    def rejected_reasons(self) -> tuple[str, ...]:
        rows = self.rejected_rows
        return () if rows is None else tuple(rows["reason"].astype(str))

    @property
    def num_skipped_objects(self) -> int:
        """The objects skipped_annotations.csv lists (a row with no annotation names a
        label file that held none: YOLO's empty file without an image)."""
        found = self.skipped_annotations
        return 0 if found is None else int((found["annotation"].astype(str) != "").sum())

    @property
    def objects_in_rejected_rows(self) -> int:
        """The objects of the images the source rejected whole."""
        rows = self.rejected_rows
        return 0 if rows is None or "objects" not in rows else int(rows["objects"].sum())

    def skipped(self) -> SkippedAnnotations | None:
        """The manifest's count of the skipped annotations, by reason."""
        found = self.skipped_annotations
        if found is None:
            return None
        return SkippedAnnotations(SKIPPED_ANNOTATIONS, len(found),
                                  reason_counts(found["reason"].astype(str)))

    def check_skipped(self, max_rejected: float, strict: bool = False) -> None:
        """Refuses a source that skipped more of its objects than `max_rejected` allows
        (a fraction of them, as of rows): then the files, not a few slips, are wrong.
        `strict`: refuses any skipped annotation, naming the first."""
        if strict and self.skipped_annotations is not None and len(self.skipped_annotations):
            raise skipped_annotation_error(self.skipped_annotations)
        counts, skipped = self.annotations, self.num_skipped_objects
        if counts is None or skipped <= math.floor(max_rejected * counts.objects):
            return
        reasons = reason_counts(self.skipped_annotations["reason"].astype(str))
        common = "; ".join(f"{n} x {reason}" for reason, n in
                           list(reasons.items())[:_REASONS_SHOWN])
        raise TooManyRejectedError(
            f"the source's annotations are mostly unusable: {skipped} of its "
            f"{counts.objects} objects would be skipped, more than ",
            Option("max_rejected", max_rejected), f" allows "
            f"({math.floor(max_rejected * counts.objects)}). Most common reasons: {common}. "
            "Check the files are the format and the classes they are read as, or pass ",
            Option("invalid_annotations", "error"), " to see each, or a larger ",
            Option("max_rejected"), ".",
            num_rejected=skipped, num_rows=counts.objects, reasons=reasons)


@dataclass(frozen=True)
class RejectionLimit:
    """How many rows a run may reject: more than `max_rejected` (a fraction of the rows)
    means the table is wrong, not a few images, and the run fails as soon as it is sure.
    Rows the source rejected itself (`source_reasons`) count from the start."""

    num_rows: int
    max_rejected: float = DEFAULT_MAX_REJECTED
    source_reasons: tuple[str, ...] = ()  # of the rows the source rejected
    # `strict=True`: none may be rejected, and the errors name strict=False as the way out
    strict: bool = False

    @classmethod
    def of(cls, table: Table, max_rejected: float, strict: bool = False) -> RejectionLimit:
        """The limit for a table: its rows and those its source rejected."""
        reasons = SourceReport.of(table).rejected_reasons
        return cls(len(table.rows) + len(reasons), max_rejected, reasons, strict)

    def exceeded(self, num_rejected: int) -> bool:
        return num_rejected + len(self.source_reasons) > math.floor(
            self.max_rejected * self.num_rows)

    def error(self, rejections: Sequence[Rejection]) -> TooManyRejectedError:
        """The error naming the commonest reasons (paths in them folded, so that 'no such
        file' for a thousand rows is one reason)."""
        return self.error_of(len(rejections), rejection_reasons(rejections))

    def error_of(self, num_rejected: int, reasons: dict[str, int]) -> TooManyRejectedError:
        """`error`, from the number of rows the run rejected and their reasons' counts
        (`rows.rejection_reasons`)."""
        reasons = merged_reasons(reasons, rejection_reasons(
            Rejection(-1, r) for r in self.source_reasons))
        num_rejected += len(self.source_reasons)
        common = "; ".join(f"{count} x {reason}"
                           for reason, count in list(reasons.items())[:_REASONS_SHOWN])
        return TooManyRejectedError(
            f"{num_rejected} rows were rejected before the run stopped, more than ",
            Option("max_rejected", self.max_rejected), f" of the {self.num_rows} rows "
            f"allows ({math.floor(self.max_rejected * self.num_rows)}). Most common "
            f"reasons: {common}.", *rejection_advice(next(iter(reasons))),
            " Fix the table (are the paths relative to the right "
            "folder?), or pass a larger ", Option("max_rejected"),
            " (1.0 writes whatever can be written).",
            num_rejected=num_rejected, num_rows=self.num_rows, reasons=dict(reasons))


def image_error(rows: Table | SourceRows, rejection: Rejection, strict: bool = False
                ) -> ImageError:
    """What stops a run with `on_error="raise"` (or `strict`): the row, by its label in
    the table (a CSV's line), its image and why it cannot be written. `rows`: the table,
    or its rows as the report of rejected rows looks them up (a pipeline that never holds
    the table: `beam_files.FileRows`), which label them alike."""
    if isinstance(rows, Table):
        rows = SourceRows.of(rows)
    row = rows.index[rejection.position]
    image = rows.image_uris[rejection.position]
    return ImageError(
        f"{name_row(row, rows.index)} ({image!r}): {rejection.reason}.",
        *rejection_advice(rejection.reason), " Fix or drop the row, or ",
        *_let_pass(strict, Option("on_error", "reject")), " to list such rows in "
        "rejected.csv.", column=rows.image_column or "image_uri", rows=[row],
        option="strict" if strict else "on_error")


def source_rejection_error(rows: pd.DataFrame, strict: bool = False) -> ImageError:
    """What stops a run with `on_error="raise"` (or `strict`) when the source rejected
    rows itself (`Table.rejected_rows`, with their `reason`): the first of them."""
    first = rows.iloc[0]
    return ImageError(f"row {rows.index[0]!r} of the source ({first.drop('reason').to_dict()}"
                      f"): {first['reason']}. Fix or drop it, or ",
                      *_let_pass(strict, Option("on_error", "reject")),
                      " to list such rows in rejected.csv.", rows=[rows.index[0]],
                      option="strict" if strict else "on_error")


def skipped_annotation_error(skipped: pd.DataFrame) -> SchemaError:
    """What stops a `strict` run when the source would skip an annotation (its
    `skipped_annotations`, one a row: `annotation_policy.SKIPPED_COLUMNS`): the first."""
    first = skipped.iloc[0]
    where = ", ".join(str(first[c]) for c in ("source", "annotation")
                      if c in first and str(first[c]))
    image = f" (image {first['image']!r})" if "image" in first and str(first["image"]) else ""
    more = f" ({count(len(skipped), 'annotation')} in all)" if len(skipped) > 1 else ""
    return SchemaError(
        f"{where}{image}: {first['reason']}{more}. Fix the annotation, or ",
        *_let_pass(True, Option("invalid_annotations", "skip")),
        " to write the image without it and list it in skipped_annotations.csv.",
        option="strict")


def dataset_warning_error(warnings: Sequence[str]) -> ConversionAborted:
    """What stops a `strict` run that would leave a dataset with warnings
    (`DatasetInfo.warnings`): the first; no dataset is written."""
    first = "" if len(warnings) == 1 else "; the first"
    return ConversionAborted(
        f"the dataset would carry {count(len(warnings), 'warning')}{first}: {warnings[0]}. "
        "No dataset was written. Fix the table, or ", *_let_pass(True),
        " to write it with its warnings.", option="strict")


def _let_pass(strict: bool, option: Option | None = None) -> tuple[str | Option, ...]:
    """How to let an offender pass: `option`; in a `strict` run, strict=False first."""
    if not strict:
        return ("use ", option)
    return ("pass ", Option("strict", False)) + ((" (or ", option, ")") if option else ())


def manifest_header(plan: Plan, table: Table, options: dict, *,
                    num_rows: int | None = None, num_classes: int | None = None,
                    report: SourceReport | None = None) -> Manifest:
    """Everything the manifest says that is known before writing, as small plain data
    (engines that run elsewhere carry this, never the plan itself). `options` are those
    the manifest records (`ConvertOptions.recorded`). A pipeline's plan holds no row
    (`beam_plan`): it gives the numbers of rows and classes and the source's report,
    and `table` is one file's."""
    report = report if report is not None else SourceReport.of(table)
    labels = None
    if table.has_labels:
        labels = Labels(
            type="integer" if plan.label_vocabulary is None else "text",
            vocabulary=plan.label_vocabulary or None,
            multi_label=table.multi_label,
            num_classes=num_classes if num_classes is not None else _num_classes(plan),
            model_ids=plan.model_ids)
    return Manifest(compression=plan.compression, features=dict(plan.features),
                    num_source_rows=(plan.num_rows if num_rows is None else num_rows)
                    + report.num_rejected_rows,
                    options=json.loads(json.dumps(options)),
                    labels=labels, created_by=f"tfrecorder {__version__}",
                    task=table.task, layout=plan.image_options.layout,
                    skipped_annotations=report.skipped(), annotations=report.annotations,
                    media=_media(plan, table))


def _media(plan: Plan, table: Table) -> Media | None:
    """A video or audio dataset's `media` section, before its counts are known."""
    if table.media == "image":
        return None
    options = plan.image_options.media_options
    stored = ("encoded_media" if options is not None and options.keep_media
              else "frames" if table.media == "video" else "waveform")
    return Media(table.media, stored, cut=table.clip_cuts)


def _num_classes(plan: Plan) -> int:
    """The label vocabulary's size, or for integer labels, the largest id + 1."""
    if plan.label_vocabulary is not None:
        return len(plan.label_vocabulary)
    if isinstance(plan.label_ids, RowColumn):  # one id a row
        return int(plan.label_ids.values.max(initial=-1)) + 1
    ids = [i for label in plan.label_ids for i in label]  # multi-label: lists of ids
    return max(ids, default=-1) + 1


@dataclass(frozen=True)
class SourceRows:
    """The source's rows by position, which the report of rejected rows and of
    duplicates names: here a table's, held whole (a pipeline that never holds the table
    looks them up in its files instead: `beam_files.FileRows`)."""

    source: pd.DataFrame  # the rows as the user gave them
    image_uris: Sequence[str] | None  # the images, by position; None: no images
    image_column: str | None = None  # the source's column of images held in memory

    @classmethod
    def of(cls, table: Table) -> SourceRows:
        # By position, as stored (not a Python string a row).
        return cls(table.source, table.image_references if table.has_images else None,
                   table.image_column)

    @property
    def index(self) -> pd.Index:
        """The rows' labels, by position (`index[position]`), and their name."""
        return self.source.index

    def at(self, positions: Sequence[int]) -> pd.DataFrame:
        """The rows at `positions`, as given (images held in cells described, never
        their bytes)."""
        rows = rows_at(self.source, positions)
        if self.image_column is not None:
            rows[self.image_column] = image_cells.described(rows[self.image_column])
        return rows


@dataclass(frozen=True)
class Summary:
    """What `finish` sums up besides the shards: each split's `SplitTally`, the copies
    whose content hashes match (groups of two or more), and the rejected rows. The
    local engine's are made from its shards' facts (`of`); a pipeline sums them in its
    own steps (`beam_files`), so that its finish step holds nothing a record."""

    tallies: dict[Split, SplitTally]
    candidates: list[list[Located]]
    rejected: ListedRejections | RejectedParts

    @classmethod
    def of(cls, written: Written, header: Manifest, rows: SourceRows) -> Summary:
        shards = [(w.split, w.filename, _facts(w)) for w in written.shards]
        tallies: dict[Split, SplitTally] = {}
        for split, _, facts in shards:
            tallies[split] = tallies.get(split, SplitTally()) + facts.tally()
        seeks = rows.image_uris is not None and header.media is None  # clips: not sought
        return cls(tallies, candidate_duplicates(shards) if seeks else [],
                   ListedRejections(written.rejections))


def finish(folder, header: Manifest, written: Written, journal, limit: RejectionLimit,
           rows: SourceRows, report: SourceReport | None = None,
           summary: Summary | None = None) -> Manifest:
    """The last step of every run, whichever engine wrote the shards (a Beam job that the
    driver did not wait for runs it itself): refuses a run that rejected too many rows;
    finds images stored more than once and warns, drops or refuses them as the header's
    `duplicates` option says; writes rejected.csv, the files TensorFlow Datasets reads
    (`tfds_metadata`), then the manifest with the records' statistics, into the run's
    `output.OutputFolder` (each under a temporary name first, so it is either absent or
    complete), and deletes the run's journal. Returns the
    manifest. `rows` are the source's rows by position, which reports name; `report`,
    what the source set aside itself (its rejected rows join rejected.csv, its skipped
    annotations go to `SKIPPED_ANNOTATIONS`); `summary`, what a pipeline summed up of
    the records (else it is made from the shards' facts)."""
    report = report or SourceReport()
    summary = summary or Summary.of(written, header, rows)
    rejected = summary.rejected
    if limit.exceeded(rejected.count):
        raise limit.error_of(rejected.count, rejected.reasons())
    found = _duplicates(folder, header, written, rows, summary.candidates)
    policy = header.options.get("duplicates", "warn")
    if found and policy == "error":
        raise _duplicates_error([duplicate for duplicate, _ in found], limit.strict)
    duplicates = tuple(duplicate for duplicate, _ in found)
    tallies, dropped = dict(summary.tallies), []
    if found and policy == "drop":
        written, duplicates, copies = _drop_copies(folder, header.compression, written, found)
        for copy, why in copies.items():
            dropped.append(Rejection(copy.position, why))
            tallies[copy.split] = tallies[copy.split] - copy.facts.tally()
    rejected.write(folder, rows, dropped, report.rejected_rows)
    if report.skipped_annotations is not None:
        folder.write_bytes(SKIPPED_ANNOTATIONS,
                           report.skipped_annotations.to_csv(index=False).encode())
    splits, statistics = {}, {}
    num_classes = header.labels.num_classes or 0 if header.labels else 0
    for split in SPLITS:
        shards = [w for w in written.shards if w.split == split]
        if shards:
            splits[split] = SplitInfo.of(
                tuple(ShardInfo(w.filename, w.num_records, w.num_bytes, w.sha256,
                                index_filename(w.filename) or "") for w in shards),
                sum(w.num_rejected for w in shards))
            statistics[split] = tallies.get(split, SplitTally()).statistics(
                num_classes, objects=header.task == "detection")
    reasons = merged_reasons(rejected.reasons(), rejection_reasons(dropped),
                             rejection_reasons(Rejection(-1, r)
                                               for r in report.rejected_reasons))
    counted = Rejected(REJECTED, rejected.count + len(dropped) + len(report.rejected_reasons),
                       reasons)
    label_map = label_map_of(header)
    if label_map is not None:
        folder.write_bytes(LABEL_MAP, label_map.encode())
    in_rejected = rejected.objects(rows) + _objects(rows, dropped)
    manifest = header.finished(splits, counted, statistics,
                               None if header.media is not None else duplicates,  # (unsought)
                               _annotations(header, report, statistics, in_rejected))
    if header.media is not None:
        manifest = replace(manifest, media=replace(header.media, counts={
            str(split): tallies.get(split, SplitTally()).clip_counts() for split in splits}))
    if limit.strict:  # nothing of the dataset is written yet but the shards
        warnings = DatasetInfo(folder.path, manifest).warnings
        if warnings:
            raise dataset_warning_error(warnings)
    for name, content in tfds_files(manifest).items():
        folder.write_bytes(name, content)
    folder.write_bytes(MANIFEST, manifest.to_bytes())
    journal.close([shard.filename for shard in written.shards])
    return manifest


def _annotations(header: Manifest, report: SourceReport, statistics: dict,
                 in_rejected: int) -> AnnotationCounts | None:
    """The source's count of its objects, completed by what became of them: written
    (the records' boxes, as the statistics counted them), listed as skipped, or in the
    images rejected (by the source, or by the writer: `in_rejected`, the rows'
    `objects`). Each is counted apart, so `verify` can check that they add up to the
    source's objects."""
    counts = header.annotations
    if counts is None:
        return None
    return replace(counts, written=sum(s.objects.num_boxes for s in statistics.values()
                                       if s.objects is not None),
                   skipped=report.num_skipped_objects,
                   in_rejected_images=report.objects_in_rejected_rows + in_rejected)


def _objects(rows: SourceRows, rejections: Sequence[Rejection]) -> int:
    """The objects of the rejected rows (their `objects` column: a detection source's)."""
    if not rejections:
        return 0
    found = rows.at([r.position for r in rejections])  # (a pipeline's: from its files)
    return int(found["objects"].sum()) if "objects" in found else 0


def _duplicates(folder, header: Manifest, written: Written, rows: SourceRows,
                candidates: list[list[Located]]) -> list[tuple[Duplicate, list[Located]]]:
    """Every image stored more than once, with where each copy is: candidates by their
    content hashes, confirmed by their bytes."""
    if not candidates:
        return []
    filenames = [w.filename for w in written.shards]
    image_key = layout_of(header).key("image")
    confirmed = _same_bytes(folder, header.compression, filenames, candidates, image_key)
    return describe_duplicates(confirmed, filenames, rows.index, rows.image_uris,
                               header.labels)


def _same_bytes(folder, compression: str | None, filenames: Sequence[str],
                candidates: list[list[Located]], image_key: str
                ) -> list[tuple[str, list[Located]]]:
    """The candidates whose stored images are the same bytes, grouped by their SHA-256
    (its first 16 bytes in hex): only these records are read back, each shard once."""
    wanted: dict[int, set[int]] = {}
    for group in candidates:
        for copy in group:
            wanted.setdefault(copy.shard, set()).add(copy.record)
    digests: dict[tuple[int, int], str] = {}
    for shard, records in sorted(wanted.items()):
        last = max(records)
        with open_read(folder.uri(filenames[shard]), compression) as file:
            for index, record in enumerate(read_records(file)):
                if index in records:
                    image = decode_example(record)[image_key][0]
                    digests[shard, index] = hashlib.sha256(image).digest()[:16].hex()
                if index == last:
                    break
    confirmed = []
    for group in candidates:
        by_bytes: dict[str, list[Located]] = {}
        for copy in group:
            by_bytes.setdefault(digests[copy.shard, copy.record], []).append(copy)
        confirmed += [(digest, copies) for digest, copies in by_bytes.items()
                      if len(copies) > 1]
    return confirmed


def _facts(shard: WrittenShard) -> ShardFacts:
    return shard.facts if shard.facts is not None else ShardFacts()


def _duplicates_error(duplicates: Sequence[Duplicate],
                      strict: bool = False) -> DuplicateImagesError:
    """`duplicates="error"`'s error (and `strict`'s)."""
    shown = "; ".join(
        " and ".join(f"{c.named} ({c.image_uri}, {c.split}, label {c.label!r})"
                     for c in duplicate.copies)
        for duplicate in duplicates[:_DUPLICATES_SHOWN])
    more = (f" (and {len(duplicates) - _DUPLICATES_SHOWN} more)"
            if len(duplicates) > _DUPLICATES_SHOWN else "")
    return DuplicateImagesError(
        f"{count(len(duplicates), 'image')} {'is' if len(duplicates) == 1 else 'are'} "
        f"stored more than once: {shown}{more}. No dataset "
        "was written. Remove the copies from the table, or ",
        *(("pass ", Option("strict", False), " with ") if strict else ("pass ",)),
        Option("duplicates", "drop"), " to keep the first copy of each, or ",
        Option("duplicates", "warn"), " to write them all.", column="image_uri",
        rows=[c.row for duplicate in duplicates for c in duplicate.copies],
        duplicates=duplicates)


_DUPLICATES_SHOWN = 5


def _drop_copies(folder, compression: str | None, written: Written, found
                 ) -> tuple[Written, tuple[Duplicate, ...], dict[Located, str]]:
    """Rewrites the shards holding copies to drop (all but each image's first), without
    them; returns the shards, the duplicates as dropped, and each dropped copy with why
    (its row joins the rejected ones, naming the row it repeats). Copies are only known
    once every image has been read, so this is a second pass over the shards that hold
    one, not over the images."""
    reasons = dropped_copies(found)
    by_shard: dict[int, dict[int, str]] = {}
    for where, why in reasons.items():
        by_shard.setdefault(where.shard, {})[where.record] = why
    shards = list(written.shards)
    for index, dropped in sorted(by_shard.items()):
        shard = shards[index]
        # The reader closes before the writer puts the new shard in the old one's place.
        with (ShardWriter(folder.uri(shard.filename), folder.temp_suffix,
                          compression) as writer,
              open_read(folder.uri(shard.filename), compression) as file):
            for record_index, record in enumerate(read_records(file)):
                if record_index not in dropped:
                    writer.write(record)
        shards[index] = replace(shard, num_records=writer.num_records,
                                num_bytes=writer.num_bytes, sha256=writer.sha256,
                                num_rejected=shard.num_rejected + len(dropped),
                                facts=None)  # (the statistics: `finish`'s tallies)
    duplicates = tuple(
        replace(duplicate, copies=tuple(replace(copy, kept=i == 0)
                                        for i, copy in enumerate(duplicate.copies)),
                # the kept copy moves up by the copies dropped before it in its shard
                record=duplicate.record - sum(1 for r in by_shard.get(copies[0].shard, ())
                                              if r < copies[0].record))
        for duplicate, copies in found)
    return replace(written, shards=shards), duplicates, reasons


# --- rejected.csv ---------------------------------------------------------------------


@dataclass(frozen=True)
class ListedRejections:
    """A run's rejected rows, as the engine listed them: `finish` looks their rows up
    and writes rejected.csv."""

    rejections: list[Rejection]

    @property
    def count(self) -> int:
        return len(self.rejections)

    def reasons(self) -> dict[str, int]:
        return rejection_reasons(self.rejections)

    def objects(self, rows: SourceRows) -> int:
        return _objects(rows, self.rejections)

    def write(self, folder, rows: SourceRows, dropped: Sequence[Rejection],
              from_source: pd.DataFrame | None) -> None:
        """rejected.csv: the rows as given, plus a `reason` column, by position (dropped
        copies among them); then the rows the source rejected itself (`from_source`,
        with their `reason`)."""
        frame = _with_reasons(rows, [*self.rejections, *dropped])
        if from_source is not None and len(from_source):
            frame = pd.concat([frame, _source_rejected(frame, from_source)])
            frame.index.name = frame.index.name or "row"
        folder.write_bytes(REJECTED, frame.to_csv(quoting=_quoting(
            _has_lone_return(frame))).encode())


@dataclass(frozen=True)
class RejectedPart:
    """One table file's rejected rows, which a pipeline's worker looked up in its file
    and wrote beside the dataset (`write_rejected_part`), and what `finish` needs of
    them without reading them: it joins the parts into rejected.csv one at a time."""

    file: int  # the table file's index
    name: str  # the part's file, in the output folder (a temporary name of the run)
    count: int
    reasons: dict[str, int]  # `rejection_reasons`
    objects: int  # in the rejected rows (a detection source's `objects` column)
    lone_return: bool  # a cell holds a lone "\r" (`_has_lone_return`)
    head: pd.DataFrame  # no row: the part's columns and their types


def write_rejected_part(folder, rows: SourceRows, file: int,
                        rejections: Sequence[Rejection]) -> RejectedPart:
    """A worker's part of rejected.csv: the rejected rows of table file `file`, as
    `ListedRejections.write` gives them, pickled with their positions and reasons (so
    `finish` can place dropped copies among them)."""
    rejections = sorted(rejections)
    frame = _with_reasons(rows, rejections)
    name = f"{REJECTED}{folder.temp_suffix}part{file:06d}"
    fs.write_bytes(folder.uri(name), pickle.dumps((rejections, frame)))
    return RejectedPart(file, name, len(rejections), rejection_reasons(rejections),
                        int(frame["objects"].sum()) if "objects" in frame else 0,
                        _has_lone_return(frame), frame.iloc[:0])


@dataclass(frozen=True)
class RejectedParts:
    """A pipeline's rejected rows, in parts its workers wrote (`RejectedPart`)."""

    parts: list[RejectedPart]

    @property
    def count(self) -> int:
        return sum(part.count for part in self.parts)

    def reasons(self) -> dict[str, int]:
        return merged_reasons(*(part.reasons for part in self.parts))

    def objects(self, rows) -> int:
        return sum(part.objects for part in self.parts)

    def write(self, folder, rows, dropped: Sequence[Rejection],
              from_source: pd.DataFrame | None) -> None:
        """rejected.csv, the same bytes as `ListedRejections.write` gives: the parts in
        their files' order (dropped copies merged in by position; `rows` are
        `beam_files.FileRows`), each cast to the types the whole table's columns would
        have, then the source's rejected rows, written a part at a time."""
        parts = {part.file: part for part in self.parts}
        extra: dict[int, list[Rejection]] = {}
        for rejection in dropped:
            extra.setdefault(rows.file_of(rejection.position), []).append(rejection)
        extra_frames = {file: (sorted(found), _with_reasons(rows, found))
                        for file, found in extra.items()}
        files = sorted(parts.keys() | extra_frames.keys())
        columns = _with_reasons(rows, [])  # typed as the whole table's (`FileRows.at`)
        if not files:  # no rejected row: the header alone
            extra_frames[-1] = ([], columns)
            files = [-1]
        heads = [columns, *(parts[f].head if f in parts else extra_frames[f][1].iloc[:0]
                            for f in files)]
        tail = None
        if from_source is not None and len(from_source):
            tail = _source_rejected(columns, from_source)
            heads.append(tail.iloc[:0])
        common = pd.concat(heads)
        index_name = common.index.name or "row"
        quoting = _quoting(any(parts[f].lone_return for f in parts)
                           or any(_has_lone_return(frame) for _, frame in extra_frames.values())
                           or (tail is not None and _has_lone_return(tail)))
        with folder.atomic_write(REJECTED) as out:
            for number, file in enumerate(files):
                frame = self._part(folder, parts.get(file), extra_frames.get(file))
                if tail is not None and number == len(files) - 1:
                    frame = pd.concat([frame, tail]) if len(frame) else tail
                frame = frame.reindex(columns=common.columns).astype(common.dtypes.to_dict())
                frame.index.name = index_name
                out.write(frame.to_csv(quoting=quoting, header=number == 0).encode())

    @staticmethod
    def _part(folder, part: RejectedPart | None, extra) -> pd.DataFrame:
        """A file's rejected rows: its part, with dropped copies in their places."""
        rejections, frame = ([], None) if part is None else pickle.loads(
            fs.read_bytes(folder.uri(part.name)))
        if extra is None:
            return frame
        if frame is None:
            return extra[1]
        keys = [*rejections, *extra[0]]
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return pd.concat([frame, extra[1]]).iloc[order]

    def delete(self, folder) -> None:
        fs.delete([folder.uri(part.name) for part in self.parts])


def _with_reasons(rows: SourceRows, rejections: Sequence[Rejection]) -> pd.DataFrame:
    """The rejected rows as given, by position, plus a `reason` column."""
    rejections = sorted(rejections)
    frame = rows.at([r.position for r in rejections])
    frame[_reason_column(frame)] = [r.reason for r in rejections]
    frame.index.name = frame.index.name or "row"
    return frame


def _reason_column(frame: pd.DataFrame) -> str:
    return "reason" if "reason" not in frame.columns else "rejection_reason"


def _source_rejected(frame: pd.DataFrame, from_source: pd.DataFrame) -> pd.DataFrame:
    """The rows the source rejected (with their `reason`), as rejected.csv lists them
    after `frame`'s: under the name of its reason column (`_with_reasons`' last)."""
    return from_source.rename(columns={"reason": frame.columns[-1]})


def _has_lone_return(frame: pd.DataFrame) -> bool:
    """The csv module quotes a cell for its line terminator ("\\n") but not for a lone
    "\\r", which readers take for a line break: a file with one quotes every text cell."""
    cells = frame.reset_index()
    return any(cells[c].astype(str).str.contains("\r", regex=False).any()
               for c in cells.columns
               if cells[c].dtype == object or isinstance(cells[c].dtype, pd.StringDtype))


def _quoting(lone_return: bool) -> int:
    return csv.QUOTE_NONNUMERIC if lone_return else csv.QUOTE_MINIMAL

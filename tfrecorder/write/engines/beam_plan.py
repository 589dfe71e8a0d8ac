"""The plan made by the pipeline's transforms, for a source of many table files on a
Beam runner (`beam_files` runs the job): no process holds the table.

`plan`'s rules each look at one row (or one file) at a time, so these steps apply them as
the local engine does and give its bytes:

1. **CheckFiles.** Each file is read and validated (`table_files.file_table`), its
   labels checked (`plan.plan_labels`), its rows' splits and order keys drawn
   (`plan.split_codes`, `plan.order_keys`): the local engine's functions, on one file.
   Out: the file's `FileFacts` (or the error, naming the file and the line), and its
   rows' places: split, key and row, as arrays.
2. **Plan.** One step over every file's facts. It is the gate: the first file's error
   stops the job here, and every step that reads an image takes its result as a side
   input, so none starts before it. Otherwise the files are checked to be of one kind
   (`concat_tables`' checks), the label vocabulary is made from the labels found, a
   row's position is its file's offset plus its row, and each split's shard count comes
   from the size of the records of the 32 rows first in the order (as the local engine
   samples them).
3. **Boundaries.** Where each shard of each split starts in its order: keys are counted
   in 4,096 buckets of their top bits, and only the buckets that hold a boundary rank
   are sorted (`shard_boundaries`' ranks: contiguous shards, within one of each other).
4. **RowsToShards.** Each file is read again and its rows built as the local engine
   builds them (`PlannedTable`), each keyed by its shard, with the (key, position) its
   shard sorts it by. Reading each file twice costs a second read of the table (no
   image), which spares the shuffle the wide rows before their shard is known.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import apache_beam as beam
import numpy as np
import pandas as pd
from apache_beam.pvalue import AsSingleton

from tfrecorder.errors import Option, OptionError, TFRecorderError
from tfrecorder.format.layouts import record_layout
from tfrecorder.format.manifest import LABEL, Manifest, shard_filename
from tfrecorder.format.splits import SPLITS
from tfrecorder.options import SIZE_SAMPLE, ConvertOptions, RecordOptions
from tfrecorder.sources import concat_tables
from tfrecorder.sources.parquet import ParquetFolder
from tfrecorder.sources.table import Table
from tfrecorder.sources.table_files import file_table
from tfrecorder.write.clip_cutting import clip_length_us
from tfrecorder.write.finish import (
    RejectionLimit,
    SourceReport,
    SourceRows,
    manifest_header,
    source_rejection_error,
)
from tfrecorder.write.plan import (
    Plan,
    RowColumn,
    order_keys,
    plan_labels,
    plan_model_ids,
    row_identities,
    sample_rows,
    shard_boundaries,
    shuffled_order,
    split_codes,
    stored_features,
    warn_of_empty_splits,
)
from tfrecorder.write.planned_table import PlannedTable
from tfrecorder.write.prefetch import mean_record_bytes
from tfrecorder.write.records import encode_rows_without_images
from tfrecorder.write.rows import EncodedRows

_BUCKET_SHIFT = np.uint64(52)  # keys' top 12 bits: 4,096 buckets
_NUM_BUCKETS = 1 << 12


class PlanFiles(beam.PTransform):
    """Steps 1-4, on the listed files (`(index, (path, name))`, in the source's order).
    Returns the plan (one `PipelinePlan`), every shard's index (so that an empty shard is
    written too) and the rows keyed by their shard. `guard` wraps the plan step (its
    error is the table's: `beam_files` hands it to a launcher that waits)."""

    def __init__(self, options: ConvertOptions, dataflow_output: str | None,
                 guard: Callable[[Callable], Callable], folder: ParquetFolder | None = None):
        super().__init__()
        self.options, self.dataflow_output, self.guard = options, dataflow_output, guard
        self.folder = folder  # the Parquet folder the files are of (`pipeline_files`)

    def expand(self, listed):
        checked = listed | "CheckFiles" >> beam.ParDo(
            _CheckFile(self.options, self.dataflow_output, self.folder)).with_outputs(
                _CheckFile.PLACES, main="facts")
        planned = (checked.facts
                   | "AllFacts" >> beam.combiners.ToList()
                   | "Plan" >> beam.Map(self.guard(_plan), self.options, self.folder))
        plan = AsSingleton(planned)
        counts = AsSingleton(checked.places | "CountBuckets" >> beam.CombineGlobally(
            _CountBuckets()))
        wanted = AsSingleton(planned | "WantedRanks" >> beam.Map(_wanted_ranks, counts))
        starts = AsSingleton(
            checked.places
            | "KeysAtBoundaries" >> beam.FlatMap(_keys_in_wanted_buckets, plan, wanted)
            | "ByBucket" >> beam.GroupByKey()
            | "Boundaries" >> beam.FlatMap(_boundaries_in_bucket, wanted)
            | "AllBoundaries" >> beam.combiners.ToList()
            | "BySplit" >> beam.Map(_by_split, plan))
        rows = listed | "RowsToShards" >> beam.FlatMap(_rows_to_shards, self.options, plan,
                                                       starts)
        keys = planned | "ShardIndices" >> beam.FlatMap(_all_shards)
        return planned, keys, rows


# --- 1. each file's facts ---------------------------------------------------------------


@dataclass
class FileFacts:
    """What one file tells the plan: small, whatever its rows."""

    index: int
    path: str
    name: str  # as messages name it (`table_files.file_names`)
    num_rows: int = 0
    head: Table | None = None  # the file's table with one row: its kind and columns
    labels: list = field(default_factory=list)  # each distinct label once
    categories: dict = field(default_factory=dict)  # categorical column -> its values
    split_counts: tuple[int, ...] = (0, 0, 0)
    num_unassigned: int = 0
    sample: list = field(default_factory=list)  # (key, row, Row): its first in order
    report: SourceReport = field(default_factory=SourceReport)
    error: TFRecorderError | None = None
    columns: pd.DataFrame | None = None  # the file's source rows, none of them: their types


@dataclass(frozen=True)
class FilePlaces:
    """Every row of one file: its split, its key in the order, and its row in the file."""

    index: int
    codes: np.ndarray  # int8, the index in SPLITS
    keys: np.ndarray  # uint64, `plan.order_keys`


def _file_plan(path: str, name: str, options: ConvertOptions,
               folder: ParquetFolder | None = None
               ) -> tuple[Table, tuple, np.ndarray, np.ndarray]:
    """One file's table, labels, split codes and order keys, by the local engine's rules
    (`name`: the file's, as the local engine names it: `table_files.file_names`; `folder`:
    the Parquet folder it is one file of)."""
    table = file_table(path, options.table, name, folder)
    labels = plan_labels(table, options.split)
    codes = split_codes(table, options.split.fractions, warn=False)
    keys = order_keys(row_identities(table), options.split.seed)
    return table, labels, codes, keys


class _CheckFile(beam.DoFn):
    """Step 1: a file's facts (or its error) and its rows' places."""

    PLACES = "places"

    def __init__(self, options: ConvertOptions, check_dataflow: str | None,
                 folder: ParquetFolder | None = None):
        self.options, self.check_dataflow, self.folder = options, check_dataflow, folder

    def process(self, element):
        index, (path, name) = element
        try:
            table, _, codes, keys = _file_plan(path, name, self.options, self.folder)
            if self.check_dataflow is not None:
                from tfrecorder.write.engines.beam import check_dataflow

                check_dataflow(self.check_dataflow, table)
        except TFRecorderError as error:
            yield FileFacts(index, path, name, error=error)
            return
        sample = [(int(keys[row.position]), row.position, row) for row
                  in sample_rows(table, shuffled_order(table, self.options.split.seed))]
        yield FileFacts(
            index, path, name, len(table.rows), _head(table), _distinct_labels(table),
            {c.name: _distinct(table.rows[c.name], bool(c.shape))
             for c in table.inputs if c.kind == "categorical"},
            tuple(np.bincount(codes, minlength=len(SPLITS)).tolist()),
            int((table.rows["split"] == "UNASSIGNED").sum()), sample,
            SourceReport.of(table), columns=SourceRows.of(table).at([]))
        yield beam.pvalue.TaggedOutput(self.PLACES, FilePlaces(index, codes, keys))


def _head(table: Table) -> Table:
    """The table with one row, a labelled one if it has any: what its kind, columns,
    labels' kind and label map are (`concat_tables` checks the files alike by them)."""
    first = 0
    if table.has_labels and not table.multi_label:
        labelled = np.flatnonzero(table.rows[LABEL].notna().to_numpy())
        first = int(labelled[0]) if len(labelled) else 0
    keep = slice(first, first + 1)
    return replace(table, rows=table.rows.iloc[keep], source=table.source.iloc[keep],
                   rejected_rows=None, skipped_annotations=None, cell_words={},
                   number_grids={name: grid[keep] for name, grid in table.number_grids.items()})


def _distinct(column: pd.Series, lists: bool) -> list:
    values = (v for value in column.tolist() for v in value) if lists else column.tolist()
    return list(dict.fromkeys(v for v in values if v is not None and v == v))


def _distinct_labels(table: Table) -> list:
    return _distinct(table.rows[LABEL], table.multi_label) if table.has_labels else []


# --- 2. the plan, and the gate ----------------------------------------------------------


@dataclass(frozen=True)
class PipelinePlan:
    """What every later step needs, from every file's facts: no row."""

    paths: tuple[str, ...]
    names: tuple[str, ...]  # as messages name them (`table_files.file_names`)
    offsets: tuple[int, ...]  # each file's first row's position in the table
    vocabulary: tuple[str, ...] | None
    vocabularies: dict
    encoder: RecordOptions
    split_counts: tuple[int, ...]
    shard_counts: tuple[int, ...]
    header: Manifest
    limit: RejectionLimit
    report: SourceReport
    # Whether rows' text labels are numbered by `vocabulary` (else by the options' own
    # class names, or they are ids already).
    numbers_labels: bool = False
    # The Parquet folder the files are of: its rows are named by their position in the
    # folder's table, as the local engine's whole read names them (`FileRows`).
    folder: ParquetFolder | None = None
    # The table's source rows, none of them: its columns, typed as the whole table's
    # (the files' joined), which reports of its rows take (`FileRows`).
    columns: pd.DataFrame | None = None

    @property
    def num_rows(self) -> int:
        return sum(self.split_counts)

    @property
    def shards(self) -> list[tuple[str, str]]:
        """(split, file name) of every shard, in writing order."""
        return [(split, shard_filename(split, index, count, self.header.compression))
                for split, count in zip(SPLITS, self.shard_counts)
                for index in range(count)]

    def file_of(self, position: int) -> int:
        """The index of the file that holds the row at `position` in the table."""
        return bisect.bisect_right(self.offsets, position) - 1

    def first_shard(self, code: int) -> int:
        return sum(self.shard_counts[:code])

    def file_plan(self, table: Table, label_ids) -> Plan:
        """A file's rows as the local engine plans them, with the dataset's ids."""
        return Plan(0, self.encoder, self.header.compression, self.vocabulary, label_ids,
                    RowColumn(np.zeros(0, dtype=np.int8)), (), self.vocabularies,
                    self.header.features, self.encoder.model_ids)


def _plan(facts: list[FileFacts], options: ConvertOptions,
          folder: ParquetFolder | None = None) -> PipelinePlan:
    """Step 2 (`_in_job`: its error reaches a launcher that waits)."""
    facts = sorted(facts, key=lambda f: f.index)
    failed = next((f for f in facts if f.error is not None), None)
    if failed is not None:
        raise failed.error
    heads = {f.name: f.head for f in facts}
    head = concat_tables(heads, {name: name for name in heads}) if len(heads) > 1 \
        else next(iter(heads.values()))
    if head.media != "image" and clip_length_us(options.media) is not None:
        raise OptionError(
            Option("clip_seconds" if options.media.clip_seconds else "clip_frames"),
            " cuts files into clips as the table is read, which a pipeline that reads "
            "its table files itself does not do yet: give convert() the table as a "
            "DataFrame (it is cut before the job starts), or cut the spans into the "
            "table's start and end columns.", option="clip_seconds")
    vocabulary, num_classes = _labels(head, facts, options)
    vocabularies = {c.name: c.categories or tuple(sorted(
        {v for f in facts for v in f.categories[c.name]})) for c in head.inputs
        if c.kind == "categorical"}
    features = stored_features(head, options.image, vocabulary, vocabularies)
    model_ids = plan_model_ids(head, options.split, vocabulary)
    encoder = RecordOptions.of(options.image, vocabulary, features, model_ids)
    encoder = replace(encoder, record_layout=record_layout(encoder))
    if head.media != "image":
        encoder = replace(encoder, media=head.media, media_options=options.media,
                          task=head.task)
    counts = tuple(int(sum(f.split_counts[code] for f in facts)) for code in range(len(SPLITS)))
    num_unassigned = sum(f.num_unassigned for f in facts)
    if num_unassigned:
        warn_of_empty_splits(counts, num_unassigned, options.split.fractions, False,
                             options.reject.strict)
    sample = [row for _, _, row in sorted(
        ((key, (f.index, position), row) for f in facts for key, position, row in f.sample),
        key=lambda item: item[:2])][:SIZE_SAMPLE]
    record_bytes = mean_record_bytes(sample, options, stored_features(
        head, options.image, vocabulary), head.media, head.task)
    shard_counts = tuple(options.shards.count(split, n, record_bytes)
                         for split, n in zip(SPLITS, counts))
    report = SourceReport.joined([f.report for f in facts])
    offsets = tuple(np.cumsum([0, *(f.num_rows for f in facts)])[:-1].tolist())
    summary = Plan(options.split.seed, encoder, options.shards.compression, vocabulary,
                   None, RowColumn(np.zeros(0, dtype=np.int8)), (), vocabularies, features,
                   model_ids)
    header = manifest_header(summary, head, options.recorded(head.media), num_rows=sum(counts),
                             num_classes=num_classes, report=report)
    limit = RejectionLimit(sum(counts) + report.num_rejected_rows,
                           options.reject.max_rejected, report.rejected_reasons,
                           options.reject.strict)
    if report.num_rejected_rows and options.reject.on_error == "raise":
        raise source_rejection_error(report.rejected_rows, limit.strict)
    if limit.exceeded(0):
        raise limit.error([])
    report.check_skipped(options.reject.max_rejected, limit.strict)
    ids_given = options.split.class_names is not None or head.class_names is not None
    return PipelinePlan(tuple(f.path for f in facts), tuple(f.name for f in facts), offsets,
                        vocabulary, vocabularies, encoder, counts, shard_counts, header,
                        limit, report, vocabulary is not None and not ids_given, folder,
                        pd.concat([f.columns for f in facts]))


def _labels(head: Table, facts: list[FileFacts], options: ConvertOptions
            ) -> tuple[tuple[str, ...] | None, int | None]:
    """The label vocabulary of every file's labels, by `plan_labels`' own rules (on a
    table of each distinct label once), and the number of classes."""
    if not head.has_labels:
        return None, None
    distinct = list(dict.fromkeys(v for f in facts for v in f.labels))
    rows = pd.DataFrame({LABEL: [distinct] if head.multi_label else distinct})
    vocabulary, ids = plan_labels(replace(head, rows=rows, source=rows), options.split)
    if vocabulary is not None:
        return vocabulary, len(vocabulary)
    flat = [i for value in ids for i in (value if head.multi_label else [value])]
    return None, max(flat, default=-1) + 1


# --- 3. where each shard starts -----------------------------------------------------------


def _buckets(keys: np.ndarray) -> np.ndarray:
    return (keys >> _BUCKET_SHIFT).astype(np.int64)


class _CountBuckets(beam.CombineFn):
    """Keys per split and bucket, summed over files: 3 x 4,096 counts."""

    def create_accumulator(self):
        return np.zeros((len(SPLITS), _NUM_BUCKETS), dtype=np.int64)

    def add_input(self, counts, places: FilePlaces):
        cells = places.codes.astype(np.int64) * _NUM_BUCKETS + _buckets(places.keys)
        return counts + np.bincount(cells, minlength=counts.size).reshape(counts.shape)

    def merge_accumulators(self, accumulators):
        return sum(accumulators, self.create_accumulator())

    def extract_output(self, counts):
        return counts


def _wanted_ranks(plan: PipelinePlan, counts: np.ndarray) -> dict[tuple[int, int], list]:
    """(split code, bucket) -> [(rank in the bucket, shard index in the split)] for every
    shard but a split's first: its first row's rank, by `shard_boundaries`."""
    wanted: dict[tuple[int, int], list] = {}
    for code, (n, count) in enumerate(zip(plan.split_counts, plan.shard_counts)):
        ends = np.cumsum(counts[code])
        for shard, start in enumerate(shard_boundaries(n, count)[:-1], start=1):
            if start >= n:  # an empty shard at the end (`hosts`): `_by_split` pads
                continue
            bucket = int(np.searchsorted(ends, start, side="right"))
            before = int(ends[bucket - 1]) if bucket else 0
            wanted.setdefault((code, bucket), []).append((start - before, shard))
    return wanted


def _keys_in_wanted_buckets(places: FilePlaces, plan: PipelinePlan, wanted: dict):
    buckets = _buckets(places.keys)
    for code, bucket in wanted:
        rows = np.flatnonzero((places.codes == code) & (buckets == bucket))
        if len(rows):
            positions = rows + plan.offsets[places.index]
            yield (code, bucket), (places.keys[rows], positions)


def _boundaries_in_bucket(element, wanted: dict):
    """The (key, position) at each wanted rank of one bucket, sorted as the local
    engine sorts (by key, ties by position)."""
    (code, bucket), parts = element
    keys = np.concatenate([k for k, _ in parts])
    positions = np.concatenate([p for _, p in parts])
    order = np.lexsort((positions, keys))
    for rank, shard in wanted[code, bucket]:
        row = order[rank]
        yield code, shard, (int(keys[row]), int(positions[row]))


_PAST_THE_END = (2**64, 2**63)  # where an empty last shard starts: after every row


def _by_split(found: list, plan: PipelinePlan) -> dict[int, list]:
    """Split code -> the (key, position) each of its shards after the first starts at;
    empty shards at its end start past every row."""
    starts: dict[int, list] = {code: [] for code in range(len(SPLITS))}
    for code, _, start in sorted(found):
        starts[code].append(start)
    for code, count in enumerate(plan.shard_counts):
        starts[code] += [_PAST_THE_END] * (max(count - 1, 0) - len(starts[code]))
    return starts


# --- 4. rows to their shards ------------------------------------------------------------


def _rows_to_shards(element, options: ConvertOptions, plan: PipelinePlan, starts: dict):
    """Step 4: a file read again, each row built as the local engine builds it, keyed by
    its shard, with its (key, position) to sort by."""
    index, (path, name) = element
    if plan.numbers_labels:  # by the dataset's vocabulary, not the file's own
        options = replace(options, split=replace(
            options.split, label_vocabulary=plan.vocabulary, new_labels="error"))
    table, (_, label_ids), codes, keys = _file_plan(path, name, options, plan.folder)
    planned = PlannedTable(plan.file_plan(table, label_ids), table)
    offset = plan.offsets[index]
    for code, split in enumerate(SPLITS):
        rows = np.flatnonzero(codes == code)
        if not len(rows):
            continue
        bounds = starts.get(code, [])
        for start in range(0, len(rows), 4096):
            chunk = rows[start:start + 4096]
            if not planned.has_images:
                yield from _encoded_batches(planned, chunk, split, plan, code, bounds, keys,
                                            offset)
                continue
            for row, found in zip(chunk.tolist(), planned.rows(chunk, split)):
                where = (int(keys[row]), offset + row)
                shard = plan.first_shard(code) + bisect.bisect_right(bounds, where)
                yield shard, (where, found._replace(position=offset + row))


def _encoded_batches(planned: PlannedTable, chunk: np.ndarray, split: str,
                     plan: PipelinePlan, code: int, bounds: list, keys: np.ndarray,
                     offset: int):
    """A chunk of a table without images as (shard, (None, EncodedRows)): its records
    encoded a column at a time as the local engine encodes them
    (`encode_rows_without_images`), one element a shard the chunk reaches rather than
    one a row (Beam pays its overhead an element, and a worker grouping a shard holds
    bytes, not rows of Python values)."""
    import pyarrow as pa

    labels = planned.labels_at(chunk)
    records = encode_rows_without_images(split, labels, planned.inputs_at(chunk),
                                         plan.encoder)
    chunk_keys = keys[chunk]  # (uint64: compared as Python ints, as `where`s are)
    positions = offset + chunk.astype(np.int64)
    shards = plan.first_shard(code) + np.array(
        [bisect.bisect_right(bounds, where)
         for where in zip(chunk_keys.tolist(), positions.tolist())], dtype=np.int64)
    for shard in np.unique(shards).tolist():
        taken = np.flatnonzero(shards == shard)
        yield shard, (None, EncodedRows(chunk_keys[taken], positions[taken],
                                        [labels[i] for i in taken.tolist()],
                                        records.take(pa.array(taken))))


def _all_shards(plan: PipelinePlan):
    return [(index, None) for index in range(len(plan.shards))]

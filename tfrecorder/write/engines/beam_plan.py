"""The plan made by the pipeline: a source of many table files (`rows/*.parquet`) on a
Beam runner, which the launcher never reads.

The launcher lists the files and submits the graph; a billion rows cost it what ten do.
The job applies `plan`'s rules, which each look at one row (or one file) at a time, so
it writes the local engine's bytes without any process holding the table:

1. **CheckFiles.** Each file is read and validated (`table_files.file_table`), its
   labels checked (`plan.plan_labels`), its rows' splits and order keys drawn
   (`plan.split_codes`, `plan.order_keys`): the local engine's functions, on one file.
   Out: the file's `FileFacts` (or the error, naming the file and the line), and its
   rows' places: split, key and row, as arrays.
2. **Plan.** One step over every file's facts. It is the gate: the first file's error
   stops the job here, and every step that reads an image takes its result as a side
   input, so none starts before it. Otherwise: the files are checked to be of one kind
   (`concat_tables`' checks), the label vocabulary is made from the labels found, a
   row's position is its file's offset plus its row, and each split's shard count comes
   from the size of the records of the 32 rows first in the order (as the local engine
   samples them).
3. **Boundaries.** Where each shard of each split starts in its order: keys are counted
   in 4,096 buckets of their top bits, and only the buckets that hold a boundary rank
   are sorted (`shard_boundaries`' ranks: contiguous shards, within one of each other).
4. **Rows.** Each file is read again and its rows built as the local engine builds them
   (`PlannedTable`), sent to their shards, sorted there by (key, position) and written
   by the Beam engine's `_WriteShard`.
5. **Finish.** The manifest, statistics, duplicates, rejected rows and TFDS files are
   written by `finish.finish` in the job, so the dataset is complete whether or not the
   launcher is still there. Reports look their rows up in the files (`FileRows`).

Reading each file twice costs a second read of the table (no image), which spares the
shuffle the wide rows before their shard is known.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import apache_beam as beam
import numpy as np
import pandas as pd

from tfrecorder.errors import ConversionAborted, Option, OptionError, TFRecorderError
from tfrecorder.format.layouts import record_layout
from tfrecorder.format.manifest import LABEL, Manifest, read_manifest
from tfrecorder.format.splits import SPLITS
from tfrecorder.options import ConvertOptions, RecordOptions
from tfrecorder.sources import concat_tables
from tfrecorder.sources.table import Table
from tfrecorder.sources.table_files import file_table
from tfrecorder.storage import fs
from tfrecorder.write import output
from tfrecorder.write.engines import EngineRun
from tfrecorder.write.engines.beam import (
    Progress,
    _new_temp_folders,
    _options,
    _WriteShard,
    submission_options,
    with_worker_package,
)
from tfrecorder.write.finish import (
    RejectionLimit,
    SourceReport,
    SourceRows,
    Written,
    finish,
    manifest_header,
    source_rejection_error,
)
from tfrecorder.write.output import OutputFolder, private_temp_dir
from tfrecorder.write.plan import (
    Plan,
    RowColumn,
    order_keys,
    plan_labels,
    plan_model_ids,
    row_identities,
    sample_rows,
    shard_boundaries,
    split_codes,
    stored_features,
    warn_of_empty_splits,
)
from tfrecorder.write.planned_table import PlannedTable
from tfrecorder.write.prefetch import mean_record_bytes
from tfrecorder.write.resume import Journal

logger = logging.getLogger(__name__)

_BUCKET_SHIFT = np.uint64(52)  # keys' top 12 bits: 4,096 buckets
_NUM_BUCKETS = 1 << 12
_ERROR_FILE = "error.pkl"  # the job's error, for a launcher that waits


def check_pipeline_options(options: ConvertOptions) -> None:
    """Refuses, at submit time, what a plan made in the pipeline cannot do, with why."""
    if options.split.stratify:
        raise OptionError(
            Option("stratify", True), " ranks every UNASSIGNED row of the table together, "
            "which a pipeline that reads the table file by file does not do. Give the rows "
            "a split column, leave ", Option("stratify"), " out (each row's split from its "
            "own hash), or convert with the local engine (no ", Option("runner"), ").",
            option="stratify")
    if options.output.resume:
        raise OptionError(
            Option("resume", True), " checks the interrupted run's table row by row, "
            "which the launcher of a pipeline never reads. Convert again with ",
            Option("overwrite", True), "; Beam's runners retry failed work themselves.",
            option="resume")


# --- 1. each file's facts ---------------------------------------------------------------


@dataclass
class FileFacts:
    """What one file tells the plan: small, whatever its rows."""

    index: int
    path: str
    num_rows: int = 0
    head: Table | None = None  # the file's table without its rows: its kind and columns
    labels: list = field(default_factory=list)  # each distinct label once
    categories: dict = field(default_factory=dict)  # categorical column -> its values
    split_counts: tuple[int, ...] = (0, 0, 0)
    num_unassigned: int = 0
    sample: list = field(default_factory=list)  # (key, row, Row): its first in order
    report: SourceReport = field(default_factory=SourceReport)
    error: TFRecorderError | None = None


@dataclass(frozen=True)
class FilePlaces:
    """Every row of one file: its split, its key in the order, and its row in the file."""

    index: int
    codes: np.ndarray  # int8, the index in SPLITS
    keys: np.ndarray  # uint64, `plan.order_keys`


def _file_plan(path: str, index: int, options: ConvertOptions
               ) -> tuple[Table, tuple, np.ndarray, np.ndarray]:
    """One file's table, labels, split codes and order keys, by the local engine's rules."""
    table = file_table(path, options.table)
    labels = plan_labels(table, options.split)
    codes = split_codes(table, options.split.fractions, warn=False)
    keys = order_keys(row_identities(table), options.split.seed)
    return table, labels, codes, keys


class _CheckFile(beam.DoFn):
    """Step 1: a file's facts (or its error) and its rows' places."""

    PLACES = "places"

    def __init__(self, options: ConvertOptions, check_dataflow: str | None):
        self.options, self.check_dataflow = options, check_dataflow

    def process(self, element):
        index, path = element
        try:
            table, (vocabulary, _), codes, keys = _file_plan(path, index, self.options)
            if self.check_dataflow is not None:
                from tfrecorder.write.engines.beam import check_dataflow

                check_dataflow(self.check_dataflow, table)
        except TFRecorderError as error:
            yield FileFacts(index, path, error=error)
            return
        order = np.argsort(keys, kind="stable")
        sample = [(int(keys[row.position]), row.position, row)
                  for row in sample_rows(table, order)]
        yield FileFacts(
            index, path, len(table.rows), _head(table), _distinct_labels(table),
            {c.name: _distinct(table.rows[c.name], bool(c.shape))
             for c in table.inputs if c.kind == "categorical"},
            tuple(np.bincount(codes, minlength=len(SPLITS)).tolist()),
            int((table.rows["split"] == "UNASSIGNED").sum()), sample,
            SourceReport.of(table))
        yield beam.pvalue.TaggedOutput(self.PLACES, FilePlaces(index, codes, keys))


def _head(table: Table) -> Table:
    """The table without its rows: what its kind, columns and label map are."""
    return replace(table, rows=table.rows.iloc[:0], source=table.source.iloc[:0],
                   rejected_rows=None, skipped_annotations=None, cell_words={},
                   number_grids={name: grid[:0] for name, grid in table.number_grids.items()})


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

    @property
    def num_rows(self) -> int:
        return sum(self.split_counts)

    @property
    def shards(self) -> list[tuple[str, str]]:
        """(split, file name) of every shard, in writing order."""
        from tfrecorder.format.manifest import shard_filename

        return [(split, shard_filename(split, index, count, self.header.compression))
                for split, count in zip(SPLITS, self.shard_counts)
                for index in range(count)]

    def first_shard(self, code: int) -> int:
        return sum(self.shard_counts[:code])

    def file_plan(self, table: Table, label_ids) -> Plan:
        """A file's rows as the local engine plans them, with the dataset's ids."""
        return Plan(0, self.encoder, self.header.compression, self.vocabulary, label_ids,
                    RowColumn(np.zeros(0, dtype=np.int8)), (), self.vocabularies,
                    self.header.features, self.encoder.model_ids)


def _plan(facts: list[FileFacts], options: ConvertOptions) -> PipelinePlan:
    """Step 2 (`_in_job`: its error reaches a launcher that waits)."""
    facts = sorted(facts, key=lambda f: f.index)
    failed = next((f for f in facts if f.error is not None), None)
    if failed is not None:
        raise failed.error
    heads = {f.path: f.head for f in facts}
    head = concat_tables(heads, {path: path for path in heads}) if len(heads) > 1 \
        else next(iter(heads.values()))
    vocabulary, num_classes = _labels(head, facts, options)
    vocabularies = {c.name: c.categories or tuple(sorted(
        {v for f in facts for v in f.categories[c.name]})) for c in head.inputs
        if c.kind == "categorical"}
    features = stored_features(head, options.image, vocabulary, vocabularies)
    model_ids = plan_model_ids(head, options.split, vocabulary)
    encoder = RecordOptions.of(options.image, vocabulary, features, model_ids)
    encoder = replace(encoder, record_layout=record_layout(encoder))
    counts = tuple(int(sum(f.split_counts[code] for f in facts)) for code in range(len(SPLITS)))
    num_unassigned = sum(f.num_unassigned for f in facts)
    if num_unassigned:
        warn_of_empty_splits(counts, num_unassigned, options.split.fractions, False)
    sample = [row for _, _, row in sorted(
        ((key, (f.index, position), row) for f in facts for key, position, row in f.sample),
        key=lambda item: item[:2])][:max(len(f.sample) for f in facts)]
    record_bytes = mean_record_bytes(sample, options, stored_features(
        head, options.image, vocabulary))
    shard_counts = tuple(options.shards.count(split, n, record_bytes)
                         for split, n in zip(SPLITS, counts))
    report = SourceReport(*(_joined([getattr(f.report, name) for f in facts])
                            for name in ("rejected_rows", "skipped_annotations")))
    offsets = tuple(np.cumsum([0, *(f.num_rows for f in facts)])[:-1].tolist())
    summary = Plan(options.split.seed, encoder, options.shards.compression, vocabulary,
                   None, RowColumn(np.zeros(0, dtype=np.int8)), (), vocabularies, features,
                   model_ids)
    header = manifest_header(summary, head, options.recorded(), num_rows=sum(counts),
                             num_classes=num_classes, report=report)
    limit = RejectionLimit(sum(counts) + report.num_rejected_rows,
                           options.reject.max_rejected, report.rejected_reasons)
    if report.num_rejected_rows and options.reject.on_error == "raise":
        raise source_rejection_error(report.rejected_rows)
    if limit.exceeded(0):
        raise limit.error([])
    ids_given = options.split.class_names is not None or head.class_names is not None
    return PipelinePlan(tuple(f.path for f in facts), offsets, vocabulary, vocabularies,
                        encoder, counts, shard_counts, header, limit, report,
                        vocabulary is not None and not ids_given)


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


def _joined(frames: list) -> pd.DataFrame | None:
    found = [frame for frame in frames if frame is not None and len(frame)]
    return pd.concat(found) if found else None


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


def _keys_in_wanted_buckets(places: FilePlaces, plan: PipelinePlan, counts: np.ndarray):
    wanted = _wanted_ranks(plan, counts)
    buckets = _buckets(places.keys)
    for code, bucket in wanted:
        rows = np.flatnonzero((places.codes == code) & (buckets == bucket))
        if len(rows):
            positions = rows + plan.offsets[places.index]
            yield (code, bucket), (places.keys[rows], positions)


def _boundaries_in_bucket(element, plan: PipelinePlan, counts: np.ndarray):
    """The (key, position) at each wanted rank of one bucket, sorted as the local
    engine sorts (by key, ties by position)."""
    (code, bucket), parts = element
    keys = np.concatenate([k for k, _ in parts])
    positions = np.concatenate([p for _, p in parts])
    order = np.lexsort((positions, keys))
    for rank, shard in _wanted_ranks(plan, counts)[code, bucket]:
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
    index, path = element
    if plan.numbers_labels:  # by the dataset's vocabulary, not the file's own
        options = replace(options, split=replace(
            options.split, label_vocabulary=plan.vocabulary, new_labels="error"))
    table, (_, label_ids), codes, keys = _file_plan(path, index, options)
    planned = PlannedTable(plan.file_plan(table, label_ids), table)
    offset = plan.offsets[index]
    for code, split in enumerate(SPLITS):
        rows = np.flatnonzero(codes == code)
        if not len(rows):
            continue
        bounds = starts.get(code, [])
        for start in range(0, len(rows), 4096):
            chunk = rows[start:start + 4096]
            for row, built in zip(chunk.tolist(), planned.rows(chunk, split)):
                where = (int(keys[row]), offset + row)
                shard = plan.first_shard(code) + bisect.bisect_right(bounds, where)
                yield shard, (where, built._replace(position=offset + row))


def _all_shards(_, plan: PipelinePlan):
    return [(index, None) for index in range(len(plan.shards))]


# --- 5. the finish, in the job ------------------------------------------------------------


class FileRows:
    """The source's rows by position (as `finish.SourceRows` gives them), looked up in
    its files: only the files that hold a row a report names are read again, each once."""

    image_column = None  # rows come described (`SourceRows.at`)

    def __init__(self, plan: PipelinePlan, options: ConvertOptions):
        self.plan, self.options, self._tables = plan, options, {}
        has_images = bool(plan.paths) and self._table(0).has_images
        self.image_uris = _ByPosition(self, lambda table, row: table.image_references[row]) \
            if has_images else None

    def _table(self, index: int) -> Table:
        if index not in self._tables:
            self._tables[index] = file_table(self.plan.paths[index], self.options.table)
        return self._tables[index]

    def _where(self, position: int) -> tuple[int, int]:
        """The file and the row in it of a position in the table."""
        index = bisect.bisect_right(self.plan.offsets, position) - 1
        return index, position - self.plan.offsets[index]

    @property
    def index(self):
        return _ByPosition(self, lambda table, row: table.source.index[row],
                           name=self._table(0).source.index.name)

    def at(self, positions: Sequence[int]) -> pd.DataFrame:
        by_file: dict[int, list[int]] = {}
        for position in positions:
            index, row = self._where(position)
            by_file.setdefault(index, []).append(row)
        parts = [SourceRows.of(self._table(index)).at(rows)
                 for index, rows in by_file.items()]
        return pd.concat(parts) if parts else SourceRows.of(self._table(0)).at([])


class _ByPosition:
    """A column of the source by position (`FileRows`), as reports index it."""

    def __init__(self, rows: FileRows, value, name=None):
        self.rows, self.value, self.name = rows, value, name

    def __getitem__(self, position: int):
        index, row = self.rows._where(int(position))
        return self.value(self.rows._table(index), row)


def _finish_in_job(results, plan: PipelinePlan, folder: OutputFolder, journal: Journal,
                   options: ConvertOptions) -> None:
    """Step 5: the dataset's last files, then the folder's lock released."""
    results = sorted(results, key=lambda item: item[0])
    written = Written([shard for _, shard, _ in results],
                      [r for _, _, rejected in results for r in rejected])
    finish(folder, plan.header, written, journal, plan.limit, FileRows(plan, options),
           plan.report)
    output.release(folder)


def _in_job(step, error_file: str | None):
    """`step`, whose error is also written to `error_file` for a launcher that waits (a
    runner in other processes sends it back as text only)."""
    def run(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except TFRecorderError as error:
            if error_file is not None:
                with contextlib.suppress(Exception):
                    fs.write_bytes(error_file, pickle.dumps(error))
            raise
    return run


# --- the launcher -----------------------------------------------------------------------


def convert_in_pipeline(files: list[str], output_dir: str, options: ConvertOptions
                        ) -> tuple[Manifest | None, EngineRun]:
    """`convert` for a source of many files on a Beam runner: checks the options, claims
    the folder, submits the job; with `wait`, returns its manifest once it is done (else
    None)."""
    check_pipeline_options(options)
    runner = options.beam.runner
    pipeline_options = submission_options(runner, output_dir, options.beam.pipeline_options())
    dry_run = bool(pipeline_options.get("dry_run"))
    wait = options.beam.waits and not dry_run
    run_id = output.new_run_id()
    fs.check_access([], output_dir, f".tfrecorder-probe-{run_id}")
    with output.claim(output_dir, run_id, resume=False,
                      overwrite=options.output.overwrite) as folder, \
            with_worker_package(runner, pipeline_options) as pipeline_options, \
            contextlib.ExitStack() as stack:
        folder.clear(folder.existing)
        journal = Journal(folder, run_id, resumable=False)
        error_file = None
        if wait:
            temp_root = pipeline_options.get("temp_location")
            staging = (fs.join(temp_root, f"tfrecorder-{run_id}") if temp_root else
                       stack.enter_context(private_temp_dir("staging")))
            error_file = fs.join(staging, _ERROR_FILE)
        result, made = None, []
        try:
            pipeline = _pipeline(files, folder, journal, options, runner, pipeline_options,
                                 error_file, output_dir if runner == "DataflowRunner" else None)
            with _new_temp_folders() as made:
                result = _run(pipeline, wait, error_file)
            folder.handed_over = not wait and not dry_run
        except BaseException as error:
            folder.clean_up(keep_committed=False)
            if isinstance(error, (TFRecorderError, KeyboardInterrupt)):
                raise
            raise ConversionAborted(f"the Beam pipeline failed; no dataset was written to "
                                    f"{output_dir!r}: {error}") from error
        finally:
            output.remove_empty_folders(made)
            if error_file is not None and fs.is_remote(error_file):
                with contextlib.suppress(Exception):
                    fs.delete([error_file])
    manifest = read_manifest(output_dir) if wait else None
    job_id = result.job_id() if hasattr(result, "job_id") else None
    return manifest, EngineRun(_written_of(manifest), job_id, result)


def _run(pipeline: beam.Pipeline, wait: bool, error_file: str | None):
    """Submits the job (a local runner runs it here) and with `wait`, waits for it. A
    job that failed on purpose (a table error, too many rejected rows) raises its own
    error, as the job wrote it; Ctrl-C cancels a job still running."""
    result = None
    try:
        result = pipeline.run()
        if wait:
            result.wait_until_finish()
            state = str(getattr(result, "state", ""))
            if "FAILED" in state or "CANCELLED" in state:
                raise ConversionAborted(f"the Beam job ended {state}")
        return result
    except BaseException as error:
        if result is not None and isinstance(error, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                result.cancel()
        if isinstance(error, Exception) and error_file is not None and fs.exists(error_file):
            raise pickle.loads(fs.read_bytes(error_file)) from None
        raise


def _written_of(manifest: Manifest | None) -> Written | None:
    """What the job wrote, from its manifest (the launcher had no part in it)."""
    if manifest is None:
        return None
    from tfrecorder.write.finish import WrittenShard

    shards = [WrittenShard(split, shard.file, shard.num_records, shard.num_bytes, 0)
              for split, shard in manifest.shards]
    return _Counted(shards, [], manifest.rejected.num_rows)


@dataclass(frozen=True)
class _Counted(Written):
    num_rejected: int = 0

    @property
    def metrics(self) -> dict[str, int]:
        written = sum(shard.num_records for shard in self.shards)
        return {"rows_read": written + self.num_rejected, "records_written": written,
                "rows_rejected": self.num_rejected}


def _pipeline(files: list[str], folder: OutputFolder, journal: Journal,
              options: ConvertOptions, runner: str, pipeline_options: dict,
              error_file: str | None, dataflow_output: str | None) -> beam.Pipeline:
    """The job's graph: files in, dataset out (steps 1-5)."""
    from apache_beam.pvalue import AsSingleton

    pipeline = beam.Pipeline(options=_options(runner, pipeline_options))
    listed = (pipeline
              | "ListedFiles" >> beam.Create(list(enumerate(files)))
              | "SpreadFiles" >> beam.Reshuffle())
    checked = listed | "CheckFiles" >> beam.ParDo(
        _CheckFile(options, dataflow_output)).with_outputs(_CheckFile.PLACES, main="facts")
    plan = AsSingleton(checked.facts
                       | "AllFacts" >> beam.combiners.ToList()
                       | "Plan" >> beam.Map(_in_job(_plan, error_file), options))
    counts = AsSingleton(checked.places | "CountBuckets" >> beam.CombineGlobally(
        _CountBuckets()))
    starts = AsSingleton(
        checked.places
        | "KeysAtBoundaries" >> beam.FlatMap(_keys_in_wanted_buckets, plan, counts)
        | "ByBucket" >> beam.GroupByKey()
        | "Boundaries" >> beam.FlatMap(_boundaries_in_bucket, plan, counts)
        | "AllBoundaries" >> beam.combiners.ToList()
        | "BySplit" >> beam.Map(_by_split, plan))
    rows = listed | "RowsToShards" >> beam.FlatMap(_rows_to_shards, options, plan, starts)
    keys = (pipeline | "Once" >> beam.Create([None])
            | "ShardIndices" >> beam.FlatMap(_all_shards, plan))
    written = ({"key": keys, "rows": rows}
               | "GroupByShard" >> beam.CoGroupByKey()
               | "EncodeAndWrite" >> beam.ParDo(_WriteShard(
                   folder, None, None, None, options.reject.on_error, journal,
                   Progress(folder.run_id, 0, False)), plan))
    _ = (written
         | "AllShards" >> beam.combiners.ToList()
         | "Finish" >> beam.Map(_in_job(_finish_in_job, error_file), plan, folder, journal,
                                options))
    return pipeline

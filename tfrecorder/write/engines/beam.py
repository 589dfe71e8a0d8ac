"""The Beam engine: the same plan, executed by any Apache Beam runner. The driver stages
the planned rows as a Parquet file, images held in memory included (and the source
table, for the rejected-rows report), next to the job's temporary data, so the table is
read by a Beam source and never embedded in the job graph. The pipeline groups rows by
shard, encodes each with `records.encode_row` and writes each shard through the shared
`ShardWriter`, in plan order, so shards are byte-identical to the local engine's. Its
last step hands what it wrote to the driver, which finishes the dataset as after the
local engine; a job that runs on after the driver has gone finishes it itself, with the
same `finish.finish`, so it too leaves a complete dataset.

Workers need neither TensorFlow nor the driver's memory: they get small descriptors of
the shards, the image options and the manifest's header. (This module imports Beam; it
is imported only when a runner is asked for.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from itertools import islice

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from tfrecorder.errors import (
    ConversionAborted,
    ImageError,
    Option,
    OptionError,
    SchemaError,
    TooManyRejectedError,
)
from tfrecorder.format.manifest import Manifest
from tfrecorder.format.tfrecord import ShardWriter, framed
from tfrecorder.options import ConvertOptions, RecordOptions
from tfrecorder.sources import image_cells
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.wording import name_rows
from tfrecorder.write import output
from tfrecorder.write.annotations import segmentation
from tfrecorder.write.engines import EngineRun
from tfrecorder.write.engines.shipping import build_worker_wheel, needs_package
from tfrecorder.write.finish import (
    RejectionLimit,
    SourceReport,
    SourceRows,
    Written,
    WrittenShard,
    finish,
    image_error,
)
from tfrecorder.write.output import OutputFolder, private_temp_dir
from tfrecorder.write.plan import Plan
from tfrecorder.write.planned_table import planned_rows
from tfrecorder.write.prefetch import Prefetcher, encode_in_order
from tfrecorder.write.records import encode_rows_without_images
from tfrecorder.write.resume import Journal
from tfrecorder.write.rows import EncodedRows, Rejection, Row
from tfrecorder.write.statistics import NO_IMAGE, Located, ShardFacts

logger = logging.getLogger(__name__)

_METRICS = "tfrecorder"


def check_runner(runner: str, beam_options: Mapping) -> None:
    """Refuses, before any work starts, a runner Beam does not know and options Beam or
    Dataflow would refuse (Beam would only say so once the job is built)."""
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
    from apache_beam.runners.runner import create_runner

    try:
        created = create_runner(runner)
    except ValueError as error:  # Beam: "Unexpected pipeline runner: ..."
        raise OptionError(Option("runner"), f" {runner!r} is not a runner Beam knows: "
                          f"{error}", option="runner") from None
    if runner == "DataflowRunner":
        missing = [name for name in ("project", "region", "temp_location")
                   if not beam_options.get(name)]
        if missing:
            named = [part for name in missing for part in (", ", Option(name))][1:]
            raise OptionError("DataflowRunner needs ", *named, ": pass them to convert() "
                              "(or in ", Option("beam_options"), ").", option=missing[0])
        _check_remote("temp_location", beam_options["temp_location"])
    errors = PipelineOptionsValidator(_options(runner, beam_options), created).validate()
    if errors:
        raise OptionError(f"invalid Beam options for {runner}: {'; '.join(errors)}. Fix ",
                          Option("beam_options"), ".", option="beam_options")


def _options(runner: str, beam_options: Mapping) -> PipelineOptions:
    # flags=[]: otherwise Beam parses this process's command line (pytest's, the CLI's)
    return PipelineOptions(flags=[], runner=runner, **beam_options)


def check_dataflow(output_dir: str, table: Table) -> None:
    """Refuses what Dataflow's workers could not reach: a local output folder or images."""
    _check_remote("output_dir", output_dir)
    if not table.image_files:  # none, or held in memory: staged in temp_location
        return
    local = [i for i, uri in zip(table.rows.index, table.rows["uri"].tolist())
             if not fs.is_remote(uri)]
    if local:
        raise SchemaError(
            f"column 'image_uri' has local paths Dataflow's workers cannot read, at "
            f"{name_rows(local, of=table.rows.index)} (e.g. "
            f"{table.rows['image_uri'][local[0]]!r}). Upload the images to gs:// first.",
            column="image_uri", rows=local, option="runner")


def temp_location_for(output_dir: str) -> str:
    """Where a Dataflow job without a `temp_location` stages its files: a folder at the
    top of the output's bucket, outside the dataset's folder (as TFRecorder 2.0 derived
    its own from `output_dir`)."""
    found = fs.join(fs.bucket_root(output_dir), "tfrecorder-temp")
    logger.info("temp_location is not given: the job stages its files in %s.", found)
    return found


def _check_remote(name: str, uri: str) -> None:
    if not fs.is_remote(uri):
        raise OptionError(Option(name), " must be a gs:// URI that Dataflow's workers can "
                          f"reach, not the local path {uri!r}.", option=name)


class BeamEngine:
    """The Beam engine, as `engines.Engine`."""

    def __init__(self, options: ConvertOptions):
        self.options = options.beam
        self.on_error = options.reject.on_error
        self.progress = options.run.progress

    def check(self, output_dir: str, table: Table) -> None:
        if self.options.runner == "DataflowRunner":
            check_dataflow(output_dir, table)  # needs no network: first
        self.pipeline_options = submission_options(self.options.runner, output_dir,
                                                   self.options.pipeline_options())


    def write(self, plan: Plan, table: Table, folder: OutputFolder, *, header: Manifest,
              journal: Journal, limit: RejectionLimit) -> EngineRun:
        return write_beam(plan, table, folder, header=header, journal=journal, limit=limit,
                          runner=self.options.runner,
                          beam_options=self.pipeline_options,
                          on_error=self.on_error, wait=self.options.waits,
                          progress=self.progress)


def submission_options(runner: str, output_dir: str, pipeline_options: dict) -> dict:
    """The options a job is submitted with, checked (`check_runner`); for Dataflow, an
    output its workers can reach and a `temp_location` (`temp_location_for`)."""
    if runner == "DataflowRunner":
        _check_remote("output_dir", output_dir)
        if not pipeline_options.get("temp_location"):
            pipeline_options["temp_location"] = temp_location_for(output_dir)
    check_runner(runner, pipeline_options)
    return pipeline_options


def write_beam(
    plan: Plan,
    table: Table,
    folder: OutputFolder,
    *,
    header: Manifest,
    journal: Journal,
    limit: RejectionLimit,
    runner: str,
    beam_options: Mapping | None = None,
    on_error: str = "reject",
    wait: bool = True,
    progress: bool = True,
) -> EngineRun:
    """Runs the plan as a Beam pipeline; with `wait`, until it is done, and returns what
    it wrote. Without, the job finishes the dataset (`finish.finish`) and releases the
    folder's lock itself."""
    wait = wait and not (beam_options or {}).get("dry_run")  # a dry run builds the job only
    with with_worker_package(runner, beam_options) as beam_options, \
            contextlib.ExitStack() as stack:
        temp_root = beam_options.get("temp_location")
        if temp_root is not None:
            staging = fs.join(temp_root, f"tfrecorder-{folder.run_id}")
        elif wait or beam_options.get("dry_run"):
            staging = stack.enter_context(private_temp_dir("staging"))
        else:  # the job reads it after we return; swept once this process is gone
            staging = output.new_private_dir("staging")
        progress = Progress(folder.run_id, plan.num_rows, progress and wait)
        with progress.bar():
            return _run(plan, table, folder, staging, header, journal, limit, runner,
                        beam_options, on_error, wait, progress)


@contextlib.contextmanager
def with_worker_package(runner: str, beam_options: Mapping | None) -> Iterator[dict]:
    """`beam_options` with tfrecorder's own wheel among `extra_packages` where the
    runner's workers need it (`shipping`), for as long as the job is being submitted
    (`run()` has staged the wheel by the time the block exits)."""
    beam_options = dict(beam_options or {})
    with private_temp_dir("wheel") as wheel_dir:
        if needs_package(runner, beam_options):
            beam_options["extra_packages"] = [*(beam_options.get("extra_packages") or []),
                                              str(build_worker_wheel(wheel_dir))]
        yield beam_options


def _run(plan, table, folder: OutputFolder, staging, header, journal, limit, runner,
         beam_options, on_error, wait, progress: Progress) -> EngineRun:
    """Stages the planned rows, builds and runs the pipeline."""
    staged = _stage(plan, table, staging, folder)
    shards = [(shard.split, shard.filename) for shard in plan.shards]
    result, staging_used = None, True  # until the job has read the staged rows
    made: list[str] = []  # Beam's temporary folders, removed once the job is done
    try:
        pipeline = beam.Pipeline(options=_options(runner, beam_options))
        rows = (pipeline
                | "ReadPlannedRows" >> beam.io.ReadFromParquet(staged[0])
                | "ParseRows" >> beam.Map(_parse_row))
        keys = pipeline | "ShardIndices" >> beam.Create([(i, None) for i in range(len(shards))])
        written = ({"key": keys, "rows": rows}
                   | "GroupByShard" >> beam.CoGroupByKey()
                   | "EncodeAndWrite" >> beam.ParDo(_WriteShard(
                       folder, shards, plan.image_options, plan.compression, on_error,
                       journal, progress)))
        _ = (written
             | "AllShards" >> beam.combiners.ToList()
             | "Finish" >> beam.Map(_last_step, folder, header, journal, limit, staged,
                                    not wait))
        with _new_temp_folders() as made:
            result = pipeline.run()
        written = None
        if wait:
            result.wait_until_finish()
            written = pickle.loads(fs.read_bytes(staged[2]))
        # A job the driver does not wait for deletes them itself (`_last_step`).
        staging_used = not wait and not beam_options.get("dry_run")
    except BaseException as error:
        staging_used = False
        _cancel(result)
        if isinstance(error, _RowRejected):  # named as the local engine names it
            raise image_error(table, error.rejection, limit.strict) from None
        if isinstance(error, (ImageError, TooManyRejectedError, KeyboardInterrupt)):
            raise
        raise ConversionAborted(
            f"the Beam pipeline failed; no dataset was written to {folder.path!r}: {error}"
        ) from error
    finally:
        if not staging_used and fs.is_remote(staged[0]):  # local: the caller's folder
            fs.delete(staged)
        if not staging_used:
            output.remove_empty_folders(made)
    job_id = result.job_id() if hasattr(result, "job_id") else None
    if not wait:
        folder.handed_over = not beam_options.get("dry_run")
    return EngineRun(written, job_id, result)


# What Beam's runners leave in the temporary folder, made by `tempfile.mkdtemp` as a job
# starts and never removed: the Prism job server's `beam-temp*` and the SDK's staged
# dependencies' `tmp*` (Beam 2.6x).
_BEAM_TEMP = re.compile(r"(beam-temp|tmp)[a-z0-9_]{8}")


@contextlib.contextmanager
def _new_temp_folders() -> Iterator[list[str]]:
    """The folders Beam makes in the temporary folder while a job starts, to remove once
    it is done (`output.remove_empty_folders`). Only those that appear in these few seconds, under
    Beam's names, owned by this user: nothing another program made long before."""
    root = tempfile.gettempdir()
    before = set(os.listdir(root))
    made: list[str] = []
    try:
        yield made
    finally:
        made += [os.path.join(root, name) for name in set(os.listdir(root)) - before
                 if _BEAM_TEMP.fullmatch(name)]


def _cancel(result) -> None:
    """Stops a job that is still running (Ctrl-C while waiting on a remote runner)."""
    if result is None:
        return
    with contextlib.suppress(Exception):
        result.cancel()


# The staged rows' columns: where each goes, the Row's fields, the image held in memory
# (`image_cells.staged`). Label and inputs are JSON, whose numbers read back exactly.
_STAGED = (("shard", "int32"), ("order", "int64"), ("position", "int64"), ("uri", "string"),
           ("image_uri", "string"), ("label", "string"), ("split", "string"),
           ("inputs", "string"), ("image_bytes", "binary"), ("image_pickle", "binary"),
           ("image_name", "string"), ("masks", "string"), ("mask_uri", "string"),
           ("annotated_size", "string"), ("clip", "string"))
_STAGED_GROUP_BYTES = 64 << 20  # rows a row group holds: about this many bytes


def _stage(plan: Plan, table: Table, staging: str, folder: OutputFolder
           ) -> tuple[str, str, str]:
    """Writes the planned rows (a Parquet file, in row groups of about 64 MB, so images
    held in memory are streamed, never all in one buffer) and the source table for the
    report where the workers can read them; the job writes what it wrote to the third
    path, for the driver."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs.makedirs(staging)
    rows_path, source_path = fs.join(staging, "rows.parquet"), fs.join(staging, "source.pkl")
    written_path = fs.join(staging, "written.pkl")
    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in _STAGED])
    rows = planned_rows(plan, table)
    with fs.atomic_write(rows_path, folder.temp_suffix) as f, \
            pq.ParquetWriter(f, schema) as writer:
        group, size = [], 0
        for index, shard in enumerate(plan.shards):
            for order, row in enumerate(islice(rows, len(shard.positions))):
                image_bytes, image_pickle = image_cells.staged(row.image) \
                    if row.image is not None else (None, None)
                group.append((index, order, row.position, row.uri, row.image_uri,
                              json.dumps(row.label), row.split, json.dumps(row.inputs),
                              image_bytes, image_pickle, row.image_name,
                              None if row.masks is None else json.dumps(
                                  row.masks, default=_plain_json),
                              row.mask_uri, None if row.annotated_size is None
                              else json.dumps(list(row.annotated_size)),
                              _staged_clip(row)))
                size += len(image_bytes or image_pickle or b"") + 100
                if size >= _STAGED_GROUP_BYTES:
                    writer.write_table(_staged_table(group, schema))
                    group, size = [], 0
        if group or not plan.num_rows:
            writer.write_table(_staged_table(group, schema))
    source = table.source
    if table.image_column is not None:  # the report shows images held in memory by name
        source = source.assign(**{table.image_column: image_cells.described(
            source[table.image_column])})
    references = list(table.image_references) if table.has_images else None
    # Images held in cells are described already: the rows need no image column.
    fs.write_bytes(source_path, pickle.dumps((SourceRows(source, references),
                                              SourceReport.of(table))),
                   temp_suffix=folder.temp_suffix)
    return rows_path, source_path, written_path


def _plain_json(value):
    """A mask's value as JSON takes it: a COCO segmentation's JSON text
    (`annotations.segmentation`) as what it holds, NumPy arrays and numbers as Python's."""
    found = segmentation(value)
    return found if found is not value else value.tolist()


def _staged_table(group: list[tuple], schema):
    import pyarrow as pa

    return pa.Table.from_arrays([pa.array(list(column), type=field.type) for column, field
                                 in zip(zip(*group) if group else [()] * len(schema), schema)],
                                schema=schema)


def _parse_row(staged: dict) -> tuple[int, tuple[int, Row]]:
    image = None
    if staged["image_bytes"] is not None or staged["image_pickle"] is not None:
        image = image_cells.unstaged(staged["image_bytes"], staged["image_pickle"])
    return staged["shard"], (staged["order"], Row(
        staged["position"], staged["uri"], staged["image_uri"], json.loads(staged["label"]),
        staged["split"], json.loads(staged["inputs"]), image, staged["image_name"],
        None if staged["masks"] is None else json.loads(staged["masks"]), staged["mask_uri"],
        None if staged["annotated_size"] is None else tuple(json.loads(
            staged["annotated_size"])), *_unstaged_clip(staged.get("clip"))))


def _staged_clip(row: Row) -> str | None:
    """A video or audio row's span and timed annotations, as JSON (None: not a clip)."""
    if row.clip_start_us is None and row.clip_end_us is None and row.timed is None:
        return None
    return json.dumps([row.clip_start_us, row.clip_end_us, row.timed])


def _unstaged_clip(staged: str | None) -> tuple:
    if staged is None:
        return None, None, None
    start, end, timed = json.loads(staged)
    return start, end, None if timed is None else tuple(map(tuple, timed))


def tagged_as_named(error: BaseException) -> BaseException:
    """`error`, marked as Beam marks an error it has named (`_tagged_with_step`, a private
    detail, checked on Beam 2.77), so that Beam raises it from a step as it is: not
    rebuilt from its message, and not logged with its traceback first."""
    error._tagged_with_step = True
    return error


class _RowRejected(ImageError):
    """`on_error="raise"` in a worker, which knows the row's position, not its label in
    the table: where the error itself reaches the driver, it raises `finish.image_error`
    instead. The rejection rides in `args`, which Beam keeps when it re-raises an error
    with its step's name appended. Runners in other processes send only the error's text,
    which names the image and the reason."""

    def __init__(self, message: str, position: int, reason: str):
        super().__init__(message)
        self.args = (message, position, reason)
        self.rejection = Rejection(position, reason)

    def __reduce__(self):
        return type(self), self.args


class _WriteShard(beam.DoFn):
    """Encodes one shard's rows in plan order, reading images ahead, and writes the
    shard; a shard the journal holds as committed (a resumed run) is kept."""

    def __init__(self, folder: OutputFolder, shards, options: RecordOptions, compression,
                 on_error, journal: Journal, progress: Progress):
        self.folder, self.shards, self.journal = folder, shards, journal
        self.progress = progress
        self.options, self.compression, self.on_error = options, compression, on_error
        self.read = Metrics.counter(_METRICS, "rows_read")
        self.written = Metrics.counter(_METRICS, "records_written")
        self.rejected = Metrics.counter(_METRICS, "rows_rejected")

    def setup(self):
        self.prefetcher = Prefetcher()

    def teardown(self):
        # Reads still in flight here are of a step that stopped (Ctrl-C): not waited for.
        self.prefetcher.close()

    def process(self, element, plan=None):
        """`plan`: a plan made in the pipeline (`beam_plan.PipelinePlan`), a side input
        that names the shards and their encoding, where the driver did not."""
        if plan is not None:
            self.shards, self.options = plan.shards, plan.encoder
            self.compression = plan.header.compression
        try:
            for index, shard, rejections in self._write_shard(element):
                if plan is None:
                    yield index, shard, rejections
                else:
                    yield from _summarized(index, shard, rejections, plan)
        except (KeyboardInterrupt, _RowRejected) as stop:  # not a failure of the step:
            # Ctrl-C or SIGTERM, or a row that stops the run (`on_error="raise"`, `strict`).
            # Raised as it is, the run stops as on the local engine, with the signal's
            # exit status or the row's one line, not after a traceback Beam logs (nor
            # as a RuntimeError or a `Terminated` rebuilt from its message).
            tagged_as_named(stop)
            raise

    def _write_shard(self, element):
        index, grouped = element
        split, filename = self.shards[index]
        if filename in self.journal.committed:
            shard, rejections = self.journal.committed[filename]
            self.progress.update(shard.num_records + len(rejections), filename)
            yield index, shard, rejections
            return
        grouped_rows = list(grouped["rows"])
        batches = [rows for order, rows in grouped_rows if order is None]
        rows = [row for _, row in sorted((item for item in grouped_rows
                                          if item[0] is not None), key=lambda item: item[0])]
        rejections, facts = [], ShardFacts()
        with ShardWriter(self.folder.uri(filename), self.folder.temp_suffix,
                         self.compression) as writer:
            if batches:  # a table without images, encoded where it was planned
                self._write_encoded(batches, filename, writer, facts)
            elif rows and rows[0].uri is None and rows[0].image is None:  # a table without
                # images: a column at a time
                self._write_without_images(rows, split, filename, writer, facts)
                rows = []
            for row, result in encode_in_order(rows, self.options, self.prefetcher):
                self.read.inc()
                self.progress.update(1, filename)
                if isinstance(result, Rejection):
                    if self.on_error == "raise":
                        raise _RowRejected(f"{row.image_uri!r}: {result.reason}", *result)
                    rejections.append(result)
                    self.rejected.inc()
                else:
                    writer.write(result.example)
                    facts.add(row, result)
                    self.written.inc()
        shard = WrittenShard(split, filename, writer.num_records, writer.num_bytes,
                             len(rejections), writer.sha256, facts)
        self.journal.commit(shard, rejections)
        yield index, shard, rejections


    def _write_encoded(self, batches: list[EncodedRows], filename: str, writer: ShardWriter,
                       facts: ShardFacts) -> None:
        """A shard's rows that came encoded, in batches: in the order's (key, position)
        order, as the local engine writes them."""
        import pyarrow as pa

        keys = np.concatenate([batch.keys for batch in batches])
        positions = np.concatenate([batch.positions for batch in batches])
        labels = [label for batch in batches for label in batch.labels]
        order = np.lexsort((positions, keys))
        records = pa.chunked_array([batch.examples for batch in batches],
                                   type=batches[0].examples.type)
        for start in range(0, len(order), _FRAMED_AT_ONCE):  # (no whole copy of the shard)
            taken = records.take(pa.array(order[start:start + _FRAMED_AT_ONCE]))
            writer.write_framed(framed(taken.combine_chunks()))
        facts.add_without_images(positions[order].tolist(),
                                 [labels[i] for i in order.tolist()])
        self.read.inc(len(order))
        self.written.inc(len(order))
        self.progress.update(len(order), filename)

    def _write_without_images(self, rows: list[Row], split, filename: str,
                              writer: ShardWriter, facts: ShardFacts) -> None:
        labels = [row.label for row in rows]
        inputs = {name: [row.inputs[name] for row in rows] for name in rows[0].inputs}
        writer.write_framed(framed(encode_rows_without_images(split, labels, inputs,
                                                              self.options)))
        facts.add_without_images([row.position for row in rows], labels)
        self.read.inc(len(rows))
        self.written.inc(len(rows))
        self.progress.update(len(rows), filename)


def _summarized(index: int, shard: WrittenShard, rejections: list[Rejection], plan):
    """A shard written in a pipeline that plans (`beam_files`): the shard without its
    records' facts, and what the finish step sums up of them as outputs of their own
    (`finish.Summary`), so that no step holds a fact a record: its tally (`TALLIES`:
    split, `SplitTally`), each image by its content hash (`COPIES`: digest, `Located`:
    grouped in the pipeline, only repeated hashes reach the finish), each rejected row
    by its table file (`REJECTIONS`: its worker writes the file's part of
    rejected.csv)."""
    facts = shard.facts
    yield index, replace(shard, facts=None), []
    yield beam.pvalue.TaggedOutput(TALLIES, (shard.split, facts.tally()))
    if plan.header.media is None:  # (duplicates are not sought among clips)
        images = np.flatnonzero(np.frombuffer(facts.formats, np.int8) != NO_IMAGE)
        for record in images.tolist():
            yield beam.pvalue.TaggedOutput(COPIES, (facts.digest(record), Located(
                shard.split, index, record, facts.positions[record], facts.labels[record],
                facts.take([record]))))
    for rejection in rejections:
        yield beam.pvalue.TaggedOutput(REJECTIONS, (plan.file_of(rejection.position),
                                                    rejection))


TALLIES, COPIES, REJECTIONS = "tallies", "copies", "rejections"  # `_summarized`'s outputs


_FRAMED_AT_ONCE = 65_536  # records of a shard without images taken, framed and written


class Progress:
    """The run's progress, from the workers that write shards. Where they run in the
    driver's process (the DirectRunner), they move the driver's progress bar, as the local
    engine's workers do; elsewhere (Dataflow, a portable runner) each worker logs its
    rows every few seconds, which the runner's logs show."""

    _bars: dict = {}  # run id -> the driver's bar (in the driver's process only)
    _LOG_EVERY_SECONDS = 5.0

    def __init__(self, run_id: str, total: int, show: bool):
        self.run_id, self.total, self.show = run_id, total, show
        self.driver = os.getpid()
        self._done, self._logged = 0, time.monotonic()

    @contextlib.contextmanager
    def bar(self):
        if not self.show:
            yield
            return
        from tqdm.auto import tqdm

        with tqdm(total=self.total, unit="img", desc="Writing TFRecords (Beam)") as bar:
            Progress._bars[self.run_id] = bar
            try:
                yield
            finally:
                Progress._bars.pop(self.run_id, None)

    def update(self, rows: int, shard: str) -> None:
        bar = Progress._bars.get(self.run_id) if os.getpid() == self.driver else None
        if bar is not None:
            bar.update(rows)
            return
        self._done += rows
        now = time.monotonic()
        if self._logged is None:  # this worker's first row
            self._logged = now
        if now - self._logged >= self._LOG_EVERY_SECONDS:
            self._logged = now
            logger.info("tfrecorder: this worker has encoded %d rows (of %d in the run); "
                        "now writing %s.", self._done, self.total, shard)

    def __getstate__(self):
        # A worker counts its own rows, by its own clock (monotonic clocks differ by host).
        return {**self.__dict__, "_done": 0, "_logged": None}


def _last_step(results, folder: OutputFolder, header: Manifest, journal: Journal,
               limit: RejectionLimit, staged, detached: bool):
    """The pipeline's last step. For a driver that waits, it hands what was written over
    (the driver finishes the dataset, as after the local engine). A job the driver did
    not wait for finishes the dataset itself, then deletes the files the driver staged
    for it and the folder's lock (the driver may be gone)."""
    results = sorted(results, key=lambda item: item[0])
    written = Written([shard for _, shard, _ in results],
                      [r for _, _, rejected in results for r in rejected])
    if not detached:
        fs.write_bytes(staged[2], pickle.dumps(written), temp_suffix=folder.temp_suffix)
        return
    finish(folder, header, written, journal, limit,
           *pickle.loads(fs.read_bytes(staged[1])))
    if fs.is_remote(staged[0]):
        fs.delete(list(staged))
    output.release(folder)

"""The Beam engine for a source of many table files (`rows/*.parquet`): the launcher
lists the files and submits the job, which reads, plans (`beam_plan.PlanFiles`) and
writes the dataset, and finishes it, so a billion rows cost the launcher what ten do.

The shards are encoded and written by the Beam engine's `_WriteShard`; the manifest,
statistics, duplicates, rejected rows and TFDS files by `finish.finish`, in the job, so
the dataset is complete whether or not the launcher is still there. Reports look their
rows up in the files (`FileRows`). An error the job raises on purpose (a table error at
the gate, too many rejected rows) reaches a launcher that waits as itself.
"""

from __future__ import annotations

import contextlib
import pickle
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import apache_beam as beam
import pandas as pd
from apache_beam.pvalue import AsSingleton

from tfrecorder.errors import ConversionAborted, Option, OptionError, TFRecorderError
from tfrecorder.format.manifest import Manifest, read_manifest
from tfrecorder.options import ConvertOptions
from tfrecorder.sources.parquet import ParquetFolder
from tfrecorder.sources.table import Table
from tfrecorder.sources.table_files import file_names, file_table
from tfrecorder.storage import fs
from tfrecorder.write import output
from tfrecorder.write.engines import EngineRun
from tfrecorder.write.engines.beam import (
    COPIES,
    REJECTIONS,
    TALLIES,
    Progress,
    _new_temp_folders,
    _options,
    _RowRejected,
    _WriteShard,
    submission_options,
    tagged_as_named,
    with_worker_package,
)
from tfrecorder.write.engines.beam_plan import PipelinePlan, PlanFiles
from tfrecorder.write.finish import (
    RejectedPart,
    RejectedParts,
    SourceRows,
    Summary,
    Written,
    WrittenShard,
    finish,
    image_error,
    write_rejected_part,
)
from tfrecorder.write.output import OutputFolder, private_temp_dir
from tfrecorder.write.resume import Journal
from tfrecorder.write.statistics import Located, SplitTally

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


class FileRows:
    """The source's rows by position (as `finish.SourceRows` gives them), looked up in
    its files: only the files that hold a row a report names are read again, and only
    the last few are kept (the finish step must not come to hold the table)."""

    image_column = None  # rows come described (`SourceRows.at`)
    _FILES_KEPT = 8

    def __init__(self, plan: PipelinePlan, options: ConvertOptions):
        self.plan, self.options = plan, options
        self._tables: OrderedDict[int, Table] = OrderedDict()

    @property
    def image_uris(self):
        if not self.plan.paths or not self._table(0).has_images:
            return None
        return _ByPosition(self, lambda table, row: table.image_references[row])

    def file_of(self, position: int) -> int:
        return self.plan.file_of(position)

    def _table(self, index: int) -> Table:
        if index in self._tables:
            self._tables.move_to_end(index)
        else:
            self._tables[index] = file_table(self.plan.paths[index], self.options.table,
                                             self.plan.names[index], self.plan.folder)
            if len(self._tables) > self._FILES_KEPT:
                self._tables.popitem(last=False)
        return self._tables[index]

    def _where(self, position: int) -> tuple[int, int]:
        """The file and the row in it of a position in the table."""
        index = self.plan.file_of(position)
        return index, position - self.plan.offsets[index]

    @property
    def index(self):
        if self.plan.folder is not None:  # a Parquet folder's rows: by their position
            return range(self.plan.num_rows)
        return _ByPosition(self, lambda table, row: table.source.index[row],
                           name=self._table(0).source.index.name)

    def at(self, positions: Sequence[int]) -> pd.DataFrame:
        if not len(positions):  # the columns, typed as the whole table's: no file read
            return self.plan.columns.copy()
        by_file: dict[int, list[int]] = {}
        for position in positions:
            index, row = self._where(position)
            by_file.setdefault(index, []).append(row)
        parts = [SourceRows.of(self._table(index)).at(rows)
                 for index, rows in by_file.items()]
        if self.plan.folder is not None:  # named as the folder's whole read names them
            parts = [part.set_axis(pd.Index([self.plan.offsets[index] + row for row in rows],
                                            name=part.index.name))
                     for part, (index, rows) in zip(parts, by_file.items())]
        return pd.concat(parts)


class _ByPosition:
    """A column of the source by position (`FileRows`), as reports index it."""

    def __init__(self, rows: FileRows, value, name=None):
        self.rows, self.value, self.name = rows, value, name

    def __getitem__(self, position: int):
        index, row = self.rows._where(int(position))
        return self.value(self.rows._table(index), row)


class _WriteRejectedPart(beam.DoFn):
    """A table file's rejected rows, looked up in the file and written beside the
    dataset as its part of rejected.csv (`finish.write_rejected_part`)."""

    def __init__(self, folder: OutputFolder, options: ConvertOptions):
        self.folder, self.options = folder, options

    def process(self, element, plan: PipelinePlan):
        file, rejections = element
        yield write_rejected_part(self.folder, FileRows(plan, self.options), file,
                                  list(rejections))


def _repeated(element) -> list[list[Located]]:
    """The copies of one content hash, in writing order, if there are two or more."""
    _, copies = element
    copies = sorted(copies, key=lambda copy: (copy.shard, copy.record))
    return [copies] if len(copies) > 1 else []


def _summed(tallies) -> SplitTally:
    return sum(tallies, SplitTally())


def _finish_in_job(results, plan: PipelinePlan, folder: OutputFolder, journal: Journal,
                   options: ConvertOptions, tallies: list, copies: list,
                   parts: list[RejectedPart]) -> None:
    """Step 5: the dataset's last files from what the pipeline summed up (each split's
    tally, the repeated content hashes, the rejected rows' parts: nothing a record),
    then the folder's lock released."""
    written = Written([shard for _, shard, _ in sorted(results, key=lambda item: item[0])],
                      [])
    rejected = RejectedParts(sorted(parts, key=lambda part: part.file))
    summary = Summary(dict(tallies), sorted(copies, key=lambda group: (
        group[0].shard, group[0].record)), rejected)
    try:
        finish(folder, plan.header, written, journal, plan.limit, FileRows(plan, options),
               plan.report, summary)
    finally:
        rejected.delete(folder)
    output.release(folder)


def _in_job(step, error_file: str | None):
    """`step`, whose error is also written to `error_file` for a launcher that waits (a
    runner in other processes sends it back as text only)."""
    def run(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except TFRecorderError as error:
            _tell_launcher(error, error_file)
            raise
    return run


def _tell_launcher(error: TFRecorderError, error_file: str | None) -> None:
    if error_file is not None:
        with contextlib.suppress(Exception):
            fs.write_bytes(error_file, pickle.dumps(error))


class _WriteShardOfFiles(_WriteShard):
    """`_WriteShard` under a plan made in the pipeline: a row that stops the run
    (`on_error="raise"`, `strict`) is named as the local engine names it, by its label in
    its file (`FileRows`), and its error is written for the launcher (`_in_job`); the
    launcher, which reads no row, raised the worker's bare `_RowRejected`."""

    def __init__(self, folder: OutputFolder, options: ConvertOptions, journal: Journal,
                 error_file: str | None):
        super().__init__(folder, None, None, None, options.reject.on_error, journal,
                         Progress(folder.run_id, 0, False))
        self.convert_options, self.error_file = options, error_file

    def process(self, element, plan: PipelinePlan):
        try:
            yield from super().process(element, plan)
        except _RowRejected as rejected:
            error = image_error(FileRows(plan, self.convert_options), rejected.rejection,
                                plan.limit.strict)
            _tell_launcher(error, self.error_file)
            raise tagged_as_named(error) from None


def convert_in_pipeline(files: list[str] | ParquetFolder, output_dir: str,
                        options: ConvertOptions) -> tuple[Manifest | None, EngineRun]:
    """`convert` for a source of many files on a Beam runner (`pipeline_files`: a list
    of files, or a Parquet folder's): checks the options, claims the folder, submits the
    job; with `wait`, returns its manifest once it is done (else None)."""
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
        journal = Journal(folder, run_id, resumable=False, receipts=False)
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
        raise  # an ImageError of `on_error="raise"` as it is: it names the image


def _written_of(manifest: Manifest | None) -> Written | None:
    """What the job wrote, from its manifest (the launcher had no part in it)."""
    if manifest is None:
        return None
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


def _pipeline(files: list[str] | ParquetFolder, folder: OutputFolder, journal: Journal,
              options: ConvertOptions, runner: str, pipeline_options: dict,
              error_file: str | None, dataflow_output: str | None) -> beam.Pipeline:
    """The job's graph: files in, dataset out."""
    pipeline = beam.Pipeline(options=_options(runner, pipeline_options))
    parquet_folder = files if isinstance(files, ParquetFolder) else None
    paths = list(parquet_folder.files) if parquet_folder is not None else files
    listed = (pipeline
              | "ListedFiles" >> beam.Create(list(enumerate(zip(paths, file_names(paths)))))
              | "SpreadFiles" >> beam.Reshuffle())
    planned, keys, rows = listed | "PlanFiles" >> PlanFiles(
        options, dataflow_output, lambda step: _in_job(step, error_file), parquet_folder)
    plan = AsSingleton(planned)
    written = ({"key": keys, "rows": rows}
               | "GroupByShard" >> beam.CoGroupByKey()
               | "EncodeAndWrite" >> beam.ParDo(_WriteShardOfFiles(
                   folder, options, journal, error_file), plan).with_outputs(
                       TALLIES, COPIES, REJECTIONS, main="shards"))
    tallies = (written[TALLIES]
               | "SumTallies" >> beam.CombinePerKey(_summed)
               | "AllTallies" >> beam.combiners.ToList())
    copies = (written[COPIES]
              | "ByContentHash" >> beam.GroupByKey()
              | "Repeated" >> beam.FlatMap(_repeated)
              | "AllRepeated" >> beam.combiners.ToList())
    parts = (written[REJECTIONS]
             | "ByTableFile" >> beam.GroupByKey()
             | "WriteRejectedParts" >> beam.ParDo(_WriteRejectedPart(folder, options), plan)
             | "AllParts" >> beam.combiners.ToList())
    _ = (written.shards
         | "AllShards" >> beam.combiners.ToList()
         | "Finish" >> beam.Map(_in_job(_finish_in_job, error_file), plan, folder, journal,
                                options, AsSingleton(tallies), AsSingleton(copies),
                                AsSingleton(parts)))
    return pipeline

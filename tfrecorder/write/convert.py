"""`convert()`: source -> table -> plan -> engine -> dataset, and the result it returns.

This module only orchestrates; each step lives in its own module (table, plan, records,
engines, finish). Every check on the input and options happens before any image is read
or any file is written.
"""

from __future__ import annotations

import contextlib
import functools
import html
import inspect
import logging
import os
import signal
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

import pandas as pd

from tfrecorder.errors import (
    DatasetWarning,
    Option,
    Terminated,
    TooManyRejectedError,
    warn_user,
)
from tfrecorder.format.manifest import MANIFEST, REJECTED, AnnotationCounts, Manifest
from tfrecorder.options import ConvertOptions
from tfrecorder.options import fields as option_fields
from tfrecorder.read.info import DatasetInfo, html_summary, thumbnail_strip
from tfrecorder.run_options import BeamOptions
from tfrecorder.sources import load_table
from tfrecorder.sources.image_paths import describe_missing_images, missing_local_images
from tfrecorder.sources.table import Table
from tfrecorder.sources.table_files import pipeline_files
from tfrecorder.storage import fs
from tfrecorder.write import output, prefetch
from tfrecorder.write import resume as resume_journal
from tfrecorder.write.clip_cutting import (
    clip_length_us,
    cut_into_clips,
    describe_cuts,
    file_duration_us,
)
from tfrecorder.write.engines import EngineRun, engine_for
from tfrecorder.write.finish import (
    RejectionLimit,
    SourceReport,
    SourceRows,
    finish,
    image_error,
    manifest_header,
    source_rejection_error,
)
from tfrecorder.write.heap import release_freed_memory
from tfrecorder.write.plan import (
    make_plan,
    plan_labels,
    sample_rows,
    shuffled_order,
    stored_features,
)
from tfrecorder.write.rows import Rejection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConversionResult(Mapping):
    """What a conversion wrote (or, for a job still running, where it will write).

    Also a read-only mapping, as TFRecorder 2.0's result dict was: `result["metrics"]`,
    `"job_id" in result`, `dict(result)`. It holds every attribute by name, and 2.0's keys:
    `tfrecord_dir` (the output folder), `dataflow_url` (Dataflow's console page) and
    `job_id`, which for a run without a job id names the runner, as 2.0's did
    ("DirectRunner"; "local" for the process pool).
    """

    output_dir: str
    counts: dict[str, int]  # records written per split
    num_rejected: int | None  # None while a submitted job is still running
    shards: list[str] = field(repr=False)
    manifest_path: str = field(repr=False)
    rejected_path: str = field(repr=False)
    elapsed_seconds: float = 0.0
    # rows read, records written, rows rejected; and 2.0's rows, good and bad images
    metrics: dict = field(default_factory=dict)
    job_id: str | None = None  # a Beam job's id, where the runner has one
    job_url: str | None = None  # Dataflow's console page for the job
    pipeline: object = field(default=None, repr=False)  # Beam's PipelineResult
    runner: str = field(default="local", repr=False)  # the Beam runner, or "local"
    # Duplicated images, leaks between splits, missing or unbalanced classes.
    warnings: tuple[str, ...] = ()
    info: DatasetInfo | None = field(default=None, repr=False)  # None while a job runs
    # Annotations the source skipped, as TensorFlow's converters do (a COCO box of zero
    # width), by reason; listed in skipped_annotations.csv. {} while a job runs.
    skipped_annotations: dict[str, int] = field(default_factory=dict)
    # A detection source's objects: how many it held, were written, skipped or in
    # rejected images (`AnnotationCounts`). None: another task, or a job still running.
    annotations: AnnotationCounts | None = field(default=None, repr=False)

    @property
    def num_records(self) -> int:
        return sum(self.counts.values())

    def __repr__(self) -> str:
        if self.num_rejected is None:
            return f"<ConversionResult {self.output_dir!r}: job {self.job_id} is running>"
        counts = ", ".join(f"{name} {n:,}" for name, n in self.counts.items())
        warned = f", {len(self.warnings)} warnings" if self.warnings else ""
        skipped = sum(self.skipped_annotations.values())
        warned += f", {skipped:,} annotations skipped" if skipped else ""
        return (f"<ConversionResult {self.output_dir!r}: {self.num_records:,} records "
                f"({counts}), {self.num_rejected:,} rejected{warned}, "
                f"{self.elapsed_seconds:.1f} s>")

    def _repr_html_(self) -> str:
        if self.info is None:
            return f"<pre>{html.escape(repr(self))}</pre>"
        return html_summary(self.info, thumbnail_strip(self.info))

    def __getitem__(self, key: str):
        if key not in self._keys():
            raise KeyError(key)
        if key == "job_id":  # 2.0 named the runner where there was no job
            return self.job_id or self.runner
        return getattr(self, _TFRECORDER_2_NAMES.get(key, key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def _keys(self) -> tuple[str, ...]:
        return (*(f.name for f in fields(self)), "num_records", *_TFRECORDER_2_NAMES)


# TFRecorder 2.0's keys for what the result names otherwise.
_TFRECORDER_2_NAMES = {"tfrecord_dir": "output_dir", "dataflow_url": "job_url"}


def convert(source: pd.DataFrame | str | os.PathLike | tuple | Mapping,
            output_dir: str | os.PathLike | None = None, **options) -> ConversionResult:
    started = time.perf_counter()
    output_dir = os.fspath(output_dir)
    options = ConvertOptions.from_keywords(**options)
    engine = engine_for(options)
    files = pipeline_files(source) if options.beam.runner is not None else None
    if files is not None:  # the pipeline reads and plans them; this process, never a row
        from tfrecorder.write.engines.beam_files import convert_in_pipeline

        with _sigterm_as_interrupt():
            manifest, run = convert_in_pipeline(files, output_dir, options)
        return _result(output_dir, options, manifest, run, time.perf_counter() - started)
    table = load_table(source, **vars(options.table))
    if table.media != "image":
        from tfrecorder.write.media import check_installed  # (only for media tables)

        check_installed(table.media)
        if clip_length_us(options.media) is not None:
            table = cut_into_clips(table, options.media,
                                   functools.partial(file_duration_us, kind=table.media))
            logger.info("%s", describe_cuts(table.clip_cuts))
    release_freed_memory()  # what validation freed, before planning adds its own
    labels = plan_labels(table, options.split)  # a label vocabulary's errors: before any image
    engine.check(output_dir, table)
    limit = RejectionLimit.of(table, options.reject.max_rejected, options.reject.strict)
    _check_source_rejections(table, limit, options.reject.on_error)
    SourceReport.of(table).check_skipped(options.reject.max_rejected, limit.strict)
    _check_images_exist(table, limit, options.reject.on_error)
    run_id = output.new_run_id()
    # One request per bucket, before any image is read: credentials, buckets, permissions.
    fs.check_access(table.remote_images, output_dir, f".tfrecorder-probe-{run_id}")
    resume = options.output.resume
    with _sigterm_as_interrupt(), output.claim(output_dir, run_id, resume=resume,
                                               overwrite=options.output.overwrite) as folder:
        order = shuffled_order(table, options.split.seed)  # drawn once
        record_bytes = prefetch.mean_record_bytes(
            sample_rows(table, order), options, stored_features(table, options.image,
                                                                labels[0]), table.media, table.task)
        plan = make_plan(table, options, record_bytes, labels=labels, order=order)
        del order  # (the shards hold their own positions: not 8 bytes a row more in a run)
        header = manifest_header(plan, table, options.recorded(table.media))
        journal = resume_journal.open_journal(folder, header.to_json(), plan, table,
                                              resume=resume)
        table.forget_hashes()
        release_freed_memory()  # what reading and planning freed, before workers fork
        # A resumed run's shards stay (the journal has checked them); temporary files go.
        folder.clear([name for name in folder.existing
                      if not resume or output.is_temporary(name)])
        try:
            journal.begin(header.to_json())
            run = engine.write(plan, table, folder, header=header, journal=journal,
                               limit=limit)
            manifest = None
            if run.written is not None:
                manifest = finish(folder, header, run.written, journal, limit,
                                  SourceRows.of(table), SourceReport.of(table))
            elif not folder.handed_over:  # a dry run: nothing ran, nothing stays
                folder.clean_up(keep_committed=False)
        except BaseException as error:
            _clean_up(folder, journal, error)
            raise
    return _result(output_dir, options, manifest, run, time.perf_counter() - started)


def _result(output_dir: str, options: ConvertOptions, manifest: Manifest | None,
            run: EngineRun, elapsed: float) -> ConversionResult:
    """The result: of a finished dataset, or of a job that is still running (no
    manifest yet)."""
    rejected_path = fs.join(output_dir, REJECTED)
    if manifest is not None and manifest.rejected.num_rows:
        logger.warning("%d of %d rows were rejected; see %s", manifest.rejected.num_rows,
                       manifest.num_source_rows, rejected_path)
    skipped = manifest.skipped_annotations if manifest is not None else None
    if skipped is not None and skipped.num_annotations:
        logger.warning("%d annotations were skipped (%s); see %s", skipped.num_annotations,
                       ", ".join(f"{n} {reason}" for reason, n in skipped.reasons.items()),
                       fs.join(output_dir, skipped.file))
    found = DatasetInfo(output_dir, manifest) if manifest is not None else None
    for warning in found.warnings if found is not None else ():
        warn_user(warning, DatasetWarning)
    return ConversionResult(
        output_dir=output_dir,
        counts=({str(name): split.num_records for name, split in manifest.splits.items()}
                if manifest else {}),
        num_rejected=manifest.rejected.num_rows if manifest else None,
        shards=([fs.join(output_dir, shard.file) for _, shard in manifest.shards]
                if manifest else []),
        manifest_path=fs.join(output_dir, MANIFEST),
        rejected_path=rejected_path,
        elapsed_seconds=elapsed,
        metrics=_metrics(run, manifest),
        job_id=run.job_id,
        job_url=_job_url(options.beam, run.job_id),
        pipeline=run.pipeline,
        runner=options.beam.runner or "local",
        warnings=found.warnings if found is not None else (),
        info=found,
        skipped_annotations=dict(skipped.reasons) if skipped is not None else {},
        annotations=manifest.annotations if manifest is not None else None,
    )


def _metrics(run: EngineRun, manifest: Manifest | None) -> dict[str, int]:
    """Rows read, written and rejected: the engine's, with the rows the source rejected
    before any image was read."""
    if run.written is None:
        return {}
    found = dict(run.written.metrics)
    if manifest is not None:
        by_source = manifest.rejected.num_rows - found["rows_rejected"]
        found["rows_read"] += by_source
        found["rows_rejected"] += by_source
    return found


def _docstring() -> str:
    """`convert`'s docstring, its options documented from their fields."""
    args = "\n".join(textwrap.fill(f"{f.name}: {f.metadata['doc']}", 88,
                                    initial_indent=" " * 8, subsequent_indent=" " * 12)
                      for f in option_fields())
    return f"""Converts a table of images into a sharded TFRecord dataset in `output_dir`.

    Every check on the table and the options runs before any image is read or any file
    is written. A second run into `output_dir` fails at once while this one holds it.

    Args:
        source: a DataFrame, a CSV file (AutoML Vision rows `[split,]image_uri[,label...]`,
            or any columns under a header row), a Parquet file (`.parquet`, `.pq`) or a
            folder of them, or an image folder (`label/file` or `split/label/file`).
            Images already in memory: NumPy arrays `(images, labels)`, a dict of columns
            (`{{"image": x, "label": y, ...}}`), a dict of such sources by split
            (`{{"train": (x_train, y_train), "test": ...}}`), a Hugging Face `Dataset` or
            `DatasetDict`; a DataFrame column may hold encoded bytes, uint8/uint16
            arrays, PIL images or `{{"bytes", "path"}}` dicts (see docs/usage.md).
        output_dir: a local folder or a `gs://`, `s3://` (or other fsspec) URI.
{args}

    Returns:
        What was written: counts per split, rejected rows, shard paths (see
        `ConversionResult`).
    """


def _signature() -> inspect.Signature:
    """`convert(source, output_dir, *, <every option>)`, for `help()`, notebooks and the
    command line."""
    positional = [
        inspect.Parameter("source", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation="pd.DataFrame | str | os.PathLike"),
        # None: ./tfrecords, as TFRecorder 2.0 wrote (with a DeprecationWarning)
        inspect.Parameter("output_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          default=None, annotation="str | os.PathLike | None")]
    keywords = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                  annotation=f.type) for f in option_fields()]
    return inspect.Signature(positional + keywords, return_annotation="ConversionResult")


convert.__doc__ = _docstring()
convert.__signature__ = _signature()


def _check_source_rejections(table: Table, limit: RejectionLimit, on_error: str) -> None:
    """Rows the source rejected itself (`Table.rejected_rows`), before any image is read:
    the first one stops a run with `on_error="raise"`; more than `max_rejected` allows
    stop any."""
    rows = table.rejected_rows
    if rows is None or not len(rows):
        return
    if on_error == "raise":
        raise source_rejection_error(rows, limit.strict)
    if limit.exceeded(0):
        raise limit.error([])


def _check_images_exist(table: Table, limit: RejectionLimit, on_error: str) -> None:
    """Catches "nothing here" (paths relative to the wrong folder, a wrong mount) in a
    second, before any image is read: one `stat` per local image."""
    missing = missing_local_images(table)
    if missing and on_error == "raise":
        _, reasons = describe_missing_images(table, missing[:1])
        raise image_error(table, Rejection(missing[0], f"not a file ({next(iter(reasons))})"),
                          limit.strict)
    if limit.exceeded(len(missing)):
        details, reasons = describe_missing_images(table, missing)
        raise TooManyRejectedError(
            f"{len(missing)} of {len(table.rows)} rows name local images that are not "
            "files, more than ", Option("max_rejected", limit.max_rejected),
            f" allows. {details} Fix the paths, or pass a larger ", Option("max_rejected"),
            " (1.0 writes whatever can be written).", num_rejected=len(missing),
            num_rows=len(table.rows), reasons=reasons, column="image_uri",
            rows=table.rows.index[missing].tolist())


def _clean_up(folder: output.OutputFolder, journal: resume_journal.Journal,
              error: BaseException) -> None:
    """Deletes what a stopped run wrote (its committed shards stay for a resumable run).
    The engines have stopped their workers by now, so nothing writes after this."""
    folder.clean_up(keep_committed=journal.resumable)
    what = type(error).__name__
    if journal.resumable:
        logger.warning("Conversion stopped (%s); kept the %d committed shard(s) in %s: run "
                       "again with %s to write the rest.", what, len(journal.committed),
                       folder.path, Option("resume", True))
    else:
        logger.warning("Conversion stopped (%s); removed the files it wrote. No dataset "
                       "was written to %s.", what, folder.path)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (`kill`, a container stopping, a scheduler's timeout) stops the run as
    Ctrl-C does: workers stopped, the run's files deleted. Only the main thread may set
    handlers; elsewhere SIGTERM keeps its meaning."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _job_url(options: BeamOptions, job_id: str | None) -> str | None:
    """Dataflow's console page for a job."""
    if options.runner != "DataflowRunner" or not job_id:
        return None
    beam_options = options.pipeline_options()
    return (f"https://console.cloud.google.com/dataflow/jobs/{beam_options['region']}/"
            f"{job_id}?project={beam_options.get('project', '')}")

"""`convert()`: source -> table -> plan -> engine -> dataset, and the result it returns.

This module only orchestrates; each step lives in its own module (table, plan, records,
engines, dataset). Every check on the input and options happens before any image is read
or any file is written.
"""

from __future__ import annotations

import contextlib
import logging
import numbers
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from tfrecorder import dataset, fs, output
from tfrecorder import resume as resume_journal
from tfrecorder.dataset import DEFAULT_MAX_REJECTED, RejectionLimit
from tfrecorder.engines.local import write_local
from tfrecorder.errors import ImageError, Terminated, TooManyRejectedError
from tfrecorder.manifest import MANIFEST, REJECTED, Split
from tfrecorder.options import DEFAULT_MAX_IMAGE_PIXELS, ImageOptions, is_int
from tfrecorder.plan import (
    DEFAULT_UNASSIGNED_SPLIT,
    check_options,
    make_plan,
    shuffled_order,
    sizes_shards_by_bytes,
)
from tfrecorder.prefetch import Prefetcher, encode_in_order
from tfrecorder.rows import Rejection, Row
from tfrecorder.table import Table, describe_missing_images, load_table, missing_local_images

logger = logging.getLogger(__name__)

ON_ERROR = ("reject", "raise")
_SIZE_SAMPLE = 32  # rows read up front to estimate record size when sizing shards
_FALLBACK_RECORD_BYTES = 100_000


@dataclass(frozen=True)
class ConversionResult:
    """What a conversion wrote (or, for a job still running, where it will write).

    Also answers TFRecorder's `result["tfrecord_dir"]`, and any attribute by name.
    """

    output_dir: str
    counts: dict[str, int]  # records written per split
    num_rejected: int | None  # None while a submitted job is still running
    shards: list[str] = field(repr=False)
    manifest_path: str = field(repr=False)
    rejected_path: str = field(repr=False)
    elapsed_seconds: float = 0.0
    metrics: dict = field(default_factory=dict)  # Beam's counters, for the Beam engine
    job_id: str | None = None  # a Beam job's id, where the runner has one
    job_url: str | None = None  # Dataflow's console page for the job
    pipeline: object = field(default=None, repr=False)  # Beam's PipelineResult

    @property
    def num_records(self) -> int:
        return sum(self.counts.values())

    def __getitem__(self, key: str):
        if key == "tfrecord_dir":
            return self.output_dir
        if key in {f for f in asdict(self)} | {"num_records"}:
            return getattr(self, key)
        raise KeyError(key)


def convert(
    source: pd.DataFrame | str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    header: bool | None = None,
    schema: Mapping[str, str | None] | None = None,
    fill_missing=None,
    image_format: str = "auto",
    image_size: tuple[int, int] | None = None,
    max_image_side: int | None = None,
    jpeg_quality: int = 90,
    validate: bool = True,
    max_image_pixels: int | None = DEFAULT_MAX_IMAGE_PIXELS,
    num_shards: int | Mapping[str, int] | None = None,
    shard_size_mb: float = 128,
    compression: str | None = None,
    seed: int = 0,
    unassigned_split: Sequence[float] = DEFAULT_UNASSIGNED_SPLIT,
    on_error: str = "reject",
    max_rejected: float = DEFAULT_MAX_REJECTED,
    num_workers: int | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
    runner: str | None = None,
    beam_options: Mapping | None = None,
    project: str | None = None,
    region: str | None = None,
    temp_location: str | None = None,
    tfrecorder_wheel: str | os.PathLike | None = None,
    wait: bool | None = None,
) -> ConversionResult:
    """Converts a table of images into a sharded TFRecord dataset in `output_dir`.

    Args:
        source: a DataFrame, a CSV file (AutoML Vision rows `[split,]image_uri[,label...]`,
            or any columns under a header row) or an image folder (`label/file` or
            `split/label/file`).
        output_dir: a local folder or a `gs://`, `s3://` (or other fsspec) URI.
        header: whether a CSV's first line names its columns; None detects it.
        schema: what columns are, by name: TFRecorder's types "SplitKey", "ImageUri",
            "StringLabel", "IntegerLabel", "IntegerInput", "FloatInput",
            "CategoricalInput" (text stored as ids; the vocabulary is saved) or
            "StringInput", or None to drop a column. Columns it does not name keep
            their role (split, image_uri, label) or pass through typed by their dtype.
            Several label columns, or a label column of lists, make multi-label rows.
            See docs/schema.md.
        fill_missing: the value for missing cells of input columns (one value, or a
            dict by column); by default a missing value is an error naming the rows.
        image_format: "auto" keeps JPEG and PNG bytes as they are and converts other
            formats losslessly to PNG; "jpeg" or "png" store every image so; "raw" stores
            base64 pixels like TFRecorder.
        image_size: resize every image to (height, width).
        max_image_side: shrink images whose longer side is larger (aspect ratio kept).
        jpeg_quality: quality of re-encoded JPEGs (resized or `image_format="jpeg"`).
        validate: fully decode every image so corrupt ones are rejected (strictly:
            damaged JPEG data that decoders fill with grey is rejected too); False trusts
            the files and only checks their headers (and PNG checksums).
        max_image_pixels: images with more pixels (height x width, read from the header)
            are rejected before any decoding, on every path: a 6 MB JPEG may declare
            gigapixels (a decompression bomb). None: no limit.
        num_shards: shards per split (an int, or e.g. {"train": 16}); by default shards
            are sized to about `shard_size_mb`.
        shard_size_mb: the target size of a shard when `num_shards` is not given.
        compression: None or "gzip".
        seed: seeds the shuffle that mixes classes across shards; recorded.
        unassigned_split: train/validation/test fractions for UNASSIGNED rows (and all
            rows when there is no split column), assigned by a stable hash of the URI.
        on_error: "reject" writes rows whose image cannot be read to rejected.csv;
            "raise" stops at the first one.
        max_rejected: the fraction of rows that may be rejected; past it the run fails
            (as soon as that is certain), naming the commonest reasons, and leaves no
            dataset: so many bad rows mean a wrong table, not a few bad images.
        num_workers: worker processes (default: all cores; 1 runs in this process).
        overwrite: replace a dataset already in `output_dir`. A run holds a lock on
            `output_dir` throughout: a second run into it fails at once, naming the first.
        resume: continue a run that was interrupted (Ctrl-C, killed, a lost machine):
            keep the shards it committed, after checking every record, and write the
            rest; the dataset is the same, byte for byte, as an uninterrupted run's. A
            run with another table or other options is refused. A resumable run that is
            interrupted keeps its committed shards (without `resume`, it deletes them).
        progress: show a progress bar.
        runner: None writes with the local process pool; an Apache Beam runner name
            ("DirectRunner", "DataflowRunner", ...) runs the same plan as a Beam pipeline
            and gives the same shards.
        beam_options: Beam pipeline options for `runner`, e.g. {"machine_type":
            "n2-standard-4", "max_num_workers": 20, "direct_running_mode":
            "multi_processing"}; Dataflow options pass through.
        project, region, temp_location: for DataflowRunner (temp_location: gs://, where
            the job stages its input and temporary files).
        tfrecorder_wheel: a tfrecorder wheel (or sdist) for a Beam runner's workers to
            install. By default tfrecorder builds one from the package this process runs
            (declaring only what workers need: no TensorFlow) and stages it, unless
            `beam_options` ship the code already (`extra_packages` with a tfrecorder
            package, `setup_file` or `sdk_container_image`).
        wait: wait for a Beam job to finish; default True, but False for DataflowRunner,
            which then returns the job id and console URL at once (the job writes the
            manifest itself when it is done).
    """
    started = time.perf_counter()
    output_dir = os.fspath(output_dir)
    image_options = ImageOptions(image_format, image_size, max_image_side, jpeg_quality,
                                 validate, max_image_pixels)
    _check_types(
        ("on_error", on_error, on_error in ON_ERROR, f"one of {ON_ERROR}"),
        ("num_workers", num_workers, num_workers is None or is_int(num_workers)
         and num_workers >= 1, "a positive int or None"),
        ("shard_size_mb", shard_size_mb, _is_number(shard_size_mb) and shard_size_mb > 0,
         "a positive number"),
        ("max_rejected", max_rejected, _is_number(max_rejected) and 0 <= max_rejected <= 1,
         "a fraction of the rows, from 0 to 1"),
        ("seed", seed, is_int(seed), "an int"),
        ("header", header, header in (None, True, False), "True, False or None"),
        *((name, value, isinstance(value, bool), "True or False") for name, value in
          (("overwrite", overwrite), ("resume", resume), ("progress", progress))),
        ("wait", wait, wait in (None, True, False), "True, False or None"),
        ("schema", schema, schema is None or isinstance(schema, Mapping),
         "a dict of column names to types"),
        ("runner", runner, runner is None or isinstance(runner, str), "a Beam runner's name"),
        ("beam_options", beam_options, beam_options is None
         or isinstance(beam_options, Mapping), "a dict of Beam options"),
        ("tfrecorder_wheel", tfrecorder_wheel, tfrecorder_wheel is None
         or isinstance(tfrecorder_wheel, (str, os.PathLike)), "a path to a wheel"),
    )
    check_options(unassigned_split, num_shards, compression)
    if resume and overwrite:
        raise ValueError("resume=True continues an interrupted run and overwrite=True "
                         "replaces it: pass one of them.")
    beam_options = {**(beam_options or {}), **{
        name: value for name, value in
        (("project", project), ("region", region), ("temp_location", temp_location))
        if value is not None}}
    if tfrecorder_wheel is not None:
        beam_options["extra_packages"] = [*(beam_options.get("extra_packages") or []),
                                          os.fspath(tfrecorder_wheel)]
    if runner is not None:
        beam = _beam_engine()
    table = load_table(source, header=header, schema=schema, fill_missing=fill_missing)
    if runner == "DataflowRunner":
        beam.check_dataflow(output_dir, table)  # needs no network: first
    if runner is not None:
        beam.check_runner(runner, beam_options)
    limit = RejectionLimit(len(table.rows), max_rejected)
    _check_images_exist(table, limit, on_error)
    run_id = output.new_run_id()
    # One request per bucket, before any image is read: credentials, buckets, permissions.
    fs.check_access(table.remote_images, output_dir, f".tfrecorder-probe-{run_id}")
    with _sigterm_as_interrupt(), output.claim(output_dir, run_id, overwrite=overwrite,
                                               resume=resume) as folder:
        record_bytes = (_estimate_record_bytes(table, image_options, seed)
                        if sizes_shards_by_bytes(num_shards) else 0.0)
        plan = make_plan(table, image_options=image_options, seed=seed,
                         compression=compression, unassigned_split=unassigned_split,
                         num_shards=num_shards, record_bytes=record_bytes,
                         shard_bytes=int(shard_size_mb * 2**20))
        options = {**asdict(image_options), "compression": compression,
                   "unassigned_split": list(unassigned_split), "num_shards": num_shards,
                   "shard_size_mb": shard_size_mb}
        header = dataset.manifest_header(plan, table, options)
        journal = resume_journal.open_journal(folder, header.to_json(), plan, table,
                                              resume=resume)
        # A resumed run's shards stay (the journal has checked them); temporary files go.
        folder.clear([name for name in folder.existing
                      if not resume or output.is_temporary(name)])
        try:
            journal.begin(header.to_json())
            metrics, job_id, pipeline = {}, None, None
            if runner is None:
                written = write_local(plan, table, folder, journal=journal, limit=limit,
                                      num_workers=num_workers, on_error=on_error,
                                      progress=progress)
                manifest = dataset.finish(folder, header, written.shards,
                                          written.rejections, table.source)
                journal.close([shard.filename for shard in plan.shards])
            else:
                run = beam.write_beam(
                    plan, table, folder, header=header, journal=journal, limit=limit,
                    runner=runner, beam_options=beam_options, on_error=on_error,
                    wait=wait if wait is not None else runner != "DataflowRunner")
                if run.manifest is None:  # submitted, running: it writes its own manifest
                    if not folder.handed_over:  # a dry run: nothing ran, nothing stays
                        folder.clean_up(keep_committed=False)
                    return ConversionResult(
                        output_dir=output_dir, counts={}, num_rejected=None, shards=[],
                        manifest_path=fs.join(output_dir, MANIFEST),
                        rejected_path=fs.join(output_dir, REJECTED),
                        elapsed_seconds=time.perf_counter() - started, job_id=run.job_id,
                        job_url=_job_url(runner, run.job_id, beam_options),
                        pipeline=run.result)
                manifest, metrics, job_id, pipeline = (run.manifest, run.metrics,
                                                       run.job_id, run.result)
        except BaseException as error:
            _clean_up(folder, journal, error)
            raise
    rejected_path = fs.join(output_dir, REJECTED)
    num_rejected = manifest.rejected.num_rows
    if num_rejected:
        logger.warning("%d of %d rows were rejected; see %s", num_rejected, plan.num_rows,
                       rejected_path)
    return ConversionResult(
        output_dir=output_dir,
        counts={str(name): split.num_records for name, split in manifest.splits.items()},
        num_rejected=num_rejected,
        shards=[fs.join(output_dir, shard.file) for _, shard in manifest.shards],
        manifest_path=fs.join(output_dir, MANIFEST),
        rejected_path=rejected_path,
        elapsed_seconds=time.perf_counter() - started,
        metrics=metrics,
        job_id=job_id,
        job_url=_job_url(runner, job_id, beam_options),
        pipeline=pipeline,
    )


def _check_types(*checks: tuple[str, object, bool, str]) -> None:
    """Raises a ValueError naming the first option whose value is wrong."""
    for name, value, ok, expected in checks:
        if not ok:
            raise ValueError(f"{name} must be {expected}, not {value!r}")


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_images_exist(table: Table, limit: RejectionLimit, on_error: str) -> None:
    """Catches "nothing here" (paths relative to the wrong folder, a wrong mount) in a
    second, before any image is read: one `stat` per local image."""
    missing = missing_local_images(table)
    if missing and on_error == "raise":
        _, reasons = describe_missing_images(table, missing[:1])
        raise ImageError(
            f"row {table.rows.index[missing[0]]} "
            f"({table.rows['image_uri'].iat[missing[0]]!r}): not a file ({next(iter(reasons))}"
            "). Fix or drop the row, or use on_error='reject' to list such rows in "
            "rejected.csv.")
    if limit.exceeded(len(missing)):
        details, reasons = describe_missing_images(table, missing)
        raise TooManyRejectedError(
            f"{len(missing)} of {len(table.rows)} rows name local images that are not "
            f"files, more than max_rejected={limit.max_rejected} allows. {details} Fix the "
            "paths, or pass a larger max_rejected (1.0 writes whatever can be written).",
            num_rejected=len(missing), num_rows=len(table.rows), reasons=reasons)


def _clean_up(folder: output.OutputFolder, journal: resume_journal.Journal,
              error: BaseException) -> None:
    """Deletes what a stopped run wrote (its committed shards stay for a resumable run).
    The engines have stopped their workers by now, so nothing writes after this."""
    folder.clean_up(keep_committed=journal.resumable)
    what = type(error).__name__
    if journal.resumable:
        logger.warning("Conversion stopped (%s); kept the %d committed shard(s) in %s: run "
                       "again with resume=True to write the rest.", what,
                       len(journal.committed), folder.path)
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


def _beam_engine():
    """The Beam engine module (it imports Beam: only when a runner is asked for)."""
    try:
        from tfrecorder.engines import beam
    except ImportError as error:
        if error.name is None or not error.name.startswith("apache_beam"):
            raise
        raise ImportError("runner= needs Apache Beam: pip install 'tfrecorder[beam]'.") \
            from None
    return beam


def _job_url(runner: str | None, job_id: str | None, beam_options: Mapping) -> str | None:
    """Dataflow's console page for a job."""
    if runner != "DataflowRunner" or not job_id:
        return None
    return (f"https://console.cloud.google.com/dataflow/jobs/{beam_options['region']}/"
            f"{job_id}?project={beam_options.get('project', '')}")


def _estimate_record_bytes(table: Table, options: ImageOptions, seed: int) -> float:
    """Mean record size over a fixed sample of rows, reading image headers only (and the
    sample's images at once, where they are in a bucket)."""
    options = replace(options, validate=False)
    sample = shuffled_order(len(table.rows), seed)[:_SIZE_SAMPLE]
    inputs = [c.name for c in table.inputs]
    rows = (Row(int(p), row.get("uri"), row.get("image_uri"), row.get("label"), Split.TRAIN,
                {name: row[name] for name in inputs})
            for p, row in zip(sample, table.rows.iloc[sample].to_dict("records")))
    with Prefetcher() as prefetcher:
        sizes = [len(result) for _, result in encode_in_order(rows, options, prefetcher)
                 if not isinstance(result, Rejection)]
    return sum(sizes) / len(sizes) if sizes else _FALLBACK_RECORD_BYTES

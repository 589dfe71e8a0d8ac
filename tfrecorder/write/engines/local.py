"""The local engine: worker processes encode segments of shards, the driver splices them.

Every shard is cut into segments of consecutive planned rows. Workers take segments (a
split and the rows' positions) from one shared queue, read the rows' values from the
`planned_table.PlannedTable` they share with the driver by fork, encode them (`records.encode_row`
a row at a time with images; `records.encode_rows_without_images` a column at a time
without) and write their framed records to a temporary segment file. The driver appends
finished segments to their shard in plan order (in the kernel, without copying bytes
through Python) and commits the shard through the shared `ShardWriter`. Records never
travel through a pipe, which is what lets two workers run at the speed of two cores.
TFRecord frames concatenate, so the shards are byte-identical however rows are cut into
segments, whichever worker encodes them and whatever `num_workers` is. Workers never
import TensorFlow.

When images live in a bucket, each worker takes several segments ahead and a `Prefetcher`
keeps dozens of reads in flight while the worker decodes, so a store that answers in
100 ms is read at the speed of the CPUs. A bounded window of segments is in flight, so
memory and temporary disk use stay flat however many rows there are.

On Ctrl-C, SIGTERM, a dead worker or `on_error="raise"`, the workers are stopped before
the error leaves this module, so that nothing writes while `convert` deletes the run's
files (`output.OutputFolder.clean_up`). Workers also die with the driver (SIGKILL
included): the kernel signals them when it goes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import math
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import NamedTuple

import numpy as np

from tfrecorder.errors import ConversionAborted
from tfrecorder.format.tfrecord import ShardWriter, framed, write_framed
from tfrecorder.options import ConvertOptions, RecordOptions
from tfrecorder.sources import image_cells
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs, local_files
from tfrecorder.write.engines import EngineRun
from tfrecorder.write.finish import RejectionLimit, Written, WrittenShard, image_error
from tfrecorder.write.output import OutputFolder, private_temp_dir
from tfrecorder.write.plan import Plan, Shard
from tfrecorder.write.planned_table import PlannedTable
from tfrecorder.write.prefetch import MAX_IN_FLIGHT, Prefetcher, RowReads, encode_read
from tfrecorder.write.records import encode_rows_without_images
from tfrecorder.write.resume import Journal
from tfrecorder.write.rows import Rejection, Row
from tfrecorder.write.statistics import ShardFacts

logger = logging.getLogger(__name__)

# Rows per segment, about 10-20 ms of work: it hides the task overhead and keeps the tail
# short. A row with an image costs about a millisecond; one without, some microseconds.
_MAX_SEGMENT_ROWS = 16
_MAX_SEGMENT_ROWS_WITHOUT_IMAGES = 2048
# Images held in memory cost no read, and small ones (CIFAR's 3 KB) some 0.15 ms: their
# segments hold about this many bytes of images, up to 256 rows (16 rows of 32x32 arrays
# left 12% of the throughput to per-segment overhead; 30% when stored raw).
_SEGMENT_IMAGE_BYTES = 512 << 10
_MAX_SEGMENT_ROWS_IN_MEMORY = 256


class Segment(NamedTuple):
    """A task: consecutive planned rows of one shard, and the file to write them to.
    Workers read the rows' values from the `PlannedTable` they share with the driver."""

    number: int  # in writing order over the whole run: results are put back in this order
    split: str
    positions: np.ndarray  # the rows' positions in the table
    path: str


class Encoded(NamedTuple):
    number: int
    path: str
    num_rows: int
    rejections: list[Rejection]
    facts: ShardFacts  # of the records written
    frame_sizes: np.ndarray  # of each record's frame in the segment file (for the index)


class LocalEngine:
    """The local engine, as `engines.Engine`: it can write anything the driver reads."""

    def __init__(self, options: ConvertOptions):
        self.options = options

    def check(self, output_dir: str, table: Table) -> None:
        pass

    def write(self, plan: Plan, table: Table, folder: OutputFolder, *, header, journal,
              limit) -> EngineRun:
        written = write_local(plan, table, folder, journal=journal, limit=limit,
                              num_workers=self.options.run.num_workers,
                              on_error=self.options.reject.on_error,
                              progress=self.options.run.progress)
        return EngineRun(written)


def write_local(
    plan: Plan,
    table: Table,
    folder: OutputFolder,
    *,
    journal: Journal,
    limit: RejectionLimit,
    num_workers: int | None = None,
    on_error: str = "reject",
    progress: bool = True,
) -> Written:
    """Executes `plan`: encodes every row and writes every shard into `folder`.

    Shards the journal holds as committed (a resumed run) are kept, not written again.
    Stops as soon as `limit` is exceeded.
    """
    num_workers = num_workers or os.cpu_count() or 1
    most = _MAX_SEGMENT_ROWS if table.has_images else _MAX_SEGMENT_ROWS_WITHOUT_IMAGES
    if table.images_in_memory:
        typical = image_cells.typical_bytes(table.rows["image"])
        most = max(most, min(_MAX_SEGMENT_ROWS_IN_MEMORY, _SEGMENT_IMAGE_BYTES // typical))
    segment_rows = max(1, min(most, math.ceil(plan.num_rows / (num_workers * 8))))
    # Segments a worker holds beyond the one it encodes: one, or with images in a bucket,
    # enough to keep MAX_IN_FLIGHT reads going.
    ahead = math.ceil(MAX_IN_FLIGHT / segment_rows) if table.has_remote_images else 1
    # Segments live beside the shards (same file system, so splicing is cheap), or in a
    # private local folder when the output is remote.
    planned = PlannedTable(plan, table)
    with contextlib.ExitStack() as stack:
        spool = (stack.enter_context(private_temp_dir("spool"))
                 if fs.is_remote(folder.path) else folder.path)
        written = Written([], [])
        try:
            with _Workers(num_workers, planned, plan.image_options, ahead) as encode:
                _write(plan, table, folder, spool, segment_rows, encode, on_error, limit,
                       progress, journal, written)
        except _WorkerDied as error:
            raise ConversionAborted(
                f"a worker process died ({error}: killed, or out of memory?); no dataset "
                f"was written to {folder.path!r}. Rerun, perhaps with fewer num_workers."
            ) from None
        return written


def _write(plan, table, folder: OutputFolder, spool, segment_rows, encode, on_error, limit,
           progress, journal: Journal, written: Written) -> None:
    """Writes every shard, recording each in `written` and the journal once committed."""
    todo = [shard for shard in plan.shards if shard.filename not in journal.committed]
    results = encode(_segments(todo, segment_rows, spool, folder))
    with _progress_bar(plan.num_rows, progress) as bar:
        for shard in plan.shards:
            if shard.filename in journal.committed:
                kept, rejections = journal.committed[shard.filename]
                written.shards.append(kept)
                written.rejections.extend(rejections)
                bar.update(len(shard.positions))
                continue
            rejected_here, facts = [], ShardFacts()
            with ShardWriter(folder.uri(shard.filename), folder.temp_suffix,
                             plan.compression) as writer:
                for result in islice(results, _count(shard, segment_rows)):
                    if result.rejections and on_error == "raise":
                        raise image_error(table, result.rejections[0], limit.strict)
                    writer.append_file(result.path, result.frame_sizes)
                    fs.delete([result.path])
                    rejected_here.extend(result.rejections)
                    facts.extend(result.facts)
                    if limit.exceeded(len(written.rejections) + len(rejected_here)):
                        raise limit.error([*written.rejections, *rejected_here])
                    bar.update(result.num_rows)
            done = WrittenShard(shard.split, shard.filename, writer.num_records,
                                writer.num_bytes, len(rejected_here), writer.sha256, facts)
            written.shards.append(done)
            written.rejections.extend(rejected_here)
            journal.commit(done, rejected_here)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        pass

    def update(self, n: int) -> None:
        pass


def _progress_bar(total: int, enabled: bool):
    """tqdm's bar, imported only when shown (the import alone costs ~80 ms of CPU), and
    only once the workers are busy."""
    if not enabled:
        return _NoProgress()
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="img", desc="Writing TFRecords")


def encode_segments(take: Callable[[bool], Segment | None], planned: PlannedTable,
                    options: RecordOptions, ahead: int) -> Iterator[Encoded]:
    """Encodes segments in the order `take` gives them, reading their images ahead.

    `take(block)` returns the next segment, None when there are no more, or raises
    `queue.Empty` when none is ready and `block` is false. Up to `ahead` segments are
    taken beyond the one being encoded, while the prefetcher has room, so their reads
    are in flight during the encoding.
    """
    pending: deque = deque()
    ended = False
    with Prefetcher() as prefetcher:
        while pending or not ended:
            if not ended and len(pending) <= ahead and not prefetcher.full:
                try:
                    segment = take(not pending)
                except queue.Empty:  # none ready: encode what we hold
                    pass
                else:
                    if segment is None:
                        ended = True
                    elif planned.has_images:
                        rows = planned.rows(segment.positions, segment.split)
                        reads = [prefetcher.reads(row) for row in rows]
                        pending.append((segment, rows, reads))
                    else:
                        pending.append((segment, None, None))
                    continue
            segment, rows, reads = pending.popleft()
            yield (_encode_segment(segment, rows, options, reads, prefetcher)
                   if rows is not None else _encode_without_images(segment, planned, options))


def _encode_segment(segment: Segment, rows: list[Row], options: RecordOptions,
                    reads: list[RowReads], prefetcher: Prefetcher) -> Encoded:
    """Encodes `segment`'s rows into its segment file of framed records."""
    rejections, facts = [], ShardFacts()
    with _SegmentFile(segment.path) as file:
        for row, row_reads in zip(rows, reads):
            _, result = encode_read(row, row_reads, options, prefetcher)
            if isinstance(result, Rejection):
                rejections.append(result)
            else:
                file.add(result.example)
                facts.add(row, result)
    return Encoded(segment.number, segment.path, len(rows), rejections, facts,
                   np.array(file.frame_sizes, dtype=np.int64))


class _SegmentFile:
    """A new segment file (`local_files.create_private`) whose framed records are gathered and
    written by one system call (`os.writev`) a MiB, without being joined: a buffered file
    makes two a record larger than its buffer: 16-record segments of 55 KB JPEGs took
    about 10 µs of CPU more an image so (issue 31, docs/performance.md), and the driver's
    reading and deleting them 5-8 more. At most a MiB and a record are held."""

    def __init__(self, path: str):
        self._file = local_files.create_private(path)
        self._parts: list[bytes] = []
        self._size = 0
        self.frame_sizes: list[int] = []  # for the shard's index

    def write(self, part: bytes) -> None:  # as `write_framed` writes a frame's parts
        self._parts.append(part)
        self._size += len(part)

    def add(self, record: bytes) -> None:
        write_framed(self, record)
        self.frame_sizes.append(16 + len(record))
        if self._size >= _SEGMENT_WRITE_BYTES or len(self._parts) >= _SEGMENT_WRITE_PARTS:
            self._flush()

    def _flush(self) -> None:
        if not self._parts:
            return
        if _writev is None:  # (Windows)
            self._file.write(b"".join(self._parts))
        else:
            fd = self._file.fileno()
            written = _writev(fd, self._parts)
            if written < self._size:  # cut short: the rest, however many calls it takes
                rest = memoryview(b"".join(self._parts))[written:]
                while rest:
                    rest = rest[os.write(fd, rest):]
        self._parts, self._size = [], 0

    def __enter__(self) -> _SegmentFile:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        with self._file:
            if exc_type is None:
                self._flush()


_SEGMENT_WRITE_BYTES = 1 << 20
_SEGMENT_WRITE_PARTS = 1000  # four a frame; a call takes at most IOV_MAX (1024 on Linux)
_writev = getattr(os, "writev", None)


def _encode_without_images(segment: Segment, planned: PlannedTable,
                           options: RecordOptions) -> Encoded:
    """Encodes a segment of a table without images a column at a time."""
    labels = planned.labels_at(segment.positions)
    records = encode_rows_without_images(segment.split, labels,
                                         planned.inputs_at(segment.positions), options)
    facts = ShardFacts()
    facts.add_without_images(segment.positions.tolist(), labels)
    block = framed(records)
    with local_files.create_private(segment.path) as file:
        file.write(block.data)
    return Encoded(segment.number, segment.path, len(records), [], facts, block.sizes)


def _segments(shards: list[Shard], size: int, spool: str, folder: OutputFolder
              ) -> Iterator[Segment]:
    """The segments of `shards`, in writing order; segments never cross shards."""
    number = 0
    for shard in shards:
        for index, start in enumerate(range(0, len(shard.positions), size)):
            path = folder.temp_uri(spool, shard.filename, f"_{index:05d}")
            yield Segment(number, shard.split, shard.positions[start:start + size], path)
            number += 1


def _count(shard: Shard, size: int) -> int:
    return math.ceil(len(shard.positions) / size)


class _WorkerDied(Exception):
    pass


def _exit_reason(exitcode: int) -> str:
    if exitcode < 0:
        return f"signal {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


class _Failure(NamedTuple):
    """What a worker sends instead of a result when it fails (its error, picklable)."""

    error: BaseException


def _die_with(driver: int) -> None:
    """Ends this worker when the driver dies (killed, a lost VM's OOM killer): an orphan
    would go on writing segments into a folder that a resumed run is cleaning up."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    else:
        def watch() -> None:
            while os.getppid() == driver:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != driver:  # it died before we asked
        os._exit(1)


def _work(tasks, results, planned: PlannedTable, options: RecordOptions, ahead: int,
          driver: int) -> None:
    """A worker process: encodes segments from `tasks` until it takes None."""
    _die_with(driver)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    try:
        for encoded in encode_segments(lambda block: tasks.get(block), planned, options,
                                       ahead):
            results.put(encoded)
    except BaseException as error:  # reported to the driver, which stops the run
        try:
            pickle.dumps(error)
        except Exception:
            error = RuntimeError(f"{type(error).__name__}: {error}")
        results.put(_Failure(error))


class _Workers:
    """A context manager giving `encode(segments) -> Encoded results, in segment order`.

    One worker encodes in this process; more are processes that take segments from one
    shared queue (so a fast worker takes more) and return results in any order; the
    driver puts them back in order. At most a window of segments is in flight. On an
    error the processes are terminated before exit.
    """

    def __init__(self, num_workers: int, planned: PlannedTable, options: RecordOptions,
                 ahead: int):
        self.num_workers, self.options, self.ahead = num_workers, options, ahead
        self.planned = planned
        self.processes: list = []

    def __enter__(self) -> Callable[[Iterable[Segment]], Iterator[Encoded]]:
        if self.num_workers > 1:
            # fork starts instantly and needs no `if __name__ == "__main__"` guard in
            # scripts; workers only run Pillow and pure Python, never TensorFlow.
            context = multiprocessing.get_context("fork" if sys.platform == "linux"
                                                  else "spawn")
            self.tasks, self.results = context.Queue(), context.Queue()
            self.processes = [
                # By fork, the planned table is shared, not copied (spawn pickles it once).
                context.Process(target=_work, daemon=True,
                                args=(self.tasks, self.results, self.planned, self.options,
                                      self.ahead, os.getpid()))
                for _ in range(self.num_workers)]
            # Objects the workers inherit are frozen out of their garbage collector: one
            # collected in a worker could run TensorFlow's destructors (when the caller
            # has imported it), which abort a forked process.
            gc.freeze()
            try:
                for process in self.processes:
                    process.start()
            finally:
                gc.unfreeze()
        return self.encode

    def encode(self, segments: Iterable[Segment]) -> Iterator[Encoded]:
        segments = iter(segments)
        if not self.processes:
            return encode_segments(lambda block: next(segments, None), self.planned,
                                   self.options, self.ahead)
        return self._in_processes(segments)

    def _submit(self, segments: Iterator[Segment], count: int) -> int:
        submitted = 0
        for segment in islice(segments, count):
            self.tasks.put(segment)
            submitted += 1
        return submitted

    def _in_processes(self, segments: Iterator[Segment]) -> Iterator[Encoded]:
        submitted = self._submit(segments, self.num_workers * (self.ahead + 2))
        finished: dict[int, Encoded] = {}
        number = 0
        while number < submitted:
            while number not in finished:
                result = self._next_result()
                if isinstance(result, _Failure):
                    raise result.error
                finished[result.number] = result
            submitted += self._submit(segments, 1)
            yield finished.pop(number)
            number += 1

    def _next_result(self) -> Encoded:
        while True:
            try:
                return self.results.get(timeout=0.5)
            except queue.Empty:
                died = [p.exitcode for p in self.processes if p.exitcode not in (None, 0)]
                if died:
                    raise _WorkerDied(_exit_reason(died[0])) from None

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.processes:
            return
        if exc_type is None:
            for _ in self.processes:
                self.tasks.put(None)
            for process in self.processes:
                process.join()
        else:  # stop now rather than finish queued work
            for process in self.processes:
                process.terminate()
            for process in self.processes:
                process.join(timeout=10)
        for channel in (self.tasks, self.results):
            channel.close()
            channel.cancel_join_thread()

"""The local engine: worker processes encode segments of shards, the driver splices them.

Every shard is cut into segments of consecutive planned rows. Workers take segments from
one shared queue, encode them with `records.encode_row` and write their framed records to
a temporary segment file; the driver appends finished segments to their shard in plan
order (in the kernel, without copying bytes through Python) and commits the shard through
the shared `ShardWriter`. Records never travel through a pipe, which is what lets two
workers run at the speed of two cores. TFRecord frames concatenate, so the shards are
byte-identical however rows are cut into segments, whichever worker encodes them and
whatever `num_workers` is. Workers never import TensorFlow.

When images live in a bucket, each worker takes several segments ahead and a `Prefetcher`
keeps dozens of reads in flight while the worker decodes, so a store that answers in
100 ms is read at the speed of the CPUs. A bounded window of segments is in flight, so
memory and temporary disk use stay flat however many rows there are.

On Ctrl-C, a dead worker or `on_error="raise"`, the workers are stopped first and then
the files of this run are deleted: no manifest, no temporary files, no orphan shards. A
resumable run (`resume=True`) keeps the shards it committed, for the next run.
"""

from __future__ import annotations

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
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import NamedTuple

from tfrecorder import fs
from tfrecorder.dataset import WrittenShard
from tfrecorder.errors import ConversionAborted, ImageError
from tfrecorder.plan import Plan, Shard, planned_rows
from tfrecorder.prefetch import MAX_IN_FLIGHT, Prefetcher
from tfrecorder.records import ImageOptions, Rejection, Row, encode_row
from tfrecorder.resume import Journal
from tfrecorder.table import Table
from tfrecorder.tfrecord import TEMP_MARKER, ShardWriter, temp_path, write_framed

logger = logging.getLogger(__name__)

# Rows per segment, about 10-20 ms of work: it hides the task overhead and keeps the tail
# short. A row with an image costs about a millisecond; one without, some microseconds.
_MAX_SEGMENT_ROWS = 16
_MAX_SEGMENT_ROWS_WITHOUT_IMAGES = 2048


class Segment(NamedTuple):
    """A task: consecutive planned rows of one shard, and the file to write them to."""

    number: int  # in writing order over the whole run: results are put back in this order
    rows: list[Row]
    path: str


class Encoded(NamedTuple):
    number: int
    path: str
    num_rows: int
    rejections: list[Rejection]


@dataclass(frozen=True)
class Written:
    shards: list[WrittenShard]
    rejections: list[Rejection]


def write_local(
    plan: Plan,
    table: Table,
    output_dir: str,
    *,
    run_id: str,
    journal: Journal,
    num_workers: int | None = None,
    on_error: str = "reject",
    progress: bool = True,
) -> Written:
    """Executes `plan`: encodes every row and writes every shard into `output_dir`.

    Shards the journal holds as committed (a resumed run) are kept, not written again.
    """
    num_workers = num_workers or os.cpu_count() or 1
    most = _MAX_SEGMENT_ROWS if table.has_images else _MAX_SEGMENT_ROWS_WITHOUT_IMAGES
    segment_rows = max(1, min(most, math.ceil(plan.num_rows / (num_workers * 8))))
    # Segments a worker holds beyond the one it encodes: one, or with images in a bucket,
    # enough to keep MAX_IN_FLIGHT reads going.
    ahead = math.ceil(MAX_IN_FLIGHT / segment_rows) if table.has_remote_images else 1
    # Segments live beside the shards (same file system, so splicing is cheap), or in a
    # local temporary folder when the output is remote.
    spool = tempfile.mkdtemp(prefix="tfrecorder-") if fs.is_remote(output_dir) else output_dir
    written = Written([], [])
    try:
        with _Workers(num_workers, plan.image_options, ahead) as encode:
            _write(plan, table, output_dir, spool, run_id, segment_rows, encode, on_error,
                   progress, journal, written)
        return written
    except BaseException as error:
        # The workers have stopped, so nothing can write after this clean-up.
        _delete_run_files([output_dir, spool], run_id)
        if journal.resumable:
            logger.warning("Conversion stopped (%s); kept the %d committed shard(s) in %s: "
                           "run again with resume=True to write the rest.",
                           type(error).__name__, len(journal.committed), output_dir)
        else:
            journal.delete([shard.filename for shard in written.shards])
            logger.warning("Conversion stopped (%s); removed the files it wrote. No dataset "
                           "was written to %s.", type(error).__name__, output_dir)
        if isinstance(error, _WorkerDied):
            raise ConversionAborted(
                f"a worker process died ({error}: killed, or out of memory?); no dataset "
                f"was written to {output_dir!r}. Rerun, perhaps with fewer num_workers."
            ) from None
        raise
    finally:
        if spool != output_dir:
            fs.delete([os.path.join(spool, name) for name in os.listdir(spool)])
            os.rmdir(spool)


def _write(plan, table, output_dir, spool, run_id, segment_rows, encode, on_error, progress,
           journal: Journal, written: Written) -> None:
    """Writes every shard, recording each in `written` and the journal once committed."""
    todo = [shard for shard in plan.shards if shard.filename not in journal.committed]
    results = encode(_segments(plan, table, todo, segment_rows, spool, run_id))
    with _progress_bar(plan.num_rows, progress) as bar:
        for shard in plan.shards:
            if shard.filename in journal.committed:
                kept, rejections = journal.committed[shard.filename]
                written.shards.append(kept)
                written.rejections.extend(rejections)
                bar.update(len(shard.positions))
                continue
            rejected_here = []
            with ShardWriter(fs.join(output_dir, shard.filename), run_id,
                             plan.compression) as writer:
                for result in islice(results, _count(shard, segment_rows)):
                    if result.rejections and on_error == "raise":
                        raise _image_error(table, result.rejections[0])
                    writer.append_file(result.path, result.num_rows - len(result.rejections))
                    fs.delete([result.path])
                    rejected_here.extend(result.rejections)
                    bar.update(result.num_rows)
            done = WrittenShard(shard.split, shard.filename, writer.num_records,
                                writer.num_bytes, len(rejected_here))
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


def encode_segments(take: Callable[[bool], Segment | None], options: ImageOptions,
                    ahead: int) -> Iterator[Encoded]:
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
                    else:
                        readers = [prefetcher.reader(row.uri) for row in segment.rows]
                        pending.append((segment, readers))
                    continue
            segment, readers = pending.popleft()
            yield _encode_segment(segment, options, readers)


def _encode_segment(segment: Segment, options: ImageOptions, readers: list) -> Encoded:
    """Encodes `segment`'s rows into its segment file of framed records."""
    rejections = []
    with open(segment.path, "wb") as file:
        for row, read in zip(segment.rows, readers):
            result = encode_row(row, options, read)
            if isinstance(result, Rejection):
                rejections.append(result)
            else:
                write_framed(file, result)
    return Encoded(segment.number, segment.path, len(segment.rows), rejections)


def _segments(plan: Plan, table: Table, shards: list[Shard], size: int, spool: str,
              run_id: str) -> Iterator[Segment]:
    """The segments of `shards`, in writing order; segments never cross shards."""
    rows = planned_rows(plan, table)
    wanted = {shard.filename for shard in shards}
    number = 0
    for shard in plan.shards:
        if shard.filename not in wanted:
            for _ in islice(rows, len(shard.positions)):  # a committed shard's rows
                pass
            continue
        for index, start in enumerate(range(0, len(shard.positions), size)):
            path = temp_path(os.path.join(spool, shard.filename), f"{run_id}_{index:05d}")
            segment_rows = list(islice(rows, min(size, len(shard.positions) - start)))
            yield Segment(number, segment_rows, path)
            number += 1


def _count(shard: Shard, size: int) -> int:
    return math.ceil(len(shard.positions) / size)


def _image_error(table: Table, rejection: Rejection) -> ImageError:
    return ImageError(
        f"row {table.rows.index[rejection.position]} "
        f"({table.rows['image_uri'].iat[rejection.position]!r}): {rejection.reason}. "
        "Fix or drop the row, or use on_error='reject' to list such rows in rejected.csv."
    )


def _delete_run_files(folders: list[str], run_id: str) -> None:
    """Deletes this run's segments and temporary files from `folders`."""
    marker = TEMP_MARKER + run_id
    for folder in dict.fromkeys(folders):
        fs.delete([fs.join(folder, n) for n in fs.list_dir(folder) if marker in n])


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


def _work(tasks, results, options: ImageOptions, ahead: int, driver: int) -> None:
    """A worker process: encodes segments from `tasks` until it takes None."""
    _die_with(driver)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    try:
        for encoded in encode_segments(lambda block: tasks.get(block), options, ahead):
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

    def __init__(self, num_workers: int, options: ImageOptions, ahead: int):
        self.num_workers, self.options, self.ahead = num_workers, options, ahead
        self.processes: list = []

    def __enter__(self) -> Callable[[Iterable[Segment]], Iterator[Encoded]]:
        if self.num_workers > 1:
            # fork starts instantly and needs no `if __name__ == "__main__"` guard in
            # scripts; workers only run Pillow and pure Python, never TensorFlow.
            context = multiprocessing.get_context("fork" if sys.platform == "linux"
                                                  else "spawn")
            self.tasks, self.results = context.Queue(), context.Queue()
            self.processes = [
                context.Process(target=_work, daemon=True,
                                args=(self.tasks, self.results, self.options, self.ahead,
                                      os.getpid()))
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
            return encode_segments(lambda block: next(segments, None), self.options,
                                   self.ahead)
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

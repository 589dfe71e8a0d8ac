"""The local engine: worker processes encode segments of shards, the driver splices them.

Every shard is cut into segments of consecutive planned rows. A worker encodes a segment
with `records.encode_row` and writes its framed records to a temporary segment file; the
driver appends finished segments to their shard in plan order (in the kernel, without
copying bytes through Python) and commits the shard through the shared `ShardWriter`.
Records never travel through a pipe, which is what lets two workers run at the speed of
two cores. TFRecord frames concatenate, so the shards are byte-identical however rows
are cut into segments and whatever `num_workers` is. Workers never import TensorFlow.

A bounded window of segments is in flight, so memory and temporary disk use stay flat
however many rows there are. On Ctrl-C, a dead worker or `on_error="raise"`, the workers
are stopped first and then every file of this run is deleted: no manifest, no temporary
files, no orphan shards.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import signal
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import islice

from tfrecorder import fs
from tfrecorder.dataset import WrittenShard, dataset_files
from tfrecorder.errors import ConversionAborted, ImageError
from tfrecorder.plan import Plan, Shard, planned_rows
from tfrecorder.records import ImageOptions, Rejection, Row, encode_row
from tfrecorder.table import Table
from tfrecorder.tfrecord import TEMP_MARKER, ShardWriter, temp_path, write_framed

logger = logging.getLogger(__name__)

# Rows per segment, about 10-20 ms of work: it hides the task overhead and keeps the tail
# short. A row with an image costs about a millisecond; one without, some microseconds.
_MAX_SEGMENT_ROWS = 16
_MAX_SEGMENT_ROWS_WITHOUT_IMAGES = 2048
_SEGMENTS_PER_WORKER = 2  # in flight: one running and one queued per worker


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
    num_workers: int | None = None,
    on_error: str = "reject",
    progress: bool = True,
) -> Written:
    """Executes `plan`: encodes every row and writes every shard into `output_dir`."""
    num_workers = num_workers or os.cpu_count() or 1
    most = _MAX_SEGMENT_ROWS if table.has_images else _MAX_SEGMENT_ROWS_WITHOUT_IMAGES
    segment_rows = max(1, min(most, math.ceil(plan.num_rows / (num_workers * 8))))
    # Segments live beside the shards (same file system, so splicing is cheap), or in a
    # local temporary folder when the output is remote.
    spool = tempfile.mkdtemp(prefix="tfrecorder-") if fs.is_remote(output_dir) else output_dir
    written = Written([], [])
    try:
        with _Workers(num_workers) as run_in_workers:
            _write(plan, table, output_dir, spool, run_id, segment_rows, run_in_workers,
                   on_error, progress, written)
        return written
    except BaseException as error:
        # The workers have stopped, so nothing can write after this clean-up.
        fs.delete([fs.join(output_dir, w.filename) for w in written.shards])
        _delete_run_files([output_dir, spool], run_id)
        logger.warning("Conversion stopped (%s); removed the files it wrote. No dataset "
                       "was written to %s.", type(error).__name__, output_dir)
        if isinstance(error, BrokenProcessPool):
            raise ConversionAborted(
                "a worker process died (killed, or out of memory?); no dataset was "
                f"written to {output_dir!r}. Rerun, perhaps with fewer num_workers."
            ) from error
        raise
    finally:
        if spool != output_dir:
            fs.delete([os.path.join(spool, name) for name in os.listdir(spool)])
            os.rmdir(spool)


def _write(plan, table, output_dir, spool, run_id, segment_rows, run_in_workers, on_error,
           progress, written: Written) -> None:
    """Writes every shard, recording each in `written` as soon as it is committed."""
    tasks = (
        (rows, plan.image_options, temp_path(os.path.join(spool, shard.filename),
                                             f"{run_id}_{number:05d}"))
        for shard, number, rows in _segments(plan, table, segment_rows)
    )
    results = run_in_workers(encode_segment, tasks)
    with _progress_bar(plan.num_rows, progress) as bar:
        for shard in plan.shards:
            with ShardWriter(fs.join(output_dir, shard.filename), run_id,
                             plan.compression) as writer:
                num_rejected = 0
                for segment, num_rows, rejected in islice(results, _count(shard, segment_rows)):
                    if rejected and on_error == "raise":
                        raise _image_error(table, rejected[0])
                    writer.append_file(segment, num_rows - len(rejected))
                    fs.delete([segment])
                    written.rejections.extend(rejected)
                    num_rejected += len(rejected)
                    bar.update(num_rows)
            written.shards.append(WrittenShard(shard.split, shard.filename, writer.num_records,
                                               writer.num_bytes, num_rejected))


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


def encode_segment(rows: list[Row], options: ImageOptions, path: str
                   ) -> tuple[str, int, list[Rejection]]:
    """Runs in a worker: encodes `rows` into a segment file of framed records."""
    rejections = []
    with open(path, "wb") as segment:
        for row in rows:
            result = encode_row(row, options)
            if isinstance(result, Rejection):
                rejections.append(result)
            else:
                write_framed(segment, result)
    return path, len(rows), rejections


def _segments(plan: Plan, table: Table, size: int) -> Iterator[tuple[Shard, int, list[Row]]]:
    """(shard, segment number, rows) in writing order; segments never cross shards."""
    rows = planned_rows(plan, table)
    for shard in plan.shards:
        for number, start in enumerate(range(0, len(shard.positions), size)):
            yield shard, number, list(islice(rows, min(size, len(shard.positions) - start)))


def _count(shard: Shard, size: int) -> int:
    return math.ceil(len(shard.positions) / size)


def _image_error(table: Table, rejection: Rejection) -> ImageError:
    return ImageError(
        f"row {table.rows.index[rejection.position]} "
        f"({table.rows['image_uri'].iat[rejection.position]!r}): {rejection.reason}. "
        "Fix or drop the row, or use on_error='reject' to list such rows in rejected.csv."
    )


def _delete_run_files(folders: list[str], run_id: str) -> None:
    """Deletes this run's shards, segments and temporary files from `folders`."""
    marker = TEMP_MARKER + run_id
    for folder in dict.fromkeys(folders):
        names = dataset_files(folder)
        fs.delete([fs.join(folder, n) for n in names if marker in n])


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the driver, which stops them and cleans up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Workers:
    """A context manager giving `run(function, tasks) -> results, in task order`.

    One worker runs tasks in this process; more use a process pool with a bounded window
    of tasks in flight. On an error the pool's processes are terminated before exit.
    """

    def __init__(self, num_workers: int):
        self.num_workers = num_workers
        self.pool = None

    def __enter__(self) -> Callable[[Callable, Iterable[tuple]], Iterator]:
        if self.num_workers > 1:
            # fork starts instantly and needs no `if __name__ == "__main__"` guard in
            # scripts; workers only run Pillow and pure Python, never TensorFlow.
            method = "fork" if sys.platform == "linux" else "spawn"
            self.pool = ProcessPoolExecutor(
                self.num_workers, mp_context=multiprocessing.get_context(method),
                initializer=_ignore_sigint,
            )
            self.pool.submit(int).result()  # start the workers before any thread
        return self.run

    def run(self, function: Callable, tasks: Iterable[tuple]) -> Iterator:
        if self.pool is None:
            return (function(*task) for task in tasks)
        return self._in_pool(function, tasks)

    def _in_pool(self, function: Callable, tasks: Iterable[tuple]) -> Iterator:
        # The first window is submitted now, not on first use, so workers start at once.
        tasks = iter(tasks)
        window = self.num_workers * _SEGMENTS_PER_WORKER
        pending = deque(self.pool.submit(function, *t) for t in islice(tasks, window))

        def results() -> Iterator:
            while pending:
                result = pending.popleft().result()
                pending.extend(self.pool.submit(function, *t) for t in islice(tasks, 1))
                yield result

        return results()

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.pool is None:
            return
        if exc_type is None:
            self.pool.shutdown(wait=True)
            return
        # Stop now rather than finish queued work: terminate the workers.
        processes = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(timeout=10)

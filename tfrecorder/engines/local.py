"""The local engine: a process pool encodes rows, the driver writes shards in plan order.

Workers run `records.encode_rows` on small batches and never import TensorFlow. Results
come back in plan order (a bounded window of batches is in flight, so memory stays flat
however many rows there are), which makes the shards byte-identical for any
`num_workers`. Only this process writes files, through the shared `ShardWriter`.

On Ctrl-C, a dead worker or `on_error="raise"`, every file this run wrote is deleted
before the error propagates: no manifest, no temporary files, no orphan shards.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import islice

from tfrecorder import fs
from tfrecorder.dataset import WrittenShard
from tfrecorder.errors import ConversionAborted, ImageError
from tfrecorder.plan import Plan, planned_rows
from tfrecorder.records import ImageOptions, Rejection, Row, encode_row, encode_rows
from tfrecorder.table import Table
from tfrecorder.tfrecord import ShardWriter

logger = logging.getLogger(__name__)

_MAX_BATCH = 8  # rows per task: amortizes IPC, keeps the pool balanced on small tables
_BATCHES_PER_WORKER = 3  # in flight: enough to keep workers busy, bounded memory


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
    from tqdm.auto import tqdm

    num_workers = num_workers or os.cpu_count() or 1
    batch_size = max(1, min(_MAX_BATCH, plan.num_rows // (num_workers * 4)))
    committed: list[str] = []
    shards: list[WrittenShard] = []
    rejections: list[Rejection] = []
    rows = table.rows.index
    with _encoder(num_workers, plan.image_options, batch_size) as encode:
        results = encode(planned_rows(plan, table))
        bar = tqdm(total=plan.num_rows, unit="img", desc="Writing TFRecords",
                   disable=not progress)
        try:
            for shard in plan.shards:
                with ShardWriter(fs.join(output_dir, shard.filename), run_id,
                                 plan.compression) as writer:
                    for result in islice(results, len(shard.positions)):
                        if isinstance(result, Rejection):
                            if on_error == "raise":
                                raise ImageError(
                                    f"row {rows[result.position]} "
                                    f"({table.rows['image_uri'].iat[result.position]!r}): "
                                    f"{result.reason}. Fix or drop the row, or use "
                                    "on_error='reject' to list such rows in rejected.csv."
                                )
                            rejections.append(result)
                        else:
                            writer.write(result)
                        bar.update()
                committed.append(writer.path)
                shards.append(WrittenShard(shard, writer.num_records, writer.num_bytes))
        except BaseException as error:
            fs.delete(committed)
            logger.warning(
                "Conversion stopped (%s); removed %d finished and all temporary shards. "
                "No dataset was written to %s.", type(error).__name__, len(committed),
                output_dir,
            )
            if isinstance(error, BrokenProcessPool):
                raise ConversionAborted(
                    "a worker process died (killed, or out of memory?); no dataset was "
                    f"written to {output_dir!r}. Rerun, perhaps with fewer num_workers."
                ) from error
            raise
        finally:
            bar.close()
    return Written(shards, rejections)


def _batched(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the driver, which stops them and cleans up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _encoder:
    """A context manager giving `encode(rows) -> iterator of results, in order`.

    One worker runs in this process (no pool to start); more use a process pool,
    started on entry so that it forks before the progress bar starts its thread.
    """

    def __init__(self, num_workers: int, options: ImageOptions, batch_size: int):
        self.num_workers, self.options, self.batch_size = num_workers, options, batch_size
        self.pool = None

    def __enter__(self):
        if self.num_workers > 1:
            # fork starts instantly and needs no `if __name__ == "__main__"` guard in
            # scripts; workers only run Pillow and pure Python, never TensorFlow.
            method = "fork" if sys.platform == "linux" else "spawn"
            self.pool = ProcessPoolExecutor(
                self.num_workers, mp_context=multiprocessing.get_context(method),
                initializer=_ignore_sigint,
            )
            self.pool.submit(int).result()  # launch the workers now
        return self.encode

    def encode(self, rows: Iterable[Row]) -> Iterator[bytes | Rejection]:
        if self.pool is None:
            return (encode_row(row, self.options) for row in rows)
        return self._in_pool(rows)

    def _in_pool(self, rows: Iterable[Row]) -> Iterator[bytes | Rejection]:
        pending = deque()
        window = self.num_workers * _BATCHES_PER_WORKER
        for batch in _batched(rows, self.batch_size):
            pending.append(self.pool.submit(encode_rows, batch, self.options))
            if len(pending) >= window:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()

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
            process.join(timeout=5)

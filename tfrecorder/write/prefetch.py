"""Reading images ahead of the encoder, so that a bucket answering in 40-100 ms is read
at the speed of the CPUs, as local disk is.

Both engines' workers encode rows strictly in plan order (so shards stay byte-identical)
and ask a `Prefetcher` for each row's bytes some rows before they encode it. Remote reads
are requests on fsspec's event loop (`fs.start_read`), which waits on the network without
holding the GIL, so one process keeps dozens of requests in flight while its main thread
decodes.
Local files are read when they are encoded: the page cache answers in microseconds.

Memory stays bounded: callers stop asking for more rows while `full` (too many reads
unconsumed, or too many bytes fetched and not yet encoded).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import NamedTuple

from tfrecorder.format.manifest import Feature
from tfrecorder.options import ConvertOptions, ImageOptions, RecordOptions
from tfrecorder.storage import fs
from tfrecorder.write.records import encode_row
from tfrecorder.write.rows import Record, Rejection, Row

# Requests in flight per process. 64 hide 100 ms of latency behind about 1.5 ms of
# decoding per image, with room to spare.
MAX_IN_FLIGHT = 64
MAX_BUFFERED_BYTES = 64 << 20  # fetched, not yet encoded (plus what is in flight)
# A record's size when no sampled row gives one (every sampled row rejected).
_FALLBACK_RECORD_BYTES = 100_000
_CLIPS_SAMPLED = 2  # video or audio rows encoded to estimate a record's size


class RowReads(NamedTuple):
    """The reads of a row's files, started ahead: its image and, for a segmentation row,
    its mask (None: no such file). Each gives the bytes when called."""

    image: Callable[[], bytes] | None
    mask: Callable[[], bytes] | None


class Prefetcher:
    """Starts reads ahead of use; a context manager that cancels on exit the reads still
    in flight (`fs.start_read`), so that a stop never waits for a store: Ctrl-C in the
    middle of a read that a server holds open still ends the run at once."""

    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT,
                 max_buffered_bytes: int = MAX_BUFFERED_BYTES):
        self.max_in_flight = max_in_flight
        self.max_buffered_bytes = max_buffered_bytes
        self._lock = threading.Lock()
        self._unconsumed: set[Future] = set()
        self._arrived_sizes: dict[Future, int] = {}  # arrived, not yet consumed
        self._buffered = 0  # their sum

    @property
    def full(self) -> bool:
        """True while the caller should consume before asking for more."""
        return (len(self._unconsumed) >= self.max_in_flight
                or self._buffered >= self.max_buffered_bytes)

    def reader(self, uri: str | None) -> Callable[[], bytes] | None:
        """A function returning the bytes at `uri` (or raising what the store said);
        for remote URIs the read starts now."""
        if uri is None:
            return None
        if not fs.is_remote(uri):
            return functools.partial(fs.read_bytes, uri)
        future = fs.start_read(uri)
        with self._lock:
            self._unconsumed.add(future)
        future.add_done_callback(self._arrived)
        return _Started(self, future)

    def reads(self, row: Row) -> RowReads:
        """The reads of `row`'s image and mask, started now (`reader`)."""
        return RowReads(self.reader(row.uri), self.reader(row.mask_uri))

    def release(self, reads: RowReads) -> None:
        """Forgets the reads of a row that were not consumed (the mask of a row whose
        image was rejected), cancelling them, so that they neither count against `full`
        nor hold their bytes."""
        for read in reads:
            if isinstance(read, _Started) and self._forget(read.future):
                read.future.cancel()

    def _arrived(self, future: Future) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        with self._lock:
            if future in self._unconsumed:  # not consumed (or dropped) first
                self._arrived_sizes[future] = len(future.result())
                self._buffered += self._arrived_sizes[future]

    def _consume(self, future: Future) -> bytes:
        try:
            return future.result()
        finally:
            self._forget(future)

    def _forget(self, future: Future) -> bool:
        """Stops counting a read against `full`; whether it was still counted."""
        with self._lock:
            if future not in self._unconsumed:
                return False
            self._unconsumed.discard(future)
            self._buffered -= self._arrived_sizes.pop(future, 0)
            return True

    def close(self) -> None:
        """Cancels the reads no one consumed; returns at once."""
        with self._lock:
            pending = list(self._unconsumed)
            self._unconsumed.clear()
            self._arrived_sizes.clear()
            self._buffered = 0
        for future in pending:
            future.cancel()

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class _Started:
    """A remote read a `Prefetcher` started: calling it gives the bytes (or raises what
    the store said)."""

    def __init__(self, prefetcher: Prefetcher, future: Future):
        self.prefetcher, self.future = prefetcher, future

    def __call__(self) -> bytes:
        return self.prefetcher._consume(self.future)


def encode_in_order(rows: Iterable[Row], options: ImageOptions, prefetcher: Prefetcher,
                    window: int = MAX_IN_FLIGHT) -> Iterator[tuple[Row, Record | Rejection]]:
    """Encodes `rows` in their order, reading up to `window` rows ahead."""
    ahead: deque = deque()
    for row in rows:
        ahead.append((row, prefetcher.reads(row)))
        while ahead and (len(ahead) >= window or prefetcher.full):
            yield encode_read(*ahead.popleft(), options, prefetcher)
    while ahead:
        yield encode_read(*ahead.popleft(), options, prefetcher)


def encode_read(row: Row, reads: RowReads, options: ImageOptions, prefetcher: Prefetcher
                ) -> tuple[Row, Record | Rejection]:
    """`row` encoded from the reads `prefetcher` started; any it left unread released."""
    try:
        return row, encode_row(row, options, reads.image, reads.mask)
    finally:
        prefetcher.release(reads)


def mean_record_bytes(rows: Iterable[Row], options: ConvertOptions,
                      features: Mapping[str, Feature], media: str = "image",
                      task: str = "classification") -> float:
    """The mean size of the records of `rows` (a sample: `plan.sample_rows`), which
    `convert` measures before `make_plan` to give each split as many shards as keep them
    near `shard_size_mb`; 0 when no split is sized by bytes (nothing is read then).

    The estimate is part of planning the shard counts, but it encodes records (Pillow,
    reads from buckets), which the plan must not load and frozen options must not do: so
    it lives here, beside the encoder it runs, with the sample's reads started at once.
    Image headers only: the sample is not validated. `features` are the records' (the
    plan's, by `plan.stored_features`); `media` and `task`, the table's (`Table.media`).
    """
    if not options.shards.sized_by_bytes:
        return 0.0
    image_options = RecordOptions.of(dataclasses.replace(options.image, validate=False),
                                     None, features)
    if media != "image":  # a clip costs what a hundred images do: a few tell enough
        image_options = dataclasses.replace(image_options, media=media,
                                            media_options=options.media, task=task)
        rows = itertools.islice(rows, _CLIPS_SAMPLED)
    with Prefetcher() as prefetcher:
        sizes = [len(result.example) for _, result
                 in encode_in_order(rows, image_options, prefetcher)
                 if not isinstance(result, Rejection)]
    return sum(sizes) / len(sizes) if sizes else _FALLBACK_RECORD_BYTES

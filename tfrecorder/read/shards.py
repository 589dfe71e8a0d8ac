"""A split's shards, as the manifest lists them, and their records: streamed in pure
Python with every checksum checked (`shard_records`), handed to a function on threads
(`checked_records`), or as a `tf.data` source (`shard_reader`).

Apart from `load()` because every reader shares it: `load()` builds its pipeline on
`shard_reader`, `verify` checks shards through `shard_records` and their records through
`checked_records` without importing TensorFlow, and `inspect` reads through both.

Local shards are read by TensorFlow itself; shards in a bucket through `tfrecorder.storage.fs`,
like every other file tfrecorder reads, with the same records in the same order.
TensorFlow is imported only by `shard_reader`, when called, through
`_tensorflow.tensorflow()`.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tfrecorder._tensorflow import tensorflow
from tfrecorder.format.manifest import Manifest
from tfrecorder.format.tfrecord import open_read, read_records
from tfrecorder.storage import fs

_CHUNK_BYTES = 1 << 20  # records of a remote shard handed to TensorFlow at once
_CHECKED_TOGETHER = 16  # records a thread of `checked_records` takes at once
_AHEAD = 4  # such chunks in flight a thread: read ahead, but never a whole shard

Shard = TypeVar("Shard")
Checked = TypeVar("Checked")


def shard_files(dataset_dir: str, manifest: Manifest, split: str) -> list[str]:
    """The paths of a split's shards, as the manifest lists them."""
    return [fs.join(dataset_dir, shard.file)
            for shard in manifest.split(split, dataset_dir).shards]


def shard_records(path: str, compression: str | None, digest=None) -> Iterator[bytes]:
    """The records of one shard, read through `tfrecorder.storage.fs`, every checksum checked;
    its bytes as stored also go to `digest` (a hashlib object), if given."""
    with open_read(path, compression, digest) as stream:
        yield from read_records(stream)


def checked_records(shards: Sequence[Shard], compression: str | None,
                    check: Callable[[Shard, int, bytes], Checked]
                    ) -> Iterator[tuple[Shard, Checked]]:
    """(shard, `check(shard, number, record)`) for every record of `shards` (each has a
    `.path`), in order, the checks run on a thread per core.

    For checks that decode (`verify`'s): libjpeg-turbo and Pillow release the GIL while
    they decode, which is nearly all of such a check's time. Records are read on the
    calling thread, every checksum checked, and handed over a few at a time, with only a
    few such chunks a thread in flight, so memory stays small whatever a shard's size.
    """
    threads = max(2, os.cpu_count() or 1)

    def chunks() -> Iterator[tuple[Shard, list[tuple[int, bytes]]]]:
        for shard in shards:
            chunk = []
            for number, record in enumerate(shard_records(shard.path, compression)):
                chunk.append((number, record))
                if len(chunk) == _CHECKED_TOGETHER:
                    yield shard, chunk
                    chunk = []
            if chunk:
                yield shard, chunk

    def checked(shard: Shard, chunk: list[tuple[int, bytes]]) -> list[Checked]:
        return [check(shard, number, record) for number, record in chunk]

    read, pending = chunks(), deque()
    pool = ThreadPoolExecutor(threads, thread_name_prefix="checked_records")
    try:
        while True:
            while len(pending) < threads * _AHEAD and (chunk := next(read, None)):
                pending.append((chunk[0], pool.submit(checked, *chunk)))
            if not pending:
                return
            shard, results = pending.popleft()
            for result in results.result():
                yield shard, result
    finally:  # a consumer that stops early (an error) waits for no chunk not yet begun
        pool.shutdown(cancel_futures=True)


def shard_reader(remote: bool, compression: str | None) -> Callable:
    """A function from a shard's path (a string tensor) to a `tf.data.Dataset` of its
    serialized records, for `interleave`.

    Local shards are read by TFRecordDataset, in C++. Remote ones are read through
    `tfrecorder.storage.fs`, so with the credentials and endpoints the writer used: TensorFlow's
    own file systems have no s3:// and a gs:// that ignores STORAGE_EMULATOR_HOST. Their
    records are streamed in Python and handed over about a megabyte at a time, since
    one Python call per record would cost more than reading it.
    """
    import numpy as np
    tf = tensorflow()

    if not remote:
        compression_type = "GZIP" if compression == "gzip" else ""
        return lambda path: tf.data.TFRecordDataset(path, compression_type=compression_type)

    def chunks(path: bytes) -> Iterator:
        chunk, size = [], 0
        for record in shard_records(path.decode(), compression):
            chunk.append(record)
            size += len(record)
            if size >= _CHUNK_BYTES:
                # An object array: NumPy's bytes type would strip trailing zero bytes.
                yield np.array(chunk, dtype=object)
                chunk, size = [], 0
        if chunk:
            yield np.array(chunk, dtype=object)

    return lambda path: tf.data.Dataset.from_generator(
        chunks, args=(path,), output_signature=tf.TensorSpec([None], tf.string)).unbatch()

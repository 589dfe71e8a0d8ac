"""A split's shards, as the manifest lists them, and their records: streamed in pure
Python with every checksum checked (`shard_records`), or as a `tf.data` source
(`shard_reader`).

Apart from `load()` because every reader shares it: `load()` builds its pipeline on
`shard_reader`, `verify` checks shards through `shard_records` without importing
TensorFlow, and `inspect` and `verify`'s record checks read through both.

Local shards are read by TensorFlow itself; shards in a bucket through `tfrecorder.storage.fs`,
like every other file tfrecorder reads, with the same records in the same order.
TensorFlow is imported only by `shard_reader`, when called, through
`_tensorflow.tensorflow()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tfrecorder._tensorflow import tensorflow
from tfrecorder.format.manifest import Manifest
from tfrecorder.format.tfrecord import open_read, read_records
from tfrecorder.storage import fs

_CHUNK_BYTES = 1 << 20  # records of a remote shard handed to TensorFlow at once


def shard_files(dataset_dir: str, manifest: Manifest, split: str) -> list[str]:
    """The paths of a split's shards, as the manifest lists them."""
    return [fs.join(dataset_dir, shard.file)
            for shard in manifest.split(split, dataset_dir).shards]


def shard_records(path: str, compression: str | None, digest=None) -> Iterator[bytes]:
    """The records of one shard, read through `tfrecorder.storage.fs`, every checksum checked;
    its bytes as stored also go to `digest` (a hashlib object), if given."""
    with open_read(path, compression, digest) as stream:
        yield from read_records(stream)


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

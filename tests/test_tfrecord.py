import io
import os
from pathlib import Path

import pytest
import tensorflow as tf

from tfrecorder.tfrecord import ShardWriter, write_framed

RECORDS = [b"", b"a", b"\x00" * 70000, bytes(range(256))]


def read(path, compression=""):
    return [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_tensorflow_reads_what_the_writer_writes(tmp_path, compression):
    path = str(tmp_path / "shard.tfrecord")
    with ShardWriter(path, ".tmp-run1", compression) as writer:
        for record in RECORDS:
            writer.write(record)
    assert read(path, "GZIP" if compression else "") == RECORDS
    assert writer.num_records == len(RECORDS)
    assert writer.num_bytes == os.path.getsize(path)
    assert os.listdir(tmp_path) == ["shard.tfrecord"]


def test_framing_matches_tensorflow_writer(tmp_path):
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in RECORDS:
            writer.write(record)
    ours = io.BytesIO()
    for record in RECORDS:
        write_framed(ours, record)
    assert Path(path).read_bytes() == ours.getvalue()


def test_gzip_output_is_deterministic(tmp_path):
    paths = [str(tmp_path / f"{i}.tfrecord.gz") for i in range(2)]
    for path in paths:
        with ShardWriter(path, ".tmp-run", "gzip") as writer:
            writer.write(b"same record")
    assert Path(paths[0]).read_bytes() == Path(paths[1]).read_bytes()


def test_a_failed_shard_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError), ShardWriter(str(tmp_path / "s.tfrecord"), ".tmp-run") as w:
        w.write(b"partial")
        assert os.listdir(tmp_path) == ["s.tfrecord.tmp-run"]  # not yet a shard
        raise RuntimeError("crash")
    assert os.listdir(tmp_path) == []


def test_unknown_compression_is_refused(tmp_path):
    with pytest.raises(ValueError, match="compression"):
        ShardWriter(str(tmp_path / "s"), ".tmp-run", "zip")

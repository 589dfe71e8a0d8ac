import io
import os
from pathlib import Path

import pytest
import tensorflow as tf

from tfrecorder.format.tfrecord import ShardWriter, write_framed

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
    if compression:  # a gzip shard cannot be read at an offset: no index
        assert os.listdir(tmp_path) == ["shard.tfrecord"]
        return
    assert sorted(os.listdir(tmp_path)) == ["index", "shard.tfrecord"]
    assert os.listdir(tmp_path / "index") == ["shard.idx"]
    # The index: each record's frame (12-byte header, data, 4-byte checksum), as DALI's
    # tfrecord2idx writes it; each line's bytes are that record alone, as TF reads it.
    data, offset, lines = Path(path).read_bytes(), 0, []
    for record in RECORDS:
        lines.append(f"{offset} {len(record) + 16}\n")
        offset += len(record) + 16
    assert (tmp_path / "index" / "shard.idx").read_text() == "".join(lines)
    frames = [data[int(o):int(o) + int(n)] for o, n in map(str.split, lines)]
    for frame, record in zip(frames, RECORDS):
        (tmp_path / "one.tfrecord").write_bytes(frame)
        assert read(tmp_path / "one.tfrecord") == [record]


@pytest.mark.parametrize("how", ["write_framed", "append_file"])
def test_the_index_follows_framed_blocks_and_appended_segments(tmp_path, how):
    from tfrecorder.format.tfrecord import framed

    path = str(tmp_path / "shard.tfrecord")
    segment = tmp_path / "segment"
    segment.write_bytes(framed(RECORDS).data)
    with ShardWriter(path, ".tmp-run1") as writer:
        writer.write(b"first")
        if how == "write_framed":
            writer.write_framed(framed(RECORDS))
        else:  # the frame sizes as the worker kept them
            writer.append_file(str(segment), framed(RECORDS).sizes)
    sizes = [len(r) + 16 for r in [b"first", *RECORDS]]
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    assert (tmp_path / "index" / "shard.idx").read_text() == "".join(
        f"{o} {n}\n" for o, n in zip(offsets, sizes))


def test_framing_matches_tensorflow_writer(tmp_path):
    import pyarrow as pa

    from tfrecorder.format.tfrecord import framed

    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in RECORDS:
            writer.write(record)
    ours = io.BytesIO()
    for record in RECORDS:
        write_framed(ours, record)
    assert Path(path).read_bytes() == ours.getvalue()
    # A block at once, from bytes or from an Arrow array (a slice: offsets not from 0).
    block = framed(RECORDS)
    assert bytes(block.data) == ours.getvalue()
    assert block.sizes.tolist() == [16 + len(record) for record in RECORDS]
    sliced = pa.array([b"before", *RECORDS], pa.large_binary()).slice(1)
    assert bytes(framed(sliced).data) == ours.getvalue()


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

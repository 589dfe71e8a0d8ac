"""Reading datasets in buckets: load, verify, inspect and the command line on a dataset
in a real local GCS or S3 server (tests/stores.py), checked against the same files read
locally; and the command line's one-line errors for stores."""

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import assert_one_error_line, dataset_folder_files, run_cli, write_image

import tfrecorder
from tfrecorder import StorageError, VerificationError
from tfrecorder.format.tfrecord import ShardWriter
from tfrecorder.read.shards import shard_reader

COMPRESSIONS = {"plain": None, "gzip": "gzip"}


@pytest.fixture(scope="module", params=["gcs_store", "s3_store"])
def store(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def table_csv(tmp_path_factory) -> Path:
    """A CSV of 18 small JPEGs and PNGs of several sizes and modes, in three splits."""
    folder = tmp_path_factory.mktemp("table")
    rows = []
    for i in range(18):
        mode, fmt = ["RGB", "L", "RGBA"][i % 3], "PNG" if i % 3 == 2 else "JPEG"
        path = write_image(folder / f"img_{i:02d}.{fmt.lower()}", size=(20 + i, 16 + i),
                           mode=mode, fmt=fmt, seed=i)
        rows.append((["TRAIN", "TRAIN", "VALIDATION", "TEST"][i % 4], path, "ab"[i % 2]))
    pd.DataFrame(rows).to_csv(folder / "table.csv", header=False, index=False)
    return folder / "table.csv"


@pytest.fixture(scope="module")
def local(table_csv, tmp_path_factory) -> dict[str, Path]:
    """The table converted locally, plain and gzipped; three train shards, so that reads
    interleave across shards."""
    folder = tmp_path_factory.mktemp("local")
    for name, compression in COMPRESSIONS.items():
        tfrecorder.convert(str(table_csv), str(folder / name), compression=compression,
                           num_shards={"train": 3}, progress=False)
    return {name: folder / name for name in COMPRESSIONS}


def upload_dataset(store, folder: Path, prefix: str, damage=None) -> str:
    """Uploads the dataset in `folder` to `prefix`; `damage(name, data)` may alter files."""
    for name in dataset_folder_files(folder):
        data = (folder / name).read_bytes()
        store.upload_bytes(damage(name, data) if damage else data, f"{prefix}/{name}")
    return prefix


@pytest.fixture(scope="module")
def remote(store, local) -> dict[str, str]:
    """The local datasets, uploaded to the store."""
    return {name: upload_dataset(store, folder, f"{store.root}/read/{name}")
            for name, folder in local.items()}


def elements(ds) -> list:
    return list(ds.as_numpy_iterator())


def assert_same_elements(found: list, expected: list) -> None:
    assert len(found) == len(expected)
    for a, b in zip(found, expected):
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# --- load ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", COMPRESSIONS)
def test_load_gives_the_local_copys_records_in_the_same_order(store, local, remote, name):
    found, expected = tfrecorder.load(remote[name]), tfrecorder.load(local[name])
    assert {split: len(ds) for split, ds in found.items()} == {
        split: len(ds) for split, ds in expected.items()}
    for split in expected:  # train shuffled (seed 0), the others in shard order
        assert_same_elements(elements(found[split]), elements(expected[split]))


def test_records_reach_tensorflow_byte_for_byte(store, tmp_path):
    """Records are handed over as they are: none lost between chunks, and none cut short
    (NumPy's fixed-width bytes would drop trailing zero bytes)."""
    import tensorflow as tf

    records = [b"a\x00", b"\x00\x00", b"", b"b" * 5000, *(bytes([i]) * 70_000 for i in range(40))]
    with ShardWriter(str(tmp_path / "shard"), ".tmp-test") as writer:
        for record in records:
            writer.write(record)
    uri = store.upload(tmp_path / "shard", f"{store.root}/records/shard")
    read = tf.data.Dataset.from_tensors(uri).interleave(shard_reader(True, None))
    assert list(read.as_numpy_iterator()) == records


def test_load_batches_and_caches_a_remote_dataset_in_a_local_folder(store, local, remote,
                                                                      tmp_path):
    options = dict(batch_size=4, image_size=(16, 16), seed=None, shuffle=False)
    expected = elements(tfrecorder.load(local["plain"], "train", **options))
    cached = tfrecorder.load(remote["plain"], "train", cache=str(tmp_path / "cache"),
                             **options)
    assert len(cached) == len(expected)
    assert_same_elements(elements(cached), expected)
    assert any(name.startswith("train") for name in os.listdir(tmp_path / "cache"))
    assert_same_elements(elements(cached), expected)  # the second epoch, from the cache


def test_a_file_uri_reads_like_its_path(local, tmp_path):
    uri = f"file://{local['plain']}"
    assert_same_elements(elements(tfrecorder.load(uri, "train")),
                         elements(tfrecorder.load(local["plain"], "train")))
    assert tfrecorder.verify(uri).ok
    assert os.listdir(tfrecorder.inspect(uri, num_records=2, output_dir=tmp_path / "look"))


# --- verify ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", COMPRESSIONS)
def test_verify_passes_on_a_remote_dataset(store, local, remote, name, caplog):
    report = tfrecorder.verify(remote[name])
    assert report.ok
    assert report.num_records == tfrecorder.verify(local[name]).num_records
    assert report.num_images_decoded == report.num_records_parsed == 18
    # Every record went through the checking pipeline: none was parsed again alone.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_verify_catches_a_corrupted_remote_shard(store, local):
    shard = "train-00001-of-00003.tfrecord"

    def flip_a_byte(name, data):
        return data[:100] + bytes([data[100] ^ 1]) + data[101:] if name == shard else data

    prefix = upload_dataset(store, local["plain"], f"{store.root}/corrupt", flip_a_byte)
    with pytest.raises(VerificationError) as caught:
        tfrecorder.verify(prefix)
    assert [p for p in caught.value.report.problems if str(p).startswith(f"{shard}: bad data")]


def fail_downloads(store, name: str) -> None:
    """The store answers 403 to reads of `name`'s bytes but still describes it (size,
    listing), so reading fails after the file was opened."""
    if store.kind == "gcs":
        store.fail(f"/o/{name}?alt=media", 403)
    else:
        store.fail(name, 403, method="GET")


def test_a_store_failing_mid_read_is_a_storage_error_not_a_corrupt_shard(store, remote):
    prefix = remote["plain"]
    fail_downloads(store, "read/plain/train-00000-of-00003.tfrecord")
    with pytest.raises(StorageError, match="403") as caught:
        tfrecorder.verify(prefix, decode_images=False)
    assert caught.value.uri == f"{prefix}/train-00000-of-00003.tfrecord"
    # ...and on the command line, one line: the store clients' own logs are quiet.
    assert_one_error_line(run_cli("verify", prefix, "--no-decode", "--no-progress"), "403",
                          "train-00000-of-00003.tfrecord")


# --- inspect ---------------------------------------------------------------------------------

def test_inspect_writes_locally_what_the_local_copy_gives(store, local, remote, tmp_path):
    found = tfrecorder.inspect(remote["gzip"], "train", 4, output_dir=tmp_path / "remote")
    expected = tfrecorder.inspect(local["gzip"], "train", 4, output_dir=tmp_path / "local")
    names = sorted(os.listdir(expected))
    assert len(names) == 5 and sorted(os.listdir(found)) == names
    for name in names:
        assert Path(found, name).read_bytes() == Path(expected, name).read_bytes()


# --- the command line --------------------------------------------------------------------------

def test_cli_info_describes_a_remote_dataset(store, local, remote):
    found, expected = run_cli("info", remote["plain"]), run_cli("info", local["plain"])
    assert found.returncode == 0, found.stderr
    assert found.stdout == expected.stdout.replace(str(local["plain"]), remote["plain"])


def test_cli_names_a_missing_bucket_or_dataset_on_one_line(store):
    assert_one_error_line(run_cli("info", f"{store.protocol}://no-such-bucket/data"),
                          "no-such-bucket", "does not exist")
    for command in ("info", "verify", "inspect"):
        assert_one_error_line(run_cli(command, f"{store.root}/no/dataset"),
                              f"{store.root}/no/dataset", "nothing is stored under")


def test_cli_converts_into_a_store_with_resume(store, table_csv, local):
    out = f"{store.root}/cli/out"
    process = run_cli("convert", table_csv, out, "--resume", "--no-progress", "--num-shards",
                  "train=3")
    assert process.returncode == 0, process.stderr
    assert store.read_bytes(f"{out}/dataset.json") == (local["plain"] / "dataset.json"
                                                        ).read_bytes()
    # A finished dataset is not resumed, and the advice is in flags.
    assert_one_error_line(run_cli("convert", table_csv, out, "--resume"), "--overwrite")
    # Nor is an incomplete one that has no journal.
    store.upload_bytes(b"", f"{store.root}/cli/crashed/train-00000-of-00003.tfrecord")
    assert_one_error_line(run_cli("convert", table_csv, f"{store.root}/cli/crashed", "--resume"),
                          "nothing to resume", "--overwrite")

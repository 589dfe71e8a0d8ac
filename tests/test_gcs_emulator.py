"""The GCS emulator fixture works: gs:// paths written, read, listed and renamed via Beam."""

import multiprocessing
import os

from apache_beam.io.filesystems import FileSystems
from gcs_emulator import upload, upload_bytes


def _paths(pattern):
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def _read(uri):
    with FileSystems.open(uri) as f:
        return f.read()


def test_write_read_match_rename_delete(gcs_bucket, tmp_path):
    root = f"gs://{gcs_bucket}/t1"
    small, big = os.urandom(100 * 1024), os.urandom(20 * 1024 * 1024 + 7)  # 2 upload chunks
    local = tmp_path / "big.bin"
    local.write_bytes(big)
    upload_bytes(small, f"{root}/a/small.bin")
    upload(local, f"{root}/a/b/big.bin")
    upload_bytes(b"raw", f"{root}/c.gz")  # stored as is, not gzipped again

    assert _read(f"{root}/a/small.bin") == small
    assert _read(f"{root}/a/b/big.bin") == big
    assert _paths(f"{root}/a/*") == [f"{root}/a/small.bin"]
    assert _paths(f"{root}/a/**") == [f"{root}/a/b/big.bin", f"{root}/a/small.bin"]
    assert FileSystems.match([f"{root}/a/small.bin"])[0].metadata_list[0].size_in_bytes == 102400

    FileSystems.rename([f"{root}/a/small.bin"], [f"{root}/moved.bin"])
    assert not FileSystems.exists(f"{root}/a/small.bin")
    assert _read(f"{root}/moved.bin") == small

    FileSystems.delete([f"{root}/a/"])  # a "directory": everything under the prefix
    assert _paths(f"{root}/**") == [f"{root}/c.gz", f"{root}/moved.bin"]


def _read_len(uri):
    return len(_read(uri))


def test_forked_workers_reach_the_emulator(gcs_bucket):
    uris = [upload_bytes(bytes(i + 1), f"gs://{gcs_bucket}/t2/{i}.bin") for i in range(4)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(_read_len, uris) == [1, 2, 3, 4]

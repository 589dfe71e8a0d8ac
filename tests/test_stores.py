"""The local GCS and S3 servers work, and their latency, faults and counts do what they say."""

import json
import multiprocessing
import os
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.parametrize("store", ["gcs_store", "s3_store"], indirect=True)


@pytest.fixture
def store(request):
    return request.getfixturevalue(request.param)


def _env_fs(protocol):
    """A filesystem configured only by the environment, as the library's would be."""
    if protocol == "gs":
        import gcsfs.core

        return gcsfs.core.GCSFileSystem()
    import s3fs

    return s3fs.S3FileSystem()


def test_round_trip(store, tmp_path):
    local = tmp_path / "big.bin"
    local.write_bytes(os.urandom(3 * 2**20))
    store.upload(local, f"{store.root}/rt/a/big.bin")
    store.upload_bytes(b"small", f"{store.root}/rt/small name.txt")
    assert store.read_bytes(f"{store.root}/rt/a/big.bin") == local.read_bytes()
    assert store.read_bytes(f"{store.root}/rt/small name.txt") == b"small"
    assert store.list(f"{store.root}/rt") == [f"{store.root}/rt/a/big.bin",
                                              f"{store.root}/rt/small name.txt"]
    assert store.stats()["requests"] > 0


@pytest.mark.parametrize("ending", [b"\r", b"\n", b"\r\n", b"--", b"x"])
def test_small_objects_keep_their_last_bytes(store, ending):
    """gcsfs uploads files under 5 MB in one multipart request, which the GCS emulator
    parsed a byte short when the content ended in a carriage return (see stores.py)."""
    data = os.urandom(1000) + ending
    uri = store.upload_bytes(data, f"{store.root}/ending/{ending.hex() or 'none'}.bin")
    assert store.read_bytes(uri) == data
    with store.fs().open(uri, "wb") as f:  # gcsfs / s3fs, as tfrecorder writes
        f.write(data)
    assert store.read_bytes(uri) == data


def test_latency_keeps_concurrent_requests_in_flight_together(store):
    uri = store.upload_bytes(b"x", f"{store.root}/conc/x.bin")
    store.set_latency(0.3)
    store.reset_stats()
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda _: store.read_bytes(uri), range(8))) == [b"x"] * 8
    stats = store.wait_idle()
    assert stats["max_in_flight"] >= 8
    assert stats["in_flight"] == 0 and stats["requests"] >= 8


def test_injected_status_then_pass_through(store):
    uri = store.upload_bytes(b"ok", f"{store.root}/raw/obj.bin")
    store.fail("raw/obj.bin", 503, times=2)
    for _ in range(2):
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(store.http_url(uri))
        assert error.value.code == 503
        body = error.value.read()
        if store.kind == "gcs":
            assert json.loads(body)["error"]["code"] == 503
        else:
            assert b"<Code>SlowDown</Code>" in body
    with urllib.request.urlopen(store.http_url(uri)) as response:
        assert response.read() == b"ok"
    assert store.stats()["failed"] == 2


def test_fsspec_retries_a_read_after_503s(store):
    uri = store.upload_bytes(b"retried", f"{store.root}/retry/obj.bin")
    store.fail("retry/obj.bin", 503, times=2, method="GET")  # gcsfs sleeps 1 s, then 2 s
    assert store.read_bytes(uri) == b"retried"
    assert store.stats()["failed"] == 2


@pytest.mark.parametrize("status, error", [(404, FileNotFoundError), (403, OSError)])
def test_client_errors_are_not_retried(store, status, error):
    uri = store.upload_bytes(b"x", f"{store.root}/client/obj.bin")
    store.fail("client/obj.bin", status, method="GET")
    with pytest.raises(error):
        store.read_bytes(uri)
    assert store.stats()["failed"] == 1


def _read_len(uri):
    with _env_fs(uri.split(":")[0]).open(uri, "rb") as f:
        return len(f.read())


def test_forked_workers_reach_the_store(store):
    uris = [store.upload_bytes(bytes(i + 1), f"{store.root}/fork/{i}.bin") for i in range(3)]
    store.reset_stats()
    # An executor, not a Pool: a worker that dies is an error here, where Pool.map hangs.
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        assert list(pool.map(_read_len, uris, timeout=60)) == [1, 2, 3]
    assert store.stats()["requests"] >= 3


def test_a_fresh_subprocess_needs_only_the_environment(store, tmp_path):
    uri = store.upload_bytes(b"from env", f"{store.root}/env/obj.bin")
    code = f"import test_stores; print(test_stores._read_len({uri!r}))"
    env = store.env | {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
                       "PYTHONPATH": os.path.dirname(__file__)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "8", out.stderr


def test_clear_and_reset_stats(store):
    store.set_latency(0.01)
    store.fail("nowhere", 500)
    store.read_bytes(store.upload_bytes(b"x", f"{store.root}/stats/x.bin"))
    assert store.stats()["requests"] > 0
    store.reset_stats()
    stats = store.stats()
    assert (stats["requests"], stats["failed"], stats["log"]) == (0, 0, [])
    assert stats["latency"] == 0.01 and len(stats["rules"]) == 1  # config kept
    with store:  # clears on exit
        store.stats()
    assert store.stats()["latency"] == 0 and store.stats()["rules"] == []

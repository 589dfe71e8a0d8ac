"""`fs`: local reads, whatever the file's size says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import write_image

from tfrecorder.storage import fs


def test_a_file_is_read_whole(tmp_path):
    data = os.urandom(300_000)
    (tmp_path / "a.bin").write_bytes(data)
    assert fs.read_bytes(str(tmp_path / "a.bin")) == data
    (tmp_path / "empty").write_bytes(b"")
    assert fs.read_bytes(str(tmp_path / "empty")) == b""


def test_a_file_larger_than_its_size_says_is_read_to_its_end():
    # /proc files are regular files whose size reads 0: one read of the stated size
    # would give a byte, not the file.
    with open("/proc/self/maps", "rb") as f:
        expected_start = f.read(40)
    found = fs.read_bytes("/proc/self/maps")
    assert len(found) > 1_000 and found.startswith(expected_start)


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError, match="a FIFO, not a regular file"):
        fs.read_bytes(str(tmp_path / "pipe"))


@pytest.mark.parametrize("source, options, extra, package", [
    ("gs://bucket/images.csv", [], "gcs", "gcsfs"),
    ("s3://bucket/images.csv", [], "s3", "s3fs"),
    ("https://example.invalid/images.csv", [], "http", "aiohttp"),
    ("images.csv", ["--runner", "DirectRunner"], "beam", "apache_beam"),
])
def test_a_back_end_that_is_not_installed_names_its_extra(tmp_path, source, options, extra,
                                                          package):
    """The base install has no bucket, web or Beam back-end: a URI of one, or a runner,
    says which extra installs it, in one line. Run where the package cannot be imported
    (None in sys.modules), in a fresh interpreter: this one has them all imported."""
    write_image(tmp_path / "a.png", fmt="PNG")
    (tmp_path / "images.csv").write_text("TRAIN,a.png,cat\nTRAIN,a.png,dog\n")
    command = ["convert", source if "://" in source else str(tmp_path / source),
               str(tmp_path / "out"), *options]
    script = (f"import sys; sys.modules[{package!r}] = None\n"
              "from tfrecorder import cli\n"
              f"sys.exit(cli.main({command!r}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"pip install 'tfrecorder[{extra}]' (or {package.replace('_', '-')})" \
        in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("uri, env, expected", [
    ("gs://b/a.jpg", {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"},
     ("http://127.0.0.1:9", "STORAGE_EMULATOR_HOST")),
    ("gs://b/a.jpg", {"GOOGLE_CLOUD_UNIVERSE_DOMAIN": "example.invalid"},
     ("https://storage.example.invalid", "GOOGLE_CLOUD_UNIVERSE_DOMAIN")),
    ("s3://b/a.jpg", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
     ("http://127.0.0.1:9", "AWS_ENDPOINT_URL")),
    # botocore goes through the proxy the environment names; the probe goes there too.
    ("s3://b/a.jpg", {"AWS_ENDPOINT_URL": "https://s3.example.invalid",
                      "HTTPS_PROXY": "http://proxy.example.invalid:3128"},
     ("http://proxy.example.invalid:3128", "HTTPS_PROXY")),
    ("s3://b/a.jpg", {"AWS_ENDPOINT_URL": "https://s3.example.invalid",
                      "HTTPS_PROXY": "http://proxy.example.invalid:3128",
                      "NO_PROXY": "example.invalid"},
     ("https://s3.example.invalid", "AWS_ENDPOINT_URL")),
    ("https://host.example.invalid/t.csv", {}, ("https://host.example.invalid", None)),
    ("memory://t.csv", {}, (None, None)),
], ids=["emulator", "universe", "s3-endpoint", "s3-proxy", "s3-no-proxy", "web", "other"])
def test_the_probed_endpoint_is_the_clients(monkeypatch, tmp_path, uri, env, expected):
    """The server a store's client would talk to, and the variable that chose it, learned
    without credentials (the probe runs before any are looked up)."""
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_UNIVERSE_DOMAIN", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "HTTPS_PROXY", "https_proxy",
                 "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))  # a developer's: none
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert fs._endpoint(uri) == expected

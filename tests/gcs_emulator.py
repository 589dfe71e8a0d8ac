"""A real GCS emulator (gcp-storage-emulator) for tests that use `gs://` paths through Beam.

Use the session fixture `gcs_bucket` (import it into a test module or conftest); it yields
a bucket name, and `upload` / `upload_bytes` put data there through Beam's `FileSystems`.

Why each step:
- The emulator runs as a *subprocess*, not a thread of the test process: the library forks
  worker pools, and a fork should not copy a live server thread; the subprocess also keeps the
  single-threaded HTTP server off the test process's GIL. It binds 127.0.0.1 only, keeps data
  in memory and creates the bucket itself (`default_bucket`).
- The port is picked by binding port 0 and closing it; another process could take it before
  the emulator binds it, so a failed start is retried on a new port.
- `STORAGE_EMULATOR_HOST` makes google-cloud-storage talk to the emulator. Beam builds a new
  client for every `FileSystems` call, so no client is cached with the old endpoint.
- Beam asks `google.auth.default()` for credentials once per process and caches the answer.
  Without credentials that call probes the GCE metadata server (169.254.169.254) and retries
  with backoff for about 20 s. With real credentials on a developer's machine, the client
  would try to refresh a token from Google. `use_anonymous_gcs_credentials()` fills that
  cache with "none", so Beam uses an anonymous client (a private Beam detail, checked on
  Beam 2.77). Forked workers inherit the cache. Spawned workers do not: they must call it in
  their pool initializer, or they wait about 20 s before going anonymous.
- `NO_GCE_CHECK=true`, an empty `CLOUDSDK_CONFIG` and no `GOOGLE_APPLICATION_CREDENTIALS`
  keep any child process that skips that call from finding real credentials or the metadata
  server. It then only pays the delay and never touches the network.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

BUCKET = "test-bucket"


def use_anonymous_gcs_credentials():
    """Make Beam's GCS client anonymous in this process. Returns the old cache state."""
    from apache_beam.internal.gcp import auth

    old = (auth._Credentials._credentials_init, auth._Credentials._credentials)
    auth._Credentials._credentials_init, auth._Credentials._credentials = True, None
    return old


# Run in a child Python; it serves until its stdin closes, which also happens when the test
# process dies without cleaning up, so no emulator outlives its test run.
_SERVE = """
import sys
from gcp_storage_emulator.server import create_server
server = create_server("127.0.0.1", int(sys.argv[1]), in_memory=True, default_bucket=sys.argv[2])
server.start()
sys.stdin.read()
server.stop()
"""


def _start_emulator(bucket, attempts=3):
    for _ in range(attempts):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(port), bucket],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:  # The emulator answers GET / with "OK" once it is listening.
                with urllib.request.urlopen(url + "/", timeout=1) as response:
                    if response.read() == b"OK":
                        return proc, url
            except OSError:
                time.sleep(0.02)
        _stop(proc)
    raise RuntimeError("could not start gcp-storage-emulator")


def _stop(proc):
    proc.stdin.close()
    proc.terminate()  # Forked workers still alive hold the pipe open: don't wait for EOF.
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def gcs_bucket():
    """Start the emulator for this session and yield the name of an empty bucket in it."""
    proc, url = _start_emulator(BUCKET)
    cloudsdk_config = tempfile.TemporaryDirectory()
    env = {"STORAGE_EMULATOR_HOST": url, "NO_GCE_CHECK": "true",
           "CLOUDSDK_CONFIG": cloudsdk_config.name, "GOOGLE_APPLICATION_CREDENTIALS": None}
    saved_env = {name: os.environ.get(name) for name in env}
    for name, value in env.items():
        _set_env(name, value)
    saved_credentials = use_anonymous_gcs_credentials()
    try:
        yield BUCKET
    finally:
        from apache_beam.internal.gcp import auth

        auth._Credentials._credentials_init, auth._Credentials._credentials = saved_credentials
        for name, value in saved_env.items():
            _set_env(name, value)
        _stop(proc)
        cloudsdk_config.cleanup()


def _set_env(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def upload_bytes(data, gs_uri):
    """Write `data` to `gs_uri` through Beam's FileSystems, stored as is (a `.gz` name is
    not compressed again, which `FileSystems.create`'s default would do)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(gs_uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)
    return gs_uri


def upload(local_path, gs_uri):
    """Copy a local file to `gs_uri`."""
    with open(local_path, "rb") as f:
        return upload_bytes(f.read(), gs_uri)

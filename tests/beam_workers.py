"""Beam's portable runner with its workers in processes of their own, as on Dataflow,
Flink or Spark: an embedded job service, and an EXTERNAL worker pool
(`worker_pool_main`) started here, whose SDK harnesses run as separate `python`
processes (this environment's: its folder goes first on their PATH). Each function the
job runs is pickled to them, so a test on this runner proves what LOOPBACK (the harness
in the launcher's process) cannot.

`external_workers` is a session fixture (each xdist worker starts its own pool); the
options it yields go to `convert(..., **options)`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(port: int, seconds: float = 30) -> None:
    """Until a server listens on `port`."""
    deadline = time.monotonic() + seconds
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert time.monotonic() < deadline, f"nothing listens on port {port}"
        time.sleep(0.1)


def serve(*args: str) -> subprocess.Popen:
    """A Beam service in a process of its own; its workers start as `python`, which must
    be this environment's."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PATH": path})


def stop(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGKILL)  # the pool and the harnesses it started
    server.wait()


@pytest.fixture(scope="session")
def external_workers() -> dict:
    """`convert`'s options for the PortableRunner on an EXTERNAL worker pool."""
    port = free_port()
    pool = serve("apache_beam.runners.worker.worker_pool_main", f"--service_port={port}")
    try:
        wait_for(port)
        yield {"runner": "PortableRunner",
               "beam_options": {"job_endpoint": "embed", "environment_type": "EXTERNAL",
                                "environment_config": f"localhost:{port}"}}
    finally:
        stop(pool)

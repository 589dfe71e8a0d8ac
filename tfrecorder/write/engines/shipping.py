"""Ships tfrecorder's code to a Beam runner's workers, so nobody builds a wheel by hand.

Remote workers unpickle the pipeline's functions by importing `tfrecorder`, so the
package has to be installed there. Beam stages any wheel listed in `extra_packages` and
pip-installs it, with its dependencies, on every worker. The wheel built here is the
package as this process imports it (an editable checkout included), and it declares only
what workers need: no extra but the stores' (gcs, s3), so not TensorFlow (the `tf`
extra, hundreds of MB that no worker imports), not Beam (the worker's own Beam must stay
the one its container was built with), and not protobuf, which only the driver uses (it
reads label maps) and which pip would otherwise move under the container's Beam.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import logging
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import tfrecorder

logger = logging.getLogger(__name__)

# Runners whose workers run in this Python process or a fork of it: nothing to ship.
_IN_PROCESS_RUNNERS = {"DirectRunner", "InteractiveRunner", "BundleBasedDirectRunner",
                       "SwitchingDirectRunner"}
# Options through which the user already ships the code (or a container that has it).
_USER_SHIPS_CODE = ("setup_file", "sdk_container_image")
# Needed by the driver only. TensorFlow is an extra (dropped with the others), but an
# install made while it was a dependency still lists it in its metadata.
_DRIVER_ONLY = {"tensorflow", "apache-beam", "tqdm", "protobuf"}


def needs_package(runner: str, beam_options: Mapping) -> bool:
    """Whether the runner's workers must be sent tfrecorder's code by us: not when they
    run in this process, nor when the user ships it (a tfrecorder package among
    `extra_packages`, a `setup_file`, or a container image that has it)."""
    if runner in _IN_PROCESS_RUNNERS or beam_options.get("environment_type") == "LOOPBACK":
        return False
    if any(beam_options.get(name) for name in _USER_SHIPS_CODE):
        return False
    return not any(Path(package).name.startswith(("tfrecorder-", "tfrecorder_"))
                   for package in beam_options.get("extra_packages") or [])


def build_worker_wheel(directory: str | Path) -> Path:
    """Writes `tfrecorder-<version>-py3-none-any.whl` into `directory` and returns its path.

    Raises:
        RuntimeError: when this tfrecorder is not installed from files (it then cannot be
            shipped; build a wheel and pass it as `tfrecorder_wheel`).
    """
    package = Path(tfrecorder.__file__).parent
    try:
        version = importlib.metadata.version("tfrecorder")
        requirements = importlib.metadata.requires("tfrecorder") or []
    except importlib.metadata.PackageNotFoundError:
        requirements = None
    if requirements is None or not (package / "__init__.py").is_file():
        raise RuntimeError(
            "cannot build tfrecorder's package for the Beam workers: tfrecorder is not "
            "installed from files. Install it with pip (`pip install -e .` in a checkout), "
            "or build a wheel yourself and pass tfrecorder_wheel='path/to.whl'.")
    dist_info = f"tfrecorder-{version}.dist-info"
    files = {f"tfrecorder/{path.relative_to(package).as_posix()}": path.read_bytes()
             for path in sorted(package.rglob("*.py"))}
    files[f"{dist_info}/METADATA"] = _metadata(version, requirements).encode()
    files[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: tfrecorder\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = "".join(f"{name},sha256={_digest(data)},{len(data)}\n"
                     for name, data in files.items()) + f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    wheel = Path(directory) / f"tfrecorder-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    logger.info("staging %s for the Beam workers", wheel.name)
    return wheel


def _metadata(version: str, requirements: list[str]) -> str:
    """Core metadata whose Requires-Dist keeps only what workers import."""
    # Workers read and write buckets: the gcs and s3 extras' back-ends come along.
    requirements = [r.split(";")[0].strip() if re.search(r"extra == .(gcs|s3).", r) else r
                    for r in requirements]
    kept = [r for r in requirements if "extra ==" not in r
            and re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() not in _DRIVER_ONLY]
    return "".join([
        "Metadata-Version: 2.1\nName: tfrecorder\n",
        f"Version: {version}\n",
        "Summary: tfrecorder's worker-side package, built for a Beam job\n",
        *(f"Requires-Dist: {r}\n" for r in kept),
    ])


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

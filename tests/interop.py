"""Third-party readers for interop tests, each installed into a folder of its own.

The records tfrecorder writes are meant to be read by other people's code; the tests that
prove it need that code, but it must not enter the project's environment: TensorFlow Model
Garden, for one, declares `tensorflow~=2.20` and a tail of OpenCV, gin, scipy and
pycocotools that the reading code never touches. So each reader is a pinned wheel installed
with `pip install --target DIR --no-deps --require-hashes` into
`<repo>/.venv/interop/<name>-<version>` (git-ignored with `.venv/`; `TFRECORDER_INTEROP_DIR`
moves it), once; later runs find the marker file and reuse the folder.

`interop_path(name)` returns that folder, for a loader to put on `sys.path` for as long as it
imports (see tests/model_garden.py, which also takes it off again). Installing is safe when
several pytest processes race: they queue on a lock file, and a folder is only ever published
whole, by renaming a finished temporary folder. If the package index cannot be reached, and
the folder is not there yet, the calling test is skipped with the reason; any other failure
of the install fails the test with pip's output. `TFRECORDER_SKIP_READERS=1` skips every
test that needs a reader, without installing any.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

# name -> (version, sha256 of the wheel installed). Bump both together.
PINS: dict[str, tuple[str, str]] = {
    # The newest release (2.20.0, of 2026-02). It declares tensorflow~=2.20.0, which
    # --no-deps ignores: its vision data loaders run unchanged on TensorFlow 2.21.
    "tf-models-official": (
        "2.20.0", "0bf173f9ea83e1a83f983b35fe515e9d9bfd294b27538f6e8806afeb5a069150"),
    # Model Garden's modules all start with `import tensorflow as tf, tf_keras`; tf-keras
    # 2.21 is the release made for TensorFlow 2.21 (it requires tensorflow>=2.21,<2.22).
    "tf-keras": ("2.21.0", "f858bf3d97f892304e7fbcf5eb0942ed91674e27204f940a85de8c93cf07fe62"),
    # COCO's own mask tools (polygons and RLE), for Python 3.11 on manylinux x86_64: the
    # platform constraints.txt is locked for.
    "pycocotools": (
        "2.0.11", "18ba75ff58cedb33a85ce2c18f1452f1fe20c9dd59925eec5300b2bf6205dbe1"),
    # Readers of issue 30 ("read anywhere"). torch is the CPU build that lies on this kind
    # of machine for pip (its `+cpu` wheel: PyPI's own is a CUDA build of gigabytes).
    "torch": ("2.13.0", "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"),
    # The PyTorch loader of TFRecords on PyPI (`tfrecord.torch.TFRecordDataset`).
    "tfrecord": ("1.14.4", "a7cb86b68fba9cffa21c52e3752341877e310998c3f04191cd88f5f9c9700e1a"),
    "tensorflow-datasets": (
        "4.9.10", "7ec065f0a628e28152b487ba9cbe72fa36d3854705d9f3abd04c6cf5d7a91527"),
    "grain": ("0.2.18", "08a80a029f8b9c84af9424540d91cf8e4e91fe092e0fb7e0bb460dcf0042f659"),
    # NVIDIA DALI, run on the CPU (424 MB: installed once per machine).
    "nvidia-dali-cuda120": (
        "2.4.0", "8be1bf9137cf4e3a62b51db5de818226ef6c81ec17791672d06ed5351d6e8eb1"),
    "ray": ("2.60.0", "e227f6b2af8ab4626dd9a35a5860b33864325ea137383d57f854d4637ee3fea2"),
    # The Object Detection API's research code as a wheel (a 2019 build of tensorflow/models'
    # research/object_detection): create_pascal_tf_record.py, the reference Pascal VOC
    # converter (tests/object_detection_api.py).
    "object-detection": (
        "0.0.3", "a487aa0eada8105a9bb026b0993f251f6e0b8b0ae8fb69c2de3381394aa49b9c"),
    # Labeling tools and dataset libraries whose exports tests/test_labeling_tools.py
    # converts (issue 48). They run in a subprocess of their own (tests/labeling_tools.py),
    # so none of their imports enters the pytest process.
    "supervision": (
        "0.31.2", "58f9b708ecf704c4f4c19b8c550b9a4d7274ca7742f57022e379247c9c782de3"),
    "globox": ("2.9.0", "40975c8aa8008814a75e961c5c7af718f22cfc1c73e2861846ec5b86c1cd360e"),
    # OpenVINO's Datumaro, for Python 3.11 on manylinux x86_64 (it holds a Rust extension).
    "datumaro": (
        "1.13.12", "cf0caaf2a33279dbf4dc57d452c778bfd9bab3ae1ae6f8aea7aa709cde61c2cd"),
    # MediaPipe's MediaSequence getters and setters (mediapipe/util/sequence), which
    # define the video and audio record keys (issue 49). 0.10.21 is the newest release
    # that ships them (1.x does not), for Python 3.11 on manylinux x86_64; only those two
    # pure-Python modules are loaded (tests/mediapipe_sequence.py).
    "mediapipe": (
        "0.10.21", "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3"),
}

# name -> the wheels a reader imports beside it that the project's environment lacks, as
# (distribution, version, sha256), installed into the same folder with it.
ALSO: dict[str, tuple[tuple[str, str, str], ...]] = {
    # Grain imports etils (epath, epy), cloudpickle, array_record and portpicker at once;
    # absl-py, numpy, protobuf and fsspec it finds in the project's environment.
    "grain": (
        ("etils", "1.15.0", "b9e7f3d7ab980c564245cd54e2b928e6abcb0521d6042ad3fdb13eea725309f0"),
        ("cloudpickle", "3.1.2",
         "9acb47f6afd73f60dc1df93bb801b472f05ff42fa6c84167d25cb206be1fbf4a"),
        ("array-record", "0.8.6",
         "b1889a6c1bb139d0cccdb0ad4bd2b1a44e894b4eb561ceec0ea8f6e2ff6c94ec"),
        ("portpicker", "1.6.0",
         "b2787a41404cf7edbe29b07b9e0ed863b09f2665dcc01c1eb0c2261c1e7d0755"),
    ),
    # The tfrecord package's writer imports crc32c (its reader, through the package's
    # __init__, too). Its example_pb2 was generated for protobuf 3 and cannot read a
    # record with protobuf 6 (benchmarks/bench_read.py says how it is run instead).
    "tfrecord": (
        ("crc32c", "2.9.post0",
         "bece7e666065dd5e5c5f36886b4d8f765216e6c043b346e772e2e94aa701bd5c"),
    ),
    # DALI's image decoders are nvImageCodec's (its CPU ones: libjpeg-turbo, OpenCV). Its
    # `[all]` extra brings the CUDA codecs (nvJPEG, nvJPEG2000, nvTIFF), left out: there is
    # no GPU to run them (DALI logs that it could not load them); nor are nvcomp, nvtx,
    # makefun and libcst, which DALI declares and reading TFRecords on the CPU never imports.
    "nvidia-dali-cuda120": (
        ("nvidia-nvimgcodec-cu12", "0.9.0.20",
         "00627d63501ff83a7578683f784f03d07c6b69a1db6017fdabfacb0fc1c4cb8a"),
    ),
    # Ray's core imports msgpack; read_tfrecords' `tf_schema` is a TensorFlow Metadata
    # Schema (click, filelock, jsonschema, packaging, protobuf, pyyaml, requests, pandas,
    # pyarrow and fsspec come from the project's environment).
    "ray": (
        ("msgpack", "1.2.4", "a45ceb5f199d5e388f28b550ba881096a3740d4bda10e661d77f59d9a2e8187a"),
        ("tensorflow-metadata", "1.21.0",
         "0520806bf3bdd9157333203a3aa0e8afde2a97cc619f15ba622603dc6c898d1f"),
    ),
    # create_pascal_tf_record.py imports lxml (its script parses the XML files with it), for
    # Python 3.11 on manylinux x86_64.
    "object-detection": (
        ("lxml", "6.1.3", "527195c188d7d0af748cd48d220ab8cdc5cb99be3d49ac4d9be7324d8abf9bc0"),
    ),
    # What `import tensorflow_datasets` and reading a folder with it import that the project
    # lacks (TensorFlow, NumPy, protobuf, absl, attrs and wrapt come from the project).
    # `promise` (its download manager's) has no wheel on PyPI: tests/test_tfds.py stands in
    # an empty module for it, as reading never downloads.
    "tensorflow-datasets": (
        ("etils", "1.15.0", "b9e7f3d7ab980c564245cd54e2b928e6abcb0521d6042ad3fdb13eea725309f0"),
        ("immutabledict", "4.3.1",
         "c9facdc0ff30fdb8e35bd16532026cac472a549e182c94fa201b51b25e4bf7bf"),
        ("toml", "0.10.2", "806143ae5bfb6a3c6e736a764057db0e6a0e05e338b5630894a5f779cabb4f9b"),
        ("psutil", "7.2.2", "076a2d2f923fd4821644f5ba89f059523da90dc9014e85f8e45a5774ca5bc6f9"),
        ("dm-tree", "0.1.10", "f0e8907bb6809dc195be3af077e382126eaebe06c00f835d09ae26e36d2165ff"),
        ("tensorflow-metadata", "1.21.0",
         "0520806bf3bdd9157333203a3aa0e8afde2a97cc619f15ba622603dc6c898d1f"),
    ),
    # `import supervision` imports OpenCV, scipy, pydeprecate (`deprecate`) and defusedxml
    # at once; NumPy, Pillow, PyYAML, requests and tqdm come from the project's environment.
    # matplotlib and av (PyAV), which it declares, only its plotting and video helpers
    # import, which its dataset exporters never call. OpenCV 4.14 and scipy 1.17 are built
    # for NumPy 2 and accept the project's 2.4.
    "supervision": (
        ("opencv-python-headless", "4.14.0.94",
         "5e02669eac0ba67b2a22d7245af1e8ee1a2ef1185ee526a063d8f0555224bd52"),
        ("scipy", "1.17.1", "43af8d1f3bea642559019edfe64e9b11192a8978efbd1539d7bc2aaa23d92de4"),
        ("pydeprecate", "0.13.0",
         "b9210b5e36ea38a3c89aaa9579507ef676bfd147ad89184a06e1fd252f34d36c"),
        ("defusedxml", "0.7.1",
         "a352e7e428770286cc899e2542b6cdaedb2b4953ff269a210103ec58f6198a61"),
    ),
    # globox needs only NumPy, rich and tqdm, all in the project's environment.
    # What `import datumaro` and its COCO, VOC and YOLO exporters import that the project
    # lacks (NumPy, pandas, pyarrow, Pillow, PyYAML, attrs, orjson, tqdm and
    # typing_extensions come from it; pycocotools from its own pinned folder, which
    # tests/labeling_tools.py puts on the path beside this one). json-stream reads through
    # its Rust tokenizer; cachetools 7 is what datumaro declares (the project has 6); lxml is
    # the release the object-detection pin holds.
    "datumaro": (
        ("opencv-python-headless", "4.14.0.94",
         "5e02669eac0ba67b2a22d7245af1e8ee1a2ef1185ee526a063d8f0555224bd52"),
        ("shapely", "2.2.0", "5d61088e2ef71dafad0dd4fae8a521cc1f20da4a89d3096bab5b3260b39b3052"),
        ("lxml", "6.1.3", "527195c188d7d0af748cd48d220ab8cdc5cb99be3d49ac4d9be7324d8abf9bc0"),
        ("imagesize", "2.0.1",
         "ea0c9a0384df69ed86a943a15cde37d0360b82491b3910dc2215e202e62b5b02"),
        ("json-stream", "2.5.1",
         "ff74a31fc4af348bc7b17e1e92d5d4abd79b1aedca93b141138ed9429ef8d0c2"),
        ("json-stream-rs-tokenizer", "0.5.4",
         "1b9d831890fea365bf78a341e7743bc0b3f6a157a128d5fc3832c39ac0ef05e6"),
        ("cachetools", "7.3.3",
         "32305addec0581cae6d4f7952d01d078dbc521f922650eba395b9d25b7481843"),
        ("ruamel.yaml", "0.19.1",
         "27592957fedf6e0b62f281e96effd28043345e0e66001f97683aa9a40c667c93"),
        ("defusedxml", "0.7.1",
         "a352e7e428770286cc899e2542b6cdaedb2b4953ff269a210103ec58f6198a61"),
    ),
}

MARKER = "INTEROP-INSTALLED.json"
_REPO = Path(__file__).resolve().parents[1]
_unreachable: dict[str, str] = {}  # index probed unreachable in this process: skip at once


def interop_root() -> Path:
    return Path(os.environ.get("TFRECORDER_INTEROP_DIR") or _REPO / ".venv" / "interop")


SKIP_VARIABLE = "TFRECORDER_SKIP_READERS"


def interop_path(name: str) -> Path:
    """The folder holding the pinned `name`, installed on first use (see the module doc);
    with `TFRECORDER_SKIP_READERS=1`, the calling test is skipped instead (the readers
    take about 2.5 GB)."""
    if os.environ.get(SKIP_VARIABLE, "") not in ("", "0"):
        pytest.skip(f"third-party readers are skipped ({SKIP_VARIABLE} is set)")
    version, sha256 = PINS[name]
    root = interop_root()
    dest = root / f"{name}-{version}"
    if _installed(dest, name):
        return dest
    if "index" in _unreachable:
        pytest.skip(_unreachable["index"])
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{name}-{version}.lock") as exclusive:
        if _installed(dest, name):  # another process finished while we waited
            return dest
        if exclusive:  # only the lock's holder makes temporary folders: these are leftovers
            for stale in root.glob(f".{name}-{version}-*"):
                shutil.rmtree(stale, ignore_errors=True)
        unreachable = _index_unreachable(name)
        if unreachable:
            _unreachable["index"] = (f"{name}=={version} is not installed in {root} and the "
                                     f"package index cannot be reached: {unreachable}")
            pytest.skip(_unreachable["index"])
        _install(name, version, sha256, root, dest)
    return dest


def installed_seconds(name: str) -> float | None:
    """How long the install of `name` took, from its marker (None if not installed)."""
    version, _ = PINS[name]
    marker = interop_root() / f"{name}-{version}" / MARKER
    try:
        return json.loads(marker.read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return None


def _installed(dest: Path, name: str) -> bool:
    version, sha256 = PINS[name]
    try:
        marker = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (marker.get("version") == version and marker.get("sha256") == sha256
            and marker.get("also", []) == _also_lines(name))


def _also_lines(name: str) -> list[str]:
    return [f"{dist}=={version} --hash=sha256:{sha256}"
            for dist, version, sha256 in ALSO.get(name, ())]


def _install(name: str, version: str, sha256: str, root: Path, dest: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-{version}-", dir=root))
    try:
        requirements = tmp / "requirements.txt"
        requirements.write_text("".join(
            f"{line}\n" for line in [f"{name}=={version} --hash=sha256:{sha256}",
                                      *_also_lines(name)]))
        target = tmp / "site"
        cmd = [sys.executable, "-m", "pip", "install", "--target", str(target), "--no-deps",
               "--only-binary=:all:", "--require-hashes", "--no-input",
               "--disable-pip-version-check", "--no-warn-script-location",
               "-r", str(requirements)]
        started = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True)
        seconds = round(time.monotonic() - started, 1)
        if run.returncode:
            raise RuntimeError(f"installing {name}=={version} for the interop tests failed "
                               f"(exit {run.returncode}): {' '.join(cmd)}\n"
                               f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        (target / MARKER).write_text(json.dumps(
            {"name": name, "version": version, "sha256": sha256, "also": _also_lines(name),
             "seconds": seconds,
             "python": sys.version.split()[0], "installed": time.strftime("%Y-%m-%dT%H:%M:%S")},
            indent=1) + "\n")
        if dest.exists():  # a folder without a valid marker: left by hand, or an old pin
            shutil.rmtree(dest)
        target.rename(dest)  # atomic: a reader sees no folder or a whole one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _index_url() -> str:
    """The index pip is configured with (environment, then its config files), else PyPI's."""
    run = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                         capture_output=True, text=True)
    settings = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    for key in (":env:.index-url", "install.index-url", "global.index-url"):
        if key in settings:
            return settings[key].strip("'\"").split()[0]
    return "https://pypi.org/simple"


def _index_unreachable(name: str) -> str | None:
    """Why the package index pip would use cannot be reached, or None if it answered."""
    parts = urllib.parse.urlsplit(f"{_index_url().rstrip('/')}/{name}/")
    # Without credentials: reached, it answers 401, which is an answer; nor are they shown.
    url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=20):
            return None
    except urllib.error.HTTPError:
        return None  # it answered; let pip report what is wrong
    except urllib.error.URLError as e:
        # A TLS failure means the host was reached; pip has its own certificate settings.
        if "CERTIFICATE" in str(e.reason).upper():
            return None
        return f"{url}: {e.reason}"
    except OSError as e:  # timeouts, resets
        return f"{url}: {e!r}"


@contextlib.contextmanager
def _locked(path: Path):
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the atomic rename alone keeps folders whole
        yield False
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)

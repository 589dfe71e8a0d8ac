import os
import shutil
import signal
import sys
import tempfile

import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Run in the background by a non-interactive shell (a CI script, `nohup ... &`), the tests
# inherit SIGINT ignored, and so would every conversion they start: the tests that press
# Ctrl-C on one would wait for it forever. A handler here is reset to the default in each
# child, where Python turns SIGINT into KeyboardInterrupt again.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, os.path.dirname(__file__))

from beam_workers import external_workers  # noqa: E402, F401  (a fixture, as below)
from gcs_emulator import gcs_bucket  # noqa: E402, F401  (a fixture for every test module)
from helpers import write_image  # noqa: E402
from stores import clean_stores, gcs_store, s3_store, web_store  # noqa: E402, F401  (fixtures)

LABELS = ["cat", "dog", "bird"]


@pytest.fixture(autouse=True)
def temporary_folders_in_tmp_path(tmp_path, monkeypatch):
    """What a test and the processes it starts make with `tempfile` (inspect's default
    folder, spools, the staging folders of Beam's runners) goes in its `tmp_path`, which
    pytest removes, not in /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))


@pytest.fixture
def short_temporary_folder(temporary_folders_in_tmp_path, monkeypatch):
    """`tempfile`'s folder, for this test and the processes it starts, a short one in /tmp
    (removed afterwards) rather than its `tmp_path`: for processes that open Unix sockets
    there, as multiprocessing does (in `pymp-*/listener-*`) when PyTorch's DataLoader
    workers hand their tensors over. A socket's path holds at most 107 bytes, which a
    long `--basetemp` or test name took: the workers failed ("AF_UNIX path too long") and
    the loader waited for them forever. (Chromium's and Ray's sockets go in short folders
    too: test_report.py, test_readers.py.)"""
    folder = tempfile.mkdtemp(prefix="short-", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", folder)
    monkeypatch.setenv("TMPDIR", folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def tensorflow_global_seed_unset():
    """Each test starts with TensorFlow's global seed unset: a seeded op's stream (load's
    `seed=` among them) depends on it too, and readers under test set it (Model Garden's
    `set_random_seeds`), so a test's draws would depend on the tests run before it."""
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].random.set_seed(None)


@pytest.fixture
def image_table(tmp_path) -> pd.DataFrame:
    """24 JPEG/PNG images of several sizes and modes, in an AutoML-style table."""
    rows = []
    for i in range(24):
        mode = ["RGB", "L", "RGB", "RGBA"][i % 4]
        fmt = "PNG" if mode == "RGBA" or i % 5 == 0 else "JPEG"
        path = tmp_path / "images" / f"img_{i:02d}.{fmt.lower()}"
        write_image(path, size=(30 + i, 20 + 2 * i), mode=mode, fmt=fmt, seed=i)
        split = ["TRAIN", "TRAIN", "VALIDATION", "TEST", "UNASSIGNED", "train"][i % 6]
        rows.append((split, str(path), LABELS[i % 3]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])

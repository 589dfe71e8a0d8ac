"""TensorFlow imported by tfrecorder (`tfrecorder/_tensorflow.py`): quietly, unless the
user set TF_CPP_MIN_LOG_LEVEL. Each case runs in a fresh interpreter, as TensorFlow is
imported once a process."""

import os
import subprocess
import sys

import pandas as pd
import pytest

import tfrecorder

NOISE = ("absl::InitializeLog", "oneDNN", "cudart_stub", "cuInit", "cpu_feature_guard")

LOAD = """
import sys, tfrecorder
print(len(list(tfrecorder.load(sys.argv[1], "train"))))
"""


def run(code: str, *args, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter, with TF_CPP_MIN_LOG_LEVEL only if given."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={**environment, **env})
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("quiet") / "out"
    tfrecorder.convert(pd.DataFrame({"x": [1.0, 2.0, 3.0], "split": ["train"] * 3}), out,
                       progress=False)
    return out


def test_load_keeps_tensorflows_start_up_lines_quiet(dataset):
    done = run(LOAD, dataset)
    assert done.stdout == "3\n"
    assert not [word for word in NOISE if word in done.stderr], done.stderr


def test_a_log_level_the_user_set_shows_them_again(dataset):
    done = run(LOAD, dataset, TF_CPP_MIN_LOG_LEVEL="0")
    assert done.stdout == "3\n"
    assert [word for word in NOISE if word in done.stderr], done.stderr


HELD_BACK = """
import os
from tfrecorder import _tensorflow
with _tensorflow._start_up_noise_held_back():
    os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are "
                b"written to STDERR\\n")
    os.write(2, b"I0000 00:00:1795691868.989134    4912 port.cc:153] oneDNN custom\\n")
    os.write(2, b"W0000 00:00:1795691868.991170    4912 cudart_stub.cc:31] no GPU\\n")
    os.write(2, b"a line of the user's\\n")
    os.write(2, b"E0000 00:00:1795691875.319793    4912 cuda_platform.cc:52] an error\\n")
print("done")
"""


def test_only_the_start_up_noise_is_held_back():
    done = run(HELD_BACK)
    assert done.stdout == "done\n"
    assert done.stderr == ("a line of the user's\n"
                           "E0000 00:00:1795691875.319793    4912 cuda_platform.cc:52] an "
                           "error\n")

"""TensorFlow imported by tfrecorder (`tfrecorder/_tensorflow.py`): quietly, unless the
user set TF_CPP_MIN_LOG_LEVEL. Each case runs in a fresh interpreter, as TensorFlow is
imported once a process. Where it is not installed, an error names the `tf` extra
(tests/test_without_tensorflow.py runs the package without it)."""

import os
import pickle
import subprocess
import sys

import pandas as pd
import pytest

import tfrecorder
from tfrecorder import _tensorflow
from tfrecorder.errors import MissingExtraError

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


def test_a_missing_tensorflow_is_an_import_error_naming_the_tf_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if it were not installed
    with pytest.raises(MissingExtraError) as caught:
        _tensorflow.check_installed("tfrecorder.load()", "open_split() reads them without it.")
    error = caught.value
    assert isinstance(error, ImportError) and (error.extra, error.name) == ("tf", "tensorflow")
    assert str(error) == ("tfrecorder.load() reads records with TensorFlow, which is not "
                          "installed: pip install 'tfrecorder[tf]' (or tensorflow). "
                          "open_split() reads them without it.")
    again = pickle.loads(pickle.dumps(error))  # as it comes back from a worker
    assert (str(again), again.extra, again.name) == (str(error), "tf", "tensorflow")
    with pytest.raises(MissingExtraError, match=r"^tfrecorder reads records with TensorFlow, "
                                                r"which is not installed: pip install "):
        _tensorflow.tensorflow()  # a function that did not check first


class _BrokenTensorFlow:
    """An installed TensorFlow that fails to import: a module of its own is missing."""

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            raise ModuleNotFoundError("No module named 'tensorflow.python._pywrap'",
                                      name="tensorflow.python._pywrap")


def test_a_broken_tensorflow_raises_its_own_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenTensorFlow(), *sys.meta_path])
    with pytest.raises(ModuleNotFoundError, match="_pywrap") as caught:
        _tensorflow.tensorflow()
    assert not isinstance(caught.value, MissingExtraError)

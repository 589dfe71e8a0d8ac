"""TensorFlow, as tfrecorder imports it: the one place, lazily and quietly.

Importing TensorFlow writes lines of its C++ runtime to stderr (oneDNN, no CUDA drivers,
cuInit failing on a machine without a GPU): seven lines between the progress bars of
`inspect` and `load`. Every function of tfrecorder that needs TensorFlow takes
it from `tensorflow()`, which, when tfrecorder is the first to import it and the user
has not set `TF_CPP_MIN_LOG_LEVEL`, sets that to 3 (the runtime's errors reach the user
as Python exceptions anyway) and holds back the lines the runtime writes before its
logging is set up, which ignore that level (absl's "All log messages before
absl::InitializeLog() ..." and its info and warning lines); anything else written
meanwhile is written back. Setting `TF_CPP_MIN_LOG_LEVEL` yourself (0 shows everything)
keeps every line, as TensorFlow prints it.

TensorFlow is an extra (`tfrecorder[tf]`): converting, `open_split`, `info`, `show`,
`report` and `verify` never import it. Where it is not installed,
`tensorflow()` raises `MissingExtraError`, an ImportError that names the extra to
install; the public functions that read records with TensorFlow call `check_installed`
first, before they read or write a file, so that the error names them too and what does
the same without TensorFlow. That check only finds TensorFlow; the function imports it
where it did (it takes seconds), after its arguments and files have been checked.

Standard library only (and `errors`, which is too): importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType

from tfrecorder.errors import MissingExtraError

LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
_QUIET = "3"  # errors too: only fatal lines
# What the runtime writes before its logging is set up, whatever the level: absl's notice
# and its info (I) and warning (W) lines, `I0000 00:00:1795.1 4912 port.cc:153] ...`.
_START_UP_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] ")


def tensorflow() -> ModuleType:
    """The `tensorflow` module, imported quietly the first time (see the module's
    docstring); as it is when the user imported it or set `TF_CPP_MIN_LOG_LEVEL`.

    Raises:
        MissingExtraError: TensorFlow is not installed. An installed TensorFlow that
            fails to import (a library of its own missing) raises its own error.
    """
    module = sys.modules.get("tensorflow")
    if module is not None:
        return module
    try:
        if LOG_LEVEL in os.environ:  # the user chose what to see
            import tensorflow

            return tensorflow
        os.environ[LOG_LEVEL] = _QUIET  # read again by the runtime after import (cuInit)
        with _start_up_noise_held_back():
            import tensorflow
        return tensorflow
    except ModuleNotFoundError as error:
        if error.name != "tensorflow":
            raise
        raise _missing() from None


def check_installed(needed_by: str, instead: str | None = None) -> None:
    """Raises MissingExtraError when TensorFlow is not installed, without importing it.

    Args:
        needed_by: the public function that asks (`"tfrecorder.load()"`).
        instead: what does the same without TensorFlow (a sentence), if anything does.
    """
    if sys.modules.get("tensorflow") is not None:
        return
    try:
        found = importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):  # None in sys.modules: blocked on purpose
        found = False
    if not found:
        raise _missing(needed_by, instead)


def _missing(needed_by: str | None = None, instead: str | None = None) -> MissingExtraError:
    """The error for a TensorFlow that is not installed: what needs it, what to install,
    and what does without it."""
    return MissingExtraError(
        f"{needed_by or 'tfrecorder'} reads records with TensorFlow, which is not "
        "installed: pip install 'tfrecorder[tf]' (or tensorflow)."
        + (f" {instead}" if instead else ""), extra="tf", package="tensorflow")


@contextlib.contextmanager
def _start_up_noise_held_back() -> Iterator[None]:
    """Sends file descriptor 2 to a temporary file meanwhile, then writes back every line
    that is not the runtime's start-up noise (a Python warning, an error)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no fd 2: nothing to hold back
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            lines = held.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not _START_UP_NOISE.match(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()

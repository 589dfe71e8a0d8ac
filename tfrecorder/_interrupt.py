"""Ctrl-C while the `tfrecorder` command starts: one line, as at any later moment.

`python -m tfrecorder` and the installed `tfrecorder` script both import this package,
and with it pandas, before the command's `main` can catch anything: a Ctrl-C in those
two seconds printed Python's traceback of the imports. The package imports its modules
inside `quiet_interrupt`, which in the command (only there: a Python session keeps its
KeyboardInterrupt) prints the command's line and exits 130, as `cli.main` does later.
Imports nothing but the standard library's lightest modules, so it is in place at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

PROG = "tfrecorder"
INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a process Ctrl-C stopped


def interrupted() -> int:
    """Says so on the command's one line; returns the exit code."""
    print(f"{PROG}: interrupted", file=sys.stderr)
    return INTERRUPTED


def is_the_command() -> bool:
    """Whether this process runs the command: `python -m tfrecorder` (whose `sys.argv[0]`
    is "-m" while the package imports) or the installed script (`.../bin/tfrecorder`;
    Windows' launchers add `.exe` or `-script.pyw`)."""
    argv = getattr(sys, "argv", None) or [""]
    if argv[0] == "-m":
        given = getattr(sys, "orig_argv", [])
        return f"-m{PROG}" in given or any(
            flag == "-m" and name == PROG for flag, name in zip(given, given[1:]))
    script = os.path.basename(argv[0])
    return script.removesuffix(".exe").removesuffix("-script.pyw") == PROG


@contextlib.contextmanager
def quiet_interrupt(always: bool = False) -> Iterator[None]:
    """A Ctrl-C inside ends the command with its one line and exit code 130; outside the
    command (`always` False and not `is_the_command()`) it stays a KeyboardInterrupt.

    The Ctrl-C is noted as it comes, not only caught as it leaves: a KeyboardInterrupt
    that lands in a C extension's start-up can come out as an ImportError (numpy's), or
    be taken for a missing optional package and swallowed (pandas' optional imports)."""
    # Not where Ctrl-C is ignored (`nohup`, a shell's background job) or handled already.
    if not (always or is_the_command()) or (
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    noted = []

    def note(signum, frame):
        noted.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    except BaseException:
        if not noted:
            raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if noted:
        raise SystemExit(interrupted())

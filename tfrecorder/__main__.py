"""`python -m tfrecorder`, and the installed `tfrecorder` script: the command line.

The process's own concerns live here, around `cli.main` (which tests call in-process):
a Ctrl-C while the command imports (see `_interrupt`), and a reader of stdout that goes
away, as `tfrecorder info out/ | head -1` does once it has its line.
"""

import os
import sys

from tfrecorder._interrupt import quiet_interrupt

# What a shell reports for a Unix tool that a closed pipe stopped (128 + SIGPIPE, 13), as
# `yes | head -1` does: Python ignores SIGPIPE and raises BrokenPipeError instead.
CLOSED_PIPE = 141


def main() -> int:
    """Runs `cli.main`; a Ctrl-C while it imports is one line too (see `_interrupt`)."""
    with quiet_interrupt(always=True):
        from tfrecorder.cli import main as run_command
    try:
        code = run_command()
        sys.stdout.flush()  # the buffer's last lines: their closed pipe is caught here too
    except BrokenPipeError:
        if not _stdout_closed():  # another pipe's: a bug, with its traceback
            raise
        # Ends quietly, as the `signal` module's docs advise ("Note on SIGPIPE"): stdout
        # points at devnull, or Python's flush at exit would raise again and say so.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE
    return code


def _stdout_closed() -> bool:
    """Whether stdout's reader has gone: a pipe without a reader polls as an error (POLLERR
    on Linux, POLLHUP on macOS). Where `select.poll` is missing (Windows) a broken pipe is
    taken for stdout's, as the `signal` module's docs do."""
    import select

    if not hasattr(select, "poll"):
        return True
    try:
        stdout = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # stdout replaced, or closed
        return False
    poller = select.poll()
    poller.register(stdout, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


if __name__ == "__main__":
    raise SystemExit(main())

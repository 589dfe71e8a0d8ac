"""Local files read and created with the operating system's calls, safely and fast.

Safely: a path given by a table may name a FIFO (opening it waits for a writer forever)
or a device (which never ends), so only regular files are read; and temporary names are
predictable, so a new file refuses anything already there, a planted link included.
Fast: every image of a run is read by `read_regular`, with raw system calls into one
buffer of the file's size.

Apart from `fs`, which chooses between these and an object store's client, because this
is the local half only: no URIs, no fsspec.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from typing import BinaryIO


def read_regular(path: str) -> bytes:
    """A regular file's bytes, read with raw system calls into one buffer of its size:
    13 us for a 55 KB JPEG, against 19-44 us through a buffered file object, which
    matters when every image of a run is read here (docs/performance.md)."""
    fd, size = regular_fd(path)
    try:
        data = os.read(fd, size + 1)  # one byte more: a file that grew is read to its end
        if len(data) == size:
            return data
        parts = [data]  # a file that changed size, or a read cut short (over 2 GB)
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def open_regular(path: str) -> BinaryIO:
    """Opens a regular file to read. Anything else (a FIFO, a device, a folder) is an
    OSError: opening a FIFO would wait for a writer forever, a device never ends."""
    fd, _ = regular_fd(path)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_fd(path: str) -> tuple[int, int]:
    """A blocking descriptor open on the regular file at `path`, and the file's size
    (see `open_regular`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, not_regular(status.st_mode), path)
        os.set_blocking(fd, True)
        return fd, status.st_size
    except BaseException:
        os.close(fd)
        raise


def not_regular(mode: int) -> str:
    """What a file that is not a regular one is, from its `st_mode`."""
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else None)
    return f"{kind}, not a regular file" if kind else "not a regular file"


def create_private(path: str) -> BinaryIO:
    """Creates a new file only this user can read (0600), failing if anything, a
    planted link included, is already there: temporary names are predictable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    return os.fdopen(fd, "wb")


@functools.cache
def umask() -> int:
    """The process's umask, read without changing it where Linux tells it."""
    with contextlib.suppress(OSError, StopIteration, ValueError), \
            open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: set and restore (a moment in which files get 022)
    os.umask(mask)
    return mask

"""The output folder's life, the same for both engines: lock, temporary names, commit,
clean-up.

- **Lock.** A run holds `.tfrecorder.lock` in its folder from its first check to its
  last file, so a second run into the same folder fails at once, naming the holder. On a
  local disk it is an `flock`, which the kernel drops when the process dies (a killed run
  never leaves a stale lock); in a bucket it is an object created only if absent
  (`ifGenerationMatch=0` on GCS, `If-None-Match: *` on S3).
- **Temporary names.** Every file is written as `name.tmp-<run id>` and renamed, or in
  a bucket uploaded under its own name, which the store publishes only when complete
  (`fs.atomic_write`). A folder never shows a half-written file under a final name.
- **Clean-up.** A run that fails deletes what it created and nothing else: its own
  temporary files, and the dataset files that appeared after it began (with the lock
  held, no one else can have made them). Never a file by its final name alone. A
  resumable run keeps its committed shards and journal. A local folder the run made
  goes too, once empty (a failed or interrupted run leaves no empty folder behind).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from tfrecorder.errors import DatasetExistsError, Option, OutputLockedError
from tfrecorder.format.manifest import (
    INDEX_FOLDER,
    LOCK,
    MANIFEST,
    REJECTED,
    TEMP_MARKER,
    TFDS_FILES,
    dataset_files,
    is_temporary,
)
from tfrecorder.storage import fs

logger = logging.getLogger(__name__)

def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class OutputFolder:
    """One run's files in its output folder. Small and picklable: Beam workers get it.

    Attributes:
        path: the folder (local path or URI).
        run_id: names this run's temporary files.
        existing: the dataset files the folder held when the run claimed it.
    """

    path: str
    run_id: str
    existing: list[str] = field(default_factory=list)
    handed_over: bool = False  # the lock stays when the driver returns: the job releases it
    _before: frozenset[str] = frozenset()

    @property
    def temp_suffix(self) -> str:
        return TEMP_MARKER + self.run_id

    def uri(self, name: str) -> str:
        return fs.join(self.path, name)

    def temp_uri(self, folder: str, name: str, part: str = "") -> str:
        """A temporary file of this run for `name` in `folder` (the output folder, or a
        local spool beside it)."""
        return fs.join(folder, f"{name}{self.temp_suffix}{part}")

    def atomic_write(self, name: str):
        """A file that appears as `name` only once complete (see `fs.atomic_write`)."""
        return fs.atomic_write(self.uri(name), self.temp_suffix)

    def write_bytes(self, name: str, data: bytes) -> None:
        with self.atomic_write(name) as file:
            file.write(data)

    def clear(self, names: list[str]) -> None:
        """Deletes files of the folder's previous dataset (those the caller was told to
        replace), then notes what is left, so that `clean_up` knows what this run made."""
        # The manifest goes first: a crash while clearing leaves no dataset, not a broken one.
        names = sorted(names, key=lambda name: name != MANIFEST)
        fs.delete([self.uri(name) for name in names])
        self._remove_empty_index_folder()
        fs.makedirs(self.path)
        self._before = frozenset(dataset_files(self.path))

    def created(self) -> list[str]:
        """The dataset files (temporary ones included) this run has made so far."""
        return [name for name in dataset_files(self.path)
                if name not in self._before or name.endswith(self.temp_suffix)]

    def clean_up(self, keep_committed: bool) -> None:
        """Deletes what this run created: everything, or with `keep_committed` (a
        resumable run) all but its committed shards and their journal."""
        # TFDS's files go too: TFDS would read a folder by them, manifest or not.
        names = [name for name in self.created()
                 if not keep_committed or is_temporary(name)
                 or name in (MANIFEST, REJECTED, *TFDS_FILES)]
        fs.delete([self.uri(name) for name in names])
        self._remove_empty_index_folder()

    def _remove_empty_index_folder(self) -> None:
        """A local index folder left empty goes too (a bucket has no folders)."""
        if not fs.is_remote(self.path):
            remove_empty_folders([fs.local_path(self.uri(INDEX_FOLDER))])


_PRIVATE_PREFIX = "tfrecorder-run-"
# Exactly what `new_private_dir` names (mkdtemp adds 8 of [a-z0-9_]): nothing else is swept.
_PRIVATE_NAME = re.compile(re.escape(_PRIVATE_PREFIX) + r"(\d+)-[a-z]+-[a-z0-9_]{8}$")


@contextlib.contextmanager
def private_temp_dir(purpose: str) -> Iterator[str]:
    """A local folder only this user can read (0700), for a run's spool or staging (a
    full copy of the table may go there), deleted on every exit the process sees.

    Its name carries the process id, so folders left by a killed process (SIGKILL is
    the one exit no code sees) are deleted by the next run.
    """
    path = new_private_dir(purpose)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def new_private_dir(purpose: str) -> str:
    """A private folder (see `private_temp_dir`) that outlives this call: it is deleted
    by the first run that finds this process gone."""
    root = tempfile.gettempdir()
    _sweep(root)
    return tempfile.mkdtemp(prefix=f"{_PRIVATE_PREFIX}{os.getpid()}-{purpose}-", dir=root)


def _sweep(root: str) -> None:
    """Deletes private folders of processes that are gone (this user's only)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            found = _PRIVATE_NAME.match(entry.name)
            if found and not _alive(int(found[1])) and entry.is_dir(follow_symlinks=False) \
                    and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                shutil.rmtree(entry.path, ignore_errors=True)


def _holder() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _describe(holder: dict | None, lock_uri: str) -> str:
    if not holder:
        return f"another run (its lock {lock_uri} cannot be read)"
    return (f"run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')} on "
            f"{holder.get('host', '?')}, started {holder.get('started', '?')})")


@contextlib.contextmanager
def claim(path: str, run_id: str, *, overwrite: bool, resume: bool
          ) -> Iterator[OutputFolder]:
    """Locks `path` for this run and checks what it holds.

    Refuses a folder that holds a dataset (or an interrupted run's files) unless
    `overwrite`, or for an interrupted run, `resume`; those files are then in
    `existing`. The lock is released when the block exits, unless the block sets
    `handed_over` (a Beam job that runs on after the driver: its last step releases it
    with `release`).
    """
    if not fs.is_remote(path) and os.path.exists(fs.local_path(path)) \
            and not os.path.isdir(fs.local_path(path)):
        raise NotADirectoryError(f"output_dir {path!r} is a file, not a folder.")
    folder = OutputFolder(path, run_id)
    with _lock(path, {"run_id": run_id, **_holder()}, folder):
        existing = dataset_files(path)
        finished = MANIFEST in existing
        if existing and not overwrite and (finished or not resume):
            what = ("a dataset" if finished
                    else "files of an incomplete dataset (an interrupted run)")
            fix = (("Pass ", Option("overwrite", True), " to replace it") if finished else
                   ("Pass ", Option("resume", True), " to continue that run, ",
                    Option("overwrite", True), " to replace it"))
            raise DatasetExistsError(
                f"{path!r} already holds {what}: {len(existing)} file(s) such as "
                f"{existing[0]!r}. ", *fix, ", or choose another ", Option("output_dir"),
                ".", option="overwrite")
        folder.existing = existing
        yield folder


def release(folder: OutputFolder) -> None:
    """Deletes the lock, if it is still this run's: a job's last step."""
    uri = folder.uri(LOCK)
    with contextlib.suppress(FileNotFoundError, ValueError):
        if json.loads(fs.read_bytes(uri)).get("run_id") == folder.run_id:
            fs.delete([uri])


def _lock(path: str, holder: dict, folder: OutputFolder):
    if fs.is_remote(path):
        return _remote_lock(path, holder, folder)
    return _local_lock(fs.local_path(path), holder, folder)


@contextlib.contextmanager
def _local_lock(folder: str, holder: dict, run: OutputFolder) -> Iterator[None]:
    """An flock on the lock file: the kernel releases it when this process dies. The
    folders it makes for `folder` are removed after, if empty: a run that wrote nothing
    (failed, interrupted, dry) leaves nothing."""
    made = _missing_folders(folder)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LOCK)
    dying_until = time.monotonic() + _DYING_SECONDS
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            found = _read_holder(path)
            # A run that was killed holds its lock until its workers, which share the
            # lock's file, have died too: they are dying (the kernel signals them), so
            # wait for them rather than refuse.
            if _died_here(found, holder) and time.monotonic() < dying_until:
                time.sleep(0.05)
                continue
            raise _locked(folder, found, path) from None
        # The holder before us may have deleted the file between our open and our lock:
        # then we hold a lock on a file no one else will open. Take the one on disk.
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino:
                break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(holder).encode())
        yield
    finally:
        try:
            if not run.handed_over:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)  # before unlocking: no one takes a lock on a dead file
        finally:
            os.close(fd)
            if not run.handed_over:
                remove_empty_folders(made)


def _missing_folders(path: str) -> list[str]:
    """The folders `os.makedirs(path)` would create, the deepest first."""
    missing, path = [], os.path.abspath(path)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def remove_empty_folders(folders: list[str]) -> None:
    """Removes those of the local `folders` (a folder before its parent) that are empty
    and this user's: `rmdir` removes nothing else, so a file another process put there
    meanwhile keeps its folder."""
    for folder in folders:
        with contextlib.suppress(OSError):
            if os.stat(folder, follow_symlinks=False).st_uid == os.getuid():
                os.rmdir(folder)


def _locked(folder: str, holder: dict | None, lock: str, more: str = ""
            ) -> OutputLockedError:
    return OutputLockedError(
        f"{folder!r} is being written by {_describe(holder, lock)}. Wait for it to finish, "
        "or choose another ", Option("output_dir"), f".{more}", path=folder)


def _read_holder(path: str) -> dict | None:
    try:
        return json.loads(fs.read_bytes(path) or b"null")
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _remote_lock(path: str, holder: dict, run: OutputFolder) -> Iterator[None]:
    """An object created only if absent. A lock left by a run that died on this machine
    is taken over; one from elsewhere must be deleted by hand (the error says so)."""
    uri = fs.join(path, LOCK)
    data = json.dumps(holder).encode()
    for attempt in range(2):
        if fs.create_exclusive(uri, data):
            break
        found = _read_holder(uri)
        if attempt == 0 and _died_here(found, holder):
            logger.warning("Taking over the lock of %s, left by a run that died.", path)
            fs.delete([uri])
            continue
        raise _locked(path, found, uri, f" If that run is no longer running (a lost "
                      f"machine), delete {uri}.")
    try:
        yield
    finally:
        if not run.handed_over:
            with contextlib.suppress(Exception):
                fs.delete([uri])


_DYING_SECONDS = 10.0


def _died_here(found: dict | None, holder: dict) -> bool:
    """Whether a lock's holder ran on this machine and is gone."""
    return bool(found) and found.get("host") == holder["host"] and \
        not _alive(found.get("pid"))


def _alive(pid) -> bool:
    if not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

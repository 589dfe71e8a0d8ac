"""One URL layer for every file tfrecorder reads or writes: local paths, `file://`,
`gs://`, `s3://` and any other fsspec protocol.

Local paths go straight to the operating system (the fast path, with no imports in worker
processes). Everything else goes through fsspec: gcsfs for `gs://`, s3fs for `s3://`
(the `gcs` and `s3` extras). fsspec is what pandas users already configure, and its
clients retry throttling and server errors with back-off, and it reads a bucket faster
than Apache Beam's `GcsIO`, without Beam (docs/performance.md). Both engines, the table
loader and the readers all go through these functions, so a URI that works in one place
works everywhere.

Errors from a store become `StorageError`, a one-line message naming the URI, what the
store answered and, where it helps, the fix (`store_errors` words them). Local files are
read and created by `local_files`; a remote file is written by a `BackgroundUpload`.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import posixpath
import re
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import BinaryIO

from tfrecorder.errors import StorageError
from tfrecorder.storage import local_files, store_errors
from tfrecorder.storage.background_upload import BackgroundUpload

# The packages that serve each protocol, for the error that says what to install.
_EXTRAS = {"gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs"), "s3": ("s3fs", "s3"),
           "s3a": ("s3fs", "s3"), "http": ("aiohttp", "http"), "https": ("aiohttp", "http")}


def is_remote(uri: str) -> bool:
    """True for URIs with a scheme other than `file://` (gs://, s3://, ...)."""
    return "://" in uri and not is_file_uri(uri)


def is_web(uri: str) -> bool:
    """True for `http://` and `https://` URLs: each names its own host, not a bucket."""
    return protocol(uri).lower() in ("http", "https")


def protocol(uri: str) -> str:
    return uri.split("://", 1)[0] if is_remote(uri) else "file"


def local_path(uri: str) -> str:
    """A `file:` URI as a plain path; anything else as it is."""
    return file_uri_path(uri) if is_file_uri(uri) else uri


def is_file_uri(uri: str) -> bool:
    """`file:/...` in any case. (`file:x.jpg` without a slash is a relative file name.)"""
    return uri[:5].lower() == "file:" and uri[5:6] == "/"


def file_uri_path(uri: str) -> str:
    """The local path of a `file:` URI (RFC 8089): `file:///abs/path`,
    `file://localhost/abs/path` or `file:/abs/path`, percent-escapes decoded.

    Parsed by hand: urllib's `urlsplit` deletes tabs and newlines from what it parses.

    Raises:
        ValueError: a host other than localhost (`file://images/a.jpg` names the host
            `images`), a query or fragment, a bad percent-escape, or no path.
    """
    rest = uri[5:]
    authority, path = "", rest
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        path = slash + path
    if authority.lower() not in ("", "localhost"):
        raise ValueError(
            f"a file:// URI names a host, here {authority!r}; local files are "
            f"file:///absolute/path, and a path relative to the table is written without "
            f"file:// (e.g. {authority + path!r})")
    if not path:
        raise ValueError("a file:// URI without a path")
    if "?" in path or "#" in path:
        raise ValueError("'?' or '#' in a file:// URI starts a query or a fragment; in a "
                         "file name, write them as %3F and %23")
    if re.search(r"%(?![0-9A-Fa-f]{2})", path):
        raise ValueError("a '%' not followed by two hex digits; write '%' as %25 in a "
                         "file:// URI")
    try:
        return urllib.parse.unquote(path, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("percent-escapes that are not UTF-8") from None


_filesystems: dict[tuple[int, str], object] = {}


def filesystem(uri: str):
    """The fsspec file system for a remote URI, one per protocol and process (a forked
    worker builds its own: connections and event loops must not cross a fork).

    A process's first client of a bucket store is built after its endpoint has been
    probed (`check_reachable`), in seconds: offline, gcsfs looked for credentials (the
    GCE metadata server, 13 s) and retried each request (36 s) before it said anything.
    A forked worker's parent has probed it already.
    """
    name = protocol(uri)
    key = (os.getpid(), name)
    if key not in _filesystems:
        built_by_parent = {built for _, built in _filesystems}
        if any(pid != key[0] for pid, _ in _filesystems):
            _filesystems.clear()
        if name not in built_by_parent and not is_web(uri):  # (a web URL: its row's host)
            check_reachable(uri)
        _filesystems[key] = _new_filesystem(name)
    return _filesystems[key]


def _new_filesystem(name: str):
    try:
        if name in ("gs", "gcs"):
            # gcsfs.core's class, not gcsfs.GCSFileSystem: the latter asks a gRPC control
            # plane for every bucket's layout first, a 60 s stall where that is unreachable.
            from gcsfs.core import GCSFileSystem

            # An emulator takes no credentials (as with google-cloud-storage's client).
            anonymous = os.environ.get("STORAGE_EMULATOR_HOST", "") not in ("", "default")
            # gcsfs logs a traceback with every error it then raises; the error reaches
            # the caller anyway, as one line.
            store_errors.quiet_tracebacks(logging.getLogger("gcsfs"))
            return GCSFileSystem(token="anon" if anonymous else None)
        if name in ("s3", "s3a"):
            from s3fs import S3FileSystem

            # botocore's pool holds 10 connections: not enough for the reads in flight.
            return S3FileSystem(config_kwargs={"max_pool_connections": 128})
        import fsspec

        return fsspec.filesystem(name)
    except ImportError as error:
        package, extra = _EXTRAS.get(name, (None, None))
        install = (f"pip install 'tfrecorder[{extra}]' (or {package})" if extra
                   else "install the fsspec package for it")
        raise StorageError(f"{name}:// URIs need {package or 'an fsspec back-end'}: "
                           f"{install}.") from error
    except ValueError as error:  # fsspec: "Protocol not known"
        raise StorageError(f"{name}:// is not a file system tfrecorder knows: {error}") \
            from None


def join(base: str, *parts: str) -> str:
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(local_path(base), *parts)


def basename(uri: str) -> str:
    return posixpath.basename(uri.rstrip("/")) if is_remote(uri) else os.path.basename(uri)


def dirname(uri: str) -> str:
    """The folder holding `uri` (absolute for local paths)."""
    if is_remote(uri):
        return posixpath.dirname(uri.rstrip("/"))
    return os.path.dirname(os.path.abspath(local_path(uri)))


def is_below(uri: str, folder: str) -> bool:
    """Whether `uri` lies inside `folder` (local paths by the OS's separator)."""
    return uri.startswith(folder.rstrip("/\\") + ("/" if is_remote(folder) else os.sep))


def relative_to(uri: str, folder: str) -> str:
    """`uri` relative to `folder`, '/'-separated, where it lies inside it; else as it is
    (how sources name their files in messages and reports)."""
    if not folder or not is_below(uri, folder):
        return uri
    rest = uri[len(folder.rstrip("/\\")) + 1:]
    return rest if is_remote(folder) else rest.replace(os.sep, "/")


def _with_protocol(uri: str, path: str) -> str:
    """fsspec lists paths without their protocol; put it back."""
    return f"{protocol(uri)}://{path}"


def read_bytes(uri: str) -> bytes:
    if not is_remote(uri):
        return local_files.read_regular(local_path(uri))
    with storage_errors(uri):
        return filesystem(uri).cat_file(uri)


def start_read(uri: str) -> Future:
    """Starts reading a remote file in the background: the future gives its bytes or
    raises what `read_bytes` would.

    Cancelling the future stops the read at once, whatever the store is doing, so that
    Ctrl-C stops a run within a second: a store served by asyncio (gcsfs, s3fs, http)
    drops the request on fsspec's event loop; any other is read on a daemon thread,
    which neither a stop nor the exit of the process waits for.
    """
    store = filesystem(uri)
    if getattr(store, "async_impl", False):
        import asyncio  # here: importing tfrecorder stays fast

        async def read() -> bytes:
            with storage_errors(uri):
                return await store._cat_file(uri)

        return asyncio.run_coroutine_threadsafe(read(), store.loop)
    future: Future = Future()

    def read_on_thread() -> None:
        if future.set_running_or_notify_cancel():
            try:
                with storage_errors(uri):
                    future.set_result(store.cat_file(uri))
            except BaseException as error:
                future.set_exception(error)

    threading.Thread(target=read_on_thread, daemon=True, name="tfrecorder-read").start()
    return future


def open_read(uri: str) -> BinaryIO:
    """A file to read front to back in a stream (shards are read this way, not into
    memory)."""
    if not is_remote(uri):
        return local_files.open_regular(local_path(uri))
    with storage_errors(uri):
        # Buffered: a read(n) returns n bytes across ranges, as from a local file.
        return io.BufferedReader(_RangeReader(uri, filesystem(uri).size(uri)))


class _RangeReader(io.RawIOBase):
    """A remote file read in 8 MB ranges, one request each.

    fsspec's own files send a request per `read()` when read in small pieces (100 times
    slower for records of a few KB), and take a short answer for the end of the file. Here
    every range must come back whole, or the read fails with what the store said, so a
    shard is never taken for a truncated one.
    """

    _BLOCK = 8 << 20

    def __init__(self, uri: str, size: int):
        self.uri, self.size, self.position = uri, size, 0
        self._block, self._block_start = b"", 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:  # a container's index may be at its end (an MP4's moov)
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        if self.position >= self.size:
            return 0
        offset = self.position - self._block_start
        if not 0 <= offset < len(self._block):
            end = min(self.position + self._BLOCK, self.size)
            block = read_range(self.uri, self.position, end - self.position)
            self._block, self._block_start, offset = block, self.position, 0
        count = min(len(buffer), len(self._block) - offset)
        buffer[:count] = self._block[offset:offset + count]
        self.position += count
        return count


def read_range(uri: str, offset: int, size: int) -> bytes:
    """`size` bytes of a remote file from `offset`, in one request; a short answer is a
    StorageError, never taken for the end of the file."""
    with storage_errors(uri):
        data = filesystem(uri).cat_file(uri, start=offset, end=offset + size)
    if len(data) != size:
        raise StorageError(f"{uri}: the store sent {len(data)} bytes for bytes "
                           f"{offset}-{offset + size}", uri=uri)
    return data


class PositionedFile:
    """A file read at given offsets, one positioned read a call: `os.pread` on a
    descriptor locally (threads share it safely), a ranged request remotely.

    Descriptors are opened on first read and never pickled, so the object can be handed
    to forked or spawned workers (PyTorch's DataLoader, Grain's), each of which opens its
    own; a process keeps at most `_descriptors.limit` open (`_Descriptors`).
    """

    def __init__(self, uri: str):
        self.uri = uri
        self._remote = is_remote(uri)
        self._fd: int | None = None
        self._readers = 0  # reads in flight on `_fd`, which keep it open

    def read(self, offset: int, size: int) -> bytes:
        """Exactly `size` bytes from `offset`; EOFError if the file ends before."""
        if self._remote:
            return read_range(self.uri, offset, size)
        fd = _descriptors.acquire(self)
        try:
            data = os.pread(fd, size, offset)
        finally:
            _descriptors.release(self)
        if len(data) != size:  # a short read of a regular file is its end
            raise EOFError(f"{self.uri} ends before byte {offset + size}")
        return data

    def close(self) -> None:
        _descriptors.close(self)

    def __getstate__(self) -> dict:
        return {"uri": self.uri}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["uri"])


class _Descriptors:
    """The descriptors `PositionedFile`s hold open in this process, least recently read
    first, at most `limit` of them (one being read is never closed): a split of thousands
    of shards read in random order must not run out of descriptors (often 1024 a
    process). A forked child closes the ones it inherits and opens its own."""

    def __init__(self, limit: int):
        self.limit = limit
        self.lock = threading.Lock()
        self.open: dict[PositionedFile, None] = {}  # in order of last read

    def acquire(self, file: PositionedFile) -> int:
        with self.lock:
            if file._fd is None:
                for old in [f for f in self.open if not f._readers][
                        :max(0, len(self.open) + 1 - self.limit)]:
                    self._close(old)
                file._fd, _ = local_files.regular_fd(local_path(file.uri))
            else:
                del self.open[file]
            self.open[file] = None
            file._readers += 1
            return file._fd

    def release(self, file: PositionedFile) -> None:
        with self.lock:
            file._readers -= 1

    def close(self, file: PositionedFile) -> None:
        with self.lock:
            if file in self.open:
                self._close(file)

    def _close(self, file: PositionedFile) -> None:
        del self.open[file]
        os.close(file._fd)
        file._fd = None

    def forget_inherited(self) -> None:
        self.lock = threading.Lock()  # a thread of the parent may have held it
        for file in list(self.open):
            file._readers = 0
            self._close(file)


_descriptors = _Descriptors(limit=128)
# At fork, not on a later pid check: a thread of the parent may hold the lock, and the
# child would wait for it forever. (Cheap: nothing to do until a file is read.)
os.register_at_fork(after_in_child=_descriptors.forget_inherited)


@contextlib.contextmanager
def atomic_write(uri: str, temp_suffix: str) -> Iterator[BinaryIO]:
    """Yields a file that appears at `uri` only once the block exits cleanly.

    A local file is written beside `uri` (under `uri + temp_suffix`) and renamed. An
    object store publishes an upload only when it completes, so a remote file is
    uploaded under its own name (no copy afterwards), on a background thread so that the
    caller goes on encoding, and the upload is abandoned on an error.
    """
    if not is_remote(uri):
        path = local_path(uri)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        temp = path + temp_suffix
        file = local_files.create_private(temp)
        try:
            with file:
                yield file
                # the mode open() would have given it
                os.fchmod(file.fileno(), 0o666 & ~local_files.umask())
            os.replace(temp, path)  # replaces a link at `path`, never writes through it
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temp)
            raise
        return
    with storage_errors(uri):
        upload = BackgroundUpload(filesystem(uri).open(uri, "wb"))
    try:
        yield upload
    except BaseException:
        upload.discard()
        raise
    with storage_errors(uri):
        upload.close()


def create_exclusive(uri: str, data: bytes) -> bool:
    """Writes a small file only if nothing is at `uri`; False if something is. In a
    bucket the store decides (GCS `ifGenerationMatch=0`, S3 `If-None-Match: *`), so two
    machines never both succeed."""
    if not is_remote(uri):
        try:
            with local_files.create_private(local_path(uri)) as file:
                file.write(data)
        except FileExistsError:
            return False
        return True
    with storage_errors(uri):
        try:
            filesystem(uri).pipe_file(uri, data, mode="create")
        except FileExistsError:
            return False
    return True


def write_bytes(uri: str, data: bytes, temp_suffix: str | None = None) -> None:
    """Writes a whole file atomically (see `atomic_write`)."""
    with atomic_write(uri, temp_suffix or f".tmp-{uuid.uuid4().hex[:12]}") as f:
        f.write(data)


def size(uri: str) -> int:
    """The size of a file in bytes."""
    if not is_remote(uri):
        return os.path.getsize(local_path(uri))
    with storage_errors(uri):
        return filesystem(uri).size(uri)


def total_size(uri: str) -> int:
    """The bytes of a file, or of every file below a folder (one listing for a bucket)."""
    if not is_remote(uri):
        path = local_path(uri)
        if not os.path.isdir(path):
            return os.path.getsize(path)
        return sum(os.path.getsize(os.path.join(folder, name))
                   for folder, _, names in os.walk(path) for name in names)
    with storage_errors(uri):
        return filesystem(uri).du(uri, total=True)


def exists(uri: str) -> bool:
    """Whether a file (not a folder) is at `uri`."""
    if not is_remote(uri):
        return os.path.isfile(local_path(uri))
    with storage_errors(uri):
        return filesystem(uri).isfile(uri)


def is_folder(uri: str) -> bool:
    """Whether `uri` is a folder: on an object store, a prefix with objects below it."""
    if not is_remote(uri):
        return os.path.isdir(local_path(uri))
    with storage_errors(uri):
        return filesystem(uri).isdir(uri)


def delete(uris: list[str]) -> None:
    """Deletes files, ignoring those already gone."""
    for uri in uris:
        if not is_remote(uri):
            with contextlib.suppress(FileNotFoundError):
                os.remove(local_path(uri))
            continue
        with contextlib.suppress(FileNotFoundError), storage_errors(uri):
            filesystem(uri).rm_file(uri)


# Remote listings kept while `listings_kept` is open: (what, prefix) -> the listing.
_kept_listings: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "kept_listings", default=None)


@contextlib.contextmanager
def listings_kept() -> Iterator[None]:
    """Within the block, each remote folder is listed once by `list_dir` and once by
    `list_files`, however often they are called: telling what a source is asks the same
    folder several questions (its files, its folders, what lies below), and in a
    bucket each listing is a request per 1,000 objects."""
    token = _kept_listings.set({})
    try:
        yield
    finally:
        _kept_listings.reset(token)


def _listing(what: str, prefix: str, list_it):
    kept = _kept_listings.get()
    if kept is None:
        return list_it()
    if (what, prefix) not in kept:
        kept[what, prefix] = list_it()
    return kept[what, prefix]


def list_files(root: str) -> Iterator[str]:
    """Yields every file below `root`, recursively, in sorted order."""
    if not is_remote(root):
        root = local_path(root)
        for folder, subfolders, files in os.walk(root):
            subfolders.sort()
            for name in sorted(files):
                yield os.path.join(folder, name)
        return
    prefix = root.rstrip("/") + "/"
    with storage_errors(root):
        found = _listing("find", prefix, lambda: filesystem(root).find(prefix))
    yield from sorted(_with_protocol(root, path) for path in found)


def glob(pattern: str) -> list[str]:
    """The files and folders matching a glob pattern (`*`, `?`, `[...]`; `**` crosses
    folders), sorted."""
    if not is_remote(pattern):
        import glob as globbing  # here: the name is this function's

        return sorted(globbing.glob(local_path(pattern), recursive=True))
    with storage_errors(pattern):
        found = filesystem(pattern).glob(pattern)
    return sorted(_with_protocol(pattern, path) for path in found)


def makedirs(uri: str) -> None:
    """Creates a local folder; object stores have no folders to create."""
    if not is_remote(uri):
        os.makedirs(local_path(uri), exist_ok=True)


def list_dir(uri: str, folders: bool = False) -> list[str]:
    """Names of the files (or with `folders`, of the folders) directly inside `uri`
    (empty if it does not exist)."""
    if not is_remote(uri):
        path = local_path(uri)
        kind = os.path.isdir if folders else os.path.isfile
        return sorted(n for n in os.listdir(path) if kind(os.path.join(path, n))) \
            if os.path.isdir(path) else []
    prefix = uri.rstrip("/") + "/"
    with storage_errors(uri):
        try:
            entries = _listing("ls", prefix, lambda: filesystem(uri).ls(
                prefix, detail=True, refresh=True))
        except FileNotFoundError:
            return []
    kind = "directory" if folders else "file"
    names = (posixpath.basename(e["name"].rstrip("/")) for e in entries
             if e.get("type") == kind)
    return sorted(n for n in names if n)


# --- a store's errors, and access checked before a run (words: `store_errors`) ---------


@contextlib.contextmanager
def storage_errors(uri: str) -> Iterator[None]:
    """Turns a store's errors about `uri` into one StorageError (one line, no chain);
    a missing file stays a FileNotFoundError, which callers handle."""
    try:
        yield
    except (StorageError, FileNotFoundError):
        raise
    except Exception as error:
        if not is_remote(uri) or isinstance(error, (KeyError, TypeError, AttributeError)):
            raise
        fix = ("" if is_web(uri) else store_errors.UNREACHABLE_FIX
               if store_errors.network_cause(error)
               else store_errors.FIXES.get(protocol(uri), ""))
        raise StorageError(f"{uri}: {store_errors.answer(error)}. {fix}".strip(), uri=uri) from None


def check_access(read: list[str], write: str | None = None, probe_name: str = "") -> None:
    """One cheap request per bucket, before any work: that the store can be reached,
    credentials exist, the buckets exist and may be read, and the output may be written.
    A missing object in `read` is fine (its row is rejected later); a missing bucket is
    not. Web URLs (http, https) are not probed: each row names its own host, and a host
    that cannot be reached rejects its rows, with the reason, as a missing file does.

    Args:
        read: one URI per bucket that will be read.
        write: the remote output folder, or None.
        probe_name: a file name this run owns; written into `write` and deleted.
    """
    for uri in read:
        if not is_remote(uri):
            continue
        if is_web(uri):
            filesystem(uri)  # only that its client is installed
            continue
        with storage_errors(uri):  # (its client's first use probes its endpoint)
            try:
                filesystem(uri).info(uri)
            except FileNotFoundError:
                _check_bucket(uri)
    if write is not None and is_remote(write):
        probe = join(write, probe_name)
        _check_bucket(probe)
        with storage_errors(write):
            filesystem(probe).pipe_file(probe, b"")
            filesystem(probe).rm_file(probe)


def check_reachable(uri: str) -> None:
    """Fails within seconds, naming the host, the cause and what to check, when the server
    `uri` is read from cannot be reached: a bucket store's endpoint, or a web URL's host.
    `filesystem` calls it before a process's first client of a bucket store; call it for
    a web URL that the run cannot do without (a table). Other URIs pass.

    Raises:
        StorageError: the DNS lookup failed, the connection was refused, or no answer
            came within 5 s.
    """
    endpoint, setting = _endpoint(uri)
    if endpoint is not None:
        store_errors.check_reachable(uri, endpoint, setting)


# The environment variables a store's client may take its endpoint from.
_ENDPOINT_SETTINGS = {"gs": ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_UNIVERSE_DOMAIN"),
                      "s3": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")}


def _endpoint(uri: str) -> tuple[str | None, str | None]:
    """The URL of the server `uri` is read from, as its client would talk to it, and the
    environment variable it came from, if one did; (None, None) where it cannot be told.

    A store's is asked of an anonymous twin of its client, which looks up no credentials
    (gcsfs asks the GCE metadata server first, which offline took 13 s). Where botocore
    would go through a proxy (HTTPS_PROXY), the proxy is the server; gcsfs and fsspec's
    web client connect directly.
    """
    if is_web(uri):
        parts = urllib.parse.urlsplit(uri)
        return f"{parts.scheme}://{parts.netloc}", None
    name = {"gcs": "gs", "s3a": "s3"}.get(protocol(uri), protocol(uri))
    try:
        if name == "gs":
            from gcsfs.core import GCSFileSystem

            url = GCSFileSystem(token="anon", skip_instance_cache=True)._location
        elif name == "s3":
            from botocore.utils import get_environ_proxies
            from s3fs import S3FileSystem

            url = S3FileSystem(anon=True, skip_instance_cache=True).connect().meta.endpoint_url
            scheme = urllib.parse.urlsplit(url).scheme
            proxy = get_environ_proxies(url).get(scheme)
            if proxy:
                return (proxy if "://" in proxy else f"http://{proxy}",
                        f"{scheme.upper()}_PROXY")
        else:
            return None, None
    except Exception:  # not installed, or settings it refuses: building the client says so
        return None, None
    if not isinstance(url, str):
        return None, None
    setting = next((variable for variable in _ENDPOINT_SETTINGS[name]
                    if os.environ.get(variable, "") not in ("", "default")
                    and os.environ[variable] in url), None)
    return url, setting


def bucket_root(uri: str) -> str:
    """The bucket of a remote URI, as a URI: `gs://bucket` for `gs://bucket/a/b`."""
    return f"{protocol(uri)}://{uri.split('://', 1)[1].split('/', 1)[0]}"


def _check_bucket(uri: str) -> None:
    root = bucket_root(uri)
    bucket = root.split("://", 1)[1]
    with storage_errors(uri):
        found = filesystem(uri).exists(root)
    if not found:
        raise StorageError(f"{uri}: the bucket {bucket!r} does not exist (404). "
                           f"{store_errors.FIXES.get(protocol(uri), '')}".strip(), uri=uri)

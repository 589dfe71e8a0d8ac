"""One file-system layer for every part of tfrecorder.

Local paths go straight to the operating system (the fast path, and no heavy imports in
worker processes). Every other scheme (`gs://`, `s3://`, ...) goes through Apache Beam's
`FileSystems`, which the Beam engine uses anyway; it is imported only when a remote URI is
first touched. Both engines read images and write shards through these functions, so a
URI that works for one works for the other.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterator
from typing import BinaryIO


def is_remote(uri: str) -> bool:
    """True for URIs with a scheme other than `file://` (gs://, s3://, ...)."""
    return "://" in uri and not uri.startswith("file://")


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def _beam():
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    return FileSystems, CompressionTypes.UNCOMPRESSED


def join(base: str, *parts: str) -> str:
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(_local(base), *parts)


def basename(uri: str) -> str:
    return posixpath.basename(uri.rstrip("/")) if is_remote(uri) else os.path.basename(uri)


_gcs_by_process: dict[int, object] = {}


def _gcsio():
    """One Beam `GcsIO` per process. Beam's `FileSystems` builds a new client, and so a
    new connection, for every call: a TLS handshake per image. Keyed by process id, so a
    forked worker never shares its parent's connections."""
    pid = os.getpid()
    if pid not in _gcs_by_process:
        from apache_beam.io.gcp.gcsio import GcsIO

        _gcs_by_process.clear()
        _gcs_by_process[pid] = GcsIO()
    return _gcs_by_process[pid]


def read_bytes(uri: str) -> bytes:
    if not is_remote(uri):
        with open(_local(uri), "rb") as f:
            return f.read()
    if uri.startswith("gs://"):
        with _gcsio().open(uri) as f:
            return f.read()
    filesystems, uncompressed = _beam()
    with filesystems.open(uri, compression_type=uncompressed) as f:
        return f.read()


def open_write(uri: str) -> BinaryIO:
    """Opens `uri` for writing bytes, creating local parent folders as needed."""
    if not is_remote(uri):
        path = _local(uri)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        return open(path, "wb")
    filesystems, uncompressed = _beam()
    return filesystems.create(uri, compression_type=uncompressed)


def write_bytes(uri: str, data: bytes) -> None:
    with open_write(uri) as f:
        f.write(data)


def rename(source: str, destination: str) -> None:
    """Moves a finished file into place (atomic on local file systems)."""
    if not is_remote(source):
        os.replace(_local(source), _local(destination))
        return
    filesystems, _ = _beam()
    filesystems.rename([source], [destination])


def size(uri: str) -> int:
    """The size of a file in bytes."""
    if not is_remote(uri):
        return os.path.getsize(_local(uri))
    filesystems, _ = _beam()
    (result,) = filesystems.match([uri])
    return result.metadata_list[0].size_in_bytes


def exists(uri: str) -> bool:
    if not is_remote(uri):
        return os.path.exists(_local(uri))
    filesystems, _ = _beam()
    return filesystems.exists(uri)


def delete(uris: list[str]) -> None:
    """Deletes files, ignoring those already gone."""
    for uri in uris:
        if not is_remote(uri):
            with contextlib.suppress(FileNotFoundError):
                os.remove(_local(uri))
        elif exists(uri):
            _beam()[0].delete([uri])


def list_files(root: str) -> Iterator[str]:
    """Yields every file below `root`, recursively, in sorted order."""
    if not is_remote(root):
        root = _local(root)
        for folder, subfolders, files in os.walk(root):
            subfolders.sort()
            for name in sorted(files):
                yield os.path.join(folder, name)
        return
    filesystems, _ = _beam()
    pattern = root.rstrip("/") + "/**"
    (result,) = filesystems.match([pattern])
    yield from sorted(m.path for m in result.metadata_list)


def makedirs(uri: str) -> None:
    """Creates a local folder; remote object stores have no folders to create."""
    if not is_remote(uri):
        os.makedirs(_local(uri), exist_ok=True)


def list_dir(uri: str) -> list[str]:
    """Names of the files directly inside `uri` (empty if it does not exist)."""
    if not is_remote(uri):
        path = _local(uri)
        return sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n))) \
            if os.path.isdir(path) else []
    filesystems, _ = _beam()
    prefix = uri.rstrip("/") + "/"
    (result,) = filesystems.match([prefix + "*"])
    names = (m.path[len(prefix):] for m in result.metadata_list)
    return sorted(n for n in names if n and "/" not in n)

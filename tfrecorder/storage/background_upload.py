"""An upload to an object store that runs on a thread of its own.

A shard is encoded and uploaded at once: the writer hands each chunk to a queue and goes
on encoding while another thread sends the chunks. The queue is bounded, so a slow store
slows the writer rather than filling memory. Apart from `fs`, which gives this file to
writers through `fs.atomic_write`, because it is the one piece of `fs` that runs a
thread for the life of a file.
"""

from __future__ import annotations

import contextlib
import queue
import threading


class BackgroundUpload:
    """A write-only file whose writes reach the remote file on another thread."""

    _STOP = object()

    def __init__(self, file):
        self._file = file
        self._chunks: queue.Queue = queue.Queue(maxsize=16)  # bounds memory in transit
        self._error: BaseException | None = None
        self._written, self._closed = 0, False
        self._thread = threading.Thread(target=self._upload, daemon=True)
        self._thread.start()

    def _upload(self) -> None:
        while (chunk := self._chunks.get()) is not self._STOP:
            if self._error is None:
                try:
                    self._file.write(chunk)
                except BaseException as error:  # reported by the next write or close
                    self._error = error

    def write(self, data: bytes) -> int:
        if self._error is not None:
            raise self._error
        self._chunks.put(bytes(data))
        self._written += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    # What writers that take file objects (pyarrow's Parquet writer) ask of one.
    @property
    def closed(self) -> bool:
        return self._closed

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._chunks.put(self._STOP)
        self._thread.join()
        if self._error is not None:
            self.discard()
            raise self._error
        self._file.close()

    def discard(self) -> None:
        if self._thread.is_alive():
            self._error = self._error or RuntimeError("upload abandoned")
            self._chunks.put(self._STOP)
            self._thread.join()
        # Nothing to clean when the store has no way to abandon an upload: the object
        # never appears, and the store expires the unfinished upload.
        with contextlib.suppress(Exception):
            self._file.discard()

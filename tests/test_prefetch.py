"""The prefetcher's reads: started ahead, and dropped, not waited for, when it closes."""

import socket
import threading
import time
from concurrent.futures import CancelledError

import pytest
from helpers import write_image

from tfrecorder.write.prefetch import Prefetcher


class HeldServer:
    """A web server that takes one GET and never answers; `closed` is set once the client
    drops the connection."""

    def __enter__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/held.jpg"
        self.asked, self.closed = threading.Event(), threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def _serve(self):
        connection, _ = self.socket.accept()
        with connection:
            connection.recv(65536)  # the request
            self.asked.set()
            while connection.recv(65536):
                pass
            self.closed.set()

    def __exit__(self, *exc):
        self.socket.close()


def test_closing_drops_a_read_in_flight_at_once():
    """A stop must not wait for a store: the request is cancelled, its connection closed
    (a pool of threads waited for the read to end, up to aiohttp's 300 s)."""
    with HeldServer() as server:
        prefetcher = Prefetcher()
        read = prefetcher.reader(server.url)
        assert server.asked.wait(10)
        started = time.monotonic()
        prefetcher.close()
        assert time.monotonic() - started < 0.5
        assert server.closed.wait(2)
        with pytest.raises(CancelledError):
            read()


def test_reads_give_their_bytes_and_release_their_room(web_store, tmp_path):
    uris = [web_store.upload(write_image(tmp_path / f"{i}.jpg", seed=i),
                             f"{web_store.root}/{tmp_path.name}/{i}.jpg") for i in range(3)]
    with Prefetcher(max_in_flight=3) as prefetcher:
        reads = [prefetcher.reader(uri) for uri in uris]
        assert prefetcher.full
        assert [read() for read in reads] == [(tmp_path / f"{i}.jpg").read_bytes()
                                              for i in range(3)]
        assert not prefetcher.full and prefetcher._buffered == 0


def test_a_store_without_asyncio_is_read_on_a_thread():
    import fsspec

    fsspec.filesystem("memory").pipe_file("memory://prefetch/a.jpg", b"bytes")
    with Prefetcher() as prefetcher:
        assert prefetcher.reader("memory://prefetch/a.jpg")() == b"bytes"
        with pytest.raises(FileNotFoundError):
            prefetcher.reader("memory://prefetch/missing.jpg")()


def test_a_rows_reads_left_unread_are_released(web_store, tmp_path):
    """A row rejected before its mask is read (a corrupt image) releases the mask's read:
    it no longer counts against `full`, which would otherwise stall the worker for good."""
    from tfrecorder.options import ImageOptions
    from tfrecorder.write.prefetch import encode_read
    from tfrecorder.write.rows import Rejection, Row

    image = web_store.upload(_written(tmp_path / "bad.png", b"not an image"),
                             f"{web_store.root}/{tmp_path.name}/bad.png")
    mask = web_store.upload(write_image(tmp_path / "mask.png", fmt="PNG"),
                            f"{web_store.root}/{tmp_path.name}/mask.png")
    row = Row(0, image, image, None, "train", mask_uri=mask)
    with Prefetcher(max_in_flight=2) as prefetcher:
        reads = prefetcher.reads(row)
        assert prefetcher.full
        _, result = encode_read(row, reads, ImageOptions(), prefetcher)
        assert isinstance(result, Rejection)
        assert not prefetcher.full and prefetcher._buffered == 0
        assert reads.mask.future.cancelled() or reads.mask.future.done()


def _written(path, data: bytes):
    path.write_bytes(data)
    return path

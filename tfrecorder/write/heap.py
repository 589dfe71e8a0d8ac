"""Giving the driver's freed memory back to the system.

Reading and planning a table of millions of rows make and free many short-lived objects;
glibc's heap and Arrow's allocator keep the freed pages, so the driver's footprint would
be the peak of every step before, not what it holds. They are released after each chunk
of a source read in chunks (`sources.chunked`); for a whole CSV, once parsed and after
each column is made one array (`sources.csv.read_csv`: the copy of a column of paths
would otherwise add to the parser's leftovers); after a whole source is read and again
once validated; and once the plan is made, before the workers fork (they share the
driver's pages).
"""

from __future__ import annotations

import contextlib


def release_freed_memory() -> None:
    """Returns freed pages to the system: Arrow's unused pool memory, and glibc's free
    heap pages (`malloc_trim`; on other C libraries, nothing)."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)

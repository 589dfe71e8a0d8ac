"""Long videos and audio files cut into clips of a fixed length (`MediaOptions.clip_seconds`
or `clip_frames`), before planning: one table row a clip, so that a record is still one
row, counted, split and reported as every other row is.

A row's span (its CLIP_START and CLIP_END, or the whole file) is cut into consecutive
clips of the length asked for, from its start; the last, shorter piece is dropped and
counted (the manifest's `media.cut`). A row whose span is shorter than one clip, or whose
file's length cannot be read, becomes a rejected row with its reason: nothing vanishes
unlisted. A row's segments or regions go with the clip they fall in, cut to it.

Clips of one file share its URI, so an UNASSIGNED row's split, drawn from the URI's hash,
is the same for all of them: no clip of a training video is tested on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from tfrecorder.options import MediaOptions
from tfrecorder.sources.table import CLIP_END, CLIP_START, REGIONS, SEGMENTS, Table
from tfrecorder.storage import fs
from tfrecorder.wording import count

# Files probed at once for their length: each is a header read, mostly waiting on a disk
# or a bucket.
_PROBES_IN_FLIGHT = 16


def clip_length_us(options: MediaOptions) -> int | None:
    """The length of a clip the options ask for, in microseconds; None: one clip a row."""
    if options.clip_seconds is not None:
        return round(options.clip_seconds * 1e6)
    if options.clip_frames is not None:
        return round(options.clip_frames / options.frame_rate * 1e6)
    return None


def cut_into_clips(table: Table, options: MediaOptions,
                   duration_us: Callable[[str], int]) -> Table:
    """`table` with each row's span cut into clips of the length `options` ask for (the
    table as it is when they ask for none). `duration_us(uri)` gives a file's length, for
    rows that run to their file's end; what it raises is the row's rejection reason."""
    length = clip_length_us(options)
    if length is None or table.media == "image":
        return table
    rows = table.rows
    starts = _optional(rows[CLIP_START]) if CLIP_START in rows else [None] * len(rows)
    ends = _optional(rows[CLIP_END]) if CLIP_END in rows else [None] * len(rows)
    ends, reasons = _file_ends(rows["uri"].tolist(), ends, duration_us)
    positions, clip_starts, clip_ends, rejected = [], [], [], {}
    tails, tail_us = 0, 0
    for position, (start, end) in enumerate(zip(starts, ends)):
        if end is None:
            rejected[position] = reasons[position]
            continue
        start = start or 0
        pieces = max(0, (end - start) // length)
        if pieces == 0:
            rejected[position] = (f"its span ({_seconds(end - start)}) is shorter than a clip "
                                  f"({_seconds(length)}, the clip length asked for)")
            continue
        positions += [position] * pieces
        clip_starts += [start + k * length for k in range(pieces)]
        clip_ends += [start + (k + 1) * length for k in range(pieces)]
        tail = end - start - pieces * length
        tails, tail_us = tails + bool(tail), tail_us + tail
    taken = np.asarray(positions, dtype=np.int64)
    cut = rows.iloc[taken].copy()
    cut[CLIP_START] = pd.array(clip_starts, dtype="Int64")
    cut[CLIP_END] = pd.array(clip_ends, dtype="Int64")
    timed = SEGMENTS if SEGMENTS in rows else REGIONS if REGIONS in rows else None
    if timed is not None:
        pairs = [_timed_in(timed, rows[timed].iat[p], rows["label"].iat[p], s, e)
                 for p, s, e in zip(positions, clip_starts, clip_ends)]
        cut[timed] = pd.Series([t for t, _ in pairs], index=cut.index, dtype=object)
        cut["label"] = pd.Series([labels for _, labels in pairs], index=cut.index,
                                 dtype=object)
    source = table.source.iloc[taken].copy()
    source["clip_start"] = np.asarray(clip_starts, dtype=np.float64) / 1e6
    source["clip_end"] = np.asarray(clip_ends, dtype=np.float64) / 1e6
    return dataclasses.replace(
        table, rows=cut, source=source,
        rejected_rows=_rejected(table, rejected),
        cell_words={}, number_grids={name: grid[taken]
                                     for name, grid in table.number_grids.items()},
        clip_cuts={"clip_seconds": length / 1e6, "rows": len(rows) - len(rejected),
                   "clips": len(positions), "tails_dropped": tails,
                   "seconds_dropped": round(tail_us / 1e6, 3)})


def file_duration_us(uri: str, kind: str | None = None) -> int:
    """A video or audio file's length (its `kind` of stream's, "video" or "audio"), from
    its headers where the container says it (a bucket's file is read in ranges, not
    whole)."""
    from tfrecorder.write.media import media_duration_us  # PyAV: only for media tables

    with fs.open_read(uri) as file:
        return media_duration_us(file, kind)


def _file_ends(uris: Sequence[str], ends: list, duration_us: Callable[[str], int]
               ) -> tuple[list, dict[int, str]]:
    """Each row's end: its own, or its file's length (probed once a file, several at
    once); a file that cannot be probed leaves None, and its reason by position."""
    wanted = sorted({uri for uri, end in zip(uris, ends) if end is None})

    def probe(uri: str):
        try:
            return int(duration_us(uri))
        except Exception as error:  # the row's problem, not the run's
            return f"cannot read its length: {error}"

    with ThreadPoolExecutor(_PROBES_IN_FLIGHT) as pool:
        lengths = dict(zip(wanted, pool.map(probe, wanted)))
    found, reasons = [], {}
    for position, (uri, end) in enumerate(zip(uris, ends)):
        if end is None:
            end = lengths[uri]
            if isinstance(end, str):
                reasons[position], end = end, None
        found.append(end)
    return found, reasons


def _timed_in(kind: str, timed, labels, start: int, end: int) -> tuple[list, list]:
    """A row's segments or regions that fall in the clip [start, end), with their labels:
    segments cut to the clip (those that only touch it left out), regions by their time."""
    kept, kept_labels = [], []
    for entry, label in zip(timed if timed is not None else (), labels or ()):
        if kind == SEGMENTS:
            first, last = max(entry[0], start), min(entry[1], end)
            if first < last or (entry[0] == entry[1] and start <= entry[0] < end):
                kept.append((first, last))
                kept_labels.append(label)
        elif start <= entry[0] < end:
            kept.append(tuple(entry))
            kept_labels.append(label)
    return kept, kept_labels


def _rejected(table: Table, reasons: dict[int, str]) -> pd.DataFrame | None:
    """The table's rejected rows with those the cutting rejected, as the source gave them."""
    if not reasons:
        return table.rejected_rows
    found = table.source.iloc[sorted(reasons)].copy()
    found["reason"] = [reasons[p] for p in sorted(reasons)]
    return found if table.rejected_rows is None else pd.concat([table.rejected_rows, found])


def _optional(column: pd.Series) -> list:
    return [None if pd.isna(v) else int(v) for v in column]


def _seconds(us: int) -> str:
    return f"{us / 1e6:g} s"


def describe_cuts(cuts: dict) -> str:
    """The cutting's summary, for the log."""
    return (f"cut {count(cuts['rows'], 'row')} into {count(cuts['clips'], 'clip')} of "
            f"{cuts['clip_seconds']:g} s; {count(cuts['tails_dropped'], 'shorter last piece')}"
            f" ({cuts['seconds_dropped']:g} s) dropped")

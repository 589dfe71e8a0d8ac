"""Video and audio sources' shared room (issue 49): which files are clips, how a source's
times are read, and the table every video or audio source ends in.

A table of clips is a `Table` whose `image_uri` and `uri` columns name video or audio
files (`Table.media`), with each row's span on its file's own timeline (`CLIP_START`,
`CLIP_END`: integer microseconds, <NA> for the file's start or end) and, by task, its
timed annotations (`SEGMENTS`, `REGIONS`). Every source of clips builds it here, whether
its file names its columns (`video_uri`, `audio_uri`, `start`, `end`: `validate`) or
lays them out by position (`vertex_video`, `clips_csv`, `folder`). Nothing here opens a
media file: decoding, durations and corrupt files are the worker's.

Times are seconds as the tools write them: `1.5`, `"1.5s"` (a protobuf Duration, as
Vertex AI's JSONL writes it), `"inf"` or `"Infinity"` (to the end: Vertex AI's CSVs and
batch prediction files).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import posixpath
from collections.abc import Mapping, Sequence

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.sources.schema import is_missing, name_key
from tfrecorder.sources.table import CLIP_END, CLIP_START, REGIONS, SEGMENTS, Table
from tfrecorder.wording import name_rows, shown

# What a file is by its extension. Vertex AI takes .mov, .mpeg4, .mp4 and .avi; the rest
# are what PyAV's FFmpeg reads and users keep (.webm from YouTube tools, .mkv, .flv).
VIDEO_EXTENSIONS = frozenset({
    ".mp4", ".m4v", ".mpeg4", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".wmv",
    ".flv", ".3gp", ".ts", ".mts", ".m2ts", ".ogv"})
AUDIO_EXTENSIONS = frozenset({
    ".wav", ".wave", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".aif",
    ".aiff", ".wma"})
# A clip's span by name (compared by `name_key`): DMVR's and pandas' `start`/`end`, and
# the `start_time`/`end_time` of Apple's Create ML and of many annotation exports.
_START_NAMES = frozenset({"start", "starttime", "startseconds", "clipstart"})
_END_NAMES = frozenset({"end", "endtime", "endseconds", "clipend"})
TASKS = ("classification", "action_recognition", "object_tracking")
_INFINITE = frozenset({"inf", "+inf", "infinity", "+infinity"})
_US = 1_000_000


def media_of_path(path: str) -> str | None:
    """"video" or "audio" by a path's extension (any case); None for anything else."""
    extension = posixpath.splitext(path.lower().rstrip("/"))[1]
    if extension in VIDEO_EXTENSIONS:
        return "video"
    if extension in AUDIO_EXTENSIONS:
        return "audio"
    return None


def seconds(value) -> float:
    """A time as written, in seconds: a number, "1.5", "1.5s", "inf" or "Infinity"
    (math.inf: to the file's end).

    Raises:
        ValueError: for anything else (negative, NaN, text that is no time), saying what
            a time is.
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.lower() in _INFINITE:
            return math.inf
        if text[-1:] in ("s", "S") and not text.lower().endswith("inf"):
            text = text[:-1]
        try:
            number = float(text) if text.lower() not in ("nan", "-nan", "+nan") else None
        except ValueError:
            number = None
        if number is None or text.lower().lstrip("+-").startswith("inf"):
            raise ValueError(_TIME)
    else:
        raise ValueError(_TIME)
    if number != number or number < 0:
        raise ValueError(_TIME)
    return number


_TIME = ('a time is seconds from the file\'s start, 0 or more: 1.5, "1.5s", or "inf" '
         '(or "Infinity") for the end')


def microseconds(value: float) -> int | None:
    """Seconds as whole microseconds, as the records store times; None for math.inf."""
    return None if value == math.inf else int(round(value * _US))


def time_us(value, where: str, what: str = "time", rows: Sequence = (),
            column: str | None = None) -> int | None:
    """`microseconds(seconds(value))`, or an error naming where the value is.

    Args:
        where: where the value is written, as the user finds it ("line 7 of the CSV
            file 'clips.csv'").
        what: what the value is ("startTime", "TIME_OFFSET").
    """
    try:
        return microseconds(seconds(value))
    except ValueError as error:
        raise SchemaError(f"{where} has the {what} {shown(value)}, which is not a time: "
                          f"{error}.", column=column, rows=list(rows)) from None


def check_span(start: int | None, end: int | None, where: str, what: str = "clip",
               rows: Sequence = (), column: str | None = None,
               allow_point: bool = False) -> None:
    """Raises for a span whose end is not after its start (a key frame's may be its
    start: `allow_point`)."""
    if end is None:  # to the file's end
        return
    low = start or 0
    if end < low or (end == low and not allow_point):
        raise SchemaError(
            f"{where} has a {what} that ends at {end / _US:g} s, "
            f"{'before' if end < low else 'where'} it starts ({low / _US:g} s): a span ends "
            f"after its start{' (a key frame: at it)' if allow_point else ''}. Fix the "
            "times.", column=column, rows=list(rows))


# --- columns that give a clip its span (`validate`) -------------------------------------

def span_columns(frame: pd.DataFrame, schema: Mapping) -> tuple[str | None, str | None]:
    """The table's start and end columns, by name (`start`, `start_time`, `end`, ...),
    unless the schema types or drops them.

    Raises:
        SchemaError: for two columns that both name the start (or the end).
    """
    found = []
    for names, which in ((_START_NAMES, "start"), (_END_NAMES, "end")):
        columns = [c for c in frame.columns if name_key(c) in names and c not in schema]
        if len(columns) > 1:
            raise SchemaError(
                f"columns {columns} all name the clip's {which}, so which one is meant is "
                "unclear. Keep one (drop the others with schema={name: None}).",
                column=columns[0], option="schema")
        found.append(columns[0] if columns else None)
    return found[0], found[1]


def span_values(frame: pd.DataFrame, start: str | None, end: str | None
                ) -> tuple[pd.api.extensions.ExtensionArray, pd.api.extensions.ExtensionArray]:
    """Each row's clip start and end in microseconds (<NA>: the file's start, or end)
    from the start and end columns in seconds (a blank is <NA>; "inf" ends at the end).

    Raises:
        SchemaError: for a value that is not a time, or an end not after its start,
            naming the column, the value and the rows.
    """
    spans = []
    for column in (start, end):
        if column is None:
            spans.append([None] * len(frame))
            continue
        values, bad = [], {}
        cells = frame[column].tolist()
        for label, value in zip(frame.index.tolist(), cells):
            if is_missing(value):
                values.append(None)
                continue
            try:
                values.append(microseconds(seconds(value)))
            except ValueError:
                bad.setdefault(str(value), []).append(label)
                values.append(None)
        if bad:
            value, rows = next(iter(bad.items()))
            raise SchemaError(
                f"column {column!r} has {shown(value)} at {name_rows(rows, of=frame.index)}"
                f", which is not a time: {_TIME}.", column=column, rows=rows)
        spans.append(values)
    starts, ends = spans
    backwards = [label for label, s, e in zip(frame.index.tolist(), starts, ends)
                 if e is not None and e <= (s or 0)]
    if backwards:
        at = frame.index.get_loc(backwards[0])
        raise SchemaError(
            f"columns {start!r} and {end!r} give a clip that ends at or before its start "
            f"at {name_rows(backwards, of=frame.index)} (e.g. {_cell(frame, start, at)} to "
            f"{_cell(frame, end, at)}): a clip ends after it starts. Fix the times, or leave "
            "the end blank for the file's end.", column=end, rows=backwards)
    return _int64(starts), _int64(ends)


def _cell(frame: pd.DataFrame, column: str | None, at: int) -> str:
    return "the file's start" if column is None else shown(frame[column].tolist()[at])


def _int64(values: Sequence) -> pd.api.extensions.ExtensionArray:
    return pd.array(list(values), dtype="Int64")


# --- the table every source of clips ends in --------------------------------------------

def clip_table(table: Table, media: str, starts: Sequence | None = None,
               ends: Sequence | None = None, task: str = "classification",
               timed: Sequence | None = None,
               skipped: pd.DataFrame | None = None) -> Table:
    """A validated table (`validate`, its files' column `image_uri`) as a table of clips.

    Args:
        media: "video" or "audio".
        starts, ends: each row's span in microseconds (None: the file's start, end);
            by default the whole file.
        task: one of `TASKS`; "action_recognition" gives each row its SEGMENTS and
            "object_tracking" its REGIONS (`timed`, one list a row, paired with the
            row's `label` list by position), and makes the rows multi-label.
        skipped: the annotations the source set aside (`annotation_policy`).
    """
    n = len(table.rows)
    rows = table.rows.assign(**{
        CLIP_START: _int64(starts if starts is not None else [None] * n),
        CLIP_END: _int64(ends if ends is not None else [None] * n)})
    if task != "classification":
        column = SEGMENTS if task == "action_recognition" else REGIONS
        rows[column] = pd.Series([list(map(tuple, value)) for value in timed],
                                 index=rows.index, dtype=object)
    return dataclasses.replace(table, rows=rows, media=media, task=task,
                               multi_label=table.multi_label or task != "classification",
                               skipped_annotations=skipped)


def media_column_kind(uris: Sequence[str], where: str) -> str:
    """"video" or "audio": what the files a source names are, by their extensions.

    Raises:
        SchemaError: for files of both kinds, or of neither, naming examples.
    """
    kinds: dict[str | None, list[str]] = {}
    for uri in uris:
        kinds.setdefault(media_of_path(uri), []).append(uri)
    if set(kinds) in ({"video"}, {"audio"}):
        return next(iter(kinds))
    if "video" in kinds and "audio" in kinds:
        raise SchemaError(
            f"{where} names video files (e.g. {kinds['video'][0]!r}) and audio files (e.g. "
            f"{kinds['audio'][0]!r}): a dataset holds one kind of clip. Convert them as two "
            "datasets.")
    other = kinds.get(None, [""])
    raise SchemaError(
        f"{where} names files that are neither video ({', '.join(sorted(VIDEO_EXTENSIONS))}) "
        f"nor audio ({', '.join(sorted(AUDIO_EXTENSIONS))}) by their extension, e.g. "
        f"{other[0]!r}. Name the files with their format's extension.")

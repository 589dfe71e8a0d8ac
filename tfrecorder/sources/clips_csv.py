"""Clips CSV files as DeepMind's DMVR takes them (`examples/generate_from_file.py` and its
README in github.com/deepmind/dmvr): `video_path,start,end[,label[,caption]]`, one clip a
line, times in seconds.

DMVR reads the file with a header (`video_path,start,end,label,caption`); the header is
optional here, told by its first cell (DMVR's `video_path`, or `audio_path`). Without one,
a line is a clip when its first cell is a video or audio path and the next two are times
(`vertex_video.csv_layout`, which tells it from Vertex AI's video lines). The label is
the clip's class; a caption becomes the input column `caption` (DMVR's
`caption/string`). The files are videos or audio by their extension (`media`).
"""

from __future__ import annotations

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv, media
from tfrecorder.sources.schema import STRING_LABEL, name_key
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import validate
from tfrecorder.sources.vertex_video import csv_layout
from tfrecorder.wording import LINE, name_rows

_SNIFFED = 1 << 16
_PATHS = frozenset({"videopath", "audiopath"})  # DMVR's header's first column, by name_key
_COLUMNS = ("start", "end", "label", "caption")


def claims(path: str, folder: bool) -> bool:
    """A CSV file whose header starts with DMVR's `video_path`, or whose first line is a
    clip (`csv_layout`)."""
    if folder or path.lower().endswith((".parquet", ".pq", ".json", ".jsonl")):
        return False
    try:
        records = csv.records_of(csv.head_text(path, _SNIFFED), path)[1][:1]
    except SchemaError:
        return False
    return bool(records) and (name_key(records[0][0]) in _PATHS
                              or csv_layout(records[0])[0] == "clips")


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's clips: a row a line, its span its start and end."""
    lines, records = csv.read_records(path)
    header = bool(records) and name_key(records[0][0]) in _PATHS
    names = [cell.strip() for cell in records[0]] if header else None
    if header:
        lines, records = lines[1:], records[1:]
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no clips.")
    width = len(names) if header else 1 + len(_COLUMNS)
    long = [line for line, record in zip(lines, records) if len(record) > width]
    if long:
        raise SchemaError(f"the CSV file {path!r} has more than {width} fields at "
                          f"{name_rows(long)}: a clip is path,start,end,label,caption.",
                          rows=long)
    if not header:  # the columns its longest line has
        names = ["path", *_COLUMNS][:max(map(len, records))]
    records = [[cell.strip() for cell in r] + [""] * (len(names) - len(r)) for r in records]
    frame = pd.DataFrame(records, columns=names, index=pd.Index(lines, name=LINE))
    kind = media.media_column_kind(frame[names[0]].tolist(), f"the CSV file {path!r}")
    frame = frame.rename(columns={names[0]: f"{kind}_uri"})
    for optional in ("label", "caption"):  # a column left blank in every line: none
        if optional in frame and not frame[optional].astype(bool).any():
            frame = frame.drop(columns=optional)
    schema = {"label": STRING_LABEL} if "label" in frame else {}
    fills = options.fill_missing
    if "caption" in frame:  # DMVR writes a clip's caption where it has one
        schema["caption"] = "StringInput"
        if fills is None or isinstance(fills, dict):
            fills = {"caption": "", **(fills or {})}
    return validate(frame, base_dir=base_dir, schema={**schema, **(options.schema or {})},
                    fill_missing=fills, split=options.split)

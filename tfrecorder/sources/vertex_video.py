"""Vertex AI's video import files, JSON Lines and CSV, for its three video objectives:
classification, action recognition and object tracking (issue 49).

As documented (read for this module, 2026):

JSONL, one object a video (Vertex AI's "Use managed datasets" page, the Video datasets
section; the schemas gs://google-cloud-aiplatform/schema/dataset/ioformat/
video_{classification,action_recognition,object_tracking}_io_format_1.0.0.yaml):
    {"videoGcsUri": "gs://bucket/v.mp4",
     "timeSegmentAnnotations": [{"displayName": "swing", "startTime": "4.0s",
                                 "endTime": "9.0s"}],          # classification
     "dataItemResourceLabels": {"aiplatform.googleapis.com/ml_use": "training"}}
  Action recognition adds "timeSegments" (the fully annotated spans: [{"startTime",
  "endTime"}]); its annotations' startTime may equal endTime: a key frame. Its example
  writes the split's key short, {"ml_use": "training"}. Object tracking lists
  "temporalBoundingBoxAnnotations" (the schema listing spells it with a capital T) of
  {"displayName", "xMin", "xMax", "yMin", "yMax", "timeOffset", "instanceId"}, fractions
  of the frame; its own example lines spell them `temporal_bounding_box_annotations`,
  `time_offset` and `instance_id` (instance "-1": none). Keys are read in any of these
  spellings (compared without case and `_`). A duration is "4.000000s".

CSV, one annotation a line, no header (Vertex AI's "Prepare video training data" pages,
and the import formats of the AutoML API's `InputConfig`, google.cloud.automl.v1beta1):
    classification      [ML_USE,]VIDEO_URI,LABEL,TIME_SEGMENT_START,TIME_SEGMENT_END
                        (",," for a video without labels; "inf" is the video's end)
    action recognition  [ML_USE,]VIDEO_URI,TIME_SEGMENT_START,TIME_SEGMENT_END,LABEL,
                        ANNOTATION_FRAME_TIMESTAMP  (or ANNOTATION_SEGMENT_START,
                        ANNOTATION_SEGMENT_END): the first span is the fully annotated one
    object tracking     [ML_USE,]VIDEO_URI,LABEL,[INSTANCE_ID],TIME_OFFSET,BOUNDING_BOX
                        where BOUNDING_BOX is two vertices, x_min,y_min,,,x_max,y_max,,
                        or four (as AutoML's image boxes: `automl_detection`), and
                        ",,,,,,,,,," follows a video without annotations
  A time is seconds ("12.90", "inf"); ML_USE is training, test or validation (any
  spelling `format/splits.py` reads: TRAIN, UNASSIGNED). A header line naming these
  columns (VIDEO_URI, ...) is skipped. The objective is told by the lines' shape.

What each becomes (`Table.task`, `media.clip_table`):
  - classification: a row a labelled segment (a line's every segment), its clip the
    segment; a video without annotations, one unlabelled row of the whole video.
  - action recognition: a row a fully annotated span (JSONL: each of `timeSegments`,
    else the whole video; CSV: each distinct TIME_SEGMENT_START,TIME_SEGMENT_END of a
    video), its annotations as SEGMENTS (start == end: a key frame) and `label`.
  - object tracking: a row a video (its lines merged, in file order: `images_in_order`),
    its boxes as REGIONS (time, ymin, xmin, ymax, xmax, instance; -1 where none is
    given) and `label`. Boxes go through the one policy for bad annotations
    (`annotation_policy`): outside the frame, empty, unreadable or without a label,
    each is skipped and listed, or an error with invalid_annotations="error".
A time that cannot be read, a span that ends before it starts, an annotation outside its
row's span and an unknown objective are errors, naming the file, the line and the value.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.format.splits import split_named
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv, media
from tfrecorder.sources.annotation_policy import Objects, Problem, settle
from tfrecorder.sources.automl_detection import vertices_box
from tfrecorder.sources.detection import images_in_order
from tfrecorder.sources.schema import STRING_LABEL, is_missing, name_key
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import validate
from tfrecorder.sources.vertex_jsonl import entries_of, split_of
from tfrecorder.wording import LINE

VIDEO = "videoGcsUri"
_SNIFFED = 1 << 16
# The annotation lists, by `name_key`, and the objective each says.
_CLASSES, _SPANS, _BOXES = "timesegmentannotations", "timesegments", \
    "temporalboundingboxannotations"
# The columns a header line names in Vertex AI's documentation (by `name_key`), one of
# which marks it as a header to skip; a header of other names (`video_uri,label,start,
# end`) is a table's, read by its names (`csv`, `validate`).
_HEADER = frozenset({"timesegmentstart", "timeoffset", "annotationframetimestamp",
                     "boundingbox"})
_TRACK_CELLS = 11  # LABEL,INSTANCE_ID,TIME_OFFSET and eight coordinates
# How many cells follow the path, by objective (the shape every line of a file keeps).
_WIDTHS = {"classification": (3,), "action_recognition": (4, 5),
           "object_tracking": (_TRACK_CELLS,)}
_NO_TRACK = -1  # the instance of a box that names none


def claims(path: str, folder: bool) -> bool:
    """A JSONL file whose first line names a `videoGcsUri`, or a CSV file whose first
    line (after a header) is a Vertex AI video line (`csv_layout`)."""
    if folder or path.lower().endswith((".parquet", ".pq", ".json", ".yaml", ".yml")):
        return False
    head = csv.head_text(path, _SNIFFED)
    first = head.lstrip().split("\n", 1)[0]
    if first.startswith("{"):
        return bool(re.search(r"""["']videogcsuri["']""", first, re.IGNORECASE))
    if path.lower().endswith(".jsonl"):
        return False
    try:
        records = csv.records_of(head, path)[1][:2]
    except SchemaError:
        return False
    if records and _is_header(records[0]):
        records = records[1:]
    return bool(records) and csv_layout(records[0])[0] in media.TASKS


def _is_header(record: list[str]) -> bool:
    return any(name_key(cell) in _HEADER for cell in record)


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    first = csv.head_text(path, _SNIFFED).lstrip()[:1]
    if first == "{":
        return _read_jsonl(path, base_dir, options)
    return _read_csv(path, base_dir, options)


# --- the shape of a CSV line -----------------------------------------------------------

def _is_time(cell: str) -> bool:
    try:
        media.seconds(cell)
    except ValueError:
        return False
    return True


def csv_layout(record: list[str]) -> tuple[str | None, int]:
    """What a headerless CSV line is, and where its file's path is (0, or 1 after an
    ML_USE cell): one of `media.TASKS` for a Vertex AI video line, "clips" for DMVR's
    `path,start,end[,label[,caption]]` (`clips_csv`), or None.

    A file's path is told by a video or audio extension (`media.media_of_path`); the
    cells after it by how many there are and which are times: LABEL,START,END is
    classification, START,END,LABEL,TIME[,TIME] action recognition, eleven cells object
    tracking, START,END[,LABEL[,CAPTION]] (the times first) a clip.
    """
    cells = [cell.strip() for cell in record]
    at = 1 if len(cells) > 1 and split_named(cells[0]) is not None or (
        len(cells) > 1 and not cells[0] and media.media_of_path(cells[1])) else 0
    if at >= len(cells) or media.media_of_path(cells[at]) is None:
        return None, at
    rest = cells[at + 1:]
    n = len(rest)
    kind = media.media_of_path(cells[at])
    times = [_is_time(cell) for cell in rest]
    if kind == "video" and n == _TRACK_CELLS:
        return "object_tracking", at
    if kind == "video" and n == 3 and (not any(rest) or (not times[0] and all(
            times[1:] if rest[1] or rest[2] else [True]))):
        return "classification", at
    if kind == "video" and n in (4, 5) and times[0] and times[1] and rest[2] and (
            not times[2]) and all(times[3:] if any(rest[3:]) else [True]) and (
            n == 5 or rest[3]):
        return "action_recognition", at
    if at == 0 and 2 <= n <= 4 and times[0] and times[1] and (n < 3 or not times[2]):
        return "clips", 0
    return None, at


# --- CSV -------------------------------------------------------------------------------

def _read_csv(path: str, base_dir: str, options: TableOptions) -> Table:
    lines, records = csv.read_records(path)
    if records and _is_header(records[0]):
        lines, records = lines[1:], records[1:]
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    task, at = csv_layout(records[0])
    where = f"the CSV file {path!r}"
    for line, record in zip(lines, records):  # the shape of the first (its times are
        if len(record) - at - 1 not in _WIDTHS[task] and not (  # read below, named)
                task == "object_tracking" and _untracked(record, at)):
            raise SchemaError(
                f"line {line} of {where} is not a Vertex AI video {_TASK_WORDS[task]} line "
                f"as line {lines[0]} is: {','.join(record)!r}. Its columns are "
                f"{_LAYOUTS[task] if at == 0 else 'ML_USE,' + _LAYOUTS[task]}; one "
                "objective a file.", rows=[line])
    uris = [record[at].strip() for record in records]
    splits = [record[0].strip() for record in records] if at else None
    rest = [[cell.strip() for cell in record[at + 1:]] for record in records]
    if task == "classification":
        return _classification_csv(path, base_dir, options, lines, uris, splits, rest)
    if task == "action_recognition":
        return _actions_csv(path, base_dir, options, lines, uris, splits, rest)
    return _tracking_csv(path, base_dir, options, lines, uris, splits, rest)


_TASK_WORDS = {"classification": "classification", "action_recognition":
               "action recognition", "object_tracking": "object tracking"}
_LAYOUTS = {
    "classification": "VIDEO_URI,LABEL,TIME_SEGMENT_START,TIME_SEGMENT_END",
    "action_recognition": "VIDEO_URI,TIME_SEGMENT_START,TIME_SEGMENT_END,LABEL,"
                          "ANNOTATION_FRAME_TIMESTAMP",
    "object_tracking": "VIDEO_URI,LABEL,INSTANCE_ID,TIME_OFFSET,X_MIN,Y_MIN,,,X_MAX,Y_MAX,,"}


def _untracked(record: list[str], at: int) -> bool:
    """A tracking file's line of a video without annotations: the path, then blanks."""
    return len(record) > at and not any(cell.strip() for cell in record[at + 1:])


def _time(value: str, line, where: str, what: str) -> int | None:
    return media.time_us(value, f"line {line} of {where}", what, rows=[line])


def _frame(splits, uris, labels, index) -> pd.DataFrame:
    frame = pd.DataFrame({"video_uri": uris, "label": labels}, index=index)
    if splits is not None:
        frame.insert(0, "split", splits)
    return frame


def _validated(frame: pd.DataFrame, base_dir: str, options: TableOptions) -> Table:
    return validate(frame, base_dir=base_dir, schema={"label": STRING_LABEL,
                                                      **(options.schema or {})},
                    fill_missing=options.fill_missing, split=options.split)


def _classification_csv(path, base_dir, options, lines, uris, splits, rest) -> Table:
    where = f"the CSV file {path!r}"
    starts, ends, labels = [], [], []
    for line, (label, start, end) in zip(lines, rest):
        starts.append(_time(start, line, where, "TIME_SEGMENT_START") if start else None)
        ends.append(_time(end, line, where, "TIME_SEGMENT_END") if end else None)
        media.check_span(starts[-1], ends[-1], f"line {line} of {where}", "segment", [line])
        labels.append(label or None)
    table = _validated(_frame(splits, uris, labels, pd.Index(lines, name=LINE)), base_dir,
                       options)
    return media.clip_table(table, "video", starts, ends)


def _actions_csv(path, base_dir, options, lines, uris, splits, rest) -> Table:
    """A row a video's fully annotated span, its lines' annotations in file order."""
    where = f"the CSV file {path!r}"
    keys, spans, actions = [], [], []
    for line, cells in zip(lines, rest):
        start = _time(cells[0], line, where, "TIME_SEGMENT_START")
        end = _time(cells[1], line, where, "TIME_SEGMENT_END")
        at = f"line {line} of {where}"
        media.check_span(start, end, at, "time segment", [line])
        times = [_time(cell, line, where, name) for cell, name in zip(
            cells[3:], ("ANNOTATION_FRAME_TIMESTAMP", "ANNOTATION_SEGMENT_END"))]
        action = (times[0], times[-1])
        _check_action(action, (start, end), at, cells[2], [line])
        keys.append(f"{start}:{end}")
        spans.append((start, end))
        actions.append((cells[2], action))
    row_keys = [f"{uri}\0{key}" for uri, key in zip(uris, keys)]
    first, row_of = images_in_order(row_keys, splits, lines)
    return _action_rows(base_dir, options, lines, uris, splits, spans, actions, first, row_of)


def _check_action(action: tuple, span: tuple, where: str, label: str, rows: list) -> None:
    start, end = action
    if start is None or end is None:
        raise SchemaError(
            f"{where} gives the action {label!r} no finite time: an action is a key frame "
            "(a time) or a span (a start and an end), in seconds. Give its time.",
            rows=rows)
    media.check_span(start, end, where, "action", rows, allow_point=True)
    low, high = span[0] or 0, span[1]
    if start < low or (high is not None and end > high):
        raise SchemaError(
            f"{where} has the action {label!r} at {start / 1e6:g}-{end / 1e6:g} s, outside "
            f"its fully annotated segment ({low / 1e6:g}-"
            f"{'the end' if high is None else f'{high / 1e6:g} s'}). Fix its times, or its "
            "segment's.", rows=rows)


def _action_rows(base_dir, options, lines, uris, splits, spans, actions, first, row_of
                 ) -> Table:
    labels = [[] for _ in first]
    segments = [[] for _ in first]
    for entry, row in enumerate(row_of.tolist()):
        label, action = actions[entry]
        if label is not None:
            labels[row].append(label)
            segments[row].append(action)
    index = pd.Index([lines[i] for i in first], name=LINE)
    frame = _frame(None if splits is None else [splits[i] for i in first],
                   [uris[i] for i in first], labels, index)
    table = _validated(frame, base_dir, options)
    return media.clip_table(table, "video", [spans[i][0] for i in first],
                            [spans[i][1] for i in first], "action_recognition", segments)


_BOX_FIX = ("A box is two vertices (x_min,y_min,,,x_max,y_max,,) or four, fractions of the "
            "frame from 0 to 1, after the label, instance and time.")
_UNREADABLE = Problem("unreadable box", "whose box cannot be read", _BOX_FIX)


def _tracking_csv(path, base_dir, options, lines, uris, splits, rest) -> Table:
    where = f"the CSV file {path!r}"
    first, video_of = images_in_order(uris, splits, lines)
    found = _Boxes(path, where)
    for i, (line, cells) in enumerate(zip(lines, rest)):
        if not any(cells):
            continue  # a video without annotations
        cells = (cells + [""] * _TRACK_CELLS)[:_TRACK_CELLS]
        why, box = vertices_box(cells[3:])
        found.add(video_of[i], lines[first[video_of[i]]], cells[0] or None, box,
                  f"line {line}: {','.join(cells)!r}" + (f" (a box {why})" if why else ""),
                  _track_time(cells[2], line, where),
                  _instance(cells[1], f"line {line} of {where}", [line]))
    objects = found.objects()
    return _tracking_rows(base_dir, options, lines, uris, splits, first, objects)


class _Boxes:
    """A tracking file's boxes, gathered one `add` a box, as `annotation_policy.Objects`
    (a box that cannot be read marked `_UNREADABLE`), with their times and instances."""

    def __init__(self, path: str, where: str):
        self.path, self.where = path, where
        self.video, self.rows, self.labels, self.boxes, self.codes = [], [], [], [], []
        self.written, self.times, self.tracks = [], [], []

    def add(self, video: int, row, label, box: list[float] | None, written: str,
            time: int, track: int) -> None:
        """A box of `video` (the table's row `row`), as the file writes it (`written`:
        "line 4: ..."); None: unreadable."""
        self.video.append(video)
        self.rows.append(row)
        self.labels.append(label)
        self.boxes.append([np.nan] * 4 if box is None else box)
        self.codes.append(int(box is None))
        self.written.append(written)
        self.times.append(time)
        self.tracks.append(track)

    def objects(self) -> Objects:
        written = self.written
        return Objects.of(self.video, self.labels, self.boxes, self.rows,
                          lambda j: written[j], self.where, problem=self.codes,
                          problems=(_UNREADABLE,),
                          names=lambda j: (self.path, written[j].split(":", 1)[0],
                                           written[j]),
                          time=np.asarray(self.times, dtype=np.int64),
                          track=np.asarray(self.tracks, dtype=np.int64))


def _track_time(cell: str, line, where: str) -> int:
    value = _time(cell, line, where, "TIME_OFFSET") if cell else None
    if value is None:
        raise SchemaError(f"line {line} of {where} has a box without its TIME_OFFSET "
                          f"({cell or 'blank'!r}): a box is drawn on the frame at a time, "
                          "in seconds. Give its time.", rows=[line])
    return value


def _instance(value, where: str, rows: list) -> int:
    """An object's instance id: an integer (blank or None: `_NO_TRACK`)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return _NO_TRACK
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool):
        raise SchemaError(f"{where} has the instance id {value!r}: an instance is a whole "
                          "number that tells one object from another across the frames of "
                          "a video. Fix it, or leave it blank.", rows=rows)
    return number


def _tracking_rows(base_dir, options, lines, uris, splits, first, objects: Objects
                   ) -> Table:
    """A row a video, its settled boxes (`annotation_policy.settle`) as REGIONS."""
    settled = settle(objects, options.invalid_annotations)
    kept = settled.objects
    labels = [[] for _ in first]
    regions = [[] for _ in first]
    times, tracks = kept.extras["time"], kept.extras["track"]
    for k, video in enumerate(kept.image.tolist()):
        ymin, xmin, ymax, xmax = (float(v) for v in kept.boxes[k])
        labels[video].append(kept.labels[k])
        regions[video].append((int(times[k]), ymin, xmin, ymax, xmax, int(tracks[k])))
    frame = _frame(None if splits is None else [splits[i] for i in first],
                   [uris[i] for i in first], labels,
                   pd.Index([lines[i] for i in first], name=LINE))
    table = _validated(frame, base_dir, options)
    return media.clip_table(table, "video", task="object_tracking", timed=regions,
                            skipped=settled.skipped)


# --- JSONL -----------------------------------------------------------------------------

def _keyed(entry: dict) -> dict:
    """An object's keys as `name_key` compares them: `xMin`, `x_min`, `XMin` alike."""
    return {name_key(key): value for key, value in entry.items()} \
        if isinstance(entry, dict) else {}


def _read_jsonl(path: str, base_dir: str, options: TableOptions) -> Table:
    lines, entries = entries_of(path, VIDEO, "video")
    where = f"the JSONL file {path!r}"
    keyed = [_keyed(entry) for entry in entries]
    task = _objective(where, lines, entries, keyed)
    uris = [entry[VIDEO] for entry in entries]
    splits = [split_of(path, line, entry) for line, entry in zip(lines, entries)]
    lists = {}
    for line, keys in zip(lines, keyed):
        for name in (_CLASSES, _SPANS, _BOXES):
            value = keys.get(name)
            if value is not None and not isinstance(value, list):
                raise SchemaError(f"line {line} of {where} has {value!r} under its "
                                  f"{name!r} key: a list of annotations.", rows=[line])
            lists[line, name] = [_keyed(a) for a in value or []]
    if task == "object_tracking":
        return _tracking_jsonl(path, where, base_dir, options, lines, uris, splits, lists)
    return _segments_jsonl(where, base_dir, options, lines, uris, splits, lists, task)


def _objective(where: str, lines: list, entries: list, keyed: list) -> str:
    """The file's objective, by its annotation lists: boxes (`_BOXES`) are object
    tracking; `timeSegments`, or an annotation whose start is its end (a key frame),
    action recognition; `timeSegmentAnnotations` alone classification.

    Raises:
        SchemaError: for a line with annotations of another objective (an image's
            `boundingBoxAnnotations`, a text's), or a file of two objectives.
    """
    found: dict[str, int] = {}
    for line, entry, keys in zip(lines, entries, keyed):
        strangers = [key for key, k in zip(entry, keys) if k.endswith(
            ("annotation", "annotations")) and k not in (_CLASSES, _BOXES)]
        if strangers:
            raise SchemaError(
                f"line {line} of {where} has {strangers[0]!r}, an annotation of no Vertex AI "
                "video objective tfrecorder reads: a video's are timeSegmentAnnotations "
                "(classification; with timeSegments, action recognition) or "
                "temporalBoundingBoxAnnotations (object tracking). Fix the key, or convert "
                "the file as the source it is.", rows=[line])
        if keys.get(_BOXES):
            found.setdefault("object_tracking", line)
        if _SPANS in keys or any(
                isinstance(a, dict) and _keyed(a).get("starttime") is not None
                and _keyed(a).get("starttime") == _keyed(a).get("endtime")
                for a in keys.get(_CLASSES) or []):
            found.setdefault("action_recognition", line)
        elif keys.get(_CLASSES):
            found.setdefault("classification", line)
    if "action_recognition" in found:
        found.pop("classification", None)
    if len(found) > 1:
        (one, at), (other, other_at) = sorted(found.items(), key=lambda kv: kv[1])[:2]
        raise SchemaError(
            f"{where} holds annotations of two objectives: {_TASK_WORDS[one]} (line {at}) "
            f"and {_TASK_WORDS[other]} (line {other_at}). A Vertex AI import file has one "
            "objective: split it into a file each.", rows=[at, other_at])
    return next(iter(found), "classification")


def _segments_jsonl(where, base_dir, options, lines, uris, splits, lists, task) -> Table:
    """Classification: a row an annotated segment. Action recognition: a row a fully
    annotated span (`timeSegments`, or the whole video), its annotations as SEGMENTS."""
    index, row_uris, row_splits, labels, starts, ends, timed = [], [], [], [], [], [], []
    for line, uri, split in zip(lines, uris, splits):
        at = f"line {line} of {where}"
        annotations = [(a.get("displayname"), *_span(a, at, line, k))
                       for k, a in enumerate(lists[line, _CLASSES])]
        if task == "classification":
            rows = [(name, start, end, None) for name, start, end in annotations] or \
                [(None, None, None, None)]
        else:
            spans = [_span(s, at, line, k, "time segment")
                     for k, s in enumerate(lists[line, _SPANS])] or [(None, None)]
            rows = []
            for start, end in spans:
                inside = [(name, s, e) for name, s, e in annotations
                          if _within(s, e, start, end)]
                rows.append(([name for name, _, _ in inside], start, end,
                             [(s, e) for _, s, e in inside]))
            orphans = [(name, s, e) for name, s, e in annotations
                       if not any(_within(s, e, *span) for span in spans)]
            if orphans:
                name, s, e = orphans[0]
                _check_action((s, e), spans[0], at, name, [line])
        for k, (label, start, end, segments) in enumerate(rows):
            for name in label if isinstance(label, list) else [label]:
                _name(name, at, line)
            index.append(line if len(rows) == 1 else f"{line}:{k + 1}")
            row_uris.append(uri)
            row_splits.append(split)
            labels.append(label)
            starts.append(start)
            ends.append(end)
            timed.append(segments)
    if not all(isinstance(i, int) for i in index):
        index = [str(i) for i in index]
    table = _validated(_frame(row_splits, row_uris, labels, pd.Index(index, name=LINE)),
                       base_dir, options)
    return media.clip_table(table, "video", starts, ends, task,
                            timed if task != "classification" else None)


def _within(start, end, low, high) -> bool:
    return start >= (low or 0) and (high is None or end <= high)


def _span(annotation: dict, where: str, line, k: int, what: str = "segment"
          ) -> tuple[int | None, int | None]:
    """An annotation's startTime and endTime in microseconds (a key frame's are one)."""
    start, end = (annotation.get(key) for key in ("starttime", "endtime"))
    start = None if is_missing(start) else media.time_us(
        start, f"{where} ({what} {k})", "startTime", rows=[line])
    end = None if is_missing(end) else media.time_us(
        end, f"{where} ({what} {k})", "endTime", rows=[line])
    media.check_span(start, end, f"{where} ({what} {k})", what, [line],
                     allow_point=what == "segment")
    return start, end


def _name(label, where: str, line) -> None:
    if label is not None and not isinstance(label, str):
        raise SchemaError(f"{where} has the displayName {label!r}: a class name is text.",
                          column="label", rows=[line])


def _tracking_jsonl(path, where, base_dir, options, lines, uris, splits, lists) -> Table:
    first, video_of = images_in_order(uris, splits, lines)
    found = _Boxes(path, where)
    for i, line in enumerate(lines):
        for k, box in enumerate(lists[line, _BOXES]):
            at = f"line {line} of {where} (box {k})"
            corners = [_coordinate(box.get(key)) for key in ("ymin", "xmin", "ymax", "xmax")]
            offset = box.get("timeoffset")
            if is_missing(offset):
                raise SchemaError(f"{at} has no timeOffset: a box is drawn on the frame at "
                                  "a time (\"4.0s\"). Give its time.", rows=[line])
            found.add(video_of[i], lines[first[video_of[i]]], box.get("displayname"),
                      None if None in corners else corners,
                      f"line {line}, box {k}: {json.dumps(box)[:200]}",
                      media.time_us(offset, at, "timeOffset", rows=[line]),
                      _instance(box.get("instanceid"), at, [line]))
    objects = found.objects()
    return _tracking_rows(base_dir, options, lines, uris, splits, first, objects)


def _coordinate(value) -> float | None:
    """A box's coordinate, given as a number or as text ("0.25"); None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None

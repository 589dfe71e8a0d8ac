"""Vertex AI's JSON Lines import files for images: one JSON object a line, naming its
image (`imageGcsUri`), its split (`dataItemResourceLabels`, key
"aiplatform.googleapis.com/ml_use": training, validation or test; none is UNASSIGNED)
and its annotations: a class (`classificationAnnotation`), classes
(`classificationAnnotations`), or boxes (`boundingBoxAnnotations`, each with its
`displayName` and `xMin`, `yMin`, `xMax`, `yMax`, fractions of the image's size).

Classes make a classification table, one row a line; boxes a detection table, one row
an image (its lines merged, in file order). Rows are named by their line.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from typing import Final

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.splits import split_named
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.annotation_policy import Objects, Problem
from tfrecorder.sources.detection import images_in_order, objects_table
from tfrecorder.sources.schema import STRING_LABEL
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import validate
from tfrecorder.storage import fs
from tfrecorder.wording import LINE

IMAGE, SPLITS, ML_USE = "imageGcsUri", "dataItemResourceLabels", \
    "aiplatform.googleapis.com/ml_use"
CLASS, CLASSES, BOXES = "classificationAnnotation", "classificationAnnotations", \
    "boundingBoxAnnotations"
# The ml_use values Vertex AI writes, each read by `split_named` (no other spelling of a
# split is named here: `format/splits.py` holds them).
ML_USES: Final = ("training", "validation", "test")
_CORNERS = ("yMin", "xMin", "yMax", "xMax")  # a box's keys, in the table's order
_SNIFFED = 1 << 16


def claims(path: str, folder: bool) -> bool:
    """A `.jsonl` file, or one whose first line is a JSON object naming `imageGcsUri`."""
    if folder:
        return False
    if path.lower().endswith(".jsonl"):
        return True
    if path.lower().endswith((".csv", ".parquet", ".pq")):
        return False
    line = csv.head_text(path, _SNIFFED).lstrip().split("\n", 1)[0]
    return line.startswith("{") and f'"{IMAGE}"' in line


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's classification or detection table (by its annotations, or `task`)."""
    lines, entries = entries_of(path)
    has_boxes = [line for line, entry in zip(lines, entries) if BOXES in entry]
    has_classes = [line for line, entry in zip(lines, entries)
                   if CLASS in entry or CLASSES in entry]
    task = options.task
    if task == "auto" and has_boxes and has_classes:
        raise SchemaError(
            f"the JSONL file {path!r} has boxes (line {has_boxes[0]}: {BOXES}) and classes "
            f"(line {has_classes[0]}: {CLASS}): pass ", Option("task", "detection"),
            " to read its boxes, or ", Option("task", "classification"), " to read its "
            "classes.", option="task")
    if task == "auto":
        task = "detection" if has_boxes else "classification"
    uris = [entry[IMAGE] for entry in entries]
    splits = [split_of(path, line, entry) for line, entry in zip(lines, entries)]
    index = pd.Index(lines, name=LINE)
    if task != "detection":
        labels = _classes(path, lines, entries)
        frame = pd.DataFrame({"split": splits, "image_uri": uris, "label": labels},
                             index=index)
        table = validate(frame, base_dir=base_dir, schema={"label": STRING_LABEL,
                                                           **(options.schema or {})},
                         fill_missing=options.fill_missing, split=options.split)
        source = pd.DataFrame({IMAGE: uris, ML_USE: splits, "displayName": labels},
                              index=index)
        return dataclasses.replace(table, source=source)
    first, image_of = images_in_order(uris, splits, lines)
    objects = _boxes(path, lines, entries, image_of)
    at_first = pd.Index([lines[i] for i in first], name=LINE)
    images = pd.DataFrame({"split": [splits[i] for i in first],
                           "image_uri": [uris[i] for i in first]}, index=at_first)
    names = [[] for _ in first]
    for image, label in zip(objects.image, objects.labels):
        names[image].append(label)
    source = pd.DataFrame({IMAGE: images["image_uri"], ML_USE: images["split"],
                           "displayName": names}, index=at_first)
    return objects_table(images, objects, source, base_dir, options,
                         label_type=STRING_LABEL)


def entries_of(path: str, uri_key: str = IMAGE, noun: str = "image"
               ) -> tuple[list[int], list[dict]]:
    """Every non-blank line's object, and its line number: each an object naming its
    file (`uri_key`: `imageGcsUri`, or a video's `videoGcsUri`, `vertex_video`)."""
    data = fs.read_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SchemaError(f"the JSONL file {path!r} is not UTF-8 (byte {error.start}). Save "
                          "it as UTF-8.") from None
    lines, entries = [], []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise SchemaError(
                f"line {number} of the JSONL file {path!r} is not JSON ({error.msg} at "
                f"column {error.colno}): {_clip(line)!r}. A JSONL file holds one JSON "
                "object a line.", rows=[number]) from None
        if not isinstance(entry, dict) or not isinstance(entry.get(uri_key), str):
            raise SchemaError(
                f"line {number} of the JSONL file {path!r} names no {noun}: "
                f"{_clip(line)!r}. Each line is an object with its {noun}'s \"{uri_key}\".",
                rows=[number])
        lines.append(number)
        entries.append(entry)
    if not entries:
        raise SchemaError(f"the JSONL file {path!r} has no lines.")
    return lines, entries


def _clip(text: str, width: int = 120) -> str:
    text = text.strip()
    return text if len(text) <= width else text[:width] + "..."


def split_of(path: str, line: int, entry: dict) -> str:
    """The line's ml_use as written ("" when none: UNASSIGNED). Vertex AI's video
    examples also write the key short, "ml_use"."""
    labels = entry.get(SPLITS) or {}
    split = labels.get(ML_USE, labels.get("ml_use", "")) if isinstance(labels, dict) \
        else None
    if not isinstance(split, str):
        raise SchemaError(f'line {line} of the JSONL file {path!r} has "{SPLITS}" '
                          f"{labels!r}: an object whose {ML_USE!r} is {_ML_USES_TEXT}.",
                          rows=[line])
    if split.strip() and split_named(split) is None:
        raise SchemaError(f'line {line} of the JSONL file {path!r} has "{ML_USE}" '
                          f"{split!r}: Vertex AI's ml_use is {_ML_USES_TEXT}. Write one of "
                          "them, or leave the key out for the line's split to be drawn "
                          "(UNASSIGNED).", rows=[line])
    return split


_ML_USES_TEXT = f"{', '.join(ML_USES[:-1])} or {ML_USES[-1]}"


def _classes(path: str, lines: list[int], entries: list[dict]) -> list:
    """Each line's class (single-label), or list of classes (when any line lists them)."""
    multi = any(CLASSES in entry for entry in entries)
    found = []
    for line, entry in zip(lines, entries):
        given = ([entry[CLASS]] if CLASS in entry else []) + list(entry.get(CLASSES) or [])
        names = [_name(path, line, annotation) for annotation in given]
        found.append(names if multi else (names[0] if names else None))
    return found


def _name(path: str, line: int, annotation) -> str | None:
    name = annotation.get("displayName") if isinstance(annotation, dict) else None
    if name is not None and not isinstance(name, str):
        raise SchemaError(f"line {line} of the JSONL file {path!r} has the displayName "
                          f"{name!r}: a class name is text.", column="label", rows=[line])
    return name


_BOX_FIX = ("A box has xMin, yMin, xMax and yMax, fractions of the image's size from 0 "
            "to 1.")
_PROBLEMS = (
    Problem("box lacking a coordinate", "whose box lacks a coordinate", _BOX_FIX),
    Problem("coordinate that is not a number", "with a coordinate that is not a number",
            _BOX_FIX),
    Problem("displayName that is not text", "whose displayName is not text",
            "A class name is text.", "label"))


def _boxes(path: str, lines: list[int], entries: list[dict], image_of: np.ndarray
           ) -> Objects:
    image, labels, boxes, rows, written, problem = [], [], [], [], [], []
    for i, (line, entry) in enumerate(zip(lines, entries)):
        annotations = entry.get(BOXES) or []
        if not isinstance(annotations, list):
            raise SchemaError(f'line {line} of the JSONL file {path!r} has "{BOXES}" '
                              f"{annotations!r}: a list of boxes.", rows=[line])
        for k, annotation in enumerate(annotations):
            name = annotation.get("displayName") if isinstance(annotation, dict) else None
            corners, code = _corners(annotation)
            if not code and name is not None and not isinstance(name, str):
                code, name = 3, None
            image.append(image_of[i])
            labels.append(name)
            boxes.append(corners)
            rows.append(line)
            written.append((f"line {line}, box {k}", _clip(json.dumps(annotation))))
            problem.append(code)
    return Objects.of(image, labels, boxes, rows,
                      lambda j: f"{written[j][0]}: {written[j][1]}",
                      f"the JSONL file {path!r}", problem=problem, problems=_PROBLEMS,
                      names=lambda j: (path, *written[j]))


def _corners(annotation) -> tuple[list[float], int]:
    """[ymin, xmin, ymax, xmax] of a box annotation (NaN where it has no coordinates, or
    not four numbers), and its problem's code in `_PROBLEMS` (0: none)."""
    given = [annotation.get(key) if isinstance(annotation, dict) else None
             for key in _CORNERS]
    if all(value is None for value in given):
        return [np.nan] * 4, 0
    values = [_number(value) for value in given]
    if any(value is None for value in given):
        return [np.nan] * 4, 1
    if None in values:
        return [np.nan] * 4, 2
    return values, 0


def _number(value) -> float | None:
    """A coordinate, given as a number or as text ("0.25"); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None

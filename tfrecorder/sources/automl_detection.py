"""AutoML Vision (and Vertex AI) object-detection CSV files: one object a line,
`[set,]image_path[,label,x1,y1,x2,y2,x3,y3,x4,y4]` without a header.

A box is given by two vertices (`x_min,y_min,,,x_max,y_max,,`) or four (its corners,
whose minima and maxima make the box), as fractions of the image's size; a line with
only the path (and split) is an image without objects. The lines of an image become one
row of the table, with its objects in file order, named by the image's first line.

The file is told from a classification CSV by its cells: coordinates after a label are
a box, never more class names (`detection.automl_cells`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import Option, SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.detection import Objects, automl_cells, images_in_order, objects_table
from tfrecorder.sources.image_paths import first_local_file_is_image, looks_like_path
from tfrecorder.sources.parquet import has_parquet_name
from tfrecorder.sources.validate import SAMPLE
from tfrecorder.table import Table
from tfrecorder.wording import count

_SNIFFED = 1 << 20  # bytes of a file looked at to tell what it is
_COORDINATES = 8  # x1,y1,...,x4,y4


def claims(path: str, folder: bool) -> bool:
    """A file without a header some of whose first lines (its first megabyte) carry
    coordinates after their label."""
    if folder or has_parquet_name(path) or path.lower().endswith((".json", ".jsonl")):
        return False
    records = _first_records(path)
    if not records or _has_header(records):
        return False
    lead = _lead(records, fs.dirname(path))
    return any(automl_cells(r[lead:]) in ("box", "ambiguous") for r in records)


def _first_records(path: str) -> list[list[str]]:
    """The records in the file's first megabyte (whole lines); none for a file that
    cannot be read as text (`csv` says why)."""
    try:
        return csv.records_of(csv.head_text(path, _SNIFFED), path)[1]
    except SchemaError:
        return []


def _has_header(records: list[list[str]]) -> bool:
    """Whether the first record names columns (as `csv` tells a header)."""
    return any(csv.names_a_column(cell) for cell in records[0]) and not any(
        looks_like_path(cell) for cell in records[0])


def _lead(records: list[list[str]], base_dir: str) -> int:
    """Where the label is: 2 after a split column, else 1. The first column is the split
    unless every first cell looks like an image path (as `csv` tells AutoML's columns)."""
    first = [r[0] for r in records]
    paths = all(looks_like_path(cell) for cell in first) or \
        first_local_file_is_image(first[:SAMPLE], base_dir)
    return 1 if paths else 2


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's detection table; with task="classification", its classification
    table, as `csv` reads it."""
    if options.task == "classification":
        return csv.read(path, base_dir, options)
    lines, records = csv.read_records(path)
    if records and (options.header or (options.header is None and _has_header(records))):
        lines, records = lines[1:], records[1:]  # AutoML's columns are by position
    if not records:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    lead = _lead(records, base_dir)
    records = [r + [""] * (lead - len(r)) for r in records]
    if options.task == "auto":
        _check_not_ambiguous(path, lines, records, lead)
    objects = _Lines(path, lines, records, lead)
    uris = [r[lead - 1] for r in records]
    splits = [r[0] for r in records] if lead == 2 else None
    first, image_of = images_in_order(uris, splits, lines)
    at_first = pd.Index([lines[i] for i in first], name="line")
    images = pd.DataFrame({"image_uri": [uris[i] for i in first]}, index=at_first)
    if splits is not None:
        images.insert(0, "split", [splits[i] for i in first])
    source = images.assign(
        label=_per_image(objects.labels, objects.entry, image_of, len(first)),
        lines=_per_image(lines, range(len(lines)), image_of, len(first)))
    return objects_table(images, objects.objects(image_of), source, base_dir, options)


def _per_image(values, entries, image_of: np.ndarray, images: int) -> list[list]:
    found = [[] for _ in range(images)]
    for value, entry in zip(values, entries):
        if value is not None:
            found[image_of[entry]].append(value)
    return found


def _check_not_ambiguous(path: str, lines: list[int], records: list[list[str]],
                         lead: int) -> None:
    """Raises for a file whose lines could be either task's: coordinates on some and
    more labels on others, or eight 0s and 1s (corners, or class ids) and no box."""
    kinds: dict[str, list[int]] = {}
    for line, record in zip(lines, records):
        kinds.setdefault(automl_cells(record[lead:]), []).append(line)

    def example(kind: str) -> str:
        line = kinds[kind][0]
        return f"line {line}: {','.join(records[lines.index(line)][lead:])!r}"

    if "labels" in kinds and ("box" in kinds or "ambiguous" in kinds):
        boxes = "box" if "box" in kinds else "ambiguous"
        what = (f"some lines carry coordinates after their label ({example(boxes)}), others "
                f"more labels ({example('labels')})")
    elif "ambiguous" in kinds and "box" not in kinds:
        what = (f"its lines end in eight 0s and 1s after the label ({example('ambiguous')}): "
                "the corners of a box, or eight more class ids")
    else:
        return
    raise SchemaError(
        f"the CSV file {path!r} could be an AutoML object-detection CSV or a multi-label "
        f"classification one: {what}. Pass ", Option("task", "detection"), " to read a box "
        "on every line with a label, or ", Option("task", "classification"), " to read every "
        "cell after the path as a class name.", option="task",
        rows=kinds.get("labels", kinds.get("ambiguous")))


class _Lines:
    """The objects of an AutoML detection file's lines: a line with a label or
    coordinates is an object; a line with the path alone is none."""

    def __init__(self, path: str, lines: list[int], records: list[list[str]], lead: int):
        self.path, self.lines, self.records, self.lead = path, lines, records, lead
        self.entry, self.labels, boxes = [], [], []
        problems: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            cells = [cell.strip() for cell in record[lead:]]
            label, coordinates = (cells[0] if cells else ""), cells[1:]
            problem, box = _box(coordinates)
            if problem:
                problems.setdefault(problem, []).append(i)
            if not label and box is None and problem is None:
                continue  # an image without objects
            self.entry.append(i)
            self.labels.append(label or None)
            boxes.append(box if box is not None else [np.nan] * 4)
        if problems:
            problem, entries = next(iter(problems.items()))
            shown = "; ".join(self.where(i) for i in entries[:3])
            more = f"; and {len(entries) - 3} more" if len(entries) > 3 else ""
            raise SchemaError(
                f"the CSV file {path!r} has {count(len(entries), 'line')} {problem}: "
                f"{shown}{more}. A box is two vertices (x_min,y_min,,,x_max,y_max,,) or four "
                "(x1,y1,x2,y2,x3,y3,x4,y4), fractions of the image's size from 0 to 1, "
                "after the label; one box a line.", rows=[lines[i] for i in entries])
        self.boxes = boxes

    def where(self, i: int) -> str:
        """Record i as the user finds it: its line and its cells after the path."""
        return f"line {self.lines[i]}: {','.join(self.records[i][self.lead:])!r}"

    def objects(self, image_of: np.ndarray) -> Objects:
        return Objects.of([image_of[i] for i in self.entry], self.labels, self.boxes,
                          [self.lines[i] for i in self.entry],
                          lambda k: self.where(self.entry[k]), f"the CSV file {self.path!r}")


def _box(cells: list[str]) -> tuple[str | None, list[float] | None]:
    """The box [ymin, xmin, ymax, xmax] of a line's coordinate cells (None: no box), or
    what is wrong with them."""
    if any(cells[_COORDINATES:]):
        return "with more than eight coordinates after the label", None
    cells = (cells + [""] * _COORDINATES)[:_COORDINATES]
    try:
        values = [float(cell) if cell else None for cell in cells]
    except ValueError:
        return "with a coordinate that is not a number", None
    vertices = [(values[k], values[k + 1]) for k in range(0, _COORDINATES, 2)]
    if any((x is None) != (y is None) for x, y in vertices):
        return "with a vertex given half (an x without its y, or a y without its x)", None
    given = [(x, y) for x, y in vertices if x is not None]
    if not given:
        return None, None
    if len(given) == 2:  # the min vertex, then the max one: as given, so a swap shows
        (x_min, y_min), (x_max, y_max) = given
        return None, [y_min, x_min, y_max, x_max]
    if len(given) == 4:
        xs, ys = [x for x, _ in given], [y for _, y in given]
        return None, [min(ys), min(xs), max(ys), max(xs)]
    return f"with {count(len(given), 'vertex', 'vertices')}, not 2 or 4", None


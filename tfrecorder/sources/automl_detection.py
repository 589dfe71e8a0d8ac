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

import io

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.annotation_policy import Objects, Problem
from tfrecorder.sources.detection import (
    _INTEGER,
    _NUMBER,
    automl_cells,
    images_in_order,
    objects_table,
)
from tfrecorder.sources.image_paths import first_local_file_is_image, looks_like_path
from tfrecorder.sources.parquet import has_parquet_name
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import SAMPLE
from tfrecorder.storage import fs
from tfrecorder.wording import LINE, count

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
    first = [r[0] for r in records]
    lead = _lead_of(first, first[:SAMPLE], fs.dirname(path))
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


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's detection table; with task="classification", its classification
    table, as `csv` reads it.

    The file is read a column at a time (`_Cells`): a million lines of boxes are a few
    arrays, not a Python list a line, and every check below is an array operation; the
    messages are built for the lines at fault only."""
    if options.task == "classification":
        return csv.read(path, base_dir, options)
    cells = _Cells.of(path)
    if cells.size and (options.header or (options.header is None
                                          and _has_header([cells.record(0)]))):
        cells = cells.without_first()  # AutoML's columns are by position
    if not cells.size:
        raise SchemaError(f"the CSV file {path!r} has no rows.")
    lead = _lead(cells, base_dir)
    shape = _Shape(cells, lead)
    if options.task == "auto":
        _check_not_ambiguous(path, cells, shape, lead)
    objects = _Objects(path, cells, shape, lead)
    uris = cells.raw(lead - 1)
    splits = cells.raw(0) if lead == 2 else None
    lines = cells.lines
    first, image_of = images_in_order(uris, splits, lines)
    images = pd.DataFrame({"image_uri": uris[first]}, index=pd.Index(lines[first], name=LINE))
    if splits is not None:
        images.insert(0, "split", splits[first])
    labelled = objects.entry[shape.label_given[objects.entry]]
    source = images.assign(
        label=_per_image(shape.labels[labelled], image_of[labelled], len(first)),
        lines=_per_image(lines, image_of, len(first)))
    return objects_table(images, objects.objects(image_of), source, base_dir, options)


def _per_image(values: np.ndarray, image_of: np.ndarray, images: int) -> list[list]:
    """Each image's values, in file order."""
    order = np.argsort(image_of, kind="stable")
    ends = np.cumsum(np.bincount(image_of, minlength=images)).tolist()
    ordered = values[order].tolist()
    return [ordered[start:end] for start, end in zip([0, *ends[:-1]], ends)]


class _Cells:
    """A header-less CSV file's non-blank records as columns: each column's cells as
    codes into its distinct values (`pd.factorize`), "" where a record is shorter.

    Attributes:
        lines: the line each record starts on.
        fields: each record's number of cells, as written.
    """

    def __init__(self, lines: np.ndarray, fields: np.ndarray, columns: list,
                 records: list | None = None):
        self.lines, self.fields, self.columns, self._records = lines, fields, columns, records
        self.size = len(lines)

    @classmethod
    def of(cls, path: str) -> _Cells:
        data = fs.read_bytes(path)
        text = csv.decode(data, path)
        if '"' in text or "\0" in text or not text.strip():
            return cls.of_records(*csv.records_of(text, path))
        # Without quotes a record is a line, and pandas' C parser splits it as the csv
        # module does.
        raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        ends = np.flatnonzero(raw == 10)
        returns = np.flatnonzero(raw == 13)
        if len(returns):  # \r\n is one line break, \r alone another
            alone = returns[(returns + 1 >= len(raw)) | (raw[np.minimum(returns + 1,
                                                                        len(raw) - 1)] != 10)]
            ends = np.union1d(ends, alone)
        if not len(ends) or ends[-1] != len(raw) - 1:
            ends = np.append(ends, len(raw))
        commas = np.flatnonzero(raw == 44)
        bounds = np.searchsorted(commas, np.concatenate([[-1], ends]))
        fields = np.diff(bounds) + 1
        del raw, commas, bounds
        width = int(fields.max())
        frame = pd.read_csv(io.StringIO(text), header=None, names=range(width), dtype=object,
                            keep_default_na=False, na_filter=False, skip_blank_lines=False,
                            engine="c")
        del text
        if len(frame) != len(fields):  # never seen: the csv module decides
            return cls.of_records(*csv.read_records(path))
        columns = [_codes(frame.pop(j)) for j in range(width)]
        blank = np.ones(len(fields), dtype=bool)
        for codes, values in columns:
            blank &= np.array([not v.strip() for v in values], dtype=bool)[codes]
        kept = np.flatnonzero(~blank)
        return cls(kept + 1, fields[kept], [(codes[kept], values) for codes, values in columns])

    @classmethod
    def of_records(cls, lines: list[int], records: list[list[str]]) -> _Cells:
        width = max(map(len, records), default=0)
        columns = [_codes(pd.Series([r[j] if j < len(r) else "" for r in records],
                                    dtype=object)) for j in range(width)]
        return cls(np.asarray(lines, dtype=np.int64),
                   np.fromiter(map(len, records), np.int64, len(records)), columns, records)

    def without_first(self) -> _Cells:
        return _Cells(self.lines[1:], self.fields[1:],
                      [(codes[1:], values) for codes, values in self.columns],
                      self._records[1:] if self._records is not None else None)

    def record(self, i: int) -> list[str]:
        """Record i as the csv module reads it."""
        if self._records is not None:
            return self._records[i]
        return [self.columns[j][1][self.columns[j][0][i]] for j in range(self.fields[i])]

    def raw(self, j: int) -> np.ndarray:
        """Column j's cells, as written (an object array)."""
        if j >= len(self.columns):
            return np.full(self.size, "", dtype=object)
        codes, values = self.columns[j]
        return np.asarray(values, dtype=object)[codes]

    def per_value(self, j: int, function, dtype) -> np.ndarray:
        """`function` of each cell of column j (stripped), computed once a distinct
        value."""
        if j >= len(self.columns):
            return np.full(self.size, function(""), dtype=dtype)
        codes, values = self.columns[j]
        return np.fromiter((function(v.strip()) for v in values), dtype, len(values))[codes]


def _codes(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    codes, values = pd.factorize(column, use_na_sentinel=False)
    return codes.astype(np.int32), list(values)


def _lead(cells: _Cells, base_dir: str) -> int:
    """Where the label is: 2 after a split column, else 1. The first column is the split
    unless every first cell looks like an image path (as `csv` tells AutoML's columns)."""
    codes, values = cells.columns[0]
    distinct = [values[k] for k in np.unique(codes).tolist()]  # each asked once
    return _lead_of(distinct, cells.raw(0)[:SAMPLE].tolist(), base_dir)


def _lead_of(first: list[str], sample: list[str], base_dir: str) -> int:
    paths = all(looks_like_path(cell) for cell in first) or \
        first_local_file_is_image(sample, base_dir)
    return 1 if paths else 2


def _float(text: str) -> float:
    if not text:
        return np.nan
    try:
        return float(text)
    except ValueError:
        return np.nan


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Shape:
    """What the cells after each record's path hold, a column at a time: as
    `detection.automl_cells` tells them, and as `_box` reads them."""

    def __init__(self, cells: _Cells, lead: int):
        width = max(len(cells.columns), lead + 1)
        self.labels = cells.per_value(lead, lambda v: v or None, object)
        given = [cells.per_value(j, bool, bool) for j in range(lead + 1, width)]
        self.label_given = cells.per_value(lead, bool, bool)
        none = np.zeros(cells.size, dtype=bool)
        self.given = given + [none] * max(0, _COORDINATES - len(given))
        self.fraction = [cells.per_value(j, _is_fraction, bool) for j in range(lead + 1, width)]
        self.integer = [cells.per_value(j, _is_integer, bool) for j in range(lead + 1, width)]
        self.zero_one = [cells.per_value(j, lambda v: v in ("0", "1"), bool)
                         for j in range(lead + 1, lead + 1 + _COORDINATES)]
        self.values = [cells.per_value(j, _float, np.float64)
                       for j in range(lead + 1, lead + 1 + _COORDINATES)]
        self.number = [cells.per_value(j, lambda v: not v or _is_float(v), bool)
                       for j in range(lead + 1, lead + 1 + _COORDINATES)]
        self.beyond = np.logical_or.reduce(given[_COORDINATES:], initial=False) \
            if len(given) > _COORDINATES else none

    def kinds(self) -> np.ndarray:
        """Each record's `automl_cells` kind."""
        g = self.given
        any_given = np.logical_or.reduce(g, initial=False) if g else np.zeros_like(
            self.label_given)
        kind = np.where(any_given, "labels", np.where(self.label_given, "label", "image"))
        box = np.logical_or.reduce(self.fraction, initial=False) if self.fraction else \
            np.zeros_like(self.label_given)
        words = np.logical_or.reduce([gi & ~ii for gi, ii in zip(g, self.integer)],
                                     initial=False) if self.integer else np.zeros_like(box)
        two = g[0] & g[1] & ~g[2] & ~g[3] & g[4] & ~g[6] & ~g[7] & ~self.beyond
        ambiguous = np.logical_and.reduce(g[:_COORDINATES]) & np.logical_and.reduce(
            self.zero_one) & ~self.beyond
        shaped = any_given & ~box & ~words
        kind = np.where(shaped & two, "box", kind)
        kind = np.where(shaped & ~two & ambiguous, "ambiguous", kind)
        return np.where(any_given & box, "box", kind)


def _is_fraction(text: str) -> bool:
    return bool(_NUMBER.match(text)) and not _INTEGER.match(text)


def _is_integer(text: str) -> bool:
    return bool(_INTEGER.match(text))


def _check_not_ambiguous(path: str, cells: _Cells, shape: _Shape, lead: int) -> None:
    """Raises for a file whose lines could be either task's: coordinates on some and
    more labels on others, or eight 0s and 1s (corners, or class ids) and no box."""
    kind = shape.kinds()
    kinds = {k: cells.lines[kind == k].tolist() for k in ("labels", "box", "ambiguous")
             if (kind == k).any()}

    def example(name: str) -> str:
        i = int(np.argmax(kind == name))
        return f"line {cells.lines[i]}: {','.join(_padded(cells, i, lead)[lead:])!r}"

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


def _padded(cells: _Cells, i: int, lead: int) -> list[str]:
    record = cells.record(i)
    return record + [""] * (lead - len(record))


# What can be wrong with a line's coordinates (`annotation_policy.Problem`), by
# `_Objects`' code for it.
_FORMAT_FIX = ("A box is two vertices (x_min,y_min,,,x_max,y_max,,) or four "
               "(x1,y1,x2,y2,x3,y3,x4,y4), fractions of the image's size from 0 to 1, after "
               "the label; one box a line.")
_PROBLEMS = (
    Problem("more than eight coordinates", "with more than eight coordinates after the "
            "label", _FORMAT_FIX),
    Problem("coordinate that is not a number", "with a coordinate that is not a number",
            _FORMAT_FIX),
    Problem("vertex given half", "with a vertex given half (an x without its y, or a y "
            "without its x)", _FORMAT_FIX),
    Problem("box of neither 2 nor 4 vertices", "with a box of neither 2 nor 4 vertices",
            _FORMAT_FIX))


class _Objects:
    """The objects of an AutoML detection file's records: a record with a label or
    coordinates is an object; a record with the path alone is none. A record whose
    coordinates make no box is an object with its problem marked."""

    def __init__(self, path: str, cells: _Cells, shape: _Shape, lead: int):
        self.path, self.cells, self.lead = path, cells, lead
        g, values = shape.given, shape.values
        not_number = np.logical_or.reduce([gi & ~ni for gi, ni in zip(g, shape.number)])
        half = np.logical_or.reduce([g[k] != g[k + 1] for k in range(0, _COORDINATES, 2)])
        vertices = np.stack([g[k] & g[k + 1] for k in range(0, _COORDINATES, 2)], axis=1)
        given = vertices.sum(axis=1)
        problem = np.select(
            [shape.beyond, not_number, half, (given != 0) & (given != 2) & (given != 4)],
            [1, 2, 3, 4], 0).astype(np.int16)
        xs = np.stack(values[0::2], axis=1)
        ys = np.stack(values[1::2], axis=1)
        boxes = np.full((cells.size, 4), np.nan)
        two = (given == 2) & (problem == 0)
        if two.any():  # the min vertex, then the max one: as given, so a swap shows
            rows = np.flatnonzero(two)
            at = vertices[rows]
            low = np.argmax(at, axis=1)
            high = 3 - np.argmax(at[:, ::-1], axis=1)
            boxes[rows] = np.stack([ys[rows, low], xs[rows, low], ys[rows, high],
                                    xs[rows, high]], axis=1)
        four = (given == 4) & (problem == 0)
        if four.any():
            boxes[four] = np.stack([ys[four].min(axis=1), xs[four].min(axis=1),
                                    ys[four].max(axis=1), xs[four].max(axis=1)], axis=1)
            # NaN and -0.0 among four corners: Python's min and max, as `_box` reads them
            odd = np.flatnonzero(four & (np.isnan(xs).any(axis=1) | np.isnan(ys).any(axis=1)
                                         | np.signbit(xs).any(axis=1)
                                         | np.signbit(ys).any(axis=1)))
            for i in odd.tolist():
                boxes[i] = vertices_box([self.cells.record(i)[j].strip() if j < cells.fields[i]
                                 else "" for j in range(lead + 1, lead + 1 + _COORDINATES)])[1]
        self.entry = np.flatnonzero(shape.label_given | (given > 0) | (problem > 0))
        self.labels = shape.labels[self.entry]
        self.boxes = boxes[self.entry]
        self.problem = problem[self.entry]

    def where(self, i: int) -> str:
        """Record i as the user finds it: its line and its cells after the path."""
        return (f"line {self.cells.lines[i]}: "
                f"{','.join(_padded(self.cells, i, self.lead)[self.lead:])!r}")

    def objects(self, image_of: np.ndarray) -> Objects:
        def names(k: int) -> tuple[str, object, str]:
            i = int(self.entry[k])
            return (self.path, f"line {self.cells.lines[i]}",
                    ",".join(_padded(self.cells, i, self.lead)[self.lead:]))

        return Objects.of(image_of[self.entry], self.labels, self.boxes,
                          self.cells.lines[self.entry],
                          lambda k: self.where(int(self.entry[k])),
                          f"the CSV file {self.path!r}", problem=self.problem,
                          problems=_PROBLEMS, names=names)


def vertices_box(cells: list[str]) -> tuple[str | None, list[float] | None]:
    """The box [ymin, xmin, ymax, xmax] of a line's eight coordinate cells (two vertices,
    `x_min,y_min,,,x_max,y_max,,`, or four; None: no box), or what is wrong with them.
    Also Vertex AI's video object-tracking CSV's (`vertex_video`)."""
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


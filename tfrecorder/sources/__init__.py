"""Every source -> one validated `Table`: the readers, one module per format, and the
dispatcher that picks one.

    csv.py          AutoML Vision CSV files, or any columns under a header row
    parquet.py      Parquet files and folders of them
    folder.py       image folders: label/file or split/label/file
    memory.py       NumPy arrays, dicts of columns or of splits, Hugging Face datasets
    chunked.py      CSV and Parquet files larger than memory, a chunk of rows at a time
    tables.py       tables whose columns say their task: `mask_uri` (segmentation.py),
                    a column of boxes (detection.py)
    automl_detection.py  AutoML Vision / Vertex AI object-detection CSV files
    vertex_jsonl.py Vertex AI JSONL import files (classes or boxes)
    vertex_video.py Vertex AI video import files, JSONL and CSV: classification, action
                    recognition, object tracking (issue 49)
    clips_csv.py    clips CSV files as DeepMind's DMVR takes them: path,start,end,label
    media.py        what video and audio sources share: times, clips, the clip table
    coco.py         COCO object-detection JSON files
    coco_folder.py  COCO datasets as downloaded: COCO's, datumaro's, Roboflow's folders
    pascal_voc.py   Pascal VOC XML files (LabelImg, CVAT, the VOC2007/2012 layout)
    yolo.py         YOLO (Ultralytics) datasets: a data.yaml and its label files
    detection.py    what detection sources share: the objects' columns and checks
    segmentation.py tables of images and their masks (`mask_uri`)
    table_files.py  a glob or folder of CSV, Parquet or JSONL files (in hive partitions
                    too), read as one table
    validate.py     the checks every source shares (with labels.py, image_paths.py)

A file format is a module with two functions: `claims(path, folder)`, whether the path
is of that format (by its name, or by its content where the name does not say), and
`read(path, base_dir, options)`, the validated table (relative image paths resolved
against `base_dir`: a folder source's own, or a file's folder). `FILE_FORMATS` asks them
in order; a new format is one module and one entry there. Every reader ends in `validate`, so every
source is checked alike, before a single image is read.

A reader reads for the `task` asked where its source allows (a detection CSV read for
classification reads its cells as labels), and the dispatcher refuses a table of
another task than the one asked, saying what that task needs.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import operator
import os
from collections.abc import Mapping

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError, SourceNotFoundError
from tfrecorder.format.manifest import AnnotationCounts
from tfrecorder.format.splits import split_named
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.options import TableOptions
from tfrecorder.sources import (
    automl_detection,
    clips_csv,
    coco,
    coco_folder,
    csv,
    folder,
    memory,
    parquet,
    pascal_voc,
    table_files,
    tables,
    vertex_jsonl,
    vertex_video,
    yolo,
)
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.wording import shown

# Asked in order: the first that claims a path reads it. CSV claims every file, so last;
# the formats that look into a file's content to claim it come before it, and `tables`
# (Parquet and CSV files whose columns name their task) before Parquet. A folder is
# told apart by what it holds before `folder` takes it as label/file: CSV or JSONL files
# in hive partitions (`table_files`), a YOLO data file (`yolo`), COCO files where COCO,
# datumaro and Roboflow put them (`coco_folder`), Pascal VOC XML annotations
# (`pascal_voc`); `folder` refuses annotations it would lose (other XML files, a
# labels/ tree). Vertex AI's video files and clips CSVs are told by their
# content before `vertex_jsonl` (which takes any `.jsonl`) and `automl_detection` (whose
# boxes an object-tracking line's resemble): a video JSONL names `videoGcsUri`, and a
# video CSV line starts with a video path.
FILE_FORMATS = (tables, parquet, table_files, yolo, coco_folder, pascal_voc, folder,
                vertex_video, clips_csv, vertex_jsonl, coco, automl_detection, csv)
# What each task needs, for an error when the source is read for another.
_NEEDS = {
    "classification": "labels of whole images",
    "detection": "boxes: an AutoML object-detection CSV, a Vertex AI JSONL file with "
                 "boundingBoxAnnotations, a COCO JSON file or folder, a folder of Pascal "
                 "VOC XML files, a YOLO data.yaml, or a table with a 'boxes' column (a list of "
                 "[ymin, xmin, ymax, xmax] an image) and a 'label' column of lists, one "
                 "class a box",
    "segmentation": "a table with an 'image_uri' and a 'mask_uri' column",
}


def load_table(source: pd.DataFrame | str | os.PathLike | tuple | Mapping,
               **options) -> Table:
    """Reads and validates `source`: a DataFrame, a CSV or Parquet path, an image folder,
    or images in memory (arrays, dicts of columns or of splits, Hugging Face datasets).

    Args:
        source: the DataFrame; the path of a CSV file; a Parquet file (`.parquet` or `.pq`)
            or a folder of them (`part-*.parquet`, as pandas and Spark write, or in hive
            partitions such as `split=TRAIN/`); an image folder laid out as `label/file`
            or `split/label/file`; an AutoML object-detection CSV, a Vertex AI JSONL file,
            a COCO JSON file or a COCO folder as downloaded (`coco_folder`), a folder
            of Pascal VOC XML files or one of them, or a YOLO data.yaml (or its folder)
            (docs/detection.md); a dict of such files by split; a glob of CSV, Parquet
            or JSONL files, or a folder of only CSV or only JSONL files, read as one
            table in sorted path order, or a list of such files, in its order
            (`table_files`), or a folder of CSV or JSONL files in hive partitions; or
            images in memory (`memory`).
        options: `TableOptions`' fields (header, schema, fill_missing, chunk_rows, split,
            task, image_root, difficult).

    Raises:
        SchemaError: for a source that is not what `task` asks for, and for every
            mistake in it (`validate`, and each format's own checks).
    """
    options = TableOptions(**options)
    if _is_files_by_split(source):
        return _for_task(_files_by_split(source, options), options, "the files")
    frame, implied, class_names = (memory.as_frame(source) if memory.is_in_memory(source)
                                   else (source, {}, None))  # arrays, dicts, HF datasets
    if isinstance(frame, pd.DataFrame):
        _refuse_image_roots(options, "the table's image paths are its own")
        table = tables.frame_table(frame, os.getcwd(), options, implied)
        return _for_task(dataclasses.replace(table, class_names=class_names), options,
                         "the table")
    files = table_files.table_files(source)  # a glob, a list, or a folder of CSV or JSONL
    if files is None and not isinstance(source, (str, os.PathLike)):
        raise SchemaError(
            f"source must be a DataFrame, the path of a CSV file, Parquet file or image "
            f"folder, a list of table files, NumPy arrays (images, labels), a dict of "
            f"columns or of splits, or a Hugging Face Dataset; not {shown(source)}.")
    if files is not None:
        named = (repr(os.fspath(source)) if isinstance(source, (str, os.PathLike))
                 else f"the list of {len(files)} files")
        _refuse_image_roots(options, f"{named} is a source of table files, whose image "
                            "paths are their own")
        return _for_task(table_files.files_table(files, options), options, named)
    return read_path(os.fspath(source), options)


def read_path(path: str, options: TableOptions) -> Table:
    """The table of one path (a file, a folder, their URIs), read by the first of
    `FILE_FORMATS` that claims it: what `load_table` reads a path with, and each file
    of a source of many files (`table_files`)."""
    path, is_folder, reader = _claimed(path, options)
    if reader is not coco_folder and isinstance(options.image_root, Mapping):
        _refuse_image_roots(options, _one_folder(path, reader))
    # Relative image paths are relative to the source's folder, local or remote.
    base_dir = path.rstrip("/") if is_folder else fs.dirname(path)
    return _for_task(reader.read(path, base_dir, options), options, repr(path))


def read_folder_file(folder: parquet.ParquetFolder, path: str, options: TableOptions
                     ) -> Table:
    """One file of a Parquet folder or a hive folder of CSV or JSONL files, as the
    folder's whole read (`read_path`) gives its rows: its partition columns, its images
    relative to the folder (a Beam job's worker reads the folder so, a file each)."""
    read = parquet.read_file_of_folder if folder.format == "Parquet" \
        else table_files.read_folder_file
    return _for_task(read(folder, path, options), options, repr(folder.root))


def _claimed(path: str, options: TableOptions) -> tuple[str, bool, object]:
    """The path (absolute, if a local folder), whether it is a folder, and the module of
    `FILE_FORMATS` that reads it."""
    if fs.is_file_uri(path):
        try:
            path = fs.file_uri_path(path)
        except ValueError as error:
            raise ValueError(f"{path!r} is not a usable file:// URI: {error}") from None
    if fs.is_web(path):  # (a bucket store's client probes its endpoint itself)
        fs.filesystem(path)  # a missing back-end (the http extra) is said first
        fs.check_reachable(path)  # in seconds: the web client waited 30 s for a silent host
    is_folder = fs.is_folder(path)
    if is_folder and not fs.is_remote(path):
        path = os.path.abspath(path)
    elif not is_folder and not fs.exists(path):
        what = "Parquet file or folder" if parquet.has_parquet_name(path) else \
            "CSV file or image folder"
        raise SourceNotFoundError(f"no such {what}: {path!r}")
    reader = next(f for f in FILE_FORMATS if f.claims(path, is_folder))
    if reader is csv and options.task == "detection":
        reader = automl_detection  # a CSV read for its boxes is AutoML's, whatever its rows
    return path, is_folder, reader


# --- a folder of images by split (`image_root={"train": ...}`) ------------------------------

# The formats whose file names `image_root` roots, each file its own split's folder.
_ROOTED_BY_SPLIT = (coco, coco_folder)


def _refuse_image_roots(options: TableOptions, why: str) -> None:
    """Refuses a dict of image folders by split for a source it would not apply to."""
    if isinstance(options.image_root, Mapping):
        raise SchemaError(
            "", Option("image_root", options.image_root), f" gives each split its image "
            f"folder, and {why}. A folder by split is for COCO files of their own splits: "
            "a dict of them by split ({'train': 'annotations/instances_train2017.json', "
            "...}, or SPLIT=PATH on the command line), or a COCO folder. Pass one folder, "
            "or leave ", Option("image_root"), " out.", option="image_root")


def _one_folder(path: str, reader) -> str:
    """Why the file at `path` takes one image folder, if any."""
    if reader is yolo:
        return (f"the YOLO dataset {path!r} names each split's images itself (its "
                "train:, val: and test: entries); its image_root is the dataset's root, "
                "one folder")
    if reader is coco:
        return f"{path!r} is one COCO file, whose rows take one split"
    return f"{path!r} is read by tfrecorder.sources.{reader.__name__.rsplit('.', 1)[-1]}"


def _is_files_by_split(source) -> bool:
    """A dict of paths under split names: one dataset's splits, each a file of its own
    (COCO's instances_train2017.json and instances_val2017.json)."""
    return isinstance(source, Mapping) and bool(source) and all(
        isinstance(key, str) and split_named(key) is not None for key in source) and all(
        isinstance(value, (str, os.PathLike)) for value in source.values())


def _files_by_split(source: Mapping, options: TableOptions) -> Table:
    """The tables of each split's file, read as that split (each file's images relative
    to its own folder unless `image_root` gives one: a folder for all, or a dict by
    split, `_split_roots`), as one table with one label map.

    Raises:
        SchemaError: for a split named twice, or files that are not of one kind (a
            detection file beside a classification one, different input columns, the
            same category id under two names).
    """
    if options.split is not None:
        raise SchemaError("", Option("split", options.split), " gives every row one split, "
                          "but a dict of files by split names each file's split. Leave one "
                          "out.", option="split")
    splits = [split_named(key) for key in source]
    twice = next((split for split in splits if splits.count(split) > 1), None)
    if twice is not None:
        keys = [key for key, split in zip(source, splits) if split == twice]
        raise SchemaError(f"the dict of files names the split {str(twice).upper()} twice "
                          f"(keys {keys}). Give each split one file.", option="source")
    roots = _split_roots(source, splits, options)
    parts = {key: load_table(path, **{**dataclasses.asdict(options), "split": str(split),
                                      "image_root": root})
             for (key, path), split, root in zip(source.items(), splits, roots)}
    return concat_tables(parts, {key: os.fspath(path) for key, path in source.items()})


def _split_roots(source: Mapping, splits: list, options: TableOptions) -> list:
    """Each file's `image_root` (`split_roots`), once each file is known to be COCO where
    `image_root` is a dict by split.

    Raises:
        SchemaError: for a file that is not COCO (its images are not named relative to a
            folder we choose), or a folder of a split the source has no file of.
    """
    if isinstance(options.image_root, Mapping):
        for path in source.values():
            path, _, reader = _claimed(os.fspath(path), options)
            if reader not in _ROOTED_BY_SPLIT:
                _refuse_image_roots(options, _one_folder(path, reader))
    return split_roots(options.image_root, [str(split) for split in splits], "the source")


def split_roots(image_root, splits: list[str], source: str) -> list:
    """The `image_root` of each of a source's files, given their splits: its split's
    folder where `image_root` is a dict by split (None, the file's own, for a split it
    does not name), else `image_root` itself. Shared by a dict of files by split and a
    COCO folder (`coco_folder`).

    Raises:
        SchemaError: for a folder of a split that `source` has no file of.
    """
    if not isinstance(image_root, Mapping):
        return [image_root] * len(splits)
    unknown = sorted(set(image_root) - set(splits))
    if unknown:
        raise SchemaError(
            "", Option("image_root", image_root), f" names a folder for {unknown[0]}, and "
            f"{source} has no file of that split (its splits: {', '.join(splits)}). Name "
            "the folders of its splits.", option="image_root")
    return [image_root.get(split) for split in splits]


def concat_tables(parts: Mapping[str, Table], names: Mapping[str, str],
                  name_rows: bool = True) -> Table:
    """Tables of one kind as one: their rows named `key[row]` (`named_table`), their
    source's own label maps merged (the same id names the same class in every part).

    Args:
        parts: each part's table, by the key the user gave it.
        names: each part's source, for messages.
        name_rows: False for parts whose rows `named_table` has named already.

    Raises:
        SchemaError: for parts not of one kind: another task, labels or none, text
            labels and integer ones, other input columns or types.
    """
    first_key, first = next(iter(parts.items()))
    for key, part in parts.items():
        for field_name, what in (("task", "a {} source"), ("multi_label", "multi-label: {}"),
                                 ("has_labels", "labelled: {}"),
                                 ("keypoint_names", "keypoints {}")):
            if getattr(part, field_name) != getattr(first, field_name):
                raise SchemaError(
                    f"{names[key]!r} and {names[first_key]!r} are not of one kind: "
                    f"{what.format(getattr(part, field_name))} and "
                    f"{what.format(getattr(first, field_name))}. The files of one dataset "
                    "hold the same kind of rows.", option="source")
        _check_label_kinds(first_key, first, key, part, names)
        _check_inputs(first_key, first, key, part, names)
    if name_rows:
        parts = {key: named_table(part, key) for key, part in parts.items()}

    def joined(frames: list) -> pd.DataFrame | None:
        found = [frame for frame in frames if frame is not None]
        return pd.concat(found) if found else None

    grids = {name: np.concatenate([part.number_grids[name] for part in parts.values()])
             for name in first.number_grids
             if all(name in part.number_grids for part in parts.values())}
    return dataclasses.replace(
        first, rows=joined([p.rows for p in parts.values()]),
        source=joined([p.source for p in parts.values()]),
        label_map=_merged_label_maps({k: p.label_map for k, p in parts.items()}, names),
        rejected_rows=joined([p.rejected_rows for p in parts.values()]),
        skipped_annotations=joined([p.skipped_annotations for p in parts.values()]),
        annotations=_summed([p.annotations for p in parts.values()]),
        cell_words={}, number_grids=grids)


def _summed(counts: list[AnnotationCounts | None]) -> AnnotationCounts | None:
    found = [c for c in counts if c is not None]
    return functools.reduce(operator.add, found) if found else None


def named_table(table: Table, key: str) -> Table:
    """The table with its rows named `key[row]` ("train[21]", "rows-00014.csv[7]"),
    under its index's name: `train[21]` stays line 21 of a CSV file, in messages and
    rejected.csv."""

    def named(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None:
            return None
        frame = frame.copy(deep=False)
        frame.index = pd.Index([f"{key}[{label}]" for label in frame.index.tolist()],
                               name=frame.index.name)
        return frame

    return dataclasses.replace(
        table, rows=named(table.rows), source=named(table.source),
        rejected_rows=named(table.rejected_rows),
        skipped_annotations=named(table.skipped_annotations))


def _check_inputs(first_key: str, first: Table, key: str, part: Table,
                  names: Mapping[str, str]) -> None:
    """Raises for parts whose input columns differ, or hold another type (a column of
    whole numbers in one file, with fractions in another)."""
    ours = {c.name: c.dtype for c in part.inputs}
    theirs = {c.name: c.dtype for c in first.inputs}
    retyped = sorted(name for name in ours.keys() & theirs.keys()
                     if ours[name] != theirs[name])
    if retyped:
        column = retyped[0]
        raise SchemaError(
            f"column {column!r} holds {ours[column]} values in {names[key]!r} and "
            f"{theirs[column]} values in {names[first_key]!r}: a column has one type in "
            "every file of a table. Give it one with ",
            Option("schema", {column: _TYPE_FOR[{ours[column], theirs[column]}
                                               <= {"int64", "float32"}]}),
            " (the values are read as that type in every file).", column=column,
            option="schema")
    if ours.keys() != theirs.keys():
        differ = sorted(ours.keys() ^ theirs.keys())
        raise SchemaError(
            f"{names[key]!r} and {names[first_key]!r} have different columns: "
            f"{differ}. The files of one dataset hold the same features: drop the extra "
            "ones with ", Option("schema", dict.fromkeys(differ)), ".", option="schema")


# The type two parts' kinds of a column are both read as: numbers as floats, else text.
_TYPE_FOR = {True: "FloatInput", False: "StringInput"}


def _check_label_kinds(first_key: str, first: Table, key: str, part: Table,
                       names: Mapping[str, str]) -> None:
    """Raises for text labels in one part and integer labels in another: ids and class
    names cannot be told apart in one vocabulary."""
    ours, theirs = _label_kind(part), _label_kind(first)
    if ours and theirs and ours != theirs:
        column = part.label_column or "label"
        raise SchemaError(
            f"{names[key]!r} has {ours} labels and {names[first_key]!r} {theirs} labels "
            f"(column {column!r}): the labels of a table are all class names or all class "
            "ids. Write them one way in every file, or read them all as names with ",
            Option("schema", {column: "StringLabel"}), ".", column=column, option="schema")


def _label_kind(table: Table) -> str | None:
    """'text' or 'integer': what the table's labels are (`labels.row_labels` makes them
    all one or the other); None without labels."""
    if not table.has_labels:
        return None
    for value in table.rows["label"]:
        for label in value if table.multi_label else [value]:
            if isinstance(label, str):
                return "text"
            if isinstance(label, numbers.Integral):
                return "integer"
    return None


def _merged_label_maps(maps: Mapping[str, LabelMap | None], names: Mapping[str, str]
                       ) -> LabelMap | None:
    """One label map of every part's classes: a class keeps its id in every part."""
    given = {key: found for key, found in maps.items() if found is not None}
    if not given:
        return None
    if len(given) < len(maps):
        without = next(key for key in maps if key not in given)
        raise SchemaError(f"{names[without]!r} does not list its classes and "
                          f"{names[next(iter(given))]!r} does: the ids of one dataset come "
                          "from one list. Give both files their categories, or pass ",
                          Option("label_vocabulary"), ".", option="source")
    by_id: dict[int, tuple[str, str]] = {}
    for key, found in given.items():
        for model_id, name in zip(found.model_ids, found.names):
            other = by_id.setdefault(model_id, (name, key))
            if other[0] != name:
                raise SchemaError(
                    f"{names[key]!r} names class id {model_id} {name!r}, and "
                    f"{names[other[1]]!r} names it {other[0]!r}: one id is one class in "
                    "every split. Fix the files, or pass ", Option("label_vocabulary"),
                    " to number the classes by name.", option="source")
    return LabelMap.of([name for name, _ in by_id.values()], list(by_id))


def _for_task(table: Table, options: TableOptions, what: str) -> Table:
    """The table, if it is what `task` asks for (every reader reads for the task asked
    where its source allows)."""
    if options.task in ("auto", table.task):
        return table
    raise SchemaError(
        f"{what} is read as a {table.task} source, and ", Option("task", options.task),
        f" needs {_NEEDS[options.task]}. Pass the source that has them, or leave ",
        Option("task"), " out to read this one.", option="task")

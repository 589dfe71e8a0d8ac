"""YOLO (Ultralytics) datasets: a data file (`data.yaml`) and a label file beside each
image, read as Ultralytics' `check_det_dataset` and `img2label_paths` read them.

The data file (`.yaml` or `.yml`, or the folder holding one) says:

- `names`: the classes, a list or a mapping {0: name, ...} (without it, `nc` classes
  `class_0`, ...). Their order is the vocabulary: class k keeps id k in our layout and
  k + 1 in the tf_models layout (0 is the background), used or not (`Table.label_map`).
- `path`: the dataset's root; by default the data file's folder, and relative to that
  folder when relative (Ultralytics takes its working or datasets folder).
  `image_root=` replaces it: a data file written elsewhere (`path: /content/datasets/x`).
- `train`, `val` (or `validation`) and `test`: the TRAIN, VALIDATION and TEST splits,
  each a folder of images (searched below it), a list file (`.txt`, one image a line:
  `./x` relative to the list file's folder, as Ultralytics reads it, other relative
  paths to the root), or a list of them. An entry `../x` that is not there is `x`, as
  Ultralytics reads Roboflow's exports.

An image's label file is its path with the last `/images/` made `/labels/` and its
extension `.txt` (`images/train/a.jpg` -> `labels/train/a.txt`). Each line is an object:

- `class cx cy w h`: the box's centre and size as fractions of the image's, stored as
  [cy - h/2, cx - w/2, cy + h/2, cx + w/2]. As Ultralytics' `verify_image_label`, the
  numbers may be `TOLERANCE` (1%) outside 0..1; the box is then clipped to the image, as
  Ultralytics clips it when it trains, and counted. A line further out, of a class id
  `names` lacks, or not numbers is a bad annotation (`annotation_policy`): skipped and
  listed with its file and line, or with invalid_annotations="error" refused.
- `class x1 y1 x2 y2 x3 y3 ...` (YOLO-seg): a polygon, as fractions. Its box is the
  polygon's bounding box, and it becomes the object's instance mask (`objects/mask`,
  relative polygons drawn at the stored image's size by `annotations`). In a dataset
  with polygons, an object given as a box has an empty mask, as a COCO annotation
  without a segmentation.

An empty or missing label file is an image without objects, as Ultralytics reads it (a
missing one is counted: `AnnotationCounts.unannotated_images`); one that is not text
rejects its image. A label file in the `labels/` folder of a split's images whose image
is not there has its lines listed as skipped annotations. Every label file is read and
checked before any image is. Rows are named by the image's path relative to the root.

A folder without a data file whose images have their label files beside them, with the
classes one a line in `classes.txt` (LabelImg's YOLO output) or `obj.names` (Darknet's,
CVAT's "YOLO 1.1"), is read the same way (`CLASS_FILES`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.manifest import EXAMPLES_KEPT, AnnotationCounts
from tfrecorder.format.splits import UNASSIGNED, Split, split_named
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.options import TableOptions
from tfrecorder.sources.annotation_policy import Objects, Problem, skipped_rows
from tfrecorder.sources.detection import objects_table
from tfrecorder.sources.image_paths import has_image_extension, resolve
from tfrecorder.sources.schema import STRING_LABEL
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.wording import count

# How far outside 0..1 a label's numbers may be: Ultralytics' `verify_image_label`
# ("Coordinate points check with 1% tolerance"); its training then clips the boxes.
TOLERANCE = 0.01
SUFFIXES = (".yaml", ".yml")
# The data file's split entries, in reading order ('validation' is Ultralytics' other
# spelling of 'val', read where 'val' is not given).
_SPLIT_KEYS = ("train", "val", "validation", "test")
_READERS = 16  # label files read at a time (a bucket answers each in tens of ms)
_FORMAT = ("A label line is `class cx cy w h` (a box) or `class x1 y1 x2 y2 x3 y3 ...` "
           "(a polygon): a class id from 0, then fractions of the image's width and "
           "height.")


def claims(path: str, folder: bool) -> bool:
    """A `.yaml` or `.yml` file (one that is no YOLO data file is told what it lacks);
    or a folder holding a YOLO data file at its top, or a list of classes beside label
    files (`CLASS_FILES`)."""
    if not folder:
        return path.lower().endswith(SUFFIXES)
    return bool(data_files(path)) or _class_file(path) is not None


# The list of classes, one a line, of a folder of images and their label files side by
# side: LabelImg's YOLO output (`classes.txt`), Darknet's and CVAT's "YOLO 1.1" (`obj.names`).
CLASS_FILES = ("classes.txt", "obj.names")


def _class_file(folder: str) -> str | None:
    """The list of classes at the top of a folder without a data file, where a label file
    lies beside an image below it."""
    top = set(fs.list_dir(folder))
    found = next((name for name in CLASS_FILES if name in top), None)
    if found is None:
        return None
    files = set(fs.list_files(folder))
    if any(uri.endswith(".txt") and fs.basename(uri) not in CLASS_FILES
           and any(uri[:-4] + ext in files for ext in (".jpg", ".jpeg", ".png"))
           for uri in files):
        return fs.join(folder, found)
    return None


def _read_flat(folder: str, classes: str, options: TableOptions) -> Table:
    """A folder of images with a label file beside each (`a.jpg`, `a.txt`) and the list
    of classes (`CLASS_FILES`), as LabelImg writes YOLO: class k is the k-th line. Rows
    are the images below the folder (sorted); their split is a folder named as one
    above them, or `split=`, else UNASSIGNED. A label file without its image is listed;
    an image without one has no objects, as Ultralytics reads it."""
    lines = [line.strip() for line in fs.read_bytes(classes).decode(
        "utf-8-sig", errors="replace").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    names = _names(classes, {"names": lines})
    files = [uri for uri in fs.list_files(folder)
             if not any(p.startswith(".") for p in fs.relative_to(uri, folder).split("/"))]
    images = [uri for uri in files if has_image_extension(uri)]
    if not images:
        raise SchemaError(f"the folder {folder!r} holds {fs.basename(classes)!r} (a YOLO list "
                          "of classes) but no images. Point at the folder of the images and "
                          "their label files.")
    stems = {uri.rsplit(".", 1)[0] for uri in images}
    orphans = [uri for uri in files if uri.endswith(".txt") and uri != classes
               and fs.basename(uri) not in CLASS_FILES and uri[:-4] not in stems]
    rows = [(fs.relative_to(uri, folder), _split_of(uri, folder, options), "", uri)
            for uri in images]
    frame = pd.DataFrame(rows, columns=["image_uri", "split", "key", "uri"])
    frame = frame.set_index(pd.Index(frame["image_uri"].tolist(), name="image"))
    # (`split=` is each row's split already: validate must not see it again)
    return _table(classes, frame, names, folder, dataclasses.replace(options, split=None),
                  orphans)


def _split_of(uri: str, folder: str, options: TableOptions) -> str:
    """An image's split in a flat folder: `split=`, or a folder named as a split above
    it, else UNASSIGNED."""
    if options.split is not None:
        given = split_named(options.split)
        return given.stored if isinstance(given, Split) else UNASSIGNED
    parts = fs.relative_to(uri, folder).split("/")[:-1]
    found = next((split for split in map(split_named, reversed(parts))
                  if isinstance(split, Split)), None)
    return found.stored if found is not None else UNASSIGNED


def data_files(folder: str) -> list[str]:
    """The YOLO data files at the top of `folder`: YAML files of a mapping that names
    the classes (`names` or `nc`). A file that does not parse is none."""
    found = []
    for name in fs.list_dir(folder):
        if name.lower().endswith(SUFFIXES) and not name.startswith("."):
            uri = fs.join(folder, name)
            try:
                data = _parse(uri)
            except SchemaError:
                continue
            if isinstance(data, dict) and ("names" in data or "nc" in data):
                found.append(uri)
    return found


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The dataset's detection table, its classes as `label_map`."""
    if fs.is_folder(path):
        classes = _class_file(path) if not data_files(path) else None
        if classes is not None:
            return _read_flat(path, classes, options)
        path = _the_data_file(path)
    data = _load(path)
    if options.split is not None:
        raise SchemaError(f"{path!r} names each image's split (its train, val and test "
                          "entries), and ", Option("split", options.split), " would give "
                          "them all one. Leave it out, or point the entries at the images "
                          "wanted.", option="split")
    names = _names(path, data)
    root = _root(path, data, options)
    images = _images(path, data, root)
    return _table(path, images, names, root, options, _orphans(path, data, root, images))


def _table(path: str, images: pd.DataFrame, names: tuple[str, ...], root: str,
           options: TableOptions, orphans: list[str]) -> Table:
    """The detection table of the images (`_images`' frame) and their label files: an
    image whose label file is not text is a rejected row; the lines of a label file
    whose image is not there (`orphans`) are listed as skipped annotations."""
    labels = [_label_file(uri) for uri in images.pop("uri")]
    texts = _read_all(labels, root)
    unreadable = np.array([isinstance(t, _Unreadable) for t in texts], dtype=bool)
    rejected = None
    if unreadable.any():
        at = np.flatnonzero(unreadable)
        rejected = pd.DataFrame({
            "labels": [fs.relative_to(labels[k], root) for k in at],
            "split": images["key"].iloc[at].tolist(),
            "objects": [texts[k].lines for k in at],
            "reason": [texts[k].reason for k in at]}, index=images.index[at])
        keep = np.flatnonzero(~unreadable)
        images = images.iloc[keep]
        labels, texts = [labels[k] for k in keep], [texts[k] for k in keep]
    objects = _objects(path, images.index.tolist(), texts, labels, names, root)
    source = pd.DataFrame({"labels": [fs.relative_to(uri, root) for uri in labels],
                           "split": images.pop("key").tolist()}, index=images.index)
    skipped, orphaned = _orphan_lines(orphans, root)
    table = objects_table(
        images, objects, source, root, options, label_type=STRING_LABEL, skipped=skipped,
        counts=AnnotationCounts(
            objects=orphaned + (int(rejected["objects"].sum()) if rejected is not None else 0),
            unannotated_images=sum(text is None for text in texts),
            unannotated_examples=tuple(str(name) for name, text in zip(images.index, texts)
                                       if text is None)[:EXAMPLES_KEPT]))
    return dataclasses.replace(table, label_map=LabelMap(names), rejected_rows=rejected)


def _orphan_lines(orphans: list[str], root: str) -> tuple[pd.DataFrame | None, int]:
    """Each line of the label files without an image, as a skipped annotation (an empty
    such file, as one row of its own), and how many objects they hold."""
    files, annotations, written, objects = [], [], [], 0
    for uri, text in zip(orphans, _read_all(orphans, root)):
        lines = [(n, line.strip()) for n, line in enumerate(
            text.splitlines() if isinstance(text, str) else [], 1) if line.strip()]
        objects += len(lines) if isinstance(text, str) else text.lines
        for number, line in lines or [(None, "")]:
            files.append(fs.relative_to(uri, root))
            annotations.append(f"line {number}" if number else "")
            written.append(line)
    if not annotations:
        return None, 0
    found = skipped_rows("", annotations, [""] * len(files), NO_IMAGE, written)
    return found.assign(source=files), objects


NO_IMAGE = "label file without an image"


def _orphans(path: str, data: dict, root: str, images: pd.DataFrame) -> list[str]:
    """The label files beside a split's folder of images whose image is not there:
    the `labels/` folder that mirrors each `images/` folder a split names."""
    wanted = {_label_file(uri) for uri in images["uri"]}
    found = []
    for key in _SPLIT_KEYS:
        entries = data.get(key) or []
        for entry in entries if isinstance(entries, list) else [entries]:
            folder = resolve(str(entry), root)
            if not fs.is_folder(folder):
                continue  # a list file names its images: nothing beside them is its
            labels = _label_file(fs.join(folder, "x.jpg"))[:-len("/x.txt")]
            if labels == folder or not fs.is_folder(labels):
                continue
            found += [uri for uri in fs.list_files(labels) if uri.endswith(".txt")
                      and uri not in wanted and not fs.basename(uri).startswith(".")]
    return sorted(set(found))


def _the_data_file(folder: str) -> str:
    found = data_files(folder)
    if len(found) != 1:
        shown = ", ".join(repr(fs.basename(uri)) for uri in found)
        raise SchemaError(
            f"the folder {folder!r} holds {len(found)} YOLO data files ({shown}), so which "
            "dataset is meant is unclear. Pass the data file itself.")
    return found[0]


# --- the data file ----------------------------------------------------------------------

def _parse(path: str):
    import yaml

    try:
        text = fs.read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SchemaError(f"the YAML file {path!r} is not UTF-8 (byte {error.start}). Save "
                          "it as UTF-8.") from None
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SchemaError(f"the YAML file {path!r} does not parse{where}: {problem}. Fix "
                          "the file.", rows=[mark.line + 1] if mark else None) from None


def _load(path: str) -> dict:
    """The data file's mapping, checked to be a YOLO data file's."""
    data = _parse(path)
    what = ("A YOLO data file (Ultralytics' data.yaml) names the classes (`names: [cat, "
            "dog]`) and the images of its splits (`train: images/train`, `val: "
            "images/val`).")
    if not isinstance(data, dict):
        held = type(data).__name__ if data is not None else "nothing"
        raise SchemaError(f"the YAML file {path!r} holds {held}, not a mapping, so it is "
                          f"no YOLO data file. {what}")
    lacks = [key for key, has in (("names", "names" in data or "nc" in data), (
        "train, val or test", any(data.get(key) for key in _SPLIT_KEYS))) if not has]
    if lacks:
        raise SchemaError(f"the YAML file {path!r} is no YOLO data file: it has no "
                          f"{' and no '.join(lacks)} (its keys: {sorted(map(str, data))}). "
                          f"{what}")
    if data.get("kpt_shape") is not None:
        raise SchemaError(
            f"{path!r} is a YOLO pose dataset (kpt_shape {data['kpt_shape']}): its label "
            "lines hold keypoints after the box, which tfrecorder does not read from YOLO "
            "files. Convert it to a COCO keypoints file, or give the boxes alone (lines "
            "`class cx cy w h`, and no kpt_shape).")
    return data


def _names(path: str, data: dict) -> tuple[str, ...]:
    """The classes in the order of their ids, as Ultralytics' `check_class_names` reads
    them (a mapping's keys 0 to n - 1, values as text)."""
    given, nc = data.get("names"), data.get("nc")
    if given is None:
        if isinstance(nc, int) and not isinstance(nc, bool) and nc > 0:
            return tuple(f"class_{i}" for i in range(nc))
        raise SchemaError(f"{path!r} gives no `names` and `nc: {nc!r}`: give the classes "
                          "as `names: [cat, dog]`, or their number as `nc: 2`.")
    if isinstance(given, dict):
        try:
            by_id = {int(key): value for key, value in given.items()}
        except (TypeError, ValueError):
            by_id = {}
        if sorted(by_id) != list(range(len(given))):
            raise SchemaError(f"{path!r} gives `names` the keys {list(given)}: a mapping of "
                              "names takes the class ids 0, 1, ... as keys, each once.")
        given = [by_id[i] for i in range(len(given))]
    if not isinstance(given, list) or not given:
        raise SchemaError(f"{path!r} gives `names: {given!r}`: a list of class names, or "
                          "a mapping {0: name, ...}.")
    names, seen = [], {}
    for i, value in enumerate(given):
        name = "" if value is None or isinstance(value, (dict, list)) else str(value).strip()
        if not name:
            raise SchemaError(f"{path!r} names class {i} {value!r}: each class needs a name.")
        if name in seen:
            raise SchemaError(f"{path!r} names classes {seen[name]} and {i} both {name!r}: "
                              "they would become one class. Give each class its own name.")
        seen[name] = i
        names.append(name)
    if nc is not None and nc != len(names):
        raise SchemaError(f"{path!r} gives `nc: {nc!r}` and {count(len(names), 'name')}: "
                          "make them agree (or leave nc out).")
    return tuple(names)


def _root(path: str, data: dict, options: TableOptions) -> str:
    """The folder the data file's entries are relative to."""
    if options.image_root is not None:
        root, said = os.fspath(options.image_root), Option("image_root", options.image_root)
    else:
        given = data.get("path")
        root = resolve(str(given), fs.dirname(path)) if given else fs.dirname(path)
        said = f"`path: {given}`"
    root = root.rstrip("/") if fs.is_remote(root) else os.path.abspath(root)
    if not fs.is_folder(root):
        raise SchemaError(f"{path!r}: the dataset's root ", said, f" is no folder "
                          f"({root!r}). Fix `path` (relative to the data file's folder), or "
                          "pass ", Option("image_root"), " with the dataset's folder.",
                          option="image_root")
    return root


def _images(path: str, data: dict, root: str) -> pd.DataFrame:
    """One row an image, in the data file's order (train, val, test; each entry's
    images sorted): `image_uri` (relative to the root where below it), `split`, `key`
    (the data file's), `uri` (where it is); indexed by `image_uri`."""
    rows, split_of = [], {}
    keys = [key for key in _SPLIT_KEYS if data.get(key)
            and not (key == "validation" and data.get("val"))]
    for key in keys:
        entries = data[key] if isinstance(data[key], list) else [data[key]]
        for entry in entries:
            if not isinstance(entry, str):
                raise SchemaError(f"{path!r} gives `{key}` {entry!r}: a folder of images, "
                                  "a list file (.txt) of image paths, or a list of them.")
            for uri in _entry_images(path, key, entry, root):
                name = fs.relative_to(uri, root)
                if name in split_of:
                    if split_of[name] != key:
                        raise SchemaError(
                            f"{path!r} lists the image {name!r} under `{split_of[name]}` and "
                            f"under `{key}`: an image belongs to one split (a model tested "
                            "on its training images tests nothing). Point each split at "
                            "images of its own.")
                    continue
                split_of[name] = key
                rows.append((name, split_named(key).stored, key, uri))
    frame = pd.DataFrame(rows, columns=["image_uri", "split", "key", "uri"])
    return frame.set_index(pd.Index(frame["image_uri"].tolist(), name="image"))


def _entry_images(path: str, key: str, entry: str, root: str) -> list[str]:
    """The images a split's entry names: a folder's (below it, sorted) or a list
    file's (in its order)."""
    found = resolve(entry, root)
    if not (fs.is_folder(found) or fs.exists(found)) and entry.startswith("../"):
        found = resolve(entry[3:], root)  # Roboflow's `../train/images`, as Ultralytics
    if fs.is_folder(found):
        images = [uri for uri in fs.list_files(found) if has_image_extension(uri)
                  and not any(p.startswith(".") for p in fs.relative_to(uri, found).split("/"))]
    elif fs.exists(found):
        lines = [line.strip() for line in fs.read_bytes(found).decode(
            "utf-8-sig", errors="replace").splitlines()]
        folder = fs.dirname(found)
        images = [resolve(line[2:], folder) if line.startswith("./") else resolve(line, root)
                  for line in lines if line and has_image_extension(line)]
    else:
        raise SchemaError(
            f"{path!r} gives `{key}: {entry}`, which is not there ({found!r}). Fix the "
            "entry, or the root: `path` in the data file, or ", Option("image_root"), ".",
            option="image_root")
    if not images:
        raise SchemaError(f"{path!r} gives `{key}: {entry}`, which holds no images "
                          f"({found!r}). Fix the entry, or leave it out.")
    return images


def _label_file(image: str) -> str:
    """Ultralytics' `img2label_paths`: the last `/images/` made `/labels/`, and the
    extension `.txt`."""
    sep = "/" if fs.is_remote(image) else os.sep
    head, found, tail = image.rpartition(f"{sep}images{sep}")
    swapped = f"{head}{sep}labels{sep}{tail}" if found else image
    return swapped.rsplit(".", 1)[0] + ".txt"


# --- the label files --------------------------------------------------------------------

def _read_labels(uri: str) -> str | None | _Unreadable:
    """A label file's text; None where there is none (an image without objects); an
    `_Unreadable` where it cannot be read as text (the image is rejected)."""
    try:
        data = fs.read_bytes(uri)
    except (FileNotFoundError, IsADirectoryError):
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return _Unreadable(f"label file {uri!r} is not UTF-8 text (byte {error.start})",
                           len(data.splitlines()))


class _Unreadable(NamedTuple):
    """A label file that is not text: why, and its lines (each an object, at most)."""

    reason: str
    lines: int


def _problems(path: str, names: tuple[str, ...]) -> tuple[Problem, ...]:
    """What can be wrong with a label line (`annotation_policy.Problem`), by
    `_parse_line`'s code."""
    return (
        Problem("line that is not numbers", "with a label line that is not numbers",
                _FORMAT),
        Problem("class id not in names", "with a class id the data file does not name",
                f"{path!r} names {count(len(names), 'class', 'classes')} (ids 0 to "
                f"{len(names) - 1}): fix the line, or add the class to `names`.", "label"),
        Problem("wrong number of coordinates", "with neither 4 numbers nor a polygon's x, "
                "y pairs after the class", _FORMAT),
        Problem("coordinate past Ultralytics' 1% tolerance",
                f"with a number outside -{TOLERANCE:g}..{1 + TOLERANCE:g} (Ultralytics' "
                "tolerance)", "Coordinates are fractions of the image's width and height, "
                "from 0 to 1."))


def _read_all(labels: list[str], root: str) -> list:
    if fs.is_remote(root):
        with ThreadPoolExecutor(_READERS) as pool:
            return list(pool.map(_read_labels, labels))
    return [_read_labels(uri) for uri in labels]  # threads cost more than they save here


def _objects(path: str, images: list, texts: list, labels: list[str],
             names: tuple[str, ...], root: str) -> Objects:
    """Every label file's objects, by image and line, each with its problem marked; the
    objects' polygons, where any line is one. As Ultralytics' `verify_image_label` reads
    them: a line's numbers within its 1% tolerance outside 0..1 make a box, clipped to
    the image as Ultralytics clips it when it trains."""
    image, classes, corners, written, polygons, problem = [], [], [], [], [], []
    for at, (uri, text) in enumerate(zip(labels, texts)):
        if not isinstance(text, str):
            continue
        file = fs.relative_to(uri, root)
        for number, line in enumerate(text.splitlines(), start=1):
            values = line.split()
            if not values:
                continue
            code, class_id, points = _parse_line(values, len(names))
            box, polygon = _corners(points) if code in (0, 4) else ((np.nan,) * 4, None)
            image.append(at)
            classes.append(names[class_id] if class_id is not None else None)
            written.append((file, number, line.strip()))
            corners.append(box)
            polygons.append(polygon)
            problem.append(code)
    boxes = np.asarray(corners, dtype=np.float64).reshape(-1, 4)
    with np.errstate(invalid="ignore"):
        clipped = ((boxes < 0) | (boxes > 1)).any(axis=1) & (np.asarray(problem) == 0)
    boxes = np.where(clipped[:, None], np.clip(boxes, 0.0, 1.0), boxes)

    def at_line(i: int) -> str:
        file, number, line = written[i]
        return f"{file!r} line {number}: {line!r}"

    return Objects.of(image, classes, boxes, [images[i] for i in image], at_line,
                      f"the YOLO dataset {path!r}", problem=problem,
                      problems=_problems(path, names),
                      names=lambda i: (written[i][0], f"line {written[i][1]}", written[i][2]),
                      tolerance=0.0, clipped=clipped,
                      segmentations=[[p] if p is not None else None for p in polygons]
                      if any(p is not None for p in polygons) else None)


def _corners(points: list[float]) -> tuple[tuple, list | None]:
    """A line's box [ymin, xmin, ymax, xmax] (not yet clipped), and its polygon (None
    for a box)."""
    if len(points) == 4:
        cx, cy, w, h = points
        return (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2), None
    xs, ys = points[0::2], points[1::2]
    return (min(ys), min(xs), max(ys), max(xs)), points


def _parse_line(values: list[str], classes: int) -> tuple[int, int | None, list[float]]:
    """A label line's problem (its code in `_PROBLEMS`; 0: none), class id and
    coordinates."""
    try:
        numbers = [float(value) for value in values]
    except ValueError:
        return 1, None, []
    if not all(map(math.isfinite, numbers)):
        return 1, None, []
    class_id, points = numbers[0], numbers[1:]
    if not class_id.is_integer() or not 0 <= class_id < classes:
        return 2, None, points
    if len(points) != 4 and (len(points) < 6 or len(points) % 2):
        return 3, int(class_id), points
    if min(points) < -TOLERANCE or max(points) > 1 + TOLERANCE:
        return 4, int(class_id), points
    return 0, int(class_id), points

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
  [cy - h/2, cx - w/2, cy + h/2, cx + w/2]. Labels written with few decimals put a
  corner a little outside the image; a coordinate at most `TOLERANCE` outside 0..1 is
  clipped to it, one further out is an error (Ultralytics accepts 1% and clips).
- `class x1 y1 x2 y2 x3 y3 ...` (YOLO-seg): a polygon, as fractions. Its box is the
  polygon's bounding box, and it becomes the object's instance mask (`objects/mask`,
  relative polygons drawn at the stored image's size by `annotations`). In a dataset
  with polygons, an object given as a box has an empty mask, as a COCO annotation
  without a segmentation.

An empty or missing label file is an image without objects, as Ultralytics reads it.
Every label file is read and checked before any image is. Rows are named by the image's
path relative to the root.
"""

from __future__ import annotations

import dataclasses
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.splits import split_named
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.options import TableOptions
from tfrecorder.sources.detection import Objects, objects_table
from tfrecorder.sources.image_paths import has_image_extension, resolve
from tfrecorder.sources.schema import STRING_LABEL
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.wording import count

# Four decimals, as Ultralytics HUB rounds labels, put cx - w/2 up to 7.5e-5 off.
TOLERANCE = 1e-4
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
    or a folder holding a YOLO data file at its top."""
    if not folder:
        return path.lower().endswith(SUFFIXES)
    return bool(data_files(path))


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
    labels = [_label_file(uri) for uri in images.pop("uri")]
    objects, masks = _objects(path, images.index.tolist(), labels, names, root)
    source = pd.DataFrame({"labels": [fs.relative_to(uri, root) for uri in labels],
                           "split": images.pop("key").tolist()}, index=images.index)
    table = objects_table(images, objects, source, root, options, masks=masks,
                          label_type=STRING_LABEL)
    return dataclasses.replace(table, label_map=LabelMap(names))


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

def _read_labels(uri: str) -> str | None:
    """A label file's text; None where there is none (an image without objects)."""
    try:
        data = fs.read_bytes(uri)
    except (FileNotFoundError, IsADirectoryError):
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SchemaError(f"the YOLO label file {uri!r} is not UTF-8 text (byte "
                          f"{error.start}). {_FORMAT}") from None


def _objects(path: str, images: list, labels: list[str], names: tuple[str, ...],
             root: str) -> tuple[Objects, list | None]:
    """Every label file's objects, by image and line; and each image's masks where any
    line is a polygon."""
    if fs.is_remote(root):
        with ThreadPoolExecutor(_READERS) as pool:
            texts = list(pool.map(_read_labels, labels))
    else:  # threads cost more than they save on a local disk
        texts = [_read_labels(uri) for uri in labels]
    image, classes, corners, written, polygons = [], [], [], [], []
    for at, (uri, text) in enumerate(zip(labels, texts)):
        file = fs.relative_to(uri, root) if text else None
        for number, line in enumerate((text or "").splitlines(), start=1):
            values = line.split()
            if not values:
                continue
            where = (file, number, line.strip())
            class_id, points = _parse_line(values, where, names, path)
            box, polygon = _corners(points)
            image.append(at)
            classes.append(names[class_id])
            written.append(where)
            corners.append(box)
            polygons.append(polygon)
    boxes = np.asarray(corners, dtype=np.float64).reshape(-1, 4)
    boxes = np.where((boxes < 0) & (boxes >= -TOLERANCE), 0.0, boxes)
    boxes = np.where((boxes > 1) & (boxes <= 1 + TOLERANCE), 1.0, boxes)

    def at_line(i: int) -> str:
        file, number, line = written[i]
        return f"{file!r} line {number}: {line!r}"

    objects = Objects.of(image, classes, boxes, [images[i] for i in image], at_line,
                         f"the YOLO dataset {path!r}")
    masks = None
    if any(p is not None for p in polygons):
        masks = [None] * len(images)
        for at, polygon in zip(image, polygons):
            if masks[at] is None:  # size None: relative polygons (annotations.py)
                masks[at] = {"size": None, "masks": []}
            masks[at]["masks"].append([polygon] if polygon is not None else [])
    return objects, masks


def _corners(points: list[float]) -> tuple[tuple, list | None]:
    """A line's box [ymin, xmin, ymax, xmax] (not yet clipped), and its polygon (None
    for a box)."""
    if len(points) == 4:
        cx, cy, w, h = points
        return (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2), None
    xs, ys = points[0::2], points[1::2]
    return (min(ys), min(xs), max(ys), max(xs)), points


def _parse_line(values: list[str], where: tuple, names: tuple[str, ...], path: str
                ) -> tuple[int, list[float]]:
    """A label line's class id and coordinates, checked."""
    file, number, line = where
    try:
        numbers = [float(value) for value in values]
    except ValueError:
        numbers = None
    if numbers is None or not all(map(math.isfinite, numbers)):
        raise SchemaError(f"the YOLO label file {file!r} holds {line!r} at line {number}, "
                          f"which is not numbers. {_FORMAT}")
    class_id, points = numbers[0], numbers[1:]
    if not class_id.is_integer() or not 0 <= class_id < len(names):
        raise SchemaError(
            f"the YOLO label file {file!r} has class id {values[0]} at line {number} "
            f"({line!r}), but {path!r} names {count(len(names), 'class', 'classes')} (ids "
            f"0 to {len(names) - 1}). Fix the line, or add the class to `names`.",
            column="label")
    if len(points) != 4 and (len(points) < 6 or len(points) % 2):
        raise SchemaError(f"the YOLO label file {file!r} holds {len(points)} numbers after "
                          f"the class at line {number} ({line!r}). {_FORMAT}")
    return int(class_id), points

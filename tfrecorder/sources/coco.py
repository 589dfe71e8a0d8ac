"""COCO object-detection files: one JSON object with `images` (id, file_name, width,
height), `annotations` (id, image_id, category_id, bbox [x, y, width, height] in pixels,
and where given area, iscrowd and segmentation) and `categories` (id, name).

One row an image, in the order of `images`, named by its id; its objects are its
annotations in file order, their classes the categories' names (or, in a file without
categories, their ids). Boxes become fractions of the image's size; a mask is kept as
written (polygons or RLE) in `objects/mask`. File names are relative to `image_root`,
by default the JSON file's folder. A COCO file has no splits: every row takes `split=`,
or is UNASSIGNED.
"""

from __future__ import annotations

import json
import numbers
import os

import numpy as np
import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.schema import STRING_LABEL
from tfrecorder.sources import csv
from tfrecorder.sources.detection import AREA, BBOX, IS_CROWD, Objects, objects_table
from tfrecorder.table import Table
from tfrecorder.wording import count

_SNIFFED = 1 << 16
_EXAMPLES = 3


def claims(path: str, folder: bool) -> bool:
    """A `.json` file, or one that starts as a JSON object naming `images`."""
    if folder:
        return False
    if path.lower().endswith(".json"):
        return True
    if path.lower().endswith((".csv", ".jsonl", ".parquet", ".pq")):
        return False
    head = csv.head_text(path, _SNIFFED)
    return head.lstrip().startswith("{") and '"images"' in head


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's detection table."""
    data = _load(path)
    root = base_dir
    if options.image_root is not None:
        root = os.fspath(options.image_root)
        root = root if fs.is_remote(root) else os.path.abspath(root)
    images = _images(path, data["images"])
    position = {image_id: i for i, image_id in enumerate(images.index)}
    names = _categories(path, data.get("categories"))
    annotations = data.get("annotations") or []
    if not isinstance(annotations, list):
        raise SchemaError(f"the COCO file {path!r} has 'annotations' of type "
                          f"{type(annotations).__name__}: a list of objects.")
    objects, masks = _objects(path, annotations, images, position, names)
    source = images.rename(columns={"image_uri": "file_name"}).assign(annotations=_per_image(
        [a.get("id") for a in annotations], objects.image, len(images)))
    return objects_table(images[["image_uri"]], objects, source, root, options, masks=masks,
                         label_type=STRING_LABEL if names is not None else None)


def _load(path: str) -> dict:
    try:
        data = json.loads(fs.read_bytes(path))
    except UnicodeDecodeError as error:
        raise SchemaError(f"the COCO file {path!r} is not UTF-8 (byte {error.start}). Save "
                          "it as UTF-8.") from None
    except json.JSONDecodeError as error:
        raise SchemaError(f"the COCO file {path!r} is not JSON: {error.msg} at line "
                          f"{error.lineno}, column {error.colno}.", rows=[error.lineno]
                          ) from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        found = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
        raise SchemaError(
            f"the JSON file {path!r} is not a COCO file: it has no list of 'images' (it "
            f"holds {found}). A COCO file is an object with 'images', 'annotations' and "
            "'categories'.")
    return data


def _images(path: str, entries: list) -> pd.DataFrame:
    """The images, indexed by id: `image_uri` (file_name), width and height."""
    rows, bad = [], []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict):
            bad.append(f"images[{k}] is {entry!r}")
            continue
        image_id, file_name = entry.get("id"), entry.get("file_name")
        width, height = entry.get("width"), entry.get("height")
        if not (_is_id(image_id) and isinstance(file_name, str)
                and _positive(width) and _positive(height)):
            bad.append(f"images[{k}] {_clip(entry)}")
        rows.append((image_id, file_name, width, height))
    if bad:
        raise SchemaError(
            f"the COCO file {path!r} has {count(len(bad), 'image')} without an id, a "
            f"file_name, or a width and height in pixels: {'; '.join(bad[:_EXAMPLES])}. "
            "Boxes are turned into fractions of the image's size, so each image needs "
            "both.")
    frame = pd.DataFrame(rows, columns=["id", "image_uri", "width", "height"])
    repeated = frame["id"][frame["id"].duplicated()].tolist()
    if repeated:
        raise SchemaError(f"the COCO file {path!r} gives the image id {repeated[0]!r} to "
                          "several images. Give each image its own id.", rows=repeated)
    return frame.set_index(pd.Index(frame.pop("id"), name="image id"))


def _categories(path: str, entries) -> dict | None:
    """Category id -> name; None for a file without categories (labels are ids)."""
    if entries is None:
        return None
    names: dict = {}
    for k, entry in enumerate(entries if isinstance(entries, list) else [entries]):
        if not isinstance(entry, dict) or not _is_id(entry.get("id")) or not isinstance(
                entry.get("name"), str) or not entry["name"].strip():
            raise SchemaError(f"the COCO file {path!r} has categories[{k}] {_clip(entry)}: "
                              "a category is an object with an id and a name.")
        if entry["id"] in names:
            raise SchemaError(f"the COCO file {path!r} gives the category id "
                              f"{entry['id']!r} to several categories.")
        names[entry["id"]] = entry["name"]
    twice = pd.Series(list(names.values()))
    twice = twice[twice.duplicated()].tolist()
    if twice:
        ids = [i for i, name in names.items() if name == twice[0]]
        raise SchemaError(f"the COCO file {path!r} names several categories {twice[0]!r} "
                          f"(ids {ids}): they would become one class. Give each category "
                          "its own name.", column="label")
    return names


def _objects(path: str, annotations: list, images: pd.DataFrame, position: dict,
             names: dict | None) -> tuple[Objects, list | None]:
    """The annotations as objects, by image in the order of `images`, then in file
    order; and each image's masks, where any annotation has a segmentation."""
    widths, heights = images["width"].tolist(), images["height"].tolist()
    image_ids = images.index.tolist()
    image, labels, boxes, ids, rows, entries = [], [], [], [], [], []
    areas, crowds, segmentations = [], [], []
    problems: dict[str, list[str]] = {}
    for k, annotation in enumerate(annotations):
        if not isinstance(annotation, dict):
            problems.setdefault("that are not objects", []).append(f"annotations[{k}]")
            continue
        name = f"annotation id {annotation['id']!r}" if "id" in annotation else \
            f"annotations[{k}]"
        at = position.get(annotation.get("image_id")) if _is_id(
            annotation.get("image_id")) else None
        if at is None:
            problems.setdefault("naming an unknown image id", []).append(
                f"{name}: image_id {annotation.get('image_id')!r}")
            continue
        category = annotation.get("category_id")
        if names is not None and (not _is_id(category) or category not in names):
            problems.setdefault("naming an unknown category id", []).append(
                f"{name}: category_id {category!r}")
            continue
        box = annotation.get("bbox")
        width, height = widths[at], heights[at]
        if box is not None and not (isinstance(box, list) and len(box) == 4
                                    and all(map(_is_number, box))):
            problems.setdefault("with a bbox that is not [x, y, width, height]", []
                                ).append(f"{name}: bbox {box!r}")
            continue
        if box is not None and (box[0] < 0 or box[1] < 0 or _beyond(box[0] + box[2], width)
                                or _beyond(box[1] + box[3], height)):
            problems.setdefault("with a bbox outside its image", []).append(
                f"{name}: bbox {box} in image {image_ids[at]!r} of {width} x {height} pixels")
            continue
        segmentation = annotation.get("segmentation")
        problem = _segmentation_problem(segmentation, height, width)
        if problem:
            problems.setdefault("with a segmentation that is neither polygons nor an RLE "
                                "mask of its image", []).append(f"{name}: {problem}")
            continue
        x, y, w, h = box if box is not None else [np.nan] * 4
        image.append(at)
        labels.append(names[category] if names is not None else category)
        boxes.append([y / height, x / width, min((y + h) / height, 1.0),
                      min((x + w) / width, 1.0)])
        ids.append(name)
        entries.append(k)
        rows.append(image_ids[at])
        areas.append(annotation.get("area"))
        crowds.append(annotation.get("iscrowd", 0))
        segmentations.append(segmentation)
    if problems:
        what, found = next(iter(problems.items()))
        more = f"; and {len(found) - _EXAMPLES} more" if len(found) > _EXAMPLES else ""
        raise SchemaError(
            f"the COCO file {path!r} has {count(len(found), 'annotation')} {what}: "
            f"{'; '.join(found[:_EXAMPLES])}{more}. "
            + (_SEGMENTATION_ADVICE if "segmentation" in what else
               "A COCO bbox is [x, y, width, height] in pixels, inside its image; image_id "
               "and category_id name an entry of 'images' and 'categories'."),
            column=BBOX if "bbox" in what else None)

    def where(i: int) -> str:
        at, box = image[i], annotations[entries[i]].get("bbox")
        return (f"{ids[i]}: {f'bbox {box}' if box is not None else 'no bbox'} in image "
                f"{image_ids[at]!r} of {widths[at]} x {heights[at]} pixels")

    extras = {}
    if all(map(_is_number, areas)) and areas:
        extras[AREA] = [float(a) for a in areas]
    elif any(a is not None for a in areas):
        k = next(i for i, a in enumerate(areas) if not _is_number(a))
        raise SchemaError(f"the COCO file {path!r} gives areas, but not for {ids[k]} "
                          f"(area {areas[k]!r}). Give every annotation its area, or none.",
                          column=AREA, rows=[rows[k]])
    if any("iscrowd" in a for a in annotations if isinstance(a, dict)):
        extras[IS_CROWD] = crowds
    objects = Objects.of(image, labels, boxes, rows, where, f"the COCO file {path!r}",
                         **extras)
    masks = None
    if any(s is not None for s in segmentations):
        masks = [None] * len(images)
        for at, segmentation in zip(image, segmentations):
            if masks[at] is None:
                masks[at] = {"size": [heights[at], widths[at]], "masks": []}
            masks[at]["masks"].append(segmentation if segmentation is not None else [])
    return objects, masks


_SEGMENTATION_ADVICE = (
    "A COCO segmentation is a list of polygons [x0, y0, x1, y1, ...] in pixels, or an RLE "
    "mask {'size': [height, width], 'counts': ...} of its image, as pycocotools writes it.")


def _segmentation_problem(segmentation, height: int, width: int) -> str | None:
    """What is wrong with an annotation's segmentation (None: nothing, or none given):
    polygons are lists of at least three x, y pairs; an RLE mask is its image's size and
    its runs cover it exactly."""
    if segmentation is None or segmentation == []:
        return None
    if isinstance(segmentation, list):
        for polygon in segmentation:
            if not (isinstance(polygon, list) and len(polygon) >= 6 and len(polygon) % 2 == 0
                    and all(map(_is_number, polygon))):
                return f"polygon {_clip(polygon)} is not x, y pairs (three or more)"
        return None
    if not isinstance(segmentation, dict) or "counts" not in segmentation:
        return f"segmentation {_clip(segmentation)}"
    from tfrecorder.annotations import rle_runs

    if list(segmentation.get("size") or []) != [height, width]:
        return (f"an RLE mask of size {segmentation.get('size')!r}, not the image's "
                f"[{height}, {width}]")
    try:
        covered = sum(rle_runs(segmentation))
    except (TypeError, ValueError, IndexError):
        covered = None
    if covered != height * width:
        return (f"RLE counts {_clip(segmentation['counts'], 40)} cover {covered} pixels, not "
                f"{height} x {width}")
    return None


def _per_image(values: list, image: np.ndarray, images: int) -> list[list]:
    found = [[] for _ in range(images)]
    for at, value in zip(image, values):
        found[at].append(value)
    return found


def _beyond(end: float, size: float) -> bool:
    """Whether a box's end lies beyond its image's side (a rounding error aside)."""
    return end > size * (1 + 1e-9)


def _is_id(value) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and value == value


def _positive(value) -> bool:
    return _is_number(value) and value > 0


def _clip(value, width: int = 120) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= width else text[:width] + "..."

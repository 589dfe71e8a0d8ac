"""A small detection dataset whose boxes are known, exported by real labeling libraries.

`ground_truth()` is the truth: 15 pictures of distinct sizes (80 to 164 pixels a side)
with 1 to 4 boxes of 4 classes each (one of them, "traffic light", with a space in its
name; one picture with no boxes), in train, validation and test, with file names that
have spaces ("harbour view 09.jpg" in validation, "alley 16.jpg" in test). Every box is
at least 40 pixels a side, so a box moved by the one pixel of Pascal VOC's 1-based
corners still overlaps its truth by an IoU of 0.95 (COCO's strictest threshold).
`write_images(folder)` draws them as JPEGs.

`export(tool, images, out)` has a tool write the truth in each format ("coco", "voc",
"yolo") below `out`, with the tool's own export functions; `source_of` says what
`tfrecorder.convert` is given for an export. Each tool runs in a fresh interpreter with its pinned
folder (tests/interop.py) first on `sys.path`, so none of its imports (OpenCV, scipy,
Datumaro's Rust extension) enters the pytest process. What each writes, as read from the
tools' sources:

supervision 0.31.2, `sv.DetectionDataset(classes, images, annotations)` a split, in
  Roboflow's layout (`train/`, `valid/`, `test/`):
  - `as_coco`: `<split>/_annotations.coco.json` beside the images; category ids 1..n
    (`class_index + 1`); image and annotation ids from 1 in every file, so the splits'
    image ids repeat; `"segmentation": []` for a box.
  - `as_pascal_voc`: an XML beside each image; `xmin`/`ymin` one more than the box's
    0-based corner (VOC's 1-based pixels), `xmax`/`ymax` as they are.
  - `as_yolo`: `<split>/images/` and `<split>/labels/`, and a `data.yaml` with `nc` and
    `names` only; the split keys are added as Roboflow's export has them
    (`train: ../train/images`, ...).
globox 2.9.0, `AnnotationSet` of `Annotation(image_id, image_size, boxes)`; it writes
  annotations only, so the images are copied in by the exporter:
  - `save_coco(auto_ids=True)`: `<split>/annotations.json` beside the images; category
    ids 0.. in sorted name order, image ids 0.. (category 0 is used: tfrecorder shifts
    the ids by one, with a note); `"segmentation": []` and `"ignore": 0`.
  - `save_xml`: `<split>/<stem>.xml` beside the images: `<filename>`, `<size>` (width and
    height only; no depth, folder or pose) and the objects' corners as `str()` of the
    numbers given ("43"; "43.5" for a fraction), not shifted.
  - `save_yolo_v5(label_to_id)`: `labels/<split>/`, beside `images/<split>/`; no
    data file (globox writes none): one is written as Ultralytics' docs show it.
Datumaro 1.13.12, `Dataset.from_iterable` of `DatasetItem(id, subset, media, [Bbox])`,
  `export(out, format, save_media=True)`, subsets train, val and test. The media are
  `Image.from_file(path, size=(height, width))`, as its importers make them: an image
  whose size Datumaro has not read gets an XML without `<size>`, which tfrecorder (as
  the Object Detection API's converter) cannot make fractions of.
  - "coco_instances": `annotations/instances_<subset>.json` and `images/<subset>/`;
    category ids 1..n in the classes' order, image ids from 1 across the subsets.
  - "voc_detection": `Annotations/`, `JPEGImages/`, `ImageSets/Main/<subset>.txt`; no
    XML for an image without objects (its id is in its subset's list); corners as
    floats ("43.0"), not shifted.
  - "yolo_ultralytics": `data.yaml` (`names` a dict), `images/<subset>/`,
    `labels/<subset>/`, and `<subset>.txt` lists of `./images/<subset>/x.jpg`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from helpers import make_image
from interop import interop_path
from PIL import ImageDraw

CLASSES = ("car", "person", "traffic light", "dog")
SPLITS = ("train", "validation", "test")
MIN_SIDE = 40  # pixels: the smallest box side (module doc)


@dataclass(frozen=True)
class Box:
    label: str
    xmin: int  # pixels: the box covers [xmin, xmax) x [ymin, ymax)
    ymin: int
    xmax: int
    ymax: int

    def normalized(self, width: int, height: int) -> tuple[float, float, float, float]:
        """(ymin, xmin, ymax, xmax) relative to the image, as records store boxes."""
        return (self.ymin / height, self.xmin / width, self.ymax / height, self.xmax / width)


@dataclass(frozen=True)
class Picture:
    name: str  # the file's name, extension included
    split: str
    width: int
    height: int
    boxes: tuple[Box, ...]

    @property
    def stem(self) -> str:
        return Path(self.name).stem


_NAMES = {  # split -> file names; "empty lot 05" holds no boxes
    "train": ["street 01.jpg", "crossing_02.jpg", "park-03.jpg", "market 04.jpg",
              "empty lot 05.jpg", "bridge_06.jpg", "station 07.jpg", "garden 08.jpg",
              "square_10.jpg"],
    "validation": ["harbour view 09.jpg", "avenue_11.jpg", "tunnel 12.jpg"],
    "test": ["alley 16.jpg", "plaza_13.jpg", "dock 14.jpg"],
}
EMPTY = "empty lot 05.jpg"


def ground_truth() -> tuple[Picture, ...]:
    """The 15 pictures (module doc), the same on every call."""
    rng = np.random.default_rng(48)
    pictures, k = [], 0
    for split in SPLITS:
        for name in _NAMES[split]:
            width, height = 80 + 6 * k, 164 - 5 * k  # distinct sizes, wide and tall
            count = 0 if name == EMPTY else 1 + k % 4
            boxes = []
            for j in range(count):
                w = int(rng.integers(MIN_SIDE, width * 3 // 4))
                h = int(rng.integers(MIN_SIDE, height * 3 // 4))
                x, y = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
                boxes.append(Box(CLASSES[(k + j) % len(CLASSES)], x, y, x + w, y + h))
            pictures.append(Picture(name, split, width, height, tuple(boxes)))
            k += 1
    return tuple(pictures)


_COLORS = {"car": (220, 40, 40), "person": (40, 200, 60), "traffic light": (240, 200, 20),
           "dog": (60, 80, 230)}


def write_images(folder) -> dict[str, str]:
    """Draws every picture as a JPEG in `folder`; returns its path by file name."""
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for k, picture in enumerate(ground_truth()):
        image = make_image((picture.width, picture.height), seed=k)
        draw = ImageDraw.Draw(image)
        for box in picture.boxes:
            draw.rectangle([box.xmin, box.ymin, box.xmax - 1, box.ymax - 1],
                           outline=_COLORS[box.label], width=3)
        paths[picture.name] = os.path.join(folder, picture.name)
        image.save(paths[picture.name], "JPEG", quality=90)
    return paths


# --- the tools, each in a subprocess ------------------------------------------------------

TOOLS = ("supervision", "globox", "datumaro")
FORMATS = ("coco", "voc", "yolo")

# Each script defines `export(spec, classes, fmt, out)`; `_RUN` calls it for each format
# of the spec (JSON: classes, pictures with their image paths, formats, out), read from
# the file named by argv[1], into `out/<format>`.
_SUPERVISION = r'''
import json, os, sys
import numpy as np
import yaml
import supervision as sv


def export(spec, classes, fmt, out):
    folders = {"train": "train", "validation": "valid", "test": "test"}  # Roboflow's names
    for split, folder in folders.items():
        pictures = [p for p in spec["pictures"] if p["split"] == split]
        annotations = {}
        for p in pictures:
            xyxy = np.array([b[1:] for b in p["boxes"]], dtype=np.float64).reshape(-1, 4)
            ids = np.array([classes.index(b[0]) for b in p["boxes"]], dtype=int)
            annotations[p["path"]] = sv.Detections(xyxy=xyxy, class_id=ids)
        dataset = sv.DetectionDataset(classes=classes, images=[p["path"] for p in pictures],
                                      annotations=annotations)
        root = os.path.join(out, folder)
        if fmt == "coco":
            dataset.as_coco(images_directory_path=root,
                            annotations_path=os.path.join(root, "_annotations.coco.json"))
        elif fmt == "voc":
            dataset.as_pascal_voc(images_directory_path=root, annotations_directory_path=root)
        else:
            dataset.as_yolo(images_directory_path=os.path.join(root, "images"),
                            annotations_directory_path=os.path.join(root, "labels"),
                            data_yaml_path=os.path.join(out, "data.yaml"))
    if fmt == "yolo":  # Roboflow adds the splits to the data.yaml supervision writes
        path = os.path.join(out, "data.yaml")
        data = yaml.safe_load(open(path))
        data.update(train="../train/images", val="../valid/images", test="../test/images")
        yaml.safe_dump(data, open(path, "w"), sort_keys=False)
'''

_GLOBOX = r'''
import json, os, shutil, sys
from globox import Annotation, AnnotationSet, BoundingBox


def export(spec, classes, fmt, out):
    folders = {"train": "train", "validation": "val", "test": "test"}
    for split, folder in folders.items():
        pictures = [p for p in spec["pictures"] if p["split"] == split]
        annotations = AnnotationSet(annotations=[
            Annotation(image_id=p["name"], image_size=(p["width"], p["height"]), boxes=[
                BoundingBox(label=b[0], xmin=b[1], ymin=b[2], xmax=b[3], ymax=b[4])
                for b in p["boxes"]])
            for p in pictures])
        images = os.path.join(out, "images", folder) if fmt == "yolo" else \
            os.path.join(out, folder)
        os.makedirs(images, exist_ok=True)
        for p in pictures:  # globox writes annotations only
            shutil.copyfile(p["path"], os.path.join(images, p["name"]))
        if fmt == "coco":
            annotations.save_coco(os.path.join(out, folder, "annotations.json"), auto_ids=True)
        elif fmt == "voc":
            annotations.save_xml(os.path.join(out, folder))
        else:
            os.makedirs(os.path.join(out, "labels"), exist_ok=True)
            annotations.save_yolo_v5(os.path.join(out, "labels", folder),
                                     label_to_id={name: k for k, name in enumerate(classes)})
    if fmt == "yolo":  # globox writes no data file: Ultralytics' docs' one
        with open(os.path.join(out, "data.yaml"), "w") as f:
            f.write("path: .\ntrain: images/train\nval: images/val\ntest: images/test\n"
                    "names:\n" + "".join(f"  {k}: {name}\n" for k, name in enumerate(classes)))
'''

_DATUMARO = r'''
import json, os, sys
from datumaro.components.annotation import Bbox
from datumaro.components.dataset import Dataset
from datumaro.components.dataset_base import DatasetItem
from datumaro.components.media import Image


def export(spec, classes, fmt, out):
    subsets = {"train": "train", "validation": "val", "test": "test"}
    items = [
        DatasetItem(id=os.path.splitext(p["name"])[0], subset=subsets[p["split"]],
                    media=Image.from_file(path=p["path"], size=(p["height"], p["width"])
                                          if spec["sizes"] else None),
                    annotations=[Bbox(b[1], b[2], b[3] - b[1], b[4] - b[2],
                                      label=classes.index(b[0]), id=k)
                                 for k, b in enumerate(p["boxes"])])
        for p in spec["pictures"]]
    dataset = Dataset.from_iterable(items, categories=classes)
    name = {"coco": "coco_instances", "voc": "voc_detection", "yolo": "yolo_ultralytics"}[fmt]
    dataset.export(out, name, save_media=True)
'''

_RUN = r'''
import json, os, sys
spec = json.load(open(sys.argv[1]))
for fmt in spec["formats"]:
    export(spec, spec["classes"], fmt, os.path.join(spec["out"], fmt))
'''
_SCRIPTS = {"supervision": _SUPERVISION, "globox": _GLOBOX, "datumaro": _DATUMARO}
_FOLDERS = {"supervision": ("supervision",), "globox": ("globox",),
            "datumaro": ("datumaro", "pycocotools")}


def export(tool: str, images: dict[str, str], out, formats=FORMATS,
           sizes: bool = True) -> dict[str, Path]:
    """Has `tool` export the ground truth in each of `formats` into `out/<format>` (module
    doc), from the JPEGs `images` (`write_images`' paths), in one subprocess; returns
    each export's folder by format (`source_of` says what `convert` reads of it).
    `sizes=False` gives Datumaro images whose size it has not read."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spec = {"classes": list(CLASSES), "formats": list(formats), "out": str(out),
            "sizes": sizes, "pictures": [
        {"name": p.name, "split": p.split, "width": p.width, "height": p.height,
         "path": images[p.name],
         "boxes": [[b.label, b.xmin, b.ymin, b.xmax, b.ymax] for b in p.boxes]}
        for p in ground_truth()]}
    spec_file = out / "spec.json"
    spec_file.write_text(json.dumps(spec))
    folders = [str(interop_path(name)) for name in _FOLDERS[tool]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*folders, *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", _SCRIPTS[tool] + _RUN, str(spec_file)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{tool} failed to export {formats}:\n{done.stderr[-4000:]}"
    return {fmt: out / fmt for fmt in formats}


def source_of(tool: str, fmt: str, root: Path, folder: bool = False) -> str | dict[str, str]:
    """What `convert` is given for an export: a COCO export's files by split (its splits
    are in no one file), or with `folder` (and always for Datumaro's, whose images are
    not beside its files) the export's folder; a YOLO export's data.yaml; else the
    folder."""
    if fmt == "coco" and not folder and tool != "datumaro":
        files = {"supervision": {"train": "train/_annotations.coco.json",
                                 "validation": "valid/_annotations.coco.json",
                                 "test": "test/_annotations.coco.json"},
                 "globox": {"train": "train/annotations.json",
                            "validation": "val/annotations.json",
                            "test": "test/annotations.json"}}
        return {split: str(root / name) for split, name in files[tool].items()}
    if fmt == "yolo":
        return str(root / "data.yaml")
    return str(root)

"""Small detection and segmentation datasets whose annotations are known exactly: scenes
of filled rectangles (boxes) and the class-id masks of them, written by `convert`.

The table is a DataFrame with the detection columns (`label` lists of class names,
`objects/bbox` lists of [ymin, xmin, ymax, xmax]); `objects/mask` holds COCO polygons when
`masks=True`, and segmentation rows a `mask_uri`: what `sources/tables.py` reads.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder

CLASSES = ("cat", "dog", "zebra")
HEIGHT, WIDTH = 48, 64


def scenes(folder: str, count: int = 8, seed: int = 0, first: int = 0) -> list[dict]:
    """`count` PNG scenes of 0-3 rectangles each, with their boxes (relative), classes,
    polygons (pixels) and a class-id mask (0: background, 1 + the class's index); numbered
    from `first` (its name), shaded by its number and `seed` (keep them under 60), so
    that scenes of one name drawn with two seeds differ."""
    rng = np.random.RandomState(seed)
    os.makedirs(folder, exist_ok=True)
    found = []
    for i in range(first, first + count):
        pixels = np.full((HEIGHT, WIDTH, 3), 20 + i + seed, np.uint8)
        mask = np.zeros((HEIGHT, WIDTH), np.uint8)
        boxes, labels, polygons = [], [], []
        for _ in range(i % 4):
            h, w = rng.randint(8, 24, 2)
            y, x = rng.randint(0, HEIGHT - h), rng.randint(0, WIDTH - w)
            label = int(rng.randint(len(CLASSES)))
            pixels[y:y + h, x:x + w] = 80 + 60 * label
            mask[y:y + h, x:x + w] = 1 + label
            boxes.append([y / HEIGHT, x / WIDTH, (y + h) / HEIGHT, (x + w) / WIDTH])
            labels.append(CLASSES[label])
            polygons.append([[x, y, x + w, y, x + w, y + h, x, y + h]])
        image_path = os.path.join(folder, f"scene_{i:02d}.png")
        mask_path = os.path.join(folder, f"scene_{i:02d}_mask.png")
        Image.fromarray(pixels).save(image_path)
        Image.fromarray(mask).save(mask_path)
        found.append({"image_uri": image_path, "mask_uri": mask_path, "boxes": boxes,
                      "labels": labels, "polygons": polygons, "pixels": pixels,
                      "mask": mask})
    return found


def detection_frame(drawn: list[dict], masks: bool = False) -> pd.DataFrame:
    frame = pd.DataFrame({"split": ["TRAIN"] * len(drawn),
                          "image_uri": [s["image_uri"] for s in drawn],
                          "label": [s["labels"] for s in drawn],
                          "objects/bbox": [s["boxes"] for s in drawn]})
    if masks:
        frame["objects/mask"] = [{"size": [HEIGHT, WIDTH], "masks": s["polygons"]}
                                 for s in drawn]
    return frame


def coco_split(images: str, annotations: str, count: int, first: int = 0,
               seed: int | None = None) -> list[dict]:
    """`count` scenes in the folder `images` (numbered from `first`; each image's COCO id
    is 1 + its number; `seed` by default `first`), and their COCO file at `annotations`:
    file names relative to `images`, boxes [x, y, width, height] in pixels, categories
    1, 2 and 3."""
    drawn = scenes(images, count, seed=first if seed is None else seed, first=first)
    coco = {"images": [], "annotations": [], "categories": [
        {"id": k + 1, "name": name, "supercategory": "shape"}
        for k, name in enumerate(CLASSES)]}
    for number, scene in enumerate(drawn, first):
        scene["image_id"] = 1 + number
        scene["file_name"] = os.path.basename(scene["image_uri"])
        coco["images"].append({"id": scene["image_id"], "file_name": scene["file_name"],
                               "width": WIDTH, "height": HEIGHT})
        for (ymin, xmin, ymax, xmax), label in zip(scene["boxes"], scene["labels"]):
            x, y = xmin * WIDTH, ymin * HEIGHT
            w, h = (xmax - xmin) * WIDTH, (ymax - ymin) * HEIGHT
            coco["annotations"].append({
                "id": len(coco["annotations"]) + 1, "image_id": scene["image_id"],
                "category_id": CLASSES.index(label) + 1, "bbox": [x, y, w, h],
                "area": w * h, "iscrowd": 0})
    os.makedirs(os.path.dirname(annotations), exist_ok=True)
    with open(annotations, "w") as f:
        json.dump(coco, f)
    return drawn


def write_detection(folder: str, drawn: list[dict], masks: bool = False, **options
                    ):
    """`convert` of the scenes as a detection table, in `folder`."""
    return _convert(detection_frame(drawn, masks), folder, "detection", **options)


def write_segmentation(folder: str, drawn: list[dict], **options):
    frame = pd.DataFrame({"split": ["TRAIN"] * len(drawn),
                          "image_uri": [s["image_uri"] for s in drawn],
                          "mask_uri": [s["mask_uri"] for s in drawn]})
    return _convert(frame, folder, "segmentation", **options)


def _convert(frame: pd.DataFrame, folder: str, task: str, **options):
    """`convert` of the DataFrame, which the detection sources read as a `task` table."""
    return tfrecorder.convert(frame, folder, overwrite=True, progress=False, task=task,
                              **options)

"""Small detection and segmentation datasets whose annotations are known exactly: scenes
of filled rectangles (boxes) and the class-id masks of them, written by `convert`.

The table is a DataFrame with the detection columns (`label` lists of class names,
`objects/bbox` lists of [ymin, xmin, ymax, xmax]); `objects/mask` holds COCO polygons when
`masks=True`, and segmentation rows a `mask_uri`: what `sources/tables.py` reads.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder

CLASSES = ("cat", "dog", "zebra")
HEIGHT, WIDTH = 48, 64


def scenes(folder: str, count: int = 8, seed: int = 0) -> list[dict]:
    """`count` PNG scenes of 0-3 rectangles each, with their boxes (relative), classes,
    polygons (pixels) and a class-id mask (0: background, 1 + the class's index)."""
    rng = np.random.RandomState(seed)
    os.makedirs(folder, exist_ok=True)
    found = []
    for i in range(count):
        pixels = np.full((HEIGHT, WIDTH, 3), 20 + i, np.uint8)
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

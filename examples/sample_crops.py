"""Many real-looking photos from the few bundled ones: random crops and rescales.

Used by examples/train_keras.py (a training set) and benchmarks/ (a few thousand
JPEGs of realistic size). Each crop keeps the label of its source photo's folder.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pandas as pd
from PIL import Image

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")


def make_crops(folder: str, count: int, sides: tuple[int, int] = (400, 800),
               seed: int = 0) -> pd.DataFrame:
    """Writes `count` JPEGs (longer side within `sides`) to `folder`; reuses existing ones.

    Returns an AutoML-style table (split UNASSIGNED, image_uri, label).
    """
    os.makedirs(folder, exist_ok=True)
    sources = sorted(p for p in glob.glob(os.path.join(SAMPLES, "*", "*.*")))
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        source = sources[i % len(sources)]
        path = os.path.join(folder, f"{i:05d}.jpg")
        rows.append(("UNASSIGNED", path, os.path.basename(os.path.dirname(source))))
        crop = rng.uniform(0.6, 1.0, 2), rng.uniform(0, 1, 2)
        side, quality = int(rng.integers(sides[0], sides[1] + 1)), int(rng.integers(85, 96))
        if os.path.exists(path):
            continue
        image = Image.open(source).convert("RGB")
        w, h = image.size
        cw, ch = int(w * crop[0][0]), int(h * crop[0][1])
        left, top = int(crop[1][0] * (w - cw)), int(crop[1][1] * (h - ch))
        image = image.crop((left, top, left + cw, top + ch))
        scale = side / max(image.size)
        image = image.resize((max(1, round(cw * scale)), max(1, round(ch * scale))),
                             Image.Resampling.BICUBIC)
        image.save(path, "JPEG", quality=quality)
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])

"""Object detection: images with their boxes and classes, written and loaded by schema.

    python examples/object_detection.py [OUTPUT_DIR]

Draws 48 small scenes of squares and circles (so the boxes are known exactly), writes
them with a `boxes` column (a list of [ymin, xmin, ymax, xmax] per image) and a
`classes` column (a list of class names per image, stored as ids), and loads batches
back. docs/schema.md walks through it.
"""

import json
import os
import sys
import tempfile

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

import tfrecorder

HEIGHT, WIDTH = 96, 128


def draw_scenes(folder: str, count: int = 48, seed: int = 0) -> pd.DataFrame:
    """Scenes of 0-3 shapes each, and a table of their boxes (relative) and classes."""
    rng = np.random.RandomState(seed)
    os.makedirs(folder, exist_ok=True)
    rows = []
    for i in range(count):
        image = Image.new("RGB", (WIDTH, HEIGHT), tuple(int(v) for v in rng.randint(0, 90, 3)))
        draw = ImageDraw.Draw(image)
        boxes, classes = [], []
        for _ in range(rng.randint(0, 4)):
            h, w = rng.randint(16, 48, 2)
            y, x = rng.randint(0, HEIGHT - h), rng.randint(0, WIDTH - w)
            kind = ["square", "circle"][rng.randint(2)]
            shape = draw.rectangle if kind == "square" else draw.ellipse
            shape([x, y, x + w, y + h], fill=tuple(int(v) for v in rng.randint(150, 256, 3)))
            boxes.append([y / HEIGHT, x / WIDTH, (y + h) / HEIGHT, (x + w) / WIDTH])
            classes.append(kind)
        path = os.path.join(folder, f"scene_{i:02d}.png")
        image.save(path)
        rows.append({"image_uri": path, "boxes": boxes, "classes": classes,
                     "num_objects": len(boxes)})
    return pd.DataFrame(rows)


def main(output_dir: str) -> None:
    table = draw_scenes(os.path.join(output_dir, "scenes"))
    result = table.tensorflow.to_tfrecord(
        os.path.join(output_dir, "dataset"), schema={"classes": "CategoricalInput"},
        overwrite=True, progress=False)
    print(f"Wrote {result.num_records} records: {result.counts}")

    with open(os.path.join(result.output_dir, "dataset.json")) as f:  # the manifest
        manifest = json.load(f)
    for name in ("boxes", "classes", "num_objects"):
        feature = manifest["features"][name]
        print(f"  {name}: {feature['dtype']} {feature['shape']}"
              + (f" vocabulary {feature['vocabulary']}" if "vocabulary" in feature else ""))

    train = tfrecorder.load(result.output_dir, "train", batch_size=8)
    batch = next(iter(train))
    print(f"a batch: image {tuple(batch['image'].shape)}, boxes {batch['boxes'].shape}, "
          f"classes {batch['classes'].shape}")
    vocabulary = manifest["features"]["classes"]["vocabulary"]
    busiest = int(np.argmax(batch["num_objects"]))
    names = [vocabulary[i] for i in batch["classes"][busiest].numpy()]
    boxes = [[round(float(v), 2) for v in box] for box in batch["boxes"][busiest].numpy()]
    print(f"its image {busiest}: {names} at {boxes}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tfrecorder-od-"))

"""Object detection: from an AutoML Vision detection CSV and a COCO file to TFRecords
that `load()` and TensorFlow's detection models read, and a picture of the result.

    python examples/object_detection.py [OUTPUT_DIR]

Draws 48 small scenes of squares and circles (so every box is known exactly) and
describes them twice, as annotation tools export them:

- `automl.csv`: AutoML Vision / Vertex AI's object-detection CSV, one line a box
  (`TRAIN,scenes/scene_00.png,square,x_min,y_min,,,x_max,y_max,,`);
- `instances.json`: COCO, boxes in pixels and each shape's outline as a polygon mask.

Then it writes the CSV in tfrecorder's layout (`objects/bbox`, `objects/label`) and the
COCO file in the `tf_models` layout (`image/object/bbox/xmin`, ..., 1-based classes,
instance masks and `label_map.pbtxt`: what Model Garden and the Object Detection API
read), loads a padded batch of each, and draws the COCO dataset's boxes and masks into
`OUTPUT_DIR/show.png`. docs/detection.md walks through it.
"""

import csv
import json
import math
import os
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw

import tfrecorder

HEIGHT, WIDTH = 96, 128


def draw_scenes(folder: str, count: int = 48, seed: int = 0) -> list[dict]:
    """Scenes of 0-3 shapes each; per scene its file and shapes (class, pixel box,
    outline polygon)."""
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(folder, "scenes"), exist_ok=True)
    found = []
    for i in range(count):
        image = Image.new("RGB", (WIDTH, HEIGHT), tuple(int(v) for v in rng.randint(0, 90, 3)))
        draw = ImageDraw.Draw(image)
        shapes = []
        for _ in range(rng.randint(0, 4)):
            h, w = (int(v) for v in rng.randint(16, 48, 2))
            y, x = int(rng.randint(0, HEIGHT - h)), int(rng.randint(0, WIDTH - w))
            kind = ["square", "circle"][rng.randint(2)]
            colour = tuple(int(v) for v in rng.randint(150, 256, 3))
            if kind == "square":
                draw.rectangle([x, y, x + w - 1, y + h - 1], fill=colour)
                outline = [x, y, x + w, y, x + w, y + h, x, y + h]
            else:
                draw.ellipse([x, y, x + w - 1, y + h - 1], fill=colour)
                outline = [v for t in np.linspace(0, 2 * math.pi, 24, endpoint=False)
                           for v in (x + w / 2 + w / 2 * math.cos(t),
                                     y + h / 2 + h / 2 * math.sin(t))]
            shapes.append({"class": kind, "box": (x, y, w, h), "outline": outline})
        name = f"scenes/scene_{i:02d}.png"
        image.save(os.path.join(folder, name))
        found.append({"file": name, "split": "TRAIN" if i % 6 else "VALIDATION",
                      "shapes": shapes})
    return found


def write_automl_csv(path: str, scenes: list[dict]) -> None:
    """One line a box: `set,path,label,x_min,y_min,,,x_max,y_max,,` (relative);
    a scene without shapes is a line with its path only."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        for scene in scenes:
            if not scene["shapes"]:
                writer.writerow([scene["split"], scene["file"]])
            for shape in scene["shapes"]:
                x, y, w, h = shape["box"]
                writer.writerow([scene["split"], scene["file"], shape["class"],
                                 x / WIDTH, y / HEIGHT, "", "", (x + w) / WIDTH,
                                 (y + h) / HEIGHT, "", ""])


def write_coco(path: str, scenes: list[dict]) -> None:
    """COCO's instances file: boxes [x, y, w, h] in pixels, outlines as polygons."""
    categories = [{"id": 1, "name": "square"}, {"id": 2, "name": "circle"}]
    ids = {c["name"]: c["id"] for c in categories}
    images, annotations = [], []
    for image_id, scene in enumerate(scenes, start=1):
        images.append({"id": image_id, "file_name": scene["file"], "height": HEIGHT,
                       "width": WIDTH})
        for shape in scene["shapes"]:
            x, y, w, h = shape["box"]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": ids[shape["class"]], "bbox": [x, y, w, h],
                                "area": w * h, "iscrowd": 0,
                                "segmentation": [shape["outline"]]})
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)


def main(output_dir: str) -> None:
    scenes = draw_scenes(output_dir)
    automl, coco = os.path.join(output_dir, "automl.csv"), os.path.join(output_dir,
                                                                        "instances.json")
    write_automl_csv(automl, scenes)
    write_coco(coco, scenes)

    from_csv = tfrecorder.convert(automl, os.path.join(output_dir, "from_csv"),
                                  overwrite=True, progress=False)
    from_coco = tfrecorder.convert(coco, os.path.join(output_dir, "from_coco"),
                                   layout="tf_models", split="train", overwrite=True,
                                   progress=False)
    for result in (from_csv, from_coco):
        info = tfrecorder.info(result.output_dir)
        boxes = sum(objects.num_boxes for objects in info.objects.values())
        print(f"{os.path.basename(result.output_dir)}: {result.num_records} images, "
              f"{boxes} boxes, {result.counts}; objects per class: {info.class_counts}")
    with open(os.path.join(from_coco.output_dir, "label_map.pbtxt")) as f:
        print("label_map.pbtxt: " + " ".join(f.read().split()))

    batch = next(iter(tfrecorder.load(from_csv.output_dir, "train", batch_size=8,
                                      max_boxes=4)))
    print(f"a padded batch: image {tuple(batch['image'].shape)}, objects/bbox "
          f"{tuple(batch['objects/bbox'].shape)}, objects/label "
          f"{tuple(batch['objects/label'].shape)}, objects/num "
          f"{batch['objects/num'].numpy().tolist()}")
    first = next(iter(tfrecorder.load(from_coco.output_dir, "train")))
    print(f"a tf_models record loads the same way: objects/bbox "
          f"{tuple(first['objects/bbox'].shape)}, objects/mask "
          f"{tuple(first['objects/mask'].shape)}")

    sheet = tfrecorder.show(from_coco.output_dir, per_class=6)
    sheet.save(os.path.join(output_dir, "show.png"))
    print(f"drew {os.path.join(output_dir, 'show.png')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tfrecorder-od-"))

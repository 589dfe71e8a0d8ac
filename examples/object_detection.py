"""Object detection: from a LabelImg folder and a COCO pair of train and val files to
TFRecords that `load()` and TensorFlow's detection models read, and a picture of the
result.

    python examples/object_detection.py [OUTPUT_DIR]

Draws 48 small scenes of squares and circles (so every box is known exactly) and
describes them twice, as annotation tools export them:

- `scenes/scene_00.xml`, ...: LabelImg's Pascal VOC XML, one file beside each image;
- `instances_train.json` and `instances_val.json`: COCO, boxes in pixels and each
  shape's outline as a polygon mask, with COCO-style category ids (3, 7 and an unused 9).

Then it writes the LabelImg folder in tfrecorder's layout (`objects/bbox`,
`objects/label`) and the COCO pair, as the train and validation splits of one dataset,
in the `tf_models` layout (`image/object/bbox/xmin`, ..., the category ids, instance
masks and a `label_map.pbtxt` of every category: what Model Garden and the Object
Detection API read), loads a padded batch of each, and draws the COCO dataset's boxes
and masks into `OUTPUT_DIR/show.png`. docs/detection.md walks through it.
"""

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


def write_labelimg(folder: str, scenes: list[dict]) -> None:
    """LabelImg's Pascal VOC XML, one file beside each image: boxes in pixels."""
    for scene in scenes:
        name = os.path.basename(scene["file"])
        objects = "".join(
            f"<object><name>{shape['class']}</name><pose>Unspecified</pose>"
            f"<truncated>0</truncated><difficult>0</difficult><bndbox>"
            f"<xmin>{x}</xmin><ymin>{y}</ymin><xmax>{x + w}</xmax><ymax>{y + h}</ymax>"
            f"</bndbox></object>"
            for shape in scene["shapes"] for x, y, w, h in [shape["box"]])
        xml = (f"<annotation><folder>scenes</folder><filename>{name}</filename>"
               f"<size><width>{WIDTH}</width><height>{HEIGHT}</height><depth>3</depth></size>"
               f"<segmented>0</segmented>{objects}</annotation>")
        with open(os.path.join(folder, os.path.splitext(name)[0] + ".xml"), "w") as f:
            f.write(xml)


def write_coco(path: str, scenes: list[dict]) -> None:
    """COCO's instances file: boxes [x, y, w, h] in pixels, outlines as polygons. The
    category ids are COCO's own kind: not 1, 2, ..., and one unused."""
    categories = [{"id": 3, "name": "square"}, {"id": 7, "name": "circle"},
                  {"id": 9, "name": "triangle"}]
    ids = {c["name"]: c["id"] for c in categories}
    images, annotations = [], []
    for scene in scenes:
        images.append({"id": scene["id"], "file_name": scene["file"], "height": HEIGHT,
                       "width": WIDTH})
        for shape in scene["shapes"]:
            x, y, w, h = shape["box"]
            annotations.append({"id": 1000 * scene["id"] + len(annotations),
                                "image_id": scene["id"],
                                "category_id": ids[shape["class"]], "bbox": [x, y, w, h],
                                "area": w * h, "iscrowd": 0,
                                "segmentation": [shape["outline"]]})
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)


def main(output_dir: str) -> None:
    scenes = draw_scenes(output_dir)
    for image_id, scene in enumerate(scenes, start=1):
        scene["id"] = image_id
    write_labelimg(os.path.join(output_dir, "scenes"), scenes)
    train = os.path.join(output_dir, "instances_train.json")
    val = os.path.join(output_dir, "instances_val.json")
    write_coco(train, [s for s in scenes if s["split"] == "TRAIN"])
    write_coco(val, [s for s in scenes if s["split"] == "VALIDATION"])

    # A LabelImg folder (an XML beside each image): its splits drawn by a hash of each path.
    from_labelimg = tfrecorder.convert(os.path.join(output_dir, "scenes"),
                                       os.path.join(output_dir, "from_labelimg"),
                                       overwrite=True, progress=False)
    # COCO's pair of files as the splits of one dataset, in the keys Model Garden reads:
    # the category ids (3, 7, 9) and image ids are kept.
    from_coco = tfrecorder.convert({"train": train, "validation": val},
                                   os.path.join(output_dir, "from_coco"),
                                   layout="tf_models", overwrite=True, progress=False)
    for result in (from_labelimg, from_coco):
        info = tfrecorder.info(result.output_dir)
        boxes = sum(objects.num_boxes for objects in info.objects.values())
        print(f"{os.path.basename(result.output_dir)}: {result.num_records} images, "
              f"{boxes} boxes, {result.counts}; objects per class: {info.class_counts}")
    with open(os.path.join(from_coco.output_dir, "label_map.pbtxt")) as f:
        print("label_map.pbtxt: " + " ".join(f.read().split()))

    batch = next(iter(tfrecorder.load(from_labelimg.output_dir, "train", batch_size=8,
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

"""Object detection from an AutoML detection CSV: tfrecorder against the hand-written
script every detection user writes, and the driver's memory for a million box rows.

    .venv/bin/python benchmarks/bench_detection.py [--images 5000] [--rounds 3]

Builds `--images` real-looking JPEGs (random crops of the bundled photos, 400-800 px,
about 50 KB) and an AutoML Vision object-detection CSV of 1 to 20 boxes each (one row a
box: `TRAIN,path,label,x_min,y_min,,,x_max,y_max,,`), then reports images/s for:

- the hand-written loop in the shape of the Object Detection API's `create_*_tf_record.py`
  scripts (and the `generate_tfrecord.py` of countless tutorials): group the CSV's rows
  by image, read the file, open it with Pillow for its size, build a `tf.train.Example`
  of `image/...` keys with `tf.train.Feature`, write it with `tf.io.TFRecordWriter`, one
  process;
- tfrecorder, `layout="tf_models"`, `validate=True` (every image fully checked), the
  local engine's two workers;
- the validation ceiling: each image read and checked as tfrecorder checks it (a strict
  decode at 1/8 DCT scale) and nothing else, in one bare process per core: the most any
  validating writer reaches on the machine.

The target (issue 28) is tfrecorder >= 3x the hand-written loop's images/s. Then the
driver's peak memory (VmHWM) reading and validating a CSV of 1,000,000 box rows
(`load_table` alone, in a fresh process). Results go in docs/performance.md.

    .venv/bin/python benchmarks/bench_detection.py --coco [--rounds 3]

COCO 2017's training annotations, in shape (issue 38): `coco_2017_shaped` writes, once
(cached in `--out`), an `instances_train2017.json` of 118,287 images of 640 x 480,
860,001 annotations with polygon masks (6 to 40 points, two decimals, as COCO's) and
about 1% crowd RLEs (uncompressed counts, as COCO's crowds), 80 categories with COCO's
ids up to 90: about 440 MB, as the real file. Then, in fresh processes, the driver's
seconds and peak memory (VmHWM) reading and validating it (`load_table`), which is the
time before the first image is read. Targets: under 20 s and 1.5 GB.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
from sample_crops import make_crops  # noqa: E402

CLASSES = ("bicycle", "car", "cat", "dog", "person", "tree")


def write_csv(path: str, image_paths: list[str], seed: int = 0) -> int:
    """An AutoML detection CSV of 1-20 boxes per image; returns the number of rows."""
    rng = np.random.default_rng(seed)
    rows = 0
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        for image_path in image_paths:
            for _ in range(int(rng.integers(1, 21))):
                x0, y0 = rng.uniform(0, 0.7, 2)
                x1, y1 = x0 + rng.uniform(0.05, 0.3), y0 + rng.uniform(0.05, 0.3)
                writer.writerow(["TRAIN", image_path, CLASSES[int(rng.integers(len(CLASSES)))],
                                 f"{x0:.4f}", f"{y0:.4f}", "", "", f"{x1:.4f}", f"{y1:.4f}",
                                 "", ""])
                rows += 1
    return rows


def handwritten(csv_path: str, output: str) -> float:
    """The Object Detection API's script shape, as users copy it (pandas groupby, a
    Pillow open for the size, tf.train.Feature lists), writing `image/...` keys."""
    import hashlib
    import io

    import pandas as pd
    import tensorflow as tf
    from PIL import Image

    start = time.perf_counter()
    columns = ["set", "filename", "class", "xmin", "ymin", "x2", "y2", "xmax", "ymax", "x4",
               "y4"]
    table = pd.read_csv(csv_path, header=None, names=columns)
    label_map = {name: i for i, name in enumerate(sorted(table["class"].unique()), start=1)}

    def bytes_list(values):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

    def floats(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    with tf.io.TFRecordWriter(os.path.join(output, "train.tfrecord")) as writer:
        for filename, group in table.groupby("filename", sort=False):
            with tf.io.gfile.GFile(filename, "rb") as fid:
                encoded = fid.read()
            image = Image.open(io.BytesIO(encoded))
            if image.format != "JPEG":
                raise ValueError("Image format not JPEG")
            width, height = image.size
            xmins, xmaxs, ymins, ymaxs, texts, classes = [], [], [], [], [], []
            for _, row in group.iterrows():
                xmins.append(row["xmin"])
                xmaxs.append(row["xmax"])
                ymins.append(row["ymin"])
                ymaxs.append(row["ymax"])
                texts.append(row["class"].encode())
                classes.append(label_map[row["class"]])
            example = tf.train.Example(features=tf.train.Features(feature={
                "image/height": ints([height]), "image/width": ints([width]),
                "image/filename": bytes_list([filename.encode()]),
                "image/source_id": bytes_list([filename.encode()]),
                "image/key/sha256": bytes_list([hashlib.sha256(encoded).hexdigest().encode()]),
                "image/encoded": bytes_list([encoded]), "image/format": bytes_list([b"jpeg"]),
                "image/object/bbox/xmin": floats(xmins), "image/object/bbox/xmax": floats(xmaxs),
                "image/object/bbox/ymin": floats(ymins), "image/object/bbox/ymax": floats(ymaxs),
                "image/object/class/text": bytes_list(texts),
                "image/object/class/label": ints(classes)}))
            writer.write(example.SerializeToString())
    return time.perf_counter() - start


def tfrecorder_run(csv_path: str, output: str) -> float:
    import tfrecorder

    start = time.perf_counter()
    result = tfrecorder.convert(csv_path, output, layout="tf_models", overwrite=True,
                                progress=False)
    seconds = time.perf_counter() - start
    assert result.num_rejected == 0, result
    return seconds


def validation_ceiling(csv_path: str) -> float:
    """The most any validating writer reaches here: every image read and checked as
    tfrecorder checks it (a strict decode at 1/8 DCT scale), nothing else, in one bare
    process per core."""
    import pandas as pd
    from bench_write import in_processes, scaled_decode

    paths = pd.read_csv(csv_path, header=None, usecols=[1])[1].unique().tolist()

    def work(some):
        datas = []
        for path in some:
            with open(path, "rb") as f:
                datas.append(f.read())
        scaled_decode(datas)

    start = time.perf_counter()
    in_processes(work, paths, os.cpu_count() or 1)
    return time.perf_counter() - start


def driver_memory(csv_path: str) -> str:
    """Peak RSS of reading and validating the CSV (`load_table`), and the table's rows."""
    from tfrecorder.sources import load_table

    start = time.perf_counter()
    table = load_table(csv_path)
    seconds = time.perf_counter() - start
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    return json.dumps({"peak_mb": peak / 1024, "images": len(table.rows),
                       "seconds": round(seconds, 1)})


# COCO's 80 categories have ids 1 to 90; these ten ids are unused.
COCO_GAPS = (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)
COCO_IMAGES, COCO_ANNOTATIONS = 118_287, 860_001


def coco_2017_shaped(path: str, seed: int = 0) -> str:
    """Writes (once: an existing file is reused) a COCO file shaped as
    instances_train2017.json (module docstring); returns its path. Annotations are
    written a batch at a time, encoded by msgspec: about 20 s."""
    import msgspec

    if os.path.exists(path):
        return path
    rng = np.random.default_rng(seed)
    width, height = 640, 480
    ids = [i for i in range(1, 91) if i not in COCO_GAPS]
    encode = msgspec.json.Encoder().encode
    temporary = path + ".partial"
    with open(temporary, "wb") as f:
        f.write(b'{"info": {"description": "COCO 2017 shaped"}, "licenses": [], "images": ')
        f.write(encode([{"license": 1, "file_name": f"{i:012d}.jpg", "coco_url": "",
                         "height": height, "width": width, "date_captured": "",
                         "id": i} for i in range(1, COCO_IMAGES + 1)]))
        f.write(b', "annotations": [')
        per_image = rng.multinomial(COCO_ANNOTATIONS - COCO_IMAGES,
                                    np.full(COCO_IMAGES, 1 / COCO_IMAGES)) + 1
        image_of = np.repeat(np.arange(1, COCO_IMAGES + 1), per_image)
        batch = 20_000
        for start in range(0, COCO_ANNOTATIONS, batch):
            n = min(batch, COCO_ANNOTATIONS - start)
            x = rng.uniform(0, width - 40, n).round(2)
            y = rng.uniform(0, height - 40, n).round(2)
            w = rng.uniform(2, 40, n).round(2)
            h = rng.uniform(2, 40, n).round(2)
            crowd = rng.random(n) < 0.01
            points = rng.integers(6, 41, n)
            # Every polygon of the batch at once: points around each box's ellipse.
            owner = np.repeat(np.arange(n), points)
            angles = rng.uniform(0, 2 * np.pi, len(owner))
            angles = angles[np.lexsort((angles, owner))]
            xy = np.stack([x[owner] + w[owner] / 2 * (1 + np.cos(angles)),
                           y[owner] + h[owner] / 2 * (1 + np.sin(angles))], 1).round(2)
            polygons = np.split(xy.reshape(-1), 2 * np.cumsum(points)[:-1])
            found = []
            for k in range(n):
                if crowd[k]:
                    segmentation = {"counts": _rle_counts(rng, x[k], y[k], w[k], h[k], height,
                                                          width), "size": [height, width]}
                else:
                    segmentation = [polygons[k].tolist()]
                found.append({"segmentation": segmentation, "area": float(round(w[k] * h[k], 4)),
                              "iscrowd": int(crowd[k]), "image_id": int(image_of[start + k]),
                              "bbox": [float(x[k]), float(y[k]), float(w[k]), float(h[k])],
                              "category_id": ids[int(rng.integers(len(ids)))],
                              "id": 900_000 + start + k})
            text = encode(found)[1:-1]
            f.write(text if not start else b"," + text)
        f.write(b'], "categories": ')
        f.write(encode([{"supercategory": "thing", "id": i, "name": f"class {i}"} for i in ids]))
        f.write(b"}")
    os.replace(temporary, path)
    return path


def _rle_counts(rng, x, y, w, h, height: int, width: int) -> list[int]:
    """An uncompressed RLE of the box's pixels (down the columns, from 0s)."""
    x0, y0 = int(x), int(y)
    x1, y1 = min(int(x + w) + 1, width), min(int(y + h) + 1, height)
    counts, position = [], 0
    for column in range(x0, x1):
        start = column * height + y0
        counts += [start - position, y1 - y0]
        position = start + y1 - y0
    counts.append(height * width - position)
    return counts


def coco_memory(path: str) -> str:
    """Seconds and peak RSS of reading and validating a COCO file (`load_table`), and of
    what `convert` does next before it reads an image: the labels' ids (`plan_labels`)
    and a `stat` of every image (`missing_local_images`; none exists here)."""
    from tfrecorder.options import SplitOptions
    from tfrecorder.sources import load_table
    from tfrecorder.sources.image_paths import missing_local_images
    from tfrecorder.write.plan import plan_labels

    start = time.perf_counter()
    table = load_table(path, task="detection")
    seconds = time.perf_counter() - start
    plan_labels(table, SplitOptions())
    missing_local_images(table)
    before_images = time.perf_counter() - start
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    return json.dumps({"peak_mb": round(peak / 1024), "images": len(table.rows),
                       "seconds": round(seconds, 1),
                       "seconds_before_images": round(before_images, 1)})


def coco_main(args, script: str) -> None:
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    path = coco_2017_shaped(os.path.join(args.out, "instances_train2017_shaped.json"))
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{path}: {os.path.getsize(path) / 2**20:.0f} MB (ready in "
          f"{time.perf_counter() - start:.0f} s)")
    for _ in range(args.rounds):
        print("load_table: " + harness.last_line_in_fresh_process(
            script, "coco-memory", path, args.out))


def coco_over_photos(folder: str, count: int, seed: int = 0) -> str:
    """A COCO file over `count` crops of the bundled photos (1 to 20 boxes each, no
    masks), in `folder`, its file_names relative to it; returns its path."""
    from PIL import Image

    table = make_crops(os.path.join(folder, "photos"), count)
    rng = np.random.default_rng(seed)
    ids = [i for i in range(1, 91) if i not in COCO_GAPS]
    images, annotations = [], []
    for number, path in enumerate(table["image_uri"], start=1):
        width, height = Image.open(path).size
        images.append({"id": number, "file_name": os.path.relpath(path, folder),
                       "width": width, "height": height})
        for _ in range(int(rng.integers(1, 21))):
            w, h = rng.uniform(0.05, 0.3) * width, rng.uniform(0.05, 0.3) * height
            x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
            annotations.append({"id": len(annotations) + 1, "image_id": number,
                                "category_id": ids[int(rng.integers(len(ids)))],
                                "bbox": [round(x, 2), round(y, 2), round(w, 2), round(h, 2)],
                                "area": round(w * h, 2), "iscrowd": 0})
    path = os.path.join(folder, "instances_photos.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations,
                   "categories": [{"id": i, "name": f"class {i}"} for i in ids]}, f)
    return path


def model_garden_coco(coco_path: str, output: str) -> float:
    """Model Garden's official/vision/data/create_coco_tf_record.py as its users run it:
    its `main` with its flags (--image_dir, --object_annotations_file,
    --output_file_prefix, --num_shards), which converts in a process pool of every core.
    From tf-models-official 2.20.0's interop folder (tests/interop.py), its `official`
    and `official.vision` packages registered without their __init__ (tests/
    model_garden.py says why)."""
    import importlib

    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from interop import interop_path
    from model_garden import _EMPTY_PACKAGES, _empty_package

    folders = [interop_path(n) for n in ("tf-models-official", "tf-keras", "pycocotools")]
    sys.path[:0] = [str(f) for f in folders]
    for name in _EMPTY_PACKAGES:
        _empty_package(name, folders[0])
    from absl import flags

    module = importlib.import_module("official.vision.data.create_coco_tf_record")
    flags.FLAGS(["create_coco_tf_record", f"--image_dir={os.path.dirname(coco_path)}",
                 f"--object_annotations_file={coco_path}",
                 f"--output_file_prefix={os.path.join(output, 'train')}", "--num_shards=2"])
    start = time.perf_counter()
    module.main(None)
    return time.perf_counter() - start


def coco_tfrecorder(coco_path: str, output: str, validate: bool) -> float:
    import tfrecorder

    start = time.perf_counter()
    result = tfrecorder.convert(coco_path, output, layout="tf_models", split="train",
                                overwrite=True, progress=False, validate=validate)
    seconds = time.perf_counter() - start
    assert result.num_rejected == 0, result
    return seconds


def coco_photos_main(args, script: str) -> None:
    os.makedirs(args.out, exist_ok=True)
    path = coco_over_photos(args.out, args.images)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{args.images} photos, COCO file {path}")
    names = ["model_garden", "coco_tfrecorder", "coco_tfrecorder_unvalidated"]

    def seconds(name):
        return harness.seconds_in_fresh_process(script, name, path, args.out)

    results = harness.rounds(names, seconds, args.images, args.rounds)
    for r in results:
        print("round: " + ", ".join(f"{k} {v:.0f} images/s" for k, v in r.items()))
    print("median: " + ", ".join(f"{name} {harness.median(results, name):.0f} images/s"
                                 for name in names)
          + f"; tfrecorder / Model Garden "
          f"{harness.median_ratio(results, 'coco_tfrecorder', 'model_garden'):.2f}, "
          "unvalidated "
          f"{harness.median_ratio(results, 'coco_tfrecorder_unvalidated', 'model_garden'):.2f}")


def contender(name: str, csv_path: str, out: str) -> str:
    output = os.path.join(out, f"out-{name}")
    os.makedirs(output, exist_ok=True)
    if name == "handwritten":
        return str(handwritten(csv_path, output))
    if name == "tfrecorder":
        return str(tfrecorder_run(csv_path, output))
    if name == "ceiling":
        return str(validation_ceiling(csv_path))
    if name == "memory":
        return driver_memory(csv_path)
    if name == "coco-memory":
        return coco_memory(csv_path)
    if name == "model_garden":
        return str(model_garden_coco(csv_path, output))
    if name in ("coco_tfrecorder", "coco_tfrecorder_unvalidated"):
        return str(coco_tfrecorder(csv_path, output, name == "coco_tfrecorder"))
    raise ValueError(name)


def main() -> None:
    parser = harness.parser(__doc__.splitlines()[0], images=5000, rounds=3)
    parser.add_argument("--box-rows", type=int, default=1_000_000)
    parser.add_argument("--coco", action="store_true",
                        help="COCO 2017's training annotations, in shape: load_table's "
                             "seconds and peak memory")
    parser.add_argument("--coco-photos", action="store_true",
                        help="a COCO file over --images photos: images/s against Model "
                             "Garden's create_coco_tf_record.py")
    args = parser.parse_args()
    if args.contender:
        print(contender(args.contender, args.input, args.out))
        return
    if args.coco:
        coco_main(args, os.path.abspath(__file__))
        return
    if args.coco_photos:
        coco_photos_main(args, os.path.abspath(__file__))
        return
    os.makedirs(args.out, exist_ok=True)
    table = make_crops(os.path.join(args.out, "images"), args.images)
    paths = table["image_uri"].tolist()
    csv_path = os.path.join(args.out, "detection.csv")
    rows = write_csv(csv_path, paths)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{len(paths)} images, {rows} box rows")
    script = os.path.abspath(__file__)

    def seconds(name):
        return harness.seconds_in_fresh_process(script, name, csv_path, args.out)

    results = harness.rounds(["handwritten", "tfrecorder", "ceiling"], seconds, len(paths),
                             args.rounds)
    for r in results:
        print("round: " + ", ".join(f"{k} {v:.0f} images/s" for k, v in r.items())
              + f", ratio {r['tfrecorder'] / r['handwritten']:.2f}, ceiling ratio "
              f"{r['ceiling'] / r['handwritten']:.2f}")
    ratio = harness.median_ratio(results, "tfrecorder", "handwritten")
    print(f"median: hand-written {harness.median(results, 'handwritten'):.0f} images/s, "
          f"tfrecorder {harness.median(results, 'tfrecorder'):.0f} images/s, "
          f"tfrecorder / hand-written {ratio:.2f} (target >= 3); the validation ceiling "
          f"{harness.median(results, 'ceiling'):.0f} images/s, "
          f"{harness.median_ratio(results, 'ceiling', 'handwritten'):.2f}x hand-written, "
          f"tfrecorder at {harness.median_ratio(results, 'tfrecorder', 'ceiling'):.0%} of it")

    if args.box_rows:
        box_rows_memory(args, paths, script)


def box_rows_memory(args, paths: list[str], script: str) -> None:
    """The driver's peak memory and seconds reading `args.box_rows` box rows."""
    # A million box rows, of about 95,000 images: links to the JPEGs above (the driver
    # checks that every image exists, and reads none).
    big = os.path.join(args.out, "detection-1m.csv")
    links = os.path.join(args.out, "links")
    os.makedirs(links, exist_ok=True)
    rng = np.random.default_rng(1)
    with open(big, "w", newline="") as f:
        writer = csv.writer(f)
        written, image = 0, 0
        while written < args.box_rows:
            path = os.path.join(links, f"{image:07d}.jpg")
            if not os.path.lexists(path):
                os.symlink(paths[image % len(paths)], path)
            for _ in range(min(int(rng.integers(1, 21)), args.box_rows - written)):
                x0, y0 = rng.uniform(0, 0.7, 2)
                writer.writerow(["TRAIN", path, CLASSES[written % len(CLASSES)], f"{x0:.4f}",
                                 f"{y0:.4f}", "", "", f"{x0 + 0.1:.4f}", f"{y0 + 0.1:.4f}",
                                 "", ""])
                written += 1
            image += 1
    size_mb = os.path.getsize(big) / 2**20
    result = subprocess.run([sys.executable, script, "--contender", "memory", "--input", big,
                             "--out", args.out], capture_output=True, text=True)
    print(f"driver memory, {args.box_rows:,} box rows ({size_mb:.0f} MB CSV): "
          f"{result.stdout.strip().splitlines()[-1] if result.stdout else result.stderr[-2000:]}")


if __name__ == "__main__":
    main()

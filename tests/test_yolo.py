"""YOLO (Ultralytics) datasets (issue 38, item 3): a data.yaml and its label files become
detection records whose boxes, classes (in the order of `names`) and splits are the
dataset's, read back with TensorFlow; YOLO-seg polygons become instance masks."""

from __future__ import annotations

import glob
import io
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from detection_data import HEIGHT, WIDTH, scenes
from helpers import read_manifest
from PIL import Image

import tfrecorder
from tfrecorder.errors import SchemaError
from tfrecorder.format import vocabulary
from tfrecorder.sources import load_table, yolo

# Not sorted, and "bird" is used by no image: the order of `names` is the vocabulary.
NAMES = ("zebra", "cat", "dog", "bird")
DATA_YAML = "names: [zebra, cat, dog, bird]\ntrain: images/train\nval: images/val\n"
VAL = 6  # scenes 6 and 7 are the validation split


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    return scenes(str(tmp_path_factory.mktemp("scenes")))


def yolo_line(box, label) -> str:
    """A box [ymin, xmin, ymax, xmax] as Ultralytics writes it: class cx cy w h."""
    ymin, xmin, ymax, xmax = box
    values = ((xmin + xmax) / 2, (ymin + ymax) / 2, xmax - xmin, ymax - ymin)
    return " ".join([str(NAMES.index(label)), *(repr(float(v)) for v in values)])


def ultralytics(root, drawn, data_yaml: str | None = DATA_YAML) -> str:
    """An Ultralytics folder of the scenes: images/{train,val}, labels/{train,val}.
    Scene 0 has an empty label file, scene 4 (no boxes either) none at all."""
    for i, scene in enumerate(drawn):
        split = "val" if i >= VAL else "train"
        name = os.path.basename(scene["image_uri"])
        os.makedirs(os.path.join(root, "images", split), exist_ok=True)
        os.makedirs(os.path.join(root, "labels", split), exist_ok=True)
        shutil.copy(scene["image_uri"], os.path.join(root, "images", split, name))
        if i == 4:
            continue
        with open(os.path.join(root, "labels", split, name[:-4] + ".txt"), "w") as f:
            f.writelines(yolo_line(box, label) + "\n"
                         for box, label in zip(scene["boxes"], scene["labels"]))
    if data_yaml is not None:
        write(root, "data.yaml", data_yaml)
    return str(root)


def write(folder, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def examples(folder) -> dict[str, list[tf.train.Example]]:
    """Each split's records, parsed by TensorFlow."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.tfrecord"))):
        split = os.path.basename(path).split("-")[0]
        found.setdefault(split, []).extend(
            tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path))
    return found


def values(example: tf.train.Example, key: str) -> list:
    feature = example.features.feature[key]
    return list(feature.float_list.value or feature.int64_list.value
                or feature.bytes_list.value)


def convert(source, out, **options):
    return tfrecorder.convert(source, str(out), progress=False, num_workers=1,
                              overwrite=True, **options)


def scene_named(drawn, name: bytes) -> tuple[int, dict]:
    return next((i, s) for i, s in enumerate(drawn)
                if os.path.basename(s["image_uri"]) == name.decode())


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
def test_an_ultralytics_folder_converts_with_its_boxes_classes_and_splits(
        drawn, tmp_path, layout):
    root = ultralytics(tmp_path / "dataset", drawn)
    convert(root, tmp_path / "out", layout=layout)
    found = examples(tmp_path / "out")
    assert sorted(found) == ["train", "validation"]
    seen = []
    tf_models = layout == "tf_models"
    for split, records in found.items():
        for example in records:
            i, scene = scene_named(drawn, values(
                example, "image/filename" if tf_models else "image_name")[0])
            seen.append(i)
            assert split == ("validation" if i >= VAL else "train")
            if tf_models:
                boxes = np.stack([values(example, f"image/object/bbox/{k}")
                                  for k in ("ymin", "xmin", "ymax", "xmax")], axis=-1)
                ids = values(example, "image/object/class/label")
                texts = [t.decode() for t in values(example, "image/object/class/text")]
                assert texts == scene["labels"]
                # class k is k + 1: 0 is the background
                assert ids == [NAMES.index(label) + 1 for label in scene["labels"]]
            else:
                boxes = np.asarray(values(example, "objects/bbox")).reshape(-1, 4)
                ids = values(example, "objects/label")
                assert ids == [NAMES.index(label) for label in scene["labels"]]
            np.testing.assert_allclose(boxes.reshape(-1, 4),
                                       np.asarray(scene["boxes"]).reshape(-1, 4), atol=1e-6)
    assert sorted(seen) == list(range(len(drawn)))  # the images without boxes included
    manifest = read_manifest(tmp_path / "out")
    assert manifest["labels"]["vocabulary"] == list(NAMES)  # bird too: used or not
    if tf_models:
        with open(tmp_path / "out" / "label_map.pbtxt") as f:
            label_map = vocabulary.parse_label_map(f.read())
        assert label_map.names == NAMES and label_map.model_ids == (1, 2, 3, 4)


def test_the_data_file_and_its_folder_read_alike_and_names_may_be_a_mapping(drawn, tmp_path):
    root = ultralytics(tmp_path, drawn)
    mapping = write(tmp_path, "mapping.yml", "names:\n  0: zebra\n  1: cat\n  '2': dog\n"
                    "  3: bird\ntrain: images/train\nval: images/val\n")
    by_folder = load_table(os.path.join(root, "data.yaml"))
    for other in (load_table(mapping), load_table(os.path.join(root, "data.yaml"))):
        pd.testing.assert_frame_equal(other.rows, by_folder.rows)
        assert other.label_map == by_folder.label_map
    assert by_folder.label_map.names == NAMES
    assert by_folder.task == "detection"
    assert by_folder.rows["split"].tolist() == ["train"] * VAL + ["validation"] * 2
    # An empty label file (scene 0) and a missing one (scene 4): images without boxes.
    assert by_folder.rows["label"].iloc[0] == [] and by_folder.rows["label"].iloc[4] == []
    shutil.rmtree(tmp_path / "labels")
    os.remove(mapping)
    empty = load_table(str(tmp_path))  # the folder holding data.yaml
    assert all(labels == [] for labels in empty.rows["label"])


def test_split_entries_may_be_list_files_and_lists_of_them(drawn, tmp_path):
    root = ultralytics(tmp_path, drawn)
    train = sorted(os.listdir(tmp_path / "images" / "train"))
    # "./x" is relative to the list file's folder, as Ultralytics reads it; other
    # relative lines to the root; absolute ones as they are.
    os.makedirs(tmp_path / "lists")
    write(tmp_path / "lists", "a.txt", f"./../images/train/{train[0]}\n"
          f"images/train/{train[1]}\n\n{tmp_path / 'images' / 'train' / train[2]}\n")
    write(tmp_path, "b.txt", "".join(f"./images/train/{name}\n" for name in train[3:]))
    write(tmp_path, "lists.yaml", "names: [zebra, cat, dog, bird]\ntrain: [lists/a.txt, "
          "b.txt]\nvalidation: images/val\n")
    listed = load_table(os.path.join(root, "lists.yaml"))
    expected = load_table(os.path.join(root, "data.yaml"))

    def key(table):
        rows = table.rows
        return sorted(zip(rows["uri"], rows["split"], map(tuple, rows["label"]),
                          [tuple(np.ravel(b)) for b in rows["objects/bbox"]]))

    assert key(listed) == key(expected)


def test_the_same_boxes_as_yolo_and_as_a_dataframe_give_the_same_records(
        drawn, tmp_path, monkeypatch):
    root = ultralytics(tmp_path / "dataset", drawn)
    convert(root, tmp_path / "yolo")
    monkeypatch.chdir(root)  # the frame's image paths as the YOLO rows name them
    frame = pd.DataFrame({
        "split": ["VALIDATION" if i >= VAL else "TRAIN" for i in range(len(drawn))],
        "image_uri": [f"images/{'val' if i >= VAL else 'train'}/"
                      f"{os.path.basename(s['image_uri'])}" for i, s in enumerate(drawn)],
        "label": [s["labels"] for s in drawn],
        "boxes": [s["boxes"] for s in drawn]})
    convert(frame, tmp_path / "frame", task="detection", label_vocabulary=list(NAMES))
    ours, theirs = examples(tmp_path / "yolo"), examples(tmp_path / "frame")
    assert sorted(ours) == sorted(theirs)
    for split in ours:
        by_uri = {values(e, "image_uri")[0]: e for e in theirs[split]}
        assert len(by_uri) == len(ours[split])
        for example in ours[split]:
            other = by_uri[values(example, "image_uri")[0]]
            assert sorted(example.features.feature) == sorted(other.features.feature)
            for key in example.features.feature:
                mine, its = values(example, key), values(other, key)
                if example.features.feature[key].float_list.value:
                    np.testing.assert_allclose(mine, its, rtol=1e-6)
                else:
                    assert mine == its, key


# A triangle and a box, as fractions; the polygon's box is its bounding box.
TRIANGLE = [0.25, 0.25, 0.75, 0.25, 0.5, 0.875]


@pytest.mark.parametrize("image_size", [None, (24, 32)])
def test_yolo_seg_polygons_become_instance_masks(tmp_path, image_size):
    os.makedirs(tmp_path / "images" / "train")
    os.makedirs(tmp_path / "labels" / "train")
    Image.new("RGB", (WIDTH, HEIGHT), (90, 20, 20)).save(
        tmp_path / "images" / "train" / "a.png")
    write(tmp_path / "labels" / "train", "a.txt",
          "1 " + " ".join(map(str, TRIANGLE)) + "\n0 0.125 0.125 0.125 0.125\n")
    write(tmp_path, "data.yaml", "names: [zebra, cat]\ntrain: images/train\n")
    convert(str(tmp_path), tmp_path / "out", image_size=image_size)
    (example,) = examples(tmp_path / "out")["train"]
    np.testing.assert_allclose(np.reshape(values(example, "objects/bbox"), (-1, 4)),
                               [[0.25, 0.25, 0.875, 0.75], [0.0625, 0.0625, 0.1875, 0.1875]],
                               atol=1e-7)
    assert values(example, "objects/label") == [1, 0]
    triangle, box = (np.asarray(Image.open(io.BytesIO(m)))
                     for m in values(example, "objects/mask"))
    height, width = image_size or (HEIGHT, WIDTH)
    assert triangle.shape == box.shape == (height, width)
    assert not box.any()  # a box line in a seg dataset: no mask, as COCO's
    inside = [(0.35, 0.5), (0.3, 0.3), (0.3, 0.7), (0.8, 0.5)]  # (y, x) fractions
    outside = [(0.1, 0.5), (0.5, 0.1), (0.9, 0.9), (0.7, 0.3), (0.7, 0.7)]
    for y, x in inside:
        assert triangle[int(y * height), int(x * width)] == 1, (y, x)
    for y, x in outside:
        assert triangle[int(y * height), int(x * width)] == 0, (y, x)
    # Pixel for pixel the mask of the same polygon given in pixels, as COCO gives it.
    frame = pd.DataFrame({"image_uri": [str(tmp_path / "images" / "train" / "a.png")],
                          "split": ["TRAIN"], "label": [["cat"]],
                          "boxes": [[[0.25, 0.25, 0.875, 0.75]]],
                          "objects/mask": [{"size": [HEIGHT, WIDTH], "masks": [[
                              list(np.multiply(TRIANGLE, [WIDTH, HEIGHT] * 3))]]}]})
    convert(frame, tmp_path / "coco", task="detection", image_size=image_size)
    (coco,) = examples(tmp_path / "coco")["train"]
    assert values(coco, "objects/mask")[0] == values(example, "objects/mask")[0]


def test_yolo_seg_records_decode_with_model_gardens_decoder(tmp_path):
    """The tf_models layout of a YOLO-seg dataset, read by Model Garden's own
    TfExampleDecoder: classes k + 1, the polygon's box, and its mask."""
    from model_garden import decode_detection

    os.makedirs(tmp_path / "images" / "train")
    os.makedirs(tmp_path / "labels" / "train")
    Image.new("RGB", (WIDTH, HEIGHT), (90, 20, 20)).save(
        tmp_path / "images" / "train" / "a.png")
    write(tmp_path / "labels" / "train", "a.txt", "1 " + " ".join(map(str, TRIANGLE)))
    write(tmp_path, "data.yaml", "names: {0: zebra, 1: cat}\ntrain: images/train\n")
    convert(str(tmp_path), tmp_path / "out", layout="tf_models", image_format="jpeg")
    (serialized,) = [r.numpy() for path in glob.glob(str(tmp_path / "out" / "*.tfrecord"))
                     for r in tf.data.TFRecordDataset(path)]
    decoded = decode_detection(serialized)
    assert decoded["groundtruth_classes"].tolist() == [2]
    np.testing.assert_allclose(decoded["groundtruth_boxes"], [[0.25, 0.25, 0.875, 0.75]],
                               atol=1e-6)
    (mask,) = decoded["groundtruth_instance_masks"]
    assert mask[int(0.35 * HEIGHT), WIDTH // 2] == 1 and mask[int(0.1 * HEIGHT), 5] == 0


def test_a_class_id_outside_names_is_skipped_and_listed_or_refused(drawn, tmp_path):
    """One bad line costs its object, listed with its file and line; the image and its
    other objects are written. invalid_annotations="error" refuses the dataset."""
    root = ultralytics(tmp_path, drawn)
    with open(tmp_path / "labels" / "train" / "scene_02.txt", "a") as f:
        f.write("4 0.5 0.5 0.1 0.1\n")
    result = tfrecorder.convert(root, str(tmp_path / "out"), progress=False)
    assert result.skipped_annotations == {"class id not in names": 1}
    listed = pd.read_csv(tmp_path / "out" / "skipped_annotations.csv")
    assert listed.to_dict("records") == [{
        "source": "labels/train/scene_02.txt", "annotation": "line 3",
        "image": "images/train/scene_02.png", "reason": "class id not in names",
        "written": "4 0.5 0.5 0.1 0.1"}]
    scene_02 = next(e for e in examples(tmp_path / "out")["train"]
                    if values(e, "image_uri") == [b"images/train/scene_02.png"])
    assert len(values(scene_02, "objects/label")) == len(drawn[2]["labels"]) == 2
    with pytest.raises(SchemaError) as error:
        tfrecorder.convert(root, str(tmp_path / "strict"), progress=False,
                           invalid_annotations="error")
    message = str(error.value)
    assert "'labels/train/scene_02.txt' line 3: '4 0.5 0.5 0.1 0.1'" in message
    assert "4 classes (ids 0 to 3)" in message and "invalid_annotations='skip'" in message
    assert not os.path.exists(tmp_path / "strict")


@pytest.mark.parametrize("line, reason, words", [
    ("0 0.5 0.5 0.1", "wrong number of coordinates", "neither 4 numbers nor a polygon"),
    ("0 0.5 0.5 0.1 0.1 0.9", "wrong number of coordinates", "neither 4 numbers"),
    ("cat 0.5 0.5 0.1 0.1", "line that is not numbers", "not numbers"),
    ("0 0.5 0.5 nan 0.1", "line that is not numbers", "not numbers"),
    ("1.5 0.5 0.5 0.1 0.1", "class id not in names", "a class id the data file does not"),
    ("0 0.5 1.02 0.2 0.1", "coordinate past Ultralytics' 1% tolerance", "outside -0.01..1.01"),
    ("0 0.5 0.5 0 0.1", "empty or upside-down box", "minimum is not below its maximum"),
])
def test_a_bad_label_line_is_skipped_or_refused_naming_file_and_line(tmp_path, line, reason,
                                                                     words):
    os.makedirs(tmp_path / "images" / "train")
    os.makedirs(tmp_path / "labels" / "train")
    Image.new("RGB", (WIDTH, HEIGHT)).save(tmp_path / "images" / "train" / "a.png")
    write(tmp_path / "labels" / "train", "a.txt", "1 0.5 0.5 0.2 0.2\n" + line + "\n")
    write(tmp_path, "data.yaml", "names: [zebra, cat]\ntrain: images/train\n")
    table = load_table(str(tmp_path))
    assert table.rows["label"].tolist() == [["cat"]]  # the good line is kept
    assert table.skipped_annotations[["source", "annotation", "reason", "written"]].to_dict(
        "records") == [{"source": "labels/train/a.txt", "annotation": "line 2",
                        "reason": reason, "written": line}]
    assert table.annotations.objects == 2
    with pytest.raises(SchemaError, match=r"'labels/train/a\.txt' line 2") as error:
        load_table(str(tmp_path), invalid_annotations="error")
    assert words in str(error.value)


def test_a_box_within_ultralytics_tolerance_is_clipped_and_counted(tmp_path):
    """Ultralytics accepts label numbers up to 1% outside 0..1 and clips the boxes when
    it trains: so are they written, clipped, and counted; further out, listed."""
    os.makedirs(tmp_path / "images" / "train")
    os.makedirs(tmp_path / "labels" / "train")
    Image.new("RGB", (WIDTH, HEIGHT)).save(tmp_path / "images" / "train" / "a.png")
    write(tmp_path, "data.yaml", "names: [zebra]\ntrain: images/train\n")
    # 0.0333 - 0.0667 / 2 = -0.00005: four decimals' rounding; a centre at 0.98 with a
    # width of 0.14 ends at 1.05: a box 0.05 past the edge, numbers all within 1.01.
    write(tmp_path / "labels" / "train", "a.txt",
          "0 0.0333 0.9667 0.0667 0.0667\n0 0.98 0.5 0.14 0.2\n0 0.5 0.5 0.2 0.2\n")
    table = load_table(str(tmp_path))
    boxes = np.reshape(table.rows["objects/bbox"].iloc[0], (-1, 4))
    np.testing.assert_allclose(boxes, [[0.93335, 0.0, 1.0, 0.06665], [0.4, 0.91, 0.6, 1.0],
                                       [0.4, 0.4, 0.6, 0.6]], atol=1e-6)
    assert table.annotations.clipped == 2 and table.skipped_annotations is None
    assert yolo.TOLERANCE == 0.01
    write(tmp_path / "labels" / "train", "a.txt", "0 0.5 0.5 1.02 0.1\n")
    table = load_table(str(tmp_path))
    assert table.rows["label"].tolist() == [[]]
    assert table.skipped_annotations["reason"].tolist() == [
        "coordinate past Ultralytics' 1% tolerance"]


@pytest.mark.parametrize("text, words", [
    ("train: images/train\n", "no names"),
    ("names: [a]\n", "no train, val or test"),
    ("- a\n- b\n", "holds list, not a mapping"),
    ("names: [a\ntrain: x\n", "does not parse at line 2"),
    ("names: [a, a]\ntrain: images/train\n", "classes 0 and 1 both 'a'"),
    ("names: {0: a, 2: b}\ntrain: images/train\n", "keys [0, 2]"),
    ("names: [a, b]\nnc: 3\ntrain: images/train\n", "nc: 3"),
    ("names: [a]\nkpt_shape: [17, 3]\ntrain: images/train\n", "pose dataset"),
    ("names: [a]\ntrain: images/nowhere\n", "`train: images/nowhere`, which is not there"),
    ("names: [a]\npath: /no/such/root\ntrain: images/train\n", "pass image_root"),
])
def test_a_yaml_that_is_no_usable_yolo_data_file_says_what_it_lacks(tmp_path, text, words):
    os.makedirs(tmp_path / "images" / "train")
    Image.new("RGB", (WIDTH, HEIGHT)).save(tmp_path / "images" / "train" / "a.png")
    path = write(tmp_path, "data.yaml", text)
    with pytest.raises(SchemaError, match=words.replace("[", r"\[").replace(".", r"\.")):
        load_table(path)


def test_the_root_is_path_relative_to_the_data_file_or_image_root(drawn, tmp_path):
    root = ultralytics(tmp_path / "dataset", drawn, data_yaml=None)
    os.makedirs(tmp_path / "configs")
    relative = write(tmp_path / "configs", "data.yaml", "path: ../dataset\n" + DATA_YAML)
    elsewhere = write(tmp_path / "configs", "moved.yaml",
                      "path: /content/datasets/gone\n" + DATA_YAML)
    expected = load_table(relative).rows["uri"].tolist()
    assert expected[0].startswith(root)
    assert load_table(elsewhere, image_root=root).rows["uri"].tolist() == expected


def test_split_is_the_data_files_and_no_option_overrides_it(drawn, tmp_path):
    root = ultralytics(tmp_path, drawn)
    with pytest.raises(SchemaError, match="names each image's split"):
        load_table(root, split="test")


def test_an_image_under_two_splits_is_refused(drawn, tmp_path):
    ultralytics(tmp_path, drawn)
    path = write(tmp_path, "data.yaml", "names: [zebra, cat, dog, bird]\n"
                 "train: images/train\nval: [images/val, images/train]\n")
    with pytest.raises(SchemaError, match="under `train` and under `val`"):
        load_table(path)

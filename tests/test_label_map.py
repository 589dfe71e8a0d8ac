"""Label maps (issue 38): `label_vocabulary="label_map.pbtxt"` fixes every class's id, the
tf_models layout stores the map's ids (gaps included, as COCO's 1..90) and lists them in
`label_map.pbtxt`, and readers map them back; a dict of files by split is one dataset with
one set of ids."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from detection_data import detection_frame, scenes
from helpers import read_manifest
from model_garden import decode_detection, model_garden
from PIL import Image

import tfrecorder
from tfrecorder.errors import OptionError, SchemaError
from tfrecorder.format import vocabulary

# COCO's own style: a name and a display name, ids with gaps, a field we do not read.
LABEL_MAP = """\
# the classes the model was trained with
item {
  name: "/m/01yrx"
  id: 17
  display_name: "cat"
}
item { id: 3 name: 'zebra' frequency: FREQUENT }
item {
  name: "dog"
  id: 18
  keypoints { id: 0 label: "nose" }
}
"""


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    return scenes(str(tmp_path_factory.mktemp("scenes")))


def write_map(folder, text=LABEL_MAP) -> str:
    path = os.path.join(folder, "label_map.pbtxt")
    with open(path, "w") as f:
        f.write(text)
    return path


def records(folder) -> list[tf.train.Example]:
    return [tf.train.Example.FromString(r.numpy())
            for name in sorted(os.listdir(folder)) if name.endswith(".tfrecord")
            for r in tf.data.TFRecordDataset(os.path.join(folder, name))]


def convert(frame, out, **options):
    return tfrecorder.convert(frame, out, task="detection", num_workers=1, progress=False,
                              **options)


def test_a_label_map_is_parsed_as_the_object_detection_api_reads_it(tmp_path):
    found = vocabulary.load_map(write_map(tmp_path))
    assert found.names == ("zebra", "cat", "dog")  # by id; display_name before name
    assert found.ids == (3, 17, 18)
    assert vocabulary.load(write_map(tmp_path)) == ("zebra", "cat", "dog")
    # Ids 1, 2, ... are the default, said once.
    plain = vocabulary.parse_label_map("item { id: 2 name: 'b' } item { id: 1 name: 'a' }")
    assert plain.names == ("a", "b") and plain.ids is None


@pytest.mark.parametrize("text, words", [
    ("item { id: 1 name: 'a' }\nitem { id: 1 name: 'b' }", "line 2 of"),
    ("item { name: 'a' }", "no id"),
    ("item { id: 0 name: 'a' }", "id 0"),
    ("item { id: 1 name: 'a' \n", "not a label map"),
    ("item { id: 1 name: 'a' }\nitem { id: 2 name: 'a' }", "'a' twice"),
])
def test_a_broken_label_map_is_refused_naming_the_line(tmp_path, text, words):
    with pytest.raises(OptionError, match=words) as error:
        vocabulary.load_map(write_map(tmp_path, text))
    assert error.value.option == "label_vocabulary"


def test_the_tf_models_layout_stores_the_maps_ids_and_readers_map_them_back(drawn, tmp_path):
    model_garden()
    out = str(tmp_path / "out")
    convert(detection_frame(drawn, masks=True), out, layout="tf_models",
            label_vocabulary=write_map(tmp_path))
    manifest = read_manifest(out)
    assert manifest["labels"]["vocabulary"] == ["zebra", "cat", "dog"]
    assert manifest["labels"]["label_map_ids"] == [3, 17, 18]
    written = vocabulary.load_map(os.path.join(out, "label_map.pbtxt"))
    assert (written.names, written.ids) == (("zebra", "cat", "dog"), (3, 17, 18))
    by_name = {"zebra": 3, "cat": 17, "dog": 18}
    scenes_by_file = {os.path.basename(s["image_uri"]): s for s in drawn}
    examples = records(out)
    assert len(examples) == len(drawn)
    for example in examples:
        feature = example.features.feature
        scene = scenes_by_file[feature["image/filename"].bytes_list.value[0].decode()]
        assert list(feature["image/object/class/label"].int64_list.value) == [
            by_name[name] for name in scene["labels"]]
        decoded = decode_detection(example.SerializeToString())  # Model Garden's decoder
        assert decoded["groundtruth_classes"].tolist() == [by_name[n] for n in scene["labels"]]
    # load() and the reader without TensorFlow give the vocabulary's indexes again.
    names = ("zebra", "cat", "dog")
    loaded = tfrecorder.load(out)["train"]
    seen = sorted(tuple(names[i] for i in x["objects/label"].numpy()) for x in loaded)
    assert seen == sorted(tuple(s["labels"]) for s in drawn)
    split = tfrecorder.open_split(out, "train")
    assert sorted(tuple(names[i] for i in split[i]["objects/label"])
                  for i in range(len(split))) == seen
    assert tfrecorder.verify(out).ok


def test_our_layout_numbers_the_maps_classes_in_id_order(drawn, tmp_path):
    out = str(tmp_path / "out")
    convert(detection_frame(drawn), out, label_vocabulary=write_map(tmp_path))
    names = ("zebra", "cat", "dog")
    seen = sorted(tuple(names[i] for i in x["objects/label"].numpy())
                  for x in tfrecorder.load(out)["train"])
    assert seen == sorted(tuple(s["labels"]) for s in drawn)
    # A dataset given as the vocabulary passes the ids on.
    again = str(tmp_path / "again")
    convert(detection_frame(drawn), again, label_vocabulary=out, layout="tf_models")
    assert read_manifest(again)["labels"]["label_map_ids"] == [3, 17, 18]


def test_a_class_missing_from_the_map_fails_before_any_image_is_read(drawn, tmp_path):
    frame = detection_frame(drawn)
    path = write_map(tmp_path, "item { id: 1 name: 'cat' }\nitem { id: 5 name: 'dog' }")
    for uri in frame["image_uri"]:
        os.chmod(uri, 0)  # reading any image would fail otherwise
    try:
        with pytest.raises(SchemaError, match="'zebra' at row") as error:
            convert(frame, str(tmp_path / "out"), label_vocabulary=path, layout="tf_models")
    finally:
        for uri in frame["image_uri"]:
            os.chmod(uri, 0o644)
    assert path in str(error.value)
    assert not os.path.exists(tmp_path / "out" / "dataset.json")


def test_appended_classes_take_ids_after_the_maps_largest(drawn, tmp_path):
    out = str(tmp_path / "out")
    path = write_map(tmp_path, "item { id: 7 name: 'cat' }\nitem { id: 9 name: 'dog' }")
    convert(detection_frame(drawn), out, label_vocabulary=path, new_labels="append",
            layout="tf_models")
    labels = read_manifest(out)["labels"]
    assert labels["vocabulary"] == ["cat", "dog", "zebra"]
    assert labels["label_map_ids"] == [7, 9, 10]


# --- a dict of files by split -------------------------------------------------------------

CATEGORIES = [{"id": 2, "name": "bicycle"}, {"id": 3, "name": "car"},
              {"id": 18, "name": "dog"}, {"id": 90, "name": "toothbrush"}]


def coco_file(folder, images: list[dict], annotations: list[dict],
              categories=CATEGORIES) -> str:
    os.makedirs(folder, exist_ok=True)
    for image in images:
        pixels = np.full((image["height"], image["width"], 3), 40 + 7 * image["id"], np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, image["file_name"]))
    path = os.path.join(folder, "instances.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": annotations,
                   "categories": categories}, f)
    return path


def image(image_id, name):
    return {"id": image_id, "file_name": name, "width": 64, "height": 48}


def box(annotation_id, image_id, category_id):
    return {"id": annotation_id, "image_id": image_id, "category_id": category_id,
            "bbox": [4, 6, 20, 10], "area": 200.0, "iscrowd": 0}


def test_a_dict_of_files_by_split_is_one_dataset(tmp_path):
    train = coco_file(tmp_path / "train2017", [image(21, "a.png"), image(22, "b.png")],
                      [box(1, 21, 90), box(2, 21, 3), box(3, 22, 2)])
    val = coco_file(tmp_path / "val2017", [image(21, "c.png")],  # an id train uses too
                    [box(4, 21, 18), box(5, 21, 90)])
    out = str(tmp_path / "out")
    result = tfrecorder.convert({"train": train, "val": val}, out, progress=False)
    assert result.counts == {"train": 2, "validation": 1}
    loaded = tfrecorder.load(out)
    names = read_manifest(out)["labels"]["vocabulary"]
    seen = {split: sorted(tuple(names[i] for i in x["objects/label"].numpy())
                          for x in loaded[split]) for split in ("train", "validation")}
    assert seen["train"] == [("bicycle",), ("toothbrush", "car")]
    assert seen["validation"] == [("dog", "toothbrush")]


def test_files_by_split_must_agree_on_their_classes(tmp_path):
    train = coco_file(tmp_path / "train", [image(1, "a.png")], [box(1, 1, 3)])
    val = coco_file(tmp_path / "val", [image(2, "b.png")], [box(2, 2, 3)],
                    categories=[{"id": 3, "name": "truck"}])
    with pytest.raises(SchemaError, match="names class id 3 'truck'"):
        tfrecorder.convert({"train": train, "validation": val}, str(tmp_path / "out"),
                           progress=False)
    twice = r"names the split VALIDATION twice \(keys \['val', 'valid'\]\)"
    with pytest.raises(SchemaError, match=twice):
        tfrecorder.convert({"train": train, "val": val, "valid": val},
                           str(tmp_path / "out"), progress=False)


"""COCO datasets as downloaded (`tfrecorder/sources/coco_folder.py`): COCO's and
datumaro's `annotations/instances_<name>.json` beside their image folders, Roboflow's
export and one split of it, converted end to end and read back with TensorFlow; and
`image_root` by split, for those folders and for a dict of COCO files by split.

Each split's scenes share their file names with the other splits' (`scene_00.png` in
train2017/ and in val2017/) but not their pixels or boxes, so a record whose image came
from another split's folder is caught.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from detection_data import coco_split, scenes
from helpers import read_manifest

import tfrecorder
from tfrecorder import cli
from tfrecorder.errors import OptionError, SchemaError
from tfrecorder.sources import coco_folder, load_table, read_path

# split -> (count, seed): the scenes of each split
SPLITS = {"train": (4, 0), "validation": (3, 5), "test": (2, 9)}


def records(out, split: str) -> dict[str, dict]:
    """The split's records by image file name: image id, boxes, classes and pixels."""
    names = (out / "objects-label.labels.txt").read_text().split()
    found = {}
    for shard in read_manifest(out)["splits"].get(split, {}).get("shards", []):
        for serialized in tf.data.TFRecordDataset(str(out / shard["file"])):
            feature = tf.train.Example.FromString(serialized.numpy()).features.feature
            name = feature["image_name"].bytes_list.value[0].decode()
            assert name not in found, f"{name} written twice in {split}"
            found[name] = {
                "id": feature["image_id"].int64_list.value[0],
                "boxes": np.reshape(feature["objects/bbox"].float_list.value, (-1, 4)),
                "labels": [names[i] for i in feature["objects/label"].int64_list.value],
                "pixels": tf.io.decode_image(feature["image"].bytes_list.value[0]).numpy()}
    return found


def assert_written(out, drawn: dict[str, list[dict]]) -> None:
    """Each split holds exactly its scenes: ids, boxes, classes, and the pixels of its
    own file."""
    counts = {split: info["num_records"]
              for split, info in read_manifest(out)["splits"].items() if info["num_records"]}
    assert counts == {split: len(scenes) for split, scenes in drawn.items()}
    for split, expected in drawn.items():
        found = records(out, split)
        assert sorted(found) == sorted(s["file_name"] for s in expected)
        for scene in expected:
            record = found[scene["file_name"]]
            assert record["id"] == scene["image_id"]
            np.testing.assert_allclose(record["boxes"], np.reshape(scene["boxes"], (-1, 4)),
                                       atol=1e-6)
            assert record["labels"] == scene["labels"]
            np.testing.assert_array_equal(record["pixels"], scene["pixels"])


def convert(source, out, **options):
    return tfrecorder.convert(source, str(out), progress=False, num_workers=1, **options)


def coco_2017(root, images: str = "{name}", splits=("train", "validation")) -> dict:
    """COCO 2017's layout: annotations/instances_<name>2017.json and the images of each
    in `images` (`{name}`: beside annotations/; `images/{name}`: datumaro's), with the
    annotation files that are not instances beside them."""
    drawn = {}
    for split in splits:
        name = {"validation": "val"}.get(split, split) + "2017"
        count, seed = SPLITS[split]
        drawn[split] = coco_split(str(root / images.format(name=name)),
                                  str(root / "annotations" / f"instances_{name}.json"),
                                  count, seed=seed)
    (root / "annotations" / "captions_train2017.json").write_text("{}")
    (root / "annotations" / "person_keypoints_val2017.json").write_text("not even JSON")
    (root / "annotations" / "image_info_test2017.json").write_text("{}")
    return drawn


def roboflow(root, splits=("train", "validation", "test")) -> dict:
    """Roboflow's COCO export: train/, valid/, test/, each a _annotations.coco.json
    beside its images."""
    drawn = {}
    for split in splits:
        folder = root / {"validation": "valid"}.get(split, split)
        count, seed = SPLITS[split]
        drawn[split] = coco_split(str(folder), str(folder / "_annotations.coco.json"),
                                  count, seed=seed)
    return drawn


# --- the layouts -------------------------------------------------------------------------

@pytest.mark.parametrize("images", ["{name}", "images/{name}"], ids=["coco", "datumaro"])
def test_coco_2017_layout_converts_each_split_from_its_own_folder(tmp_path, images):
    drawn = coco_2017(tmp_path / "coco", images)
    assert read_path(str(tmp_path / "coco"), load_options()).rows.index.tolist()[:2] == \
        ["train2017[1]", "train2017[2]"]
    convert(tmp_path / "coco", tmp_path / "out")
    assert_written(tmp_path / "out", drawn)


def test_roboflow_export_converts_each_split_folder(tmp_path):
    drawn = roboflow(tmp_path / "export")
    convert(tmp_path / "export", tmp_path / "out")
    assert_written(tmp_path / "out", drawn)


def test_one_roboflow_split_folder_takes_the_split_its_name_spells(tmp_path):
    drawn = roboflow(tmp_path / "export", splits=["validation"])
    convert(tmp_path / "export" / "valid", tmp_path / "out")
    assert_written(tmp_path / "out", drawn)


def test_a_folder_named_by_no_split_is_unassigned_unless_split_is_given(tmp_path):
    coco_split(str(tmp_path / "mine"), str(tmp_path / "mine" / "_annotations.coco.json"), 3)
    assert set(load_table(str(tmp_path / "mine")).rows["split"]) == {"unassigned"}
    convert(tmp_path / "mine", tmp_path / "out", split="test")
    assert read_manifest(tmp_path / "out")["splits"]["test"]["num_records"] == 3


@pytest.mark.parametrize(("name", "split"), [
    ("train2017", "train"), ("Training", "train"), ("val2014", "validation"),
    ("valid", "validation"), ("validation_2", "validation"), ("test-dev2017", "test"),
    ("default", "unassigned"), ("minival2014", "unassigned"), ("trainval", "unassigned"),
])
def test_a_files_split_is_the_split_its_name_starts_with(tmp_path, name, split):
    """datumaro names a single subset `default`; Detectron's `minival` is no split."""
    coco_split(str(tmp_path / "images" / name),
               str(tmp_path / "annotations" / f"instances_{name}.json"), 1)
    assert load_table(str(tmp_path)).rows["split"].tolist() == [split]


def test_a_folder_without_an_instances_file_is_not_claimed(tmp_path):
    coco_2017(tmp_path, splits=["train"])
    os.remove(tmp_path / "annotations" / "instances_train2017.json")
    assert not coco_folder.claims(str(tmp_path), True)
    assert not coco_folder.claims(str(tmp_path / "annotations" / "captions_train2017.json"),
                                  False)
    scenes(str(tmp_path / "plain" / "train"), 1)  # a split/label/file image folder
    assert not coco_folder.claims(str(tmp_path / "plain"), True)


def test_coco_folder_is_asked_before_the_image_folders():
    from tfrecorder.sources import FILE_FORMATS, folder, pascal_voc, yolo

    order = FILE_FORMATS.index
    assert order(yolo) < order(coco_folder) < order(pascal_voc) < order(folder)


# --- refusals ----------------------------------------------------------------------------

@pytest.mark.parametrize(("names", "split"), [
    (("val2017", "validation"), "VALIDATION"),
    (("minival2014", "valminusminival2014"), "UNASSIGNED"),  # Detectron's, beside COCO's
])
def test_two_files_of_one_split_are_refused(tmp_path, names, split):
    for name in names:
        coco_split(str(tmp_path / name), str(tmp_path / "annotations" / f"instances_{name}.json"),
                   1)
    with pytest.raises(SchemaError, match=rf"two COCO files of the split {split}: .*"
                       rf"instances_{names[0]}.json.*instances_{names[1]}.json.*dict by split"):
        load_table(str(tmp_path))


def test_a_split_without_its_image_folder_is_refused(tmp_path):
    coco_2017(tmp_path)
    os.rename(tmp_path / "val2017", tmp_path / "elsewhere")
    with pytest.raises(SchemaError, match=r"instances_val2017.json' has no folder of images: "
                       r".*val2017' or .*images/val2017' is not there.*image_root"):
        load_table(str(tmp_path))


def test_split_is_refused_beside_files_of_several_splits(tmp_path):
    coco_2017(tmp_path)
    with pytest.raises(SchemaError, match=r"split='test' gives every row one split"):
        load_table(str(tmp_path), split="test")


# --- image folders by split --------------------------------------------------------------

def load_options(**options):
    from tfrecorder.options import TableOptions

    return TableOptions(**options)


def test_a_dict_of_coco_files_takes_a_folder_for_each_split(tmp_path):
    """COCO 2017 as downloaded: the files in annotations/, the images beside it."""
    drawn = coco_2017(tmp_path / "coco")
    files = {"TRAIN": str(tmp_path / "coco" / "annotations" / "instances_train2017.json"),
             "val": str(tmp_path / "coco" / "annotations" / "instances_val2017.json")}
    roots = {"train": str(tmp_path / "coco" / "train2017"),
             "valid": str(tmp_path / "coco" / "val2017")}
    convert(files, tmp_path / "out", image_root=roots)
    assert_written(tmp_path / "out", drawn)


def test_image_root_by_split_on_the_command_line(tmp_path, capsys):
    drawn = coco_2017(tmp_path / "coco")
    annotations = tmp_path / "coco" / "annotations"
    out = tmp_path / "out"
    assert cli.main(["convert", f"train={annotations / 'instances_train2017.json'}",
                     f"validation={annotations / 'instances_val2017.json'}", str(out),
                     "--image-root", f"train={tmp_path / 'coco' / 'train2017'}",
                     "--image-root", f"val={tmp_path / 'coco' / 'val2017'}",
                     "--no-progress", "--num-workers", "1"]) == 0
    assert_written(out, drawn)


def test_a_folders_image_root_by_split_replaces_the_folders_it_names(tmp_path):
    drawn = coco_2017(tmp_path / "coco")
    os.rename(tmp_path / "coco" / "val2017", tmp_path / "moved")
    convert(tmp_path / "coco", tmp_path / "out", image_root={"val": str(tmp_path / "moved")})
    assert_written(tmp_path / "out", drawn)


def test_image_root_by_split_names_only_the_sources_splits(tmp_path):
    coco_2017(tmp_path / "coco")
    annotations = tmp_path / "coco" / "annotations"
    for source in ({"train": str(annotations / "instances_train2017.json")},
                   str(tmp_path / "coco")):
        with pytest.raises(SchemaError, match=r"image_root=\{'test': .*\} names a folder for "
                           r"test, and .* no (file|COCO file) of that split"):
            load_table(source, image_root={"test": str(tmp_path)})


@pytest.mark.parametrize("source", ["frame", "coco_file", "yolo", "jsonl_files"])
def test_image_root_by_split_is_refused_where_it_cannot_apply(tmp_path, source):
    annotations = tmp_path / "annotations"
    coco_split(str(tmp_path / "train2017"), str(annotations / "instances_train2017.json"), 1)
    (tmp_path / "a.jsonl").write_text(json.dumps({"imageGcsUri": "a.png"}) + "\n")
    (tmp_path / "data.yaml").write_text("names: [a]\ntrain: images/train\n")
    given = {"frame": pd.DataFrame({"image_uri": ["a.png"], "label": ["a"]}),
             "coco_file": str(annotations / "instances_train2017.json"),
             "yolo": str(tmp_path / "data.yaml"),
             "jsonl_files": {"train": str(tmp_path / "a.jsonl")}}[source]
    expected = {"frame": "the table's image paths are its own",
                "coco_file": "is one COCO file, whose rows take one split",
                "yolo": "names each split's images itself",
                "jsonl_files": "a.jsonl' is read by tfrecorder.sources.vertex_jsonl"}[source]
    with pytest.raises(SchemaError, match=r"image_root=\{'train': .*\} gives each split its "
                       r"image folder, and .*") as error:
        load_table(given, image_root={"train": str(tmp_path / "train2017")})
    assert expected in str(error.value) and error.value.option == "image_root"
    assert "Pass one folder, or leave image_root out" in str(error.value)


def test_image_root_by_split_is_checked_as_an_option():
    assert load_options(image_root={"TRAIN": "a", "val": "b"}).image_root == {
        "train": "a", "validation": "b"}
    for wrong in ({"holdout": "a"}, {}, {"train": 3}, {"train": "a", "TRAIN": "b"}):
        with pytest.raises(OptionError, match=r"image_root must be a folder path, or a dict "
                           r"of folders by split"):
            load_options(image_root=wrong)


def test_the_image_root_flag_takes_one_folder_or_one_for_each_split(capsys):
    parser = cli.build_parser()

    def parsed(*flags):
        return parser.parse_args(["convert", "in.json", "out/", *flags]).image_root

    assert parsed("--image-root", "images") == "images"
    assert parsed("--image-root", "a=b") == "a=b"  # names no split: a folder
    assert parsed("--image-root", "train=t", "--image-root", "VAL=v") == {
        "train": "t", "VAL": "v"}
    assert cli.main(["convert", "in.json", "out/", "--image-root", "train=t",
                     "--image-root", "images"]) == 2
    assert "give one FOLDER, or SPLIT=FOLDER for each split" in capsys.readouterr().err


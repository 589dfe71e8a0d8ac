"""Telling folder formats apart (issue 38, item 5): a folder holding a YOLO data file, an
Ultralytics `images/` + `labels/` tree or XML annotations is never read as a label/file
classification folder; where it could be read two ways, the error says what to pass."""

from __future__ import annotations

import os

import pytest
from helpers import assert_one_error_line, run_cli
from PIL import Image

from tfrecorder import sources
from tfrecorder.errors import SchemaError
from tfrecorder.sources import csv, folder, yolo
from tfrecorder.sources import load_table as read

DATA_YAML = "names: [cat, dog]\ntrain: images/train\nval: images/val\n"


def image(path) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new("RGB", (16, 12), (200, 30, 30)).save(path)


def text(path, content: str = "") -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)
    return str(path)


def ultralytics_tree(root) -> str:
    """images/{train,val} and labels/{train,val}, as Ultralytics lays a dataset out."""
    for split in ("train", "val"):
        for name in ("a", "b"):
            image(root / "images" / split / f"{name}.jpg")
            text(root / "labels" / split / f"{name}.txt", "1 0.5 0.5 0.2 0.4\n")
    return str(root)


def test_an_ultralytics_folder_is_no_longer_converted_as_classes_images_and_labels(tmp_path):
    """It used to convert with exit 0, as classification with the classes 'images' and
    'labels' and no box: now the CLI fails, and says to pass the data.yaml."""
    root = ultralytics_tree(tmp_path / "dataset")
    process = run_cli("convert", root, tmp_path / "out", "--no-progress")
    assert_one_error_line(process, "images/ and a labels/ tree", "Pass the dataset's data.yaml")
    assert not os.path.exists(tmp_path / "out")
    with pytest.raises(SchemaError, match="'images' and 'labels' would become classes"):
        read(root, task="classification")
    # With its data file, the folder is the YOLO dataset it is.
    text(tmp_path / "dataset" / "data.yaml", DATA_YAML)
    assert next(f for f in sources.FILE_FORMATS if f.claims(root, True)) is yolo
    table = read(root)
    assert table.task == "detection"
    assert table.rows["label"].tolist() == [["dog"]] * 4
    assert sorted(set(table.rows["split"])) == ["train", "validation"]
    with pytest.raises(SchemaError, match="read as a detection source, and task="):
        read(root, task="classification")


def test_roboflows_split_images_labels_tree_is_refused_without_its_data_file(tmp_path):
    for split in ("train", "valid"):
        image(tmp_path / split / "images" / "a.jpg")
        text(tmp_path / split / "labels" / "a.txt", "0 0.5 0.5 0.2 0.4\n")
    with pytest.raises(SchemaError, match="labels/a.txt"):
        read(str(tmp_path))


def test_a_data_yaml_is_read_as_yolo_never_as_a_csv(tmp_path):
    ultralytics_tree(tmp_path)
    path = text(tmp_path / "data.yaml", DATA_YAML)
    claimed = next(f for f in sources.FILE_FORMATS if f.claims(path, False))
    assert claimed is yolo and sources.FILE_FORMATS.index(yolo) < sources.FILE_FORMATS.index(
        csv) and sources.FILE_FORMATS.index(yolo) < sources.FILE_FORMATS.index(folder)
    other = text(tmp_path / "config.yml", "learning_rate: 0.1\n")
    with pytest.raises(SchemaError, match="no YOLO data file: it has no names and no train"):
        read(other)


def test_a_broken_data_file_beside_the_tree_is_named(tmp_path):
    root = ultralytics_tree(tmp_path)
    text(tmp_path / "data.yaml", "names: [cat, dog\ntrain: images/train\n")
    with pytest.raises(SchemaError, match="Pass the data file .*data.yaml"):
        read(root)
    with pytest.raises(SchemaError, match="does not parse at line"):
        read(str(tmp_path / "data.yaml"))


def test_a_folder_with_two_data_files_asks_which_one(tmp_path):
    root = ultralytics_tree(tmp_path)
    text(tmp_path / "data.yaml", DATA_YAML)
    text(tmp_path / "coco8.yaml", DATA_YAML)
    with pytest.raises(SchemaError, match="2 YOLO data files .*Pass the data file itself"):
        read(root)
    assert read(str(tmp_path / "coco8.yaml")).task == "detection"


def test_xml_annotations_are_never_read_as_a_classification_folder(tmp_path):
    for label in ("cat", "dog"):
        image(tmp_path / label / "a.jpg")
    text(tmp_path / "annotations.xml", "<annotations><image name='cat/a.jpg'/></annotations>")
    with pytest.raises(SchemaError, match="1 XML file .*Move them out"):
        read(str(tmp_path))
    os.remove(tmp_path / "annotations.xml")
    assert sorted(read(str(tmp_path)).rows["label"]) == ["cat", "dog"]


def test_a_classification_folder_with_a_stray_yaml_is_still_label_file(tmp_path):
    """A YAML file that names no classes makes no YOLO dataset, and a class named
    'labels' with no images/ beside it is a class."""
    for label in ("labels", "dog"):
        image(tmp_path / label / "a.jpg")
    text(tmp_path / "labels" / "notes.txt", "taken in 2024")
    text(tmp_path / "config.yaml", "seed: 1\n")
    assert next(f for f in sources.FILE_FORMATS if f.claims(str(tmp_path), True)) is folder
    assert sorted(set(read(str(tmp_path)).rows["label"])) == ["dog", "labels"]

"""The sources of detection and segmentation tables (`tfrecorder.sources`: automl_detection,
vertex_jsonl, coco, tables, detection, segmentation): every format of the same objects
gives the same table, and every mistake is named where the user finds it, before any
image is read (no image here exists)."""

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tfrecorder import SchemaError
from tfrecorder.errors import Option
from tfrecorder.format.splits import split_named
from tfrecorder.sources import (
    FILE_FORMATS,
    automl_detection,
    coco,
    csv,
    load_table,
    tables,
    vertex_jsonl,
)
from tfrecorder.sources.detection import AREA, BBOX, IS_CROWD, MASK
from tfrecorder.write.annotations import segmentation

DATA = Path(__file__).parent / "data" / "detection"
# The objects of tests/data/detection's three files, image by image, in the order of
# first appearance: (image_uri, labels, boxes as [ymin, xmin, ymax, xmax]).
EXPECTED = [
    ("img/a.jpg", ["car", "person"], [[0.2, 0.1, 0.6, 0.3], [0.1, 0.5, 0.8, 0.9]]),
    ("img/b.jpg", [], []),  # an image without objects
    ("img/c.jpg", ["car"], [[0.5, 0.25, 1.0, 0.75]]),
]


def objects_of(table) -> list:
    """(image_uri, labels, boxes) of each row, boxes as (n, 4) lists."""
    return [(uri, list(labels), np.reshape(np.asarray(boxes, float), (-1, 4)).tolist())
            for uri, labels, boxes in zip(table.rows["image_uri"], table.rows["label"],
                                          table.rows[BBOX])]


def assert_objects(table, expected=EXPECTED):
    found = objects_of(table)
    assert [(uri, labels) for uri, labels, _ in found] == \
        [(uri, labels) for uri, labels, _ in expected]
    for (_, _, boxes), (uri, _, want) in zip(found, expected):
        np.testing.assert_allclose(np.reshape(boxes, (-1, 4)), np.reshape(want, (-1, 4)),
                                   atol=1e-6, err_msg=uri)


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def message(source, **options) -> str:
    with pytest.raises(SchemaError) as error:
        load_table(source, **options)
    return str(error.value)


# --- the same objects, from every format -----------------------------------------------

@pytest.mark.parametrize("name", ["automl.csv", "vertex.jsonl", "coco.json"])
def test_every_format_of_the_same_objects_gives_the_same_table(name):
    table = load_table(str(DATA / name))
    assert table.task == "detection" and table.multi_label
    assert_objects(table)  # two- and four-vertex boxes, and an image without any
    bbox = next(column for column in table.inputs if column.name == BBOX)
    assert (bbox.kind, bbox.shape) == ("float32", (None, 4))
    assert table.rows["uri"].tolist() == [str(DATA / uri) for uri, _, _ in EXPECTED]
    assert len(table.source) == len(table.rows) == 3


def test_a_dataframe_of_boxes_and_label_lists_gives_the_same_table():
    frame = pd.DataFrame({"image_uri": [uri for uri, _, _ in EXPECTED],
                          "label": [labels for _, labels, _ in EXPECTED],
                          "boxes": [boxes for _, _, boxes in EXPECTED],
                          "weather": ["sun", "rain", "sun"]})
    table = load_table(frame)
    assert table.task == "detection"
    assert_objects(table)
    assert table.rows["weather"].tolist() == ["sun", "rain", "sun"]  # other columns pass
    assert table.source.drop(columns="objects").equals(frame)  # plus each row's objects


def test_splits_and_row_names_are_each_sources_own():
    automl, jsonl, coco_table = (load_table(str(DATA / name)) for name in
                                 ("automl.csv", "vertex.jsonl", "coco.json"))
    assert automl.rows["split"].tolist() == jsonl.rows["split"].tolist() == \
        ["train", "test", "validation"]
    assert set(coco_table.rows["split"]) == {"unassigned"}
    assert set(load_table(str(DATA / "coco.json"), split="test").rows["split"]) == {"test"}
    # Rows are named as the user finds them: an image's first line, its COCO id.
    assert automl.rows.index.tolist() == [1, 2, 4]
    assert automl.source["lines"].tolist() == [[1, 3], [2], [4]]
    assert jsonl.rows.index.tolist() == [1, 2, 3]
    assert coco_table.rows.index.tolist() == [7, 3, 9]
    assert coco_table.source["annotations"].tolist() == [[2, 3], [], [1]]


# pycocotools' RLE of annotation 3's box (rows 10-79, columns 100-179 of 100 x 200).
RLE_BOX = "jh9V2n" + "0" * 158 + "Vn1"


def test_coco_areas_crowds_and_masks_are_kept_per_object():
    table = load_table(str(DATA / "coco.json"))
    assert table.rows[AREA].tolist() == [[1600.0, 5600.0], [], [30000.0]]
    assert table.rows[IS_CROWD].tolist() == [[0, 1], [], [0]]
    kinds = {column.name: (column.kind, column.shape) for column in table.inputs}
    assert kinds[AREA] == ("float32", (None,)) and kinds[IS_CROWD] == ("int64", (None,))
    assert MASK not in kinds  # written by the layout, not an input
    masks = table.rows[MASK].tolist()
    assert masks[1] is None
    # Each segmentation stays JSON text until a worker draws it (its floats are made there).
    assert masks[0]["size"] == [100, 200]
    assert [segmentation(mask) for mask in masks[0]["masks"]] == [
        [[20, 20, 60, 20, 60, 60, 20, 60]], {"size": [100, 200], "counts": RLE_BOX}]
    dropped = load_table(str(DATA / "coco.json"), schema={AREA: None})
    assert [column.name for column in dropped.inputs] == ["image_id", BBOX, IS_CROWD]


def test_coco_file_names_are_relative_to_image_root(tmp_path):
    table = load_table(str(DATA / "coco.json"), image_root=str(tmp_path))
    assert table.rows["uri"].tolist()[0] == str(tmp_path / "img" / "a.jpg")
    assert table.rows["image_uri"].tolist()[0] == "img/a.jpg"


def test_coco_without_categories_labels_objects_by_their_ids(tmp_path):
    data = json.loads((DATA / "coco.json").read_text())
    del data["categories"]
    table = load_table(write(tmp_path, "c.json", json.dumps(data)))
    assert table.rows["label"].tolist() == [[1, 2], [], [1]]


def test_an_image_without_objects_anywhere_still_has_boxes_of_four(tmp_path):
    table = load_table(write(tmp_path, "empty.csv", "TRAIN,a.jpg\nTEST,b.jpg\n"),
                       task="detection")
    assert table.task == "detection" and table.rows["label"].tolist() == [[], []]
    assert next(c for c in table.inputs if c.name == BBOX).shape == (None, 4)


def test_each_new_format_is_asked_before_csv_and_claims_its_files(tmp_path):
    for module in (tables, vertex_jsonl, coco, automl_detection):
        assert FILE_FORMATS.index(module) < FILE_FORMATS.index(csv)
    claimed = {name: next(f for f in FILE_FORMATS if f.claims(str(DATA / name), False))
               for name in ("automl.csv", "vertex.jsonl", "coco.json")}
    assert claimed == {"automl.csv": automl_detection, "vertex.jsonl": vertex_jsonl,
                       "coco.json": coco}
    # By content too: a JSONL file named .txt, a COCO file without its extension.
    assert vertex_jsonl.claims(write(tmp_path, "a.txt", (DATA / "vertex.jsonl").read_text()),
                               False)
    assert coco.claims(write(tmp_path, "annotations", (DATA / "coco.json").read_text()), False)


# --- telling a detection CSV from a classification one -----------------------------------

def test_classification_csvs_are_read_as_before(tmp_path):
    multi = load_table(write(tmp_path, "m.csv", "TRAIN,a.jpg,cat,dog\nTEST,b.jpg,cat\n"))
    assert multi.task == "classification" and multi.rows["label"].tolist() == [
        ["cat", "dog"], ["cat"]]
    ids = load_table(write(tmp_path, "i.csv", "a.jpg,1,0,1\nb.jpg,2\n"))
    assert ids.task == "classification" and ids.rows["label"].tolist() == [[1, 0, 1], [2]]
    numbers = load_table(write(tmp_path, "h.csv",
                               "image_uri,label,x,y\na.jpg,cat,0.1,0.5\nb.jpg,dog,0.3,0.2\n"))
    assert numbers.task == "classification" and numbers.rows["x"].tolist() == [0.1, 0.3]


def test_task_classification_reads_a_detection_csv_as_labels(tmp_path):
    table = load_table(str(DATA / "automl.csv"), task="classification")
    assert table.task == "classification"
    assert table.rows["label"].tolist()[0] == ["car", "0.1", "0.2", "0.3", "0.6"]


@pytest.mark.parametrize("text", [
    "TRAIN,a.jpg,car,0.1,0.1,,,0.3,0.3,,\nTRAIN,b.jpg,cat,dog\n",  # boxes and labels
    "a.jpg,3,0,0,1,0,1,1,0,1\n",  # eight 0s and 1s: corners, or class ids
])
def test_a_csv_that_could_be_either_asks_for_the_task(tmp_path, text):
    path = write(tmp_path, "either.csv", text)
    found = message(path)
    assert "task='detection'" in found and "task='classification'" in found
    assert load_table(path, task="classification").task == "classification"


def test_task_detection_reads_eight_integers_as_a_four_vertex_box(tmp_path):
    table = load_table(write(tmp_path, "corners.csv", "a.jpg,car,0,0,1,0,1,1,0,1\n"),
                       task="detection")
    assert_objects(table, [("a.jpg", ["car"], [[0, 0, 1, 1]])])


def test_coordinates_past_the_lines_looked_at_are_never_read_as_labels(tmp_path, monkeypatch):
    """The file is claimed by its first lines; a CSV whose first lines carry no box is
    read by `csv`, which refuses coordinates after a label rather than name classes
    '0.1', and says which task to pass."""
    monkeypatch.setattr(automl_detection, "_SNIFFED", 40)
    path = write(tmp_path, "late.csv", "TRAIN,a.jpg,car\nTRAIN,b.jpg,car,dog\n"
                 "TRAIN,c.jpg,car,0.1,0.1,,,0.3,0.3,,\n")
    assert automl_detection.claims(path, False) is False
    found = message(path)
    assert "line 3" in found and "task='detection'" in found


# --- mistakes, named where the user finds them -------------------------------------------

@pytest.mark.parametrize(("lines", "expected"), [
    ("TRAIN,a.jpg,car,0.1,0.1,,,1.3,0.3,,", r"outside the image: line 2: 'car,0.1,0.1,,,1.3"),
    ("TRAIN,a.jpg,car,0.5,0.1,,,0.3,0.3,,", r"minimum is not below.*line 2: 'car,0.5,0.1"),
    ("TRAIN,a.jpg,,0.1,0.1,,,0.3,0.3,,", r"with no label: line 2: ',0.1,0.1,,,0.3,0.3,,'"),
    ("TRAIN,a.jpg,car", r"a label but no box: line 2: 'car'"),
    ("TRAIN,a.jpg,car,0.1,0.1,0.2,0.1,0.3,0.3,,", r"neither 2 nor 4 vertices: line 2"),
    ("TRAIN,a.jpg,car,0.1,0.1,,,0.3,,,", r"a vertex given half.*line 2"),
    ("TRAIN,a.jpg,car,0.1,0.1,,,0.3,x,,", r"not a number.*line 2: 'car,0.1,0.1,,,0.3,x"),
    ("TEST,img/a.jpg,car,0.1,0.1,,,0.3,0.3,,",
     r"under two splits: 'img/a.jpg' is 'TRAIN' at line 1 and 'TEST' at line 2"),
])
def test_csv_mistakes_name_the_line_and_its_cells(tmp_path, lines, expected):
    """Refused with invalid_annotations="error"; by default the bad object is skipped
    and listed with its line, and the image kept."""
    path = write(tmp_path, "bad.csv", "TRAIN,img/a.jpg,car,0.1,0.1,,,0.3,0.3,,\n" + lines)
    with pytest.raises(SchemaError, match=expected) as error:
        load_table(path, invalid_annotations="error")
    assert 2 in error.value.rows
    if "under two splits" in expected:  # a table's mistake, not an object's
        return
    table = load_table(path)
    assert table.rows["label"].tolist() == [["car"], []]
    assert table.skipped_annotations["annotation"].tolist() == ["line 2"]
    assert table.skipped_annotations["written"].tolist() == [lines.split(",", 2)[2]]


def test_errors_name_every_offending_line_in_rows(tmp_path):
    rows = "".join(f"TRAIN,{i}.jpg,car,0.1,0.1,,,1.{i + 1},0.3,,\n" for i in range(6))
    with pytest.raises(SchemaError, match=r"6 objects outside.*; and 3 more") as error:
        load_table(write(tmp_path, "many.csv", rows), invalid_annotations="error")
    assert error.value.rows == [1, 2, 3, 4, 5, 6] and error.value.column == BBOX


def jsonl(*entries) -> str:
    return "".join(json.dumps(entry) + "\n" for entry in entries)


def box(name="car", **corners):
    return {"displayName": name, "xMin": 0.1, "yMin": 0.1, "xMax": 0.3, "yMax": 0.3,
            **corners}


@pytest.mark.parametrize(("annotation", "expected"), [
    (box(xMax=1.5), r"outside the image: line 2, box 0: .*\"xMax\": 1.5"),
    (box(xMin=0.4), r"minimum is not below.*line 2, box 0"),
    ({k: v for k, v in box().items() if k != "displayName"}, r"with no label: line 2, box 0"),
    ({"displayName": "car"}, r"a label but no box: line 2, box 0"),
    ({k: v for k, v in box().items() if k != "yMax"},
     r"lacks a coordinate: line 2, box 0: .*\"xMax\": 0.3}"),
])
def test_jsonl_mistakes_name_the_line_and_the_box(tmp_path, annotation, expected):
    path = write(tmp_path, "bad.jsonl", jsonl(
        {"imageGcsUri": "gs://b/1.jpg", "boundingBoxAnnotations": [box()]},
        {"imageGcsUri": "gs://b/2.jpg", "boundingBoxAnnotations": [annotation]}))
    with pytest.raises(SchemaError, match=expected) as error:
        load_table(path, invalid_annotations="error")
    assert error.value.rows == [2]
    skipped = load_table(path).skipped_annotations
    assert skipped[["annotation", "image"]].values.tolist() == [["line 2, box 0", 2]]


def test_jsonl_lines_that_are_not_json_are_named(tmp_path):
    path = write(tmp_path, "bad.jsonl", jsonl({"imageGcsUri": "a.jpg"}) + "{oops\n")
    assert "line 2 of the JSONL file" in message(path)


@pytest.mark.parametrize("boxes", [True, False])
def test_jsonl_of_an_unknown_ml_use_names_the_file_line_key_and_value(tmp_path, boxes):
    """The JSONL has no split column: the error speaks of its own key, as written."""
    annotation = ({"boundingBoxAnnotations": [box()]} if boxes
                  else {"classificationAnnotation": {"displayName": "car"}})
    path = write(tmp_path, "bad.jsonl", jsonl(
        {"imageGcsUri": "gs://b/1.jpg", **annotation,
         "dataItemResourceLabels": {"aiplatform.googleapis.com/ml_use": "validation"}},
        {"imageGcsUri": "gs://b/2.jpg", **annotation,
         "dataItemResourceLabels": {"aiplatform.googleapis.com/ml_use": "trainning"}}))
    with pytest.raises(SchemaError) as error:
        load_table(path)
    text = str(error.value)
    assert "bad.jsonl" in text and "line 2" in text and "'trainning'" in text
    assert '"aiplatform.googleapis.com/ml_use"' in text and "column" not in text
    assert "training, validation or test" in text and error.value.rows == [2]
    assert all(split_named(use) for use in vertex_jsonl.ML_USES)


def coco_file(tmp_path, **change) -> str:
    data = json.loads((DATA / "coco.json").read_text())
    for key, value in change.items():
        data["annotations"][1][key] = value
    return write(tmp_path, "bad.json", json.dumps(data))


@pytest.mark.parametrize(("change", "expected"), [
    ({"image_id": 42}, r"unknown image id: annotation id 2: image_id 42"),
    ({"category_id": 5}, r"unknown category id: annotation id 2: category_id 5"),
    ({"bbox": [20, 20, 40]}, r"bbox is not four numbers \[x, y, width, height\]: "
                             r"annotation id 2: bbox \[20, 20, 40\] in image 7"),
])
def test_coco_mistakes_name_the_annotation_and_the_value(tmp_path, change, expected):
    path = coco_file(tmp_path, **change)
    with pytest.raises(SchemaError, match=expected):
        load_table(path, invalid_annotations="error")
    table = load_table(path)  # by default annotation 2 alone is skipped and listed
    assert table.rows["label"].tolist() == [["person"], [], ["car"]]
    assert table.skipped_annotations["annotation"].tolist() == [2]


@pytest.mark.parametrize(("change", "expected"), [
    ({"bbox": "20,20,40,40"}, r"annotation id 2: bbox \"20,20,40,40\": a bbox that is not"),
    ({"image_id": None}, r"annotation id 2: image_id null: Expected `int \| str`, got `null`"),
])
def test_coco_values_of_the_wrong_type_refuse_the_file(tmp_path, change, expected):
    """A value of the wrong JSON type is no tool's slip but a file that is not COCO:
    refused in either mode, naming the annotation, the key and the value."""
    path = coco_file(tmp_path, **change)
    for mode in ("skip", "error"):
        with pytest.raises(SchemaError, match=expected):
            load_table(path, invalid_annotations=mode)


@pytest.mark.parametrize(("change", "expected"), [
    ({"bbox": [180, 20, 40, 40]}, r"1 annotation whose bbox is beyond the image's right or "
                                  r"bottom edge: annotation id 2: bbox \[180, 20, 40, 40\] in "
                                  r"image 7 of 200 x 100 pixels"),
    ({"bbox": [20, 20, 0, 40]}, r"zero or negative width or height: annotation id 2: bbox "
                                r"\[20, 20, 0, 40\]"),
    ({"bbox": [-1, 20, 10, 40]}, r"starting left of or above the image: annotation id 2"),
])
def test_coco_boxes_the_references_skip_are_skipped_or_refused(tmp_path, change, expected):
    """Skipped by default, with the image kept (as TensorFlow's converters do); refused
    with invalid_annotations="error"."""
    path = coco_file(tmp_path, **change)
    table = load_table(path)
    assert table.rows["label"].tolist() == [["person"], [], ["car"]]  # annotation 2 gone
    skipped = table.skipped_annotations
    assert skipped.drop(columns="written").to_dict("records") == [
        {"source": path, "annotation": 2, "image": 7,
         "reason": expected.split(":")[0].split("bbox is ")[-1].replace("\\", "")}]
    assert skipped["written"].tolist() == [f"bbox {json.dumps(change['bbox'])}"]
    with pytest.raises(SchemaError, match=expected) as error:
        load_table(path, invalid_annotations="error")
    assert "invalid_annotations='skip'" in str(error.value) and error.value.rows == [7]


def test_a_dataframe_whose_boxes_and_labels_differ_in_number_is_read_as_before():
    """Labels of whole images beside boxes (a multi-label classification table with a
    boxes input, as test_schema's `every_type`) are no detection table; asked to be one,
    the row whose label lacks a box is named."""
    frame = pd.DataFrame({"image_uri": ["a.jpg", "b.jpg"], "label": [["car"], ["car"]],
                          "boxes": [[[0.1, 0.1, 0.3, 0.3]], []]})
    table = load_table(frame)
    assert table.task == "classification" and table.multi_label
    assert [c.name for c in table.inputs] == ["boxes"]
    found = message(frame, task="detection")
    assert "a label but no box: row 1, object 0: label 'car'" in found
    # Named as the objects' boxes, the column makes a detection table: the error then
    # says how to keep it an input.
    found = message(frame.rename(columns={"boxes": BBOX}))
    assert "a label but no box: row 1" in found and "task='classification'" in found


# --- DataFrames: the documented `boxes` + `classes` inputs, and names ---------------------

def scenes() -> pd.DataFrame:
    """examples/object_detection.py's table: boxes and classes as inputs, no label."""
    return pd.DataFrame({"image_uri": ["a.png", "b.png"],
                         "boxes": [[[0.1, 0.2, 0.5, 0.6]], []],
                         "classes": [["square"], []], "num_objects": [1, 0]})


def test_boxes_and_classes_inputs_without_a_label_column_stay_inputs(caplog):
    with caplog.at_level(logging.INFO, logger="tfrecorder.sources.detection"):
        table = load_table(scenes(), schema={"classes": "CategoricalInput"})
    assert table.task == "classification" and not table.has_labels
    assert [(c.name, c.kind, c.shape) for c in table.inputs] == [
        ("boxes", "float32", (None, 4)), ("classes", "categorical", (None,)),
        ("num_objects", "int64", ())]
    assert "label column of lists" in caplog.text  # says how detection would be had


def test_task_detection_says_how_to_name_the_classes():
    found = message(scenes(), schema={"classes": "CategoricalInput"}, task="detection")
    assert "schema={'classes': 'StringLabel'}" in found
    table = load_table(scenes(), schema={"classes": "StringLabel"}, task="detection")
    assert table.rows["label"].tolist() == [["square"], []]
    assert table.rows["num_objects"].tolist() == [1, 0]


def test_columns_named_as_the_objects_features_are_refused():
    frame = scenes().rename(columns={"classes": "label"})
    found = message(frame.assign(**{"objects/colour": [[1], []]}))
    assert "column 'objects/colour' takes a name of the objects' features" in found
    assert "schema={'objects/colour': None}" in found
    found = message(frame.assign(**{BBOX: [[[0.1, 0.2, 0.5, 0.6]], []]}))
    assert f"columns ['boxes', {BBOX!r}] all name the objects' boxes" in found


def test_task_names_what_a_source_lacks(tmp_path):
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "1.jpg").write_bytes(b"")
    found = message(str(tmp_path), task="detection")
    assert "is read as a classification source" in found and "'boxes'" in found
    with pytest.raises(SchemaError) as error:
        load_table(str(DATA / "coco.json"), task="segmentation")
    assert Option("task", "segmentation") in error.value.fix


def test_jsonl_of_classes_is_a_classification_table(tmp_path):
    single = load_table(write(tmp_path, "c.jsonl", jsonl(
        {"imageGcsUri": "gs://b/1.jpg", "classificationAnnotation": {"displayName": "1"},
         "dataItemResourceLabels": {"aiplatform.googleapis.com/ml_use": "validation"}},
        {"imageGcsUri": "gs://b/2.jpg", "classificationAnnotation": {"displayName": "dog"}})))
    assert single.task == "classification" and not single.multi_label
    assert single.rows["label"].tolist() == ["1", "dog"]  # names, "1" included
    assert single.rows["split"].tolist() == ["validation", "unassigned"]
    multi = load_table(write(tmp_path, "m.jsonl", jsonl(
        {"imageGcsUri": "gs://b/1.jpg", "classificationAnnotations": [
            {"displayName": "cat"}, {"displayName": "dog"}]},
        {"imageGcsUri": "gs://b/2.jpg"})))
    assert multi.multi_label and multi.rows["label"].tolist() == [["cat", "dog"], []]


def test_jsonl_of_boxes_and_classes_asks_for_the_task(tmp_path):
    path = write(tmp_path, "both.jsonl", jsonl(
        {"imageGcsUri": "gs://b/1.jpg", "boundingBoxAnnotations": [box()]},
        {"imageGcsUri": "gs://b/2.jpg", "classificationAnnotation": {"displayName": "cat"}}))
    assert "task='detection'" in message(path)
    assert load_table(path, task="detection").rows["label"].tolist() == [["car"], []]
    # Read for its classes, line 1 has none: an unlabelled row, as Vertex AI imports it.
    assert load_table(path, task="classification").rows["label"].tolist() == [None, "cat"]


# --- segmentation -------------------------------------------------------------------------

def test_segmentation_tables_from_a_dataframe_a_csv_and_parquet(tmp_path):
    frame = pd.DataFrame({"image_uri": ["img/a.jpg", "img/b.jpg"],
                          "mask_uri": ["masks/a.png", "masks/b.png"],
                          "split": ["train", "test"]})
    (tmp_path / "t.csv").write_text(frame.to_csv(index=False))
    frame.to_parquet(tmp_path / "t.parquet")
    for source, base in ((frame, Path.cwd()), (str(tmp_path / "t.csv"), tmp_path),
                         (str(tmp_path / "t.parquet"), tmp_path)):
        table = load_table(source)
        assert table.task == "segmentation" and not table.has_labels
        assert table.rows["mask_uri"].tolist() == ["masks/a.png", "masks/b.png"]
        assert table.rows["mask_file"].tolist() == [str(base / "masks" / "a.png"),
                                                    str(base / "masks" / "b.png")]
        assert table.rows["uri"].tolist()[0] == str(base / "img" / "a.jpg")
        assert "mask_uri" not in {c.name for c in table.inputs}
        assert table.rows["split"].tolist() == ["train", "test"]
    kept = load_table(frame, task="classification")  # as before: an input of text
    assert kept.task == "classification" and "mask_uri" in {c.name for c in kept.inputs}


def test_segmentation_without_masks_or_images_is_refused():
    assert "needs a 'mask_uri' column" in message(
        pd.DataFrame({"image_uri": ["a.jpg"]}), task="segmentation")
    assert "needs each image's path" in message(
        pd.DataFrame({"mask_uri": ["a.png"], "x": [1]}))
    with pytest.raises(SchemaError, match=r"column 'mask_uri' has empty.*row 1") as error:
        load_table(pd.DataFrame({"image_uri": ["a.jpg", "b.jpg"], "mask_uri": ["a.png", ""]}))
    assert error.value.rows == [1]


@pytest.mark.parametrize("segmentation, expected", [
    ({"size": [100, 200], "counts": "a1b2c3"}, "RLE counts a1b2c3 cover 246 pixels, not "
                                              "100 x 200"),
    ({"size": [50, 50], "counts": [2500]}, "an RLE mask of size [50, 50], not the image's "
                                           "[100, 200]"),
    ([[1, 2, 3, 4]], "polygon [1, 2, 3, 4] is not x, y pairs (three or more)"),
])
def test_coco_masks_that_do_not_fit_their_image_are_named(tmp_path, segmentation, expected):
    data = json.loads((DATA / "coco.json").read_text())
    data["annotations"][2]["segmentation"] = segmentation
    path = write(tmp_path, "coco.json", json.dumps(data))
    assert load_table(path).skipped_annotations["annotation"].tolist() == [3]
    text = message(path, invalid_annotations="error")
    assert f"annotation id 3: {expected}" in text and "as pycocotools writes it" in text

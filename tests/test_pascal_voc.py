"""Pascal VOC XML (issue 38, item 2): LabelImg and CVAT folders and the VOC2012 layout are
read as detection sources, never as label/file folders; their tf_models records are,
key by key, what the Object Detection API's `create_pascal_tf_record.dict_to_tf_example`
writes for the same XML; unusable XML files are rejected rows, with their reason."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from helpers import read_manifest, write_image
from object_detection_api import pascal_example

import tfrecorder
from tfrecorder.errors import SchemaError
from tfrecorder.sources import load_table

# (name, xmin, ymin, xmax, ymax, difficult, truncated, pose): pixels as LabelImg writes
# them, on sizes whose fractions are not exact in binary (13 / 67).
OBJECTS = {
    "a": [("dog", 13, 7, 45, 50, 0, 1, "Left"), ("cat", 1, 1, 67, 51, 1, 0, "Unspecified"),
          ("person", 20.5, 3, 33, 29.25, 0, 0, "Frontal")],
    "b": [],  # an image without objects
    "c": [("cat", 0, 0, 10, 12, 1, 1, "Rear"), ("dog", 5, 6, 60, 40, 0, 0, "Unspecified")],
}
SIZE = (67, 51)  # width, height
FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/filename": tf.io.FixedLenFeature([], tf.string),
    "image/source_id": tf.io.FixedLenFeature([], tf.string),
    "image/key/sha256": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    **{f"image/object/bbox/{c}": tf.io.VarLenFeature(tf.float32)
       for c in ("xmin", "ymin", "xmax", "ymax")},
    "image/object/class/label": tf.io.VarLenFeature(tf.int64),
    "image/object/class/text": tf.io.VarLenFeature(tf.string),
    "image/object/difficult": tf.io.VarLenFeature(tf.int64),
    "image/object/truncated": tf.io.VarLenFeature(tf.int64),
    "image/object/view": tf.io.VarLenFeature(tf.string),
}


def voc_xml(filename: str, objects, folder: str | None = "images", path: str | None = None,
            size=SIZE) -> str:
    """An annotation as LabelImg writes it (None leaves an element out)."""
    parts = ["<annotation>"]
    if folder is not None:
        parts.append(f"\t<folder>{folder}</folder>")
    parts.append(f"\t<filename>{filename}</filename>")
    if path is not None:
        parts.append(f"\t<path>{path}</path>")
    parts.append(f"\t<source>\n\t\t<database>Unknown</database>\n\t</source>\n\t<size>\n"
                 f"\t\t<width>{size[0]}</width>\n\t\t<height>{size[1]}</height>\n"
                 "\t\t<depth>3</depth>\n\t</size>\n\t<segmented>0</segmented>")
    for name, xmin, ymin, xmax, ymax, difficult, truncated, pose in objects:
        parts.append(f"\t<object>\n\t\t<name>{name}</name>"
                     + (f"\n\t\t<pose>{pose}</pose>" if pose is not None else "")
                     + f"\n\t\t<truncated>{truncated}</truncated>\n\t\t<difficult>"
                     f"{difficult}</difficult>\n\t\t<bndbox>\n\t\t\t<xmin>{xmin}</xmin>\n"
                     f"\t\t\t<ymin>{ymin}</ymin>\n\t\t\t<xmax>{xmax}</xmax>\n"
                     f"\t\t\t<ymax>{ymax}</ymax>\n\t\t</bndbox>\n\t</object>")
    parts.append("</annotation>\n")
    return "\n".join(parts)


def write_pair(images: Path, xmls: Path, stem: str, objects, seed: int = 0, **xml) -> None:
    write_image(images / f"{stem}.jpg", size=SIZE, seed=seed)
    xmls.mkdir(parents=True, exist_ok=True)
    (xmls / f"{stem}.xml").write_text(voc_xml(f"{stem}.jpg", objects, **xml))


def labelimg_folder(root: Path) -> Path:
    """LabelImg's default: each XML beside its image, <folder> the folder's name."""
    for seed, (stem, objects) in enumerate(OBJECTS.items()):
        write_pair(root, root, stem, objects, seed=seed, folder=root.name,
                   path=str(root / f"{stem}.jpg"))
    return root


def voc2012_folder(root: Path) -> Path:
    """The VOC2012 layout, as VOCdevkit/VOC2012: a (train), b (val), c (test), and d in
    no list; the per-class lists beside them are not split lists."""
    voc = root / "VOC2012"
    for seed, (stem, objects) in enumerate({**OBJECTS, "d": OBJECTS["a"][:1]}.items()):
        write_pair(voc / "JPEGImages", voc / "Annotations", stem, objects, seed=seed,
                   folder="VOC2012")
    main = voc / "ImageSets" / "Main"
    main.mkdir(parents=True)
    for name, ids in {"train": "a", "val": "b", "trainval": "a\nb", "test": "c",
                      "dog_train": "a  1"}.items():
        (main / f"{name}.txt").write_text(ids + "\n")
    return voc


def convert(source, out, **options):
    return tfrecorder.convert(str(source), str(out), layout="tf_models", num_workers=1,
                              progress=False, **options)


def records(out) -> dict[str, dict]:
    """Every record of a tf_models dataset, parsed by TensorFlow, by file name: lists.
    Each record's source id is a number (Model Garden's `process_source_id` reads it
    as one), each its own."""
    found = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".tfrecord"):
            continue
        for serialized in tf.data.TFRecordDataset(os.path.join(out, name)):
            parsed = tf.io.parse_single_example(serialized, FEATURES)
            values = {key: np.asarray((tf.sparse.to_dense(value) if isinstance(
                value, tf.SparseTensor) else value).numpy()) for key, value in parsed.items()}
            values = {key: value.tolist() if value.ndim else [value.item()]
                      for key, value in values.items()}
            values["split"] = name.split("-")[0]
            found[values["image/filename"][0].decode()] = values
    ids = [int(r["image/source_id"][0]) for r in found.values()]
    assert len(set(ids)) == len(ids)
    return found


def label_ids(out) -> dict[str, int]:
    """The label map the dataset wrote, as the reference's `label_map_dict`."""
    from tfrecorder.format.vocabulary import parse_label_map

    found = parse_label_map((Path(out) / "label_map.pbtxt").read_text())
    return dict(zip(found.names, found.model_ids))


def assert_same_record(ours: dict, theirs: dict) -> None:
    """Our record against the reference's, key by key (boxes to 1e-6); but the source id,
    which the reference writes as the file name, and TensorFlow's models read as a
    number (ours: the row's number; `records` checks it)."""
    assert set(theirs) <= set(ours)
    for key, expected in theirs.items():
        if key == "image/source_id":
            assert expected == ours["image/filename"]
            continue
        if key.startswith("image/object/bbox/"):
            np.testing.assert_allclose(ours[key], expected, atol=1e-6, err_msg=key)
        else:
            assert ours[key] == expected, key


@pytest.mark.parametrize("difficult", ["keep", "drop"])
def test_labelimg_folder_is_what_create_pascal_tf_record_writes(tmp_path, difficult):
    root = labelimg_folder(tmp_path / "flat")
    out = tmp_path / "out"
    result = convert(root, out, difficult=difficult)
    ours = records(out)
    assert sorted(ours) == ["a.jpg", "b.jpg", "c.jpg"] and result.num_rejected == 0
    ids = label_ids(out)
    # Sorted, the plan's order, of the classes written (every cat is difficult).
    assert ids == ({"dog": 1, "person": 2} if difficult == "drop" else
                   {"cat": 1, "dog": 2, "person": 3})
    for stem in OBJECTS:
        theirs = pascal_example((root / f"{stem}.xml").read_bytes(), str(tmp_path), ids,
                                ignore_difficult_instances=difficult == "drop",
                                image_subdirectory="")
        assert_same_record(ours[f"{stem}.jpg"], theirs)
    a = ours["a.jpg"]
    kept = ["dog", "person"] if difficult == "drop" else ["dog", "cat", "person"]
    assert [t.decode() for t in a["image/object/class/text"]] == kept
    assert a["image/object/bbox/xmin"][0] == pytest.approx(13 / 67, abs=1e-7)
    assert ours["b.jpg"]["image/object/bbox/xmin"] == []
    assert [v.decode() for v in ours["c.jpg"]["image/object/view"]] == (
        ["Unspecified"] if difficult == "drop" else ["Rear", "Unspecified"])


def test_voc2012_layout_splits_and_records(tmp_path):
    voc = voc2012_folder(tmp_path / "VOCdevkit")
    table = load_table(str(voc))
    assert table.task == "detection"
    assert dict(zip(table.rows.index, table.rows["split"].astype(str))) == {
        "Annotations/a.xml": "train", "Annotations/b.xml": "validation",
        "Annotations/c.xml": "test", "Annotations/d.xml": "unassigned"}
    assert table.rows["image_uri"].tolist() == [f"JPEGImages/{s}.jpg" for s in "abcd"]
    out = tmp_path / "out"
    convert(voc, out)
    ours = records(out)
    assert {name: r["split"] for name, r in ours.items() if name != "d.jpg"} == {
        "a.jpg": "train", "b.jpg": "validation", "c.jpg": "test"}
    ids = label_ids(out)
    for stem in "abcd":
        theirs = pascal_example((voc / "Annotations" / f"{stem}.xml").read_bytes(),
                                str(tmp_path / "VOCdevkit"), ids)
        assert_same_record(ours[f"{stem}.jpg"], theirs)


def test_trainval_is_train_only_without_train_and_val_lists(tmp_path):
    voc = voc2012_folder(tmp_path)
    for name in ("train", "val"):
        (voc / "ImageSets" / "Main" / f"{name}.txt").unlink()
    splits = load_table(str(voc)).rows["split"].astype(str).tolist()
    assert splits == ["train", "train", "test", "unassigned"]


def test_an_image_in_two_lists_is_an_error(tmp_path):
    voc = voc2012_folder(tmp_path)
    (voc / "ImageSets" / "Main" / "test.txt").write_text("c\na\n")
    with pytest.raises(SchemaError, match=r"both name image 'a'.*Remove it from one list"):
        load_table(str(voc))


def test_cvat_export_annotations_beside_images(tmp_path):
    """CVAT's Pascal VOC 1.1 export: Annotations/, JPEGImages/, ImageSets/Main/default.txt
    (no split) and labelmap.txt; an empty <folder/>, no <pose>, PNG images."""
    root = tmp_path / "cvat"
    for seed, (stem, objects) in enumerate(OBJECTS.items()):
        write_image(root / "JPEGImages" / f"{stem}.png", size=SIZE, fmt="PNG", seed=seed)
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"{stem}.xml").write_text(
            voc_xml(f"{stem}.png", [o[:7] + (None,) for o in objects], folder=""))
    (root / "ImageSets" / "Main").mkdir(parents=True)
    (root / "ImageSets" / "Main" / "default.txt").write_text("a\nb\nc\n")
    (root / "labelmap.txt").write_text("# label:color_rgb:parts:actions\ncat:::\ndog:::\n")
    table = load_table(str(root))
    assert table.rows["split"].astype(str).unique().tolist() == ["unassigned"]
    out = tmp_path / "out"
    convert(root, out, difficult="drop")
    ours = records(out)
    assert sorted(ours) == ["a.png", "b.png", "c.png"]
    c = ours["c.png"]
    assert c["image/format"] == [b"png"] and c["image/object/difficult"] == [0]
    assert c["image/object/class/text"] == [b"dog"]
    assert c["image/object/view"] == [b"Unspecified"]  # VOC's word for no pose
    np.testing.assert_allclose([c[f"image/object/bbox/{k}"][0] for k in
                                ("ymin", "xmin", "ymax", "xmax")],
                               [6 / 51, 5 / 67, 40 / 51, 60 / 67], atol=1e-7)


def test_annotations_folder_beside_images_folder_by_folder_name(tmp_path):
    """LabelImg's annotations saved into a folder of their own: <folder> names the
    images' folder beside it; <path> from another machine is not needed."""
    root = tmp_path / "dataset"
    for seed, (stem, objects) in enumerate(OBJECTS.items()):
        write_pair(root / "images", root / "annotations", stem, objects, seed=seed,
                   folder="images", path=f"C:\\Users\\me\\images\\{stem}.jpg")
    table = load_table(str(root))
    assert table.rows["image_uri"].tolist() == [f"images/{s}.jpg" for s in OBJECTS]
    assert table.rejected_rows is None


def test_split_folders_name_the_split(tmp_path):
    """The tutorials' images/train and images/test, each XML beside its image."""
    root = tmp_path / "images"
    write_pair(root / "train", root / "train", "a", OBJECTS["a"], folder="train")
    write_pair(root / "test", root / "test", "c", OBJECTS["c"], folder="test")
    rows = load_table(str(root)).rows
    assert rows["split"].astype(str).tolist() == ["test", "train"]


def test_one_xml_file(tmp_path):
    voc = voc2012_folder(tmp_path)
    table = load_table(str(voc / "Annotations" / "b.xml"))
    assert table.rows["uri"].tolist() == [str(voc / "JPEGImages" / "b.jpg")]
    assert table.rows["label"].tolist() == [[]]


BAD = {
    "empty.xml": ("", "empty XML file"),
    "broken.xml": ("<annotation><filename>x.jpg</filename>", "not XML: no element found"),
    "other.xml": ("<annotations><image/></annotations>",
                  "its root element is <annotations>, not <annotation>"),
    "nosize.xml": (voc_xml("a.jpg", [("dog", 1, 1, 2, 2, 0, 0, None)], size=(0, 0)),
                   "no usable <size>"),
    "missing.xml": (voc_xml("gone.jpg", []), "image 'gone.jpg' not found"),
}


def test_unusable_xml_files_are_rejected_rows_with_their_reason(tmp_path):
    root = labelimg_folder(tmp_path / "flat")
    for name, (text, _) in BAD.items():
        (root / name).write_text(text)
    table = load_table(str(root))
    assert table.rows.index.tolist() == ["a.xml", "b.xml", "c.xml"]
    rejected = table.rejected_rows
    assert sorted(rejected["xml"]) == sorted(BAD)
    assert list(rejected.columns) == ["xml", "image_uri", "objects", "reason"]
    for name, (_, reason) in BAD.items():
        assert reason in rejected.set_index("xml").at[name, "reason"], name
    assert rejected.set_index("xml").at["missing.xml", "image_uri"] == "gone.jpg"
    assert rejected.set_index("xml").at["nosize.xml", "objects"] == 1  # its one object
    # ... they count against max_rejected (5 of 8 rows, more than half) ...
    with pytest.raises(tfrecorder.TooManyRejectedError, match=r"5 rows were rejected"):
        convert(root, tmp_path / "out")
    # ... and the others convert; the run lists them in rejected.csv with their reasons.
    result = convert(root, tmp_path / "out", max_rejected=1.0)
    assert sorted(records(tmp_path / "out")) == ["a.jpg", "b.jpg", "c.jpg"]
    assert result.num_records == 3 and result.num_rejected == len(BAD)
    listed = pd.read_csv(tmp_path / "out" / "rejected.csv").set_index("xml")
    assert sorted(listed.index) == sorted(BAD)
    for name, (_, reason) in BAD.items():
        assert reason in listed.at[name, "reason"], name


def test_rejected_csv_gives_the_objects_of_each_rejected_image(tmp_path):
    """Issue 51, item 3: an image that cannot be written (an empty file, a corrupt JPEG)
    is listed with the number of its objects, as an XML file the source rejects is, and
    as COCO and YOLO list theirs; the manifest counts them as in rejected images."""
    root = labelimg_folder(tmp_path / "flat")
    (root / "a.jpg").write_bytes(b"")  # 3 objects
    (root / "c.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG")  # 2 objects
    (root / "nosize.xml").write_text(BAD["nosize.xml"][0])  # 1 object
    convert(root, tmp_path / "out", max_rejected=1.0)
    listed = pd.read_csv(tmp_path / "out" / "rejected.csv").set_index("xml")
    assert listed["objects"].to_dict() == {"a.xml": 3, "c.xml": 2, "nosize.xml": 1}
    assert listed.at["a.xml", "reason"] == "empty file (0 bytes)"
    counts = read_manifest(tmp_path / "out")["annotations"]
    assert (counts["objects"], counts["written"], counts["in_rejected_images"]) == (6, 0, 6)


GOOD = ("cat", 5, 6, 20, 30, 0, 0, None)
BAD_OBJECTS = {  # an object's fault -> its reason in skipped_annotations.csv
    ("dog", 10, 10, 69, 20, 0, 0, None): "box outside the image",  # 2 px past 67
    ("dog", 10, 10, 10, 20, 0, 0, None): "empty or upside-down box",
    ("", 1, 1, 2, 2, 0, 0, None): "box without a label",
    ("dog", 1, 1, 2, 2, "yes", 0, None): "difficult or truncated other than 0 or 1",
    ("dog", 1, 1, "x", 2, 0, 0, None): "bndbox that is not four numbers",
}


def test_a_bad_object_is_skipped_and_listed_and_its_image_kept(tmp_path):
    """One bad box costs that box, not its image's good ones; each is listed with its
    file, object and reason, and counted."""
    root = tmp_path / "flat"
    for seed, bad in enumerate(BAD_OBJECTS):
        write_pair(root, root, f"img{seed}", [GOOD, bad], seed=seed, folder="flat")
    table = load_table(str(root))
    assert table.rows["label"].tolist() == [["cat"]] * len(BAD_OBJECTS)
    assert table.rejected_rows is None
    skipped = table.skipped_annotations
    assert skipped["reason"].tolist() == list(BAD_OBJECTS.values())
    assert skipped["annotation"].tolist() == ["object 2"] * len(BAD_OBJECTS)
    assert skipped["source"].tolist() == [f"img{k}.xml" for k in range(len(BAD_OBJECTS))]
    assert "xmax 69" in skipped["written"].iloc[0]
    assert table.annotations.objects == 2 * len(BAD_OBJECTS)
    with pytest.raises(SchemaError, match=r"1 object outside the image: img0.xml, object 2: "
                                          r"name 'dog', xmin 10, .* in <size> 67 x 51"):
        load_table(str(root), invalid_annotations="error")


def test_a_box_a_pixel_past_the_edge_is_clipped_and_counted(tmp_path):
    """LabelImg and VOC count pixels from 1: xmax = width + 1 is within 1% of a side, so
    it is clipped to the edge (and counted), not lost."""
    root = tmp_path / "flat"
    write_pair(root, root, "a", [("dog", 0, 0, 68, 52, 0, 0, None)], folder="flat")
    table = load_table(str(root))
    np.testing.assert_allclose(np.reshape(table.rows["objects/bbox"].iloc[0], (-1, 4)),
                               [[0, 0, 1, 1]])
    assert table.annotations.clipped == 1 and table.skipped_annotations is None


def test_a_folder_of_only_unusable_xml_files_is_an_error(tmp_path):
    (tmp_path / "a.xml").write_text("<annotation><filename>a.jpg</filename></annotation>")
    write_image(tmp_path / "a.jpg")
    with pytest.raises(SchemaError, match=r"none of the 1 XML file .* a.xml: no usable "
                                          r"<size>"):
        load_table(str(tmp_path))


def test_a_labelimg_folder_is_never_a_classification_folder(tmp_path):
    """Issue 38: LabelImg's folder of XML beside images once failed as label/file."""
    root = labelimg_folder(tmp_path / "flat")
    assert load_table(str(root)).task == "detection"
    # label/file with XML files that are not VOC's (CVAT's <annotations> file, or any
    # other) is refused, naming them, rather than read with its XML left out unread.
    write_image(tmp_path / "classes" / "cat" / "1.jpg")
    write_image(tmp_path / "classes" / "dog" / "2.jpg")
    (tmp_path / "classes" / "cat" / "notes.xml").write_text("<annotations>hi</annotations>")
    with pytest.raises(SchemaError, match=r"1 XML file \(e.g. \[.*notes.xml"):
        load_table(str(tmp_path / "classes"))
    (tmp_path / "classes" / "cat" / "notes.xml").unlink()
    assert load_table(str(tmp_path / "classes")).task == "classification"


def test_a_label_map_numbers_the_classes(tmp_path):
    root = labelimg_folder(tmp_path / "flat")
    label_map = tmp_path / "label_map.pbtxt"
    label_map.write_text("item { id: 7 name: 'person' }\nitem { id: 3 name: 'dog' }\n"
                         "item { id: 12 name: 'cat' }\n")
    out = tmp_path / "out"
    convert(root, out, label_vocabulary=str(label_map))
    a = records(out)["a.jpg"]
    assert a["image/object/class/label"] == [3, 12, 7]
    theirs = pascal_example((root / "a.xml").read_bytes(), str(tmp_path),
                            {"person": 7, "dog": 3, "cat": 12}, image_subdirectory="")
    assert_same_record(a, theirs)


def test_a_voc_folder_in_a_bucket(gcs_store, tmp_path):
    """The VOC2012 layout on the GCS emulator: the same table and records as its local
    copy (XML files read a window at a time, images found in the bucket's listing)."""
    from test_remote import upload_folder

    voc = voc2012_folder(tmp_path / "VOCdevkit")
    (voc / "Annotations" / "empty.xml").write_text("")
    prefix = f"{gcs_store.root}/pascal-voc/VOC2012"
    upload_folder(gcs_store, voc, prefix)
    local, remote = load_table(str(voc)), load_table(prefix)
    for column in ("image_uri", "split", "label", "objects/bbox", "objects/view"):
        assert remote.rows[column].astype(str).tolist() == \
            local.rows[column].astype(str).tolist(), column
    assert remote.rows["uri"].tolist() == [f"{prefix}/JPEGImages/{s}.jpg" for s in "abcd"]
    assert remote.rejected_rows.to_dict("records") == local.rejected_rows.to_dict("records")
    convert(voc, tmp_path / "local")
    convert(prefix, tmp_path / "remote")
    assert records(tmp_path / "remote") == records(tmp_path / "local")


def test_load_pads_and_crops_difficult_truncated_and_view_with_their_boxes(tmp_path):
    """Pascal VOC's per-object flags stay one a box: padded with max_boxes (0, 0, ""),
    and left out with their object by a crop."""
    out = tmp_path / "out"
    convert(labelimg_folder(tmp_path / "flat"), out)
    names = ["difficult", "truncated", "view"]
    for split, ds in tfrecorder.load(str(out), max_boxes=2, shuffle=False).items():
        for element in ds:
            stem = element["image_name"].numpy().decode()[0]
            objects = OBJECTS[stem][:2]
            assert int(element["objects/num"]) == len(objects)
            expected = [[o[5] for o in objects], [o[6] for o in objects],
                        [o[7].encode() for o in objects]]
            for name, values, fill in zip(names, expected, [0, 0, b""]):
                assert element[f"objects/{name}"].numpy().tolist() == \
                    values + [fill] * (2 - len(values)), (split, stem, name)
    cropped = tfrecorder.load(str(out), image_size=(16, 16), augment="random_resized_crop",
                              crop="center", batch_size=2, seed=0)
    for ds in cropped.values():
        for batch in ds:
            lengths = batch["objects/bbox"].row_lengths().numpy().tolist()
            for name in names:
                assert batch[f"objects/{name}"].row_lengths().numpy().tolist() == lengths

"""COCO keypoints (issue 38): `sources/coco_keypoints.keypoint_extras` against the values
the Object Detection API's `create_coco_tf_record.py` writes, datasets with keypoints
written in both layouts and read back with TensorFlow (raw keys, `load`, `open_split`),
padding, and `load(augment="basic")`'s flips checked against the pixels of marked images.

The reference (tensorflow/models, research/object_detection/dataset_tools/
create_coco_tf_record.py, the version with `keypoint_annotations_dict`, since 2020) is not
installable here (the PyPI wheel object-detection 0.0.3 predates keypoints), so the
expected values are computed by hand from its `create_tf_example`:

    keypoints_x.extend([float(x_abs) / image_width for x_abs in keypoints[::3]])
    keypoints_y.extend([float(y_abs) / image_height for y_abs in keypoints[1::3]])
    keypoints_visibility.extend(keypoints[2::3])
    keypoints_name.extend(_COCO_KEYPOINT_NAMES)
    num_keypoints.append(keypoint_annotations['num_keypoints'])

and for an annotation without keypoints `[0.0] * 17` x and y, `[0] * 17` visibilities,
the 17 names and `num_keypoints` 0; stored under `image/object/keypoint/x`, `/y`,
`/visibility`, `/num` and `/text`.
"""

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from helpers import rewrite_split
from PIL import Image
from test_verify import examples_of

import tfrecorder
from tfrecorder.errors import SchemaError, VerificationError
from tfrecorder.format.keypoints import COCO_KEYPOINT_NAMES, flip_order, flip_pairs
from tfrecorder.options import TableOptions
from tfrecorder.sources.coco_keypoints import category_keypoint_names, keypoint_extras
from tfrecorder.sources.detection import Objects, objects_table

K = len(COCO_KEYPOINT_NAMES)
HEIGHT, WIDTH = 40, 56  # not square: x / width and y / height cannot be confused
LAYOUTS = ("tfrecorder", "tf_models")
KP, VIS, NUM = "objects/keypoints", "objects/keypoint_visibility", "objects/num_keypoints"
BACKGROUND = 100
COCO_PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16)]


def coco_keypoints(rng, labelled: bool = True) -> tuple[list, int]:
    """An annotation's `keypoints` and its `num_keypoints`; unlabelled keypoints at (0, 0)
    with v = 0, as COCO writes them. Each labelled one at the centre of a pixel of its own
    below the first row (which holds the background's reference pixels), so that it
    stays on its pixel's mirror image when flipped."""
    cells = rng.choice(np.arange(WIDTH, HEIGHT * WIDTH), K, replace=False)
    found, labelled_count = [], 0
    for cell in cells:
        v = int(rng.randint(0, 3)) if labelled else 0
        y, x = divmod(int(cell), WIDTH)
        found += [x + 0.5, y + 0.5, v] if v else [0, 0, 0]
        labelled_count += v > 0
    return found, labelled_count


def expected_od_api(annotations: list[dict], width: int, height: int) -> dict:
    """What `create_tf_example` writes for these annotations (see the module docstring)."""
    xs, ys, vs, names, nums = [], [], [], [], []
    for annotation in annotations:
        keypoints = annotation.get("keypoints")
        if keypoints is not None:
            xs += [float(x) / width for x in keypoints[::3]]
            ys += [float(y) / height for y in keypoints[1::3]]
            vs += keypoints[2::3]
            nums.append(annotation["num_keypoints"])
        else:
            xs += [0.0] * K
            ys += [0.0] * K
            vs += [0] * K
            nums.append(0)
        names += [name.encode() for name in COCO_KEYPOINT_NAMES]
    return {"image/object/keypoint/x": np.float32(xs), "image/object/keypoint/y": np.float32(ys),
            "image/object/keypoint/visibility": vs, "image/object/keypoint/num": nums,
            "image/object/keypoint/text": names}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> list[dict]:
    """Three PNG images: two persons (one without keypoints: another category's object
    in a COCO file), one person, none. Each labelled keypoint k is a pixel of value
    BACKGROUND + 5 (k + 1) on a background of BACKGROUND in the red channel, so the pixels
    say which keypoint is where, whatever brightness augmentation adds. Green and blue
    number the rows and columns, so that a window's pixels say where it was, and whether
    it was flipped."""
    folder = tmp_path_factory.mktemp("keypoints")
    rng = np.random.RandomState(7)
    found = []
    for i, persons in enumerate(([True, False], [True], [])):
        pixels = np.full((HEIGHT, WIDTH, 3), BACKGROUND, np.uint8)
        pixels[..., 1] = 20 + 4 * np.arange(HEIGHT)[:, None]
        pixels[..., 2] = 10 + 4 * np.arange(WIDTH)
        annotations = []
        for labelled in persons:
            keypoints, num = coco_keypoints(rng, labelled)
            for k in range(K):
                x, y, v = keypoints[3 * k:3 * k + 3]
                if v:
                    pixels[int(y), int(x), 0] = BACKGROUND + 5 * (k + 1)
            annotations.append({"bbox": [4, 4, 20, 20], "keypoints": keypoints,
                                "num_keypoints": num} if labelled else
                               {"bbox": [30, 10, 10, 10]})
        path = os.path.join(folder, f"person_{i}.png")
        Image.fromarray(pixels).save(path)
        found.append({"image_uri": path, "annotations": annotations})
    return found


def extras_of(scene: dict) -> dict:
    annotations = scene["annotations"]
    n = len(annotations)
    return keypoint_extras([a.get("keypoints") for a in annotations], np.full(n, WIDTH),
                           np.full(n, HEIGHT), [a.get("num_keypoints") for a in annotations],
                           size=K)


def frame_of(scenes: list[dict]) -> pd.DataFrame:
    """The scenes as a detection DataFrame, with the keypoint extras as its columns (one
    list an object)."""
    rows = []
    for scene in scenes:
        extras = extras_of(scene) if scene["annotations"] else {
            KP: np.empty((0, 2 * K)), VIS: np.empty((0, K), np.int64),
            NUM: np.empty(0, np.int64)}
        rows.append({"split": "TRAIN", "image_uri": scene["image_uri"],
                     "label": ["person"] * len(scene["annotations"]),
                     "objects/bbox": [[(y / HEIGHT), x / WIDTH, (y + h) / HEIGHT,
                                       (x + w) / WIDTH]
                                      for x, y, w, h in (a["bbox"] for a in
                                                         scene["annotations"])],
                     **{name: values.tolist() for name, values in extras.items()}})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def written(tmp_path_factory, scenes) -> dict[str, str]:
    """The scenes converted in each layout: layout -> folder."""
    found = {}
    for layout in LAYOUTS:
        folder = str(tmp_path_factory.mktemp(layout))
        tfrecorder.convert(frame_of(scenes), folder, task="detection", layout=layout,
                           overwrite=True, progress=False, num_workers=1)
        found[layout] = folder
    return found


def records(folder: str) -> dict[str, tf.train.Example]:
    """The folder's train records, by image file name, as TensorFlow parses them."""
    path = os.path.join(folder, "train-00000-of-00001.tfrecord")
    found = {}
    for serialized in tf.data.TFRecordDataset(path).as_numpy_iterator():
        example = tf.train.Example.FromString(serialized)
        feature = example.features.feature
        name = (feature["image/filename"] if "image/filename" in feature
                else feature["image_name"]).bytes_list.value[0].decode()
        found[name] = feature
    return found


def values(feature) -> list:
    return list(getattr(feature, feature.WhichOneof("kind")).value)


# --- the values: as the Object Detection API writes them ---------------------------------

def test_extras_are_the_object_detection_apis_values(scenes):
    scene = scenes[0]
    found = extras_of(scene)
    expected = expected_od_api(scene["annotations"], WIDTH, HEIGHT)
    pairs = found[KP].reshape(2, K, 2)
    # [y, x] pairs: y / height, x / width (float64 here; stored as float32)
    np.testing.assert_array_equal(np.float32(pairs[..., 1].ravel()),
                                  expected["image/object/keypoint/x"])
    np.testing.assert_array_equal(np.float32(pairs[..., 0].ravel()),
                                  expected["image/object/keypoint/y"])
    assert found[VIS].ravel().tolist() == expected["image/object/keypoint/visibility"]
    assert found[NUM].tolist() == expected["image/object/keypoint/num"]
    assert found[VIS].dtype == np.int64 and found[VIS].shape == (2, K)


@pytest.mark.parametrize("layout", ["tf_models"])
def test_tf_models_keys_are_those_create_coco_tf_record_writes(written, scenes, layout):
    stored = records(written[layout])
    for scene in scenes:
        feature = stored[os.path.basename(scene["image_uri"])]
        expected = expected_od_api(scene["annotations"], WIDTH, HEIGHT)
        for key, want in expected.items():
            got = values(feature[key])
            if key.endswith(("/x", "/y")):  # float32, bit for bit
                np.testing.assert_array_equal(np.float32(got), want)
                assert feature[key].WhichOneof("kind") == "float_list"
            else:
                assert got == want, key
        for key in ("visibility", "num"):
            assert feature[f"image/object/keypoint/{key}"].WhichOneof("kind") == "int64_list"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_load_gives_the_keypoints_as_written(written, scenes, layout):
    ds = tfrecorder.load(written[layout], "train", shuffle=False)
    elements = {e["image_name"].decode(): e for e in ds.as_numpy_iterator()}
    assert ds.element_spec[KP].shape.as_list() == [None, K, 2]
    for scene in scenes:
        element = elements[os.path.basename(scene["image_uri"])]
        n = len(scene["annotations"])
        want = extras_of(scene) if n else None
        assert element[KP].dtype == np.float32 and element[KP].shape == (n, K, 2)
        assert element[VIS].shape == (n, K) and element[NUM].shape == (n,)
        if n:
            np.testing.assert_array_equal(element[KP], np.float32(want[KP].reshape(n, K, 2)))
            np.testing.assert_array_equal(element[VIS], want[VIS])
            np.testing.assert_array_equal(element[NUM], want[NUM])


def test_both_layouts_read_alike_without_tensorflow_and_record_the_names(written):
    splits = {layout: {r["image_name"]: r for r in tfrecorder.open_split(written[layout],
                                                                         "train")}
              for layout in LAYOUTS}
    ours, theirs = splits["tfrecorder"], splits["tf_models"]
    assert ours.keys() == theirs.keys()
    for name, record in ours.items():
        for key in (KP, VIS, NUM):
            np.testing.assert_array_equal(record[key], theirs[name][key])
        assert record[KP].shape[1:] == (K, 2)
    for layout in LAYOUTS:
        with open(os.path.join(written[layout], "dataset.json")) as file:
            manifest = json.load(file)
        names = [f.get("names") for f in manifest["features"].values() if f.get("names")]
        assert names == [list(COCO_KEYPOINT_NAMES)]
        assert tfrecorder.verify(written[layout]).ok


@pytest.mark.parametrize("layout, key", [
    ("tfrecorder", NUM), ("tf_models", "image/object/keypoint/num")])
def test_verify_names_a_record_whose_keypoint_counts_differ_from_its_boxes(
        written, tmp_path, layout, key):
    copy = str(tmp_path / "tampered")
    shutil.copytree(written[layout], copy)
    examples = examples_of(copy, "train")
    at = next(i for i, e in enumerate(examples) if len(e.get(key, [])) == 2)
    examples[at][key].append(0)  # three counts for two persons
    rewrite_split(copy, "train", examples)
    with pytest.raises(VerificationError) as caught:
        tfrecorder.verify(copy)
    (problem,) = caught.value.report.problems
    assert problem.record == at and problem.check == "objects"
    assert str(problem).endswith(f"2 boxes, but 3 {NUM}: each object has one box and one of "
                                 "each of its values")


def test_batches_are_ragged_or_pad_keypoints_as_unlabelled(written):
    ds = tfrecorder.load(written["tfrecorder"], "train", shuffle=False, batch_size=3,
                         max_boxes=3)
    batch = next(ds.as_numpy_iterator())
    assert batch[KP].shape == (3, 3, K, 2) and batch[VIS].shape == (3, 3, K)
    count = batch["objects/num"]
    for i, n in enumerate(count):
        assert (batch[KP][i, n:] == -1).all() and (batch[VIS][i, n:] == 0).all()
        assert (batch[NUM][i, n:] == 0).all()
    assert sorted(count.tolist()) == [0, 1, 2]
    ragged = tfrecorder.load(written["tf_models"], "train", shuffle=False, batch_size=3)
    assert ragged.element_spec[KP].shape.as_list() == [None, None, K, 2]
    assert sorted(next(iter(ragged))[KP].row_lengths().numpy().tolist()) == [0, 1, 2]


# --- flips: keypoints move with their pixels, left and right trade places ----------------

def test_coco_flip_pairs_come_from_the_names():
    assert flip_pairs(COCO_KEYPOINT_NAMES) == COCO_PAIRS
    order = flip_order(COCO_KEYPOINT_NAMES, K)
    assert order[:5] == [0, 2, 1, 4, 3] and order[15:] == [16, 15]
    assert flip_order(None, 3) == [0, 1, 2]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_basic_augmentation_flips_keypoints_with_their_image(written, layout):
    plain = {e["image_name"]: e for e in tfrecorder.load(
        written[layout], "train", shuffle=False).as_numpy_iterator()}
    order = flip_order(COCO_KEYPOINT_NAMES, K)
    flips = set()
    for seed in (1, 2, 3):
        for element in tfrecorder.load(written[layout], "train", shuffle=False,
                                       augment="basic", seed=seed).as_numpy_iterator():
            was = plain[element["image_name"]]
            if not len(was[KP]):
                continue
            flip = not np.allclose(element["objects/bbox"], was["objects/bbox"])
            flips.add(flip)
            background = int(element["image"][0, 0, 0])  # (no keypoint on the first row)
            expected_vis = was[VIS][:, order] if flip else was[VIS]
            np.testing.assert_array_equal(element[VIS], expected_vis)
            for person, visibility in zip(element[KP], element[VIS]):
                for k, ((y, x), v) in enumerate(zip(person, visibility)):
                    if not v:  # not labelled: stays at (0, 0), not in the image
                        assert (y, x) == (0, 0)
                        continue
                    # The pixel under the keypoint is marked as the stored keypoint it
                    # is now: its mirror image (left for right) where the image flipped
                    # (brightness moves every pixel alike, but for rounding).
                    mark = int(element["image"][int(y * HEIGHT), int(x * WIDTH), 0])
                    wanted = 5 * ((order[k] if flip else k) + 1)
                    assert abs(mark - background - wanted) <= 1, (k, flip)
    assert flips == {False, True}


# --- the table: how the COCO reader's extras are typed ----------------------------------

def test_objects_table_types_keypoints_as_rows_of_2k_values(scenes, tmp_path):
    scene = scenes[0]
    n = len(scene["annotations"])
    images = pd.DataFrame({"image_uri": [scene["image_uri"], scenes[2]["image_uri"]]},
                          index=[11, 12])
    objects = Objects.of([0] * n, ["person"] * n, [[0.1, 0.1, 0.5, 0.5]] * n, [11] * n,
                         lambda i: f"annotation {i}", "the COCO file", **extras_of(scene))
    table = objects_table(images, objects, images, str(tmp_path), TableOptions())
    shapes = {c.name: c.shape for c in table.inputs}
    assert shapes[KP] == (None, 2 * K) and shapes[VIS] == (None, K) and shapes[NUM] == (None,)
    assert table.keypoint_names == COCO_KEYPOINT_NAMES  # 17 unnamed: COCO's
    named = objects_table(images, objects, images, str(tmp_path), TableOptions(),
                          keypoint_names=[f"k{i}" for i in range(K)])
    assert named.keypoint_names == tuple(f"k{i}" for i in range(K))
    # No object at all: still K keypoints an object (validate cannot tell from the cells).
    empty = Objects.of([], [], np.empty((0, 4)), [], str, "the COCO file",
                       **keypoint_extras([], np.empty(0), np.empty(0), size=K))
    shapes = {c.name: c.shape for c in objects_table(images, empty, images, str(tmp_path),
                                                     TableOptions()).inputs}
    assert shapes[KP] == (None, 2 * K) and shapes[VIS] == (None, K)


def test_category_keypoint_names():
    person = {"id": 1, "name": "person", "keypoints": list(COCO_KEYPOINT_NAMES),
              "skeleton": [[16, 14], [14, 12]]}
    assert category_keypoint_names([person, {"id": 2, "name": "dog"}]) == COCO_KEYPOINT_NAMES
    assert category_keypoint_names([{"id": 2, "name": "dog"}]) is None
    with pytest.raises(SchemaError, match="categories naming different keypoints"):
        category_keypoint_names([person, {"id": 3, "name": "cat", "keypoints": ["tail"]}])


@pytest.mark.parametrize("keypoints, words", [
    ([[10, 10]], "not a list of numbers"),
    ([[10, 10, 3] * K], "visibility other than 0"),
    ([[1, 1, 2] * (K + 1)], "more keypoints than the 17"),
    ([["a", 1, 2]], "not a list of numbers"),
])
def test_malformed_keypoints_are_refused_naming_the_annotation(keypoints, words):
    with pytest.raises(SchemaError, match=words) as raised:
        keypoint_extras(keypoints, np.array([WIDTH]), np.array([HEIGHT]), size=K,
                        where=lambda i: f"annotation id {100 + i}",
                        source="the COCO file 'person_keypoints.json'")
    assert "annotation id 100" in str(raised.value)
    assert "'person_keypoints.json'" in str(raised.value)


# --- end to end: a person_keypoints file through convert ---------------------------------

def test_a_person_keypoints_file_converts_as_the_object_detection_api_writes_it(
        scenes, tmp_path):
    images, annotations = [], []
    for i, scene in enumerate(scenes):
        images.append({"id": 21 + i, "file_name": os.path.basename(scene["image_uri"]),
                       "width": WIDTH, "height": HEIGHT})
        for j, annotation in enumerate(scene["annotations"]):
            annotations.append({"id": 1000 + 10 * i + j, "image_id": 21 + i,
                                "category_id": 1, "iscrowd": 0, "area": 400.0,
                                "num_keypoints": 0, "keypoints": [0] * 3 * K,
                                **annotation})
    data = {"images": images, "annotations": annotations,
            "categories": [{"id": 1, "name": "person", "supercategory": "person",
                            "keypoints": list(COCO_KEYPOINT_NAMES),
                            "skeleton": [[16, 14], [14, 12]]}]}
    path = os.path.join(os.path.dirname(scenes[0]["image_uri"]), "person_keypoints.json")
    with open(path, "w") as file:
        json.dump(data, file)
    out = str(tmp_path / "out")
    tfrecorder.convert(path, out, layout="tf_models", split="train", progress=False,
                       num_workers=1)
    stored = records(out)
    for scene in scenes:
        feature = stored[os.path.basename(scene["image_uri"])]
        given = [{**a, **({} if "keypoints" in a else {"keypoints": [0] * 3 * K,
                                                      "num_keypoints": 0})}
                 for a in scene["annotations"]]
        for key, want in expected_od_api(given, WIDTH, HEIGHT).items():
            got = values(feature[key]) if key in feature else []
            if key.endswith(("/x", "/y")):
                np.testing.assert_array_equal(np.float32(got), want)
            else:
                assert got == want, key


def test_splits_of_one_dataset_name_the_same_keypoints(scenes, tmp_path):
    from tfrecorder.sources import concat_tables

    images = pd.DataFrame({"image_uri": [scenes[1]["image_uri"]]}, index=[5])

    def table(names):
        objects = Objects.of([0], ["person"], [[0.1, 0.1, 0.5, 0.5]], [5], str,
                             **extras_of(scenes[1]))
        return objects_table(images, objects, images, str(tmp_path), TableOptions(),
                             keypoint_names=names)

    coco = table(None)
    assert concat_tables({"train": coco, "val": coco}, {"train": "a", "val": "b"}
                         ).keypoint_names == COCO_KEYPOINT_NAMES
    with pytest.raises(SchemaError, match="not of one kind: keypoints"):
        concat_tables({"train": coco, "val": table([f"k{i}" for i in range(K)])},
                      {"train": "a.json", "val": "b.json"})

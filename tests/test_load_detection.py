"""load(), verify() and inspect() on detection and segmentation datasets, in both layouts:
real datasets written by convert from scenes whose boxes, classes and masks are known
(tests/detection_data.py), read back with TensorFlow."""

import io
import math
import os
import shutil

import detection_data
import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from detection_data import CLASSES, HEIGHT, WIDTH, scenes, write_detection, write_segmentation
from helpers import rewrite_split, run_without_tensorflow
from PIL import Image
from test_verify import examples_of

import tfrecorder
from tfrecorder import VerificationError, cli
from tfrecorder.errors import OptionError

LAYOUTS = ("tfrecorder", "tf_models")
HALF = (HEIGHT // 2, WIDTH // 2)  # an image_size, at write or load time
SHARD = "train-00000-of-00001.tfrecord"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> dict[str, dict]:
    """The scenes, by image name."""
    return {os.path.basename(s["image_uri"]): s
            for s in scenes(str(tmp_path_factory.mktemp("scenes")))}


@pytest.fixture(scope="module")
def written(tmp_path_factory, drawn):
    """write(task, layout, masks, stored) -> the folder of the scenes written as a
    detection or segmentation dataset (`stored`: convert's image_size), each once."""
    folders = {}

    def write(task: str, layout: str, masks: bool = True, stored=None) -> str:
        key = (task, layout, masks, stored)
        if key not in folders:
            folder = str(tmp_path_factory.mktemp(f"{task}_{layout}"))
            options = {"layout": layout, "image_size": stored, "num_workers": 1}
            if task == "detection":
                write_detection(folder, list(drawn.values()), masks=masks, **options)
            else:
                write_segmentation(folder, list(drawn.values()), **options)
            folders[key] = folder
        return folders[key]

    return write


@pytest.fixture(scope="module")
def loaded(written):
    """loaded(task, layout, masks, stored, **load options) -> the train split's elements,
    as NumPy, by image name; each read once, as a pipeline takes a second to build."""
    found = {}

    def load(task: str, layout: str, masks: bool = True, stored=None, **options):
        key = (task, layout, masks, stored, tuple(sorted(options.items())))
        if key not in found:
            ds = tfrecorder.load(written(task, layout, masks, stored), "train",
                                 shuffle=False, **options)
            found[key] = {e["image_name"].decode(): e for e in ds.as_numpy_iterator()}
        return found[key]

    return load


def class_ids(scene) -> list[int]:
    return [CLASSES.index(name) for name in scene["labels"]]


def pixel_box(box, height: int, width: int) -> np.ndarray:
    """A relative box in pixels of an image of that size (rounding error removed)."""
    return np.round(np.asarray(box) * [height, width, height, width], 6)


def check_mask(mask: np.ndarray, box, height: int, width: int) -> None:
    """An object's mask is its rectangle as COCO's tools draw a polygon (the scene's
    rectangle [x, x + w) fills columns x to x + w - 1), corners that fall between pixels
    rounded either way."""
    y0, x0, y1, x1 = pixel_box(box, height, width)
    rows, columns = np.arange(height)[:, None], np.arange(width)[None, :]
    inner = ((rows >= math.ceil(y0)) & (rows < math.floor(y1))
             & (columns >= math.ceil(x0)) & (columns < math.floor(x1)))
    outer = ((rows >= math.floor(y0)) & (rows < math.ceil(y1))
             & (columns >= math.floor(x0)) & (columns < math.ceil(x1)))
    assert set(np.unique(mask)) <= {0, 1}
    assert mask[inner].all() and not mask[~outer].any()


# --- load: what was written comes back ----------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("masks, stored", [(False, None), (True, None), (True, HALF)],
                         ids=["boxes", "masks", "masks_resized"])
def test_boxes_classes_and_masks_come_back_as_written(loaded, drawn, layout, masks, stored):
    height, width = stored or (HEIGHT, WIDTH)
    elements = loaded("detection", layout, masks, stored)
    assert elements.keys() == drawn.keys()
    for name, element in elements.items():
        scene, n = drawn[name], len(drawn[name]["boxes"])
        boxes, labels = element["objects/bbox"], element["objects/label"]
        assert boxes.dtype == np.float32 and boxes.shape == (n, 4)
        np.testing.assert_allclose(boxes, np.reshape(scene["boxes"], (n, 4)), atol=1e-6)
        assert labels.dtype == np.int64 and labels.tolist() == class_ids(scene)
        assert element["image"].shape == (height, width, 3)
        if not masks:
            assert "objects/mask" not in element
            continue
        assert element["objects/mask"].dtype == np.uint8
        assert element["objects/mask"].shape == (n, height, width)
        for mask, box in zip(element["objects/mask"], scene["boxes"]):
            check_mask(mask, box, height, width)
    assert {len(s["boxes"]) for s in drawn.values()} == {0, 1, 2, 3}  # none, and several


def test_resizing_on_load_keeps_boxes_and_resizes_masks_by_nearest_neighbour(loaded):
    full = loaded("detection", "tf_models")
    for name, element in loaded("detection", "tf_models", image_size=HALF).items():
        np.testing.assert_array_equal(element["objects/bbox"], full[name]["objects/bbox"])
        assert element["image"].shape == (*HALF, 3)
        # Nearest neighbour at half size, pixel centres aligned: every second pixel.
        np.testing.assert_array_equal(element["objects/mask"],
                                      full[name]["objects/mask"][:, 1::2, 1::2])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_segmentation_masks_come_back_as_written(loaded, drawn, layout):
    for name, element in loaded("segmentation", layout).items():
        assert element["segmentation_mask"].dtype == np.uint8
        np.testing.assert_array_equal(element["segmentation_mask"],
                                      drawn[name]["mask"][..., None])
    # Resized when written (by Pillow) or when loaded: still only class ids.
    for name, element in loaded("segmentation", layout, stored=HALF).items():
        source = Image.fromarray(drawn[name]["mask"])
        np.testing.assert_array_equal(element["segmentation_mask"][..., 0], np.asarray(
            source.resize(HALF[::-1], Image.Resampling.NEAREST)))
    for element in loaded("segmentation", layout, image_size=(13, 7)).values():
        assert element["segmentation_mask"].shape == (13, 7, 1)
        assert set(np.unique(element["segmentation_mask"])) <= set(range(len(CLASSES) + 1))


def test_areas_follow_the_image_size_and_pad_as_model_garden_does(drawn, tmp_path):
    """Areas (pixels of the source image, here its boxes') are rescaled to the stored
    image by convert, and to the loaded one by load; is_crowd passes through."""
    frame = detection_data.detection_frame(list(drawn.values()))
    areas = [[(b[2] - b[0]) * (b[3] - b[1]) * HEIGHT * WIDTH for b in s["boxes"]]
             for s in drawn.values()]
    frame["objects/area"] = areas
    frame["objects/is_crowd"] = [[i % 2 for i in range(len(s["boxes"]))]
                                 for s in drawn.values()]
    folder = str(tmp_path / "areas")
    detection_data._convert(frame, folder, "detection", layout="tf_models", image_size=HALF)
    expected = dict(zip(drawn, areas))
    for image_size, max_boxes in [(None, None), ((12, 16), 4)]:
        ds = tfrecorder.load(folder, "train", image_size=image_size, max_boxes=max_boxes)
        scale = 4 if image_size is None else 16  # the source has 4 or 16 times the pixels
        for element in ds.as_numpy_iterator():
            area, crowd = element["objects/area"], element["objects/is_crowd"]
            assert (element["image_height"], element["image_width"]) == \
                element["image"].shape[:2]
            n = len(expected[element["image_name"].decode()])
            np.testing.assert_allclose(area[:n] * scale, expected[element["image_name"].decode()],
                                       rtol=1e-6)
            assert crowd[:n].tolist() == [i % 2 for i in range(n)]
            assert (area[n:] == -1).all() and (crowd[n:] == 0).all()


def test_a_tf_models_classification_dataset_loads_in_whole_batches(tmp_path, drawn):
    frame = pd.DataFrame({"image_uri": [s["image_uri"] for s in drawn.values()],
                          "label": [s["labels"][0] if s["labels"] else "none"
                                    for s in drawn.values()]})
    folder = str(tmp_path / "classes")
    tfrecorder.convert(frame, folder, layout="tf_models", progress=False, num_workers=1)
    vocabulary = sorted(set(frame["label"]))
    names = dict(zip(frame["image_uri"].map(os.path.basename), frame["label"]))
    for batch in tfrecorder.load(folder, "train", batch_size=4, image_size=HALF):
        assert batch["image"].shape[1:] == (*HALF, 3)
        assert [vocabulary[i] for i in batch["label"].numpy()] == [
            names[n.decode()] for n in batch["image_name"].numpy()]


# --- batches -----------------------------------------------------------------------------

def test_batches_are_ragged_by_default(written, drawn):
    ds = tfrecorder.load(written("detection", "tfrecorder"), "train", shuffle=False,
                         batch_size=3)
    batches = list(ds)
    assert len(batches) == 3 == len(ds)
    for batch in batches:
        boxes, masks = batch["objects/bbox"], batch["objects/mask"]
        assert isinstance(boxes, tf.RaggedTensor) and isinstance(masks, tf.RaggedTensor)
        counts = [len(drawn[n.decode()]["boxes"]) for n in batch["image_name"].numpy()]
        assert boxes.shape.as_list() == [len(counts), None, 4]
        assert masks.shape.as_list() == [len(counts), None, HEIGHT, WIDTH]
        assert boxes.row_lengths().numpy().tolist() == counts
        assert masks.row_lengths().numpy().tolist() == counts
        assert batch["objects/label"].row_lengths().numpy().tolist() == counts


def test_max_boxes_pads_objects_as_keras_and_model_garden_do(written, loaded, drawn):
    batch = next(iter(tfrecorder.load(written("detection", "tf_models", True, HALF),
                                      "train", shuffle=False, batch_size=8, max_boxes=4)))
    assert batch["objects/bbox"].shape == (8, 4, 4)
    assert batch["objects/mask"].shape == (8, 4, *HALF)
    for i, name in enumerate(batch["image_name"].numpy()):
        scene = drawn[name.decode()]
        n = len(scene["boxes"])
        assert batch["objects/num"][i] == n
        boxes, labels = batch["objects/bbox"][i].numpy(), batch["objects/label"][i].numpy()
        np.testing.assert_allclose(boxes[:n], np.reshape(scene["boxes"], (n, 4)), atol=1e-6)
        assert (boxes[n:] == -1).all() and labels[:n].tolist() == class_ids(scene)
        assert (labels[n:] == -1).all() and not batch["objects/mask"][i, n:].numpy().any()
    # Fewer places than objects: the first ones are kept, and counted.
    for name, element in loaded("detection", "tf_models", False, max_boxes=2).items():
        scene = drawn[name]
        n = min(2, len(scene["boxes"]))
        assert element["objects/num"] == n and element["objects/bbox"].shape == (2, 4)
        assert element["objects/label"][:n].tolist() == class_ids(scene)[:n]


def test_as_supervised_gives_images_with_boxes_and_classes(written):
    detection = written("detection", "tf_models", False)
    image, target = next(iter(tfrecorder.load(detection, "train", as_supervised=True)))
    assert image.shape == (HEIGHT, WIDTH, 3) and set(target) == {"boxes", "classes"}
    images, targets = next(iter(tfrecorder.load(detection, "train", batch_size=4,
                                                max_boxes=3, as_supervised=True)))
    assert images.shape == (4, HEIGHT, WIDTH, 3)
    assert targets["boxes"].shape == (4, 3, 4) and targets["classes"].shape == (4, 3)
    image, mask = next(iter(tfrecorder.load(written("segmentation", "tfrecorder"), "train",
                                            as_supervised=True)))
    assert image.shape == (HEIGHT, WIDTH, 3) and mask.shape == (HEIGHT, WIDTH, 1)


# --- augmentation ------------------------------------------------------------------------

def flipped(boxes: np.ndarray) -> np.ndarray:
    return np.stack([boxes[:, 0], 1 - boxes[:, 3], boxes[:, 2], 1 - boxes[:, 1]], axis=-1)


def test_basic_augmentation_flips_boxes_and_masks_with_their_image(loaded):
    plain = loaded("detection", "tfrecorder")
    seen = set()
    augmented = loaded("detection", "tfrecorder", augment="basic", seed=1)
    for name, element in augmented.items():
        boxes, masks, image = (element["objects/bbox"], element["objects/mask"],
                               element["image"])
        was = plain[name]
        if not len(boxes):
            continue
        flip = not np.allclose(boxes, was["objects/bbox"], atol=1e-6)
        seen.add(flip)
        np.testing.assert_allclose(boxes, flipped(was["objects/bbox"]) if flip
                                   else was["objects/bbox"], atol=1e-6)
        np.testing.assert_array_equal(masks, was["objects/mask"][:, :, ::-1] if flip
                                      else was["objects/mask"])
        # The boxes and masks still cover the bright rectangles of the image as augmented.
        background = image[~masks.any(axis=0)].max()
        for box, mask in zip(boxes, masks):
            y0, x0, y1, x1 = pixel_box(box, HEIGHT, WIDTH).astype(int)
            rectangle = np.zeros(mask.shape, bool)
            rectangle[y0:y1, x0:x1] = True
            assert mask[rectangle].all()
            assert (image[rectangle] >= background + 20).all()
    assert seen == {False, True}  # both happened, with this seed


def test_basic_augmentation_flips_a_segmentation_mask_with_its_image(loaded):
    flips = set()
    augmented = loaded("segmentation", "tf_models", augment="basic", seed=3)
    for name, element in augmented.items():
        mask, image = element["segmentation_mask"][..., 0], element["image"][..., 0]
        if mask.any():  # the classes are exactly where the image is bright
            background = image[mask == 0].max()
            np.testing.assert_array_equal(mask > 0, image >= background + 20)
            source = loaded("segmentation", "tf_models")[name]["segmentation_mask"][..., 0]
            flips.add((mask == source).all())
    assert flips == {False, True}


def test_an_augmentation_of_a_detection_dataset_gets_and_returns_the_element(loaded,
                                                                              written):
    plain = loaded("detection", "tf_models", False)
    inverted = loaded("detection", "tf_models", False, augment=invert)
    for name, element in inverted.items():
        np.testing.assert_array_equal(element["image"], 255 - plain[name]["image"])
        np.testing.assert_array_equal(element["objects/bbox"], plain[name]["objects/bbox"])
    with pytest.raises(OptionError, match=r"returned TensorSpec\(shape=\(None, None, 3\), "
                                          r"dtype=tf.uint8, name=None\). Return the dict"):
        tfrecorder.load(written("detection", "tf_models", False), "train",
                        augment=lambda features: features["image"])


def invert(features: dict) -> dict:
    return {**features, "image": 255 - features["image"]}


def test_options_that_do_not_fit_the_task_are_refused(written):
    detection = written("detection", "tfrecorder", False)
    with pytest.raises(OptionError, match="max_boxes pads the objects of a detection"):
        tfrecorder.load(written("segmentation", "tfrecorder"), "train", max_boxes=3)
    with pytest.raises(OptionError, match="max_boxes must be a positive int or None, not 0"):
        tfrecorder.load(detection, "train", max_boxes=0)
    with pytest.raises(OptionError, match="objects/label gives each box its class id"):
        tfrecorder.load(detection, "train", multi_hot=True)


# --- verify and inspect ------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_verify_passes_on_detection_and_segmentation_datasets(written, layout, capsys):
    report = tfrecorder.verify(written("segmentation", layout))
    assert report.ok and report.num_images_decoded == report.num_records_parsed == 8
    assert cli.main(["verify", written("detection", layout), "--no-progress"]) == 0
    assert capsys.readouterr().out == ("OK: 8 records in 1 shard (8 records parsed, 8 "
                                       "images decoded)\n")


def tampered(folder: str, tmp_path, edit) -> str:
    """A copy of the dataset in `folder` whose records `edit` changed (a list of
    feature dicts), with its manifest's sizes and checksums made to match."""
    copy = str(tmp_path / "tampered")
    shutil.copytree(folder, copy)
    examples = examples_of(copy, "train")
    edit(examples)
    rewrite_split(copy, "train", examples)
    return copy


def problems(folder: str) -> list:
    with pytest.raises(VerificationError) as caught:
        tfrecorder.verify(folder)
    return caught.value.report.problems


def records_holding(folder: str, key: str, *counts) -> list[int]:
    """The first record of the train split with each of `counts` objects (by the length
    of its `key` list; "+" any but none), each a different record: tampering tests edit
    records by what they hold, not by their place in the shuffled order. Exact counts
    choose first, so that a "+" cannot take the one record an exact count needs."""
    lengths = [len(example[key]) for example in examples_of(folder, "train")]
    found: dict[int, int] = {}
    for place in sorted(range(len(counts)), key=lambda place: counts[place] == "+"):
        wanted = counts[place]
        found[place] = next(i for i, n in enumerate(lengths) if i not in found.values()
                            and i > 0 and (n > 0 if wanted == "+" else n == wanted))
    return [found[place] for place in range(len(counts))]


def test_verify_names_bad_boxes_and_objects_in_tfrecorder_records(written, tmp_path):
    original = written("detection", "tfrecorder")
    a, b, c, d = records_holding(original, "objects/label", "+", "+", 3, "+")

    def edit(examples):
        boxes = examples[a]["objects/bbox"]
        boxes[0], boxes[2] = boxes[2], boxes[0]  # ymin > ymax
        examples[b]["objects/bbox"][3] = 1.5  # xmax outside the image
        examples[c]["objects/label"].append(0)  # a class without a box
        examples[d]["objects/label"][:1] = [7]
        examples[d]["objects/bbox"][0] = -0.125  # ymin outside the image

    folder = tampered(original, tmp_path, edit)
    found = problems(folder)
    assert [(p.file, p.record, p.check) for p in found] == sorted(
        [(SHARD, a, "boxes"), (SHARD, b, "boxes"), (SHARD, c, "objects"), (SHARD, d, "ids"),
         (SHARD, d, "boxes")], key=lambda problem: problem[1])
    found = {p.record: p for p in found if (p.record, p.check) != (d, "boxes")}
    box = ", ".join(f"{v:.6g}" for v in np.float32(examples_of(folder, "train")[a][
        "objects/bbox"][:4]).tolist())
    assert str(found[a]).endswith(": 1 box of objects/bbox is not (ymin, xmin, ymax, xmax) "
                                  "inside [0, 1] with ymin < ymax and xmin < xmax: "
                                  f"[{box}]")
    assert str(found[c]).endswith(": 3 boxes, but 4 objects/label: each object has one box "
                                  "and one of each of its values")
    assert str(found[d]).endswith(": objects/label id 7 is outside the 3 classes of the "
                                  "manifest's labels (ids 0 to 2)")


def test_verify_names_bad_boxes_classes_and_masks_in_tf_models_records(written, tmp_path):
    original = written("detection", "tf_models")
    a, b, c, d = records_holding(original, "image/object/class/label", "+", "+", "+", 0)

    def edit(examples):
        examples[a]["image/object/bbox/xmax"][0] = -0.25
        examples[b]["image/object/class/label"][0] = 0  # the background
        examples[c]["image/object/mask"][0] = examples[0]["image/encoded"][0]  # RGB
        examples[d]["image/object/bbox/ymin"].append(0.5)  # coordinates that differ

    folder = tampered(original, tmp_path, edit)
    found = problems(folder)
    assert [(p.file, p.record, p.check) for p in found] == sorted(
        [(SHARD, a, "boxes"), (SHARD, b, "ids"), (SHARD, c, "mask"), (SHARD, d, "parse")],
        key=lambda problem: problem[1])
    found = {p.record: p for p in found}
    assert str(found[a]).endswith(", -0.25]")
    assert str(found[b]).endswith(": objects/label id -1 (as load() reads image/object/"
                                  "class/label) is outside the 3 classes of the manifest's "
                                  "labels (ids 0 to 2)")
    assert f": objects/mask 0 is {HEIGHT}x{WIDTH}x3 with values up to " in str(found[c])
    assert str(found[d]).endswith("; its lists hold 0 image/object/bbox/xmax, 0 image/"
                                  "object/bbox/xmin, 0 image/object/bbox/ymax, 1 image/"
                                  "object/bbox/ymin, 0 image/object/class/label, 0 image/"
                                  "object/class/text, 0 image/object/mask")
    # Its label map is checked too; records carry no split, and need none.
    os.remove(os.path.join(folder, "label_map.pbtxt"))
    assert [(p.file, p.check) for p in problems(folder)][0] == ("label_map.pbtxt",
                                                                "missing")


def png(pixels) -> bytes:
    data = io.BytesIO()
    Image.fromarray(np.asarray(pixels, np.uint8)).save(data, "PNG")
    return data.getvalue()


def test_verify_names_masks_of_another_size_or_values_and_those_that_are_no_image(
        written, tmp_path):
    original = written("detection", "tfrecorder")
    a, b, c = records_holding(original, "objects/label", "+", "+", "+")
    two = np.zeros((HEIGHT, WIDTH))
    two[1, 1] = 2

    def edit(examples):
        examples[a]["objects/mask"][0] = png(two)
        examples[b]["objects/mask"][-1] = png(np.zeros((HEIGHT, WIDTH - 1)))
        examples[c]["objects/mask"][0] = b"not a PNG"

    found = problems(tampered(original, tmp_path / "detection", edit))
    assert [(p.record, p.check) for p in found] == sorted(
        [(a, "mask"), (b, "mask"), (c, "mask")])
    rule = ": a mask is one channel of the image's height x width, of 0s and 1s for an object"
    last = len(examples_of(original, "train")[b]["objects/mask"]) - 1
    assert {p.record: str(p).split(": ", 1)[1] for p in found} == {
        a: f"objects/mask 0 is {HEIGHT}x{WIDTH}x1 with values up to 2{rule}",
        b: f"objects/mask {last} is {HEIGHT}x{WIDTH - 1}x1{rule}",
        c: f"objects/mask 0 is not an image{rule}"}

    def recoloured(examples):
        examples[1]["segmentation_mask"] = [png(np.zeros((HEIGHT, WIDTH, 3)))]

    (problem,) = problems(tampered(written("segmentation", "tfrecorder"),
                                   tmp_path / "segmentation", recoloured))
    assert str(problem).endswith(f": segmentation_mask is {HEIGHT}x{WIDTH}x3: a mask is one "
                                 "channel of the image's height x width")


def test_verify_checks_detection_records_and_masks_where_tensorflow_cannot_be_imported(
        written, tmp_path):
    """TensorFlow is an extra: verify reads boxes, classes and masks without it."""
    from test_verify import WITHOUT_TENSORFLOW

    original = written("detection", "tfrecorder")
    (a,) = records_holding(original, "objects/label", "+")

    def edit(examples):
        examples[a]["objects/mask"][0] = png(np.zeros((HEIGHT + 1, WIDTH)))

    damaged = tampered(original, tmp_path, edit)
    printed = run_without_tensorflow(WITHOUT_TENSORFLOW, original, damaged, installed=False)
    assert printed.splitlines() == ["True 8 8 []", f"False 8 8 [({a}, 'mask')]"]


def test_a_changed_label_map_is_named(written, tmp_path):
    folder = str(tmp_path / "copy")
    shutil.copytree(written("detection", "tf_models", False), folder)
    label_map = os.path.join(folder, "label_map.pbtxt")
    with open(label_map) as f:
        text = f.read()
    with open(label_map, "w") as f:
        f.write(text.replace("id: 1", "id: 0"))
    assert [(p.file, p.check) for p in problems(folder)] == [("label_map.pbtxt",
                                                               "label_map")]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inspect_writes_images_and_class_names_of_both_layouts(written, drawn, layout,
                                                               tmp_path):
    import csv

    out = tfrecorder.inspect(written("detection", layout), num_records=8,
                             output_dir=tmp_path / "look")
    with open(os.path.join(out, "records.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    key = "objects/label" if layout == "tfrecorder" else "image/object/class/label"
    name = "image_name" if layout == "tfrecorder" else "image/filename"
    for row in rows:
        assert row[f"{key}_name"] == str(drawn[row[name]]["labels"]).replace("'", '"')
        assert os.path.exists(os.path.join(out, row["image_file"]))

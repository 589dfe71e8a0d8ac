"""Crops of detection and segmentation records (`crops.objects_in_window` and the window
of `decoding.decoded_record`), in both layouts: `objects_in_window` on hand-made
windows, and `load()`'s random-resized and central crops of the scenes of
tests/detection_data.py (bright rectangles whose boxes and masks are known) and of
tests/test_keypoints.py (keypoints marked on their pixels), against the window worked
out here in NumPy and TensorFlow's own resize."""

import contextlib
import os

import detection_data
import numpy as np
import pytest
import tensorflow as tf
import test_keypoints
from detection_data import CLASSES, HEIGHT, WIDTH, detection_frame, write_segmentation
from helpers import image_bytes
from PIL import Image

# test_keypoints' fixtures: its marked scenes (`scenes`, the name its `written` asks for),
# written in both layouts.
from test_keypoints import scenes  # noqa: F401
from test_keypoints import written as keypoint_folders  # noqa: F401

import tfrecorder
from tfrecorder.format.keypoints import COCO_KEYPOINT_NAMES, flip_order
from tfrecorder.read.augmentation import seeded
from tfrecorder.read.crops import RandomResizedCrop, objects_in_window, random_window
from tfrecorder.read.decoding import decoded_record

LAYOUTS = ("tfrecorder", "tf_models")
# The elements' names (`load()`'s documented ones), and Pascal VOC's per-object flags.
BBOX, OBJECT_LABEL, AREA, IS_CROWD, MASK = (
    "objects/bbox", "objects/label", "objects/area", "objects/is_crowd", "objects/mask")
KEYPOINTS, KEYPOINT_VISIBILITY, NUM_KEYPOINTS = (
    "objects/keypoints", "objects/keypoint_visibility", "objects/num_keypoints")
DIFFICULT, TRUNCATED, VIEW = "objects/difficult", "objects/truncated", "objects/view"
SEGMENTATION_MASK = "segmentation_mask"
SIZE = (24, 32)  # image_size: windows are shrunk or enlarged to it
SEED = 3
CENTER = (3, 4, 42, 56)  # the central 0.875 of 48x64 in 24x32's shape: by hand


# --- objects_in_window, on hand-made windows -----------------------------------------------

def test_objects_in_window_clips_boxes_and_leaves_out_objects_mostly_outside():
    # A 100x200 image, seen through rows 20-70 and columns 40-140.
    pixels = np.array([[30, 60, 50, 100],  # inside
                       [60, 60, 80, 100],  # half inside
                       [0, 0, 10, 20],  # outside
                       [40, 80, 40, 80],  # a point inside
                       [90, 180, 90, 180],  # a point outside
                       [10, 20, 90, 180]], np.float32)  # around the window: 39% inside
    keypoints = np.float32([[[0.3, 0.3], [0.1, 0.1], [0, 0]],
                            [[0.65, 0.4], [0.75, 0.4], [0, 0]]] + [[[0.5, 0.5]] * 3] * 4)
    visibility = np.int64([[2, 2, 0], [1, 2, 0]] + [[2, 2, 2]] * 4)
    features = {BBOX: tf.constant(pixels / [100, 200, 100, 200], tf.float32),
                OBJECT_LABEL: tf.range(6, dtype=tf.int64),
                AREA: tf.constant([400, 800, 200, 0, 0, 12800], tf.float32),
                IS_CROWD: tf.constant([0, 1, 0, 1, 0, 1], tf.int64),
                DIFFICULT: tf.constant([1, 0, 0, 0, 0, 1], tf.int64),
                TRUNCATED: tf.constant([0, 1, 1, 0, 0, 0], tf.int64),
                VIEW: tf.constant([b"a", b"b", b"c", b"d", b"e", b"f"]),
                KEYPOINTS: tf.constant(keypoints), KEYPOINT_VISIBILITY: tf.constant(visibility),
                NUM_KEYPOINTS: tf.constant([2, 2, 3, 3, 3, 3], tf.int64)}
    window, stored = tf.constant([20, 40, 50, 100]), tf.constant([100, 200])
    for min_visible, kept in [(0.3, [0, 1, 3, 5]), (0.6, [0, 3])]:
        found, keep = objects_in_window(dict(features), window, min_visible, stored)
        found = {name: value.numpy() for name, value in found.items()}
        assert keep.numpy().nonzero()[0].tolist() == kept
        for name in (OBJECT_LABEL, IS_CROWD, DIFFICULT, TRUNCATED, VIEW):
            assert found[name].tolist() == features[name].numpy()[kept].tolist(), name
        boxes = {0: [0.2, 0.2, 0.6, 0.6], 1: [0.8, 0.2, 1, 0.6], 3: [0.4] * 4, 5: [0, 0, 1, 1]}
        np.testing.assert_allclose(found[BBOX], [boxes[i] for i in kept], atol=1e-6)
        areas = {0: 400, 1: 400, 3: 0, 5: 5000}  # in proportion to the box's visible part
        np.testing.assert_allclose(found[AREA], [areas[i] for i in kept], rtol=1e-6)
        # Keypoints in the window's fractions; outside it, not labelled at (0, 0).
        points = {0: ([[0.2, 0.2], [0, 0], [0, 0]], [2, 0, 0]),
                  1: ([[0.9, 0.4], [0, 0], [0, 0]], [1, 0, 0]),
                  3: ([[0.6, 0.6]] * 3, [2, 2, 2]), 5: ([[0.6, 0.6]] * 3, [2, 2, 2])}
        np.testing.assert_allclose(found[KEYPOINTS], [points[i][0] for i in kept], atol=1e-6)
        assert found[KEYPOINT_VISIBILITY].tolist() == [points[i][1] for i in kept]
        assert found[NUM_KEYPOINTS].tolist() == [sum(map(bool, points[i][1])) for i in kept]


@pytest.mark.parametrize("window, size", [((12, 12, 175, 175), (20, 20)),  # DCT ratio 8
                                          ((13, 5, 150, 150), (30, 30)),  # 4
                                          ((3, 3, 190, 190), (60, 60))])  # 2
def test_a_jpegs_boxes_stay_on_its_pixels_at_a_dct_ratio(window, size):
    """A JPEG decoded at a DCT ratio r shows whole r x r blocks: its window starts up to
    r - 1 pixels before the one drawn, and the boxes are of what it shows."""
    pixels = np.full((200, 200, 3), 30, np.uint8)
    pixels[100:150, 60:140] = 220
    features = {"image": tf.constant(image_bytes(Image.fromarray(pixels), "JPEG", quality=100)),
                "image_format": tf.constant("jpeg"), BBOX: tf.constant([[0.5, 0.3, 0.75, 0.7]]),
                **{f"image_{k}": tf.constant(v, tf.int64) for k, v in [
                    ("height", 200), ("width", 200), ("channels", 3)]}}
    found = decoded_record(features, size, 3, None, tf.constant(window), 0.3)
    bright = (found["image"].numpy()[:, size[1] // 2, 0] - 30) / 190  # a column's profile
    (ymin, _, ymax, _), = found[BBOX].numpy() * size[0]
    rows = np.arange(size[0]) + 0.5
    assert abs(bright.sum() - (ymax - ymin)) < 0.25
    assert abs((rows * bright).sum() / bright.sum() - (ymin + ymax) / 2) < 0.25



def test_objects_exactly_min_visible_inside_are_kept_whatever_the_rounding():
    # Every box of whole pixels in a 40x56 image, seen through windows of whole pixels:
    # boxes with exactly `min_visible` of their pixels inside are kept, and those a pixel
    # row short are not, though both are decided on float32 fractions of the image.
    y0, x0, y1, x1 = np.meshgrid(*[np.arange(0, 41, 3), np.arange(0, 57, 4)] * 2, indexing="ij")
    pixels = np.stack([a.ravel() for a in (y0, x0, y1, x1)], -1)
    pixels = pixels[(pixels[:, 2] > pixels[:, 0]) & (pixels[:, 3] > pixels[:, 1])]
    boxes = tf.constant(pixels / [40, 56, 40, 56], tf.float32)
    stored, ties = tf.constant([40, 56]), 0
    for window in [(5, 3, 20, 28), (7, 11, 21, 33), (1, 9, 33, 19)]:
        y, x, h, w = window
        inside = (np.clip(pixels[:, 2], y, y + h) - np.clip(pixels[:, 0], y, y + h)) * (
            np.clip(pixels[:, 3], x, x + w) - np.clip(pixels[:, 1], x, x + w))
        whole = (pixels[:, 2] - pixels[:, 0]) * (pixels[:, 3] - pixels[:, 1])
        for min_visible in (0.1, 0.25, 0.3, 0.5):
            _, keep = objects_in_window({BBOX: boxes}, tf.constant(window), min_visible, stored)
            # In integers: no rounding in the expectation.
            want = (inside > 0) & (inside * 1000 >= round(min_visible * 1000) * whole)
            np.testing.assert_array_equal(keep.numpy(), want, err_msg=f"{window} {min_visible}")
            ties += int((inside * 1000 == round(min_visible * 1000) * whole).sum())
    assert ties > 100  # the case in question is there

# --- load(): the scenes, written once per module --------------------------------------------

@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> dict[str, dict]:
    """The scenes, by image name."""
    return {os.path.basename(s["image_uri"]): s
            for s in detection_data.scenes(str(tmp_path_factory.mktemp("scenes")))}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, drawn):
    """loaded(task, layout, **load options) -> the train split's elements, as NumPy, by
    image name (in the records' order), each dataset written and read once: detection
    records with masks, areas (their boxes', in pixels) and is_crowd."""
    folders, found = {}, {}

    # The scenes by their names alone, converted from their folder: the records' order
    # (a hash of each image's path as written) is then the same whatever the temporary
    # folder is called, and so is the seed (and so the window) each record draws.
    scenes_folder = os.path.dirname(next(iter(drawn.values()))["image_uri"])
    named = [{**s, "image_uri": os.path.basename(s["image_uri"]),
              "mask_uri": os.path.basename(s["mask_uri"])} for s in drawn.values()]

    def load(task: str, layout: str, **options) -> dict[str, dict]:
        if (task, layout) not in folders:
            folder = folders[task, layout] = str(tmp_path_factory.mktemp(task))
            with contextlib.chdir(scenes_folder):
                if task == "segmentation":
                    write_segmentation(folder, named, layout=layout, num_workers=1)
                else:
                    frame = detection_frame(named, masks=True)
                    frame[AREA] = [list(areas(in_pixels(s["boxes"]))) for s in named]
                    frame[IS_CROWD] = [[i % 2 for i in range(len(s["boxes"]))]
                                       for s in named]
                    tfrecorder.convert(frame, folder, task="detection", layout=layout,
                                       overwrite=True, progress=False, num_workers=1)
        key = (task, layout, tuple(sorted(options.items())))
        if key not in found:
            ds = tfrecorder.load(folders[task, layout], "train", shuffle=False, **options)
            found[key] = {e["image_name"].decode(): e for e in ds.as_numpy_iterator()}
        return found[key]

    load.folders = folders
    return load


def in_pixels(boxes) -> np.ndarray:  # a scene's relative boxes, [n, 4]
    return np.reshape(boxes, (-1, 4)) * [HEIGHT, WIDTH, HEIGHT, WIDTH]


def areas(b: np.ndarray) -> np.ndarray:
    return np.maximum(b[:, 2] - b[:, 0], 0) * np.maximum(b[:, 3] - b[:, 1], 0)


def random_windows(names, crop: RandomResizedCrop, seed: int) -> dict[str, list]:
    """Each record's window (y, x, height, width) as `load(augment=crop, seed=seed)`
    draws it: records take their seeds in order, and split them into the window's and
    the flip's."""
    stored, found = {"image_height": HEIGHT, "image_width": WIDTH}, {}
    for name, (_, element_seed) in zip(names, seeded(tf.data.Dataset.range(len(names)), seed)):
        window_seed = tf.random.experimental.stateless_split(element_seed, 2)[0]
        found[name] = random_window(stored, crop, window_seed).numpy().tolist()
    return found


def resized(pixels: np.ndarray, window, method: str = "bilinear") -> np.ndarray:
    """The window of `pixels` [height, width, channels] at SIZE, by TensorFlow's resize:
    bilinear, rounded to uint8, as images are; nearest for masks."""
    y, x, height, width = window
    out = tf.image.resize(pixels[y:y + height, x:x + width], SIZE, method=method)
    return np.asarray(tf.cast(out + 0.5, tf.uint8) if method == "bilinear" else out)


def expected_objects(pixels: np.ndarray, window, min_visible: float = 0.3):
    """Which of the objects whose boxes are `pixels` [n, 4] the window keeps, and their
    boxes in its fractions and visible fractions: in NumPy, apart from the code under
    test."""
    y, x, height, width = window
    moved = (pixels - [y, x, y, x]) / [height, width, height, width]
    clipped = np.clip(moved, 0, 1)
    visible = areas(clipped) / areas(moved)
    keep = (visible >= min_visible - 1e-9) & (visible > 0)  # ties kept, as by the loader
    return keep, clipped[keep], visible[keep]


def mirrored(boxes: np.ndarray) -> np.ndarray:
    return np.stack([boxes[:, 0], 1 - boxes[:, 3], boxes[:, 2], 1 - boxes[:, 1]], -1)


def flipped(image: np.ndarray, scene: dict, window) -> bool:
    """Whether the image is the scene's window flipped; it must be that window."""
    reference = resized(scene["pixels"], window)
    flip = not np.array_equal(image, reference)
    np.testing.assert_array_equal(image, reference[:, ::-1] if flip else reference)
    return flip


def check_detection(element: dict, scene: dict, window) -> tuple[bool, int, int]:
    """The element is the scene seen through `window`, flipped or not (its pixels say
    which). Returns whether it was flipped, and how many objects were left out and
    clipped."""
    image, flip = element["image"], flipped(element["image"], scene, window)
    keep, boxes, visible = expected_objects(in_pixels(scene["boxes"]), window)
    n = int(keep.sum())
    for name in (BBOX, OBJECT_LABEL, AREA, IS_CROWD, MASK):  # one row an object kept
        assert len(element[name]) == n, name
    np.testing.assert_allclose(element[BBOX], mirrored(boxes) if flip else boxes, atol=1e-5)
    assert element[OBJECT_LABEL].tolist() == [
        CLASSES.index(c) for c, k in zip(scene["labels"], keep) if k]
    assert element[IS_CROWD].tolist() == [i % 2 for i, k in enumerate(keep) if k]
    scale = SIZE[0] * SIZE[1] / (window[2] * window[3])  # to the image as loaded
    np.testing.assert_allclose(element[AREA], areas(in_pixels(scene["boxes"]))[keep] * visible
                               * scale, rtol=1e-5)
    rows = (np.arange(SIZE[0]) + 0.5) / SIZE[0]
    columns = (np.arange(SIZE[1]) + 0.5) / SIZE[1]
    background = int(scene["pixels"].min())
    for mask, box in zip(element[MASK], element[BBOX]):
        assert mask.any() and (image[mask > 0] >= background + 10).all()  # bright there
        if flip:  # as the scene lies
            mask, box = mask[:, ::-1], mirrored(box[None])[0]
        # A mask is the pixels whose centres its box holds (but for centres on its edge).
        y0, x0, y1, x1 = box
        inside = ((rows >= y0) & (rows < y1))[:, None] & ((columns >= x0) & (columns < x1))
        near = (np.abs(rows[:, None] - [y0, y1]).min(-1) < 1e-4)[:, None] | \
            (np.abs(columns[:, None] - [x0, x1]).min(-1) < 1e-4)
        np.testing.assert_array_equal(mask[~near], inside[~near])
    return flip, len(keep) - n, int((visible < 1).sum())


def check_segmentation(element: dict, scene: dict, window) -> bool:
    """The element is the scene seen through `window`, its class ids where the image is
    bright. Returns whether it was flipped."""
    image, flip = element["image"], flipped(element["image"], scene, window)
    mask = resized(scene["mask"][..., None], window, "nearest")
    np.testing.assert_array_equal(element[SEGMENTATION_MASK], mask[:, ::-1] if flip else mask)
    assert (image[element[SEGMENTATION_MASK][..., 0] > 0] >= scene["pixels"].min() + 10).all()
    return flip


@pytest.mark.parametrize("layout", LAYOUTS)
def test_random_resized_crops_cut_boxes_masks_and_areas_with_the_image(loaded, drawn, layout):
    elements = loaded("detection", layout, augment="random_resized_crop", image_size=SIZE,
                      seed=SEED)
    windows = random_windows(list(elements), RandomResizedCrop(), SEED)
    seen = [check_detection(e, drawn[name], windows[name]) for name, e in elements.items()]
    flips, dropped, clipped = zip(*seen)
    # The seed's crops flip and not, leave objects out and clip others.
    assert set(flips) == {False, True} and sum(dropped) > 0 and sum(clipped) > 0
    segmented = loaded("segmentation", layout, augment="random_resized_crop",
                       image_size=SIZE, seed=SEED)
    windows = random_windows(list(segmented), RandomResizedCrop(), SEED)
    assert {check_segmentation(e, drawn[name], windows[name])
            for name, e in segmented.items()} == {False, True}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_center_crop_cuts_boxes_and_masks_at_the_central_window(loaded, drawn, layout):
    seen = [check_detection(e, drawn[name], CENTER) for name, e in loaded(
        "detection", layout, crop="center", image_size=SIZE).items()]
    assert {flip for flip, _, _ in seen} == {False} and sum(c for _, _, c in seen) > 0
    for name, element in loaded("segmentation", layout, crop="center",
                                image_size=SIZE).items():
        assert not check_segmentation(element, drawn[name], CENTER)


def test_cropped_objects_pad_batch_and_pair_as_unbatched(loaded, drawn):
    # A seed whose crops leave some images fewer objects than max_boxes and some more.
    for seed in range(SEED, SEED + 8):
        options = {"augment": "random_resized_crop", "image_size": SIZE, "seed": seed}
        single = loaded("detection", "tf_models", **options)
        counts = [len(e[BBOX]) for e in single.values()]
        if min(counts) < 2 < max(counts):  # padded, and cut
            break
    assert min(counts) < 2 < max(counts)
    padded = loaded("detection", "tf_models", max_boxes=2, **options)
    for name, element in padded.items():
        n = min(len(single[name][BBOX]), 2)
        assert element["objects/num"] == n and element[BBOX].shape == (2, 4)
        assert element[MASK].shape == (2, *SIZE)
        np.testing.assert_array_equal(element[BBOX][:n], single[name][BBOX][:2])
        np.testing.assert_array_equal(element[MASK][:n], single[name][MASK][:2])
        assert all((element[name][n:] == -1).all() for name in (BBOX, OBJECT_LABEL, AREA))
        assert not element[MASK][n:].any()
    path = loaded.folders["detection", "tf_models"]
    batches = list(tfrecorder.load(path, "train", shuffle=False, batch_size=3, **options))
    assert [n for b in batches for n in b[BBOX].row_lengths().numpy()] == counts
    assert [n for b in batches for n in b[MASK].row_lengths().numpy()] == counts
    assert batches[0][MASK].shape.as_list() == [3, None, *SIZE]
    for (image, target), element in zip(tfrecorder.load(
            path, "train", shuffle=False, as_supervised=True, **options).as_numpy_iterator(),
            single.values()):
        assert set(target) == {"boxes", "classes"}
        np.testing.assert_array_equal(image, element["image"])
        np.testing.assert_array_equal(target["boxes"], element[BBOX])
        np.testing.assert_array_equal(target["classes"], element[OBJECT_LABEL])


# --- keypoints: cropped, and flipped, with their marked pixels ------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_keypoints_are_cropped_and_flipped_with_their_pixels(
        keypoint_folders, scenes, layout):  # noqa: F811 (the imported fixtures)
    H, W, K = test_keypoints.HEIGHT, test_keypoints.WIDTH, test_keypoints.K
    # A quarter of the area in the image's shape, at half its size: pixels as stored;
    # persons kept for a tenth of their box, as their keypoints lie anywhere.
    h, w = H // 2, W // 2
    crop = RandomResizedCrop(area=(0.25, 0.25), aspect_ratio=(W / H, W / H), min_visible=0.1)
    by_name = {os.path.basename(s["image_uri"]): s for s in scenes}
    order = flip_order(COCO_KEYPOINT_NAMES, K)
    flips, cut = set(), 0
    # Seeds until a flipped and an unflipped window have shown keypoints: which records
    # draw a flip depends on their order, a hash of their (temporary) paths.
    for seed in range(1, 9):
        if seed > 2 and flips == {False, True}:
            break
        for element in tfrecorder.load(keypoint_folders[layout], "train", shuffle=False,
                                       augment=crop, image_size=(h, w),
                                       seed=seed).as_numpy_iterator():
            scene, image = by_name[element["image_name"].decode()], element["image"]
            source = np.asarray(Image.open(scene["image_uri"]))
            # Where the window was, and whether it was flipped: the one place its pixels
            # are (the scenes number their rows and columns).
            [(y0, x0, flip)] = [(y, x, flip) for y in range(H - h + 1) for x in range(W - w + 1)
                                for flip in (False, True) if np.array_equal(
                                    source[y:y + h, x:x + w][:, ::-1 if flip else 1], image)]
            annotations = scene["annotations"]
            keep, _, _ = expected_objects(np.array([[y, x, y + bh, x + bw] for x, y, bw, bh in (
                a["bbox"] for a in annotations)]).reshape(-1, 4), (y0, x0, h, w), 0.1)
            # Each kept person's labelled keypoints inside the window, in its fractions.
            xyv = np.reshape([a.get("keypoints", [0] * 3 * K) for a, k in zip(annotations, keep)
                              if k], (-1, K, 3))
            points = (xyv[..., 1::-1] - [y0, x0]) / [h, w]
            inside = (xyv[..., 2] > 0) & ((points >= 0) & (points <= 1)).all(-1)
            visibility = np.where(inside, xyv[..., 2], 0)
            points = np.where(inside[..., None], points, 0)
            cut += int((visibility != xyv[..., 2]).sum())
            if visibility.any():
                flips.add(flip)
            if flip:  # left and right trade places
                visibility, points = visibility[:, order], points[:, order]
                points[..., 1] = np.where(visibility > 0, 1 - points[..., 1], 0)
            assert element[KEYPOINT_VISIBILITY].tolist() == visibility.tolist()
            np.testing.assert_allclose(element[KEYPOINTS], points, atol=1e-6)
            assert element[NUM_KEYPOINTS].tolist() == (visibility > 0).sum(-1).tolist()
            for person, seen in zip(element[KEYPOINTS], element[KEYPOINT_VISIBILITY]):
                for k, ((y, x), v) in enumerate(zip(person, seen)):
                    # The pixel under a keypoint is marked as the stored keypoint it is
                    # now: its mirror image (left for right) where the image flipped.
                    mark = int(image[int(y * h), int(x * w), 0]) - test_keypoints.BACKGROUND
                    assert not v or mark == 5 * ((order[k] if flip else k) + 1), (k, flip)
    assert flips == {False, True} and cut

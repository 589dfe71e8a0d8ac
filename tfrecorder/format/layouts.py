"""How a record's features are named: tfrecorder's own layout, or the `image/...` keys that
TensorFlow's models read. One `Layout` object per layout owns its three forms, as TFDS's
feature connectors do:

- the write form, `record`: a record's values by their canonical names (what `records`
  computes) -> the features stored under the layout's keys;
- the manifest form, `features`: the `Feature` of every key, with its role;
- the read form, `canonical`: the parsed features (TensorFlow tensors) -> the canonical
  names again, so `load`, `show` and `info` read either layout the same way.

Canonical names: `IMAGE_FEATURES`' (`image`, `image_format`, ...), `label`, `split`, the
objects of a detection record (`objects/bbox` as [ymin, xmin, ymax, xmax] relative,
`objects/label` 0-based ids, `objects/area`, `objects/is_crowd`, `objects/mask`: one PNG of
0s and 1s per object, COCO's `objects/keypoints` [n, K, 2] as [y, x] relative with
`objects/keypoint_visibility` and `objects/num_keypoints`), `segmentation_mask` (a PNG of
class ids), and input columns by their own names. The engines and readers never branch
on a layout's name: they ask the layout. Light on purpose (no TensorFlow at import):
workers and readers import it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence

from tfrecorder._tensorflow import tensorflow
from tfrecorder.errors import Option, OptionError
from tfrecorder.format.manifest import DEFAULT_LAYOUT, LABEL, SPLIT, Feature

OBJECTS = "objects/"  # the prefix of a detection record's per-object features
BBOX, OBJECT_LABEL = "objects/bbox", "objects/label"
AREA, IS_CROWD, MASK = "objects/area", "objects/is_crowd", "objects/mask"
# Pascal VOC's per-object flags and pose, as `create_pascal_tf_record.py` stores them.
DIFFICULT, TRUNCATED, VIEW = "objects/difficult", "objects/truncated", "objects/view"
# COCO keypoints: per object K [y, x] pairs, fractions of the image's size (TFDS's order of
# boxes; the Object Detection API's of `groundtruth_keypoints`), stored flat as 2K floats;
# their visibility (0 not labelled, 1 hidden, 2 visible) and COCO's `num_keypoints`.
KEYPOINTS, KEYPOINT_VISIBILITY, NUM_KEYPOINTS = (
    "objects/keypoints", "objects/keypoint_visibility", "objects/num_keypoints")
SEGMENTATION_MASK = "segmentation_mask"
# The source's own id of the image (a COCO image id, a VOC file name), where it has one:
# the tf_models layout's `image/source_id`, which COCO evaluation matches results by.
IMAGE_ID = "image_id"
# The per-object features besides the classes, in the order the manifest lists them.
OBJECT_FEATURES = {
    BBOX: Feature("float32", (None, 4), role="objects"),
    AREA: Feature("float32", (None,), role="objects"),
    IS_CROWD: Feature("int64", (None,), role="objects"),
    MASK: Feature("string", (None,), role="objects"),
    DIFFICULT: Feature("int64", (None,), role="objects"),
    TRUNCATED: Feature("int64", (None,), role="objects"),
    VIEW: Feature("string", (None,), role="objects"),
    # K is the dataset's (`object_feature`).
    KEYPOINTS: Feature("float32", (None, None, 2), role="objects"),
    KEYPOINT_VISIBILITY: Feature("int64", (None, None), role="objects"),
    NUM_KEYPOINTS: Feature("int64", (None,), role="objects"),
}
SEGMENTATION_FEATURE = Feature("string", role="mask")


def object_feature(name: str, shape: Sequence, keypoint_names: Sequence[str] | None = None
                   ) -> Feature:
    """The manifest's `Feature` of a per-object feature, from its table column's `shape`:
    keypoints' K from their column of 2K values an object (visibility's of K), with their
    names."""
    feature = OBJECT_FEATURES[name]
    if name == KEYPOINTS:
        return dataclasses.replace(feature, shape=(None, shape[-1] // 2, 2),
                                   names=None if keypoint_names is None
                                   else tuple(keypoint_names))
    if name == KEYPOINT_VISIBILITY:
        return dataclasses.replace(feature, shape=(None, shape[-1]))
    return feature


def keypoint_names_of(features: Mapping[str, Feature]) -> tuple[str, ...] | None:
    """The keypoints' names the features (a manifest's, by stored key) record, if any."""
    return next((f.names for f in features.values() if f.names is not None), None)


def is_detection(values: Mapping) -> bool:
    """Whether a record's canonical values are a detection record's (it has boxes)."""
    return BBOX in values


class Layout:
    """tfrecorder's own layout: canonical names are the stored keys; a detection
    record's classes are `objects/label`, following TFDS's detection datasets.

    A new layout subclasses this, overrides the forms it stores otherwise and the
    answers below, and takes one entry in `LAYOUTS`: nothing else names it."""

    name = DEFAULT_LAYOUT  # the option's value and the manifest's `layout`
    # Whether TFDS reads the dataset through the files `tfds_metadata.tfds_files` writes,
    # which describe the stored keys as TFDS features, nested at their slashes.
    tfds_readable = True

    def __init__(self, vocabulary: tuple[str, ...] | None = None,
                 model_ids: tuple[int, ...] | None = None,
                 keypoint_names: tuple[str, ...] | None = None):
        self.vocabulary = vocabulary  # the classes' names (None: integer labels)
        # The ids TensorFlow's label maps give the classes (`vocabulary.LabelMap`); None:
        # 1, 2, ...
        self.model_ids = model_ids
        # Stored class id -> the class's index (-1: no class has that id), for the read
        # forms of ids with gaps; made once, as readers map every record's ids by it.
        self._index_of_id = _index_of_id(model_ids) if model_ids is not None else None
        self.keypoint_names = keypoint_names  # (None: unknown, or no keypoints)

    def record(self, values: dict, position: int) -> dict:
        """The features to store, from a record's canonical values (taken, not copied)
        and its row's position in the table."""
        if is_detection(values) and LABEL in values:
            values[OBJECT_LABEL] = values.pop(LABEL)
        return values

    def features(self, task: str, image: Mapping[str, Feature], label: Feature | None,
                 objects: Mapping[str, Feature], inputs: Mapping[str, Feature],
                 vocabulary: tuple[str, ...] | None) -> dict[str, Feature]:
        """Every stored feature: the image's, the label's (None: no labels), a detection
        record's `objects` (canonical names), a segmentation record's mask, the split
        and the inputs."""
        found = dict(image)
        if task == "detection":
            found[OBJECT_LABEL] = Feature("int64", (None,), role="label",
                                          vocabulary=vocabulary)
            found.update(objects)
        elif label is not None:
            found[LABEL] = label
        if task == "segmentation":
            found[SEGMENTATION_MASK] = SEGMENTATION_FEATURE
        found[SPLIT] = Feature("string", role="split")
        found.update(inputs)
        return found

    def key(self, name: str) -> str | None:
        """The stored key of a canonical feature (None: this layout does not store it)."""
        return name

    def check(self, has_images: bool, image_format: str) -> None:
        """Raises `OptionError` where this layout cannot store the records of a table
        with (or without) images, stored as `image_format`; checked before planning."""

    def canonical(self, parsed: dict) -> dict:
        """Parsed features (tensors) by canonical name: as they are, here."""
        return parsed

    def label_map(self, task: str) -> str | None:
        """The `label_map.pbtxt` a dataset of `task` holds (None: none)."""
        return None

    def label_map_ids(self, task: str) -> dict[str, int]:
        """Each class's id in that label map and in the records ({}: no label map)."""
        return {}

    def values(self, features: Mapping[str, list]) -> dict[str, list]:
        """The read form without TensorFlow: a record's features as stored (lists, as
        `example_decoding.decode_example` gives them) by canonical name, boxes flat as (ymin,
        xmin, ymax, xmax, ...), object classes 0-based."""
        return dict(features)

    def read_features(self, stored: Mapping[str, Feature]) -> dict[str, Feature]:
        """The `Feature` of each name `values` gives, from the manifest's stored features:
        what a reader without TensorFlow shapes the values by."""
        return dict(stored)

    def unmatched(self, features: Mapping[str, list]) -> str | None:
        """Why a record's features as stored (lists) do not make a record of this layout,
        where the read forms put lists together (None: they do): `verify` names such a
        record, which `canonical` refuses and `values` cuts to the shortest list."""
        return None


# The tf_models layout's keys for the canonical image features (image/channels is ours:
# TensorFlow's decoders ignore it, and it gives raw readers the image's shape).
_TF_IMAGE = {"image": "image/encoded", "image_format": "image/format",
             "image_height": "image/height", "image_width": "image/width",
             "image_channels": "image/channels", "image_name": "image/filename"}
_TF_BOX = ("image/object/bbox/ymin", "image/object/bbox/xmin",
           "image/object/bbox/ymax", "image/object/bbox/xmax")  # canonical order
_TF_OBJECTS = {AREA: "image/object/area", IS_CROWD: "image/object/is_crowd",
               MASK: "image/object/mask", DIFFICULT: "image/object/difficult",
               TRUNCATED: "image/object/truncated", VIEW: "image/object/view",
               KEYPOINT_VISIBILITY: "image/object/keypoint/visibility",
               NUM_KEYPOINTS: "image/object/keypoint/num"}
# Keypoints as the Object Detection API's `create_coco_tf_record.py` writes them: K x and
# K y an object (relative), and the keypoints' names, K an object.
_TF_KEYPOINT_X, _TF_KEYPOINT_Y = "image/object/keypoint/x", "image/object/keypoint/y"
_TF_KEYPOINT_TEXT = "image/object/keypoint/text"
_TF_CLASS, _TF_CLASS_TEXT = "image/class/label", "image/class/text"
_TF_OBJECT_CLASS, _TF_OBJECT_TEXT = "image/object/class/label", "image/object/class/text"
_TF_SEGMENTATION = "image/segmentation/class/encoded"
_TF_SEGMENTATION_FORMAT = "image/segmentation/class/format"
_TF_SOURCE_ID, _TF_SHA256 = "image/source_id", "image/key/sha256"
# Canonical name -> stored key, for the features stored under one key of their own (None:
# not stored); and the way back, for the read forms. Boxes and object classes, which
# are stored otherwise (four lists; ids from 1), are handled apart.
_TF_KEYS = {**_TF_IMAGE, **_TF_OBJECTS, LABEL: _TF_CLASS, SEGMENTATION_MASK: _TF_SEGMENTATION,
            "image_uri": None, SPLIT: None, IMAGE_ID: _TF_SOURCE_ID}
_TF_NAMES = {key: name for name, key in _TF_KEYS.items() if key is not None}
# `key`: where each canonical name is found (boxes: their first corner's list).
_TF_KEY_OF = {**_TF_KEYS, OBJECT_LABEL: _TF_OBJECT_CLASS, BBOX: _TF_BOX[0],
              KEYPOINTS: _TF_KEYPOINT_X}
# Stored for TensorFlow's models, never read back: the read forms leave them out.
_TF_UNREAD = {_TF_SOURCE_ID, _TF_SHA256, _TF_CLASS_TEXT, _TF_OBJECT_TEXT,
              _TF_SEGMENTATION_FORMAT, _TF_KEYPOINT_TEXT}


class TFModelsLayout(Layout):
    """The keys TensorFlow Model Garden's `TfExampleDecoder` (and the Object Detection
    API's) read: `image/encoded`, `image/object/bbox/xmin`, ... Object classes are
    1-based (`image/object/class/label`): 0 is the background in those models' label
    maps, which `label_map.pbtxt` gives. A classification label (`image/class/label`)
    keeps its 0-based id, as Model Garden's classification reader takes it.
    `image/source_id` is the row's position in the table, as text: Model Garden's
    detection pipeline reads it as a number. Records carry no split: the shard names
    it."""

    name = "tf_models"
    # `image/encoded` would nest as a group, boxes are four lists and object classes
    # count from 1: no TFDS feature reads them, and TensorFlow's models read the dataset.
    tfds_readable = False

    def check(self, has_images: bool, image_format: str) -> None:
        if not has_images:
            raise OptionError(Option("layout", self.name), " writes the keys TensorFlow's "
                              "image models read, but the table has no images. Leave it "
                              "out.", option="layout")
        if image_format == "raw":
            raise OptionError(Option("layout", self.name), " stores images that "
                              "TensorFlow's models decode, and base64 pixels (",
                              Option("image_format", "raw"), ") are not such images. "
                              "Pass ", Option("image_format", "auto"), " (or jpeg, png).",
                              option="image_format")

    def record(self, values: dict, position: int) -> dict:
        found = {_TF_IMAGE[name]: values.pop(name) for name in list(values)
                 if name in _TF_IMAGE}
        values.pop("image_uri", None)
        values.pop(SPLIT, None)
        source_id = values.pop(IMAGE_ID, position)
        if "image/encoded" in found:
            found[_TF_SOURCE_ID] = _text(source_id)
            found[_TF_SHA256] = hashlib.sha256(found["image/encoded"]).hexdigest()
        names = self.vocabulary
        if is_detection(values):
            boxes = values.pop(BBOX)
            for i, key in enumerate(_TF_BOX):
                found[key] = boxes[i::4]  # stored flat: ymin, xmin, ymax, xmax, ...
            ids = values.pop(LABEL, [])
            model_ids = self.model_ids
            found[_TF_OBJECT_CLASS] = ([i + 1 for i in ids] if model_ids is None
                                       else [model_ids[i] for i in ids])
            if names is not None:
                found[_TF_OBJECT_TEXT] = [names[i] for i in ids]
            for name, key in _TF_OBJECTS.items():
                if name in values:
                    found[key] = values.pop(name)
            if KEYPOINTS in values:
                pairs = values.pop(KEYPOINTS)  # y, x, y, x, ...
                found[_TF_KEYPOINT_X], found[_TF_KEYPOINT_Y] = pairs[1::2], pairs[0::2]
                if self.keypoint_names is not None:
                    found[_TF_KEYPOINT_TEXT] = list(self.keypoint_names) * (len(boxes) // 4)
        elif LABEL in values:
            label = values.pop(LABEL)
            found[_TF_CLASS] = label
            if names is not None:
                found[_TF_CLASS_TEXT] = ([names[i] for i in label] if isinstance(label, list)
                                         else names[label])
        if SEGMENTATION_MASK in values:
            found[_TF_SEGMENTATION] = values.pop(SEGMENTATION_MASK)
            found[_TF_SEGMENTATION_FORMAT] = "png"
        found.update(values)  # the inputs
        return found

    def features(self, task, image, label, objects, inputs, vocabulary):
        found = {_TF_IMAGE[name]: feature for name, feature in image.items()
                 if name in _TF_IMAGE}
        inputs = {name: feature for name, feature in inputs.items() if name != IMAGE_ID}
        if image:
            found[_TF_SOURCE_ID] = Feature("string", role="image")
            found[_TF_SHA256] = Feature("string", role="image")
        texts = vocabulary is not None
        if task == "detection":
            for key in _TF_BOX:
                found[key] = Feature("float32", (None,), role="objects")
            found[_TF_OBJECT_CLASS] = Feature("int64", (None,), role="label",
                                              vocabulary=vocabulary)
            if texts:
                found[_TF_OBJECT_TEXT] = Feature("string", (None,), role="label")
            for name, feature in objects.items():
                if name in _TF_OBJECTS:
                    found[_TF_OBJECTS[name]] = feature
            if KEYPOINTS in objects:
                found.update(_tf_keypoint_features(objects[KEYPOINTS]))
        elif label is not None:
            found[_TF_CLASS] = label
            if texts:
                found[_TF_CLASS_TEXT] = Feature("string", label.shape, role="label")
        if task == "segmentation":
            found[_TF_SEGMENTATION] = SEGMENTATION_FEATURE
            found[_TF_SEGMENTATION_FORMAT] = Feature("string", role="mask")
        found.update(inputs)
        return found

    def key(self, name: str) -> str | None:
        return _TF_KEY_OF.get(name, name)

    def canonical(self, parsed: dict) -> dict:
        """Parsed features by canonical name: boxes stacked to [n, 4] as (ymin, xmin,
        ymax, xmax), object classes 0-based again."""
        tf = tensorflow()

        found = _renamed(parsed)
        if _TF_OBJECT_CLASS in parsed:
            stored = parsed[_TF_OBJECT_CLASS]
            if self.model_ids is None:
                found[OBJECT_LABEL] = stored - 1
            else:  # ids with gaps (COCO's 1..90): a table from stored id to index
                index = self._index_of_id
                found[OBJECT_LABEL] = tf.gather(tf.constant(index), tf.clip_by_value(
                    stored, 0, len(index) - 1))
        if _TF_BOX[0] in parsed:
            found[BBOX] = tf.stack([parsed[key] for key in _TF_BOX], axis=-1)
        if _TF_KEYPOINT_X in parsed:  # [n, K] each -> [n, K, 2]
            found[KEYPOINTS] = tf.stack([parsed[_TF_KEYPOINT_Y], parsed[_TF_KEYPOINT_X]],
                                        axis=-1)
        return found

    def values(self, features: Mapping[str, list]) -> dict[str, list]:
        found = _renamed(features)
        if _TF_OBJECT_CLASS in features:
            stored = features[_TF_OBJECT_CLASS]
            if self.model_ids is None:
                found[OBJECT_LABEL] = [i - 1 for i in stored]
            else:
                index = self._index_of_id
                found[OBJECT_LABEL] = [index[i] if 0 <= i < len(index) else -1
                                       for i in stored]
        if any(key in features for key in _TF_BOX):
            corners = [features.get(key, []) for key in _TF_BOX]
            count = min(map(len, corners))
            found[BBOX] = [corner[i] for i in range(count) for corner in corners]
        if _TF_KEYPOINT_X in features:
            found[KEYPOINTS] = [v for pair in zip(features.get(_TF_KEYPOINT_Y, []),
                                                  features[_TF_KEYPOINT_X]) for v in pair]
        return found

    def read_features(self, stored: Mapping[str, Feature]) -> dict[str, Feature]:
        found = _renamed(stored)
        if _TF_OBJECT_CLASS in stored:
            found[OBJECT_LABEL] = stored[_TF_OBJECT_CLASS]
        if _TF_BOX[0] in stored:
            found[BBOX] = OBJECT_FEATURES[BBOX]
        if _TF_KEYPOINT_X in stored:
            x = stored[_TF_KEYPOINT_X]
            found[KEYPOINTS] = object_feature(KEYPOINTS, (None, 2 * x.shape[-1]), x.names)
        return found

    def unmatched(self, features: Mapping[str, list]) -> str | None:
        for keys, what in ((_TF_BOX, "each object's box"),
                           ((_TF_KEYPOINT_Y, _TF_KEYPOINT_X), "its keypoints")):
            if len({len(features.get(key, ())) for key in keys}) > 1:
                return (f"{', '.join(keys[:-1])} and {keys[-1]}, read together as {what}, "
                        "hold different numbers of values")
        return None

    def label_map(self, task: str) -> str | None:
        """`label_map.pbtxt` of a detection dataset: the Object Detection API's
        StringIntLabelMap, ids from 1."""
        if task != "detection":
            return None
        return "".join(f"item {{\n  id: {i}\n  name: {_quoted(name)}\n  display_name: "
                       f"{_quoted(name)}\n}}\n"
                       for name, i in self.label_map_ids(task).items())

    def label_map_ids(self, task: str) -> dict[str, int]:
        """Ids from 1 in the classes' order, or the source's own (`model_ids`)."""
        if task != "detection":
            return {}
        names = self.vocabulary or ()
        return dict(zip(names, self.model_ids or range(1, len(names) + 1)))


def _renamed(stored: Mapping) -> dict:
    """tf_models features by canonical name, but for boxes, keypoints and object classes
    (which the read forms put together themselves) and the keys never read back."""
    return {_TF_NAMES.get(key, key): value for key, value in stored.items()
            if key not in _TF_UNREAD and key not in _TF_BOX and key != _TF_OBJECT_CLASS
            and key not in (_TF_KEYPOINT_X, _TF_KEYPOINT_Y)}


def _tf_keypoint_features(keypoints: Feature) -> dict[str, Feature]:
    """The stored features of keypoints (None, K, 2): K x and K y an object (the x's
    `Feature` keeps their names), and K names an object where they are known."""
    k = keypoints.shape[1]
    found = {_TF_KEYPOINT_X: Feature("float32", (None, k), "objects", names=keypoints.names),
             _TF_KEYPOINT_Y: Feature("float32", (None, k), "objects")}
    if keypoints.names is not None:
        found[_TF_KEYPOINT_TEXT] = Feature("string", (None, k), "objects")
    return found


def _index_of_id(model_ids: Sequence[int]) -> list[int]:
    """Stored class id -> the class's index (-1: no class has that id)."""
    index = [-1] * (max(model_ids) + 1)
    for i, model_id in enumerate(model_ids):
        index[model_id] = i
    return index


def _text(value) -> str:
    """A source id as the text `image/source_id` holds."""
    if isinstance(value, (list, tuple)):
        value = value[0]
    return value.decode() if isinstance(value, bytes) else str(value)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# The one registry of layouts, by name: the `layout` option's choices and check read it,
# and so do the readers of a manifest's `layout`. A new layout is a class and an entry.
LAYOUTS: dict[str, type[Layout]] = {layout.name: layout for layout in (Layout, TFModelsLayout)}


def label_map_of(manifest) -> str | None:
    """The `label_map.pbtxt` a dataset with this manifest (or header) holds, or None."""
    return layout_of(manifest).label_map(manifest.task)


def layout_of(manifest) -> Layout:
    """The layout of a dataset with this manifest (or header), with its classes."""
    labels = manifest.labels
    return layout_named(manifest.layout, labels.vocabulary if labels else None,
                        labels.model_ids if labels else None,
                        keypoint_names_of(manifest.features))


@functools.lru_cache(maxsize=8)
def layout_named(name: str | None, vocabulary: tuple[str, ...] | None = None,
                 model_ids: tuple[int, ...] | None = None,
                 keypoint_names: tuple[str, ...] | None = None) -> Layout:
    """The layout a manifest or an option names (None: a manifest from before layouts,
    which is tfrecorder's), for classes of these names and label-map ids, and keypoints
    of these names."""
    return LAYOUTS[name or DEFAULT_LAYOUT](vocabulary, model_ids, keypoint_names)


def record_layout(options) -> Layout:
    """The layout the encoder writes records of `options` in: the one the plan built for
    its classes (`RecordOptions.record_layout`), else (options without a plan: a sample,
    a test) the one they name, for such classes' names, label-map ids and keypoint names
    as they hold."""
    built = getattr(options, "record_layout", None)
    if built is not None:
        return built
    return layout_named(options.layout, getattr(options, "class_names", None),
                        getattr(options, "model_ids", None),
                        getattr(options, "keypoint_names", None))

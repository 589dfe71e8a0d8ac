"""The files TensorFlow Datasets reads a dataset folder by, made from the manifest, so that
`tfds.builder_from_directory(folder)` reads a tfrecorder dataset as it is.

`tfds_files(manifest)` gives them: `dataset_info.json` (the splits, with each shard's record
count and the template of our shard names), `features.json` (each feature as a TFDS
feature connector) and the class names of each `ClassLabel` (`label.labels.txt`). They are
the JSON forms of TFDS 4.9's `DatasetInfo` and `FeaturesDict` protos, as
`tfds.folder_dataset.write_metadata` writes them, written by hand: TFDS is not a dependency.
`finish` writes them beside the shards, before the manifest.

How a feature is described (tests/test_tfds.py reads each back with TFDS):

- `image` is an `Image`, decoded by `tf.image.decode_image` whatever the format, to the
  channels every stored image has, else to RGB (as `load()` does by default).
  Base64 pixels (`image_format="raw"`) are no image TFDS decodes: a string `Tensor`.
- `label` is a `ClassLabel` (names from the vocabulary); a list of labels, or a label
  some records lack (`unlabeled="keep"`), a `Sequence` of them: TFDS parses a scalar as
  required, a sequence as possibly empty.
- A detection record's `objects/...` are one `Sequence` named `objects`, as TFDS's coco:
  `bbox` a `BBoxFeature`, `label` a `ClassLabel`, masks one-channel PNG `Image`s.
- `segmentation_mask` is a one-channel PNG `Image`; text features are `Text`; numbers and
  lists `Tensor`s of their dtype and shape.

A feature named with "/" (`objects/bbox`, an input column `a/b`) is nested, as TFDS
names nested features so. No files (an empty dict) for what TFDS cannot read so: gzip
shards (TFDS reads its own tfrecord files uncompressed), the `tf_models` layout (its
`image/...` keys would nest, boxes are four lists and object classes count from 1: its
readers are TensorFlow's models, which read it through `label_map.pbtxt`), and input
columns TFDS cannot nest (`a` beside `a/b`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from tfrecorder.format.layouts import BBOX, MASK, OBJECTS, layout_of
from tfrecorder.format.manifest import (
    DECODE_FEATURES,
    LABEL,
    MANIFEST,
    TFDS_FEATURES,
    TFDS_INFO,
    TFDS_LABEL_NAMES,
    Feature,
    Manifest,
)

# The dataset's name and version in TFDS (`builder.info.full_name`: "tfrecorder/1.0.0"):
# fixed, so the files do not change when the folder is moved or renamed.
TFDS_NAME = "tfrecorder"
TFDS_VERSION = "1.0.0"
# Our shard names (`manifest.shard_filename`); TFDS fills SHARD_X_OF_Y with 5 digits.
SHARD_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}.tfrecord"

_CLASSES = "tensorflow_datasets.core.features."
_TENSOR = _CLASSES + "tensor_feature.Tensor"
_TEXT = _CLASSES + "text_feature.Text"
_IMAGE = _CLASSES + "image_feature.Image"
_CLASS_LABEL = _CLASSES + "class_label_feature.ClassLabel"
_BBOX = _CLASSES + "bounding_boxes.BBoxFeature"
_SEQUENCE = _CLASSES + "sequence_feature.Sequence"
_FEATURES_DICT = _CLASSES + "features_dict.FeaturesDict"
IMAGE = DECODE_FEATURES[0]  # the stored image's feature: "image"
_ENCODINGS = {"jpeg": (1, 3), "png": (1, 2, 3, 4)}  # channels TFDS allows each encoding


def tfds_files(manifest: Manifest) -> dict[str, bytes]:
    """The files `tfds.builder_from_directory` reads, by name, for a finished manifest;
    {} for a dataset TFDS cannot read (see the module doc)."""
    if not tfds_readable(manifest):
        return {}
    tree: dict = {}
    for key, feature in manifest.features.items():
        *groups, leaf = key.split("/")
        node = tree
        for group in groups:
            node = node.setdefault(group, {})
        node[leaf] = feature
    labels: dict[str, tuple[str, ...]] = {}
    features = _dict(tree, manifest, labels, prefix="")
    files = {TFDS_INFO: _json(_dataset_info(manifest)),
             TFDS_FEATURES: _json({"featuresDict": features["featuresDict"],
                                   "pythonClassName": _FEATURES_DICT})}
    for key, names in labels.items():
        files[TFDS_LABEL_NAMES[key]] = "".join(f"{name}\n" for name in names).encode()
    return files


def tfds_readable(manifest: Manifest) -> bool:
    """Whether TFDS reads the dataset through `tfds_files`: not gzip shards, nor a layout
    TFDS cannot read (`Layout.tfds_readable`: the tf_models one), nor features TFDS cannot
    nest ("a" beside "a/b", an empty group), nor clips (SequenceExamples, which TFDS's
    features, parsing Examples, do not read)."""
    if manifest.media is not None:
        return False
    keys = list(manifest.features)
    nestable = all(all(key.split("/")) for key in keys) and not any(
        other.startswith(key + "/") for key in keys for other in keys)
    return (manifest.compression is None and layout_of(manifest).tfds_readable
            and nestable)


def _dataset_info(manifest: Manifest) -> dict:
    found = {
        "name": TFDS_NAME,
        "version": TFDS_VERSION,
        # Not the version (the manifest's `created_by`): the files change with the data only.
        "description": f"Written by tfrecorder; its manifest, {MANIFEST}, describes it.",
        "fileFormat": "tfrecord",
        "splits": [{"name": str(name), "filepathTemplate": SHARD_TEMPLATE,
                    "numBytes": str(split.num_bytes),
                    "shardLengths": [str(shard.num_records) for shard in split.shards]}
                   for name, split in manifest.splits.items()],
    }
    if manifest.task == "classification" and IMAGE in manifest.features and (
            LABEL in manifest.features):  # as_supervised=True: (image, label)
        found["supervisedKeys"] = {"tuple": {"items": [{"featureKey": IMAGE},
                                                       {"featureKey": LABEL}]}}
    return found


def _dict(tree: Mapping, manifest: Manifest, labels: dict, prefix: str) -> dict:
    """A FeaturesDict of a level of the feature tree (a group of keys: `objects/`)."""
    features = {}
    for name, node in tree.items():
        key = prefix + name
        if isinstance(node, Feature):
            features[name] = _feature(key, node, manifest, labels)
        elif manifest.task == "detection" and key + "/" == OBJECTS:  # per object, as coco's
            features[name] = {"pythonClassName": _SEQUENCE, "sequence": {
                "feature": _dict({k: _one(f) for k, f in node.items()}, manifest, labels,
                                 prefix=key + "/"),
                "length": "-1"}}
        else:
            features[name] = _dict(node, manifest, labels, prefix=key + "/")
    return {"pythonClassName": _FEATURES_DICT, "featuresDict": {"features": features}}


def _one(feature: Feature) -> Feature:
    """A per-object feature's value for one object: its shape less the first dimension."""
    return Feature(feature.dtype, feature.shape[1:], feature.role, feature.vocabulary)


def _feature(key: str, feature: Feature, manifest: Manifest, labels: dict) -> dict:
    if feature.role == "label" and feature.dtype == "int64" and feature.shape in ((), (None,)):
        label = _class_label(key, feature, manifest, labels)
        if feature.shape == () and manifest.unlabeled() == 0:
            return label
        return _sequence(label)  # a list of labels, or none: parsed as possibly empty
    if key == IMAGE:
        return _image(manifest)
    if feature.role == "mask" or key == MASK:  # segmentation_mask, an object's mask
        return _image_of(1, "png")
    if feature.dtype == "string" and feature.shape == ():
        return {"pythonClassName": _TEXT, "text": {}}
    if key == BBOX:
        return {"pythonClassName": _BBOX, "boundingBox": {
            "shape": _shape((4,)), "dtype": "float32", "bboxFormat": "REL_YXYX"}}
    return _tensor(feature)


def _class_label(key: str, feature: Feature, manifest: Manifest, labels: dict) -> dict:
    """A ClassLabel of the manifest's classes; their names go in its names file only when
    TFDS reads them back the same (it strips each line and skips blank ones)."""
    names = manifest.labels.class_names if manifest.labels else ()
    if key in TFDS_LABEL_NAMES and manifest.labels and manifest.labels.vocabulary and all(
            name and name == name.strip() and "\n" not in name for name in names):
        labels[key] = names
    return {"pythonClassName": _CLASS_LABEL, "classLabel": {"numClasses": str(len(names))}}


def _image(manifest: Manifest) -> dict:
    """The stored image: an Image of the channels every split's images have, else RGB (as
    `load()` gives by default: TFDS decodes to the channels it is told, and images of
    several channels would not batch), encoded as all of them are (None: several
    formats); base64 pixels are no image TFDS decodes, but a string Tensor."""
    formats = {f for s in manifest.statistics.values() for f, n in s.image_formats.items() if n}
    channels = {c for s in manifest.statistics.values() for c, n in s.image_channels.items()
                if n}
    if "raw" in formats or manifest.options.get("image_format") == "raw":
        return _tensor(Feature("string"))
    channel = channels.pop() if len(channels) == 1 else 3
    encoding = formats.pop() if len(formats) == 1 else None
    if channel not in _ENCODINGS.get(encoding, (channel,)):
        encoding = None  # TFDS refuses an encoding with channels it cannot hold
    return _image_of(channel, encoding)


def _image_of(channels: int, encoding: str | None) -> dict:
    found = {"shape": _shape((None, None, channels)), "dtype": "uint8"}
    if encoding is not None:
        found["encodingFormat"] = encoding
    return {"pythonClassName": _IMAGE, "image": found}


def _sequence(feature: dict) -> dict:
    return {"pythonClassName": _SEQUENCE, "sequence": {"feature": feature, "length": "-1"}}


def _tensor(feature: Feature) -> dict:
    return {"pythonClassName": _TENSOR, "tensor": {
        "shape": _shape(feature.shape), "dtype": feature.dtype, "encoding": "none"}}


def _shape(shape: tuple) -> dict:
    """A TFDS Shape proto: unknown dimensions are -1, and a scalar has no dimensions."""
    return {"dimensions": [str(-1 if d is None else d) for d in shape]} if shape else {}


def _json(content: dict) -> bytes:
    return json.dumps(content, indent=2, sort_keys=True).encode() + b"\n"

"""The dataset on disk, as the writer and every reader name it: the manifest's types, the
features of a record, the splits, and the dataset's files and their names.

This is the one home of the on-disk contract. It is light on purpose (no pandas, Pillow
or TensorFlow at import): `load`, `verify`, `inspect` and the command line depend on it,
never on the writer. TensorFlow Datasets shares `DatasetInfo` and its features between
builder and reader the same way.

A dataset folder holds shards (`train-00000-of-00004.tfrecord`), `rejected.csv`, the
files TensorFlow Datasets reads it by (`dataset_info.json`, ...) and the manifest
`dataset.json`, written last: a folder without a manifest is not a dataset, so an
interrupted run can never look complete. While a run writes, the folder also holds its
lock, its journal and files under temporary names (see `output`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tfrecorder._tensorflow import tensorflow
from tfrecorder.errors import OptionError
from tfrecorder.format import manifest_statistics
from tfrecorder.format.media_sequence import Media
from tfrecorder.format.splits import SPLITS, Split  # noqa: F401  (the manifest names its splits so)
from tfrecorder.storage import fs

MANIFEST = "dataset.json"
REJECTED = "rejected.csv"
# Annotations the source skipped as TensorFlow's reference converters do (a COCO box of
# zero width): one a line, beside rejected.csv (`Table.skipped_annotations`).
SKIPPED_ANNOTATIONS = "skipped_annotations.csv"
LABEL_MAP = "label_map.pbtxt"  # the `tf_models` layout's classes, as its models read them
# What TensorFlow Datasets reads the folder by (`tfds_metadata`): its DatasetInfo, its
# features, and each ClassLabel's names, by feature ("objects/label" is a detection
# record's), in TFDS's `<feature>.labels.txt` (groups joined by "-").
TFDS_INFO = "dataset_info.json"
TFDS_FEATURES = "features.json"
TFDS_LABEL_NAMES = {"label": "label.labels.txt", "objects/label": "objects-label.labels.txt"}
TFDS_FILES = (TFDS_INFO, TFDS_FEATURES, *TFDS_LABEL_NAMES.values())
# 2: records in the order of a seeded hash of each row (`plan.order_keys`), which a
# pipeline computes row by row; 1: a permutation drawn from NumPy's RandomState.
FORMAT_VERSION = 2
# The layout (`tfrecorder.format.layouts`) of a manifest that names none: `layout` is written
# only when it is another.
DEFAULT_LAYOUT = "tfrecorder"
# The run journal (see `resume`): the run's fingerprint, and a receipt per committed shard.
RUN_STATE = "resume.json"
RECEIPT_SUFFIX = ".receipt.json"
INDEX_FOLDER, INDEX_SUFFIX = "index", ".idx"  # where shards' record indexes go, and how
# they end: `index_filename`
TEMP_MARKER = ".tmp-"  # a file being written: `name.tmp-<run id>`
LOCK = ".tfrecorder.lock"  # held by the run writing into the folder


_STORED_SPLIT = {split: split.stored for split in Split}  # "train" finds TRAIN too (str)


# --- features ------------------------------------------------------------------------------

DTYPES = ("string", "int64", "float32")
LABEL = "label"
SPLIT = "split"
# What a reader parses for the label of a record stored without one (an unlabelled row,
# `unlabeled="keep"`): never a class id, and text labels' name is "".
NO_LABEL = {"int64": -1, "string": b"", "float32": float("nan")}


@dataclass(frozen=True)
class Feature:
    """One feature of every record: its write form (dtype and shape), its read form
    (`parse_spec`) and its JSON form in the manifest.

    `shape` is that of one record's value: () a scalar, (None,) a list of any length,
    (None, k) a list of k-value rows (stored flat). `role` is "image", "label", "split" or
    "input"; a categorical input also has the `vocabulary` its ids index. `names` name
    the entries of its second dimension, where they have names: an object's keypoints
    (`objects/keypoints`, (None, K, 2)), whose left and right ones a flip swaps.
    """

    dtype: str
    shape: tuple[int | None, ...] = ()
    role: str = "input"
    vocabulary: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None

    def to_json(self) -> dict:
        found = {"dtype": self.dtype, "shape": list(self.shape), "role": self.role}
        if self.vocabulary is not None:
            found["vocabulary"] = list(self.vocabulary)
        if self.names is not None:
            found["names"] = list(self.names)
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> Feature:
        vocabulary, names = data.get("vocabulary"), data.get("names")
        return cls(data["dtype"], tuple(data["shape"]), data.get("role", ""),
                   None if vocabulary is None else tuple(vocabulary),
                   None if names is None else tuple(names))

    def parse_spec(self, name: str, optional: bool = False):
        """The `tf.io.parse_example` spec: a FixedLenFeature for a fixed shape; a list
        ([None]) or a list of k-value rows ([None, k]) a RaggedFeature, the latter cut
        into rows of k. So `parse_single_example` gives dense tensors of shape [], [n] and
        [n, k], and `parse_example` a dense [B] and RaggedTensors [B, None] and
        [B, None, k] (row splits int64, like `tf.data.Dataset.ragged_batch`). An
        `optional` scalar missing from a record parses as `NO_LABEL`'s value."""
        self.check_readable(name)
        tf = tensorflow()

        dtype = {"string": tf.string, "int64": tf.int64, "float32": tf.float32}[self.dtype]
        if None not in self.shape:
            default = NO_LABEL[self.dtype] if optional and self.shape == () else None
            return tf.io.FixedLenFeature(self.shape, dtype, default_value=default)
        rows = [tf.io.RaggedFeature.UniformRowLength(k) for k in self.shape[1:]]
        return tf.io.RaggedFeature(dtype, partitions=rows, row_splits_dtype=tf.int64)

    def check_readable(self, name: str) -> None:
        """Raises ValueError for a shape this version cannot read: one whose dimensions
        after the first are not all known. Apart from `parse_spec` because `verify` parses
        records by the same rules without TensorFlow."""
        if None in self.shape[1:]:
            raise ValueError(
                f"feature {name!r} has shape {list(self.shape)}; only its first dimension "
                "may be of any length (None). Is the manifest from a newer tfrecorder? "
                "Upgrade to read it.")


# The features of every record with an image, in the order `image_features` fills them.
IMAGE_FEATURES = {
    "image": Feature("string", role="image"),  # the stored bytes (or base64 raw pixels)
    "image_format": Feature("string", role="image"),  # "jpeg", "png" or "raw"
    "image_height": Feature("int64", role="image"),
    "image_width": Feature("int64", role="image"),
    "image_channels": Feature("int64", role="image"),
    "image_name": Feature("string", role="image"),  # the source's base name
    "image_uri": Feature("string", role="image"),  # as the table gave it
}
# What decoding an image reads (`read/decoding.py`'s `decode_image`).
DECODE_FEATURES = ("image", "image_format", "image_height", "image_width", "image_channels")
# Names an input column cannot take: tfrecorder writes these itself.
RESERVED = (*IMAGE_FEATURES, LABEL, SPLIT)

# Image formats as stored, and how files of the encoded ones begin.
STORED_FORMATS = ("jpeg", "png", "raw")
SIGNATURES = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG\r\n\x1a\n"}
# "raw" images are their pixels in web-safe base64 (TFRecorder 2.0's), as
# `tf.io.decode_base64` reads them.
BASE64_ALTCHARS = b"-_"


def image_features(image: bytes | str, image_format: str, height: int, width: int,
                   channels: int, image_uri: str, image_name: str | None = None) -> dict:
    """The values of `IMAGE_FEATURES` for one stored image (its name: the base name of
    its URI, unless given)."""
    return {"image": image, "image_format": image_format, "image_height": height,
            "image_width": width, "image_channels": channels,
            "image_name": fs.basename(image_uri) if image_name is None else image_name,
            "image_uri": image_uri}


def record_feature_types(labels: bool, multi_label: bool) -> dict[str, Feature]:
    """The features every record has besides its image and inputs (`record_values`
    gives their values)."""
    found = {}
    if labels:
        found[LABEL] = Feature("int64", (None,) if multi_label else (), role="label")
    found[SPLIT] = Feature("string", role="split")
    return found


def record_values(split: str, label, inputs: Mapping[str, Any]) -> dict:
    """The values of the features every record has besides its image (their types:
    `record_feature_types`), with the input columns' values."""
    features = {**inputs, SPLIT: _STORED_SPLIT[split]}
    if label is not None:
        features[LABEL] = label
    return features


def record_columns(split: str, labels: Sequence, inputs: Mapping[str, Sequence]) -> dict:
    """`record_values` for many rows of one split, a column at a time (a None label
    leaves the feature out of that row's record, as there)."""
    features = {**inputs, SPLIT: [_STORED_SPLIT[split]] * len(labels)}
    if any(label is not None for label in labels):
        features[LABEL] = labels
    return features


# --- the manifest --------------------------------------------------------------------------

@dataclass(frozen=True)
class ShardInfo:
    file: str
    num_records: int
    num_bytes: int
    sha256: str = ""  # of the file's bytes; "" in manifests written before it was kept
    # The shard's record index (`index_filename`); "" for gzip shards, which cannot be
    # read at an offset, and in manifests written before indexes.
    index: str = ""

    def to_json(self) -> dict:
        found = {"file": self.file, "num_records": self.num_records,
                 "num_bytes": self.num_bytes, "sha256": self.sha256}
        if self.index:
            found["index"] = self.index
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> ShardInfo:
        return cls(data["file"], data["num_records"], data["num_bytes"],
                   data.get("sha256") or "", data.get("index") or "")


@dataclass(frozen=True)
class SplitInfo:
    num_records: int
    num_rejected: int
    num_bytes: int
    shards: tuple[ShardInfo, ...]

    def to_json(self) -> dict:
        return {"num_records": self.num_records, "num_rejected": self.num_rejected,
                "num_bytes": self.num_bytes, "shards": [s.to_json() for s in self.shards]}

    def host_shards(self, index: int, count: int) -> tuple[ShardInfo, ...] | None:
        """The shards host `index` of `count` reads: a contiguous block of
        len(shards) / count, so with shards of sizes within one (as the writer cuts
        them) every host's record count is within one of the others'. None when the
        shards do not split evenly across `count` hosts (see `hosts` in convert)."""
        if len(self.shards) % count:
            return None
        each = len(self.shards) // count
        return self.shards[index * each:(index + 1) * each]

    @classmethod
    def of(cls, shards: tuple[ShardInfo, ...], num_rejected: int) -> SplitInfo:
        """A split of these shards: its totals are theirs."""
        return cls(sum(s.num_records for s in shards), num_rejected,
                   sum(s.num_bytes for s in shards), shards)

    @classmethod
    def from_json(cls, data: Mapping) -> SplitInfo:
        return cls(data["num_records"], data.get("num_rejected", 0), data["num_bytes"],
                   tuple(ShardInfo.from_json(s) for s in data["shards"]))


@dataclass(frozen=True)
class Labels:
    """The `label` feature's classes: text labels' sorted vocabulary (a label's id is its
    index), or for integer labels none, and num_classes the largest id + 1."""

    type: str  # "text" or "integer"
    vocabulary: tuple[str, ...] | None
    multi_label: bool = False
    num_classes: int | None = None
    # The classes' ids in TensorFlow's label maps (`label_map.pbtxt`, the tf_models
    # layout's object classes), where they are not 1, 2, ...: a COCO file's category ids,
    # a given label map's (`vocabulary.LabelMap`).
    model_ids: tuple[int, ...] | None = None

    @property
    def class_names(self) -> tuple[str, ...]:
        """Label ids' names: the vocabulary, or for integer labels the ids as text."""
        if self.vocabulary is not None:
            return self.vocabulary
        return tuple(str(i) for i in range(self.num_classes or 0))

    def to_json(self) -> dict:
        found = {"type": self.type,
                 "vocabulary": None if self.vocabulary is None else list(self.vocabulary),
                 "multi_label": self.multi_label, "num_classes": self.num_classes}
        if self.model_ids is not None:
            found["label_map_ids"] = list(self.model_ids)
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> Labels:
        vocabulary = data.get("vocabulary")
        ids = data.get("label_map_ids")
        return cls(data.get("type", "integer" if vocabulary is None else "text"),
                   None if vocabulary is None else tuple(vocabulary),
                   bool(data.get("multi_label", False)), data.get("num_classes"),
                   None if ids is None else tuple(ids))


@dataclass(frozen=True)
class Rejected:
    file: str
    num_rows: int
    # How many rows each reason rejected, paths in reasons folded ("no such file '...'"),
    # commonest first; {} in manifests written before reasons were counted.
    reasons: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"file": self.file, "num_rows": self.num_rows, "reasons": dict(self.reasons)}

    @classmethod
    def from_json(cls, data: Mapping) -> Rejected:
        return cls(data["file"], data["num_rows"], dict(data.get("reasons") or {}))


@dataclass(frozen=True)
class SkippedAnnotations:
    """Annotations the source skipped while its images were written without them (a COCO
    box of zero width or beyond its image), listed in `file`."""

    file: str
    num_annotations: int
    reasons: Mapping[str, int] = field(default_factory=dict)  # how many, commonest first

    def to_json(self) -> dict:
        return {"file": self.file, "num_annotations": self.num_annotations,
                "reasons": dict(self.reasons)}

    @classmethod
    def from_json(cls, data: Mapping) -> SkippedAnnotations:
        return cls(data["file"], data["num_annotations"], dict(data.get("reasons") or {}))


@dataclass(frozen=True)
class AnnotationCounts:
    """What a detection source held, and what became of its objects: every object the
    source holds is written, listed in skipped_annotations.csv, or held by an image
    rejected whole (counted in rejected.csv's `objects`):
    `objects == written + skipped + in_rejected_images`, which `verify` checks.

    Attributes:
        objects: the objects (annotations) the source holds, every one.
        written: the objects in the records.
        skipped: the objects listed in skipped_annotations.csv.
        in_rejected_images: the objects of images that were not written (rejected.csv).
        clipped: written boxes that were a little past the image's edge, clipped to it
            (`annotation_policy.TOLERANCE`).
        without_mask: written objects with an empty mask, in a dataset whose other
            objects have masks (their source gave none).
        unannotated_images: images the source names without an annotation file (an
            image listed in VOC's ImageSets without its XML, or without a YOLO label
            file): written as images without objects, as those formats mean it.
        notes: what else the source's reading decided ("category id 0 'cells' (used by
            no annotation) dropped").
        unannotated_examples: the first few images without an annotation file, as the
            source names them, for the warning that asks to check them.
    """

    objects: int = 0
    written: int = 0
    skipped: int = 0
    in_rejected_images: int = 0
    clipped: int = 0
    without_mask: int = 0
    unannotated_images: int = 0
    notes: tuple[str, ...] = ()
    unannotated_examples: tuple[str, ...] = ()

    def __add__(self, other: AnnotationCounts) -> AnnotationCounts:
        """Two sources' counts as one dataset's (the files of a dict of splits)."""
        return AnnotationCounts(
            *(getattr(self, name) + getattr(other, name) for name in _COUNT_FIELDS),
            notes=tuple(dict.fromkeys(self.notes + other.notes)),
            unannotated_examples=(self.unannotated_examples
                                  + other.unannotated_examples)[:EXAMPLES_KEPT])

    def to_json(self) -> dict:
        found = {name: getattr(self, name) for name in _COUNT_FIELDS}
        found["notes"] = list(self.notes)
        if self.unannotated_examples:
            found["unannotated_examples"] = list(self.unannotated_examples)
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> AnnotationCounts:
        return cls(**{name: int(data.get(name, 0)) for name in _COUNT_FIELDS},
                   notes=tuple(data.get("notes") or ()),
                   unannotated_examples=tuple(data.get("unannotated_examples") or ()))


EXAMPLES_KEPT = 5  # images without an annotation file a manifest names


_COUNT_FIELDS = ("objects", "written", "skipped", "in_rejected_images", "clipped",
                 "without_mask", "unannotated_images")


@dataclass(frozen=True)
class Manifest:
    """What `dataset.json` says. Before writing, the writer holds a header: the same type
    without `splits` and `rejected`, which the last step fills in."""

    compression: str | None
    features: Mapping[str, Feature]
    num_source_rows: int
    options: Mapping[str, Any]
    labels: Labels | None = None
    splits: Mapping[Split, SplitInfo] = field(default_factory=dict)
    rejected: Rejected | None = None
    created_by: str = ""
    format_version: int = FORMAT_VERSION
    # What the writer saw of the records, per split; {} in manifests written before it.
    statistics: Mapping[Split, manifest_statistics.SplitStatistics] = field(default_factory=dict)
    # Images stored more than once; None in manifests written before they were sought.
    duplicates: tuple[manifest_statistics.Duplicate, ...] | None = None
    # What the labels describe ("classification", "detection", "segmentation") and the
    # records' feature names (`tfrecorder.format.layouts`); written only when not the default,
    # so that a classification dataset's manifest is the same whichever version wrote it.
    task: str = "classification"
    layout: str = DEFAULT_LAYOUT
    # Annotations the source skipped (None: a source that skips none, or a manifest
    # written before sources skipped any).
    skipped_annotations: SkippedAnnotations | None = None
    # What became of a detection source's objects (None: not a detection dataset, or a
    # manifest written before they were counted).
    annotations: AnnotationCounts | None = None
    # A video or audio dataset's kind, what its SequenceExamples store and their counts
    # (`media_sequence.Media`); None: a dataset of images or of a plain table.
    media: Media | None = None

    @property
    def has_images(self) -> bool:
        return any(feature.role == "image" for feature in self.features.values())

    @property
    def inputs(self) -> list[str]:
        """The features written from input columns (not image, label or split)."""
        return [name for name, f in self.features.items() if f.role == "input"]

    @property
    def num_records(self) -> int:
        return sum(split.num_records for split in self.splits.values())

    @property
    def shards(self) -> list[tuple[Split, ShardInfo]]:
        """Every shard, by split, in writing order."""
        return [(name, shard) for name, split in self.splits.items() for shard in split.shards]

    def split(self, name: str, dataset_dir: str) -> SplitInfo:
        """The split `name`, or an error naming the splits there are."""
        if name not in self.splits:
            raise OptionError(f"the dataset in {dataset_dir!r} has no {name!r} split; it "
                              f"has {sorted(map(str, self.splits))}.", option="split")
        return self.splits[Split(name)]

    def unlabeled(self, split: str | None = None) -> int:
        """The records of `split` (None: of every split) stored without a label: rows
        whose label was blank, in a dataset of one class a record. 0 for a dataset
        without labels, of lists of labels, or written before they were counted."""
        if self.labels is None or self.labels.multi_label or self.task != "classification":
            return 0
        return sum(s.unlabeled for name, s in self.statistics.items()
                   if split is None or name == split)

    def parse_spec(self) -> dict:
        """The `tf.io` parsing spec of the records, feature by feature; the label of a
        record stored without one parses as `NO_LABEL`'s value (-1)."""
        optional = self.optional_features()
        return {name: feature.parse_spec(name, name in optional)
                for name, feature in self.features.items()}

    def optional_features(self) -> frozenset[str]:
        """The features a record may lack (and then parses as `NO_LABEL`'s value): the
        label of a dataset that counts records stored without one. The rule of
        `parse_spec`, for readers that parse without TensorFlow (`verify`)."""
        if not self.unlabeled():
            return frozenset()
        return frozenset(name for name, feature in self.features.items()
                         if feature.role == LABEL and feature.shape == ())

    def finished(self, splits: Mapping[Split, SplitInfo], rejected: Rejected,
                 statistics: Mapping[Split, manifest_statistics.SplitStatistics],
                 duplicates: tuple[manifest_statistics.Duplicate, ...],
                 annotations: AnnotationCounts | None = None) -> Manifest:
        return replace(self, splits=splits, rejected=rejected, statistics=statistics,
                       duplicates=duplicates, annotations=annotations)

    def to_json(self) -> dict:
        found = {
            "format": "tfrecorder",
            "format_version": self.format_version,
            "created_by": self.created_by,
            "compression": self.compression,
            "features": {name: f.to_json() for name, f in self.features.items()},
            "num_source_rows": self.num_source_rows,
            "options": dict(self.options),
        }
        if self.task != "classification":
            found["task"] = self.task
        if self.layout != DEFAULT_LAYOUT:
            found["layout"] = self.layout
        if self.labels is not None:
            found["labels"] = self.labels.to_json()
        if self.skipped_annotations is not None:
            found["skipped_annotations"] = self.skipped_annotations.to_json()
        if self.annotations is not None:
            found["annotations"] = self.annotations.to_json()
        if self.media is not None:
            found["media"] = self.media.to_json()
        if self.rejected is not None:  # a finished manifest, not a header
            found["splits"] = {str(name): s.to_json() for name, s in self.splits.items()}
            found["rejected"] = self.rejected.to_json()
            found["statistics"] = {str(name): s.to_json()
                                   for name, s in self.statistics.items()}
            if self.duplicates is not None:
                found["duplicates"] = [d.to_json() for d in self.duplicates]
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> Manifest:
        try:
            rejected = data.get("rejected")
            splits = {Split(name): SplitInfo.from_json(split)
                      for name, split in data.get("splits", {}).items()}
            return cls(
                compression=data.get("compression"),
                features={name: Feature.from_json(f) for name, f in data["features"].items()},
                num_source_rows=data.get("num_source_rows", 0),
                options=data.get("options", {}),
                labels=Labels.from_json(data["labels"]) if data.get("labels") else None,
                splits=dict(sorted(splits.items(), key=lambda item: SPLITS.index(item[0]))),
                rejected=Rejected.from_json(rejected) if rejected else None,
                created_by=data.get("created_by", ""),
                format_version=data.get("format_version", FORMAT_VERSION),
                statistics={Split(name): manifest_statistics.SplitStatistics.from_json(split)
                            for name, split in (data.get("statistics") or {}).items()},
                duplicates=(None if data.get("duplicates") is None else
                            tuple(manifest_statistics.Duplicate.from_json(d)
                                  for d in data["duplicates"])),
                task=data.get("task", "classification"),
                layout=data.get("layout", DEFAULT_LAYOUT),
                skipped_annotations=(SkippedAnnotations.from_json(data["skipped_annotations"])
                                     if data.get("skipped_annotations") else None),
                annotations=(AnnotationCounts.from_json(data["annotations"])
                             if data.get("annotations") else None),
                media=Media.from_json(data["media"]) if data.get("media") else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"{MANIFEST} is not a tfrecorder manifest ({type(error).__name__}"
                             f": {error}).") from None

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2).encode() + b"\n"


def read_manifest(dataset_dir: str) -> Manifest:
    return Manifest.from_json(json.loads(read_manifest_bytes(dataset_dir)))


def read_manifest_bytes(dataset_dir: str) -> bytes:
    """The manifest file as it is (`tfrecorder info --json` prints it)."""
    try:  # one request to a bucket, not a look first: `info` is one round trip
        return fs.read_bytes(fs.join(dataset_dir, MANIFEST))
    except (FileNotFoundError, NotADirectoryError):  # nothing there, or a file
        pass
    fs.check_access([dataset_dir])  # a missing bucket is a StorageError saying so
    raise FileNotFoundError(_no_dataset(dataset_dir))


# What else a folder without a manifest may be, each a function of the folder that returns
# a sentence to add to "no dataset.json" (with a leading space), or "". Registered by
# what knows another kind of dataset (`tfrecorder.legacy` knows TFRecorder 2.0's), so
# the contract imports none of them.
_NO_MANIFEST_HINTS: list[Callable[[str], str]] = []


def add_no_manifest_hint(hint: Callable[[str], str]) -> None:
    """Adds `hint(folder)`'s sentence to the error for a folder without a manifest."""
    if hint not in _NO_MANIFEST_HINTS:
        _NO_MANIFEST_HINTS.append(hint)


def _no_dataset(dataset_dir: str) -> str:
    """Why there is no manifest to read: nothing at the path (a typo, the wrong folder) is
    said as such, not as a folder that lacks a manifest."""
    if fs.exists(dataset_dir):
        return f"{dataset_dir!r} is a file; give the dataset's folder (it holds {MANIFEST})."
    if not fs.is_folder(dataset_dir):
        missing = (f"nothing is stored under {dataset_dir!r}" if fs.is_remote(dataset_dir)
                   else f"{dataset_dir!r} does not exist")
        return f"{missing}: no dataset is there. Check the path."
    return (f"{dataset_dir!r} holds no {MANIFEST}: it is not a finished tfrecorder dataset."
            + "".join(hint(dataset_dir) for hint in _NO_MANIFEST_HINTS))


# --- file names ----------------------------------------------------------------------------

_SHARD_STEM = r"(?:" + "|".join(SPLITS) + r")-\d{5}-of-\d{5}"
_SHARD_FILE = _SHARD_STEM + r"\.tfrecord(?:\.gz)?"
# Every file a run may leave in the output folder, including temporary ones.
_DATASET_FILE = re.compile(
    r"^(?:" + _SHARD_FILE + "(?:" + re.escape(RECEIPT_SUFFIX) + ")?|"
    + re.escape(INDEX_FOLDER + "/") + _SHARD_STEM + re.escape(INDEX_SUFFIX) + "|"
    + "|".join(map(re.escape, (MANIFEST, REJECTED, SKIPPED_ANNOTATIONS, RUN_STATE, LABEL_MAP,
                               *TFDS_FILES)))
    + r")(?:" + re.escape(TEMP_MARKER) + r"\w+)?$"
)


def shard_filename(split: str, index: int, num_shards: int, compression: str | None) -> str:
    """`train-00000-of-00004.tfrecord` (`.tfrecord.gz` when gzipped)."""
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    return f"{Split(split)}-{index:05d}-of-{num_shards:05d}{suffix}"


def index_filename(shard_file: str) -> str | None:
    """The record index of an uncompressed shard, relative to the dataset's folder
    (`index/train-00000-of-00004.idx`); None for a gzip shard, whose records cannot be
    read at an offset. Indexes live in a folder of their own, as DALI's examples keep
    them, so that no glob for shards (`train-*`, `*.tfrecord*`) takes one for a shard.

    One line per record, `<offset> <length>` in bytes of the whole frame: the format of
    the `tfrecord2idx` tools of NVIDIA DALI and of the `tfrecord` package, which read it.
    """
    if not shard_file.endswith(".tfrecord"):
        return None
    return f"{INDEX_FOLDER}/{shard_file.removesuffix('.tfrecord')}{INDEX_SUFFIX}"


def folder_files(folder: str) -> list[str]:
    """Names of the files in `folder` and in its index folder (as `index/<name>`)."""
    return fs.list_dir(folder) + [f"{INDEX_FOLDER}/{name}"
                                  for name in fs.list_dir(fs.join(folder, INDEX_FOLDER))]


def dataset_files(folder: str) -> list[str]:
    """Names of the files in `folder` (its index folder included) that a tfrecorder run
    writes."""
    return [name for name in folder_files(folder) if _DATASET_FILE.match(name)]


def is_temporary(name: str) -> bool:
    return TEMP_MARKER in name

"""Every option of a conversion, as frozen data: the one place an option is declared,
documented and checked.

Options come in groups (the table, splits, images, rejected rows, shards, and in
`run_options` the output folder, the local run and Beam), each a frozen dataclass
checked once, in `__post_init__`, with an `OptionError` that names the option (the
checks, and `option`, which declares one, are `option_checks`'). `convert()`'s
signature and docstring and the `tfrecorder convert` flags are all generated from
these fields (see `option`), so an option added here is accepted, documented and given
a flag everywhere at once, as TensorFlow Datasets' `ShardConfig` holds its sharding
settings in one place. A group's
first docstring paragraph is its heading in `tfrecorder convert --help`: it speaks to
users, and notes on the code go in the paragraphs after it.

Light on purpose (no Pillow, no pandas): the plan and the workers hold these.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfrecorder.errors import Option, OptionError
from tfrecorder.format.layouts import LAYOUTS, Layout, keypoint_names_of
from tfrecorder.format.splits import SPLITS, Split, spellings_text, split_named
from tfrecorder.format.tfrecord import COMPRESSIONS
from tfrecorder.format.vocabulary import class_names
from tfrecorder.option_checks import (
    Checked,
    checked_bool,
    checked_image_size,
    is_int,
    is_number,
    option,
    refusal,
)
from tfrecorder.run_options import BeamOptions, OutputOptions, RunOptions
from tfrecorder.wording import shown

IMAGE_FORMATS = ("auto", "jpeg", "png", "raw")
# Which view of an image with an EXIF orientation (a phone photo taken sideways) is stored:
# as shown (turned upright, as viewers and labelling tools show it) or as stored in the
# file; "auto" follows the annotations (docs/detection.md, "EXIF orientation").
ORIENTATIONS = ("auto", "shown", "stored")
ON_ERROR = ("reject", "raise")
DUPLICATES = ("warn", "drop", "error")
NEW_LABELS = ("error", "append")
UNLABELED = ("keep", "error")
# What becomes of objects a Pascal VOC file marks <difficult>1</difficult>.
DIFFICULT = ("keep", "drop")
# What a table's labels describe ("auto": told from the source's columns and content).
TASKS = ("auto", "classification", "detection", "segmentation")
# What a source does with annotations TensorFlow's reference converters skip (a COCO box
# of zero width, or beyond its image): skip and list them, or refuse the source.
INVALID_ANNOTATIONS = ("skip", "error")

# Larger images are rejected unless the user raises ImageOptions.max_image_pixels: 100
# megapixels decode to 300 MB of RGB (a 10,000 x 10,000 scan), and far larger sizes are
# what a decompression bomb declares.
DEFAULT_MAX_IMAGE_PIXELS = 100_000_000
DEFAULT_MAX_REJECTED = 0.5  # "a run that loses most of its rows fails"
DEFAULT_UNASSIGNED_SPLIT = (0.8, 0.1, 0.1)
DEFAULT_SHARD_SIZE_MB = 128  # TensorFlow's guidance: shards of 100-200 MB
SIZE_SAMPLE = 32  # rows encoded up front to estimate the size of a record


@dataclass(frozen=True)
class TableOptions(Checked):
    """How the source is read into a table."""

    header: bool | None = option(
        None, "whether a CSV's first line names its columns; None detects it.", "tristate",
        help="whether the CSV's first line names its columns (default: detect)")
    schema: Mapping[str, str | None] | None = option(
        None, "what columns are, by name: TFRecorder's types \"SplitKey\", \"ImageUri\", "
        "\"Image\" (images held in the cells: bytes, arrays, PIL images), "
        "\"StringLabel\", \"IntegerLabel\", \"IntegerInput\", \"FloatInput\", "
        "\"CategoricalInput\" (text stored as ids; the vocabulary is saved) or "
        "\"StringInput\", or None to drop a column. Columns it does not name keep their "
        "role (split, image_uri, label) or pass through typed by their dtype. Several "
        "label columns, or a label column of lists, make multi-label rows. See "
        "docs/schema.md.", "schema", metavar="COLUMN=TYPE",
        help="what a column is (a TFRecorder type, see docs/schema.md), or drop to leave "
             "it out (repeatable; default: split, image_uri and label by name, other "
             "columns typed by their values)")
    fill_missing: Any = option(
        None, "the value for missing cells of input columns (one value, or a dict by "
        "column); by default a missing value is an error naming the rows.", "fill",
        metavar="[COLUMN=]VALUE",
        help="the value for missing cells of input columns: VALUE for all, or "
             "COLUMN=VALUE per column (repeatable); read as a Python literal where it is "
             "one (default: a missing value is an error)")

    split: str | None = option(
        None, "the split of every row, for a source without a split column (NumPy arrays, "
        "a Hugging Face Dataset): TRAIN, VALIDATION, TEST or UNASSIGNED, any case. A dict of "
        "sources by split, or a DatasetDict, names each part's split by its key.", "text",
        metavar="SPLIT", help="the split of every row of a source without a split column")
    chunk_rows: int | None = option(
        None, "read a CSV or Parquet source this many rows at a time into a memory-mapped "
        "table (in TMPDIR), for sources larger than memory; the output is the same. None: "
        "250,000 rows at a time for a source larger than a tenth of the memory "
        "available, else the whole file.", "int", metavar="N",
        help="read a CSV or Parquet source N rows at a time, into a memory-mapped table "
             "(default: 250000 for a source larger than a tenth of the available memory)")

    task: str = option(
        "auto", "what the labels describe: \"classification\" (a class, or classes, per "
        "image), \"detection\" (boxes with their classes: AutoML detection CSVs, Vertex AI "
        "JSONL, COCO JSON, or a DataFrame with a `boxes` column) or \"segmentation\" (a "
        "`mask_uri` column of class-id PNG masks). \"auto\" tells it from the source, and "
        "asks for this option where the source could be either.", "choice", choices=TASKS,
        help="what the labels describe (default: told from the source)")
    image_root: str | os.PathLike | Mapping[str, str | os.PathLike] | None = option(
        None, "the folder a COCO file's `file_name`s are relative to, by default the JSON "
        "file's own folder (in a COCO folder, each split's image folder); or a YOLO "
        "dataset's root, which replaces its data.yaml's `path`. For a dict of COCO files "
        "by split, or a COCO folder, a dict of folders by split gives each split's files "
        "their own ({\"train\": \"train2017\", \"validation\": \"val2017\"}); a split "
        "it does not name keeps its default.", "folders",
        metavar="[SPLIT=]FOLDER",
        help="the folder COCO file names are relative to (default: the JSON's folder), or "
             "a YOLO dataset's root (default: data.yaml's path); for COCO, SPLIT=FOLDER "
             "gives each split's file its own (repeatable)")
    invalid_annotations: str = option(
        "skip", "what to do with a bad annotation in any detection source (COCO, Pascal VOC, "
        "YOLO, Vertex JSONL, AutoML CSV, a DataFrame): a box outside the image (beyond "
        "the 1% clipped, as Ultralytics clips), empty, or without a label, an unknown "
        "class or image, a value that is not a number. \"skip\" writes the image without "
        "it, lists it in skipped_annotations.csv and counts it by reason in the manifest "
        "(more than max_rejected of the objects stops the run); \"error\" refuses the "
        "source, naming the annotations. An image whose annotation file is unusable is "
        "rejected (rejected.csv) either way.", "choice",
        choices=INVALID_ANNOTATIONS,
        help="skip (default: list each bad annotation in skipped_annotations.csv) or error")
    difficult: str = option(
        "keep", "the objects a Pascal VOC file marks difficult: \"keep\" writes them with "
        "`objects/difficult` 1; \"drop\" leaves them out, as the Object Detection API's "
        "`create_pascal_tf_record.py --ignore_difficult_instances` does.", "choice",
        choices=DIFFICULT,
        help="Pascal VOC objects marked difficult: keep them (flagged), or drop them as "
             "the Object Detection API's Pascal VOC converter does with "
             "--ignore_difficult_instances")

    def __post_init__(self):
        self._bool("header", optional=True)
        self._require("difficult", self.difficult in DIFFICULT,
                      f"one of {', '.join(map(repr, DIFFICULT))}")
        self._require("task", self.task in TASKS, f"one of {', '.join(map(repr, TASKS))}")
        self._require("invalid_annotations", self.invalid_annotations in INVALID_ANNOTATIONS,
                      f"one of {INVALID_ANNOTATIONS}")
        self._image_roots()
        self._int("chunk_rows", "a positive int (rows) or None", minimum=1)
        self._require("split", self.split is None or (
            isinstance(self.split, str) and split_named(self.split) is not None),
            f"{spellings_text()}, or None")
        self._require("schema", self.schema is None or isinstance(self.schema, Mapping),
                      "a dict of column names to types")

    def _image_roots(self) -> None:
        """A dict of folders by split is kept by the splits' names ("train", never
        "TRAIN" or "val"), so that a source's splits find theirs."""
        roots = self.image_root
        if not isinstance(roots, Mapping):
            self._require("image_root", roots is None or isinstance(
                roots, (str, os.PathLike)), "a folder path, a dict of folders by split, "
                "or None")
            return
        expected = f"a folder path, or a dict of folders by split names: {spellings_text()}"
        self._require("image_root", bool(roots) and all(
            isinstance(key, str) and split_named(key) is not None
            and isinstance(folder, (str, os.PathLike)) for key, folder in roots.items()),
            expected)
        named = {}
        for key, folder in roots.items():
            split = str(split_named(key))
            self._require("image_root", split not in named,
                          f"{expected}, each split once ({named.get(split, ('',))[0]!r} "
                          f"and {key!r} are both {split})")
            named[split] = (key, os.fspath(folder))
        object.__setattr__(self, "image_root",
                           {split: folder for split, (_, folder) in named.items()})


@dataclass(frozen=True)
class SplitOptions(Checked):
    """How rows without a split get one, how rows are mixed, and the ids of text labels.
    """

    unassigned_split: tuple[float, float, float] = option(
        DEFAULT_UNASSIGNED_SPLIT, "train/validation/test fractions for UNASSIGNED rows "
        "(and all rows when there is no split column), assigned by a stable hash of the "
        "URI as written (not of the file it resolves to).", "fractions", metavar="TRAIN,VAL,TEST",
        help="fractions for UNASSIGNED rows (and every row without a split column), by a "
             "stable hash of the URI")
    stratify: bool = option(
        False, "cut UNASSIGNED rows exactly at unassigned_split's fractions, and within "
        "each label (90 rows at 0.8/0.1/0.1: 72/9/9, each label within two rows of its "
        "share, most often one): each label's rows are ranked by the same hash, then cut. "
        "Deterministic, and whatever the rows' order; but a row's split depends on the "
        "other UNASSIGNED rows and their labels, so adding or removing rows can move some. "
        "By default each row's split comes from its own hash alone: stable whatever the "
        "rest of the table, but only near the fractions in a small table.", "switch",
        help="split UNASSIGNED rows exactly at --unassigned-split within each label "
             "(default: by each row's hash alone, which only nears the fractions)")
    seed: int = option(0, "seeds the shuffle that mixes classes across shards; recorded.",
                       "int", metavar="N")
    label_vocabulary: Sequence[str] | str | os.PathLike | None = option(
        None, "the ids of text labels: a list of class names (a name's id is its index), or "
        "a path (local or a URI) to a text file of class names, one per line, to "
        "TFRecorder 2.0's output folder or its transform_fn (2.0's vocabulary file), to "
        "a tfrecorder dataset, whose ids are reused, or to a label map (`label_map.pbtxt`, "
        "the Object Detection API's), whose ids the tf_models layout stores. By default "
        "ids follow the labels' sorted order (a COCO or YOLO source's own class list, "
        "where it has one); TFRecorder 2.0 numbered them most frequent first. See "
        "docs/schema.md.", "text", metavar="PATH",
        help="number text labels in this order: a file of class names (one per line), "
             "a label_map.pbtxt, TFRecorder 2.0's output (its transform_fn vocabulary), or "
             "a tfrecorder dataset whose ids to reuse (default: sorted order)")
    class_names: Sequence[str] | None = option(
        None, "the names of integer labels: label i is class_names[i] (ids stay as they "
        "are; the names are the dataset's vocabulary). A Hugging Face ClassLabel column "
        "gives its names by itself.", "names", metavar="NAME,NAME,...",
        help="the names of integer labels, in id order (label i is the i-th name)")
    new_labels: str = option(
        "error", "what becomes of labels that label_vocabulary lacks: \"error\" refuses "
        "them before any image is written, naming them and their rows; \"append\" gives "
        "them the next ids, in sorted order.", "choice", choices=NEW_LABELS,
        help="labels that --label-vocabulary lacks: error refuses them, naming their rows; "
             "append gives them the next ids, in sorted order")

    unlabeled: str = option(
        "keep", "what becomes of a row whose label cell is blank (AutoML imports unlabelled "
        "images): \"keep\" writes its record without a label feature and counts it "
        "(`info`, the manifest's statistics; `load(as_supervised=True)` leaves it out); "
        "\"error\" refuses the table before any image is read, naming the rows.",
        "choice", choices=UNLABELED,
        help="rows with a blank label: keep writes them without a label (left out when "
             "loading (image, label) pairs); error refuses the table, naming them")

    @functools.cached_property
    def given_label_map(self):
        """`label_vocabulary` as a `vocabulary.LabelMap` (None: not given), read once: the
        plan asks for its names, then for its ids."""
        from tfrecorder.format.vocabulary import load_map

        return None if self.label_vocabulary is None else load_map(self.label_vocabulary)

    def __post_init__(self):
        try:
            fractions = tuple(float(f) for f in self.unassigned_split)
        except (TypeError, ValueError):
            fractions = ()
        self._require("unassigned_split", len(fractions) == 3 and min(fractions) >= 0
                      and math.isclose(sum(fractions), 1.0),
                      "three fractions (train, validation, test) that sum to 1")
        object.__setattr__(self, "unassigned_split", tuple(self.unassigned_split))
        self._int("seed", "an int from 0 to 2**32 - 1", minimum=0, maximum=2**32 - 1,
                  optional=False)
        self._bool("stratify")
        names = self.label_vocabulary
        if names is not None and not isinstance(names, (str, os.PathLike)):
            self._require("label_vocabulary", not isinstance(names, bytes) and (
                isinstance(names, (Sequence, np.ndarray)) or hasattr(names, "tolist")),
                "a list of class names, or the path of a file of class names, of "
                "TFRecorder 2.0's output or of a tfrecorder dataset")
            names = names.tolist() if hasattr(names, "tolist") else list(names)
            object.__setattr__(self, "label_vocabulary", class_names(names))
        if self.class_names is not None:
            given = self.class_names
            self._require("class_names", not isinstance(given, (str, bytes)) and (
                isinstance(given, (Sequence, np.ndarray)) or hasattr(given, "tolist")),
                "a list of class names, label 0's first")
            object.__setattr__(self, "class_names", class_names(
                given.tolist() if hasattr(given, "tolist") else list(given),
                option="class_names"))
            if self.label_vocabulary is not None:
                raise OptionError(Option("class_names"), " names integer labels and ",
                                  Option("label_vocabulary"), " numbers text labels: pass "
                                  "one of them.", option="class_names")
        self._require("new_labels", self.new_labels in NEW_LABELS,
                      f"one of {', '.join(map(repr, NEW_LABELS))}")
        self._require("unlabeled", self.unlabeled in UNLABELED,
                      f"one of {', '.join(map(repr, UNLABELED))}")

    @property
    def fractions(self) -> tuple[float, float, float]:
        return tuple(float(f) for f in self.unassigned_split)


@dataclass(frozen=True)
class ImageOptions(Checked):
    """How images are stored, the same way for every row.

    Bit depths are never clipped. 16-bit greyscale images (16-bit PNG, TIFF, PGM, and
    32-bit integer images whose values fit in 0..65535) stay 16-bit wherever the stored
    format is PNG: `tf.io.decode_png(..., dtype=tf.uint16)` reads them exactly, and the
    default uint8 decode gives `value >> 8`. Where 8 bits are forced (image_format "jpeg"
    or "raw", or a resized image stored as JPEG) the same rule applies, `value >> 8`, so
    every path gives the pixels TensorFlow's own uint8 decode would; Pillow reads 16-bit
    colour images (RGB, RGBA) as 8 bits by that rule too. Floating-point images, and
    integer ones with values outside 0..65535, are rejected: no lossless PNG holds them
    and their scale is unknown.
    """

    image_format: str = option(
        "auto", "\"auto\" keeps JPEG and PNG bytes that TensorFlow decodes as they are and "
        "converts other formats losslessly to PNG (resized images become JPEG, or PNG when "
        "they have transparency); \"jpeg\" or \"png\" store every image so; \"raw\" stores "
        "base64 pixels like TFRecorder.", "choice", choices=IMAGE_FORMATS,
        help="auto keeps JPEG/PNG bytes and converts other formats losslessly to PNG; raw "
             "stores base64 pixels")
    image_size: tuple[int, int] | None = option(
        None, "resize every image to (height, width).", "size", metavar="HxW",
        help="resize every image to HEIGHTxWIDTH, e.g. 224x224")
    max_image_side: int | None = option(
        None, "shrink images whose longer side is larger (aspect ratio kept).", "int",
        metavar="N", help="shrink images whose longer side exceeds N pixels")
    jpeg_quality: int = option(
        90, "quality of re-encoded JPEGs (resized or image_format=\"jpeg\").", "int",
        metavar="N", help="quality of re-encoded JPEGs")
    validate: bool = option(
        True, "fully decode every image so corrupt ones are rejected (strictly: damaged "
        "JPEG data that decoders fill with grey is rejected too); False trusts the files "
        "and only checks their headers (and PNG checksums).", "switch",
        help="trust the files: read image headers only, do not decode every image")
    max_image_pixels: int | None = option(
        DEFAULT_MAX_IMAGE_PIXELS, "images with more pixels (height x width, read from the "
        "header) are rejected before any decoding, on every path: a 6 MB JPEG may declare "
        "gigapixels (a decompression bomb). None: no limit. It applies alone: Pillow's "
        "process-wide `PIL.Image.MAX_IMAGE_PIXELS` adds no second limit.", "pixels",
        metavar="N|none",
        help="reject images with more pixels than N (from the header, before decoding); "
             "none for no limit")
    orientation: str = option(
        "auto", "which view of an image with an EXIF orientation (a phone photo taken "
        "sideways, or mirrored) is stored: \"shown\" turns the pixels upright as viewers "
        "and labelling tools show them (re-encoded; boxes that describe the file's own "
        "view are turned with them); \"stored\" keeps the pixels as the file stores them "
        "(boxes that describe the shown view are turned back onto their objects). "
        "\"auto\": a detection image is stored in the view its annotation describes, "
        "told by the annotation's stated size (a Pascal VOC <size>, a COCO image's width "
        "and height) where it can tell, else the shown view that labelling tools "
        "(Ultralytics, CVAT, Roboflow) label; classification images are kept as they are. "
        "See docs/detection.md.", "choice", choices=ORIENTATIONS,
        help="store EXIF-oriented images as shown (turned upright) or as stored in the "
             "file; auto follows a detection source's annotations, and keeps "
             "classification images as they are")

    layout: str = option(
        "tfrecorder", "the records' feature names: \"tfrecorder\" (`image`, `label`, "
        "`objects/bbox`, ...; `load()` reads them) or \"tf_models\" (`image/encoded`, "
        "`image/object/bbox/xmin`, ...: the keys TensorFlow's Model Garden and Object "
        "Detection API decoders read, with a `label_map.pbtxt`). `load`, `verify`, `info` "
        "and `show` read both.", "choice", choices=LAYOUTS.keys(),
        help="feature names: tfrecorder's, or tf_models (image/encoded, image/object/...)")

    @property
    def dtype_of_list(self) -> Mapping[str, str]:
        """The dtypes empty lists are stored with, by feature: none known here (the plan's
        `RecordOptions` knows them), so an empty list is an error."""
        return {}

    def __post_init__(self):
        self._require("layout", self.layout in LAYOUTS,  # the registry, as it is now
                      f"one of {', '.join(map(repr, LAYOUTS))}")
        self._require("image_format", isinstance(self.image_format, str)
                      and self.image_format in IMAGE_FORMATS,
                      f"one of {', '.join(map(repr, IMAGE_FORMATS))}")
        object.__setattr__(self, "image_size", checked_image_size(self.image_size))
        self._int("max_image_side", "a positive int (pixels) or None", minimum=1)
        self._int("jpeg_quality", "an int from 1 to 100", minimum=1, maximum=100,
                  optional=False)
        self._require("orientation", self.orientation in ORIENTATIONS,
                      f"one of {', '.join(map(repr, ORIENTATIONS))}")
        self._bool("validate")
        self._int("max_image_pixels", "a positive int (width x height) or None for no "
                  "limit", minimum=1)
        if self.image_size is not None and self.max_image_side is not None:
            raise OptionError(
                "give ", Option("image_size"), " or ", Option("max_image_side"),
                f", not both (image_size={self.image_size!r}, max_image_side="
                f"{self.max_image_side!r})", option="max_image_side")


@dataclass(frozen=True)
class MediaOptions(Checked):
    """How video and audio clips are stored (docs/video.md).

    A video clip is stored as MediaPipe's MediaSequence stores one (`format/media_sequence`):
    a JPEG a frame (`jpeg_quality` above) with its time on the source's own timeline.
    Nothing here applies to images.
    """

    frame_rate: float | None = option(
        None, "frames a second stored from a video, sampled on its timeline (the frame "
        "shown at each 1/frame_rate s); None: every frame the video has.", "float",
        metavar="FPS", help="frames a second stored from a video (default: all of them)")
    short_side: int | None = option(
        None, "resize frames so that their shorter side has this many pixels (aspect ratio "
        "kept); None: as decoded.", "int", metavar="N",
        help="resize video frames to this shorter side, in pixels")
    clip_seconds: float | None = option(
        None, "cut each video or audio file (or each time span a row gives) into clips of "
        "this many seconds, one record a clip (a last, shorter piece is dropped and "
        "counted); None: one clip a row.", "float", metavar="S",
        help="cut videos and audio into clips of S seconds, one record each")
    clip_frames: int | None = option(
        None, "cut videos into clips of this many stored frames (at `frame_rate`), as "
        "`clip_seconds` does in time; give one of the two.", "int", metavar="N",
        help="cut videos into clips of N frames (at --frame-rate)")
    sample_rate: int | None = option(
        None, "samples a second of stored audio (resampled); None: the file's own.", "int",
        metavar="HZ", help="resample audio to HZ samples a second")
    audio_channels: int | None = option(
        None, "channels of stored audio (1 mixes down to mono); None: the file's own.",
        "int", metavar="N", help="audio channels stored (1: mono)")
    keep_media: bool = option(
        False, "store each clip's original container bytes (`clip/encoded_media_bytes`, "
        "the whole file, with the clip's times) instead of decoded frames.", "switch",
        help="store the original video or audio file's bytes instead of frames")

    def __post_init__(self):
        for name in ("frame_rate", "clip_seconds"):
            value = getattr(self, name)
            self._require(name, value is None or (is_number(value) and 0 < value < math.inf),
                          "a positive number or None")
        self._int("short_side", "a positive int (pixels) or None", minimum=1)
        self._int("clip_frames", "a positive int or None", minimum=1)
        self._int("sample_rate", "a positive int (Hz) or None", minimum=1)
        self._int("audio_channels", "a positive int or None", minimum=1)
        self._bool("keep_media")
        if self.clip_seconds is not None and self.clip_frames is not None:
            raise OptionError(
                "give ", Option("clip_seconds"), " or ", Option("clip_frames"),
                f", not both (clip_seconds={self.clip_seconds!r}, clip_frames="
                f"{self.clip_frames!r})", option="clip_frames")
        if self.clip_frames is not None and self.frame_rate is None:
            raise OptionError(
                Option("clip_frames"), " counts frames at ", Option("frame_rate"),
                ", which is not set: give frame_rate too (or clip_seconds)",
                option="clip_frames")


# What `strict=True` stands for: these options set so (and, given, they must say the
# same), and an annotation the source would skip, a warning of the plan and a warning of
# the finished dataset (`DatasetInfo.warnings`) each fatal: see `RejectOptions.strict`.
STRICT = {"on_error": "raise", "max_rejected": 0.0, "duplicates": "error"}
# Options strict leaves as given but that must not let anything pass it.
STRICT_REFUSES = {"invalid_annotations": "skip"}


@dataclass(frozen=True)
class RejectOptions(Checked):
    """What happens to rows whose image cannot be written."""

    strict: bool = option(
        False, "fail on anything that would drop or question data: an image that cannot "
        "be written, a row the source rejects, an image stored twice, an annotation the "
        "source would skip, an empty split, and every warning about the finished dataset "
        "(classes missing from a split or out of balance, ...). The error names the first "
        "offender and no dataset is written. A preset: on_error=\"raise\", "
        "max_rejected=0, duplicates=\"error\"; giving any of these (or "
        "invalid_annotations=\"skip\") another value is refused. The manifest records "
        "it. See docs/usage.md.", "tristate",  # (--no-strict: what its errors advise)
        help="fail (leaving no dataset) on the first rejected row, duplicate, skipped "
             "annotation or warning, naming it")
    on_error: str = option(
        "reject", "\"reject\" writes rows whose image cannot be read to rejected.csv; "
        "\"raise\" stops at the first one.", "choice", choices=ON_ERROR,
        help="reject: write unreadable images' rows to rejected.csv; raise: stop at the "
             "first")
    max_rejected: float = option(
        DEFAULT_MAX_REJECTED, "the fraction of rows that may be rejected; past it the run "
        "fails (as soon as that is certain), naming the commonest reasons, and leaves no "
        "dataset: so many bad rows mean a wrong table, not a few bad images.", "float",
        metavar="FRACTION",
        help="fail (leaving no dataset) when more than this fraction of the rows is "
             "rejected")

    duplicates: str = option(
        "warn", "what to do with an image stored more than once (the same bytes, by "
        "SHA-256), under one label or several, in one split or several (a test image the "
        "model trains on): \"warn\" writes every copy and warns, naming the rows; "
        "\"drop\" keeps the first copy (in train before validation before test, then the "
        "first row) and lists the others in rejected.csv with the row they repeat; "
        "\"error\" fails, leaving no dataset. Images are compared as they are written, so "
        "\"error\" fails at the end of the run.", "choice", choices=DUPLICATES,
        help="an image stored more than once: warn (default), drop all but the first "
             "copy, or error")

    def __post_init__(self):
        self._bool("strict")
        self._require("on_error", self.on_error in ON_ERROR, f"one of {ON_ERROR}")
        self._require("duplicates", self.duplicates in DUPLICATES, f"one of {DUPLICATES}")
        self._require("max_rejected", is_number(self.max_rejected)
                      and 0 <= self.max_rejected <= 1, "a fraction of the rows, from 0 to 1")
        if self.strict:  # (`strict_preset` sets them; built by hand, they must agree)
            strict_preset({name: getattr(self, name) for name in STRICT})


def strict_preset(given: Mapping[str, Any]) -> dict[str, Any]:
    """The options `strict=True` sets (`STRICT`), once `given` (keywords passed with it)
    is found to contradict none of them: a contradiction is refused at once, before any
    work, naming both."""
    for name, value in (*STRICT.items(), *STRICT_REFUSES.items()):
        if name not in given:
            continue
        agrees = given[name] == value if name in STRICT else given[name] != value
        if not agrees:
            raise OptionError(
                Option("strict", True), " fails on the first rejected row, duplicate, "
                "skipped annotation or warning, which ", Option(name, given[name]),
                " would let pass: pass one of them (strict stands for ",
                *_joined([Option(n, v) for n, v in STRICT.items()]), ").", option="strict")
    return dict(STRICT)


def _joined(parts: list) -> list:
    """[a, ", ", b, " and ", c]: parts of an error's message, in a list."""
    joined = []
    for index, part in enumerate(parts):
        if index:
            joined.append(" and " if index == len(parts) - 1 else ", ")
        joined.append(part)
    return joined


@dataclass(frozen=True)
class ShardOptions(Checked):
    """How many shards each split gets: a given number, or as many as keep shards near
    the target size, from the mean size of a sample of records.

    The sample is encoded before planning, by `prefetch.mean_record_bytes`: not here, as
    options hold no Pillow."""

    num_shards: int | Mapping[str, int] | None = option(
        None, "shards per split (an int, or e.g. {\"train\": 16}); by default shards are "
        "sized to about shard_size_mb.", "shards", metavar="N|SPLIT=N,...",
        help="shards per split: one number, or per split like train=8,validation=1 "
             "(default: shards of about --shard-size-mb)")
    shard_size_mb: float = option(
        DEFAULT_SHARD_SIZE_MB, "the target size of a shard when num_shards is not given.",
        "float", metavar="MB", help="target shard size")
    compression: str | None = option(
        None, "None or \"gzip\".", "choice", choices=tuple(c for c in COMPRESSIONS if c),
        help="compress the shards (default: none)")
    hosts: int | None = option(
        None, "the hosts that will read the dataset together: every split gets a multiple "
        "of this many shards, with record counts within one of each other, so that each "
        "host reads whole shards of an equal share (`load(..., host=(index, hosts))`).",
        "int", metavar="N", help="give every split a multiple of N shards of equal size, "
        "for N hosts reading it together")

    def __post_init__(self):
        if isinstance(self.num_shards, Mapping):  # any spelling of a split: {"val": 2}
            unknown = [k for k in self.num_shards
                       if not isinstance(k, str) or not isinstance(split_named(k), Split)]
            if unknown:
                raise OptionError(Option("num_shards"), f" names an unknown split "
                                  f"{shown(unknown[0])}; name {', '.join(SPLITS)} (any case, or "
                                  "another spelling of them: val, dev, testing...)",
                                  option="num_shards")
            object.__setattr__(self, "num_shards", {
                split_named(k).value: count for k, count in self.num_shards.items()})
        counts = (self.num_shards.items() if isinstance(self.num_shards, Mapping)
                  else [("", self.num_shards)])
        for _, count in counts:
            if count is not None and not (is_int(count) and count >= 1):
                raise refusal("num_shards", "a positive int", count)
        self._require("shard_size_mb", is_number(self.shard_size_mb)
                      and self.shard_size_mb > 0, "a positive number")
        self._int("hosts", "a positive int or None", minimum=1)
        uneven = [(split, count) for split, count in counts
                  if self.hosts and count is not None and count % self.hosts]
        if uneven:
            split, count = uneven[0]
            raise OptionError(
                Option("num_shards", count), f" for {split}" if split else "",
                " does not split evenly across ", Option("hosts", self.hosts),
                f": give a multiple of {self.hosts} (e.g. "
                f"{-(-count // self.hosts) * self.hosts}), or leave ", Option("num_shards"),
                " out to size shards by ", Option("shard_size_mb"), ".", option="num_shards")
        self._require("compression", self.compression in COMPRESSIONS,
                      f"one of {COMPRESSIONS}")

    @property
    def sized_by_bytes(self) -> bool:
        """Whether some split's shard count depends on the size of its records."""
        if isinstance(self.num_shards, Mapping):
            return any(s not in self.num_shards for s in SPLITS)
        return self.num_shards is None

    def count(self, split: str, num_rows: int, record_bytes: float) -> int:
        """Shards for a split of `num_rows`: as given, or as many as keep each near
        `shard_size_mb` (at least one, never more than rows), rounded up to a multiple
        of `hosts` (then a split of fewer rows than hosts has empty shards)."""
        if num_rows == 0:
            return 0
        given = (self.num_shards.get(split) if isinstance(self.num_shards, Mapping)
                 else self.num_shards)
        if given is not None:
            return given
        count = shards_for_size(num_rows, record_bytes, int(self.shard_size_mb * 2**20))
        return -(-count // self.hosts) * self.hosts if self.hosts else count


def shards_for_size(num_rows: int, record_bytes: float, shard_bytes: int) -> int:
    """How many shards keep each near `shard_bytes`; at least one, never more than rows."""
    if num_rows == 0:
        return 0
    return max(1, min(num_rows, math.ceil(num_rows * record_bytes / shard_bytes)))


@dataclass(frozen=True)
class RecordOptions(ImageOptions):
    """`ImageOptions` with what the plan adds for the record encoder: the classes' names,
    which the `tf_models` layout stores as text beside their ids, and the dtype of each
    list feature, which an empty list is stored with. Not an option."""

    class_names: tuple[str, ...] | None = None
    list_dtypes: tuple[tuple[str, str], ...] = ()  # (stored key, dtype) of list features
    model_ids: tuple[int, ...] | None = None  # the classes' label-map ids (`Plan.model_ids`)
    # The objects' keypoints' names, which the `tf_models` layout stores as text.
    keypoint_names: tuple[str, ...] | None = None
    # The layout the plan built for these classes and keypoints, once (a worker encodes
    # every row with it); None: `layouts.record_layout` asks the registry.
    record_layout: Layout | None = field(default=None, compare=False, repr=False)
    # A video or audio table's: what its rows' files are ("video", "audio"; None: images)
    # and how their clips are stored.
    media: str | None = None
    media_options: MediaOptions | None = None
    # What a media row's labels describe (`Table.task`): "classification" (the clip's
    # classes), "action_recognition" (its SEGMENTS), "object_tracking" (its REGIONS).
    task: str = "classification"

    @classmethod
    def of(cls, image: ImageOptions, class_names: tuple[str, ...] | None,
           features: Mapping | None = None,
           model_ids: tuple[int, ...] | None = None) -> RecordOptions:
        """`image` with the classes' names and label-map ids, and the list dtypes and
        keypoint names of `features` (the manifest's, by stored key)."""
        lists = tuple((key, f.dtype) for key, f in sorted((features or {}).items())
                      if f.shape and f.shape[0] is None)
        return cls(**{f.name: getattr(image, f.name) for f in dataclasses.fields(image)},
                   class_names=class_names, list_dtypes=lists, model_ids=model_ids,
                   keypoint_names=keypoint_names_of(features or {}))

    @functools.cached_property
    def dtype_of_list(self) -> dict[str, str]:
        return dict(self.list_dtypes)


GROUPS = (TableOptions, SplitOptions, ImageOptions, MediaOptions, RejectOptions,
          ShardOptions, OutputOptions, RunOptions, BeamOptions)


@dataclass(frozen=True)
class ConvertOptions:
    """Every option of one conversion, by group."""

    table: TableOptions = field(default_factory=TableOptions)
    split: SplitOptions = field(default_factory=SplitOptions)
    image: ImageOptions = field(default_factory=ImageOptions)
    media: MediaOptions = field(default_factory=MediaOptions)
    reject: RejectOptions = field(default_factory=RejectOptions)
    shards: ShardOptions = field(default_factory=ShardOptions)
    output: OutputOptions = field(default_factory=OutputOptions)
    run: RunOptions = field(default_factory=RunOptions)
    beam: BeamOptions = field(default_factory=BeamOptions)

    @classmethod
    def from_keywords(cls, function: str = "convert", **given) -> ConvertOptions:
        """The options from `convert()`'s keywords; an unknown one is a TypeError that
        suggests the nearest name."""
        unknown = set(given) - {f.name for f in fields()}
        if unknown:
            name = sorted(unknown)[0]
            near = difflib.get_close_matches(name, [f.name for f in fields()], n=1)
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}"
                            + (f"; did you mean {near[0]!r}?" if near else ""))
        if checked_bool("strict", given.get("strict", False)):  # a preset: see STRICT
            given = {**given, **strict_preset(given)}
        groups = {}
        for slot in dataclasses.fields(cls):
            group = slot.default_factory
            groups[slot.name] = group(**{f.name: given[f.name]
                                         for f in dataclasses.fields(group) if f.name in given})
        return cls(**groups)

    def recorded(self, media: str = "image") -> dict:
        """The options the manifest records (those that change the bytes written, with
        the shard sizing, and `strict`, which says none was rejected), in JSON's types;
        a video or audio table's (`media`) with the `MediaOptions`."""
        image = dataclasses.asdict(self.image)
        if media != "image":
            image.update(dataclasses.asdict(self.media))
        del image["layout"]  # the manifest's own field (`Manifest.layout`)
        if image["orientation"] == "auto":  # the default: manifests stay as they were
            del image["orientation"]
        return {"seed": self.split.seed, **image,
                "compression": self.shards.compression,
                "unassigned_split": list(self.split.unassigned_split),
                **({"stratify": True} if self.split.stratify else {}),
                "num_shards": self.shards.num_shards,
                "shard_size_mb": self.shards.shard_size_mb,
                **({"hosts": self.shards.hosts} if self.shards.hosts else {}),
                "duplicates": self.reject.duplicates,
                # what a strict run guarantees (none rejected, skipped or warned of); not
                # recorded otherwise, so other manifests stay as they were
                **({"strict": True} if self.reject.strict else {})}


def fields() -> Iterator[dataclasses.Field]:
    """Every option of `convert`, group by group, in the order of its signature."""
    for group in GROUPS:
        yield from dataclasses.fields(group)

"""The manifest's `statistics` and `duplicates` sections, as types: what each split's
records hold (class counts, image sizes and formats, boxes) and which images are stored
more than once, each with its JSON form in `dataset.json`.

Part of the on-disk contract, apart from `manifest` because they are its largest
sections and change on their own (a new statistic touches only this file). Readers
(`info`, `report`, `tfrecorder.look`) read them from here. Not to be confused with
`statistics`, the writer's side, which gathers these facts row by row while shards are
written and builds these types from them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.format.splits import SPLITS, Split


@dataclass(frozen=True)
class Distribution:
    """A number over a split's images (height, width, stored bytes, boxes) or over its
    boxes (their size): its range, quartiles and mean."""

    min: float
    q1: float
    median: float
    q3: float
    max: float
    mean: float

    def to_json(self) -> dict:
        return {"min": self.min, "q1": self.q1, "median": self.median, "q3": self.q3,
                "max": self.max, "mean": self.mean}

    @classmethod
    def from_json(cls, data: Mapping) -> Distribution:
        return cls(data["min"], data["q1"], data["median"], data["q3"], data["max"],
                   data["mean"])


# A box is tiny when an edge is under 1% of the image's side along it, or under 8 stored
# pixels: the smallest boxes AutoML and Vertex AI object detection train on. COCO's size
# classes (`ObjectStatistics.box_areas`): small under 32x32 pixels, large over 96x96.
TINY_BOX_FRACTION = 0.01


TINY_BOX_PIXELS = 8


COCO_AREAS = (("small", 32 ** 2), ("medium", 96 ** 2), ("large", None))


@dataclass(frozen=True)
class ObjectStatistics:
    """What one split's detection records hold besides their classes (whose boxes
    `SplitStatistics.class_counts` counts, one per labelled box).

    Box sizes are `sqrt(box area / image area)`, from the relative corners: the side of a
    square of the box's area, as a fraction of the image's (geometric mean) side. It is
    what a model sees whatever size it resizes images to. Pixels, where they are counted
    (`tiny_boxes`, `box_areas`), are the stored image's."""

    num_boxes: int
    boxes_per_image: Distribution
    box_size: Distribution | None = None  # None: no boxes at all
    class_images: tuple[int, ...] = ()  # images holding a box of each class id
    without_boxes: int = 0  # images with no box
    unlabeled_boxes: int = 0  # boxes without a class
    all_unlabeled: int = 0  # images with boxes, none of which has a class
    tiny_boxes: int = 0  # see TINY_BOX_FRACTION
    box_areas: Mapping[str, int] = field(default_factory=dict)  # COCO_AREAS' names

    def to_json(self) -> dict:
        return {"num_boxes": self.num_boxes,
                "boxes_per_image": self.boxes_per_image.to_json(),
                "box_size": None if self.box_size is None else self.box_size.to_json(),
                "class_images": list(self.class_images),
                "without_boxes": self.without_boxes,
                "unlabeled_boxes": self.unlabeled_boxes,
                "all_unlabeled": self.all_unlabeled, "tiny_boxes": self.tiny_boxes,
                "box_areas": dict(self.box_areas)}

    @classmethod
    def from_json(cls, data: Mapping) -> ObjectStatistics:
        size = data.get("box_size")
        return cls(data["num_boxes"], Distribution.from_json(data["boxes_per_image"]),
                   None if size is None else Distribution.from_json(size),
                   tuple(data.get("class_images") or ()), data.get("without_boxes", 0),
                   data.get("unlabeled_boxes", 0), data.get("all_unlabeled", 0),
                   data.get("tiny_boxes", 0), dict(data.get("box_areas") or {}))


@dataclass(frozen=True)
class SplitStatistics:
    """What one split's records hold, gathered while they were written.

    `class_counts[i]` counts the records whose label includes class id i (a multi-label
    record counts once for each of its labels, and a detection record once for each
    labelled box: it counts objects); `unlabeled` those without a label. The image fields
    are None for a dataset without images; `objects` is None but for detection records
    (and in manifests written before it)."""

    class_counts: tuple[int, ...]
    unlabeled: int = 0
    image_height: Distribution | None = None
    image_width: Distribution | None = None
    image_bytes: Distribution | None = None
    image_formats: Mapping[str, int] = field(default_factory=dict)
    image_channels: Mapping[int, int] = field(default_factory=dict)
    objects: ObjectStatistics | None = None
    # Images whose EXIF orientation turned their pixels or boxes, or whose view was a
    # guess (`turned_pixels`, `turned_boxes`, `ambiguous`; docs/detection.md): only the
    # counts that are not 0, and absent from the JSON when none is.
    orientation: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        found: dict[str, Any] = {"class_counts": list(self.class_counts),
                                 "unlabeled": self.unlabeled}
        for name in ("image_height", "image_width", "image_bytes"):
            value = getattr(self, name)
            if value is not None:
                found[name] = value.to_json()
        if self.image_formats:
            found["image_formats"] = dict(self.image_formats)
            found["image_channels"] = {str(k): v for k, v in self.image_channels.items()}
        if self.objects is not None:
            found["objects"] = self.objects.to_json()
        if self.orientation:
            found["orientation"] = dict(self.orientation)
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> SplitStatistics:
        def distribution(name):
            return Distribution.from_json(data[name]) if data.get(name) else None

        return cls(tuple(data["class_counts"]), data.get("unlabeled", 0),
                   distribution("image_height"), distribution("image_width"),
                   distribution("image_bytes"), dict(data.get("image_formats") or {}),
                   {int(k): v for k, v in (data.get("image_channels") or {}).items()},
                   ObjectStatistics.from_json(data["objects"]) if data.get("objects")
                   else None, dict(data.get("orientation") or {}))


@dataclass(frozen=True)
class Copy:
    """One row holding a duplicated image: the row as the table names it, its image as
    given, its split, its label's name (a list for multi-label rows) and whether the
    dataset kept it (`duplicates="drop"` keeps one copy). `row_word` says what `row`
    counts: "line" for a CSV's or JSONL file's lines (stored under that key, as
    rejected.csv's first column), else "row"."""

    row: int | str
    image_uri: str
    split: Split
    label: str | list[str] | None
    kept: bool = True
    row_word: str = "row"

    @property
    def named(self) -> str:
        """'line 7', 'row 6': the row as messages name it (`wording.name_row`)."""
        return f"{self.row_word} {self.row}"

    def to_json(self) -> dict:
        return {self.row_word: self.row, "image_uri": self.image_uri,
                "split": str(self.split), "label": self.label, "kept": self.kept}

    @classmethod
    def from_json(cls, data: Mapping) -> Copy:
        word = "line" if "line" in data else "row"
        return cls(data[word], data["image_uri"], Split(data["split"]), data.get("label"),
                   data.get("kept", True), word)


@dataclass(frozen=True)
class Duplicate:
    """An image stored more than once (the same bytes, by SHA-256), with every copy, in
    writing order: train first, then by row."""

    digest: str  # the first 16 bytes of the stored image's SHA-256, in hex
    copies: tuple[Copy, ...]
    # Where the first copy (always kept) is stored: its shard's file and record index.
    shard: str = ""
    record: int = 0

    @property
    def splits(self) -> list[Split]:
        return sorted({copy.split for copy in self.copies}, key=SPLITS.index)

    @property
    def is_leak(self) -> bool:
        """In more than one split: a test image the model has trained on."""
        return len(self.splits) > 1

    @property
    def has_conflicting_labels(self) -> bool:
        return len({json.dumps(copy.label) for copy in self.copies}) > 1

    def to_json(self) -> dict:
        return {"digest": self.digest, "copies": [copy.to_json() for copy in self.copies],
                "shard": self.shard, "record": self.record}

    @classmethod
    def from_json(cls, data: Mapping) -> Duplicate:
        return cls(data["digest"], tuple(Copy.from_json(c) for c in data["copies"]),
                   data.get("shard", ""), data.get("record", 0))

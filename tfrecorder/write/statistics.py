"""What the writer learns while it writes: per split, the records of each class and the
stored images' sizes, formats and channels, and a detection record's boxes; across the
dataset, images stored more than once. All of it goes into the manifest, so `info`
answers without reading a record.

Workers note each record they write (`ShardFacts.add`: the row's position and label, its
boxes, and its `rows.StoredImage`); the last step (`finish.finish`) sums them up. Nothing reads an
image twice: the content hash is taken of the bytes the worker has just encoded, and only
the few records whose hashes match are read back, to confirm them byte by byte.

This is the writer's side, which gathers the facts; the types they become, which readers
share, are the manifest's sections in `manifest_statistics`.
"""

from __future__ import annotations

import base64
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tfrecorder.format.layouts import BBOX
from tfrecorder.format.manifest import SPLITS, STORED_FORMATS, Labels, Split
from tfrecorder.format.manifest_statistics import (
    COCO_AREAS,
    TINY_BOX_FRACTION,
    TINY_BOX_PIXELS,
    Copy,
    Distribution,
    Duplicate,
    ObjectStatistics,
    SplitStatistics,
)
from tfrecorder.wording import row_word
from tfrecorder.write.rows import TURNS_COUNTED, Record, Row, StoredImage

NO_IMAGE = -1  # `ShardFacts.formats` of a record without an image
_DIGEST_BYTES = 16


class RecordLabels:
    """Each record's label, in record order, as `Row.label` gives it (an id, a list of
    ids, or None): ids in an int32 array (-1: None; class ids are far below 2^31), 4
    bytes a record where a list took 8 and, for ids above 256, a new int a record from
    pickling; a list once a record has a list of ids (multi-label)."""

    __slots__ = ("values",)

    def __init__(self, labels: Iterable = ()):
        self.values: array | list = array("i")
        self.extend(labels)

    def append(self, label) -> None:
        if isinstance(self.values, array):
            if label is None:
                return self.values.append(-1)
            if isinstance(label, (int, np.integer)) and label >= 0:
                return self.values.append(label)
            self.values = list(self)
        self.values.append(label)

    def extend(self, labels: Iterable) -> None:
        if isinstance(labels, RecordLabels) and isinstance(labels.values, array) and \
                isinstance(self.values, array):
            return self.values.extend(labels.values)
        if isinstance(labels, list) and isinstance(self.values, array):
            try:  # ids only (no None, no list): at once
                return self.values.extend(array("i", labels))
            except TypeError:
                pass
        for label in labels:
            self.append(label)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int):
        value = self.values[index]
        return None if isinstance(self.values, array) and value < 0 else value

    def __iter__(self):
        return iter(self.tolist())

    def __eq__(self, other) -> bool:
        return isinstance(other, RecordLabels) and list(self) == list(other)

    def tolist(self) -> list:
        if isinstance(self.values, list):
            return list(self.values)
        values = self.values.tolist()
        if min(values, default=0) < 0:  # (checked first: most lists hold no None to put back)
            values = [None if value < 0 else value for value in values]
        return values

    def ids(self) -> np.ndarray | None:
        """The ids, -1 for None, as an int32 array (no copy); None once a record has a
        list of ids."""
        return np.frombuffer(self.values, np.int32) if isinstance(self.values, array) \
            else None


@dataclass
class ShardFacts:
    """What each written record of a shard is, in record order. Columns of typed arrays,
    each as narrow as its values allow, not objects: a million-image run holds them all
    until its manifest is written (46 bytes a record, and a detection record 8 more and 8
    a box).

    A detection record (one whose row has boxes) also notes how many boxes it has
    (`boxes`, one entry a detection record: empty for others) and each box's height and
    width relative to the image (`box_heights`, `box_widths`, one entry a box), as the
    record stores them (float32)."""

    positions: array = field(default_factory=lambda: array("q"))
    labels: RecordLabels = field(default_factory=RecordLabels)  # an id, a list of ids, or None
    formats: array = field(default_factory=lambda: array("b"))  # STORED_FORMATS index
    # int32: a record, and so its image, is under 2 GiB (a protocol buffer's limit).
    heights: array = field(default_factory=lambda: array("i"))
    widths: array = field(default_factory=lambda: array("i"))
    channels: array = field(default_factory=lambda: array("b"))
    sizes: array = field(default_factory=lambda: array("i"))  # stored image bytes
    digests: bytearray = field(default_factory=bytearray)  # 16 bytes a record
    boxes: array = field(default_factory=lambda: array("q"))
    box_heights: array = field(default_factory=lambda: array("f"))
    box_widths: array = field(default_factory=lambda: array("f"))
    # What each record's EXIF orientation made of its image (`StoredImage.turned`'s bits);
    # empty for a shard without images, and in receipts from before it.
    turns: array = field(default_factory=lambda: array("b"))
    # A clip record's stored frames (0 for audio) and length in microseconds; empty for
    # other records. Its image columns describe its frames (format, size, bytes stored).
    frames: array = field(default_factory=lambda: array("i"))
    durations: array = field(default_factory=lambda: array("q"))

    def __len__(self) -> int:
        return len(self.positions)

    def add(self, row: Row, record: Record) -> None:
        image = record.image
        self.positions.append(row.position)
        self.labels.append(row.label)
        clip = record.clip
        if clip is not None:
            self.frames.append(clip.frames)
            self.durations.append(clip.duration_us)
            if clip.frames:  # its frames, as an image's columns
                image = StoredImage("jpeg", clip.height, clip.width, 3, clip.num_bytes,
                                    clip.digest)
        boxes = row.inputs.get(BBOX) if record.boxes is None else record.boxes
        if boxes is not None:
            self._add_boxes(boxes)
        self.turns.append(0 if image is None else image.turned)
        if image is None:
            self.formats.append(NO_IMAGE)
            for column in (self.heights, self.widths, self.channels, self.sizes):
                column.append(0)
            self.digests += bytes(_DIGEST_BYTES)
            return
        self.formats.append(STORED_FORMATS.index(image.format))
        self.heights.append(image.height)
        self.widths.append(image.width)
        self.channels.append(image.channels)
        self.sizes.append(image.num_bytes)
        self.digests += image.digest

    def _add_boxes(self, boxes) -> None:
        corners = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)  # as stored
        self.boxes.append(len(corners))
        self.box_heights.extend(np.maximum(corners[:, 2] - corners[:, 0], 0).tolist())
        self.box_widths.extend(np.maximum(corners[:, 3] - corners[:, 1], 0).tolist())

    def add_without_images(self, positions: Sequence[int], labels: Sequence) -> None:
        """Notes many records of a table without images at once: their positions and
        labels only (16 bytes a record, not 65: 10M rows are 160 MB). A shard's facts
        come from this or from `add`, never both: the image columns then stay empty."""
        self.positions.extend(positions)
        self.labels.extend(labels)

    def extend(self, other: ShardFacts) -> None:
        for name in (*_COLUMNS, *_BOX_COLUMNS, "turns", *_CLIP_COLUMNS):
            getattr(self, name).extend(getattr(other, name))
        self.digests += other.digests

    def without(self, indices: set[int]) -> ShardFacts:
        """These facts less the records at `indices` (dropped duplicates)."""
        return self.take([i for i in range(len(self)) if i not in indices])

    def take(self, indices: Sequence[int]) -> ShardFacts:
        """The facts of the records at `indices`, in that order."""
        kept = ShardFacts()
        starts = np.concatenate([[0], np.cumsum(self.boxes, dtype=np.int64)]).tolist()
        turns = len(self.turns) == len(self)
        clips = len(self.durations) == len(self)
        for index in indices:
            for name in _COLUMNS:
                getattr(kept, name).append(getattr(self, name)[index])
            if turns:
                kept.turns.append(self.turns[index])
            if clips:
                kept.frames.append(self.frames[index])
                kept.durations.append(self.durations[index])
            kept.digests += self.digest(index)
            if self.boxes:  # a detection shard: every record has its count
                kept.boxes.append(self.boxes[index])
                box = slice(starts[index], starts[index + 1])
                kept.box_heights.extend(self.box_heights[box])
                kept.box_widths.extend(self.box_widths[box])
        return kept

    def tally(self) -> SplitTally:
        """These records' statistics, as counts that add up (`SplitTally`)."""
        labels, unlabeled = _label_counts(self)
        durations = np.frombuffer(self.durations, np.int64)
        found = SplitTally(labels, unlabeled, clips=len(durations),
                           frames=int(np.frombuffer(self.frames, np.int32).sum()),
                           duration_us=int(durations.sum()))
        formats = np.frombuffer(self.formats, np.int8)
        with_image = formats != NO_IMAGE
        if not with_image.any():
            return found

        def column(name: str) -> np.ndarray:
            values = getattr(self, name)
            return np.frombuffer(values, values.typecode)[with_image]

        heights, widths = column("heights"), column("widths")
        found.formats = Counter(formats[with_image].tolist())
        found.channels = Counter(column("channels").tolist())
        found.heights, found.widths = ValueCounts.of(heights), ValueCounts.of(widths)
        found.sizes = ValueCounts.of(column("sizes"))
        found.turns = Counter(turned_images([self]))
        if self.boxes:  # a detection shard: every record has its count, and an image
            found.objects = ObjectTally.of(self, heights, widths)
        return found

    def digest(self, index: int) -> bytes:
        return bytes(self.digests[index * _DIGEST_BYTES:(index + 1) * _DIGEST_BYTES])

    def to_json(self) -> dict:
        """For the run journal's receipts (a resumed run keeps a shard's facts): typed
        columns as base64 of their little-endian bytes (a 10M-row run's receipts took
        9 s as JSON lists of numbers), and so the labels while they are one id or none a
        record (`label_ids`, -1: none); else as a list (`labels`)."""
        found = {name: base64.b64encode(getattr(self, name).tobytes()).decode()
                 for name in _ARRAYS}
        found["typecodes"] = {name: getattr(self, name).typecode for name in _ARRAYS}
        ids = self.labels.ids()
        if ids is not None:
            found["label_ids"] = base64.b64encode(ids.tobytes()).decode()
        else:
            found["labels"] = self.labels.tolist()
        found["digests"] = self.digests.hex()
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> ShardFacts:
        facts = cls()
        typecodes = data.get("typecodes", _FIRST_TYPECODES)  # receipts from before them
        for name in _ARRAYS:
            if name in data:  # the box columns: not in receipts from before them
                column = getattr(facts, name)
                stored = array(typecodes[name], base64.b64decode(data[name]))
                column.extend(stored if stored.typecode == column.typecode
                              else array(column.typecode, stored.tolist()))
        if "label_ids" in data:
            facts.labels.values.frombytes(base64.b64decode(data["label_ids"]))
        else:  # a list: multi-label records, or a receipt from before `label_ids`
            facts.labels = RecordLabels(data["labels"])
        facts.digests = bytearray.fromhex(data["digests"])
        return facts


_COLUMNS = ("positions", "labels", "formats", "heights", "widths", "channels", "sizes")
_BOX_COLUMNS = ("boxes", "box_heights", "box_widths")
_CLIP_COLUMNS = ("frames", "durations")
_ARRAYS = (*(name for name in _COLUMNS if name != "labels"), *_BOX_COLUMNS, "turns",
           *_CLIP_COLUMNS)
# How receipts stored the typed columns before they said so.
_FIRST_TYPECODES = {**dict.fromkeys(_ARRAYS, "q"), "formats": "b", "box_heights": "f",
                    "box_widths": "f", "turns": "b"}


def split_statistics(facts: Sequence[ShardFacts], num_classes: int, objects: bool = False
                     ) -> SplitStatistics:
    """One split's statistics, from its shards' facts; with `objects`, a detection
    split's boxes too (not for a classification table with an `objects/bbox` input)."""
    return sum((shard.tally() for shard in facts), SplitTally()).statistics(
        num_classes, objects)


class ValueCounts:
    """How many times each value occurs (sorted distinct values and their counts): the
    exact quartiles and mean of a column, summed shard by shard, held in what its
    distinct values take (image sides, byte sizes), not a value a record. Sums are
    merged once, when read: adding a shard at a time re-sorted every value so far (1M
    records in 100 shards took 1.9 s where NumPy's percentile over them took 0.2)."""

    __slots__ = ("_parts",)

    def __init__(self, values: np.ndarray | None = None, counts: np.ndarray | None = None):
        self._parts = [] if values is None else [(values, counts)]

    @classmethod
    def of(cls, values: np.ndarray) -> ValueCounts:
        found, counts = np.unique(values, return_counts=True)
        return cls(found, counts.astype(np.int64))

    def __add__(self, other: ValueCounts) -> ValueCounts:
        return self._with(other._parts)

    def __sub__(self, other: ValueCounts) -> ValueCounts:
        return self._with([(values, -counts) for values, counts in other._parts])

    def _with(self, parts: list) -> ValueCounts:
        found = ValueCounts()
        found._parts = [*self._parts, *parts]
        return found

    def _merged(self) -> tuple[np.ndarray, np.ndarray]:
        if len(self._parts) > 1:
            values, inverse = np.unique(np.concatenate([v for v, _ in self._parts]),
                                        return_inverse=True)
            counts = np.bincount(inverse, weights=np.concatenate(
                [c for _, c in self._parts]), minlength=len(values)).astype(np.int64)
            kept = counts > 0  # (exact: float64 holds counts below 2^53)
            self._parts = [(values[kept], counts[kept])]
        return self._parts[0] if self._parts else (np.empty(0, np.int64),
                                                   np.empty(0, np.int64))

    @property
    def values(self) -> np.ndarray:
        return self._merged()[0]

    @property
    def counts(self) -> np.ndarray:
        return self._merged()[1]

    def __len__(self) -> int:
        return int(self.counts.sum())

    def distribution(self, digits: int | None = None) -> Distribution:
        """As `np.percentile` (its "linear" method) and `np.mean` give them over every
        value: the two values each quartile falls between, found by rank in the counts,
        then NumPy's own interpolation arithmetic."""
        n = int(self.counts.sum())
        ends = np.cumsum(self.counts)
        virtual = (n - 1) * np.array([0.25, 0.5, 0.75])
        above = virtual >= n - 1  # as NumPy takes the last value there
        previous = np.where(above, -1, np.floor(virtual))
        gamma = virtual - previous
        ranks = np.where(above, n - 1, previous).astype(np.int64)
        a = self.values[np.searchsorted(ends, ranks, side="right")]
        b = self.values[np.searchsorted(ends, np.where(above, n - 1, ranks + 1),
                                        side="right")]
        difference = b - a
        quartiles = a + difference * gamma
        np.subtract(b, difference * (1 - gamma), out=quartiles, where=gamma >= 0.5)
        if self.values.dtype.kind in "iu" and int(np.abs(self.values).max()) * n < 2**62:
            mean = float(int(np.dot(self.values.astype(np.int64), self.counts))) / n
        elif self.values.dtype.kind in "iu":  # (a sum past int64: Python's ints)
            mean = float(sum(int(v) * int(c) for v, c in zip(self.values.tolist(),
                                                              self.counts.tolist()))) / n
        else:
            mean = float(np.dot(self.values, self.counts) / n)
        q1, median, q3 = quartiles.tolist()
        if digits is None:
            return Distribution(int(self.values[0]), q1, median, q3, int(self.values[-1]),
                                round(mean, 2))
        return Distribution(*(round(float(v), digits) for v in (
            self.values[0], q1, median, q3, self.values[-1], mean)))


@dataclass
class ObjectTally:
    """A detection split's boxes, summed shard by shard (`ObjectStatistics`' fields)."""

    boxes_per_image: ValueCounts = field(default_factory=ValueCounts)
    box_sizes: ValueCounts = field(default_factory=ValueCounts)  # a distinct size each
    class_images: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    unlabeled_boxes: int = 0
    all_unlabeled: int = 0
    tiny_boxes: int = 0
    box_areas: Counter = field(default_factory=Counter)

    def _combined(self, other: ObjectTally, sign: int) -> ObjectTally:
        areas = Counter(self.box_areas)
        areas.update({name: sign * n for name, n in other.box_areas.items()})
        values = ValueCounts.__add__ if sign > 0 else ValueCounts.__sub__
        return ObjectTally(values(self.boxes_per_image, other.boxes_per_image),
                           values(self.box_sizes, other.box_sizes),
                           _added(self.class_images, sign * other.class_images),
                           self.unlabeled_boxes + sign * other.unlabeled_boxes,
                           self.all_unlabeled + sign * other.all_unlabeled,
                           self.tiny_boxes + sign * other.tiny_boxes, areas)

    def __add__(self, other: ObjectTally) -> ObjectTally:
        return self._combined(other, 1)

    def __sub__(self, other: ObjectTally) -> ObjectTally:
        return self._combined(other, -1)

    @classmethod
    def of(cls, facts: ShardFacts, image_heights: np.ndarray, image_widths: np.ndarray
           ) -> ObjectTally:
        """Every record of a detection shard has an image (its boxes are relative to it)."""
        boxes = np.frombuffer(facts.boxes, np.int64)
        heights = np.frombuffer(facts.box_heights, np.float32).astype(np.float64)
        widths = np.frombuffer(facts.box_widths, np.float32).astype(np.float64)
        classes = [[] if label is None else label if isinstance(label, list) else [label]
                   for label in facts.labels]
        labelled = np.asarray([len(ids) for ids in classes], dtype=np.int64)
        present = [i for ids in classes for i in set(ids)]
        pixel_heights = heights * np.repeat(image_heights, boxes)  # of the stored image
        pixel_widths = widths * np.repeat(image_widths, boxes)
        tiny = ((heights < TINY_BOX_FRACTION) | (widths < TINY_BOX_FRACTION)
                | (pixel_heights < TINY_BOX_PIXELS) | (pixel_widths < TINY_BOX_PIXELS))
        areas = pixel_heights * pixel_widths
        box_areas, below = Counter(), np.zeros(len(areas), dtype=bool)
        for name, limit in COCO_AREAS:
            inside = ~below if limit is None else (areas < limit) & ~below
            box_areas[name] = int(inside.sum())
            below |= inside
        return cls(ValueCounts.of(boxes), ValueCounts.of(np.sqrt(heights * widths)),
                   np.bincount(np.asarray(present, dtype=np.int64)),
                   int(np.maximum(boxes - labelled, 0).sum()),
                   int(((boxes > 0) & (labelled == 0)).sum()), int(tiny.sum()), box_areas)

    def statistics(self, num_classes: int) -> ObjectStatistics:
        class_images = _added(np.zeros(num_classes, np.int64), self.class_images)
        num_boxes = int(np.dot(self.boxes_per_image.values, self.boxes_per_image.counts))
        return ObjectStatistics(
            num_boxes, self.boxes_per_image.distribution(),
            self.box_sizes.distribution(digits=4) if len(self.box_sizes) else None,
            tuple(class_images.tolist()),
            without_boxes=int(self.boxes_per_image.counts[
                self.boxes_per_image.values == 0].sum()),
            unlabeled_boxes=self.unlabeled_boxes, all_unlabeled=self.all_unlabeled,
            tiny_boxes=self.tiny_boxes,
            box_areas={name: self.box_areas[name] for name, _ in COCO_AREAS})


def _added(counts: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Two counts by id, the shorter one padded with zeros."""
    size = max(len(counts), len(other))
    return (np.pad(counts, (0, size - len(counts)))
            + np.pad(other, (0, size - len(other))))


@dataclass
class SplitTally:
    """A split's statistics before they are summed up: counts and `ValueCounts`, which
    add up shard by shard (and subtract, for dropped copies), so a pipeline sums them
    with a combiner and no step holds a fact a record (`ShardFacts.tally`)."""

    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # by id
    unlabeled: int = 0
    formats: Counter = field(default_factory=Counter)  # of records with an image
    channels: Counter = field(default_factory=Counter)
    heights: ValueCounts = field(default_factory=ValueCounts)
    widths: ValueCounts = field(default_factory=ValueCounts)
    sizes: ValueCounts = field(default_factory=ValueCounts)
    turns: Counter = field(default_factory=Counter)  # `TURNS_COUNTED`' names
    objects: ObjectTally | None = None  # of detection records
    clips: int = 0
    frames: int = 0
    duration_us: int = 0

    def _combined(self, other: SplitTally, sign: int) -> SplitTally:
        def counter(mine: Counter, theirs: Counter) -> Counter:
            found = Counter(mine)
            found.update({key: sign * n for key, n in theirs.items()})
            return +found

        values = ValueCounts.__add__ if sign > 0 else ValueCounts.__sub__
        objects = self.objects
        if other.objects is not None:
            objects = (objects or ObjectTally())
            objects = objects + other.objects if sign > 0 else objects - other.objects
        return SplitTally(
            _added(self.labels, sign * other.labels), self.unlabeled + sign * other.unlabeled,
            counter(self.formats, other.formats), counter(self.channels, other.channels),
            values(self.heights, other.heights), values(self.widths, other.widths),
            values(self.sizes, other.sizes), counter(self.turns, other.turns), objects,
            self.clips + sign * other.clips, self.frames + sign * other.frames,
            self.duration_us + sign * other.duration_us)

    def __add__(self, other: SplitTally) -> SplitTally:
        return self._combined(other, 1)

    def __sub__(self, other: SplitTally) -> SplitTally:
        return self._combined(other, -1)

    def statistics(self, num_classes: int, objects: bool = False) -> SplitStatistics:
        """The split's `SplitStatistics` (with `objects`, its detection boxes too)."""
        counts = tuple(_added(np.zeros(num_classes, np.int64), self.labels).tolist())
        if not self.formats:
            return SplitStatistics(counts, self.unlabeled)
        return SplitStatistics(
            counts, self.unlabeled,
            image_height=self.heights.distribution(), image_width=self.widths.distribution(),
            image_bytes=self.sizes.distribution(),
            image_formats={STORED_FORMATS[i]: n for i, n in sorted(self.formats.items())},
            image_channels=dict(sorted(self.channels.items())),
            objects=self.objects.statistics(num_classes)
            if objects and self.objects is not None else None,
            orientation={name: self.turns[name] for name, _ in TURNS_COUNTED
                         if self.turns[name]})

    def clip_counts(self) -> dict[str, float]:
        """The split's clips, stored frames and seconds (the manifest's `media.counts`)."""
        return {"clips": self.clips, "frames": self.frames,
                "seconds": round(self.duration_us / 1e6, 3)}


def turned_images(facts: Sequence[ShardFacts]) -> dict[str, int]:
    """How many images of these shards their EXIF orientation turned, by what it turned
    (`rows.TURNS_COUNTED`; those it did not are left out): none, for most datasets."""
    turns = [np.frombuffer(shard.turns, np.int8) for shard in facts
             if len(shard.turns) == len(shard)]
    turns = np.concatenate([np.empty(0, np.int8), *turns])
    found = {name: int(((turns & bit) != 0).sum()) for name, bit in TURNS_COUNTED}
    return {name: n for name, n in found.items() if n}


def _label_counts(facts: ShardFacts) -> tuple[np.ndarray, int]:
    """Records of each class and records without a label: one bincount of the ids where
    each record has one id or none (at C speed), else label by label (multi-label)."""
    ids = facts.labels.ids()
    if ids is not None:
        return np.bincount(ids[ids >= 0]).astype(np.int64), int((ids < 0).sum())
    labels = facts.labels.tolist()
    ids = [i for label in labels if label is not None
           for i in (label if isinstance(label, list) else [label])]
    return (np.bincount(np.asarray(ids, dtype=np.int64)).astype(np.int64),
            sum(1 for label in labels if label is None))


def _distribution(values: np.ndarray, digits: int | None = None) -> Distribution:
    """Range, quartiles and mean; whole numbers' range as ints, or every number rounded
    to `digits` (for fractions such as box sizes)."""
    q1, median, q3 = np.percentile(values, [25, 50, 75]).tolist()
    if digits is None:
        return Distribution(int(values.min()), q1, median, q3, int(values.max()),
                            round(float(values.mean()), 2))
    return Distribution(*(round(float(v), digits) for v in (
        values.min(), q1, median, q3, values.max(), values.mean())))


@dataclass(frozen=True)
class Located:
    """A stored copy of an image: which shard holds it, at which record; with its
    record's label and facts (`ShardFacts.take`), which the copy's report and a dropped
    copy's statistics need (and which a pipeline's finish step has no shard's facts to
    look up in)."""

    split: Split
    shard: int  # index among the run's shards, in writing order
    record: int
    position: int  # the row's position in the table
    label: object = field(default=None, compare=False)  # as `Row.label`
    facts: ShardFacts | None = field(default=None, compare=False, repr=False)


def candidate_duplicates(shards: Sequence[tuple[Split, str, ShardFacts]]
                         ) -> list[list[Located]]:
    """Copies of images whose content hashes match (xxh3-128, which workers take at 60x
    the speed of SHA-256), for `finish` to confirm byte by byte: a match is nearly
    always a duplicate, but a crafted collision must not cost a row. `shards` are
    (split, file name, facts) in writing order.

    Records are ranked by their hashes' first 64 bits alone, and only the few whose first
    words match are compared whole: about 25 bytes a record for the while, where sorting
    the 16-byte hashes took 100."""
    if not shards:
        return []
    facts = [shard_facts for _, _, shard_facts in shards]
    firsts = np.concatenate([np.frombuffer(f.digests, np.uint64)[::2] for f in facts])
    with_image = np.concatenate([np.frombuffer(f.formats, np.int8) for f in facts]
                                ) != NO_IMAGE
    starts = np.cumsum([0, *(len(f.formats) for f in facts)])
    if with_image.all():  # the common case: no index of them
        order = np.argsort(firsts)
    else:
        with_image = np.flatnonzero(with_image)
        order = with_image[np.argsort(firsts[with_image])]
    ranked = firsts[order]
    del firsts
    same = np.flatnonzero(ranked[1:] == ranked[:-1])  # ranks whose next has its first word
    matching = np.union1d(same, same + 1)  # the records of those runs, by rank
    groups: dict[bytes, list[Located]] = {}
    for i in sorted(order[matching].tolist()):  # in writing order
        shard = int(np.searchsorted(starts, i, side="right")) - 1
        record = i - int(starts[shard])
        groups.setdefault(facts[shard].digest(record), []).append(
            Located(shards[shard][0], shard, record, facts[shard].positions[record],
                    facts[shard].labels[record], facts[shard].take([record])))
    return [copies for copies in groups.values() if len(copies) > 1]


def describe_duplicates(groups: Iterable[tuple[str, list[Located]]],
                        filenames: Sequence[str], index: pd.Index,
                        image_uris: Sequence[str], labels: Labels | None
                        ) -> list[tuple[Duplicate, list[Located]]]:
    """Each confirmed group (its SHA-256 prefix in hex, its copies) as the manifest's
    `Duplicate`, copies in writing order (train first, then by row): the first copy is
    the one `duplicates="drop"` keeps. `filenames` are the shards', in writing order;
    `index` and `image_uris` are the table's."""
    found = []
    for digest, copies in groups:
        copies = sorted(copies, key=lambda c: (SPLITS.index(c.split), c.position))
        first = copies[0]
        duplicate = Duplicate(
            digest,
            tuple(Copy(_row_label(index, c.position), str(image_uris[c.position]), c.split,
                       _label_name(c.label, labels),
                       row_word=row_word(index))
                  for c in copies),
            filenames[first.shard], first.record)
        found.append((duplicate, copies))
    found.sort(key=lambda item: (SPLITS.index(item[1][0].split), item[1][0].position))
    return found


def _row_label(index: pd.Index, position: int) -> int | str:
    """The row as the table names it (JSON keeps ints and text; anything else as text)."""
    label = index[position]
    if isinstance(label, (int, np.integer)):
        return int(label)
    return label if isinstance(label, str) else str(label)


def _label_name(label, labels: Labels | None):
    if label is None:
        return None
    if isinstance(label, list):
        return [_label_name(i, labels) for i in label]
    if labels is not None and labels.vocabulary is not None:
        return labels.vocabulary[label]
    return str(label)


def dropped_copies(found: Iterable[tuple[Duplicate, list[Located]]]) -> dict[Located, str]:
    """Every copy but the first of each duplicated image, with why it was dropped."""
    reasons = {}
    for duplicate, copies in found:
        kept, first = duplicate.copies[0], copies[0]
        for copy, where in zip(duplicate.copies[1:], copies[1:]):
            why = (f"duplicate image: the same bytes as {kept.named} "
                   f"({kept.image_uri}, {kept.split}), which is kept")
            if where.split != first.split:
                why += f", the copy in the first split ({first.split}) so that {copy.split} " \
                       "holds no image the model trains on"
            else:
                why += ", the first copy in the table"
            if copy.label != kept.label:
                why += f"; its label {copy.label!r} differs from the kept {kept.label!r}"
            reasons[where] = why
    return reasons

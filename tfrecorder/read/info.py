"""`info()`: what a dataset holds, from its manifest alone.

The writer gathers every number here while it writes (`statistics`), so `info` reads one
small file: it answers in well under a second for a million images in a bucket, and never
imports TensorFlow. `DatasetInfo` is also what `load(..., with_info=True)` returns, what
`tfrecorder info` prints, and what the HTML report is drawn from.
"""

from __future__ import annotations

import html
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from tfrecorder.format.layouts import layout_of
from tfrecorder.format.manifest import (
    AnnotationCounts,
    Feature,
    Labels,
    Manifest,
    Rejected,
    Split,
    SplitInfo,
    read_manifest,
)
from tfrecorder.format.manifest_statistics import (
    COCO_AREAS,
    TINY_BOX_FRACTION,
    TINY_BOX_PIXELS,
    Duplicate,
    ObjectStatistics,
    SplitStatistics,
)
from tfrecorder.storage import fs
from tfrecorder.wording import count, one_slip_apart

logger = logging.getLogger(__name__)

# AutoML Vision's guidance: the largest class at most 100 times the smallest.
MAX_CLASS_RATIO = 100
# AutoML's and Vertex AI's minimum for object detection: 10 boxes of each label. Fewer in
# train, and a detector cannot learn the class.
MIN_BOXES_PER_CLASS = 10
_ROWS_NAMED = 5  # rows a warning names before "and N more"
# A class one typing slip from another (`dgo` beside `dog`) is warned of when the other
# is at least this many times as common: then it is likely a slip, not a second class.
SLIP_RATIO = 10


def info(path: str | os.PathLike) -> DatasetInfo:
    """What the dataset in `path` (a folder, or a gs://, s3:// or other fsspec URI) holds:
    its classes, features, splits and their shards, records per class and split (objects,
    for detection), image sizes, formats and channels, a detection dataset's boxes,
    rejected rows by reason, and images stored more than once. Reads the manifest only."""
    path = os.fspath(path)
    return DatasetInfo(path, read_manifest(path))


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset, as its manifest describes it. Class names index label ids (for integer
    labels, the ids as text); splits are keyed by name ("train")."""

    path: str
    manifest: Manifest

    # --- what the dataset holds ------------------------------------------------------------

    @property
    def labels(self) -> Labels | None:
        return self.manifest.labels

    @property
    def class_names(self) -> tuple[str, ...]:
        labels = self.manifest.labels
        return () if labels is None else labels.class_names

    @property
    def num_classes(self) -> int | None:
        labels = self.manifest.labels
        return None if labels is None else labels.num_classes

    @property
    def multi_label(self) -> bool:
        return bool(self.manifest.labels and self.manifest.labels.multi_label)

    @property
    def features(self) -> Mapping[str, Feature]:
        return self.manifest.features

    @property
    def splits(self) -> dict[str, SplitInfo]:
        return {str(name): split for name, split in self.manifest.splits.items()}

    @property
    def num_records(self) -> int:
        return self.manifest.num_records

    @property
    def statistics(self) -> dict[str, SplitStatistics]:
        """Per split, what the writer saw ({} for datasets written before tfrecorder kept
        statistics)."""
        return {str(name): s for name, s in self.manifest.statistics.items()}

    @property
    def task(self) -> str:
        """What the labels describe: "classification", "detection" or "segmentation"."""
        return self.manifest.task

    @property
    def counted(self) -> str:
        """What `class_counts` counts: "objects" (boxes) for detection and object
        tracking, "segments" for action recognition, "clips" for a video or audio
        dataset's clip labels, else "records"."""
        if self.task in ("detection", "object_tracking"):
            return "objects"
        if self.task == "action_recognition":
            return "segments"
        return "clips" if self.manifest.media is not None else "records"

    @property
    def media(self) -> dict[str, dict[str, float]]:
        """Per split of a video or audio dataset: its `clips`, stored `frames` (0 for
        audio) and `seconds`, as the writer counted them ({} for other datasets)."""
        media = self.manifest.media
        if media is None:
            return {}
        return {str(split): {"clips": int(c.get("clips", 0)), "frames": int(c.get("frames", 0)),
                             "seconds": float(c.get("seconds", 0.0))}
                for split, c in media.counts.items()}

    @property
    def media_kind(self) -> str | None:
        """"video" or "audio"; None for a dataset of images or of a table."""
        return self.manifest.media.kind if self.manifest.media is not None else None

    @property
    def class_counts(self) -> dict[str, dict[str, int]]:
        """Records per class, per split (a multi-label record counts for each label); for
        detection, objects: a box counts for its class, an image for each of its boxes."""
        names = self.class_names
        return {split: dict(zip(names, s.class_counts))
                for split, s in self.statistics.items()}

    @property
    def unlabeled(self) -> dict[str, int]:
        """Per split, records stored without a label (rows whose label was blank;
        `load(as_supervised=True)` leaves them out); {} when every record has one."""
        if not self.manifest.unlabeled():
            return {}
        return {split: self.manifest.unlabeled(split) for split in self.statistics}

    @property
    def objects(self) -> dict[str, ObjectStatistics]:
        """Per split, a detection dataset's boxes: how many an image has, their sizes, and
        the images without any ({} for other tasks, and for detection datasets written
        before tfrecorder kept them)."""
        return {split: s.objects for split, s in self.statistics.items()
                if s.objects is not None}

    @property
    def class_images(self) -> dict[str, dict[str, int]]:
        """Per split, images holding an object of each class (detection; {} otherwise)."""
        names = self.class_names
        return {split: dict(zip(names, s.class_images)) for split, s in self.objects.items()}

    @property
    def orientation(self) -> dict[str, dict[str, int]]:
        """Per split, the images whose EXIF orientation turned their pixels
        (`turned_pixels`) or their boxes (`turned_boxes`), or whose view the size their
        annotation states could not tell (`ambiguous`: taken as shown); splits without
        any are left out (docs/detection.md, "EXIF orientation")."""
        return {split: dict(s.orientation) for split, s in self.statistics.items()
                if s.orientation}

    @property
    def rejected(self) -> Rejected | None:
        return self.manifest.rejected

    @property
    def skipped_annotations(self) -> dict[str, int]:
        """Annotations the source skipped (a COCO box of zero width or beyond its image),
        by reason, as TensorFlow's converters skip them: the images were written without
        them ({}: none, or written before sources skipped any)."""
        found = self.manifest.skipped_annotations
        return dict(found.reasons) if found is not None else {}

    @property
    def annotations(self) -> AnnotationCounts | None:
        """What became of a detection source's objects: how many it held, were written,
        skipped (listed in skipped_annotations.csv) or in rejected images, boxes clipped
        to the image, objects without a mask, images without an annotation file, and
        what the reading decided (notes). None: not a detection dataset, or written
        before tfrecorder counted them."""
        return self.manifest.annotations

    @property
    def label_map_ids(self) -> dict[str, int]:
        """Each class's id in `label_map.pbtxt` and the records' `image/object/class/label`
        (the tf_models layout: ids from 1, or the source's own); {} for datasets without
        a label map, whose label ids are the class's index."""
        return layout_of(self.manifest).label_map_ids(self.task)

    @property
    def duplicates(self) -> tuple[Duplicate, ...]:
        """Images stored more than once (for datasets written before tfrecorder sought
        them: empty, see `duplicates_checked`)."""
        return self.manifest.duplicates or ()

    @property
    def duplicates_checked(self) -> bool:
        return self.manifest.duplicates is not None

    @property
    def leaks(self) -> tuple[Duplicate, ...]:
        """Images in more than one split: a test image the model trains on inflates its
        test accuracy."""
        return tuple(d for d in self.duplicates if d.is_leak)

    @property
    def label_conflicts(self) -> tuple[Duplicate, ...]:
        """Images stored under different labels."""
        return tuple(d for d in self.duplicates if d.has_conflicting_labels)

    @property
    def options(self) -> Mapping:
        """The options the dataset was written with."""
        return self.manifest.options

    # --- what a person should look at -------------------------------------------------------

    @property
    def warnings(self) -> tuple[str, ...]:
        """Duplicated images, leaks between splits, images under two labels, a split that
        lacks a class train has, and classes far out of balance; for detection, classes
        with few boxes in train, tiny boxes, images without boxes and boxes without a
        class; what became of a detection source's objects (images without an annotation
        file, objects without a mask, clipped boxes, the reading's notes); and a class
        name one typing slip from a far commoner one."""
        return (*_duplicate_warnings(self.duplicates), *_balance_warnings(self),
                *_object_warnings(self), *_annotation_warnings(self.annotations),
                *_orientation_warnings(self), *_slip_warnings(self))

    # --- forms ----------------------------------------------------------------------------

    def to_json(self) -> dict:
        """Plain data for scripts (`tfrecorder info --json`)."""
        return {
            "path": self.path,
            "task": self.task,
            "num_records": self.num_records,
            "class_names": list(self.class_names),
            "num_classes": self.num_classes,
            "multi_label": self.multi_label,
            "features": {name: f.to_json() for name, f in self.features.items()},
            "splits": {name: {"num_records": s.num_records, "num_rejected": s.num_rejected,
                              "num_bytes": s.num_bytes, "num_shards": len(s.shards)}
                       for name, s in self.splits.items()},
            "class_counts": self.class_counts,
            "unlabeled": self.unlabeled,
            "statistics": {name: s.to_json() for name, s in self.statistics.items()},
            "rejected": self.rejected.to_json() if self.rejected else None,
            "skipped_annotations": (self.manifest.skipped_annotations.to_json()
                                    if self.manifest.skipped_annotations else None),
            "annotations": self.annotations.to_json() if self.annotations else None,
            "label_map_ids": self.label_map_ids,
            "media": ({"kind": self.media_kind, "stored": self.manifest.media.stored,
                       "counts": self.media} if self.media_kind else None),
            "duplicates": ([d.to_json() for d in self.duplicates]
                           if self.duplicates_checked else None),
            "warnings": list(self.warnings),
            "options": dict(self.options),
            "created_by": self.manifest.created_by,
        }

    def __repr__(self) -> str:
        counts = ", ".join(f"{name} {s.num_records:,}" for name, s in self.splits.items())
        classes = (f", {count(self.num_classes, 'class', 'classes')}"
                   if self.num_classes is not None else "")
        if self.objects:
            classes += f", {count(sum(s.num_boxes for s in self.objects.values()), 'object')}"
        if self.unlabeled:
            classes += f", {sum(self.unlabeled.values()):,} without a label"
        if self.media:
            totals = {key: sum(c[key] for c in self.media.values())
                      for key in ("clips", "frames", "seconds")}
            classes += (f", {self.media_kind}: {count(totals['clips'], 'clip')}"
                        + (f", {count(totals['frames'], 'frame')}" if totals["frames"] else "")
                        + f", {duration(totals['seconds'])}")
        warned = f", {count(len(self.warnings), 'warning')}" if self.warnings else ""
        return (f"<DatasetInfo {self.path!r}: {count(self.num_records, 'record')} ({counts})"
                f"{classes}{warned}>")

    def _repr_html_(self) -> str:
        return html_summary(self, thumbnail_strip(self))


def duration(seconds: float) -> str:
    """'42.5 s', '12 min 5 s', '3 h 20 min'."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _duplicate_warnings(duplicates: tuple[Duplicate, ...]) -> list[str]:
    found = []
    dropped = sum(not c.kept for d in duplicates for c in d.copies)
    if duplicates:
        copies = sum(len(d.copies) for d in duplicates) - len(duplicates)
        what = (f"dropped {dropped} (kept the first of each; see rejected.csv)" if dropped
                else "wrote every copy")
        found.append(f"{_are(duplicates, 'image')} stored more than once "
                     f"({count(copies, 'extra copy', 'extra copies')}; {what}): "
                     f"{_copies(duplicates)}")
    leaks = [d for d in duplicates if d.is_leak]
    if leaks:
        found.append(f"{_are(leaks, 'image')} in more than one split, which inflates test "
                     f"accuracy{' (now only in the first)' if dropped else ''}: "
                     f"{_copies(leaks)}")
    conflicts = [d for d in duplicates if d.has_conflicting_labels]
    if conflicts:
        found.append(f"{count(len(conflicts), 'image')} "
                     f"{'has' if len(conflicts) == 1 else 'have'} different labels in "
                     f"different rows: {_copies(conflicts, labels=True)}")
    return found


def _are(things, noun: str) -> str:
    """'1 image is', '3 images are'."""
    return f"{count(len(things), noun)} {'is' if len(things) == 1 else 'are'}"


def _copies(duplicates, labels: bool = False) -> str:
    shown = []
    for duplicate in duplicates[:_ROWS_NAMED]:
        shown.append(" = ".join(
            f"{c.named} ({c.split}{f', {c.label!r}' if labels else ''})"
            for c in duplicate.copies))
    more = len(duplicates) - _ROWS_NAMED
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _balance_warnings(info: DatasetInfo) -> list[str]:
    counts, counted = info.class_counts, info.counted
    found = []
    train = counts.get(str(Split.TRAIN), {})
    for split, by_class in counts.items():
        if split != Split.TRAIN:
            missing = [name for name, n in train.items() if n and not by_class.get(name)]
            if missing:
                found.append(f"{split} has no {counted} of "
                             f"{count(len(missing), 'class', 'classes')} that train has: "
                             f"{_names(missing)}")
        present = {name: n for name, n in by_class.items() if n}
        if len(present) > 1:
            largest = max(present, key=present.get)
            smallest = min(present, key=present.get)
            if present[largest] > MAX_CLASS_RATIO * present[smallest]:
                found.append(
                    f"in {split}, the largest class {largest!r} ({present[largest]:,} "
                    f"{counted}) has more than {MAX_CLASS_RATIO}x the smallest {smallest!r} "
                    f"({present[smallest]:,}); AutoML advises at most {MAX_CLASS_RATIO}x")
    return found


def _object_warnings(info: DatasetInfo) -> list[str]:
    """A detection dataset's: classes with fewer than MIN_BOXES_PER_CLASS boxes in train
    (the first split when there is no train), and per split, tiny boxes, images without
    boxes, and boxes without a class."""
    objects = info.objects
    if not objects:
        return []
    found = []
    first = str(Split.TRAIN) if str(Split.TRAIN) in objects else next(iter(objects))
    few = {name: n for name, n in info.class_counts.get(first, {}).items()
           if n < MIN_BOXES_PER_CLASS}
    if few:
        shown = ", ".join(f"{name!r} ({n})" for name, n in list(few.items())[:_ROWS_NAMED])
        more = f" and {len(few) - _ROWS_NAMED} more" if len(few) > _ROWS_NAMED else ""
        found.append(f"{first} has fewer than {MIN_BOXES_PER_CLASS} boxes of "
                     f"{count(len(few), 'class', 'classes')}: {shown}{more}; a detector "
                     f"learns little from so few (AutoML asks for at least "
                     f"{MIN_BOXES_PER_CLASS} per class)")
    for split, s in objects.items():
        if s.tiny_boxes:
            found.append(
                f"in {split}, {s.tiny_boxes:,} of {count(s.num_boxes, 'box', 'boxes')} "
                f"{'is' if s.tiny_boxes == 1 else 'are'} tiny (an edge under "
                f"{TINY_BOX_FRACTION:.0%} of the image's side or under {TINY_BOX_PIXELS} "
                f"pixels, the least AutoML trains on): check they are not slips of the "
                f"annotation tool")
        if s.without_boxes:
            images = info.splits[split].num_records if split in info.splits else 0
            found.append(
                f"in {split}, {s.without_boxes:,} of {count(images, 'image')} "
                f"{'has' if s.without_boxes == 1 else 'have'} no boxes: a detector learns "
                f"them as background only (check none lost its boxes)")
        if s.all_unlabeled:
            found.append(
                f"in {split}, {count(s.all_unlabeled, 'image')} "
                f"{'has' if s.all_unlabeled == 1 else 'have'} boxes of which none has a "
                f"class ({count(s.unlabeled_boxes, 'box', 'boxes')} without a class in "
                f"all)")
        elif s.unlabeled_boxes:
            found.append(f"in {split}, {count(s.unlabeled_boxes, 'box', 'boxes')} "
                         f"{'has' if s.unlabeled_boxes == 1 else 'have'} no class")
    return found


def _annotation_warnings(counts: AnnotationCounts | None) -> list[str]:
    """What a detection source's reading decided that a person should know of."""
    if counts is None:
        return []
    found = []
    if counts.unannotated_images:
        shown = ", ".join(map(repr, counts.unannotated_examples))
        more = counts.unannotated_images - len(counts.unannotated_examples)
        shown += f" and {more:,} more" if shown and more > 0 else ""
        found.append(
            f"{count(counts.unannotated_images, 'image')} had no annotation file (an XML, a "
            f"label file) and {'was' if counts.unannotated_images == 1 else 'were'} written "
            f"as {'an image' if counts.unannotated_images == 1 else 'images'} without "
            "objects, as the format means it"
            + (f" ({shown})" if shown else "") + ": check none lost its file")
    if counts.without_mask:
        found.append(
            f"{count(counts.without_mask, 'object')} had no segmentation beside objects "
            "that had one: their masks are empty (all zero), which a Mask R-CNN trains as "
            "'no pixels'")
    if counts.clipped:
        found.append(
            f"{count(counts.clipped, 'box', 'boxes')} reached a little past the image's "
            f"edge and {'was' if counts.clipped == 1 else 'were'} clipped to it")
    found.extend(counts.notes)
    return found


def _slip_warnings(info: DatasetInfo) -> list[str]:
    """Classes one typing slip from a class `SLIP_RATIO` times as common (`dgo` beside
    forty `dog`s): the column-name check's rule (`wording.one_slip_apart`), for labels."""
    totals: dict[str, int] = {}
    for counts in info.class_counts.values():
        for name, n in counts.items():
            totals[name] = totals.get(name, 0) + n
    # Names one slip apart share a form with one letter left out (or are it): an index
    # of those forms finds each name's candidates without comparing every pair (an
    # ImageNet-21k vocabulary has 21,841 names).
    forms: dict[str, set[str]] = {}
    for name in totals:
        for form in _one_out(name.casefold()):
            forms.setdefault(form, set()).add(name)
    order = {name: k for k, name in enumerate(totals)}
    found = []
    for rare, n in totals.items():
        near = set().union(*(forms[form] for form in _one_out(rare.casefold())))
        common = max((name for name in sorted(near, key=order.get)
                      if totals[name] >= SLIP_RATIO * max(n, 1)
                      and _slip(rare.casefold(), name.casefold())),
                     key=totals.get, default=None)
        if common is not None:
            found.append(f"the class {rare!r} ({count(n, info.counted[:-1])}) is one typing slip "
                         f"from {common!r} ({totals[common]:,}): if it is a misspelling, "
                         "fix the annotations, or it is learned as a class of its own")
    return found


def _one_out(name: str) -> set[str]:
    """The name, and each form of it with one letter left out."""
    return {name, *(name[:i] + name[i + 1:] for i in range(len(name)))}


def _slip(rare: str, common: str) -> bool:
    """One typing slip apart; between names under five letters, only two letters
    swapped (`dgo`, `dog`): `car` and `cat`, `a` and `b` are classes, not slips."""
    if not one_slip_apart(rare, common):
        return False
    return min(len(rare), len(common)) >= 5 or sorted(rare) == sorted(common)


def _orientation_warnings(info: DatasetInfo) -> list[str]:
    """Images whose EXIF orientation left it unclear which view their boxes describe."""
    ambiguous = sum(counts.get("ambiguous", 0) for counts in info.orientation.values())
    if not ambiguous:
        return []
    one = ambiguous == 1
    return [f"{count(ambiguous, 'image')} with an EXIF orientation {'is' if one else 'are'} "
            f"square or only flipped, so the size {'its' if one else 'their'} "
            f"annotation states cannot tell which view its boxes describe: taken as the "
            f"shown view that labelling tools show; check a few (tfrecorder show), or write "
            f"them with orientation=\"stored\" if they were labelled unturned"]


def box_areas(objects: ObjectStatistics) -> dict[str, int]:
    """Boxes by COCO's area classes (small, medium, large), each named with its range."""
    named, low = {}, None
    for name, limit in COCO_AREAS:
        if low is None:
            span = f"< {math.isqrt(limit)}²"
        elif limit is None:
            span = f"≥ {math.isqrt(low)}²"
        else:
            span = f"{math.isqrt(low)}²–{math.isqrt(limit)}²"
        named[f"{name} ({span} pixels)"] = objects.box_areas.get(name, 0)
        low = limit
    return named


def _names(names: list[str]) -> str:
    shown = ", ".join(map(repr, names[:_ROWS_NAMED]))
    return shown + (f" and {len(names) - _ROWS_NAMED} more" if len(names) > _ROWS_NAMED
                    else "")


# --- notebooks -------------------------------------------------------------------------------

def html_summary(info: DatasetInfo, thumbnails: str = "") -> str:
    """A small HTML summary for notebooks: records (objects, for detection) per class
    and split, warnings."""
    splits = list(info.splits)
    head = "".join(f"<th>{html.escape(name)}</th>" for name in splits)
    rows = []
    for name in info.class_names:
        cells = "".join(f"<td>{info.class_counts.get(split, {}).get(name, '')}</td>"
                        for split in splits)
        rows.append(f"<tr><th>{html.escape(name)}</th>{cells}</tr>")
    if info.unlabeled:
        cells = "".join(f"<td>{info.unlabeled.get(split, '')}</td>" for split in splits)
        rows.append(f"<tr><th>(no label)</th>{cells}</tr>")
    totals = "".join(f"<td><b>{s.num_records:,}</b></td>" for s in info.splits.values())
    if info.objects:
        objects = "".join(f"<td><b>{info.objects[split].num_boxes:,}</b></td>"
                          if split in info.objects else "<td></td>" for split in splits)
        rows.append(f"<tr><th>all objects</th>{objects}</tr>")
        rows.append(f"<tr><th>images</th>{totals}</tr>")
    else:
        rows.append(f"<tr><th>all</th>{totals}</tr>")
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in info.warnings)
    rejected = info.rejected.num_rows if info.rejected else 0
    return (
        f"<div class='tfrecorder'><b>{html.escape(fs.basename(info.path) or info.path)}"
        f"</b>: {info.num_records:,} records, {rejected:,} rows rejected"
        f"<table><tr><th>{_class_heading(info)}</th>{head}</tr>{''.join(rows)}</table>"
        + (f"<ul style='color:#a04000'>{warnings}</ul>" if warnings else "")
        + thumbnails + "</div>")


def _boxed(thumbnail, size: int):
    """A thumbnail's image with its boxes drawn in (a copy), as `show` draws them."""
    if not thumbnail.objects:
        return thumbnail.image
    from tfrecorder.read.drawing import draw_objects

    image = thumbnail.image.copy()
    draw_objects(image, thumbnail.objects, max(8, size // 8))
    return image


def _class_heading(info: DatasetInfo) -> str:
    return "class (objects)" if info.objects else "class"


def thumbnail_strip(info: DatasetInfo, count: int = 8, size: int = 64) -> str:
    """A few thumbnails, one per class first, as inline images; "" for a dataset without
    images, or whose images cannot be read now (a notebook's display must not fail)."""
    if not (info.manifest.has_images or info.manifest.media) or not info.splits:
        return ""
    from tfrecorder.read.drawing import png_data_uri  # Pillow: when a notebook asks
    from tfrecorder.read.thumbnails import thumbnails

    try:
        found = thumbnails(info.path, next(iter(info.splits)), per_class=1, size=size)
    except Exception as error:  # noqa: BLE001  a display: say nothing rather than fail
        logger.debug("no thumbnails for %s: %s", info.path, error)
        return ""
    images = "".join(
        f"<img src='{png_data_uri(_boxed(t, size))}' title='"
        f"{html.escape(t.class_name or t.split)}: {html.escape(t.image_name)}' "
        "style='margin:2px'>" for t in found[:count])
    return f"<div>{images}</div>"


"""The record checks of `verify()`: parse every record, check its values, decode its image.

Apart from `verify` because it is the only part that needs TensorFlow: `verify()` imports
this module only when asked to decode, so checking files, framing, checksums and counts
(`decode_images=False`) never pays TensorFlow's seconds of import.

Decoding is nearly all of the cost, so every record goes through one `tf.data` pipeline
(a parallel map) that only says which records failed; those few are then parsed again,
eagerly, one by one, to say why. Each value rule (ids in range, the split of the shard,
a detection record's boxes and how many of each per-object value it has, its masks) is
stated once, in `offending`, which works on graph and eager tensors alike: the pipeline
asks whether it found anything, the describing pass words what it found.

Records are read through their layout's read form (`Layout.canonical`), so the rules and
the image checks name features by their canonical names (`image`, `objects/bbox`, ...)
in either layout; messages name the stored key where it differs.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from tqdm.auto import tqdm

from tfrecorder._tensorflow import tensorflow
from tfrecorder.format.layouts import (
    AREA,
    BBOX,
    IS_CROWD,
    KEYPOINT_VISIBILITY,
    KEYPOINTS,
    MASK,
    NUM_KEYPOINTS,
    OBJECT_LABEL,
    SEGMENTATION_MASK,
    Layout,
    layout_of,
)
from tfrecorder.format.manifest import (
    DECODE_FEATURES,
    LABEL,
    MANIFEST,
    NO_LABEL,
    SIGNATURES,
    SPLIT,
    Manifest,
)
from tfrecorder.read.decoding import decode_image
from tfrecorder.read.shards import shard_reader, shard_records
from tfrecorder.read.verify import Check, Problem, ReadableShard
from tfrecorder.storage import fs
from tfrecorder.wording import count

logger = logging.getLogger(__name__)
tf = tensorflow()  # verify imports this module only to decode, when asked

_BATCH = 256  # records per batch handed from the checking pipeline to Python
_SHOWN_IDS = 5  # out-of-range ids quoted per record
_SHOWN_BOXES = 3  # bad boxes quoted per record


def check_records(manifest: Manifest, shards: Sequence[ReadableShard], progress: bool
                  ) -> tuple[int, int, list[Problem]]:
    """Parses every record of `shards` and checks it as far as the manifest allows.

    Returns how many records parsed, how many images decoded to their recorded shape,
    and the problems: the manifest's own that rule a check out, then each failing record's.
    """
    checks, problems = _record_checks(manifest)
    if not shards:
        return 0, 0, problems
    num_parsed, num_decoded, found = _check_records(manifest, shards, checks, progress)
    return num_parsed, num_decoded, problems + found


class _ValueRule(Protocol):
    """A rule on a parsed record's values, stated once for the pipeline and the
    describing pass."""

    check: ClassVar[Check]

    def offending(self, features: dict, split) -> tf.Tensor:
        """The values that break the rule (none in a sound record), from the parsed
        `features` (graph or eager tensors) and the split of the record's shard."""

    def describe(self, offending: np.ndarray, split: str) -> str:
        """The problem's detail, from what `offending` found (never empty here)."""


@dataclass(frozen=True)
class _IdRange:
    """The ids a feature's values must be: 0 to `size` - 1."""

    check: ClassVar[Check] = Check.IDS
    feature: str  # the canonical name
    size: int
    described: str  # what the ids index, for the message
    stored: str | None = None  # the key the layout stores it under, where not its name
    # What a record stored without the feature parses as (an unlabelled row's label),
    # where the manifest counts such records; None: every record must hold an id.
    absent: int | None = None

    def offending(self, features: dict, split) -> tf.Tensor:
        ids = _flat(features[self.feature])
        wrong = (ids >= self.size) | (ids < 0)
        if self.absent is not None:
            wrong &= ids != self.absent
        return tf.boolean_mask(ids, wrong)

    def describe(self, offending: np.ndarray, split: str) -> str:
        bad = offending.tolist()
        shown = ", ".join(map(str, bad[:_SHOWN_IDS])) + (", ..." if len(bad) > _SHOWN_IDS
                                                          else "")
        read = f" (as load() reads {self.stored})" if self.stored else ""
        return (f"{self.feature} id{'s' if len(bad) > 1 else ''} {shown}{read} "
                f"{'are' if len(bad) > 1 else 'is'} outside {self.described}")


@dataclass(frozen=True)
class _SplitOfShard:
    """The `split` feature names (in any case) the split of the record's shard."""

    check: ClassVar[Check] = Check.SPLIT

    def offending(self, features: dict, split) -> tf.Tensor:
        recorded = tf.reshape(features[SPLIT], [-1])
        return tf.boolean_mask(recorded, tf.not_equal(tf.strings.lower(recorded), split))

    def describe(self, offending: np.ndarray, split: str) -> str:
        return (f"split is {_text(offending[0])!r}, but the record is in a shard of the "
                f"{split} split")


@dataclass(frozen=True)
class _Boxes:
    """A detection record's boxes are (ymin, xmin, ymax, xmax) inside [0, 1], with
    ymin < ymax and xmin < xmax, as the writer's sources require."""

    check: ClassVar[Check] = Check.BOXES

    def offending(self, features: dict, split) -> tf.Tensor:
        boxes = tf.reshape(features[BBOX], [-1, 4])
        inside = tf.reduce_all((boxes >= 0) & (boxes <= 1), axis=1)  # NaN is not
        ordered = (boxes[:, 0] < boxes[:, 2]) & (boxes[:, 1] < boxes[:, 3])
        return tf.boolean_mask(boxes, ~(inside & ordered))

    def describe(self, offending: np.ndarray, split: str) -> str:
        shown = "; ".join(
            "[" + ", ".join(f"{v:.6g}" for v in box.tolist()) + "]"
            for box in offending[:_SHOWN_BOXES]) + ("; ..." if len(offending) > _SHOWN_BOXES
                                                    else "")
        return (f"{count(len(offending), 'box', 'boxes')} of {BBOX} "
                f"{'is' if len(offending) == 1 else 'are'} not (ymin, xmin, ymax, xmax) "
                f"inside [0, 1] with ymin < ymax and xmin < xmax: {shown}")


@dataclass(frozen=True)
class _ObjectCounts:
    """A detection record has as many of each per-object value (classes, areas,
    is_crowd, masks, keypoints) as it has boxes."""

    check: ClassVar[Check] = Check.OBJECTS
    features: tuple[str, ...]  # the per-object features besides the boxes, canonical

    def offending(self, features: dict, split) -> tf.Tensor:
        """Every count, the boxes' first, if any differs; none otherwise."""
        counts = tf.stack([tf.shape(features[BBOX], out_type=tf.int64)[0]] + [
            tf.shape(features[name], out_type=tf.int64)[0] for name in self.features])
        differ = tf.reduce_any(tf.not_equal(counts, counts[0]))
        return tf.boolean_mask(counts, tf.fill(tf.shape(counts), differ))

    def describe(self, offending: np.ndarray, split: str) -> str:
        boxes, *others = offending.tolist()
        wrong = [f"{number} {name}" for name, number in zip(self.features, others)
                 if number != boxes]
        return (f"{count(boxes, 'box', 'boxes')}, but {' and '.join(wrong)}: each object "
                "has one box and one of each of its values")


# Per object, K [y, x] pairs, K visibilities and one count: as many as boxes.
_KEYPOINT_FEATURES = (KEYPOINTS, KEYPOINT_VISIBILITY, NUM_KEYPOINTS)


@dataclass(frozen=True)
class _Masks:
    """Each instance mask is a PNG of the image's size holding only 0s and 1s; a
    segmentation mask a one-channel PNG of the image's size."""

    check: ClassVar[Check] = Check.MASK
    objects: bool  # the record has instance masks
    segmentation: bool  # the record has a segmentation mask

    def offending(self, features: dict, split) -> tf.Tensor:
        """(index, height, width, channels, largest value) of each mask at fault; index
        -1 for the segmentation mask."""
        size = tf.stack([features["image_height"], features["image_width"]])

        def fault(index, png, instance: bool):
            pixels = tf.io.decode_png(png)
            shape = tf.shape(pixels, out_type=tf.int64)
            largest = tf.cast(tf.reduce_max(pixels), tf.int64)
            bad = tf.reduce_any(tf.not_equal(shape[:2], size)) | tf.not_equal(shape[2], 1)
            if instance:
                bad |= largest > 1
            return tf.concat([[index], shape, [largest], [tf.cast(bad, tf.int64)]], 0)

        found = [tf.zeros([0, 6], tf.int64)]
        if self.objects:
            pngs = features[MASK]
            found.append(tf.map_fn(
                lambda item: fault(item[0], item[1], True),
                (tf.range(tf.size(pngs, out_type=tf.int64)), pngs),
                fn_output_signature=tf.TensorSpec([6], tf.int64)))
        if self.segmentation:
            found.append(fault(tf.constant(-1, tf.int64), features[SEGMENTATION_MASK],
                               False)[None])
        found = tf.concat(found, 0)
        return tf.boolean_mask(found[:, :5], tf.cast(found[:, 5], tf.bool))

    def describe(self, offending: np.ndarray, split: str) -> str:
        details = []
        for index, height, width, channels, largest in offending.tolist():
            what = "segmentation_mask" if index < 0 else f"{MASK} {index}"
            details.append(f"{what} is {height}x{width}x{channels}" + (
                f" with values up to {largest}" if index >= 0 and largest > 1 else ""))
        return (f"{'; '.join(details)}: a mask is one channel of the image's height x "
                "width" + (", of 0s and 1s for an object" if any(
                    i >= 0 for i in offending[:, 0].tolist()) else ""))


@dataclass(frozen=True)
class _Checks:
    """What is checked in each record besides parsing, as the manifest allows."""

    images: bool  # decode the image to its recorded shape and format
    values: tuple[_ValueRule, ...]  # ids, the shard's split, boxes, objects, masks
    layout: Layout  # reads the records' features by their canonical names


def _record_checks(manifest: Manifest) -> tuple[_Checks, list[Problem]]:
    """The checks the manifest allows, and its problems that rule some out. Features are
    looked up by the keys the manifest's layout stores them under."""
    features, problems = manifest.features, []
    layout = layout_of(manifest)
    stored = {name: layout.key(name) for name in (
        *DECODE_FEATURES, LABEL, OBJECT_LABEL, SPLIT, BBOX, AREA, IS_CROWD, MASK,
        SEGMENTATION_MASK, *_KEYPOINT_FEATURES)}
    has = {name for name, key in stored.items() if key is not None and key in features}
    present = [name for name in DECODE_FEATURES if name in has]
    if present:  # a dataset without images has none of them
        problems += [_manifest_problem(f"lists no {stored[name]!r} feature, so images "
                                       "cannot be checked")
                     for name in DECODE_FEATURES if name not in has]
    rules: list[_ValueRule] = []
    labels = manifest.labels
    for name in (LABEL, OBJECT_LABEL):
        if not labels or name not in has:
            continue
        vocabulary = labels.vocabulary
        size = labels.num_classes if labels.num_classes is not None or vocabulary is None \
            else len(vocabulary)
        key = stored[name] if stored[name] != name else None
        absent = NO_LABEL["int64"] if name == LABEL and manifest.unlabeled() else None
        if vocabulary is not None and size != len(vocabulary):
            problems.append(_manifest_problem(f"labels has num_classes {size}, but a "
                                              f"vocabulary of {len(vocabulary)} classes"))
        elif vocabulary is not None:
            rules.append(_IdRange(name, size, f"the {count(size, 'class', 'classes')} "
                                  f"of the manifest's labels (ids 0 to {size - 1})", key,
                                  absent))
        elif size is not None:  # integer labels: num_classes is the largest id + 1
            rules.append(_IdRange(name, size, f"the manifest's num_classes {size} (ids 0 "
                                  f"to {size - 1})", key, absent))
    for name in manifest.inputs:  # inputs keep their names in every layout
        vocabulary = features[name].vocabulary
        if vocabulary is not None:
            size = len(vocabulary)
            rules.append(_IdRange(name, size, f"the {count(size, 'value')} of its "
                                  f"vocabulary (ids 0 to {size - 1})"))
    if SPLIT in has:  # tf_models records carry no split: their shard names it
        rules.append(_SplitOfShard())
    if BBOX in has:
        rules.append(_Boxes())
        rules.append(_ObjectCounts(tuple(name for name in (OBJECT_LABEL, AREA, IS_CROWD, MASK,
                                                           *_KEYPOINT_FEATURES)
                                         if name in has)))
    images = len(present) == len(DECODE_FEATURES)
    if images and (MASK in has or SEGMENTATION_MASK in has):
        rules.append(_Masks(MASK in has, SEGMENTATION_MASK in has))
    return _Checks(images, tuple(rules), layout), problems


def _check_records(manifest: Manifest, shards: Sequence[ReadableShard], checks: _Checks,
                   progress: bool) -> tuple[int, int, list[Problem]]:
    """Parses every record of `shards` and checks it; returns how many parsed, how many
    images decoded to their recorded shape, and a problem for each record that failed."""
    try:
        spec = manifest.parse_spec()
    except ValueError as error:  # a feature of a shape this version cannot parse
        return 0, 0, [_manifest_problem(str(error))]
    compression = manifest.compression
    ds = _checking_pipeline(shards, spec, checks, compression)
    arrived = [np.zeros(shard.num_records, dtype=bool) for shard in shards]
    flagged = [np.zeros(shard.num_records, dtype=bool) for shard in shards]
    total = sum(shard.num_records for shard in shards)
    desc, unit = ("Decoding images", "img") if checks.images else ("Parsing records", "rec")
    with tqdm(total=total, unit=unit, desc=desc, disable=not progress) as bar:
        num_parsed, num_decoded, problems = _collect(ds, shards, arrived, flagged, bar)
        for shard, seen, bad in zip(shards, arrived, flagged):
            failed = np.flatnonzero(~seen)
            if failed.size or bad.any():
                found, parsed, decoded = _describe_failures(
                    shard, set(failed.tolist()), set(np.flatnonzero(bad).tolist()), spec,
                    checks, compression)
                problems += found
                num_parsed += parsed
                num_decoded += decoded
                bar.update(failed.size)
    return num_parsed, num_decoded, problems


def _checking_pipeline(shards: Sequence[ReadableShard], spec: dict, checks: _Checks,
                       compression: str | None):
    """Batches of one summary per record that parses (and whose image decodes): its
    shard index and record number, whether its values are sound, how many values it
    holds, and for images the decoded shape, recorded shape, format, whether the format
    matches, and the image's name."""
    # Pillow and libjpeg's checks, imported only where they are needed.
    from tfrecorder.format.image_checks import stored_image_problem

    def strict(image: bytes, image_format: bytes) -> bytes:
        return (stored_image_problem(image, image_format) or "").encode()

    read = shard_reader(fs.is_remote(shards[0].path), compression)

    def records(index, file, split):
        return read(file).enumerate().map(lambda number, record: (index, split, number, record))

    def summary(index, split, number, record):
        parsed = tf.io.parse_single_example(record, spec)
        # Lists of k-value rows are cut into rows after parsing, by ops that run only if
        # an output uses them (graph optimization drops mere control dependencies), so
        # every feature's values are counted: that checks every feature.
        parts = tf.nest.flatten(parsed, expand_composites=True)
        features = checks.layout.canonical(parsed)
        found = {"index": index, "number": number,
                 "values_ok": _values_sound(features, checks.values, split),
                 "num_values": tf.add_n([tf.constant(0, tf.int64)] + [
                     tf.size(part, out_type=tf.int64) for part in parts])}
        if checks.images:
            found.update(
                shape=tf.shape(decode_image(features), out_type=tf.int64),
                recorded=tf.stack([features["image_height"], features["image_width"],
                                   features["image_channels"]]),
                format=features["image_format"], format_ok=_format_matches(features),
                name=features["image_name"],
                # TensorFlow decodes damaged JPEG data with a mere warning (grey blocks):
                # the writer's strict checks say what TensorFlow does not.
                strict=tf.numpy_function(strict, [features["image"],
                                                  features["image_format"]], tf.string,
                                         stateful=False))
        return found

    autotune = tf.data.AUTOTUNE
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.range(len(shards), dtype=tf.int64), [shard.path for shard in shards],
         [shard.split for shard in shards]))
    ds = ds.interleave(records, cycle_length=min(len(shards), 16),
                       num_parallel_calls=autotune, deterministic=False)
    # A record that fails to parse or decode raises inside the map; ignore_errors drops
    # it, and the record numbers that never arrive are the failures.
    ds = ds.map(summary, num_parallel_calls=autotune, deterministic=False).ignore_errors()
    return ds.batch(_BATCH).prefetch(autotune)


def _values_sound(features: dict, rules: Sequence[_ValueRule], split):
    """In the pipeline: whether no rule finds a value that breaks it."""
    return tf.reduce_all(tf.stack([tf.constant(True)] + [
        tf.equal(tf.size(rule.offending(features, split)), 0) for rule in rules]))


def _flat(tensor):
    """A feature's values as one flat tensor, whether it parsed dense or ragged."""
    if isinstance(tensor, tf.RaggedTensor):
        return tensor.flat_values
    return tf.reshape(tensor, [-1])


def _collect(ds, shards: Sequence[ReadableShard], arrived: list, flagged: list, bar
             ) -> tuple[int, int, list[Problem]]:
    """Reads the pipeline's batches: marks the records that arrived and those whose values
    are not sound, and describes images that decoded to another shape or are not in their
    recorded format. Returns the records parsed, the images decoded and the problems."""
    problems, num_parsed, num_decoded = [], 0, 0
    for batch in ds.as_numpy_iterator():
        index, number = batch["index"], batch["number"]
        for i in np.unique(index):
            arrived[i][number[index == i]] = True
            flagged[i][number[(index == i) & ~batch["values_ok"]]] = True
        num_parsed += len(index)
        bar.update(len(index))
        if "shape" not in batch:
            continue
        shape, recorded, fmt_ok = batch["shape"], batch["recorded"], batch["format_ok"]
        strict_ok = batch["strict"] == b""
        good = (shape == recorded).all(axis=1) & fmt_ok & strict_ok
        num_decoded += int(good.sum())
        for k in np.flatnonzero(~good):
            where = (shards[index[k]].name, number[k], batch["name"][k])
            if not fmt_ok[k]:
                problems.append(_record_problem(
                    *where, Check.FORMAT, f"image_format is {_text(batch['format'][k])!r}, "
                    "but the image bytes are not in that format"))
            if (shape[k] != recorded[k]).any():
                problems.append(_record_problem(
                    *where, Check.SHAPE, f"the image decodes to {_hwc(shape[k])}, but the "
                    f"record says {_hwc(recorded[k])} (height x width x channels)"))
            elif fmt_ok[k] and not strict_ok[k]:
                problems.append(_record_problem(*where, Check.STRICT,
                                                _text(batch["strict"][k])))
    return num_parsed, num_decoded, problems


def _format_matches(features: dict):
    """Whether the bytes are in the recorded image_format (raw: checked by decoding)."""
    fmt, head = features["image_format"], tf.strings.substr(features["image"], 0, 8)
    matches = [tf.equal(fmt, "raw")] + [
        tf.logical_and(tf.equal(fmt, name),
                       tf.equal(tf.strings.substr(head, 0, len(magic)), magic))
        for name, magic in SIGNATURES.items()
    ]
    return tf.reduce_any(tf.stack(matches))


def _describe_failures(shard: ReadableShard, failed: set[int], flagged: set[int],
                       spec: dict, checks: _Checks, compression: str | None
                       ) -> tuple[list[Problem], int, int]:
    """Parses the records `failed` (they never left the pipeline) and `flagged` (their
    values are not sound) of `shard` one by one, eagerly, to say why. Returns the
    problems, and how many of `failed` parsed and decoded after all."""
    problems, parsed, decoded, last = [], 0, 0, max(failed | flagged)
    with contextlib.closing(shard_records(shard.path, compression)) as records:
        for number, record in enumerate(records):
            if number in failed or number in flagged:
                try:
                    stored = tf.io.parse_single_example(record, spec)
                except tf.errors.OpError as error:
                    problems.append(_record_problem(
                        shard.name, number, b"", Check.PARSE, "does not parse with the "
                        f"manifest's features: {_parse_errors(record, spec, error)}"))
                    continue
                try:
                    features = checks.layout.canonical(stored)
                except (tf.errors.OpError, ValueError) as error:  # e.g. box coordinates
                    lists = ", ".join(  # in lists of different lengths
                        f"{int(tf.size(value))} {key}" for key, value in stored.items()
                        if isinstance(spec[key], tf.io.RaggedFeature))
                    name_key = checks.layout.key("image_name")
                    problems.append(_record_problem(
                        shard.name, number, stored[name_key].numpy() if name_key in stored
                        else b"", Check.PARSE, f"its features do not make a "
                        f"{checks.layout.name} record ({_error_text(error)}); its lists "
                        f"hold {lists}"))
                    continue
                name = features["image_name"].numpy() if "image_name" in features else b""
                for rule in checks.values:
                    try:
                        offending = rule.offending(features, shard.split).numpy()
                    except tf.errors.OpError as error:  # a mask that does not decode
                        problems.append(_record_problem(
                            shard.name, number, name, rule.check,
                            f"its {rule.check} check fails: {_tf_message(error)}"))
                        continue
                    if offending.size:
                        problems.append(_record_problem(
                            shard.name, number, name, rule.check,
                            rule.describe(offending, shard.split)))
                if number in failed:
                    parsed += 1
                    if checks.images:
                        try:
                            decode_image(features)
                        except tf.errors.OpError as error:
                            problems.append(_record_problem(
                                shard.name, number, name, Check.DECODE,
                                f"the image does not decode: {_tf_message(error)}"))
                            continue
                        decoded += 1
                    logger.warning("%s, record %d: failed in the checking pipeline but "
                                   "parsed%s alone.", shard.name, number,
                                   " and decoded" if checks.images else "")
            if number >= last:
                break
    return problems, parsed, decoded


def _parse_errors(record: bytes, spec: dict, error) -> str:
    """Why a record does not parse, feature by feature (TensorFlow's message does not
    always name the feature)."""
    errors = []
    for name, feature in spec.items():
        try:
            tf.io.parse_single_example(record, {name: feature})
        except tf.errors.OpError as one:
            errors.append(f"{name}: {_tf_message(one)}")
    return "; ".join(errors) or _tf_message(error)


def _record_problem(shard: str, number: int, image_name: bytes, check: Check,
                    detail: str) -> Problem:
    return Problem(file=shard, record=int(number), check=check, detail=detail,
                   image_name=_text(image_name) if image_name else None)


def _manifest_problem(detail: str) -> Problem:
    return Problem(file=MANIFEST, check=Check.MANIFEST, detail=detail)


def _hwc(shape) -> str:
    return "x".join(str(int(v)) for v in shape)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="backslashreplace")


def _error_text(error) -> str:
    return _tf_message(error) if isinstance(error, tf.errors.OpError) else str(error)


def _tf_message(error) -> str:
    """TensorFlow's message without its op and device decorations."""
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", error.message)
    return re.sub(r"\s*\[Op:\w+\].*$", "", message, flags=re.S).strip()

"""The record checks of `verify()` for datasets of images or of a table: every record
parses with the manifest's features, its values keep the rules below, and its image
decodes, strictly, to its recorded shape and format.

Apart from `verify` because it decodes: `verify()` imports this module (and with it
Pillow and libjpeg-turbo) only when asked to. Nothing here needs TensorFlow. Records are
parsed by `example_decoding` and held to the rules `tf.io.parse_single_example` applies
to the manifest's spec (`_parse_problem`); images are checked by the writer's own checks
(`image_checks.stored_image_problem`, which decodes every byte strictly), and their
shape, as TensorFlow decodes them, is read from their headers (`decoded_shape`), so a
sound image is decoded once. `image_checks.tensorflow_decodes` tells an image `load()`
cannot decode (a `decode` problem) from one it decodes wrong (`strict`).

Each record is checked and described in one go (`_Checks.check`); records are checked on
a thread per core (`shards.checked_records`): decoding, nearly all of the cost, releases
the GIL. Each value rule (ids in range, the split of the shard, a detection record's
boxes and how many of each per-object value it has, its masks) is a small object with
the check it belongs to and the sentence of what it found.

Records are read through their layout's read form without TensorFlow (`Layout.values`),
so the rules and the image checks name features by their canonical names (`image`,
`objects/bbox`, ...) in either layout; messages name the stored key where it differs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol

from PIL import UnidentifiedImageError
from tqdm.auto import tqdm

from tfrecorder.format.example_decoding import decode_example
from tfrecorder.format.image_checks import (
    decoded_shape,
    describe_error,
    stored_image_problem,
    tensorflow_decodes,
    with_pillow,
)
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
    Feature,
    Manifest,
)
from tfrecorder.read.reader import png_pixels
from tfrecorder.read.shards import checked_records
from tfrecorder.read.verify import Check, Problem, ReadableShard
from tfrecorder.wording import count

_SHOWN_IDS = 5  # out-of-range ids quoted per record
_SHOWN_BOXES = 3  # bad boxes quoted per record


def check_records(manifest: Manifest, shards: Sequence[ReadableShard], progress: bool
                  ) -> tuple[int, int, list[Problem]]:
    """Parses every record of `shards` and checks it as far as the manifest allows.

    Returns how many records parsed, how many images decoded to their recorded shape,
    and the problems: the manifest's own that rule a check out, then each record's, in
    the order of the records.
    """
    checks, problems = _record_checks(manifest)
    if checks is None or not shards:
        return 0, 0, problems
    num_parsed = num_decoded = 0
    total = sum(shard.num_records for shard in shards)
    desc, unit = ("Decoding images", "img") if checks.images else ("Parsing records", "rec")
    with tqdm(total=total, unit=unit, desc=desc, disable=not progress) as bar:
        for _, checked in checked_records(shards, manifest.compression, checks.check):
            num_parsed += checked.parsed
            num_decoded += checked.decoded
            problems += checked.problems
            bar.update(1)
    return num_parsed, num_decoded, problems


class _ValueRule(Protocol):
    """A rule on a parsed record's values."""

    check: ClassVar[Check]

    def detail(self, values: Mapping[str, list], split: str) -> str | None:
        """What breaks the rule in a record's `values` (lists, by canonical name), in the
        shard of `split`, as the problem's detail; None for a sound record."""


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

    def detail(self, values: Mapping[str, list], split: str) -> str | None:
        bad = [i for i in values.get(self.feature, ())
               if not 0 <= i < self.size and i != self.absent]
        if not bad:
            return None
        shown = ", ".join(map(str, bad[:_SHOWN_IDS])) + (", ..." if len(bad) > _SHOWN_IDS
                                                          else "")
        read = f" (as load() reads {self.stored})" if self.stored else ""
        return (f"{self.feature} id{'s' if len(bad) > 1 else ''} {shown}{read} "
                f"{'are' if len(bad) > 1 else 'is'} outside {self.described}")


@dataclass(frozen=True)
class _SplitOfShard:
    """The `split` feature names (in any case) the split of the record's shard."""

    check: ClassVar[Check] = Check.SPLIT

    def detail(self, values: Mapping[str, list], split: str) -> str | None:
        other = [value for value in values[SPLIT] if value.lower() != split.encode()]
        if not other:
            return None
        return (f"split is {_text(other[0])!r}, but the record is in a shard of the "
                f"{split} split")


@dataclass(frozen=True)
class _Boxes:
    """A detection record's boxes are (ymin, xmin, ymax, xmax) inside [0, 1], with
    ymin < ymax and xmin < xmax, as the writer's sources require."""

    check: ClassVar[Check] = Check.BOXES

    def detail(self, values: Mapping[str, list], split: str) -> str | None:
        flat = values.get(BBOX, ())
        bad = [box for box in zip(flat[0::4], flat[1::4], flat[2::4], flat[3::4])
               if not (all(0 <= v <= 1 for v in box)  # NaN is not
                       and box[0] < box[2] and box[1] < box[3])]
        if not bad:
            return None
        shown = "; ".join("[" + ", ".join(f"{v:.6g}" for v in box) + "]"
                          for box in bad[:_SHOWN_BOXES]) + (
            "; ..." if len(bad) > _SHOWN_BOXES else "")
        return (f"{count(len(bad), 'box', 'boxes')} of {BBOX} "
                f"{'is' if len(bad) == 1 else 'are'} not (ymin, xmin, ymax, xmax) "
                f"inside [0, 1] with ymin < ymax and xmin < xmax: {shown}")


@dataclass(frozen=True)
class _ObjectCounts:
    """A detection record has as many of each per-object value (classes, areas,
    is_crowd, masks, keypoints) as it has boxes."""

    check: ClassVar[Check] = Check.OBJECTS
    # The per-object features besides the boxes (canonical), each with its values an
    # object (keypoints: 2K).
    features: tuple[tuple[str, int], ...]

    def detail(self, values: Mapping[str, list], split: str) -> str | None:
        boxes = len(values.get(BBOX, ())) // 4
        wrong = [f"{number} {name}" for name, each in self.features
                 if (number := len(values.get(name, ())) // each) != boxes]
        if not wrong:
            return None
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

    def detail(self, values: Mapping[str, list], split: str) -> str | None:
        size = (values["image_height"][0], values["image_width"][0])
        masks = [(f"{MASK} {k}", png, True) for k, png in enumerate(
            values.get(MASK, ()) if self.objects else ())]
        if self.segmentation:
            masks.append((SEGMENTATION_MASK, values[SEGMENTATION_MASK][0], False))
        faults = []  # (what is wrong, whether an object's mask)
        for what, png, instance in masks:
            try:
                pixels = with_pillow(png_pixels, png)
            except UnidentifiedImageError:
                faults.append((f"{what} is not an image", instance))
                continue
            except Exception as error:  # Pillow raises many types for what it cannot read
                faults.append((f"{what} does not decode ({describe_error(error)})", instance))
                continue
            largest = int(pixels.max()) if pixels.size else 0
            if pixels.shape[:2] != size or pixels.shape[2] != 1 or (instance and largest > 1):
                faults.append((f"{what} is {'x'.join(map(str, pixels.shape))}" + (
                    f" with values up to {largest}" if instance and largest > 1 else ""),
                    instance))
        if not faults:
            return None
        return (f"{'; '.join(fault for fault, _ in faults)}: a mask is one channel of the "
                "image's height x width" + (", of 0s and 1s for an object" if any(
                    instance for _, instance in faults) else ""))


class _Checked(NamedTuple):
    """What checking one record found."""

    parsed: bool  # it parses with the manifest's features
    decoded: bool  # its image decodes, strictly, to its recorded shape and format
    problems: list[Problem]


@dataclass(frozen=True)
class _Checks:
    """What is checked in each record, as the manifest allows; `check` checks one."""

    features: Mapping[str, Feature]  # the manifest's, by stored key
    optional: frozenset[str]  # those a record may lack (an unlabelled row's label)
    images: bool  # decode the image to its recorded shape and format
    values: tuple[_ValueRule, ...]  # ids, the shard's split, boxes, objects, masks
    layout: Layout  # reads the records' features by their canonical names

    def check(self, shard: ReadableShard, number: int, record: bytes) -> _Checked:
        """Parses one record of `shard` and checks it."""
        def problem(check: Check, detail: str, name: list | None) -> Problem:
            return Problem(file=shard.name, record=number, check=check, detail=detail,
                           image_name=_text(name[0]) if name and name[0] else None)

        try:
            values = self.layout.values(self.parsed(record))
        except _Unparsed as error:
            return _Checked(False, False, [problem(Check.PARSE, str(error), error.name)])
        name = values.get("image_name")
        found = [problem(rule.check, detail, name) for rule in self.values
                 if (detail := rule.detail(values, shard.split)) is not None]
        if not self.images:
            return _Checked(True, False, found)
        image = [problem(check, detail, name) for check, detail in _image_problems(values)]
        return _Checked(True, not image, found + image)

    def parsed(self, record: bytes) -> dict[str, list]:
        """A record's features by stored key, held to the rules by which TensorFlow
        parses them with the manifest's spec (a missing optional label stays missing: no
        rule needs the value it parses as); raises `_Unparsed` saying why they do not
        parse, or do not make a record of the layout."""
        try:
            stored = decode_example(record)
        except ValueError as error:
            raise _Unparsed(f"does not parse with the manifest's features: {error}"
                            ) from None
        wrong = [found for name, feature in self.features.items()
                 if (found := _parse_problem(name, feature, stored.get(name),
                                             name in self.optional))]
        if wrong:
            raise _Unparsed(f"does not parse with the manifest's features: "
                            f"{'; '.join(wrong)}")
        unmatched = self.layout.unmatched(stored)
        if unmatched is not None:
            lists = ", ".join(f"{len(stored.get(key, ()))} {key}" for key in sorted(
                key for key, feature in self.features.items() if None in feature.shape))
            raise _Unparsed(f"its features do not make a {self.layout.name} record "
                            f"({unmatched}); its lists hold {lists}",
                            stored.get(self.layout.key("image_name")))
        return stored


class _Unparsed(ValueError):
    """Why a record does not parse, and its image_name where it has one."""

    def __init__(self, detail: str, name: list | None = None):
        super().__init__(detail)
        self.name = name


def _record_checks(manifest: Manifest) -> tuple[_Checks | None, list[Problem]]:
    """The checks the manifest allows (None: its features cannot be parsed), and its
    problems that rule some out. Features are looked up by the keys the manifest's
    layout stores them under."""
    features, problems = manifest.features, []
    try:
        for name, feature in features.items():
            feature.check_readable(name)
    except ValueError as error:  # a feature of a shape this version cannot parse
        return None, [_manifest_problem(str(error))]
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
        read = layout.read_features(features)
        rules.append(_Boxes())
        rules.append(_ObjectCounts(tuple(
            (name, math.prod(read[name].shape[1:])) for name in (
                OBJECT_LABEL, AREA, IS_CROWD, MASK, *_KEYPOINT_FEATURES) if name in has)))
    images = len(present) == len(DECODE_FEATURES)
    if images and (MASK in has or SEGMENTATION_MASK in has):
        rules.append(_Masks(MASK in has, SEGMENTATION_MASK in has))
    return _Checks(features, manifest.optional_features(), images, tuple(rules),
                   layout), problems


# --- parsing: `tf.io.parse_single_example`'s rules for the manifest's spec -----------------

_KINDS = {"string": bytes, "int64": int, "float32": float}  # a value's Python type, by dtype
_LISTS = {bytes: "a bytes_list", int: "an int64_list", float: "a float_list"}  # protobuf's


def _parse_problem(name: str, feature: Feature, values: list | None,
                   optional: bool) -> str | None:
    """Why a record's `values` of a feature (None: the record lacks it) do not parse as
    the manifest's `feature`, by the rules `tf.io.parse_single_example` holds its spec
    (`Feature.parse_spec`) to; None when they parse.

    A fixed shape (a scalar: ()) takes exactly its number of values, and a record must
    hold it unless it is `optional` (an unlabelled row's label); a list (None, ...) any
    number of rows of the values a row. Values must be of the feature's dtype's list.
    (An empty list reads as a missing one: `decode_example` does not say of which kind
    it is, and TensorFlow reads an empty Feature so.)"""
    kind = _KINDS[feature.dtype]
    if values and type(values[0]) is not kind:
        return (f"{name}: {_LISTS[type(values[0])]}, but the manifest says {feature.dtype} "
                f"({_LISTS[kind]})")
    shape = feature.shape
    if shape and shape[0] is None:
        each = math.prod(shape[1:])
        if values and each and len(values) % each:
            return (f"{name}: {count(len(values), 'value')}, not rows of {each} (the "
                    f"manifest's shape is {list(shape)})")
        return None
    wanted = math.prod(shape)
    held = f"one {feature.dtype} value" if shape == () else (
        f"{count(wanted, feature.dtype + ' value')} (shape {list(shape)})")
    if not values:
        if optional:
            return None
        return f"{name}: missing, but the manifest says every record holds {held}"
    if len(values) != wanted:
        return f"{name}: {count(len(values), 'value')}, but the manifest says {held}"
    return None


# --- the image ------------------------------------------------------------------------------

def _image_problems(values: Mapping[str, list]) -> list[tuple[Check, str]]:
    """What is wrong with a record's image: it does not decode, or its bytes are not in
    the recorded format (they are checked as what they are), decode damaged (the
    writer's strict checks) or to another shape than recorded."""
    data, recorded = values["image"][0], _text(values["image_format"][0])
    shape = tuple(values[name][0] for name in ("image_height", "image_width",
                                               "image_channels"))
    stored_as = recorded if recorded == "raw" else next(
        (name for name, magic in SIGNATURES.items() if data.startswith(magic)), recorded)
    problem = stored_image_problem(data, stored_as)
    if problem is not None and not tensorflow_decodes(data, stored_as):
        return [(Check.DECODE, f"the image does not decode: {problem}")]
    found = []
    if stored_as != recorded:
        found.append((Check.FORMAT, f"image_format is {recorded!r}, but the image bytes "
                                    "are not in that format"))
    if problem is not None:
        return found + [(Check.STRICT, problem)]
    if stored_as == "raw":  # its shape is the recorded one, if its size fits it
        size = len(data) // 4 * 3 - data[-2:].count(b"=")  # sound base64, padded
        if size != math.prod(shape):
            found.append((Check.DECODE, f"the image does not decode: {size:,} bytes of raw "
                                        f"pixels, but the record says {_hwc(shape)} "
                                        f"(height x width x channels), "
                                        f"{math.prod(shape):,} bytes"))
        return found
    decoded = decoded_shape(data, stored_as)
    if decoded != shape:
        found.append((Check.SHAPE, f"the image decodes to {_hwc(decoded)}, but the record "
                                   f"says {_hwc(shape)} (height x width x channels)"))
    return found


def _manifest_problem(detail: str) -> Problem:
    return Problem(file=MANIFEST, check=Check.MANIFEST, detail=detail)


def _hwc(shape) -> str:
    return "x".join(str(int(v)) for v in shape)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="backslashreplace")

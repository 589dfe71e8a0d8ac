"""The unit of work between the plan, `records` and the engines: a planned `Row` goes
to a worker, which returns a record or a `Rejection`. Small and picklable; no imports
beyond the standard library, so it costs a worker nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple


class Row(NamedTuple):
    """What a worker needs to encode one row (small, so it pickles fast)."""

    position: int  # the row's position in the table; the key for rejections
    uri: str | None  # where to read the image (resolved); None: a table without images
    image_uri: str | None  # the URI as the user gave it, stored in the record
    label: int | list[int] | None  # a list for multi-label rows
    split: str  # TRAIN, VALIDATION or TEST
    inputs: Mapping = {}  # the input columns' values, as stored (never mutated)
    image: object = None  # an image held in memory (`image_cells`), instead of at `uri`
    image_name: str | None = None  # its `image_name`; None: the base name of `image_uri`
    # A detection row's instance masks, from COCO: {"size": [h, w] of the source image,
    # "masks": a polygon list or RLE dict per object}; None: no masks (`Table`).
    masks: Mapping | None = None
    mask_uri: str | None = None  # a segmentation row's class-id mask (resolved)
    # The (height, width) a detection row's annotation states its image is (`Table`'s
    # ANNOTATED_SIZE), which tells the view an EXIF-oriented image's boxes describe
    # (`orientation`); None: not stated.
    annotated_size: tuple[int, int] | None = None
    # A video or audio row's clip (`Table.media`): its time span on the file's own
    # timeline, in microseconds (None: from its start, to its end), and its timed
    # annotations (the table's SEGMENTS or REGIONS value, paired with `label` by position).
    clip_start_us: int | None = None
    clip_end_us: int | None = None
    timed: tuple | None = None


class EncodedRows(NamedTuple):
    """Rows of a table without images bound for one shard, encoded where they are
    planned (their records cannot be rejected: validation checked them): what crosses a
    Beam job's shuffle in place of `Row`s. Columns, not a Python object a row: a shard's
    writer holds its rows' bytes, and Beam pays its overhead once a batch."""

    keys: object  # uint64 array: each row's key in the shuffled order (`plan.order_keys`)
    positions: object  # int64 array: each row's position in the table
    labels: list  # each row's label id, list of ids, or None
    examples: object  # an Arrow binary array: each row's record


class Rejection(NamedTuple):
    position: int
    reason: str


# What a record's EXIF orientation made of its image, as bits (`StoredImage.turned`, set
# by `orientation`; the statistics count them): its pixels turned to the shown view, its
# boxes turned to the view of the pixels stored, its view taken as shown because the size
# its annotation states could not tell.
TURNED_PIXELS, TURNED_BOXES, AMBIGUOUS = 1, 2, 4
TURNS_COUNTED = (("turned_pixels", TURNED_PIXELS), ("turned_boxes", TURNED_BOXES),
                 ("ambiguous", AMBIGUOUS))


class StoredImage(NamedTuple):
    """What the writer learns of an image as it stores it, for the dataset's statistics
    (`statistics`): gathered in the same pass, so they cost no second read."""

    format: str  # "jpeg", "png" or "raw"
    height: int
    width: int
    channels: int
    num_bytes: int  # of the stored image
    digest: bytes  # the stored image's xxh3-128: finds candidate duplicates, fast
    # What its EXIF orientation made of it (`orientation`'s bits: pixels turned, boxes
    # turned, view guessed); 0: nothing.
    turned: int = 0


class StoredClip(NamedTuple):
    """What the writer learns of a video or audio clip as it stores it, for the dataset's
    statistics: its stored frames (0 for audio, or when the file is kept), its span, the
    frames' size (0 without frames), and its media payload (the JPEG frames, the
    waveform's float32 bytes, or the kept file): size and xxh3-128."""

    frames: int
    duration_us: int
    height: int
    width: int
    num_bytes: int
    digest: bytes


class Record(NamedTuple):
    """A row encoded: its serialized Example (a clip's SequenceExample), and its image or
    clip as stored (None without)."""

    example: bytes
    image: StoredImage | None = None
    boxes: list | None = None  # the boxes stored, where they are not the row's (turned)
    clip: StoredClip | None = None


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def rejection_reasons(rejections: Iterable[Rejection]) -> dict[str, int]:
    """How many rows each reason rejected, commonest first (then alphabetically: both
    engines write the same manifest). Paths and values in quotes are folded, so that "no
    such file '...'" for a thousand rows is one reason."""
    return reason_counts(_QUOTED.sub("'...'", r.reason) for r in rejections)


def reason_counts(reasons: Iterable[str]) -> dict[str, int]:
    """How often each reason occurs, commonest first (then alphabetically)."""
    return merged_reasons(Counter(reasons))


def merged_reasons(*counts: Mapping[str, int]) -> dict[str, int]:
    """Counts of reasons (`rejection_reasons` of parts of a run) added up, in
    `reason_counts`' order."""
    found = Counter()
    for part in counts:
        found.update(part)
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))

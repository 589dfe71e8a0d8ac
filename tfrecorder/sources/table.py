"""The table that planning and the engines read: `Table`, one validated row per source row,
and the by-position access to its Arrow-backed columns.

Every source becomes a `Table` in `tfrecorder.sources`, which reads, checks and
normalizes it; nothing here reads a file.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tfrecorder.format.manifest import AnnotationCounts
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.sources import hashing, image_cells
from tfrecorder.sources.column_values import Column

# A detection table's column of the size each image's annotation states, [height, width]
# in pixels (a Pascal VOC <size>, a COCO image's width and height), or None: what the
# worker compares with the pixels to tell which view of an EXIF-oriented image the boxes
# describe (`write/orientation.py`). Like `objects/mask`, a row's value for the worker,
# never a feature of the records.
ANNOTATED_SIZE = "annotated_size"

# A video or audio table's columns (`Table.media`), a row's for the worker, never features
# of the records: the clip's time span on its file's own timeline, in integer microseconds
# (<NA>: from the file's start, to its end), and its timed annotations, one entry a label
# of the row's `label` list, in its order: SEGMENTS (task "action_recognition") lists
# (start_us, end_us), a key frame's start being its end; REGIONS (task
# "object_tracking") lists (time_us, ymin, xmin, ymax, xmax, track_id), the box in
# fractions of the frame and `track_id` the object's instance (an int a video; -1 where
# the source names none, as Vertex AI's examples write "instance_id": "-1").
CLIP_START = "clip_start_us"
CLIP_END = "clip_end_us"
SEGMENTS = "segments"
REGIONS = "regions"
MEDIA_KINDS = ("image", "video", "audio")


@dataclass(frozen=True)
class Table:
    """A validated table.

    Attributes:
        rows: one row per source row: `image_uri` (as given) and `uri` (resolved for
            reading) when the table has image files; `image` (the cells as given),
            `image_name` and `image_uri` when it holds its images (`image_cells`);
            `split` (TRAIN, VALIDATION, TEST or UNASSIGNED); `label` when it has labels
            (all str or all int; lists of them when rows are multi-label); and one
            column per input, by its name, holding the values as stored. Its index is
            the source's.
        source: the rows as the user gave them, for the rejected-rows report.
        inputs: the input columns (features besides image, label and split).
        multi_label: whether each row's label is a list.
        base_dir: the folder relative image paths were resolved against (the CSV's
            folder, the image folder, or the working directory for a DataFrame).
        class_names: the names of integer labels, where the source gives them (a Hugging
            Face ClassLabel): label i is class_names[i].
        image_column: the source's column of images held in memory, if any (the report
            describes its cells rather than printing them).
        task: what the labels describe. "classification": `label` is each row's class
            (or classes). "detection": each row is an image with its objects, one per
            box, in the source's order: `label` lists their classes (empty for an image
            without boxes; `multi_label` is True), the input `objects/bbox` their boxes
            as [ymin, xmin, ymax, xmax], relative (0 to 1), and where the source gives
            them, the inputs `objects/area` (pixels of the source image) and
            `objects/is_crowd` (0 or 1), and the column `objects/mask`: per row, None or
            {"size": [height, width] of the source image, "masks": one COCO segmentation
            per object: a list of polygons [x0, y0, x1, y1, ...] in pixels, or an RLE
            dict {"size": [h, w], "counts": ...}, or either as its JSON text (bytes or
            `msgspec.Raw`, as the COCO reader keeps them: `annotations.segmentation`
            reads them)}; "size" None: the polygons are fractions of the image's width
            and height (YOLO-seg), drawn at any size. "segmentation": each row also has
            `mask_uri` (as given) and `mask_file` (resolved for reading): a PNG whose
            pixel values are class ids, of the image's size. A detection table whose
            source states each image's size also has the column `ANNOTATED_SIZE`.
    """

    rows: pd.DataFrame
    source: pd.DataFrame
    inputs: tuple[Column, ...] = ()
    multi_label: bool = False
    base_dir: str = ""
    class_names: tuple[str, ...] | None = None  # integer labels' names, from the source
    image_column: str | None = None  # the source's column of images held in memory
    task: str = "classification"  # or "detection", "segmentation" (see above)
    # What the files at `uri` are: "image", or "video" / "audio" (their `image_uri` and
    # `uri` columns then name the media file, and CLIP_START, CLIP_END and the task's
    # SEGMENTS or REGIONS are columns; tasks "classification" (`label`: the clip's
    # class or classes), "action_recognition" and "object_tracking").
    media: str = "image"
    label_column: str | None = None  # the source's one label column, as messages name it
    # The source's own classes with their ids (a COCO file's categories, a YOLO data.yaml's
    # names): text labels are numbered in its order, used or not, and the tf_models layout
    # stores its ids (`vocabulary.LabelMap`). None: the plan sorts the labels it finds.
    label_map: LabelMap | None = None
    # The names of a detection table's keypoints (`objects/keypoints`, K [y, x] pairs an
    # object): a COCO category's `keypoints`, or `keypoints.default_names`. The manifest
    # records them; `load`'s flips swap left and right by them. None: unknown, or none.
    keypoint_names: tuple[str, ...] | None = None
    # Rows the source holds but cannot give an image for (a Pascal VOC XML file that is
    # empty or names no image): the source's row as the user knows it, with a `reason`
    # column. They are rejected rows of the run (rejected.csv, `max_rejected`), never a
    # crash. None: none.
    rejected_rows: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    # Annotations the source set aside (`annotation_policy`: a COCO box of zero width, a
    # class id the YOLO data file does not name): columns `source` (the file),
    # `annotation` (as the file names it), `image` (its image's row), `reason` and
    # `written` (its value as written). Their images are still written; the run lists
    # these one a line beside rejected.csv and counts them by reason. None: none.
    skipped_annotations: pd.DataFrame | None = field(default=None, repr=False,
                                                     compare=False)
    # What became of a detection source's objects before any image is read: how many it
    # holds, clipped, without a mask; its images without an annotation file; notes
    # (`annotation_policy`). The writer fills in what it wrote. None: not detection.
    annotations: AnnotationCounts | None = field(default=None, repr=False, compare=False)
    # What cutting long files into clips did (`write/clip_cutting`): the clip length, the
    # rows cut, the clips made, the shorter last pieces dropped and their seconds; the
    # manifest's `media.cut`. None: not cut.
    clip_cuts: dict | None = field(default=None, repr=False, compare=False)
    # Columns' words (`hashing.cell_words`) that validation computed on its way (lists of
    # k numbers, checked as one array): `value_hashes` takes them, and lets them go.
    cell_words: dict[str, np.ndarray] = field(default_factory=dict, repr=False,
                                               compare=False)
    # Lists of k floats as the rows x k float32 grid the records store, made by validation
    # (`column_values.ColumnArrays`): what workers encode, in place of the cells.
    number_grids: dict[str, np.ndarray] = field(default_factory=dict, repr=False,
                                                compare=False)

    @property
    def has_labels(self) -> bool:
        return "label" in self.rows.columns

    @property
    def has_images(self) -> bool:
        return "image_uri" in self.rows.columns

    @property
    def images_in_memory(self) -> bool:
        """Whether the images are the table's cells (`image`), not files at `uri`."""
        return "image" in self.rows.columns

    @property
    def image_files(self) -> bool:
        """Whether the images are files to read, at `uri`."""
        return self.has_images and not self.images_in_memory

    @property
    def image_references(self) -> Sequence:
        """How reports name each row's image, by position: its URI as given, or for an
        image held in memory, its `image_name`."""
        return self.rows["image_name" if self.images_in_memory else "image_uri"].array

    @functools.cached_property
    def remote_images(self) -> list[str]:
        """The first image URI in each bucket the table reads (gs://, s3://, ...)."""
        if not self.image_files:
            return []
        uris = self.rows["uri"]
        remote = uris[uris.str.contains("://", regex=False)
                      & ~uris.str.startswith("file://")]
        buckets = remote.str.extract(r"^([^:/]+://[^/]*)", expand=False)
        return remote[~buckets.duplicated()].tolist()

    @functools.cached_property
    def image_hashes(self) -> np.ndarray:
        """Each image's 64-bit content word (`image_cells.image_words`), for a table
        holding its images: what UNASSIGNED rows' splits are drawn from, and part of
        `value_hashes`. Computed once: every image is read to compute it."""
        return image_cells.image_words(self.rows["image"])

    @functools.cached_property
    def uri_hashes(self) -> np.ndarray:
        """Each image URI's word (`hashing.uri_words`), for a table of image files: the
        rows' identities. Computed once (0.6 s a million rows)."""
        return hashing.uri_words(self.rows["image_uri"].tolist())

    @functools.cached_property
    def value_hashes(self) -> np.ndarray:
        """Each row's 64-bit hash of its values besides its split (`hashing`): what a
        table without images draws UNASSIGNED rows' splits from, and what a resumed run
        checks. Computed once: 8 bytes a row, and a column's words at a time."""
        words = ((name, self.image_hashes if name == "image" else
                  self.cell_words.pop(name) if name in self.cell_words else
                  hashing.cell_words(self.rows[name]))
                 for name in self.rows.columns if name not in ("split", "image_name"))
        return hashing.row_hashes(words, len(self.rows))

    def forget_hashes(self) -> None:
        """Lets `value_hashes`, `image_hashes` and `uri_hashes` go (8 bytes a row each)
        once the plan and the journal's digest are made: nothing later reads them."""
        self.__dict__.pop("uri_hashes", None)
        self.__dict__.pop("value_hashes", None)
        self.__dict__.pop("image_hashes", None)

    @property
    def has_remote_images(self) -> bool:
        return bool(self.remote_images)


class ArrowColumn:
    """An Arrow-backed column, read by position a chunk at a time. pyarrow's own
    `ChunkedArray.take` (and so pandas' `iloc`) joins all the chunks first: a copy of the
    whole column for every take (7 ms for 4,096 rows of a 2M-row text column in 4 chunks,
    against 0.13 ms from one array), and of all of a memory-mapped table (`chunked`)."""

    def __init__(self, chunks: list, kind):
        self.chunks, self.type = chunks, kind
        self.starts = np.cumsum([0, *map(len, chunks)])

    @classmethod
    def of(cls, column: pd.Series) -> ArrowColumn:
        import pyarrow as pa

        values = pa.array(column.array)
        return cls(values.chunks if isinstance(values, pa.ChunkedArray) else [values],
                   values.type)

    def take(self, positions: np.ndarray):
        import pyarrow as pa

        positions = np.asarray(positions, dtype=np.int64)
        if len(self.chunks) == 1:
            return self.chunks[0].take(positions)
        chunk_of = np.searchsorted(self.starts, positions, side="right") - 1
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(len(self.chunks) + 1))
        pieces = [self.chunks[c].take(positions[order[start:end]] - self.starts[c])
                  for c, (start, end) in enumerate(zip(bounds[:-1], bounds[1:]))
                  if end > start]
        if not pieces:
            return pa.array([], type=self.type)
        return pa.concat_arrays(pieces).take(np.argsort(order))  # back in `positions` order


def arrow_backed(column: pd.Series) -> bool:
    return isinstance(column.dtype, pd.ArrowDtype) or (
        isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow")


def rows_at(frame: pd.DataFrame, positions) -> pd.DataFrame:
    """`frame.iloc[positions]`, with Arrow-backed columns read by `ArrowColumn`."""
    positions = np.asarray(positions, dtype=np.int64)
    found = frame.iloc[positions, [i for i, name in enumerate(frame.columns)
                                   if not arrow_backed(frame[name])]]
    for i, name in enumerate(frame.columns):
        column = frame[name]
        if arrow_backed(column):
            found.insert(i, name, pd.array(ArrowColumn.of(column).take(positions),
                                           dtype=column.dtype))
    return found

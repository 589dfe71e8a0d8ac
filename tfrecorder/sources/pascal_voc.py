"""Pascal VOC XML annotations: one `<annotation>` file an image, as LabelImg and CVAT
("Pascal VOC 1.1") write them and as the VOC2007/2012 datasets ship them.

A folder is read as Pascal VOC when it holds an `.xml` file whose root element is
`<annotation>` (so a folder of XML annotations is never read as a label/file
classification folder); a single `.xml` file is read alone. Every `.xml` file below the
folder is one row, in the order of their paths, indexed by its path relative to the
folder.

The image of an XML file is the first of these that exists:
  1. `JPEGImages/<filename>` beside its folder, where that folder is `Annotations/` (the
     VOC layout; CVAT's export with images);
  2. `<filename>` beside the XML file (LabelImg's default; a flat folder of .xml + .jpg);
  3. `<folder>/<filename>` beside the XML file's folder (LabelImg writes the name of the
     image's folder: `annotations/` next to `images/`);
  4. `<path>` (LabelImg writes the image's absolute path), or that path relative to the
     XML file's folder.

Splits: in the VOC layout, `ImageSets/Main/{train,val,test}.txt` beside `Annotations/`
(any spelling `splits.split_named` reads, so CVAT's `Train.txt` too) name each image's
split; `trainval.txt` makes TRAIN only where there is neither `train.txt` nor `val.txt`;
images in no list are UNASSIGNED (the plan draws their split). Elsewhere, an XML file
below a folder named as a split (`images/train/`) is in that split; else UNASSIGNED.

Objects are read as `create_pascal_tf_record.py`'s `dict_to_tf_example` reads them: boxes
are `xmin / width`, `ymin / height`, ... with the `<size>` the XML gives (floats, pixels
as written), kept in [ymin, xmin, ymax, xmax] order; `objects/difficult` and
`objects/truncated` are 0 or 1 (0 where absent), `objects/view` is `<pose>`
("Unspecified" where absent); the class is `<name>` (text, whitespace stripped);
`<filename>` is `image_name` (`image/filename`); `image/source_id` is the row's number, as
Model Garden's `process_source_id` reads it (a file name fails there).
`difficult="drop"` leaves out difficult objects, as `ignore_difficult_instances` does.

An XML file that is empty, not XML, not an `<annotation>`, without a usable `<size>` or
`<filename>`, or naming an image that is not there is a rejected row with its reason and
its objects (`Table.rejected_rows`), its image with it: the other files are converted. A
bad object (a box outside its `<size>` beyond a pixel, empty, or without a name) is
skipped alone, as `annotation_policy` decides.

XML is parsed by the standard library's `xml.etree.ElementTree` (expat): the project
adds no dependency for it. Expat does not fetch external entities, and the expat that
Python 3.11 bundles (2.4.1 and later) refuses entity-expansion bombs, which is what
defusedxml adds; lxml (the reference's parser) is a compiled dependency for no gain here.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import posixpath
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.format.manifest import EXAMPLES_KEPT, AnnotationCounts
from tfrecorder.format.splits import UNASSIGNED, Split, split_named
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.annotation_policy import Objects, Problem, skipped_rows
from tfrecorder.sources.detection import (
    DIFFICULT,
    TRUNCATED,
    VIEW,
    objects_table,
)
from tfrecorder.sources.image_paths import has_image_extension
from tfrecorder.sources.schema import STRING_LABEL
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs, store_errors
from tfrecorder.wording import count

logger = logging.getLogger(__name__)

_ROOT = re.compile(r"<annotation[\s>/]")  # an <annotation> element (not <annotations>)
_SNIFFED_BYTES = 1 << 12
_SNIFFED_FILES = 5  # XML files looked into before a folder is left to other formats
_REMOTE_READS = 64  # XML files read at a time from a bucket
_EXAMPLES = 3
_UNSPECIFIED = "Unspecified"  # VOC's pose where none is given


def claims(path: str, folder: bool) -> bool:
    """An `.xml` file; or a folder holding an XML file whose root is `<annotation>`
    (among its first few XML files)."""
    if not folder:
        return path.lower().endswith(".xml")
    xml_files = (uri for uri in fs.list_files(path) if _is_xml(uri, path))
    return any(_ROOT.search(csv.head_text(uri, _SNIFFED_BYTES))
               for uri in itertools.islice(xml_files, _SNIFFED_FILES))


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The detection table of a folder of XML files, or of one XML file."""
    folder = fs.is_folder(path)
    files = [uri for uri in fs.list_files(path) if not _hidden(uri, path)] if folder \
        else None
    xml_files = [uri for uri in files if _is_xml(uri, path)] if folder else [path]
    listed = set(files) if folder else None
    image_sets = _image_sets(path, files, listed) if folder else _ImageSets()
    accepted, rejected = [], []
    for uri, data in zip(xml_files, _contents(xml_files)):
        name = fs.relative_to(uri, base_dir)
        try:
            annotation = _annotation(data)
            image = _image(uri, annotation, path if folder else None, listed)
        except _Rejected as error:
            rejected.append(_RejectedFile(name, error.image, error.objects, error.reason,
                                          _found(uri, error.annotation, path, listed)))
            continue
        accepted.append(_Row(name, fs.relative_to(image, base_dir), image, annotation,
                             image_sets.splits.get(uri, _folder_split(uri, path)
                                                   if folder else None), uri))
    unannotated = _unannotated(path, files, listed, image_sets, accepted, rejected) \
        if folder else []
    rejected += image_sets.missing
    if rejected:
        logger.warning("Rejecting %s of %s: %s", count(len(rejected), "annotation file"),
                       path, "; ".join(f"{r.name}: {r.reason}" for r in rejected[:_EXAMPLES]))
    if not accepted and not unannotated:
        raise SchemaError(_nothing_read(path, len(xml_files), rejected))
    return _table(accepted, unannotated, rejected, base_dir, options, path)


class _Rejected(Exception):
    """Why an XML file gives no row (and the image it names, where known; the objects
    its text holds; what it says of its image, to find it)."""

    def __init__(self, reason: str, image: str = "", objects: int = 0,
                 annotation: _Annotation | None = None):
        super().__init__(reason)
        self.reason, self.image, self.objects = reason, image, objects
        self.annotation = annotation


class _RejectedFile(NamedTuple):
    """An annotation file that gives no row, as rejected.csv lists it."""

    name: str  # the XML file (or the list naming an image without one), relative
    image: str  # the image it names
    objects: int  # the objects it holds (its text's <object> elements)
    reason: str
    found: str = ""  # the image's URI, where it was found


@dataclass
class _Annotation:
    """What one XML file says, as `dict_to_tf_example` reads it: its objects' lists, in
    file order, filled as they are read, each with its problem's code (`_PROBLEMS`;
    0: none) and its text as written."""

    filename: str
    folder: str | None
    path: str | None
    size: tuple[float, float]  # width, height
    boxes: list = dataclasses.field(default_factory=list)  # relative; NaN: no usable box
    names: list = dataclasses.field(default_factory=list)
    difficult: list = dataclasses.field(default_factory=list)
    truncated: list = dataclasses.field(default_factory=list)
    poses: list = dataclasses.field(default_factory=list)
    problems: list = dataclasses.field(default_factory=list)
    written: list = dataclasses.field(default_factory=list)  # (object k, its text)
    clipped: list = dataclasses.field(default_factory=list)  # one pixel past an edge


class _Row(NamedTuple):
    """An XML file that gives a row: its name (relative to the source), its image's."""

    name: str
    image_uri: str
    uri: str  # the image, resolved
    annotation: _Annotation | None  # None: an image without an annotation file
    split: Split | None
    xml: str = ""  # the XML file, resolved ("": none)


_BNDBOX = Problem("bndbox that is not four numbers", "without a <bndbox> of numbers "
                  "xmin, ymin, xmax, ymax", "Each <object> has a <bndbox> of pixels.")
_FLAG = Problem("difficult or truncated other than 0 or 1",
                "with <difficult> or <truncated> other than 0 or 1",
                "<difficult> and <truncated> are 0 or 1.")
_PROBLEMS = (_BNDBOX, _FLAG)
DROPPED_DIFFICULT = "difficult (difficult='drop')"


def _annotation(data: bytes | BaseException) -> _Annotation:
    """The annotation of one file's bytes (or the error reading it raised): every object,
    each with what is wrong with it (`annotation_policy` decides what that makes it).

    Raises:
        _Rejected: with the reason the file gives no row.
    """
    if isinstance(data, BaseException):
        raise _Rejected(f"cannot read file: {store_errors.answer(data)}")
    objects = data.count(b"<object>") + data.count(b"<object ")
    if not data.strip():
        raise _Rejected("empty XML file" if not data else "XML file of blanks only")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        raise _Rejected(f"not XML: {error}", objects=objects) from None
    if root.tag != "annotation":
        raise _Rejected(f"not a Pascal VOC annotation: its root element is <{root.tag}>, "
                        "not <annotation>", objects=objects)
    objects = len(root.findall("object"))
    filename = _text(root, "filename")
    if not filename:
        raise _Rejected("no <filename>: the image it annotates is not named",
                        objects=objects)
    size = root.find("size")
    width, height = _number(size, "width"), _number(size, "height")
    found = _Annotation(filename, _text(root, "folder"), _text(root, "path"),
                        (width, height))
    if not (width and width > 0 and height and height > 0):
        raise _Rejected(f"no usable <size> (width {_text(size, 'width')!r}, height "
                        f"{_text(size, 'height')!r}): boxes are fractions of it",
                        filename, objects, found)
    for k, element in enumerate(root.findall("object"), 1):
        name = _text(element, "name") or None
        box = element.find("bndbox")
        corners = [_number(box, c) for c in ("xmin", "ymin", "xmax", "ymax")]
        flags = [_flag(element, f) for f in ("difficult", "truncated")]
        problem = 0
        if any(c is None for c in corners):
            problem, corners = 1, [np.nan] * 4
        elif None in flags:
            problem = 2
        xmin, ymin, xmax, ymax = corners
        # VOC counts pixels from 1: a corner one pixel past the edge is that edge.
        pixels = [ymin, xmin, ymax, xmax]
        edges = [height, width, height, width]
        near = [min(max(c, 0.0), e) if -1 <= c <= e + 1 else c for c, e in zip(pixels, edges)]
        found.clipped.append(near != pixels and not problem)
        found.boxes.append([c / e for c, e in zip(near, edges)])
        found.names.append(name)
        found.difficult.append(flags[0] or 0)
        found.truncated.append(flags[1] or 0)
        found.poses.append(_text(element, "pose") or _UNSPECIFIED)
        found.problems.append(problem)
        bndbox = ", ".join(f"{c} {_text(box, c)}" for c in ("xmin", "ymin", "xmax", "ymax"))
        found.written.append((f"object {k}", f"name {name!r}, {bndbox}, difficult "
                              f"{_text(element, 'difficult')!r}, truncated "
                              f"{_text(element, 'truncated')!r}"))
    return found


def _text(element: ElementTree.Element | None, tag: str) -> str | None:
    """The stripped text of a child (a plain tag: found in C, where a path is not)."""
    found = element.find(tag) if element is not None else None
    return found.text.strip() if found is not None and found.text is not None else None


def _number(element: ElementTree.Element | None, tag: str) -> float | None:
    try:
        return float(_text(element, tag))
    except (TypeError, ValueError):
        return None


def _flag(element: ElementTree.Element, tag: str) -> int | None:
    """0 or 1 (0 where absent); None for any other value."""
    text = _text(element, tag)
    return 0 if not text else {"0": 0, "1": 1}.get(text)


def _image(xml: str, annotation: _Annotation, root: str | None, listed: set | None
           ) -> str:
    """The image of an XML file (the module's rule): looked up among the files `listed`
    below the source folder `root`, asked of the store elsewhere.

    Raises:
        _Rejected: naming the places looked at.
    """
    here = _parent(xml)
    parent = _parent(here)
    candidates = []
    if fs.basename(here).lower() == "annotations":
        candidates.append(fs.join(parent, "JPEGImages", annotation.filename))
    candidates.append(fs.join(here, annotation.filename))
    if annotation.folder and "/" not in annotation.folder and "\\" not in annotation.folder:
        candidates.append(fs.join(parent, annotation.folder, annotation.filename))
    if annotation.path:
        given = annotation.path
        candidates.append(given if os.path.isabs(given) or fs.is_remote(given)
                          else fs.join(here, given))
    for uri in candidates:
        if (uri in listed) if root is not None and fs.is_below(uri, root) else fs.exists(uri):
            return uri
    shown = list(dict.fromkeys(candidates))
    raise _Rejected(f"image {annotation.filename!r} not found (looked for "
                    f"{', '.join(map(repr, shown))})", annotation.filename,
                    len(annotation.names))


def _found(xml: str, annotation: _Annotation | None, root: str, listed: set | None) -> str:
    """The image a rejected XML file names, where it is there; for a file too broken to
    name one, its namesake beside it or in the VOC layout's JPEGImages/ (so that the
    image is rejected with its XML, never written as one without objects); "": none."""
    if listed is None:
        return ""
    if annotation is not None:
        try:
            return _image(xml, annotation, root, listed)
        except _Rejected:
            return ""
    folder, stem = _parent(xml), fs.basename(xml).rsplit(".", 1)[0]
    folders = [folder] + ([fs.join(_parent(folder), "JPEGImages")]
                          if fs.basename(folder) == "Annotations" else [])
    return next((found for found in map(_images_by_stem, folders, [listed] * len(folders))
                 if stem in found), {}).get(stem, "")


@dataclass
class _ImageSets:
    """What the VOC layout's `ImageSets/Main/{train,val,test}.txt` say.

    Attributes:
        splits: the split of every XML file they list, by its URI.
        images: the split of every image they list without an XML file, by the image's
            URI (datumaro writes no XML for an image without objects).
        missing: the images they list with neither an XML file nor an image file.
    """

    splits: dict = dataclasses.field(default_factory=dict)
    images: dict = dataclasses.field(default_factory=dict)
    missing: list = dataclasses.field(default_factory=list)


def _image_sets(root: str, files: Sequence[str], listed: set) -> _ImageSets:
    """The splits the VOC layout's lists give (`_ImageSets`).

    Raises:
        SchemaError: for an image listed in two splits.
    """
    lists: dict[str, dict] = {}  # Annotations/ folder -> split (or "trainval") -> list
    for uri in files:
        main = _parent(uri)
        if not (uri.endswith(".txt") and fs.basename(main) == "Main"
                and fs.basename(_parent(main)) == "ImageSets"):
            continue
        stem = fs.basename(uri)[:-len(".txt")]
        split = "trainval" if stem.lower() == "trainval" else split_named(stem)
        if split == "trainval" or isinstance(split, Split):
            annotations = fs.join(_parent(_parent(main)), "Annotations")
            lists.setdefault(annotations, {})[split] = uri
    found = _ImageSets()
    where: dict[tuple[str, str], str] = {}  # (Annotations/ folder, image id) -> its list
    for annotations, by_split in lists.items():
        trainval = by_split.pop("trainval", None)
        if trainval is not None and not {Split.TRAIN, Split.VALIDATION} & set(by_split):
            by_split[Split.TRAIN] = trainval
        images = _images_by_stem(fs.join(_parent(annotations), "JPEGImages"), listed)
        given: dict[str, Split] = {}
        for split, uri in by_split.items():
            for line, image_id in _listed_ids(uri, annotations, listed, images):
                if given.get(image_id, split) != split:
                    raise SchemaError(
                        f"the Pascal VOC lists {where[annotations, image_id]!r} and {uri!r} "
                        f"both name image {image_id!r}: an image belongs to one split (a "
                        "test image the model trains on tests nothing). Remove it from one "
                        "list.", rows=[image_id], column="split")
                given[image_id], where[annotations, image_id] = split, uri
                xml = fs.join(annotations, f"{image_id}.xml")
                if xml in listed:
                    found.splits[xml] = split
                elif image_id in images:
                    found.images[images[image_id]] = split
                else:
                    found.missing.append(_RejectedFile(
                        f"{fs.relative_to(uri, root)}:{line}", image_id, 0,
                        f"listed in {fs.basename(uri)}, but neither "
                        f"Annotations/{image_id}.xml nor an image JPEGImages/{image_id}.* "
                        "is there"))
    return found


def _images_by_stem(folder: str, listed: set) -> dict[str, str]:
    """The images directly in `folder`, by their names without extension."""
    found = {}
    for uri in sorted(listed):
        if _parent(uri) == folder and has_image_extension(uri):
            found.setdefault(fs.basename(uri).rsplit(".", 1)[0], uri)
    return found


def _listed_ids(uri: str, annotations: str, listed: set, images: dict
                ) -> list[tuple[int, str]]:
    """The image ids of an ImageSets list, with their lines: a line's id is the whole
    line (CVAT writes ids with spaces: `harbour view 09`), or its quoted text, or, where
    the whole line names nothing, its first word (VOC's per-class lists add a flag)."""
    text = fs.read_bytes(uri).decode("utf-8-sig", errors="replace")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith('"') and line.count('"') >= 2:
            image_id = line[1:line.index('"', 1)]
        elif fs.join(annotations, f"{line}.xml") in listed or line in images:
            image_id = line
        else:
            first = line.split()[0]
            named = fs.join(annotations, f"{first}.xml") in listed or first in images
            image_id = first if named else line
        found.append((number, image_id))
    return found


def _unannotated(root: str, files: Sequence[str], listed: set, image_sets: _ImageSets,
                 accepted: list[_Row], rejected: list[_RejectedFile]) -> list[_Row]:
    """The images of the source without an annotation file, each a row without objects
    (as datumaro and LabelImg mean it): those the ImageSets lists name without an XML
    file, and every other image in a folder that holds the images the XML files name
    (LabelImg saves no XML for an image it drew no box on)."""
    named = {row.uri for row in accepted} | {r.found for r in rejected if r.found}
    folders = {_parent(uri) for uri in named}
    found = dict(image_sets.images)
    for uri in files:
        if uri not in named and uri not in found and _parent(uri) in folders \
                and has_image_extension(uri):
            found[uri] = _folder_split(uri, root)
    return [_Row(fs.relative_to(uri, root), fs.relative_to(uri, root), uri, None, split)
            for uri, split in sorted(found.items()) if uri not in named]


def _folder_split(xml: str, root: str) -> Split | None:
    """The split a folder of the XML file's path below `root` is named after, nearest
    first (`images/train/1.xml`)."""
    folders = fs.relative_to(_parent(xml), root).replace("\\", "/").split("/")
    return next((split for split in map(split_named, reversed(folders))
                 if isinstance(split, Split)), None)


def _table(accepted: list[_Row], unannotated: list[_Row], rejected: list[_RejectedFile],
           base_dir: str, options: TableOptions, path: str) -> Table:
    """The detection table of the rows (those of images without an annotation file
    last), with the rejected files beside it."""
    rows = accepted + unannotated
    index = pd.Index([row.name for row in rows])
    images = pd.DataFrame({"image_uri": [row.image_uri for row in rows]}, index=index)
    if any(row.split is not None for row in rows):
        images.insert(0, "split", [str(row.split) if row.split else UNASSIGNED
                                   for row in rows])
    drop = options.difficult == "drop"
    image, labels, boxes, flags, poses, problem, where, dropped, clipped = (
        [] for _ in range(9))
    for position, row in enumerate(accepted):
        found = row.annotation
        width, height = found.size
        for k, name in enumerate(found.names):
            if drop and found.difficult[k] and not found.problems[k]:
                dropped.append((row.name, *found.written[k]))
                continue
            image.append(position)
            labels.append(name)
            boxes.append(found.boxes[k])
            flags.append((found.difficult[k], found.truncated[k]))
            poses.append(found.poses[k])
            problem.append(found.problems[k])
            clipped.append(found.clipped[k])
            where.append((row.name, *found.written[k], f"in <size> {width:g} x {height:g}"))

    def shown(i: int) -> str:
        xml, name, written, size = where[i]
        return f"{xml}, {name}: {written} {size}"

    objects = Objects.of(image, labels, boxes, [rows[i].name for i in image], shown,
                         f"the Pascal VOC source {path!r}", problem=problem,
                         problems=_PROBLEMS, names=lambda i: where[i][:3], clipped=clipped,
                         **{DIFFICULT: [d for d, _ in flags], TRUNCATED: [t for _, t in flags],
                            VIEW: poses})
    source = images[["image_uri"]].assign(xml=[row.name if row.annotation else ""
                                               for row in rows])[["xml", "image_uri"]]
    table = objects_table(
        images, objects, source, base_dir, options, label_type=STRING_LABEL,
        skipped=skipped_rows(path, [name for _, name, _ in dropped],
                             [xml for xml, _, _ in dropped], DROPPED_DIFFICULT,
                             [written for _, _, written in dropped]) if dropped else None,
        counts=AnnotationCounts(objects=len(dropped) + sum(r.objects for r in rejected),
                                unannotated_images=len(unannotated),
                                unannotated_examples=tuple(
                                    row.name for row in unannotated[:EXAMPLES_KEPT])),
        annotated_sizes=[row.annotation.size[::-1] if row.annotation else None
                         for row in rows])
    names = [row.annotation.filename if row.annotation else fs.basename(row.image_uri)
             for row in rows]
    return dataclasses.replace(
        table, rows=table.rows.assign(image_name=names), rejected_rows=pd.DataFrame(
            [(r.name, r.image, r.objects, r.reason) for r in rejected],
            columns=["xml", "image_uri", "objects", "reason"],
            index=[r.name for r in rejected]) if rejected else None)


def _nothing_read(path: str, total: int, rejected: list[_RejectedFile]) -> str:
    shown = "; ".join(f"{r.name}: {r.reason}" for r in rejected[:_EXAMPLES])
    return (f"none of the {count(total, 'XML file')} of the Pascal VOC source {path!r} "
            f"gives an image: {shown}. Each needs an <annotation> with <filename>, <size> "
            "and its objects, beside its image (or in Annotations/ beside JPEGImages/).")


def _contents(uris: Sequence[str]) -> Iterator[bytes | BaseException]:
    """Each file's bytes, or the error reading it raised; a bucket's files read
    `_REMOTE_READS` at a time."""
    for start in range(0, len(uris), _REMOTE_READS):
        window = uris[start:start + _REMOTE_READS]
        futures = [fs.start_read(uri) if fs.is_remote(uri) else None for uri in window]
        for uri, future in zip(window, futures):
            try:
                yield future.result() if future is not None else fs.read_bytes(uri)
            except Exception as error:  # one unreadable file is that row's problem
                yield error


def _is_xml(uri: str, root: str) -> bool:
    return uri.lower().endswith(".xml") and not _hidden(uri, root)


def _hidden(uri: str, root: str) -> bool:
    return "/." in "/" + fs.relative_to(uri, root)


def _parent(uri: str) -> str:
    """The folder holding `uri` (`fs.dirname` without its `abspath`: these are absolute)."""
    return posixpath.dirname(uri.rstrip("/")) if fs.is_remote(uri) else os.path.dirname(uri)

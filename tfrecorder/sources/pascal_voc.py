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
("Unspecified" where absent); the class is `<name>` (text, whitespace stripped); the
`image_id` is `<filename>`, which the tf_models layout writes as `image/source_id`.
`difficult="drop"` leaves out difficult objects, as `ignore_difficult_instances` does.

An XML file that is empty, not XML, not an `<annotation>`, without a usable `<size>`,
`<filename>` or object fields, naming an image that is not there, or with a box outside
its `<size>` (or empty) is a rejected row with its reason (`Table.rejected_rows`): the
other files are converted.

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

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.format.layouts import IMAGE_ID
from tfrecorder.format.splits import UNASSIGNED, Split, split_named
from tfrecorder.options import TableOptions
from tfrecorder.sources import csv
from tfrecorder.sources.detection import (
    DIFFICULT,
    TRUNCATED,
    VIEW,
    Objects,
    objects_table,
)
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
    splits = _splits(path, files) if folder else {}
    accepted, rejected = [], []
    for uri, data in zip(xml_files, _contents(xml_files)):
        name = fs.relative_to(uri, base_dir)
        try:
            annotation = _annotation(data, options.difficult)
            image = _image(uri, annotation, path if folder else None, listed)
        except _Rejected as error:
            rejected.append((name, error.image, error.reason))
            continue
        accepted.append(_Row(name, fs.relative_to(image, base_dir), annotation,
                             splits.get(uri, _folder_split(uri, path) if folder else None)))
    if rejected:
        logger.warning("Rejecting %s of %s: %s", count(len(rejected), "XML file"), path,
                       "; ".join(f"{n}: {r}" for n, _, r in rejected[:_EXAMPLES]))
    if not accepted:
        raise SchemaError(_nothing_read(path, len(xml_files), rejected))
    return _table(accepted, rejected, base_dir, options, path)


class _Rejected(Exception):
    """Why an XML file gives no row (and the image it names, where known)."""

    def __init__(self, reason: str, image: str = ""):
        super().__init__(reason)
        self.reason, self.image = reason, image


@dataclass
class _Annotation:
    """What one XML file says, as `dict_to_tf_example` reads it (its objects' lists
    filled as they are read)."""

    filename: str
    folder: str | None
    path: str | None
    boxes: list  # [ymin, xmin, ymax, xmax] a kept object, relative
    names: list
    difficult: list
    truncated: list
    poses: list


class _Row(NamedTuple):
    """An XML file that gives a row: its name (relative to the source), its image's."""

    name: str
    image_uri: str
    annotation: _Annotation
    split: Split | None


def _annotation(data: bytes | BaseException, difficult: str) -> _Annotation:
    """The annotation of one file's bytes (or the error reading it raised).

    Raises:
        _Rejected: with the reason the file gives no row.
    """
    if isinstance(data, BaseException):
        raise _Rejected(f"cannot read file: {store_errors.answer(data)}")
    if not data.strip():
        raise _Rejected("empty XML file" if not data else "XML file of blanks only")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        raise _Rejected(f"not XML: {error}") from None
    if root.tag != "annotation":
        raise _Rejected(f"not a Pascal VOC annotation: its root element is <{root.tag}>, "
                        "not <annotation>")
    filename = _text(root, "filename")
    if not filename:
        raise _Rejected("no <filename>: the image it annotates is not named")
    size = root.find("size")
    width, height = _number(size, "width"), _number(size, "height")
    if not (width and width > 0 and height and height > 0):
        raise _Rejected(f"no usable <size> (width {_text(size, 'width')!r}, height "
                        f"{_text(size, 'height')!r}): boxes are fractions of it",
                        filename)
    found = _Annotation(filename, _text(root, "folder"), _text(root, "path"),
                        [], [], [], [], [])
    for k, element in enumerate(root.findall("object"), 1):
        name = _text(element, "name")
        box = element.find("bndbox")
        corners = [_number(box, c) for c in ("xmin", "ymin", "xmax", "ymax")]
        flags = [_flag(element, f) for f in ("difficult", "truncated")]
        where = f"object {k} ({name!r})" if name else f"object {k}"
        if not name:
            raise _Rejected(f"{where} has no <name>", filename)
        if any(c is None for c in corners):
            raise _Rejected(f"{where} has no <bndbox> of numbers xmin, ymin, xmax, ymax",
                            filename)
        if None in flags:
            raise _Rejected(f"{where} has <difficult> or <truncated> other than 0 or 1 "
                            f"({_text(element, 'difficult')!r}, "
                            f"{_text(element, 'truncated')!r})", filename)
        xmin, ymin, xmax, ymax = corners
        if not (0 <= xmin < xmax <= width and 0 <= ymin < ymax <= height):
            raise _Rejected(
                f"{where} has a box outside its image, or empty: xmin {xmin:g}, ymin "
                f"{ymin:g}, xmax {xmax:g}, ymax {ymax:g} in <size> {width:g} x {height:g}",
                filename)
        if flags[0] and difficult == "drop":
            continue
        found.boxes.append([ymin / height, xmin / width, ymax / height, xmax / width])
        found.names.append(name)
        found.difficult.append(flags[0])
        found.truncated.append(flags[1])
        found.poses.append(_text(element, "pose") or _UNSPECIFIED)
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
                    f"{', '.join(map(repr, shown))})", annotation.filename)


def _splits(root: str, files: Sequence[str]) -> dict[str, Split]:
    """The split of every XML file the VOC layout's `ImageSets/Main/*.txt` lists, by
    its URI.

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
    found: dict[str, Split] = {}
    where: dict[str, str] = {}
    for annotations, by_split in lists.items():
        trainval = by_split.pop("trainval", None)
        if trainval is not None and not {Split.TRAIN, Split.VALIDATION} & set(by_split):
            by_split[Split.TRAIN] = trainval
        for split, uri in by_split.items():
            for image_id in _listed_ids(uri):
                xml = fs.join(annotations, f"{image_id}.xml")
                if found.get(xml, split) != split:
                    raise SchemaError(
                        f"the Pascal VOC lists {where[xml]!r} and {uri!r} both name image "
                        f"{image_id!r}: an image belongs to one split (a test image the "
                        "model trains on tests nothing). Remove it from one list.",
                        rows=[image_id], column="split")
                found[xml], where[xml] = split, uri
    return found


def _listed_ids(uri: str) -> list[str]:
    """The image ids of an ImageSets list: each line's first word."""
    text = fs.read_bytes(uri).decode("utf-8", errors="replace")
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def _folder_split(xml: str, root: str) -> Split | None:
    """The split a folder of the XML file's path below `root` is named after, nearest
    first (`images/train/1.xml`)."""
    folders = fs.relative_to(_parent(xml), root).replace("\\", "/").split("/")
    return next((split for split in map(split_named, reversed(folders))
                 if isinstance(split, Split)), None)


def _table(accepted: list[_Row], rejected: list, base_dir: str, options: TableOptions,
           path: str) -> Table:
    """The detection table of the rows, with the rejected XML files beside it."""
    index = pd.Index([row.name for row in accepted])
    images = pd.DataFrame({"image_uri": [row.image_uri for row in accepted],
                           IMAGE_ID: [row.annotation.filename for row in accepted]},
                          index=index)
    if any(row.split is not None for row in accepted):
        images.insert(0, "split", [str(row.split) if row.split else UNASSIGNED
                                   for row in accepted])
    image, rows, where = [], [], []
    for position, row in enumerate(accepted):
        for k in range(len(row.annotation.names)):
            image.append(position)
            rows.append(row.name)
            where.append((row.name, k))
    joined = {field: list(itertools.chain.from_iterable(
        getattr(row.annotation, field) for row in accepted))
        for field in ("boxes", "names", "difficult", "truncated", "poses")}

    def shown(i: int) -> str:
        name, k = where[i]
        return f"{name}, object {k + 1}: {joined['names'][i]!r}"

    objects = Objects.of(image, joined["names"], joined["boxes"], rows, shown,
                         f"the Pascal VOC source {path!r}",
                         **{DIFFICULT: joined["difficult"], TRUNCATED: joined["truncated"],
                            VIEW: joined["poses"]})
    source = images[["image_uri"]].assign(xml=index, objects=[
        len(row.annotation.names) for row in accepted])[["xml", "image_uri", "objects"]]
    options = dataclasses.replace(options, schema={IMAGE_ID: "StringInput",
                                                   **(options.schema or {})})
    table = objects_table(images, objects, source, base_dir, options,
                          label_type=STRING_LABEL)
    return dataclasses.replace(table, rejected_rows=pd.DataFrame(
        rejected, columns=["xml", "image_uri", "reason"],
        index=[name for name, *_ in rejected]) if rejected else None)


def _nothing_read(path: str, total: int, rejected: list) -> str:
    shown = "; ".join(f"{name}: {reason}" for name, _, reason in rejected[:_EXAMPLES])
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

"""COCO datasets as they are downloaded: a folder whose layout says where each split's
COCO file and images are, so that `convert("coco2017/", ...)` needs no dict of files.

Three layouts are found, asked in this order:

- COCO's own (and datumaro's): `annotations/instances_<name>.json`, its images in
  `<name>/` or `images/<name>/` (`instances_val2017.json` and `val2017/`). Other files of
  `annotations/` (`captions_*`, `person_keypoints_*`, `image_info_*`) are not read.
- Roboflow's COCO export: `train/`, `valid/` and `test/` (folders whose names spell a
  split), each holding `_annotations.coco.json` beside its images.
- One split of it: `_annotations.coco.json` in the folder itself, beside its images.

A file's split is told by its name (`<name>`, or the folder's): a spelling of a split
(`format/splits.py`: train, training, val, valid, validation, dev, test, testing) in any
case, followed by no letter, so `train2017` is train, `val2017` validation and
`test-dev2017` test. Any other name (datumaro's `default`, Detectron's `minival2014`) is
UNASSIGNED, its rows split by hash; `split=` gives a folder of one file its split. Two
files of one split are refused rather than their images written twice (Detectron's
`minival2014` and `valminusminival2014` beside COCO 2014's files are both UNASSIGNED):
pass the ones wanted as a dict of files by split.

Each file is read by `coco.read` as its split, its file names under its image folder
(or `image_root`'s: one folder for all, or a dict by split), and the parts are joined by
`concat_tables`, their rows named `<name>[<image id>]` ("val2017[139]").
"""

from __future__ import annotations

import dataclasses
import re

from tfrecorder import sources
from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.splits import SPELLINGS, UNASSIGNED, Split, split_named
from tfrecorder.options import TableOptions
from tfrecorder.sources import coco
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs

ANNOTATIONS = "annotations"  # COCO's folder of annotation files
ROBOFLOW_FILE = "_annotations.coco.json"  # Roboflow's file of one split, beside its images
_INSTANCES = re.compile(r"^instances_(?P<name>.+)\.json$", re.IGNORECASE)
# A split's spelling at the start of a name, followed by no letter: the longest first, so
# that "validation2017" is not read as "val" followed by letters.
_SPLIT_PREFIX = re.compile(
    "^(" + "|".join(sorted(map(re.escape, SPELLINGS), key=len, reverse=True))
    + ")(?![a-z])", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Part:
    """One COCO file of the folder, and where its images are."""

    name: str  # "val2017", "valid": its rows' names, val2017[139]
    annotations: str  # the COCO file
    images: str  # the folder its file names are relative to
    tried: tuple[str, ...]  # the image folders looked for, for a message when none is

    @property
    def split(self) -> Split | str:
        """The split its name spells, else UNASSIGNED."""
        found = _SPLIT_PREFIX.match(self.name)
        return split_named(found.group(1)) if found else UNASSIGNED


def claims(path: str, folder: bool) -> bool:
    """A folder of one of the three layouts (a COCO instances file in it)."""
    return folder and bool(parts(path))


def parts(path: str) -> list[Part]:
    """The folder's COCO files of the first layout it holds, in name order; none for a
    folder of another kind."""
    annotations = fs.join(path, ANNOTATIONS)
    found = []
    for name in fs.list_dir(annotations):
        instances = _INSTANCES.match(name)
        if instances:
            subset = instances.group("name")
            tried = (fs.join(path, subset), fs.join(path, "images", subset))
            images = next((f for f in tried if fs.is_folder(f)), tried[0])
            found.append(Part(subset, fs.join(annotations, name), images, tried))
    if found:
        return found
    for name in fs.list_dir(path, folders=True):
        below = fs.join(path, name)
        if split_named(name) is not None and fs.exists(fs.join(below, ROBOFLOW_FILE)):
            found.append(Part(name, fs.join(below, ROBOFLOW_FILE), below, (below,)))
    if found:
        return found
    if ROBOFLOW_FILE in fs.list_dir(path):
        return [Part(fs.basename(path.rstrip("/")), fs.join(path, ROBOFLOW_FILE), path,
                     (path,))]
    return []


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """Every COCO file's table, read as its split, joined as one.

    Raises:
        SchemaError: for two files of one split, `split=` beside several files, a folder
            of images that is not there, or `image_root` naming a split the folder lacks.
    """
    found = parts(path)
    splits = [str(split_named(options.split)) if options.split is not None
              and len(found) == 1 else str(part.split) for part in found]
    if options.split is not None and len(found) > 1:
        raise SchemaError(
            "", Option("split", options.split), f" gives every row one split, and "
            f"{path!r} holds a COCO file for each split, named by it ("
            f"{', '.join(fs.relative_to(p.annotations, path) for p in found)}). Leave it "
            "out.", option="split")
    for k, split in enumerate(splits):
        twice = next((other for other, s in zip(found[:k], splits) if s == split), None)
        if twice is not None:
            raise SchemaError(
                f"{path!r} holds two COCO files of the split {str(split).upper()}: "
                f"{twice.annotations!r} and {found[k].annotations!r}, whose images would "
                "be written twice. Pass the files wanted as a dict by split "
                "({'train': ..., 'validation': ...}, or SPLIT=PATH on the command line), "
                "with image_root for their images.", option="source")
    roots = _roots(path, found, splits, options)
    tables = {part.name: coco.read(part.annotations, part.images, dataclasses.replace(
        options, split=split, image_root=root))
        for part, split, root in zip(found, splits, roots)}
    if len(tables) == 1:
        return next(iter(tables.values()))
    return sources.concat_tables(tables, {p.name: p.annotations for p in found})


def _roots(path: str, found: list[Part], splits: list[str], options: TableOptions
           ) -> list[str]:
    """The image folder of each part: `image_root`'s where it gives one, else the
    part's own, which must be there."""
    roots = sources.split_roots(options.image_root, splits, repr(path))
    for part, root in zip(found, roots):
        if root is None and not fs.is_folder(part.images):
            raise SchemaError(
                f"{part.annotations!r} has no folder of images: "
                f"{' or '.join(repr(f) for f in part.tried)} is not there. Download or "
                "unpack its images there, pass ", Option("image_root"), " with their "
                "folder, or convert the other splits' files alone (a dict of files by "
                "split).", option="image_root")
    return [root if root is not None else part.images for part, root in zip(found, roots)]

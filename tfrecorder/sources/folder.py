"""Image folders laid out as `label/file` or `split/label/file` (`train/cat/1.jpg`), and
folders of clips laid out alike (`train/cartwheel/1.mp4`, `dog/bark.wav`): a folder whose
files are videos or audio by their extension (`media.media_of_path`) is a table of clips,
one a file, each its whole file (issue 49). The layout is the same for every kind of
file, so one reader serves them; what the files are is decided once, over all of them
(`_media`), as a table holds one kind of file."""

from __future__ import annotations

import logging
import os

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.format.splits import split_named
from tfrecorder.options import TableOptions
from tfrecorder.sources import media, yolo
from tfrecorder.sources.image_paths import has_image_extension, is_image_file
from tfrecorder.sources.table import Table
from tfrecorder.sources.validate import validate
from tfrecorder.storage import fs
from tfrecorder.wording import count

logger = logging.getLogger(__name__)


def claims(path: str, folder: bool) -> bool:
    """Any folder that no other format claims (the dispatcher asks Parquet first)."""
    return folder


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The folder's table: of images, or of clips (`video_uri` or `audio_uri`)."""
    frame = folder_table(path)
    kind = _media(frame["image_uri"].tolist(), path)
    if kind is not None:
        frame = frame.rename(columns={"image_uri": f"{kind}_uri"})
    return validate(frame, base_dir=base_dir, schema=options.schema, split=options.split)


def _media(uris: list[str], root: str) -> str | None:
    """"video" or "audio" for a folder of clips; None for a folder of images.

    Raises:
        SchemaError: for clips beside other files (images, or both kinds of clip).
    """
    if not any(media.media_of_path(uri) for uri in uris):
        return None
    return media.media_column_kind(uris, f"the folder {root!r}")


_STRAY_SNIFFED = 100  # stray files without an image extension whose bytes are looked at


def folder_table(root: str) -> pd.DataFrame:
    """Rows for a folder laid out as `label/file` or `split/label/file`.

    A first level made only of split names (`splits.SPELLINGS`, any case) means
    `split/label/...`; otherwise the first level is the label. Split folders holding
    label folders beside other folders are an error: which folders are classes is
    unclear. Files may sit deeper below the label folder. Hidden files (a leading '.')
    are skipped, and so, with a warning, are non-image files outside the label folders
    (a README); images there (by extension, or a local file's first bytes) are an error.
    A folder holding annotations of another format is an error (`_refuse_annotations`).
    """
    remote = fs.is_remote(root)
    root = root.rstrip("/") if remote else os.path.abspath(root)
    entries = []
    for uri in fs.list_files(root):
        parts = uri[len(root):].strip("/").split("/" if remote else os.sep)
        if not any(p.startswith(".") for p in parts):
            entries.append((uri, parts))
    if not entries:
        raise SchemaError(f"the folder {root!r} holds no files.")
    _refuse_annotations(root, entries)
    folders = {parts[0] for _, parts in entries if len(parts) > 1}
    split_folders = sorted(f for f in folders if split_named(f) is not None)
    by_split = bool(folders) and len(split_folders) == len(folders)
    if split_folders and not by_split and all(
            len(parts) > 2 for _, parts in entries if parts[0] in split_folders):
        raise SchemaError(
            f"the folder {root!r} holds split folders with label folders inside "
            f"({split_folders}) beside other folders ({sorted(folders - set(split_folders))}"
            "), so it is neither split/label/file nor label/file. Move the other folders "
            "into the split folders, or out of the folder.")
    depth = 3 if by_split else 2
    stray = [uri for uri, parts in entries if len(parts) < depth]
    unknown = [uri for uri in stray if not has_image_extension(uri)
               and not media.media_of_path(uri)]
    sniffed = set(unknown[:_STRAY_SNIFFED]) if not remote else set()
    stray_images = [uri for uri in stray if uri not in unknown
                    or (uri in sniffed and is_image_file(uri))]
    if stray_images:
        layout = "split/label/file" if by_split else "label/file"
        raise SchemaError(
            f"the folder {root!r} is read as {layout}, but {len(stray_images)} image(s) "
            f"sit outside a label folder, e.g. {stray_images[:3]}. Move them into one."
        )
    if stray:
        logger.warning("Skipping %d file(s) outside the label folders of %s: %s",
                       len(stray), root, stray[:5])
        entries = [(uri, parts) for uri, parts in entries if len(parts) >= depth]
    if not entries:
        raise SchemaError(f"the folder {root!r} holds no images in label folders.")
    frame = pd.DataFrame(
        {"image_uri": [uri for uri, _ in entries],
         "label": [parts[depth - 2] for _, parts in entries]}
    )
    if by_split:
        frame.insert(0, "split", [split_named(parts[0]) for _, parts in entries])
    return frame


def _refuse_annotations(root: str, entries: list[tuple[str, list[str]]]) -> None:
    """Raises for a folder whose files say it is no label/file folder: read as one, its
    annotations would be lost, or become classes (Ultralytics' `images/` and `labels/`
    folders). Formats with a reader of their own (a YOLO data file, Pascal VOC's XML)
    are claimed before this reader is asked; what reaches it lacks what they need.

    Args:
        entries: the folder's files, with their path's parts below `root`.
    """
    yaml = [uri for uri, parts in entries if len(parts) == 1
            and parts[0].lower().endswith(yolo.SUFFIXES)]
    tree = _yolo_tree(entries)
    if tree is not None:
        fix = (f"Pass the data file ({yaml[0]!r}), whose error says why it is not read as "
               "one" if yaml else "Pass the dataset's data.yaml, which names the classes "
               "and splits (write one beside images/ if it has none: `names: [cat, dog]`, "
               "`train: images/train`, `val: images/val`)")
        raise SchemaError(
            f"the folder {root!r} holds an images/ and a labels/ tree of label files (e.g. "
            f"{tree!r}), as a YOLO (Ultralytics) dataset does: read as a label/file folder, "
            f"'images' and 'labels' would become classes and every box would be lost. "
            f"{fix}.", option="source")
    xml = [uri for uri, _ in entries if uri.lower().endswith(".xml")]
    if xml:
        raise SchemaError(
            f"the folder {root!r} holds {count(len(xml), 'XML file')} (e.g. {xml[:3]}), "
            "annotations that a label/file classification folder would lose. tfrecorder "
            "reads Pascal VOC XML files (an <annotation> root, one file an image, as "
            "LabelImg, CVAT and VOC2012 write them) from the folder holding them; these are "
            "not. Move them out of the folder to read its images as label/file.",
            option="source")


def _yolo_tree(entries: list[tuple[str, list[str]]]) -> str | None:
    """The first label file of an Ultralytics tree: a `.txt` file under a `labels`
    folder whose parent also holds an `images` folder (`labels/train/a.txt` beside
    `images/train/a.jpg`, or Roboflow's `train/labels/` beside `train/images/`)."""
    images = {tuple(parts[:at]) for _, parts in entries
              for at, part in enumerate(parts[:-1]) if part == "images"}
    return next((uri for uri, parts in entries if parts[-1].lower().endswith(".txt")
                 and any(part == "labels" and tuple(parts[:at]) in images
                         for at, part in enumerate(parts[:-1]))), None)

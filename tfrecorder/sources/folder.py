"""Image folders laid out as `label/file` or `split/label/file` (`train/cat/1.jpg`)."""

from __future__ import annotations

import logging
import os

import pandas as pd

from tfrecorder import fs
from tfrecorder.errors import SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources.image_paths import has_image_extension, is_image_file
from tfrecorder.sources.validate import validate
from tfrecorder.splits import split_named
from tfrecorder.table import Table

logger = logging.getLogger(__name__)


def claims(path: str, folder: bool) -> bool:
    """Any folder that no other format claims (the dispatcher asks Parquet first)."""
    return folder


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The folder's table."""
    return validate(folder_table(path), base_dir=base_dir, schema=options.schema,
                    split=options.split)


_STRAY_SNIFFED = 100  # stray files without an image extension whose bytes are looked at


def folder_table(root: str) -> pd.DataFrame:
    """Rows for a folder laid out as `label/file` or `split/label/file`.

    A first level made only of split names (`splits.SPELLINGS`, any case) means
    `split/label/...`; otherwise the first level is the label. Split folders holding
    label folders beside other folders are an error: which folders are classes is
    unclear. Files may sit deeper below the label folder. Hidden files (a leading '.')
    are skipped, and so, with a warning, are non-image files outside the label folders
    (a README); images there (by extension, or a local file's first bytes) are an error.
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
    unknown = [uri for uri in stray if not has_image_extension(uri)]
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

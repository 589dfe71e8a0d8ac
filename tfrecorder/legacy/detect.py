"""Whether a folder is a dataset TFRecorder 2.0 wrote, and what to do with it.

A leaf: it imports only `fs`, so `manifest` (and through it every reader) can add the
hint to "no dataset.json" without reaching `migration`, which writes.
"""

from __future__ import annotations

import os

from tfrecorder.storage import fs

SCHEMA = ("transformed_metadata", "schema.pbtxt")
TRANSFORM_FN = "transform_fn"


def is_legacy_dataset(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder TFRecorder 2.0 wrote: it has `transform_fn/` and
    `transformed_metadata/schema.pbtxt`. Two lookups, no shard read."""
    path = os.fspath(path)
    return fs.exists(fs.join(path, *SCHEMA)) and fs.is_folder(fs.join(path, TRANSFORM_FN))


def legacy_hint(path: str | os.PathLike) -> str:
    """What to do with a TFRecorder 2.0 folder, as a sentence to add to "no dataset.json"
    (with a leading space); "" for any other folder."""
    path = os.fspath(path)
    if not is_legacy_dataset(path):
        return ""
    return (f" It is a TFRecorder 2.0 dataset: run `tfrecorder migrate {path} NEW_DIR` "
            f"(in Python, tfrecorder.migrate({path!r}, new_dir)) to write a "
            "tfrecorder dataset of it.")

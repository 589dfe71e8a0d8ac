"""The dataset on disk, as readers and the writer both name it: its files, their names,
and reading the manifest. Light on purpose (no pandas, Pillow or TensorFlow): `load`,
`verify` and `inspect` depend on this, never on the writer.

A dataset folder holds shards (`train-00000-of-00004.tfrecord`), `rejected.csv` and the
manifest `dataset.json`, written last: a folder without a manifest is not a dataset, so an
interrupted run can never look complete. While a run writes, the folder also holds its
lock, its journal and files under temporary names (see `output`).
"""

from __future__ import annotations

import json
import re

from tfrecorder import fs

MANIFEST = "dataset.json"
REJECTED = "rejected.csv"
FORMAT_VERSION = 1
# The run journal (see `resume`): the run's fingerprint, and a receipt per committed shard.
RUN_STATE = "resume.json"
RECEIPT_SUFFIX = ".receipt.json"
TEMP_MARKER = ".tmp-"  # a file being written: `name.tmp-<run id>`
LOCK = ".tfrecorder.lock"  # held by the run writing into the folder

_SHARD_FILE = r"(?:train|validation|test)-\d{5}-of-\d{5}\.tfrecord(?:\.gz)?"
# Every file a run may leave in the output folder, including temporary ones.
_DATASET_FILE = re.compile(
    r"^(?:" + _SHARD_FILE + "(?:" + re.escape(RECEIPT_SUFFIX) + ")?|"
    + "|".join(map(re.escape, (MANIFEST, REJECTED, RUN_STATE)))
    + r")(?:" + re.escape(TEMP_MARKER) + r"\w+)?$"
)


def shard_filename(split: str, index: int, num_shards: int, compression: str | None) -> str:
    """`train-00000-of-00004.tfrecord` (`.tfrecord.gz` when gzipped); `split` any case."""
    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    return f"{split.lower()}-{index:05d}-of-{num_shards:05d}{suffix}"


def dataset_files(folder: str) -> list[str]:
    """Names of the files in `folder` that a tfrecorder run writes."""
    return [name for name in fs.list_dir(folder) if _DATASET_FILE.match(name)]


def is_temporary(name: str) -> bool:
    return TEMP_MARKER in name


def read_manifest(dataset_dir: str) -> dict:
    path = fs.join(dataset_dir, MANIFEST)
    if not fs.exists(path):
        fs.check_access([dataset_dir])  # a missing bucket is a StorageError saying so
        raise FileNotFoundError(
            f"{dataset_dir!r} holds no {MANIFEST}: it is not a finished tfrecorder dataset."
        )
    return json.loads(fs.read_bytes(path))

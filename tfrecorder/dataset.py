"""The dataset on disk: which files it has, the manifest, and the rejected-rows report.

A dataset folder holds shards (`train-00000-of-00004.tfrecord`), `rejected.csv` and the
manifest `dataset.json`, written last: a folder without a manifest is not a dataset, so an
interrupted run can never look complete. Readers (load, inspect, verify) trust the
manifest, never file names.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from tfrecorder import fs
from tfrecorder._version import __version__
from tfrecorder.errors import DatasetExistsError
from tfrecorder.plan import Plan
from tfrecorder.records import IMAGE_FEATURES, Rejection
from tfrecorder.table import SPLITS, Table
from tfrecorder.tfrecord import TEMP_MARKER

MANIFEST = "dataset.json"
REJECTED = "rejected.csv"
FORMAT_VERSION = 1
# The run journal (see `resume`): the run's fingerprint, and a receipt per committed shard.
RUN_STATE = "resume.json"
RECEIPT_SUFFIX = ".receipt.json"

# Every file a run may leave in the output folder, including temporary ones.
_DATASET_FILE = re.compile(
    r"^(?:(?:train|validation|test)-\d{5}-of-\d{5}\.tfrecord(?:\.gz)?(?:"
    + re.escape(RECEIPT_SUFFIX) + ")?|" + "|".join(map(re.escape, (MANIFEST, REJECTED,
                                                                   RUN_STATE)))
    + r")(?:" + re.escape(TEMP_MARKER) + r"\w+)?$"
)


@dataclass(frozen=True)
class WrittenShard:
    """What an engine wrote for one shard of the plan."""

    split: str
    filename: str
    num_records: int
    num_bytes: int
    num_rejected: int


def dataset_files(output_dir: str) -> list[str]:
    """Names of the files in `output_dir` that a tfrecorder run writes."""
    return [name for name in fs.list_dir(output_dir) if _DATASET_FILE.match(name)]


def check_output_dir(output_dir: str, overwrite: bool, resume: bool = False) -> list[str]:
    """Refuses a folder that holds a dataset (or a crashed run's leftovers) unless
    `overwrite`, or for leftovers, `resume`; returns those files."""
    if not fs.is_remote(output_dir) and os.path.exists(output_dir) \
            and not os.path.isdir(output_dir):
        raise NotADirectoryError(f"output_dir {output_dir!r} is a file, not a folder.")
    existing = dataset_files(output_dir)
    finished = MANIFEST in existing
    if existing and not overwrite and (finished or not resume):
        what = ("a dataset" if finished
                else "files of an incomplete dataset (an interrupted run)")
        fix = ("Pass overwrite=True to replace it" if finished else
               "Pass resume=True to continue that run, overwrite=True to replace it")
        raise DatasetExistsError(
            f"{output_dir!r} already holds {what}: {len(existing)} file(s) such as "
            f"{existing[0]!r}. {fix}, or choose another output_dir."
        )
    return existing


def clear_output_dir(output_dir: str, existing: list[str]) -> None:
    """Deletes a previous dataset's files (only those) and creates the folder."""
    # The manifest goes first, so a crash while clearing leaves no dataset, not a broken one.
    existing = sorted(existing, key=lambda name: name != MANIFEST)
    fs.delete([fs.join(output_dir, name) for name in existing])
    fs.makedirs(output_dir)


def manifest_header(plan: Plan, table: Table, options: dict) -> dict:
    """Everything the manifest says that is known before writing, as small plain data
    (engines that run elsewhere carry this, never the plan itself)."""
    header = {
        "format": "tfrecorder",
        "format_version": FORMAT_VERSION,
        "created_by": f"tfrecorder {__version__}",
        "compression": plan.compression,
        "features": features(plan, table),
        "num_source_rows": plan.num_rows,
        "options": {"seed": plan.seed, **options},
    }
    if table.has_labels:
        header["labels"] = {
            "type": "integer" if plan.label_vocabulary is None else "text",
            "vocabulary": list(plan.label_vocabulary) if plan.label_vocabulary else None,
            "multi_label": table.multi_label,
            "num_classes": _num_classes(plan),
        }
    return header


def features(plan: Plan, table: Table) -> dict:
    """Every feature of the records: its dtype, its shape (None: any length), its role
    (image, label, split or input) and, for categorical inputs, its vocabulary. `load()`
    builds its parsing spec from this alone."""
    found = {}
    if table.has_images:
        found.update({name: {"dtype": dtype, "shape": [], "role": "image"}
                      for name, dtype in IMAGE_FEATURES.items()})
    if table.has_labels:
        found["label"] = {"dtype": "int64", "shape": [None] if table.multi_label else [],
                          "role": "label"}
    found["split"] = {"dtype": "string", "shape": [], "role": "split"}
    for column in table.inputs:
        found[column.name] = {"dtype": column.dtype, "shape": list(column.shape),
                              "role": "input"}
        if column.kind == "categorical":
            found[column.name]["vocabulary"] = list(plan.vocabularies[column.name])
    return found


def _num_classes(plan: Plan) -> int:
    """The label vocabulary's size, or for integer labels, the largest id + 1."""
    if plan.label_vocabulary is not None:
        return len(plan.label_vocabulary)
    ids = [i for label in plan.label_ids for i in (label if isinstance(label, list) else [label])]
    return max(ids, default=-1) + 1


def finish(output_dir: str, run_id: str, header: dict, written: Sequence[WrittenShard],
           rejections: Sequence[Rejection], source: pd.DataFrame) -> dict:
    """The last step of every engine: writes rejected.csv, then the manifest (by rename,
    so it is either absent or complete). Returns the manifest."""
    _write_rejected(output_dir, run_id, source, rejections)
    splits = {}
    for split in SPLITS:
        shards = [w for w in written if w.split == split]
        if shards:
            splits[split.lower()] = {
                "num_records": sum(w.num_records for w in shards),
                "num_rejected": sum(w.num_rejected for w in shards),
                "num_bytes": sum(w.num_bytes for w in shards),
                "shards": [{"file": w.filename, "num_records": w.num_records,
                            "num_bytes": w.num_bytes} for w in shards],
            }
    manifest = {**header, "splits": splits,
                "rejected": {"file": REJECTED, "num_rows": len(rejections)}}
    fs.write_bytes(fs.join(output_dir, MANIFEST), json.dumps(manifest, indent=2).encode()
                   + b"\n", temp_suffix=TEMP_MARKER + run_id)
    return manifest


def _write_rejected(output_dir: str, run_id: str, source: pd.DataFrame,
                    rejections: Sequence[Rejection]) -> None:
    """The rejected rows as given, plus a `reason` column."""
    rejections = sorted(rejections)
    rows = source.iloc[[r.position for r in rejections]].copy()
    reason = "reason" if "reason" not in rows.columns else "rejection_reason"
    rows[reason] = [r.reason for r in rejections]
    rows.index.name = rows.index.name or "row"
    fs.write_bytes(fs.join(output_dir, REJECTED), rows.to_csv().encode(),
                   temp_suffix=TEMP_MARKER + run_id)


def read_manifest(dataset_dir: str) -> dict:
    path = fs.join(dataset_dir, MANIFEST)
    if not fs.exists(path):
        fs.check_access([dataset_dir])  # a missing bucket is a StorageError saying so
        raise FileNotFoundError(
            f"{dataset_dir!r} holds no {MANIFEST}: it is not a finished tfrecorder dataset."
        )
    return json.loads(fs.read_bytes(path))

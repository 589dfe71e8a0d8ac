"""The writer's last step: the manifest's content, `rejected.csv`, and how many rows a
run may reject.

File names and reading a manifest live in `manifest`, which readers use; the manifest is
written last, so a folder without one is never a dataset. Readers (load, inspect, verify)
trust the manifest, never file names.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from tfrecorder._version import __version__
from tfrecorder.errors import ImageError, Option, TooManyRejectedError
from tfrecorder.manifest import (
    IMAGE_FEATURES,
    MANIFEST,
    REJECTED,
    SPLITS,
    Feature,
    Labels,
    Manifest,
    Rejected,
    ShardInfo,
    Split,
    SplitInfo,
    record_feature_types,
)
from tfrecorder.options import DEFAULT_MAX_REJECTED
from tfrecorder.plan import Plan
from tfrecorder.rows import Rejection
from tfrecorder.table import Table


@dataclass(frozen=True)
class WrittenShard:
    """What an engine wrote for one shard of the plan."""

    split: Split
    filename: str
    num_records: int
    num_bytes: int
    num_rejected: int
    sha256: str = ""  # of the file's bytes, as written


@dataclass(frozen=True)
class Written:
    """What an engine wrote: every shard of the plan in writing order, and every row it
    rejected. Both engines return this, and `finish` turns it into the dataset."""

    shards: list[WrittenShard]
    rejections: list[Rejection]

    @property
    def metrics(self) -> dict[str, int]:
        written = sum(shard.num_records for shard in self.shards)
        return {"rows_read": written + len(self.rejections), "records_written": written,
                "rows_rejected": len(self.rejections)}


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_REASONS_SHOWN = 3


@dataclass(frozen=True)
class RejectionLimit:
    """How many rows a run may reject: more than `max_rejected` (a fraction of the rows)
    means the table is wrong, not a few images, and the run fails as soon as it is sure."""

    num_rows: int
    max_rejected: float = DEFAULT_MAX_REJECTED

    def exceeded(self, num_rejected: int) -> bool:
        return num_rejected > math.floor(self.max_rejected * self.num_rows)

    def error(self, rejections: Sequence[Rejection]) -> TooManyRejectedError:
        """The error naming the commonest reasons (paths in them folded, so that 'no such
        file' for a thousand rows is one reason)."""
        reasons = Counter(_QUOTED.sub("'...'", r.reason) for r in rejections)
        common = "; ".join(f"{count} x {reason}"
                           for reason, count in reasons.most_common(_REASONS_SHOWN))
        return TooManyRejectedError(
            f"{len(rejections)} rows were rejected before the run stopped, more than ",
            Option("max_rejected", self.max_rejected), f" of the {self.num_rows} rows "
            f"allows ({math.floor(self.max_rejected * self.num_rows)}). Most common "
            f"reasons: {common}. Fix the table (are the paths relative to the right "
            "folder?), or pass a larger ", Option("max_rejected"),
            " (1.0 writes whatever can be written).",
            num_rejected=len(rejections), num_rows=self.num_rows, reasons=dict(reasons))


def image_error(table: Table, rejection: Rejection) -> ImageError:
    """What stops a run with `on_error="raise"`: the row, by its label in the table (a
    CSV's line), its image and why it cannot be written."""
    row = table.rows.index[rejection.position]
    return ImageError(
        f"row {row} ({table.rows['image_uri'].iat[rejection.position]!r}): "
        f"{rejection.reason}. Fix or drop the row, or use ", Option("on_error", "reject"),
        " to list such rows in rejected.csv.", column="image_uri", rows=[row],
        option="on_error")


def manifest_header(plan: Plan, table: Table, options: dict) -> Manifest:
    """Everything the manifest says that is known before writing, as small plain data
    (engines that run elsewhere carry this, never the plan itself). `options` are those
    the manifest records (`ConvertOptions.recorded`)."""
    labels = None
    if table.has_labels:
        labels = Labels(
            type="integer" if plan.label_vocabulary is None else "text",
            vocabulary=plan.label_vocabulary or None,
            multi_label=table.multi_label,
            num_classes=_num_classes(plan))
    return Manifest(compression=plan.compression, features=features(plan, table),
                    num_source_rows=plan.num_rows, options=json.loads(json.dumps(options)),
                    labels=labels, created_by=f"tfrecorder {__version__}")


def features(plan: Plan, table: Table) -> dict[str, Feature]:
    """Every feature of the records (`load()` builds its parsing spec from these alone)."""
    found = dict(IMAGE_FEATURES) if table.has_images else {}
    found.update(record_feature_types(table.has_labels, table.multi_label))
    for column in table.inputs:
        found[column.name] = Feature(
            column.dtype, tuple(column.shape), role="input",
            vocabulary=(tuple(plan.vocabularies[column.name])
                        if column.kind == "categorical" else None))
    return found


def _num_classes(plan: Plan) -> int:
    """The label vocabulary's size, or for integer labels, the largest id + 1."""
    if plan.label_vocabulary is not None:
        return len(plan.label_vocabulary)
    ids = [i for label in plan.label_ids for i in (label if isinstance(label, list) else [label])]
    return max(ids, default=-1) + 1


def finish(folder, header: Manifest, written: Written, journal, limit: RejectionLimit,
           source: pd.DataFrame) -> Manifest:
    """The last step of every run, whichever engine wrote the shards (a Beam job that the
    driver did not wait for runs it itself): refuses a run that rejected too many rows,
    writes rejected.csv, then the manifest, into the run's `output.OutputFolder` (each
    under a temporary name first, so it is either absent or complete), and deletes the
    run's journal. Returns the manifest."""
    if limit.exceeded(len(written.rejections)):
        raise limit.error(written.rejections)
    _write_rejected(folder, source, written.rejections)
    splits = {}
    for split in SPLITS:
        shards = [w for w in written.shards if w.split == split]
        if shards:
            splits[split] = SplitInfo.of(
                tuple(ShardInfo(w.filename, w.num_records, w.num_bytes, w.sha256)
                      for w in shards), sum(w.num_rejected for w in shards))
    manifest = header.finished(splits, Rejected(REJECTED, len(written.rejections)))
    folder.write_bytes(MANIFEST, manifest.to_bytes())
    journal.close([shard.filename for shard in written.shards])
    return manifest


def _write_rejected(folder, source: pd.DataFrame, rejections: Sequence[Rejection]) -> None:
    """The rejected rows as given, plus a `reason` column."""
    rejections = sorted(rejections)
    rows = source.iloc[[r.position for r in rejections]].copy()
    reason = "reason" if "reason" not in rows.columns else "rejection_reason"
    rows[reason] = [r.reason for r in rejections]
    rows.index.name = rows.index.name or "row"
    folder.write_bytes(REJECTED, rows.to_csv().encode())

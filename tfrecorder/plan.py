"""The plan: every decision about the dataset, made once in the driver, as pure data.

Label ids, the split of every row, the shuffled order and the shard of every row are
decided here and nowhere else. Both engines execute the same `Plan`, which is why their
outputs are byte-identical, and why tests can check all of it without writing a file.

Decisions are stable across runs, machines and library versions: UNASSIGNED rows get a
split from a hash of their URI (so an image never changes split between runs), and the
shuffle uses NumPy's frozen legacy `RandomState` stream with a recorded seed. Text labels
are numbered in sorted order, or in the order of a given vocabulary (`label_vocabulary`,
read by `tfrecorder.vocabulary`), which keeps a model's ids from one conversion to the
next.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tfrecorder import vocabulary as given_vocabulary
from tfrecorder.errors import Option, OptionError, SchemaError
from tfrecorder.manifest import LABEL, SPLITS, Split, shard_filename
from tfrecorder.options import SIZE_SAMPLE, ConvertOptions, ImageOptions, SplitOptions
from tfrecorder.rows import Row
from tfrecorder.schema import name_rows
from tfrecorder.table import UNASSIGNED, Table

logger = logging.getLogger(__name__)

_LABELS_NAMED = 5  # unknown labels an error names one by one


@dataclass(frozen=True)
class Shard:
    """One output file: which table rows go into it, in order."""

    split: Split
    index: int
    num_shards: int
    positions: tuple[int, ...]  # positions (0-based, as in .iloc) of the table's rows
    compression: str | None = None

    @property
    def filename(self) -> str:
        return shard_filename(self.split, self.index, self.num_shards, self.compression)


@dataclass(frozen=True)
class Plan:
    """What to write, decided before any image is read."""

    seed: int
    image_options: ImageOptions
    compression: str | None
    label_vocabulary: tuple[str, ...] | None  # None: labels were integers already
    label_ids: tuple | None  # by table position (lists for multi-label); None: no labels
    splits: tuple[Split, ...]  # by table position, after assigning unassigned rows
    shards: tuple[Shard, ...]  # in writing order: train, validation, test
    # Categorical inputs' vocabularies (a value's id is its index), by column.
    vocabularies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return len(self.splits)

    def shards_of(self, split: Split) -> tuple[Shard, ...]:
        return tuple(s for s in self.shards if s.split == split)


def label_vocabulary(labels: Sequence) -> tuple[str, ...] | None:
    """The sorted set of text labels (a label's id is its index); None for int labels."""
    if not len(labels) or isinstance(labels[0], (int, np.integer)):
        return None
    return tuple(sorted(set(labels)))


def plan_labels(table: Table, options: SplitOptions) -> tuple[tuple[str, ...] | None,
                                                                tuple | None]:
    """The label vocabulary (None for integer labels) and every row's label ids (lists
    for multi-label rows; None without labels). Text labels are numbered in sorted order,
    or in `options.label_vocabulary`'s, which reads a file or dataset if it names one:
    no image is needed, so this can run first."""
    given = options.label_vocabulary
    if not table.has_labels:
        if given is not None:
            raise OptionError(Option("label_vocabulary"), " numbers labels, but the table "
                              "has no label column. Leave it out, or say which column is "
                              "the label (", Option("schema"), ").", option="label_vocabulary")
        return None, None
    labels = table.rows[LABEL].tolist()
    every_label = [v for row in labels for v in row] if table.multi_label else labels
    vocabulary = label_vocabulary(every_label)
    if given is not None:
        if every_label and vocabulary is None:
            raise OptionError(
                Option("label_vocabulary"), " is for text labels (class names), but the "
                "table's labels are integer class ids already. Leave it out, or declare the "
                "label column StringLabel (", Option("schema"), ") to read them as names.",
                option="label_vocabulary")
        vocabulary = _with_given(table, labels, every_label, options)
    if vocabulary is None:
        return None, tuple(labels)
    return vocabulary, _ids(labels, vocabulary, table.multi_label)


def _with_given(table: Table, labels: list, every_label: list,
                options: SplitOptions) -> tuple[str, ...]:
    """The given vocabulary, with the table's labels it lacks appended in sorted order
    (`new_labels="append"`); by default those labels are an error naming their rows."""
    given = given_vocabulary.load(options.label_vocabulary)
    unknown = sorted(set(every_label) - set(given))
    if not unknown:
        return given
    if options.new_labels == "append":
        logger.warning("%d label(s) are not in the given label vocabulary (%d classes); "
                       "appended as ids %d and on: %s", len(unknown), len(given),
                       len(given), ", ".join(map(repr, unknown)))
        return given + tuple(unknown)
    at: dict[str, list] = {label: [] for label in unknown}
    rows = []  # every row with an unknown label, once, in the table's order
    for row, value in zip(table.rows.index.tolist(), labels):
        lacking = [v for v in dict.fromkeys(value if table.multi_label else [value])
                   if v in at]
        for label in lacking:
            at[label].append(row)
        if lacking:
            rows.append(row)
    named = "; ".join(f"{label!r} at {name_rows(where)}"
                      for label, where in list(at.items())[:_LABELS_NAMED])
    more = (f"; and {len(unknown) - _LABELS_NAMED} more labels"
            if len(unknown) > _LABELS_NAMED else "")
    source = options.label_vocabulary
    source = (f"{len(given)} classes from {os.fspath(source)!r}"
              if isinstance(source, (str, os.PathLike)) else f"{len(given)} classes")
    raise SchemaError(
        f"column {LABEL!r} has labels that ", Option("label_vocabulary"), f" ({source}) "
        f"lacks: {named}{more}. Add them to the vocabulary, fix those rows, or pass ",
        Option("new_labels", "append"), " to give them the next ids, in sorted order.",
        column=LABEL, rows=rows, option="label_vocabulary")


def _ids(values: list, vocabulary: Sequence[str], lists: bool) -> tuple:
    """Values (or lists of values) as their indices in `vocabulary`."""
    index = {value: i for i, value in enumerate(vocabulary)}
    if lists:
        return tuple([index[v] for v in value] for value in values)
    return tuple(index[v] for v in values)


def split_keys(table: Table) -> list[str]:
    """What an UNASSIGNED row's split is hashed from: its image URI, or for a table
    without images, its values."""
    if table.has_images:
        return table.rows["image_uri"].tolist()
    columns = [c for c in table.rows.columns if c != "split"]
    encode = json.JSONEncoder(default=str).encode  # one encoder: json.dumps makes one a row
    return [encode(values) for values in zip(*(table.rows[c].tolist() for c in columns))] \
        if columns else [str(i) for i in range(len(table.rows))]


def split_by_hash(uri: str, fractions: Sequence[float]) -> Split:
    """A split for an UNASSIGNED row, stable for its URI across runs and machines."""
    digest = hashlib.blake2b(uri.encode(), digest_size=8).digest()
    point = int.from_bytes(digest, "big") / 2**64
    cumulative = 0.0
    for split, fraction in zip(SPLITS, fractions):
        cumulative += fraction
        if point < cumulative:
            return split
    return SPLITS[-1]


def shuffled_order(num_rows: int, seed: int) -> np.ndarray:
    """A permutation of range(num_rows); the legacy RandomState stream never changes."""
    return np.random.RandomState(seed).permutation(num_rows)


def shard_boundaries(num_rows: int, num_shards: int) -> list[int]:
    """End offsets of `num_shards` contiguous shards whose sizes differ by at most one."""
    return [round(num_rows * (i + 1) / num_shards) for i in range(num_shards)]


def make_plan(table: Table, options: ConvertOptions, record_bytes: float = 0.0,
              labels: tuple | None = None) -> Plan:
    """Decides labels, splits, order and shards for `table`; `record_bytes` is the
    estimated size of one record, for the splits whose shards are sized by bytes, and
    `labels` what `plan_labels` decided already (a caller that checks labels first)."""
    fractions, seed = options.split.fractions, options.split.seed
    rows = table.rows
    splits = tuple(
        split_by_hash(key, fractions) if split == UNASSIGNED else split
        for key, split in zip(split_keys(table), rows["split"].tolist())
    )
    vocabulary, label_ids = labels if labels is not None else plan_labels(table,
                                                                          options.split)
    vocabularies = {
        c.name: c.categories or tuple(sorted(
            {v for value in rows[c.name].tolist() for v in (value if c.shape else [value])}))
        for c in table.inputs if c.kind == "categorical"}

    order = shuffled_order(len(splits), seed)
    shards = []
    for split in SPLITS:
        positions = [int(p) for p in order if splits[p] == split]
        count = options.shards.count(split, len(positions), record_bytes)
        start = 0
        for index, end in enumerate(shard_boundaries(len(positions), count)):
            shards.append(Shard(split, index, count, tuple(positions[start:end]),
                                options.shards.compression))
            start = end
    return Plan(seed, options.image, options.shards.compression, vocabulary, label_ids,
                splits, tuple(shards), vocabularies)


def sample_rows(table: Table, seed: int) -> Iterator[Row]:
    """A fixed sample of the table's rows (the first of the shuffled order), to estimate
    the size of a record before planning (`ShardOptions.record_bytes`)."""
    sample = shuffled_order(len(table.rows), seed)[:SIZE_SAMPLE]
    inputs = [c.name for c in table.inputs]
    for position, row in zip(sample, table.rows.iloc[sample].to_dict("records")):
        yield Row(int(position), row.get("uri"), row.get("image_uri"), row.get("label"),
                  Split.TRAIN, {name: row[name] for name in inputs})


def planned_rows(plan: Plan, table: Table) -> Iterator[Row]:
    """Every row of every shard, in writing order, as workers receive them."""
    no_images = [None] * plan.num_rows
    uris = table.rows["uri"].tolist() if table.has_images else no_images
    image_uris = table.rows["image_uri"].tolist() if table.has_images else no_images
    inputs = {c.name: table.rows[c.name].tolist() for c in table.inputs}
    for c in table.inputs:
        if c.kind == "categorical":
            inputs[c.name] = _ids(inputs[c.name], plan.vocabularies[c.name], bool(c.shape))
    for shard in plan.shards:
        for position in shard.positions:
            label = plan.label_ids[position] if plan.label_ids is not None else None
            yield Row(position, uris[position], image_uris[position], label, shard.split,
                      {name: values[position] for name, values in inputs.items()})

"""The plan: every decision about the dataset, made once in the driver, as pure data.

Label ids, the split of every row, the shuffled order and the shard of every row are
decided here and nowhere else. Both engines execute the same `Plan`, which is why their
outputs are byte-identical, and why tests can check all of it without writing a file.

Decisions are stable across runs, machines and library versions, and each is a rule of
one row at a time, so that a Beam pipeline can apply it to rows it never holds together:
a row's identity is a 64-bit hash of its image URI (or of its image, or of its values);
an UNASSIGNED row's split is drawn from that identity (so an image never changes split
between runs), and the rows' shuffled order is that of `order_keys`, the identity mixed
with the recorded seed, ties kept in table order. Shards are contiguous runs of that
order, of sizes within one of each other. Text labels
are numbered in sorted order, or in the order of a given vocabulary (`label_vocabulary`,
read by `tfrecorder.format.vocabulary`), which keeps a model's ids from one conversion to the
next.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, OptionError, SchemaError
from tfrecorder.format.layouts import (
    MASK,
    OBJECT_FEATURES,
    layout_named,
    object_feature,
    record_layout,
)
from tfrecorder.format.manifest import (
    DEFAULT_LAYOUT,
    IMAGE_FEATURES,
    LABEL,
    Feature,
    record_feature_types,
    shard_filename,
)
from tfrecorder.format.splits import SPLITS, UNASSIGNED, Split
from tfrecorder.format.vocabulary import LabelMap
from tfrecorder.options import (
    SIZE_SAMPLE,
    ConvertOptions,
    ImageOptions,
    RecordOptions,
    SplitOptions,
)
from tfrecorder.sources import hashing
from tfrecorder.sources.table import (
    ANNOTATED_SIZE,
    CLIP_END,
    CLIP_START,
    REGIONS,
    SEGMENTS,
    Table,
    rows_at,
)
from tfrecorder.wording import count, name_rows
from tfrecorder.write.rows import Row

logger = logging.getLogger(__name__)

_LABELS_NAMED = 5  # unknown labels an error names one by one


@dataclass(frozen=True, eq=False)
class Shard:
    """One output file: which table rows go into it, in order."""

    split: Split
    index: int
    num_shards: int
    # Positions (0-based, as in .iloc) of the table's rows: an int64 array, a view of the
    # shuffled order (a tuple of Python ints took 36 bytes a row; this takes 8, once).
    positions: np.ndarray
    compression: str | None = None

    @property
    def filename(self) -> str:
        return shard_filename(self.split, self.index, self.num_shards, self.compression)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Shard):
            return NotImplemented
        return (self.filename == other.filename
                and np.array_equal(self.positions, other.positions))

    __hash__ = None


class RowColumn(Sequence):
    """One value a table row, held as a NumPy array (a byte or 8 bytes a row, where a
    tuple took 8 more for the reference) and read as a tuple of Python values: ints, or
    with `names`, the names the codes index."""

    def __init__(self, values: np.ndarray, names: Sequence | None = None):
        self.values, self.names = values, names

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self)[index]
        value = int(self.values[index])
        return value if self.names is None else self.names[value]

    def __iter__(self):
        values = self.values.tolist()
        return iter(values) if self.names is None else map(self.names.__getitem__, values)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype, copy=False)

    def __eq__(self, other) -> bool:
        if isinstance(other, RowColumn):
            return self.names == other.names and np.array_equal(self.values, other.values)
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"RowColumn({tuple(self)[:5]}{'...' if len(self) > 5 else ''})"


@dataclass(frozen=True)
class Plan:
    """What to write, decided before any image is read."""

    seed: int
    image_options: ImageOptions
    compression: str | None
    label_vocabulary: tuple[str, ...] | None  # None: labels were integers already
    # By table position: ids (a tuple of lists for multi-label rows); None: no labels.
    label_ids: RowColumn | tuple | None
    splits: RowColumn  # by table position (Splits), after assigning unassigned rows
    shards: tuple[Shard, ...]  # in writing order: train, validation, test
    # Categorical inputs' vocabularies (a value's id is its index), by column.
    vocabularies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Every feature of the records, by stored key: the manifest's `features`.
    features: Mapping[str, Feature] = field(default_factory=dict)
    # The classes' ids in TensorFlow's label maps, where not 1, 2, ... (`plan_model_ids`).
    model_ids: tuple[int, ...] | None = None

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
                                                                RowColumn | tuple | None]:
    """The label vocabulary (None for integer labels) and every row's label ids (lists
    for multi-label rows; None without labels). Text labels are numbered in sorted order,
    or in `options.label_vocabulary`'s, which reads a file or dataset if it names one:
    no image is needed, so this can run first."""
    given = options.label_vocabulary
    names = options.class_names or table.class_names
    if not table.has_labels:
        if names is not None and options.class_names is not None:
            raise OptionError(Option("class_names"), " names integer labels, but the table "
                              "has no label column. Leave it out, or say which column is "
                              "the label (", Option("schema"), ").", option="class_names")
        if given is not None:
            raise OptionError(Option("label_vocabulary"), " numbers labels, but the table "
                              "has no label column. Leave it out, or say which column is "
                              "the label (", Option("schema"), ").", option="label_vocabulary")
        return None, None
    if not table.multi_label:
        _check_unlabeled(table, options)
    if names is not None and given is None:
        return _named_classes(table, names, options.class_names is not None)
    if not table.multi_label:
        return _single_labels(table, options)
    labels = table.rows[LABEL].tolist()
    every_label = [v for row in labels for v in row]
    vocabulary = _with_given(table, lambda: labels, every_label, options)
    if vocabulary is None:
        return None, tuple(labels)
    return vocabulary, ids_in(labels, vocabulary, table.multi_label)


def _unlabeled_rows(table: Table) -> pd.Index:
    """The rows whose label cell is blank (`sources.labels.row_labels` gives them None)."""
    if not table.has_labels or table.multi_label:
        return table.rows.index[:0]
    return table.rows.index[table.rows[LABEL].isna().to_numpy()]


def _check_unlabeled(table: Table, options: SplitOptions) -> None:
    """Raises for unlabelled rows when `unlabeled="error"`; by default they are kept, and
    their records hold no label."""
    missing = _unlabeled_rows(table)
    if len(missing) and options.unlabeled == "error":
        column = table.label_column or LABEL
        raise SchemaError(
            f"column {column!r} is blank at {name_rows(missing)} ({len(missing):,} of "
            f"{len(table.rows):,} rows). Give those rows a label, or pass ",
            Option("unlabeled", "keep"), " to write them without one (supervised pairs "
            "leave them out).", column=column, rows=missing.tolist(), option="unlabeled")
    if len(missing):
        logger.info("%d of %d rows have no label; their records hold none",
                    len(missing), len(table.rows))


def _named_classes(table: Table, names: tuple[str, ...], given: bool
                   ) -> tuple[tuple[str, ...], RowColumn | tuple]:
    """`plan_labels` for integer labels that `class_names` (or the source's ClassLabel)
    names: the ids are the labels themselves, the vocabulary the names."""
    column = table.rows[LABEL]
    labels = column.tolist() if table.multi_label else None
    if labels is None:  # unlabelled rows (None) keep id -1, as in `_single_labels`
        column = column.dropna()
    flat = pd.Series([v for row in labels for v in row]) if labels is not None else column
    where = "class_names" if given else "the source's class names"
    if len(flat) and not pd.api.types.is_integer_dtype(flat.infer_objects()):
        raise OptionError(Option("class_names"), f" names integer labels, but column "
                          f"{LABEL!r} holds text labels (e.g. {flat.iloc[0]!r}); pass ",
                          Option("label_vocabulary"), " to number text labels in a given "
                          "order.", option="class_names")
    outside = [i for i, value in zip(column.index, column.tolist())
               if any(not 0 <= v < len(names) for v in (value if labels else [value]))]
    if outside:
        values = sorted({int(v) for i in outside
                         for v in (column[i] if labels else [column[i]])
                         if not 0 <= v < len(names)})
        shown = ", ".join(map(str, values[:_LABELS_NAMED])) + (
            f" and {len(values) - _LABELS_NAMED} more" if len(values) > _LABELS_NAMED else "")
        raise SchemaError(
            f"column {LABEL!r} has labels that {where} ({len(names)} names, ids 0 to "
            f"{len(names) - 1}) do not name: {shown}, at "
            f"{name_rows(outside, of=column.index)}. Fix those rows, or name every class.",
            column=LABEL, rows=outside, option="class_names" if given else None)
    if labels is not None:
        return names, tuple([int(v) for v in row] for row in labels)
    ids = np.full(len(table.rows), -1, dtype=np.int64)
    ids[table.rows.index.get_indexer(column.index)] = column.to_numpy(dtype=np.int64)
    return names, RowColumn(ids)


def _single_labels(table: Table, options: SplitOptions) -> tuple[tuple[str, ...] | None,
                                                                    RowColumn]:
    """`plan_labels` for one label a row, each distinct label looked at once: the ids
    are the codes pandas' C factorizer gives, renumbered by the vocabulary. An
    unlabelled row (None) has id -1, which no record stores (`PlannedTable.labels_at`)."""
    column = table.rows[LABEL]
    codes, distinct = pd.factorize(column, use_na_sentinel=True)
    distinct = list(distinct)
    vocabulary = _with_given(table, column.tolist, distinct, options)
    if vocabulary is None:
        ids = np.asarray(distinct, dtype=np.int64)
    else:
        index = {value: i for i, value in enumerate(vocabulary)}
        ids = np.array([index[value] for value in distinct], dtype=np.int64)
    ids = np.append(ids, -1)  # code -1, a missing label, takes the last
    return vocabulary, RowColumn(ids[codes])


def _with_given(table: Table, labels: Callable[[], list], every_label: list,
                options: SplitOptions) -> tuple[str, ...] | None:
    """The vocabulary of `every_label` (the table's labels: all, or each once), or
    without one, None for integer labels. With `options.label_vocabulary`: the given
    vocabulary, with the table's labels it lacks appended in sorted order
    (`new_labels="append"`); by default those labels are an error naming their rows
    (`labels()` gives every row's label, for that)."""
    vocabulary = label_vocabulary(every_label)
    fixed = fixed_label_map(table, options)
    if fixed is None:
        return vocabulary
    if options.label_vocabulary is None:  # the source's own classes: its labels are in it
        return fixed.names
    if every_label and vocabulary is None:
        raise OptionError(
            Option("label_vocabulary"), " is for text labels (class names), but the "
            "table's labels are integer class ids already. Leave it out, or declare the "
            "label column StringLabel (", Option("schema"), ") to read them as names.",
            option="label_vocabulary")
    given = fixed.names
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
    for row, value in zip(table.rows.index.tolist(), labels()):
        lacking = [v for v in dict.fromkeys(value if table.multi_label else [value])
                   if v in at]
        for label in lacking:
            at[label].append(row)
        if lacking:
            rows.append(row)
    named = "; ".join(f"{label!r} at {name_rows(where, of=table.rows.index)}"
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


def fixed_label_map(table: Table, options: SplitOptions) -> LabelMap | None:
    """The classes whose order numbers the labels, where they are not the sorted labels
    found: `label_vocabulary`'s (a list, a file, a dataset or a label map), else the
    source's own (`Table.label_map`: a COCO file's categories, used or not)."""
    return options.given_label_map or table.label_map


def plan_model_ids(table: Table, options: SplitOptions,
                   vocabulary: tuple[str, ...] | None) -> tuple[int, ...] | None:
    """The ids TensorFlow's label maps give the vocabulary's classes (the tf_models
    layout stores them), where they are not 1, 2, ...: a fixed label map's, with the
    classes `new_labels="append"` added after it numbered on from its largest id."""
    fixed = fixed_label_map(table, options) if vocabulary is not None else None
    if fixed is None or fixed.ids is None:
        return None
    extra = len(vocabulary) - len(fixed.ids)
    return fixed.ids + tuple(range(max(fixed.ids) + 1, max(fixed.ids) + 1 + extra))


def ids_in(values: list, vocabulary: Sequence[str], lists: bool) -> tuple:
    """Values (or lists of values) as their indices in `vocabulary`."""
    index = {value: i for i, value in enumerate(vocabulary)}
    if lists:
        return tuple([index[v] for v in value] for value in values)
    return tuple(index[v] for v in values)


def row_identities(table: Table) -> np.ndarray:
    """Each row's identity, a uint64 that its split and its place in the order are drawn
    from: a hash of its image URI (`Table.uri_hashes`), of its image held in memory
    (exact copies share it), or for a table without images, of its values
    (`Table.value_hashes`). It is the row's own, whatever the table around it."""
    if table.images_in_memory:
        return np.asarray(table.image_hashes, dtype=np.uint64)
    if table.has_images:
        return table.uri_hashes
    return np.asarray(table.value_hashes, dtype=np.uint64)


def split_points(table: Table, wanted: np.ndarray) -> np.ndarray:
    """Each `wanted` row's point in [0, 1), from which an UNASSIGNED row's split is drawn
    (`split_codes`): its identity (`row_identities`) as a fraction, so a row keeps its
    split from run to run, whatever its order."""
    return row_identities(table)[wanted] / 2**64


def split_by_hash(uri: str, fractions: Sequence[float]) -> Split:
    """A split for an UNASSIGNED row, stable for its URI across runs and machines."""
    return SPLITS[int(_split_codes(hashing.uri_words([uri]) / 2**64, fractions)[0])]


def _split_codes(points: np.ndarray, fractions: Sequence[float]) -> np.ndarray:
    """The index in SPLITS of each point's split: the first whose cumulative fraction
    exceeds it."""
    bounds = np.cumsum(np.asarray(fractions, dtype=np.float64))
    codes = np.zeros(len(points), dtype=np.int8)
    for bound in bounds[:len(SPLITS) - 1].tolist():  # (searchsorted's count, 4x faster)
        codes += points >= bound
    return codes


def order_keys(identities: np.ndarray, seed: int) -> np.ndarray:
    """Each row's key in the shuffled order: its identity mixed with the seed
    (`hashing.seeded`), so that another seed gives another order and a row's key is its
    own: a pipeline computes it row by row. Ties (the same image twice) keep table order
    (`shuffled_order`)."""
    return hashing.seeded(identities, seed)


def shuffled_order(table: Table, seed: int) -> np.ndarray:
    """The table's positions in the shuffled order: by `order_keys`, ties in table order
    (a stable sort). Every engine writes every split's rows in this order."""
    return np.argsort(order_keys(row_identities(table), seed), kind="stable")


def shard_boundaries(num_rows: int, num_shards: int) -> list[int]:
    """End offsets of `num_shards` contiguous shards whose sizes differ by at most one."""
    return [round(num_rows * (i + 1) / num_shards) for i in range(num_shards)]


def stored_features(table: Table, image: ImageOptions,
                    label_vocabulary: tuple[str, ...] | None,
                    vocabularies: Mapping[str, tuple[str, ...]] | None = None
                    ) -> dict[str, Feature]:
    """Every feature of the records, under the layout's keys (`load()` builds its parsing
    spec from these alone; the encoder types empty lists by them). Without the
    categorical inputs' `vocabularies` (not planned yet), their features have none."""
    if table.media != "image":
        return _clip_features(table, image)
    layout = layout_named(image.layout, label_vocabulary)
    layout.check(table.has_images, image.image_format)
    labels = record_feature_types(table.has_labels, table.multi_label)
    inputs, objects = {}, {}
    for column in table.inputs:
        feature = Feature(column.dtype, tuple(column.shape), role="input",
                          vocabulary=(tuple(vocabularies[column.name])
                                      if column.kind == "categorical" and vocabularies is not None
                                      else None))
        if table.task == "detection" and column.name in OBJECT_FEATURES:
            objects[column.name] = object_feature(column.name, column.shape,
                                                  table.keypoint_names)
        else:
            inputs[column.name] = feature
    if MASK in table.rows.columns:
        objects[MASK] = OBJECT_FEATURES[MASK]
    return layout.features(table.task, IMAGE_FEATURES if table.has_images else {},
                           labels.get(LABEL), dict(sorted(objects.items())), inputs,
                           label_vocabulary)


def _clip_features(table: Table, image: ImageOptions) -> dict[str, Feature]:
    """A video or audio table's features beyond MediaSequence's own keys (which
    `format/media_sequence` declares, and readers parse by): its input columns, stored in
    each clip's context under their names."""
    if image.layout != DEFAULT_LAYOUT:
        raise OptionError(
            f"a {table.media} table is stored as MediaPipe's MediaSequence stores clips "
            f"(tf.train.SequenceExample); layout={image.layout!r} is for images. Leave ",
            Option("layout"), " out.", option="layout")
    return {column.name: Feature(column.dtype, tuple(column.shape), role="input")
            for column in table.inputs}


def make_plan(table: Table, options: ConvertOptions, record_bytes: float = 0.0,
              labels: tuple | None = None, order: np.ndarray | None = None) -> Plan:
    """Decides labels, splits, order and shards for `table`; `record_bytes` is the
    estimated size of one record, for the splits whose shards are sized by bytes,
    `labels` what `plan_labels` decided already (a caller that checks labels first), and
    `order` the shuffled order (`shuffled_order` of the seed), for a caller that drew it
    already (10M rows take 0.3 s)."""
    fractions, seed = options.split.fractions, options.split.seed
    rows = table.rows
    vocabulary, label_ids = labels if labels is not None else plan_labels(table,
                                                                          options.split)
    codes = split_codes(table, fractions,
                        label_strata(label_ids, len(rows)) if options.split.stratify else None,
                        strict=options.reject.strict)
    vocabularies = {c.name: c.categories or _categories(rows[c.name], bool(c.shape))
                    for c in table.inputs if c.kind == "categorical"}

    if order is None:
        order = shuffled_order(table, seed)
    ordered_codes = codes[order]
    shards = []
    for code, split in enumerate(SPLITS):
        positions = order[ordered_codes == code]
        count = options.shards.count(split, len(positions), record_bytes)
        start = 0
        for index, end in enumerate(shard_boundaries(len(positions), count)):
            shards.append(Shard(split, index, count, positions[start:end],
                                options.shards.compression))
            start = end
    splits = RowColumn(codes.astype(np.int8), SPLITS)
    features = stored_features(table, options.image, vocabulary, vocabularies)
    model_ids = plan_model_ids(table, options.split, vocabulary)
    encoder = RecordOptions.of(options.image, vocabulary, features, model_ids)
    encoder = replace(encoder, record_layout=record_layout(encoder))  # built once, here
    if table.media != "image":
        encoder = replace(encoder, media=table.media, media_options=options.media,
                          task=table.task)
    return Plan(seed, encoder,
                options.shards.compression, vocabulary, label_ids,
                splits, tuple(shards), vocabularies, features, model_ids)


def split_codes(table: Table, fractions: Sequence[float],
                strata: np.ndarray | None = None, warn: bool = True,
                strict: bool = False) -> np.ndarray:
    """Each row's split, as its index in SPLITS: the table's, or for an UNASSIGNED row,
    drawn from its hash (`split_points`); with `strata` (`stratify=True`), cut exactly
    at the fractions within each stratum (`stratified_codes`). `warn`: of a split left
    empty (`warn_of_empty_splits`), which a part of the table cannot tell; `strict`:
    refuses it instead."""
    given = table.rows["split"].astype("category").cat
    by_category = np.array([-1 if c == UNASSIGNED else SPLITS.index(Split(c))
                            for c in given.categories.tolist()], dtype=np.int8)
    codes = by_category[given.codes.to_numpy()]
    unassigned = codes < 0
    if unassigned.any():
        points = split_points(table, unassigned)
        codes[unassigned] = _split_codes(points, fractions) if strata is None else \
            stratified_codes(points, strata[unassigned], fractions)
        if warn:
            warn_of_empty_splits(np.bincount(codes, minlength=len(SPLITS)),
                                 int(unassigned.sum()), fractions, strata is not None,
                                 strict)
    return codes


def warn_of_empty_splits(counts: Sequence[int], num_unassigned: int,
                         fractions: Sequence[float], stratified: bool,
                         strict: bool = False) -> None:
    """Warns of a split that was meant to get rows without a split and got none: a hash
    split of a small table can leave test empty, and evaluating on nothing goes unseen
    until training. `counts`: the rows of each split. `strict`: refuses it instead."""
    empty = [str(split) for split, n, fraction in zip(SPLITS, counts, fractions)
             if fraction > 0 and not n]
    if not empty:
        return
    shares = "/".join(f"{f:.0%}".rstrip("%") for f in fractions)
    what = f"{' and '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty"
    if stratified:
        message = (f"{what}: {count(num_unassigned, 'row')} without a split are too few to "
                   f"cut {shares}. Give the rows a `split` column, or change "
                   "unassigned_split.")
    else:
        message = (f"{what}: none of the {count(num_unassigned, 'row')} without a split fell "
                   f"in {'it' if len(empty) == 1 else 'them'} (they are split by a hash of "
                   f"their URI, {shares}, which is uneven for a small table). Pass "
                   "stratify=True (--stratify) to cut them at exactly those fractions, or "
                   "give the rows a `split` column.")
    if strict:
        raise SchemaError(message[:-1], ", or pass ", Option("strict", False),
                          " to write the dataset so.", column="split", option="strict")
    logger.warning("%s", message)


def label_strata(label_ids: RowColumn | tuple | None, num_rows: int) -> np.ndarray:
    """Each row's stratum for `stratify`, numbered in the order of the labels (not of the
    rows): its label id (-1 unlabelled), a multi-label row's set of ids, or one stratum
    for a table without labels."""
    if label_ids is None:
        return np.zeros(num_rows, dtype=np.int64)
    if isinstance(label_ids, RowColumn):
        return label_ids.values
    sets = [tuple(sorted(ids)) for ids in label_ids]
    index = {ids: i for i, ids in enumerate(sorted(set(sets)))}
    return np.array([index[ids] for ids in sets], dtype=np.int64)


def exact_counts(num_rows: int, fractions: Sequence[float]) -> np.ndarray:
    """Rows per split: the fractions of `num_rows`, rounded so that they sum to it (the
    largest remainders round up; on a tie, the earlier split)."""
    shares = num_rows * np.asarray(fractions, dtype=np.float64)
    counts = np.floor(shares + 1e-9).astype(np.int64)
    short = num_rows - int(counts.sum())
    counts[np.argsort(-(shares - counts), kind="stable")[:short]] += 1
    return counts


def stratified_codes(points: np.ndarray, strata: np.ndarray,
                     fractions: Sequence[float]) -> np.ndarray:
    """The splits of rows cut exactly at `fractions` (`exact_counts`), and within two
    rows of them in each stratum (most often one): the rows are ranked by stratum, then
    by their hash point, and each split takes evenly spaced places in that ranking (split
    k's j-th at (j + 1/2) / count_k of the way), so every run of ranks, a stratum's,
    holds about each split's share of it. The same rows and labels give the same splits
    in any order."""
    counts = exact_counts(len(points), fractions)
    places = np.concatenate([(np.arange(n) + 0.5) / n for n in counts if n])
    pattern = np.repeat(np.arange(len(counts), dtype=np.int8), counts)[
        np.argsort(places, kind="stable")]
    ranked = np.lexsort((points, strata))
    codes = np.empty(len(points), dtype=np.int8)
    codes[ranked] = pattern
    return codes


def _categories(column: pd.Series, lists: bool) -> tuple[str, ...]:
    """A categorical input's values, sorted: its vocabulary when the table gave none."""
    if not lists:
        return tuple(sorted(pd.unique(column.to_numpy(dtype=object)).tolist()))
    return tuple(sorted({v for value in column.tolist() for v in value}))


def sample_rows(table: Table, order: np.ndarray) -> Iterator[Row]:
    """A fixed sample of the table's rows (the first of the shuffled order, `order`), to
    estimate the size of a record before planning (`prefetch.mean_record_bytes`)."""
    sample = order[:SIZE_SAMPLE]
    inputs = [c.name for c in table.inputs]
    for position, row in zip(sample, rows_at(table.rows, sample).to_dict("records")):
        yield Row(int(position), row.get("uri"), row.get("image_uri"),
                  _id_sized(row.get("label")),
                  Split.TRAIN, {name: _plain(row[name]) for name in inputs},
                  row.get("image"), row.get("image_name"), row.get(MASK), row.get("mask_file"),
                  None if row.get(ANNOTATED_SIZE) is None else tuple(row[ANNOTATED_SIZE]),
                  *_clip_span(row))


def _clip_span(row: Mapping) -> tuple:
    """A video or audio row's clip span and timed annotations, as `Row` holds them."""
    start, end = (row.get(name) for name in (CLIP_START, CLIP_END))
    timed = row.get(SEGMENTS, row.get(REGIONS))
    return (None if start is None or pd.isna(start) else int(start),
            None if end is None or pd.isna(end) else int(end),
            None if timed is None else tuple(map(tuple, timed)))


def _id_sized(label):
    """A label as the encoder takes it before ids are known: class names as id 0 (the
    record's size is about the same), ids and lists of them as they are."""
    if isinstance(label, str):
        return 0
    if isinstance(label, (list, np.ndarray)):
        return [v if isinstance(v, (int, np.integer)) else 0 for v in label]
    return label


def _plain(value):
    """A cell as the record encoder takes it: NumPy arrays and scalars as Python's."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value

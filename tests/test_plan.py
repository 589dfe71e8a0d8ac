from collections import Counter

import numpy as np
import pandas as pd
import pytest

from tfrecorder.errors import Option, OptionError, SchemaError
from tfrecorder.format.splits import Split
from tfrecorder.options import ConvertOptions, shards_for_size
from tfrecorder.sources import load_table
from tfrecorder.write.plan import (
    make_plan,
    order_keys,
    plan_labels,
    shard_boundaries,
    shuffled_order,
    split_by_hash,
)
from tfrecorder.write.planned_table import planned_rows


def plan_for(n=100, splits=None, labels=None, **options):
    df = pd.DataFrame({"image_uri": [f"/img/{i}.jpg" for i in range(n)]})
    if splits is not None:
        df["split"] = splits
    if labels is not None:
        df["label"] = labels
    table = load_table(df)
    record_bytes = options.pop("record_bytes", 0.0)
    return table, make_plan(table, ConvertOptions.from_keywords(**options), record_bytes)


def test_text_labels_get_ids_from_a_sorted_vocabulary():
    _, plan = plan_for(4, labels=["dog", "cat", "emu", "cat"])
    assert plan.label_vocabulary == ("cat", "dog", "emu")
    assert plan.label_ids == (1, 0, 2, 0)


def test_integer_labels_are_kept_as_ids():
    _, plan = plan_for(3, labels=[7, 3, 7])
    assert plan.label_vocabulary is None and plan.label_ids == (7, 3, 7)


def test_a_given_vocabulary_numbers_labels_in_its_order():
    _, plan = plan_for(4, labels=["dog", "cat", "emu", "cat"],
                       label_vocabulary=["emu", "dog", "cat", "owl"])
    assert plan.label_vocabulary == ("emu", "dog", "cat", "owl")  # owl: no rows, kept
    assert plan.label_ids == (1, 2, 0, 2)
    _, plan = plan_for(3, labels=[["dog", "cat"], [], ["emu"]], label_vocabulary=["emu"],
                       new_labels="append")
    assert plan.label_vocabulary == ("emu", "cat", "dog")
    assert plan.label_ids == ([2, 1], [], [0])


def test_labels_the_vocabulary_lacks_name_each_row_once():
    with pytest.raises(SchemaError) as caught:
        plan_for(4, labels=[["cow", "dog"], ["cat"], ["cow", "emu"], ["dog"]],
                 label_vocabulary=["dog", "cat"])
    assert "'cow' at rows 0, 2; 'emu' at row 2" in str(caught.value)
    assert caught.value.rows == [0, 2] and caught.value.column == "label"
    assert caught.value.fix == (Option("label_vocabulary"), Option("new_labels", "append"))


def test_label_vocabulary_needs_text_labels():
    with pytest.raises(OptionError, match="the table has no label column"):
        plan_for(3, label_vocabulary=["cat"])
    with pytest.raises(OptionError, match="for text labels"):
        plan_for(3, labels=[0, 1, 1], label_vocabulary=["cat", "dog"])


def test_labels_planned_first_give_the_same_plan():
    """`plan_labels` needs no image, so a caller can check labels before reading any."""
    table, plan = plan_for(6, labels=["b", "a", "c"] * 2, label_vocabulary=["c", "b", "a"])
    options = ConvertOptions.from_keywords(label_vocabulary=["c", "b", "a"])
    labels = plan_labels(table, options.split)
    assert labels == (("c", "b", "a"), (1, 2, 0, 1, 2, 0))
    assert make_plan(table, options, labels=labels) == plan


def test_given_splits_are_kept_and_unassigned_rows_hashed_80_10_10():
    _, plan = plan_for(3, splits=["TEST", "TEST", "VALIDATION"])
    assert plan.splits == ("test", "test", "validation")
    _, plan = plan_for(20000)
    counts = Counter(plan.splits)
    assert abs(counts["train"] / 20000 - 0.8) < 0.02
    assert abs(counts["validation"] / 20000 - 0.1) < 0.02


def test_hashed_split_depends_only_on_the_uri():
    assert split_by_hash("gs://b/x.jpg", (0.8, 0.1, 0.1)) == \
        split_by_hash("gs://b/x.jpg", (0.8, 0.1, 0.1))
    assert {split_by_hash(f"/{i}", (0, 0, 1)) for i in range(50)} == {"test"}
    _, a = plan_for(500, seed=1)
    _, b = plan_for(500, seed=2)
    assert a.splits == b.splits  # the seed shuffles, it never moves images between splits


def test_shuffle_is_deterministic_seeded_and_each_rows_own():
    table = load_table(pd.DataFrame({"image_uri": [f"/img/{i}.jpg" for i in range(10)]}))
    order = shuffled_order(table, 0)
    assert list(order) == list(shuffled_order(table, 0))
    assert list(order) != list(shuffled_order(table, 1))
    assert sorted(order) == list(range(10))
    # The rule is frozen (format version 2): these exact keys and this order never change.
    assert order_keys(np.array([0, 1, 2**64 - 1], dtype=np.uint64), 42).tolist() == [
        6332618229526065668, 17532488217563185893, 14714397866638982195] == [
        _splitmix64(word ^ _splitmix64(42)) for word in (0, 1, 2**64 - 1)]
    assert list(order) == [9, 8, 0, 5, 1, 2, 6, 4, 7, 3]
    # A row's place comes from its own URI: the rows in another order keep their order.
    backwards = load_table(pd.DataFrame({"image_uri": [f"/img/{i}.jpg" for i in range(9, -1, -1)]}))
    assert [9 - p for p in shuffled_order(backwards, 0)] == list(order)


def _splitmix64(word: int) -> int:
    """SplitMix64's finalizer in Python's integers: the reference `order_keys` follows."""
    mask = 2**64 - 1
    word = (word + 0x9E3779B97F4A7C15) & mask
    word = ((word ^ (word >> 30)) * 0xBF58476D1CE4E5B9) & mask
    word = ((word ^ (word >> 27)) * 0x94D049BB133111EB) & mask
    return word ^ (word >> 31)


def test_copies_of_one_image_keep_their_table_order():
    table = load_table(pd.DataFrame({"image_uri": ["/a.jpg", "/b.jpg", "/a.jpg", "/a.jpg"],
                                     "label": [0, 1, 2, 3]}))
    order = list(shuffled_order(table, 7))
    assert [p for p in order if p != 1] == [0, 2, 3]


def test_shards_cover_every_row_once_in_balanced_contiguous_pieces():
    _, plan = plan_for(103, num_shards=4)
    for split in ("train", "validation", "test"):
        sizes = [len(s.positions) for s in plan.shards_of(split)]
        assert max(sizes) - min(sizes) <= 1
        assert all(plan.splits[p] == split for s in plan.shards_of(split) for p in s.positions)
    positions = [p for s in plan.shards for p in s.positions]
    assert sorted(positions) == list(range(103))
    assert positions != sorted(positions)  # shuffled, so classes mix within shards
    assert plan.shards[0].filename == "train-00000-of-00004.tfrecord"


def test_shard_boundaries_and_sizes():
    assert shard_boundaries(10, 3) == [3, 7, 10]
    assert shards_for_size(1000, 1000, 100_000) == 10
    assert shards_for_size(5, 10**9, 100) == 5  # never more shards than rows
    assert shards_for_size(0, 1000, 10) == 0


def test_num_shards_per_split_and_size_for_the_rest():
    _, plan = plan_for(200, splits=["TRAIN", "TEST"] * 100, num_shards={"train": 3},
                       record_bytes=1000, shard_size_mb=0.025)
    assert [s.num_shards for s in plan.shards_of("train")] == [3, 3, 3]
    assert len(plan.shards_of("test")) == 4  # 100 rows x 1000 B / 25 kB
    assert plan.shards_of("validation") == ()


def test_gzip_shards_are_named_so():
    _, plan = plan_for(5, compression="gzip")
    assert plan.shards[0].filename.endswith(".tfrecord.gz")


def test_planned_rows_follow_shard_order_and_carry_label_ids():
    table, plan = plan_for(20, labels=["b", "a"] * 10, num_shards=2)
    rows = list(planned_rows(plan, table))
    assert [r.position for r in rows] == [p for s in plan.shards for p in s.positions]
    assert all(r.label == plan.label_ids[r.position] for r in rows)
    assert all(r.split == plan.splits[r.position] for r in rows)


def test_same_input_same_plan():
    assert plan_for(50, num_shards=2)[1] == plan_for(50, num_shards=2)[1]


@pytest.mark.parametrize("options,message", [
    ({"unassigned_split": (0.5, 0.5, 0.5)}, "sum to 1"),
    ({"unassigned_split": (1.0, 0.0)}, "three fractions"),
    ({"num_shards": 0}, "positive int"),
    ({"num_shards": {"prod": 2}}, "unknown split 'prod'"),
    ({"compression": "zstd"}, "compression"),
])
def test_bad_plan_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        plan_for(5, **options)


def test_unlabelled_rows_get_no_id_and_no_label_in_their_rows():
    """A blank label is no class: id -1 in the plan (never stored), None in the rows the
    workers encode, whichever way ids are given."""
    table, plan = plan_for(4, labels=["dog", None, "cat", ""])
    assert plan.label_vocabulary == ("cat", "dog") and plan.label_ids == (1, -1, 0, -1)
    labels = {row.position: row.label for row in planned_rows(plan, table)}
    assert labels == {0: 1, 1: None, 2: 0, 3: None}
    _, plan = plan_for(3, labels=[2, None, 0], class_names=["a", "b", "c"])
    assert plan.label_ids == (2, -1, 0)
    _, plan = plan_for(3, labels=["dog", None, "emu"], label_vocabulary=["emu", "dog"])
    assert plan.label_ids == (1, -1, 0)


def test_unlabeled_error_refuses_blank_labels_naming_the_rows():
    frame = pd.DataFrame({"image_uri": ["/a.jpg", "/b.jpg", "/c.jpg"],
                          "label": ["a", None, "b"]}, index=[100, 200, 300])
    options = ConvertOptions.from_keywords(unlabeled="error").split
    with pytest.raises(SchemaError) as caught:
        plan_labels(load_table(frame), options)
    assert str(caught.value) == (
        "column 'label' is blank at row 200 (1 of 3 rows). Give those rows a label, or "
        "pass unlabeled='keep' to write them without one (supervised pairs leave them out).")
    assert (caught.value.column, caught.value.rows, caught.value.option) == (
        "label", [200], "unlabeled")
    assert caught.value.fix == (Option("unlabeled", "keep"),)


def split_counts(plan, rows=None) -> dict:
    """Rows per split (of `rows`, positions; default all)."""
    splits = list(plan.splits)
    found = Counter(splits[i] for i in (range(len(splits)) if rows is None else rows))
    return {split: found[split] for split in ("train", "validation", "test")}


def test_stratify_cuts_unassigned_rows_exactly_within_each_label():
    """90 images of 3 labels: 72/9/9 to the row, and 24/3/3 in each label, where the hash
    alone gives whatever chance gives."""
    labels = [["cat", "dog", "emu"][i % 3] for i in range(90)]
    _, plan = plan_for(90, labels=labels, stratify=True)
    assert split_counts(plan) == {"train": 72, "validation": 9, "test": 9}
    for label in ("cat", "dog", "emu"):
        rows = [i for i, value in enumerate(labels) if value == label]
        assert split_counts(plan, rows) == {"train": 24, "validation": 3, "test": 3}
    # Uneven labels: exact overall, each label within two rows (here one) of its share.
    labels = ["cat"] * 47 + ["dog"] * 28 + ["emu"] * 15
    _, plan = plan_for(90, labels=labels, stratify=True, unassigned_split=(0.7, 0.2, 0.1))
    assert split_counts(plan) == {"train": 63, "validation": 18, "test": 9}
    for label, n in (("cat", 47), ("dog", 28), ("emu", 15)):
        found = split_counts(plan, [i for i, value in enumerate(labels) if value == label])
        for split, fraction in zip(found, (0.7, 0.2, 0.1)):
            assert abs(found[split] - n * fraction) < 1, (label, found)


def test_stratified_splits_are_stable_per_image_whatever_the_rows_order():
    labels = [["cat", "dog"][i % 2] for i in range(40)] + [None] * 10
    table, plan = plan_for(50, labels=labels, splits=["UNASSIGNED"] * 45 + ["TEST"] * 5,
                           stratify=True)
    by_uri = dict(zip(table.rows["image_uri"], plan.splits))
    assert [by_uri[f"/img/{i}.jpg"] for i in range(45, 50)] == ["test"] * 5  # given
    assert split_counts(plan, range(45)) == {"train": 36, "validation": 5, "test": 4}
    frame = table.source.iloc[::-1]
    again = make_plan(load_table(frame), ConvertOptions.from_keywords(stratify=True))
    assert dict(zip(frame["image_uri"], again.splits)) == by_uri
    _, hashed = plan_for(50, labels=labels, splits=["UNASSIGNED"] * 45 + ["TEST"] * 5)
    assert list(hashed.splits) != list(plan.splits)  # the default is unchanged: the hash


def test_unlabeled_error_names_the_label_column_as_the_source_spells_it():
    frame = pd.DataFrame({"image_uri": ["/a.jpg", "/b.jpg"], "Labels": ["a", ""]})
    options = ConvertOptions.from_keywords(unlabeled="error").split
    with pytest.raises(SchemaError, match=r"^column 'Labels' is blank at row 1 ") as caught:
        plan_labels(load_table(frame), options)
    assert caught.value.column == "Labels"


def _photo_folder_without_test(root, per_class=8):
    """A folder of cat/ and dog/ photos whose names a hash split puts in train and
    validation only (one in validation a class), as a small folder's often are. The
    hash is of the whole path, so the names are chosen under `root`, wherever it is."""
    from PIL import Image

    for label in ("cat", "dog"):
        (root / label).mkdir(parents=True)
        names = [root / label / f"{i}.png" for i in range(1000)]
        split = {p: split_by_hash(str(p), (0.8, 0.1, 0.1)) for p in names}
        kept = ([p for p in names if split[p] == Split.VALIDATION][:1]
                + [p for p in names if split[p] == Split.TRAIN][:per_class - 1])
        for i, path in enumerate(kept):
            Image.new("RGB", (8, 8), (i * 20, 100, 0)).save(path)
    return str(root)


def test_a_split_the_hash_leaves_empty_is_warned_of_with_stratify_as_the_fix(tmp_path,
                                                                             caplog):
    import tfrecorder

    folder = _photo_folder_without_test(tmp_path / "photos")
    result = tfrecorder.convert(folder, str(tmp_path / "out"), progress=False)
    assert result.counts.get("test", 0) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert ("test is empty: none of the 16 rows without a split fell in it (they are split "
            "by a hash of their URI, 80/10/10, which is uneven for a small table). Pass "
            "stratify=True (--stratify) to cut them at exactly those fractions, or give the "
            "rows a `split` column.") in warned

    caplog.clear()
    result = tfrecorder.convert(folder, str(tmp_path / "stratified"), stratify=True,
                                progress=False)
    assert result.counts == {"train": 13, "validation": 2, "test": 1}
    assert not [r for r in caplog.records if "is empty:" in r.getMessage()]


def test_splits_the_table_names_are_not_warned_of_when_empty(caplog):
    plan_for(10, splits=["TRAIN"] * 10)
    assert not [r for r in caplog.records if "is empty:" in r.getMessage()]

"""One split vocabulary (`tfrecorder.format.splits`): every entry point takes every spelling of a
split, in any case, and reads it as the same split."""

import warnings

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder.format.splits import SPELLINGS, UNASSIGNED, Split, split_named
from tfrecorder.options import ShardOptions, TableOptions
from tfrecorder.sources import load_table

# Every spelling, in the cases a user writes it, with the split it names.
CASES = [(case(spelling), split) for spelling, split in SPELLINGS.items()
         for case in (str.lower, str.upper, str.title)]
DATASET_SPLITS = [(spelling, split) for spelling, split in CASES if split != UNASSIGNED]


def test_the_vocabulary_names_every_split_and_unassigned():
    assert set(SPELLINGS.values()) == {*Split, UNASSIGNED}
    assert {"train", "training", "validation", "valid", "val", "dev", "test", "testing",
            "unassigned"} == set(SPELLINGS)
    assert split_named("  Val ") == Split.VALIDATION and split_named("prod") is None


@pytest.mark.parametrize(("spelling", "split"), CASES)
def test_a_table_cell_names_its_split(spelling, split):
    table = load_table(pd.DataFrame({"split": [spelling], "x": [1]}))
    assert table.rows["split"].tolist() == [split]


@pytest.mark.parametrize(("spelling", "split"), CASES)
def test_a_csv_cell_names_its_split(tmp_path, spelling, split):
    (tmp_path / "a.jpg").write_bytes(b"")
    csv = tmp_path / "t.csv"
    csv.write_text(f"{spelling},a.jpg,cat\n")
    assert load_table(str(csv)).rows["split"].tolist() == [split]


@pytest.mark.parametrize(("spelling", "split"), CASES)
def test_the_split_option_names_a_split(spelling, split):
    TableOptions(split=spelling)  # checked as an option, then applied by the table
    table = load_table(pd.DataFrame({"x": [1, 2]}), split=spelling)
    assert table.rows["split"].tolist() == [split, split]


@pytest.mark.parametrize(("spelling", "split"), CASES)
def test_a_dict_of_splits_is_keyed_by_any_spelling(spelling, split):
    images = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    table = load_table({spelling: (images, np.array([0, 1]))})
    assert table.rows["split"].tolist() == [split, split]


@pytest.mark.parametrize(("spelling", "split"), CASES)
def test_an_image_folder_names_its_splits(tmp_path, spelling, split):
    for folder in (spelling, "train" if split != Split.TRAIN else "test"):
        (tmp_path / folder / "cat").mkdir(parents=True)
        (tmp_path / folder / "cat" / "1.jpg").write_bytes(b"")
    table = load_table(str(tmp_path))
    assert split in table.rows["split"].tolist()
    assert set(table.rows["label"]) == {"cat"}  # the split folder is never a class


@pytest.mark.parametrize(("spelling", "split"), DATASET_SPLITS)
def test_num_shards_is_keyed_by_any_spelling(spelling, split):
    assert ShardOptions(num_shards={spelling: 3}).num_shards == {split.value: 3}


def test_num_shards_refuses_unassigned_and_unknown_names():
    for name in ("unassigned", "prod"):
        with pytest.raises(ValueError, match=f"unknown split '{name}'"):
            ShardOptions(num_shards={name: 3})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("splits") / "out"
    frame = pd.DataFrame({"split": ["TRAIN", "VALIDATION", "TEST"], "x": [1, 2, 3]})
    tfrecorder.convert(frame, str(out))
    return str(out)


@pytest.mark.parametrize(("spelling", "split"), DATASET_SPLITS)
def test_load_reads_a_split_by_any_spelling(dataset, spelling, split):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "TRAIN" is 2.0's spelling
        records = list(tfrecorder.load(dataset, spelling).as_numpy_iterator())
    assert [r["split"] for r in records] == [split.stored.encode()]


def test_a_split_prints_as_the_name_a_user_types(dataset):
    """In messages, argparse's choices and load()'s dict keys: 'train', never the enum's
    `<Split.TRAIN: 'train'>`."""
    assert repr(Split.TRAIN) == "'train'"
    assert f"{list(Split)}" == "['train', 'validation', 'test']"
    loaded = tfrecorder.load(dataset)
    assert list(loaded) == ["train", "validation", "test"]
    assert repr(list(loaded)) == "['train', 'validation', 'test']"

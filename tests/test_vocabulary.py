"""label_vocabulary=: the ids of text labels, from a list, a file, TFRecorder 2.0's output or
a tfrecorder dataset, checked against the table before anything is written (issue 14)."""

import logging
import os

import pandas as pd
import pytest
from helpers import children, read_manifest, read_split, start_slow_run, wait_gone, write_image

import tfrecorder
from tfrecorder.errors import Option, OptionError, ResumeError, SchemaError
from tfrecorder.format import vocabulary

# Frequencies differ, so sorted order (cat, dog, goat) and TFRecorder 2.0's frequency
# order (goat, dog, cat) disagree.
LABELS = ["goat", "cat", "goat", "dog", "goat", "dog"]
V2_ASSET = "transform_fn/assets/vocab_compute_and_apply_vocabulary_vocabulary"


def table(tmp_path, labels=LABELS, name="images") -> pd.DataFrame:
    uris = [write_image(tmp_path / name / f"{i}.jpg", seed=i) for i in range(len(labels))]
    return pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": labels})


def convert(source, out, **options):
    return tfrecorder.convert(source, out, num_workers=1, num_shards=1, progress=False,
                              **options)


def ids_by_label(out, df) -> dict[str, int]:
    """Each label of `df` with the id its records hold (read back with TensorFlow)."""
    label_of = dict(zip(df["image_uri"], df["label"]))
    found = {}
    for record in read_split(out, "train"):
        found.setdefault(label_of[record["image_uri"].decode()], set()).add(int(record["label"]))
    assert all(len(ids) == 1 for ids in found.values()), found
    return {label: ids.pop() for label, ids in found.items()}


def assert_numbered(out, df, names):
    assert read_manifest(out)["labels"]["vocabulary"] == list(names)
    assert ids_by_label(out, df) == {name: names.index(name) for name in set(df["label"])}


def test_by_default_ids_follow_the_sorted_names(tmp_path):
    df = table(tmp_path)
    convert(df, tmp_path / "out")
    assert_numbered(tmp_path / "out", df, ["cat", "dog", "goat"])


@pytest.mark.parametrize("given", [["goat", "dog", "cat"], ("goat", " dog", "cat")])
def test_a_list_of_names_sets_the_ids(tmp_path, given):
    df = table(tmp_path)
    convert(df, tmp_path / "out", label_vocabulary=given)
    assert_numbered(tmp_path / "out", df, ["goat", "dog", "cat"])


@pytest.mark.parametrize("text", ["goat\ndog\ncat\n", "\ufeffgoat\r\ndog\r\ncat"])
def test_a_file_of_names_sets_the_ids(tmp_path, text):
    df = table(tmp_path)
    (tmp_path / "classes.txt").write_bytes(text.encode())
    convert(df, tmp_path / "out", label_vocabulary=tmp_path / "classes.txt")
    assert_numbered(tmp_path / "out", df, ["goat", "dog", "cat"])


@pytest.mark.parametrize("given", ["", "transform_fn", "transform_fn/assets", V2_ASSET])
def test_tfrecorder_2_output_keeps_its_frequency_ids(tmp_path, given):
    """2.0 wrote TensorFlow Transform's vocabulary, most frequent first, in its job folder;
    the folder, its transform_fn, the assets folder or the file itself find it."""
    old = tmp_path / "old" / "tfrecorder-20210702-235702-convert"
    (old / V2_ASSET).parent.mkdir(parents=True)
    (old / V2_ASSET).write_text("goat\ndog\ncat\n")
    (old / "transform_fn" / "saved_model.pb").write_bytes(b"\x08\x01")
    df = table(tmp_path)
    convert(df, tmp_path / "out", label_vocabulary=str(old / given))
    assert_numbered(tmp_path / "out", df, ["goat", "dog", "cat"])


def test_a_dataset_passes_its_ids_on_to_new_data(tmp_path):
    first = table(tmp_path)
    convert(first, tmp_path / "first", label_vocabulary=["goat", "dog", "cat"])
    new = table(tmp_path, ["cat", "goat", "cat"], name="new")  # no dog
    convert(new, tmp_path / "second", label_vocabulary=tmp_path / "first")
    assert_numbered(tmp_path / "second", new, ["goat", "dog", "cat"])
    # A dataset with its vocabulary sorted is reused as it is too.
    convert(first, tmp_path / "sorted")
    convert(new, tmp_path / "third", label_vocabulary=str(tmp_path / "sorted"))
    assert_numbered(tmp_path / "third", new, ["cat", "dog", "goat"])


def test_labels_the_vocabulary_lacks_are_refused_with_their_rows(tmp_path):
    df = table(tmp_path, ["goat", "cow", "dog", "emu", "cow"])
    out = tmp_path / "out"
    with pytest.raises(SchemaError) as caught:
        convert(df, out, label_vocabulary=["goat", "dog"])
    error = caught.value
    assert "'cow' at rows 1, 4; 'emu' at row 3" in str(error)
    assert (error.column, error.rows, error.option) == ("label", [1, 3, 4],
                                                         "label_vocabulary")
    assert Option("new_labels", "append") in error.fix
    assert not os.path.exists(out / "dataset.json")
    assert not out.exists() or not [name for name in os.listdir(out) if "tfrecord" in name]


def test_new_labels_append_gives_them_the_next_ids_in_sorted_order(tmp_path, caplog):
    df = table(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tfrecorder.write.plan"):
        convert(df, tmp_path / "out", label_vocabulary=["goat"], new_labels="append")
    assert_numbered(tmp_path / "out", df, ["goat", "cat", "dog"])
    assert "appended as ids 1 and on: 'cat', 'dog'" in caplog.text


def test_integer_labels_take_no_vocabulary(tmp_path):
    df = table(tmp_path, [2, 0, 1])
    with pytest.raises(OptionError, match="for text labels") as caught:
        convert(df, tmp_path / "out", label_vocabulary=["a", "b", "c"])
    assert caught.value.option == "label_vocabulary"


@pytest.mark.parametrize("options,name,words", [
    ({"label_vocabulary": 3}, "label_vocabulary", "a list of class names"),
    ({"label_vocabulary": {"cat", "dog"}}, "label_vocabulary", "a list of class names"),
    ({"label_vocabulary": ["cat", 1]}, "label_vocabulary", "1 at position 1"),
    ({"label_vocabulary": []}, "label_vocabulary", "is empty"),
    ({"label_vocabulary": ["cat", " "]}, "label_vocabulary", "blank class name"),
    ({"new_labels": "add"}, "new_labels", "'error', 'append'"),
])
def test_bad_option_values_are_refused_naming_the_option(tmp_path, options, name, words):
    with pytest.raises(OptionError, match=words) as caught:
        tfrecorder.convert(pd.DataFrame({"image_uri": ["a.jpg"]}), tmp_path / "out",
                           **options)
    assert caught.value.option == name and str(caught.value).startswith(name)


def test_a_name_given_twice_is_refused(tmp_path):
    with pytest.raises(OptionError, match=r"names 'cat' twice \(positions 0 and 2\)"):
        convert(table(tmp_path), tmp_path / "out", label_vocabulary=["cat", "dog", "cat "])
    (tmp_path / "classes.txt").write_text("cat\ndog\ncat\n")
    with pytest.raises(OptionError, match=r"'cat' twice \(lines 1 and 3 of .*classes.txt"):
        vocabulary.load(tmp_path / "classes.txt")


def test_paths_that_hold_no_vocabulary_are_refused(tmp_path):
    with pytest.raises(OptionError, match="neither a file nor a folder"):
        vocabulary.load(tmp_path / "missing.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(OptionError, match="neither a tfrecorder dataset"):
        vocabulary.load(tmp_path / "empty")
    assets = tmp_path / "v2" / "transform_fn" / "assets"
    assets.mkdir(parents=True)
    (assets / "vocab_a").write_text("x\n")
    (assets / "vocab_b").write_text("y\n")
    with pytest.raises(OptionError, match="several vocabularies"):
        vocabulary.load(tmp_path / "v2")
    (tmp_path / "blank.txt").write_text("cat\n\ndog\n")
    with pytest.raises(OptionError, match="blank class name at line 2 of"):
        vocabulary.load(tmp_path / "blank.txt")
    convert(table(tmp_path, [0, 1]), tmp_path / "ids")
    with pytest.raises(OptionError, match="integer labels"):
        vocabulary.load(tmp_path / "ids")


def test_a_resumed_run_with_another_vocabulary_is_refused(tmp_path):
    """The vocabulary is in the manifest header, which the run journal compares."""
    out = tmp_path / "out"
    process = start_slow_run(tmp_path, out, rows=400, resume=True,
                             label_vocabulary=["b", "a"])
    workers = children(process.pid)
    process.kill()
    process.wait()
    # Its workers hold the folder's lock until they die with it (they might still write).
    assert all(wait_gone(pid) for pid in workers)
    assert (out / "resume.json").exists()
    df = pd.DataFrame({"image_uri": [str(tmp_path / "big.png")] * 400,
                       "label": ["a", "b"] * 200})
    with pytest.raises(ResumeError, match="the labels differ"):
        tfrecorder.convert(df, out, num_workers=2, progress=False, resume=True,
                           label_vocabulary=["a", "b"])

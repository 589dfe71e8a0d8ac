"""`strict=True` (issue 51): a preset under which the first rejected row, duplicate,
skipped annotation, empty split or dataset warning fails the run, naming it, and leaves
no dataset; options that contradict it are refused before any work."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pandas as pd
import pytest
from helpers import write_image

import tfrecorder
from tfrecorder.errors import ConversionAborted, DuplicateImagesError, OptionError, SchemaError


@pytest.fixture
def clean_table(tmp_path) -> pd.DataFrame:
    """12 images, both labels in every split, nothing to warn of."""
    rows = []
    for i in range(12):
        path = tmp_path / "images" / f"img_{i:02d}.jpg"
        write_image(path, size=(30, 20), seed=i)
        rows.append((["TRAIN", "VALIDATION", "TEST"][i % 3], str(path),
                     ["cat", "dog"][(i // 3) % 2]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def csv_with(table: pd.DataFrame, path, extra: str) -> str:
    """The table as an AutoML CSV with one more line (line 13 of the whole table)."""
    path.write_text("".join(f"{s},{u},{label}\n" for s, u, label in table.itertuples(
        index=False)) + extra + "\n")
    return str(path)


# The Beam engine, in this process (starts in seconds).
BEAM = {"runner": "DirectRunner"}


@pytest.mark.parametrize("engine", [{}, BEAM], ids=["local", "beam"])
def test_a_clean_table_gives_the_same_bytes_with_and_without_strict(clean_table, tmp_path,
                                                                    engine):
    plain, strict = tmp_path / "plain", tmp_path / "strict"
    tfrecorder.convert(clean_table, str(plain), progress=False, **engine)
    result = clean_table.tensorflow.to_tfrecord(str(strict), strict=True, progress=False,
                                                **engine)
    assert (result.num_records, result.num_rejected, result.warnings) == (12, 0, ())
    files = sorted(p.relative_to(plain) for p in plain.rglob("*") if p.is_file())
    assert sorted(p.relative_to(strict) for p in strict.rglob("*") if p.is_file()) == files
    for name in files:
        if name.name != "dataset.json":
            assert (plain / name).read_bytes() == (strict / name).read_bytes(), name
    manifests = [json.loads((out / "dataset.json").read_text()) for out in (plain, strict)]
    # The manifest says the run was strict; a manifest without the key reads as before.
    assert manifests[1]["options"].pop("strict") is True
    assert manifests[1]["options"].pop("duplicates") == "error"
    assert manifests[0]["options"].pop("duplicates") == "warn"
    assert "strict" not in manifests[0]["options"]
    assert manifests[0]["options"] == manifests[1]["options"]
    assert tfrecorder.info(str(plain)).num_records == tfrecorder.info(str(strict)).num_records


@pytest.mark.parametrize("broken", ["missing", "corrupt"])
def test_one_bad_image_fails_naming_its_line_and_leaves_no_dataset(clean_table, tmp_path,
                                                                   broken):
    """A missing image is found before any image is read; a corrupt one by the engine."""
    bad = tmp_path / "bad.jpg"
    if broken == "corrupt":
        bad.write_text("hello")
    source = csv_with(clean_table, tmp_path / "t.csv", f"TRAIN,{bad},cat")
    out = tmp_path / "out"
    with pytest.raises(tfrecorder.ImageError) as raised:
        tfrecorder.convert(source, str(out), strict=True, progress=False, num_workers=1)
    message = str(raised.value)
    assert message.startswith(f"line 13 ({str(bad)!r}): "), message
    assert message.endswith("Fix or drop the row, or pass strict=False (or "
                            "on_error='reject') to list such rows in rejected.csv."), message
    assert raised.value.option == "strict"
    assert not out.exists()  # the folder is left as it was
    # Without strict, the row is one rejected row of 13 and the run passes.
    assert tfrecorder.convert(source, str(out), progress=False).num_rejected == 1


@pytest.mark.parametrize("files", [1, 2], ids=["table", "table-files"])
def test_one_bad_image_fails_the_beam_engine_as_the_local_one(clean_table, tmp_path, files,
                                                              caplog):
    """The same error, naming the row and the option, and no dataset. Two files are a
    source the pipeline plans itself: its launcher, which reads no row, raised the
    worker's bare rejection (a tuple's text, with no row and no option). Beam logs no
    traceback of it (the command line showed one, and the tuple, before its line)."""
    bad = tmp_path / "bad.jpg"
    bad.write_text("hello")
    source: str | list[str] = csv_with(clean_table, tmp_path / "t.csv", f"TRAIN,{bad},cat")
    if files == 2:
        source = [csv_with(clean_table.iloc[:6], tmp_path / "a.csv", ""),
                  csv_with(clean_table.iloc[6:], tmp_path / "b.csv", f"TRAIN,{bad},cat")]
    errors = {}
    for name, engine in [("local", {"num_workers": 1}), ("beam", BEAM)]:
        out = tmp_path / name
        with pytest.raises(tfrecorder.ImageError) as raised:
            tfrecorder.convert(source, str(out), strict=True, progress=False, **engine)
        assert not out.exists(), sorted(os.listdir(out))  # no dataset.json, no shard
        errors[name] = raised.value
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    local, beam = errors["local"], errors["beam"]
    assert type(beam) is type(local) is tfrecorder.ImageError
    assert str(beam) == str(local)
    assert (beam.option, beam.rows, beam.column) == (local.option, local.rows, local.column)
    row = 13 if files == 1 else "b.csv[7]"
    assert str(beam).startswith(f"line {row} ({str(bad)!r}): not an image"), str(beam)
    assert beam.option == "strict" and beam.rows == [row]
    assert "pass strict=False (or on_error='reject')" in str(beam)


def test_a_skipped_annotation_fails_naming_its_file_and_line(tmp_path):
    root = tmp_path / "yolo"
    for k, stem in enumerate("ab"):
        write_image(root / "images" / "train" / f"{stem}.jpg", size=(64, 48), seed=k)
    labels = root / "labels" / "train"
    labels.mkdir(parents=True)
    (labels / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 1.5 0.4\n")  # far past
    (labels / "b.txt").write_text("1 0.5 0.5 0.2 0.2\n")
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nnames:\n  0: dog\n"
                                    "  1: cat\n")
    out = tmp_path / "out"
    with pytest.raises(SchemaError, match=r"^labels/train/a.txt, line 2 \(image "
                       r"'images/train/a.jpg'\): .*pass strict=False \(or "
                       r"invalid_annotations='skip'\) to write the image without it"):
        tfrecorder.convert(str(root), str(out), strict=True, progress=False)
    assert not out.exists()


def test_a_duplicate_a_dataset_warning_and_an_empty_split_each_fail(clean_table, tmp_path):
    twice = pd.concat([clean_table, clean_table.iloc[:1]], ignore_index=True)
    with pytest.raises(DuplicateImagesError, match="row 0 .* and row 12 .*pass "
                       "strict=False with duplicates='drop'"):
        tfrecorder.convert(twice, str(tmp_path / "a"), strict=True, progress=False)
    one_dog = clean_table.assign(label=["dog"] + ["cat"] * 11)  # validation lacks dog
    with pytest.raises(ConversionAborted, match="the dataset would carry 2 warnings; the "
                       "first: validation has no records of 1 class that train has: 'dog'"):
        tfrecorder.convert(one_dog, str(tmp_path / "b"), strict=True, progress=False)
    few = clean_table.iloc[:1].assign(split="UNASSIGNED")  # one row: two splits empty
    with pytest.raises(SchemaError, match="empty: .* or pass strict=False to write the "
                       "dataset so"):
        tfrecorder.convert(few, str(tmp_path / "c"), strict=True, progress=False)
    assert not any((tmp_path / name).exists() for name in "abc")


@pytest.mark.parametrize("given", [{"max_rejected": 0.3}, {"on_error": "reject"},
                                   {"duplicates": "warn"}, {"duplicates": "drop"},
                                   {"invalid_annotations": "skip"}])
def test_an_option_that_contradicts_strict_is_refused_before_any_work(tmp_path, given):
    (name, value), = given.items()
    out = tmp_path / "out"
    with pytest.raises(OptionError, match=rf"^strict=True fails .*, which {name}="
                       rf"{value!r} would let pass: pass one of them") as raised:
        # (the source does not exist: the options are refused before it is looked for)
        tfrecorder.convert(str(tmp_path / "absent.csv"), str(out), strict=True, **given)
    assert raised.value.option == "strict"
    assert not out.exists()


def test_what_strict_stands_for_may_be_given_with_it(clean_table, tmp_path):
    result = tfrecorder.convert(clean_table, str(tmp_path / "out"), strict=True,
                                on_error="raise", max_rejected=0, duplicates="error",
                                invalid_annotations="error", progress=False)
    assert result.num_records == 12


def test_the_cli_strict_flag_exits_1_naming_the_row_in_flags(clean_table, tmp_path):
    source = csv_with(clean_table, tmp_path / "t.csv", f"TRAIN,{tmp_path / 'gone.jpg'},cat")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tfrecorder", "convert", source, str(out), "--no-progress"]
    process = subprocess.run([*command, "--strict"], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert process.returncode == 1, process.stderr
    assert process.stderr.strip().splitlines()[-1] == (
        f"tfrecorder: error: line 13 ({str(tmp_path / 'gone.jpg')!r}): not a file (no such "
        "file). Fix or drop the row, or pass --no-strict (or --on-error reject) to list "
        "such rows in rejected.csv.")
    assert not out.exists()
    # A flag given with --strict is refused, even at its default value.
    process = subprocess.run([*command, "--strict", "--on-error", "reject"],
                             capture_output=True, text=True)
    assert process.returncode == 1
    assert "error: --strict fails on the first rejected row" in process.stderr
    assert "--on-error reject would let pass" in process.stderr

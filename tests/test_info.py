"""Knowing a dataset: `info()` and its statistics against what the records hold, planted
duplicates and train/test leaks (warn, drop, error), class balance, loading mixed sizes,
and the forms a person sees (repr, notebook HTML, the command line)."""

import json
import shutil
import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import LABELS
from helpers import (
    partly_labelled_csv,
    read_manifest,
    read_split,
    run_cli,
    run_without_tensorflow,
    write_image,
)

import tfrecorder
from tfrecorder import DatasetWarning, DuplicateImagesError
from tfrecorder.errors import OptionError


def converted(table, out, **options):
    """convert(), with its DatasetWarnings caught and returned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tfrecorder.convert(table, str(out), progress=False, **options)
    return result, [str(w.message) for w in caught if w.category is DatasetWarning]


def test_class_counts_and_image_statistics_are_what_the_records_hold(image_table, tmp_path):
    out = tmp_path / "out"
    converted(image_table, out)
    info = tfrecorder.info(out)

    assert info.class_names == tuple(sorted(LABELS)) and info.num_classes == 3
    for split in info.splits:
        records = read_split(out, split)
        held = Counter(info.class_names[r["label"]] for r in records)
        assert info.class_counts[split] == {name: held.get(name, 0)
                                            for name in info.class_names}
        stats = info.statistics[split]
        heights = [r["image_height"] for r in records]
        widths = [r["image_width"] for r in records]
        assert (stats.image_height.min, stats.image_height.max) == (min(heights), max(heights))
        assert stats.image_width.median == np.median(widths)
        assert stats.image_bytes.max == max(len(r["image"]) for r in records)
        assert stats.image_formats == dict(Counter(r["image_format"].decode()
                                                   for r in records))
        assert stats.image_channels == dict(Counter(int(r["image_channels"])
                                                    for r in records))
    assert sum(info.class_counts["train"].values()) == info.splits["train"].num_records
    assert info.duplicates == () and info.duplicates_checked
    assert info.features["image"].role == "image" and info.features["label"].dtype == "int64"


def test_multi_label_records_count_for_each_of_their_classes(tmp_path):
    paths = [write_image(tmp_path / f"{i}.png", fmt="PNG", seed=i) for i in range(4)]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": paths,
                          "label": [["a", "b"], ["a"], ["b", "c"], ["a", "c"]]})
    converted(table, tmp_path / "out")
    assert tfrecorder.info(tmp_path / "out").class_counts == {
        "train": {"a": 3, "b": 2, "c": 2}}


def planted(tmp_path) -> pd.DataFrame:
    """Rows 0-5 distinct images; row 6 repeats row 1 in TRAIN (same label), row 7 repeats
    row 2 in TEST (a leak), row 8 repeats row 3 under another label."""
    paths = [write_image(tmp_path / "img" / f"{i}.jpg", seed=i) for i in range(6)]
    rows = [("TRAIN", paths[i], "cat" if i % 2 else "dog") for i in range(4)]
    rows += [("TEST", paths[4], "cat"), ("TEST", paths[5], "dog")]
    copies = tmp_path / "copies"
    copies.mkdir()
    for i, source in ((6, 1), (7, 2), (8, 3)):
        shutil.copy(paths[source], copies / f"{i}.jpg")
    rows += [("TRAIN", str(copies / "6.jpg"), "cat"), ("TEST", str(copies / "7.jpg"), "dog"),
             ("TRAIN", str(copies / "8.jpg"), "dog")]
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def copies_by_row(info) -> list[list]:
    return [[c.row for c in d.copies] for d in info.duplicates]


def test_duplicates_and_a_leak_are_found_with_their_rows_and_warned(tmp_path):
    table = planted(tmp_path)
    result, warned = converted(table, tmp_path / "out")

    info = tfrecorder.info(tmp_path / "out")
    assert copies_by_row(info) == [[1, 6], [2, 7], [3, 8]]  # by the first copy's row
    assert [[c.split for c in d.copies] for d in info.leaks] == [["train", "test"]]
    assert [[c.label for c in d.copies] for d in info.label_conflicts] == [["cat", "dog"]]
    assert result.num_records == 9  # "warn" writes every copy
    assert "3 images are stored more than once" in warned[0]
    assert "row 1 (train) = row 6 (train)" in warned[0]
    assert "row 2 (train) = row 7 (test)" in warned[1] and "inflates test accuracy" in warned[1]
    assert "row 3 (train, 'cat') = row 8 (train, 'dog')" in warned[2]
    assert result.warnings == info.warnings == tuple(warned)
    for duplicate in info.duplicates:  # it points at the stored first copy
        shard = read_split_records(tmp_path / "out", duplicate.shard)
        assert shard[duplicate.record]["image_uri"].decode() == duplicate.copies[0].image_uri


def read_split_records(out, shard_file: str) -> list[dict]:
    split = shard_file.split("-")[0]
    files = [s["file"] for s in read_manifest(out)["splits"][split]["shards"]]
    records = read_split(out, split)
    # read_split reads shards in order; cut out this one's records
    sizes = [s["num_records"] for s in read_manifest(out)["splits"][split]["shards"]]
    start = sum(sizes[:files.index(shard_file)])
    return records[start:start + sizes[files.index(shard_file)]]


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_drop_keeps_the_first_copy_and_lists_the_others_with_the_row_they_repeat(
        tmp_path, runner):
    table = planted(tmp_path)
    out = tmp_path / "out"
    result, warned = converted(table, out, duplicates="drop", runner=runner)

    assert result.num_records == 6 and result.num_rejected == 3
    stored = {r["image_uri"].decode() for split in ("train", "test")
              for r in read_split(out, split)}
    assert stored == set(table["image_uri"][:6])  # every image once, the first copies
    rejected = pd.read_csv(out / "rejected.csv", index_col="row")
    assert sorted(rejected.index) == [6, 7, 8]
    assert "the same bytes as row 2" in rejected.loc[7, "reason"]
    assert "the copy in the first split (train)" in rejected.loc[7, "reason"]
    assert "its label 'dog' differs from the kept 'cat'" in rejected.loc[8, "reason"]
    info = tfrecorder.info(out)
    assert [[c.kept for c in d.copies] for d in info.duplicates] == [[True, False]] * 3
    assert sum(s.num_records for s in info.splits.values()) == 6
    assert info.class_counts["test"] == {"cat": 1, "dog": 1}
    assert "dropped 3" in warned[0]
    manifest = read_manifest(out)
    assert manifest["splits"]["test"]["num_rejected"] == 1
    for duplicate in info.duplicates:
        shard = read_split_records(out, duplicate.shard)
        assert shard[duplicate.record]["image_uri"].decode() == duplicate.copies[0].image_uri
    tfrecorder.verify(str(out))  # shards, sizes and checksums match the manifest


def test_drop_writes_the_same_bytes_with_both_engines(tmp_path):
    table = planted(tmp_path)
    converted(table, tmp_path / "local", duplicates="drop", num_shards=2)
    converted(table, tmp_path / "beam", duplicates="drop", num_shards=2, runner="DirectRunner")
    for name in ("dataset.json", "rejected.csv", "train-00000-of-00002.tfrecord",
                 "train-00001-of-00002.tfrecord", "test-00000-of-00002.tfrecord"):
        local, beam = (tmp_path / "local" / name).read_bytes(), (tmp_path / "beam" / name)
        if name == "dataset.json":
            assert json.loads(local) == json.loads(beam.read_bytes())
        else:
            assert local == beam.read_bytes(), name


def test_error_refuses_duplicates_naming_every_row_and_leaves_no_dataset(tmp_path):
    with pytest.raises(DuplicateImagesError) as caught:
        converted(planted(tmp_path), tmp_path / "out", duplicates="error")
    error = caught.value
    assert sorted(error.rows) == [1, 2, 3, 6, 7, 8] and error.option == "duplicates"
    assert "row 2 (" in str(error) and "duplicates='drop'" in str(error)
    assert not (tmp_path / "out" / "dataset.json").exists()
    assert len(error.duplicates) == 3


def test_a_split_without_a_class_and_classes_far_out_of_balance_are_warned(tmp_path):
    table = pd.DataFrame({"split": ["TRAIN"] * 204 + ["TEST"] * 3,
                          "label": ["a"] * 202 + ["b"] * 2 + ["a", "a", "c"],
                          "value": range(207)})
    _, warned = converted(table, tmp_path / "out")
    assert warned == [
        "in train, the largest class 'a' (202 records) has more than 100x the smallest "
        "'b' (2); AutoML advises at most 100x",
        "test has no records of 1 class that train has: 'b'"]
    _, balanced = converted(table[table.label != "b"].iloc[100:], tmp_path / "balanced")
    assert balanced == []


def test_batches_of_mixed_sizes_are_refused_when_load_is_called(image_table, tmp_path):
    out = tmp_path / "out"
    converted(image_table, out)
    with pytest.raises(OptionError, match=r"differ in size .* image_size=\(\d+, \d+\)"):
        tfrecorder.load(out, "train", batch_size=4)
    batch = next(iter(tfrecorder.load(out, "train", batch_size=4, image_size=(8, 8))))
    assert batch["image"].shape == (4, 8, 8, 3)

    same = image_table.assign(image_uri=[write_image(tmp_path / "same" / f"{i}.jpg", seed=i)
                                         for i in range(len(image_table))])
    converted(same, tmp_path / "same_out")
    ds, info = tfrecorder.load(tmp_path / "same_out", "train", batch_size=4, with_info=True)
    assert next(iter(ds))["image"].shape == (4, 30, 40, 3)
    assert isinstance(info, tfrecorder.DatasetInfo) and info.path == str(tmp_path / "same_out")


def test_reprs_are_short_and_notebooks_get_counts_warnings_and_thumbnails(tmp_path):
    result, _ = converted(planted(tmp_path), tmp_path / "out")
    assert repr(result) == (f"<ConversionResult {str(tmp_path / 'out')!r}: 9 records "
                            f"(train 6, test 3), 0 rejected, 3 warnings, "
                            f"{result.elapsed_seconds:.1f} s>")
    info = tfrecorder.info(tmp_path / "out")
    assert repr(info).startswith("<DatasetInfo") and "9 records (train 6, test 3)" in repr(info)
    page = result._repr_html_()
    assert "<th>cat</th><td>3</td><td>1</td>" in page  # train 3 cats, test 1
    assert "inflates test accuracy" in page
    assert page.count("<img src='data:image/png;base64,") == 2  # one per class
    shown = info._repr_html_()
    assert shown.count("<th>") >= 4 and shown.count("<img src='data:image/png") == 2


def test_info_on_a_bucket_reads_the_manifest_alone_without_tensorflow(gcs_store, tmp_path):
    uris = [gcs_store.upload(write_image(tmp_path / f"{i}.jpg", seed=i),
                             f"{gcs_store.root}/info/{i}.jpg") for i in range(6)]
    out = f"{gcs_store.root}/info-out"
    tfrecorder.convert(pd.DataFrame({"image_uri": uris, "label": list("abcabc")}), out,
                       progress=False)
    printed = run_without_tensorflow(
        "import sys, json, tfrecorder; print(json.dumps(tfrecorder.info(sys.argv[1]).to_json()))",
        out)
    found = json.loads(printed)
    assert sum(found["splits"][s]["num_records"] for s in found["splits"]) == 6
    assert found["class_names"] == ["a", "b", "c"]


def test_the_cli_prints_counts_sizes_and_duplicates_and_json_for_scripts(tmp_path):
    converted(planted(tmp_path), tmp_path / "out")
    shown = run_cli("info", str(tmp_path / "out"))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "cat" in text and "dog" in text and "height" in text
    assert "3 images are stored more than once" in text
    as_json = json.loads(run_cli("info", str(tmp_path / "out"), "--json").stdout)
    assert as_json["class_counts"]["test"] == {"cat": 1, "dog": 2}
    assert len(as_json["duplicates"]) == 3


def test_the_beam_engine_moves_the_progress_bar_as_the_local_one_does(tmp_path, capsys):
    paths = [write_image(tmp_path / f"{i}.jpg", seed=i) for i in range(12)]
    tfrecorder.convert(pd.DataFrame({"image_uri": paths, "label": ["a", "b"] * 6}),
                       str(tmp_path / "out"), runner="DirectRunner", num_shards=2)
    shown = capsys.readouterr().err
    assert "Writing TFRecords (Beam)" in shown and "12/12" in shown


def test_images_whose_hashes_match_are_duplicates_only_if_their_bytes_do(tmp_path):
    """A crafted collision of the fast hash must not cost a row: matches are read back."""
    from tfrecorder.write.finish import _same_bytes
    from tfrecorder.write.output import OutputFolder
    from tfrecorder.write.statistics import Located

    table = planted(tmp_path)
    converted(table, tmp_path / "out", num_shards=1)
    info = tfrecorder.info(tmp_path / "out")
    kept = {c.row: (d.shard, d.record) for d in info.duplicates for c in d.copies[:1]}
    shard = info.splits["train"].shards[0].file
    folder = OutputFolder(str(tmp_path / "out"), "test")
    shards = [shard]
    row_1, row_2 = (Located("train", 0, kept[row][1], row) for row in (1, 2))
    assert _same_bytes(folder, None, shards, [[row_1, row_2]], "image") == []  # as if they collided
    same = _same_bytes(folder, None, shards, [[row_1, row_1]], "image")
    assert [copies for _, copies in same] == [[row_1, row_1]]


def test_beam_workers_outside_the_driver_log_their_progress(caplog, monkeypatch):
    """A worker in another process (Dataflow, a portable runner) has no bar: it logs."""
    import logging
    import pickle

    from tfrecorder.write.engines.beam import Progress

    monkeypatch.setattr(Progress, "_LOG_EVERY_SECONDS", 0.0)
    shipped = pickle.loads(pickle.dumps(Progress("run", 500, show=True)))  # as Beam ships it
    with caplog.at_level(logging.INFO, logger="tfrecorder.write.engines.beam"):
        for _ in range(3):
            shipped.update(10, "train-00000-of-00002.tfrecord")
    assert "this worker has encoded 30 rows (of 500 in the run); now writing " \
           "train-00000-of-00002.tfrecord" in caplog.text


def test_the_cli_draws_a_contact_sheet_and_writes_a_report(tmp_path):
    converted(planted(tmp_path), tmp_path / "out")
    sheet = tmp_path / "sheet.png"
    shown = run_cli("show", tmp_path / "out", "-o", sheet, "--per-class", 3)
    assert shown.returncode == 0, shown.stderr
    from PIL import Image

    expected = tfrecorder.show(tmp_path / "out", per_class=3)
    assert Image.open(sheet).size == expected.size and "2 classes x 3" in shown.stdout
    page = tmp_path / "report.html"
    written = run_cli("report", tmp_path / "out", "-o", page)
    assert written.returncode == 0, written.stderr
    assert "inflates test accuracy" in page.read_text()


def test_the_cli_warns_in_its_own_words_and_drops_duplicates_when_asked(tmp_path):
    table = tmp_path / "table.csv"
    planted(tmp_path).to_csv(table, index=False)
    warned = run_cli("convert", table, tmp_path / "out")
    assert warned.returncode == 0, warned.stderr
    assert "tfrecorder: warning: 3 images are stored more than once" in warned.stderr
    assert "DatasetWarning" not in warned.stderr  # not Python's file:line: Category form
    dropped = run_cli("convert", table, tmp_path / "dropped", "--duplicates", "drop")
    assert dropped.returncode == 0, dropped.stderr
    assert tfrecorder.info(tmp_path / "dropped").num_records == 6


def test_unlabelled_records_are_counted_per_split_apart_from_the_classes(tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(partly_labelled_csv(tmp_path), out, progress=False)
    info = tfrecorder.info(out)
    assert info.unlabeled == {"train": 2, "validation": 0, "test": 1}
    assert info.class_counts["train"] == {"cat": 1, "dog": 2}
    assert "2 classes, 3 without a label" in repr(info)
    assert "<th>(no label)</th><td>2</td><td>0</td><td>1</td>" in info._repr_html_()
    assert info.to_json()["unlabeled"] == info.unlabeled
    shown = run_cli("info", out)
    assert shown.returncode == 0, shown.stderr
    assert "  (no label)           2           0           1" in shown.stdout


def test_the_repr_of_one_record_says_record_not_records(tmp_path):
    image = write_image(tmp_path / "a.png", fmt="PNG")
    table = pd.DataFrame({"split": ["TRAIN"], "image_uri": [image], "label": [["cat"]],
                          "boxes": [[[0.1, 0.1, 0.6, 0.6]]]})
    _, warned = converted(table, tmp_path / "out", task="detection", num_workers=1)
    assert len(warned) == 1  # too few boxes
    assert repr(tfrecorder.info(tmp_path / "out")) == (
        f"<DatasetInfo {str(tmp_path / 'out')!r}: 1 record (train 1), 1 class, 1 object, "
        "1 warning>")

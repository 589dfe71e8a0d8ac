"""The words of messages (`tfrecorder/wording.py`)."""

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tfrecorder.errors import OptionError
from tfrecorder.options import ImageOptions
from tfrecorder.wording import name_row, name_rows, shown


@pytest.mark.parametrize(("value", "said"), [
    (np.zeros((100, 28, 28)), "ndarray of shape (100, 28, 28), dtype float64"),
    (pd.DataFrame({"a": range(500)}), "DataFrame of shape (500, 1)"),
    (pd.Series(range(9)), "Series of shape (9,), dtype int64"),
    (list(range(1000)), "[0, 1, 2, 3, 4, 5, 6, 7, ...]"),
    ("cat", "'cat'"),
    ((224,), "(224,)"),
])
def test_a_value_is_shown_on_one_short_line(value, said):
    assert shown(value) == said


def test_a_long_value_is_cut():
    text = shown("x" * 10_000)
    assert len(text) <= 80 and text.startswith("'xxx") and "..." in text


def test_a_bare_array_as_source_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError) as raised:
        tfrecorder.convert(np.zeros((100, 28, 28)), str(tmp_path / "out"), progress=False)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 400, message
    assert "not ndarray of shape (100, 28, 28), dtype float64" in message


def test_an_option_error_cuts_the_value_it_quotes():
    with pytest.raises(OptionError) as raised:
        ImageOptions(image_size=list(range(10_000)))
    assert len(str(raised.value)) < 200, raised.value


# --- a file's lines, a table's rows --------------------------------------------------------

def test_a_files_lines_are_named_lines_and_a_tables_labels_rows():
    lines = pd.Index([3, 7, 9, 11, 12, 14, 20], name="line")
    assert name_rows(lines) == "lines 3, 7, 9, 11, 12 and 2 more"
    assert name_rows(lines[:1]) == "line 3"
    assert name_rows([7, 9], of=lines) == "lines 7, 9"  # a list keeps its index's word
    assert name_row(7, lines) == "line 7"
    assert name_rows(pd.RangeIndex(3)) == "rows 0, 1, 2"
    assert name_rows([2], of=pd.RangeIndex(3)) == name_row(2, pd.RangeIndex(3)) == "row 2"
    assert name_rows([4, 5]) == "rows 4, 5"


_GOOD = ["TRAIN,{d}/a.png,cat,plain,1.5", 'TRAIN,{d}/b.png,dog,"two\nlines",2.5']
# Each mistake as the last record of a CSV under a header, after a quoted cell's line
# break: the record is row 2 of the table and starts on line 5 of the file.
_LINE, _ROW = 5, 2


@pytest.fixture
def images(tmp_path):
    for i, name in enumerate("abc"):
        Image.new("RGB", (8, 8), (i * 80, 40, 0)).save(tmp_path / f"{name}.png")
    (tmp_path / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    return tmp_path


def _csv(folder, last: str, name: str = "table.csv") -> str:
    path = folder / name
    records = "\n".join([*_GOOD, last]).format(d=folder)
    path.write_text(f"split,image_uri,label,note,size\n{records}\n")
    assert path.read_text().splitlines()[_LINE - 1] == last.format(d=folder)
    return str(path)


def _message(source, folder, **options) -> str:
    with pytest.raises(ValueError) as raised:
        tfrecorder.convert(source, str(folder / "out"), progress=False, **options)
    return str(raised.value)


@pytest.mark.parametrize(("last", "options", "said"), [
    ("TRAN,{d}/c.png,cat,x,1", {}, "'TRAN' at {where}."),  # a bad split
    ("TRAIN,{d}/c.png,cow,x,1", {"label_vocabulary": ["cat", "dog"]}, "'cow' at {where}."),
    ("TRAIN,{d}/gone.png,cat,x,1", {"on_error": "raise"},
     "{where} ('{d}/gone.png'): not a file"),  # a missing local image
    ("TRAIN,,cat,x,1", {}, "empty or non-text values at {where}."),  # a blank path
    ("TRAIN,{d}/c.png,,x,1", {"unlabeled": "error"}, "'label' is blank at {where} "),
    ("TRAIN,{d}/c.png,cat,x,", {}, "'size' has missing values (NaN, None or blank) at "
     "{where}."),  # a blank cell
    ("TRAIN,{d}/corrupt.png,cat,x,1", {"on_error": "raise"},
     "{where} ('{d}/corrupt.png'): corrupt or truncated image"),  # rejected as written
])
def test_a_csv_names_its_lines_and_a_dataframe_its_rows(images, last, options, said):
    path = _csv(images, last)
    from_file = _message(path, images, **options)
    assert said.format(where=f"line {_LINE}", d=images) in from_file, from_file
    assert f"row {_LINE}" not in from_file and f"row {_ROW}" not in from_file
    from_frame = _message(pd.read_csv(path), images, **options)
    assert said.format(where=f"row {_ROW}", d=images) in from_frame, from_frame


def test_rejected_rows_of_several_csv_files_keep_their_lines(images):
    """Files read as one dataset name their rows `validation[3]`: still a file's line,
    in messages and in rejected.csv's `line` column (docs/format.md), as one file's are."""
    (images / "train.csv").write_text(f"image_uri,label\n{images}/b.png,cat\n"
                                      f"{images}/c.png,dog\n")
    (images / "validation.csv").write_text(f"image_uri,label\n{images}/b.png,cat\n"
                                           f"{images}/corrupt.png,dog\n")
    source = {split: str(images / f"{split}.csv") for split in ("train", "validation")}
    tfrecorder.convert(source, str(images / "out"), progress=False, duplicates="drop")
    rejected = pd.read_csv(images / "out" / "rejected.csv", index_col=0)
    assert rejected.index.name == "line"
    assert rejected.loc["validation[3]", "reason"].startswith("corrupt or truncated")
    # validation's b.png is train's: dropped, naming the line it repeats
    assert "the same bytes as line train[2] " in rejected.loc["validation[2]", "reason"]
    message = _message(source, images, label_vocabulary=["cat"], overwrite=True)
    assert "'dog' at lines train[3], validation[3]." in message, message


def test_duplicates_of_a_csv_are_named_by_their_lines_in_the_manifest_info_and_report(
        images, caplog):
    """The manifest keeps each copy under `line` (as rejected.csv's column), so `info`,
    the report and `duplicates="error"` name lines long after the run."""
    path = _csv(images, "TEST,{d}/a.png,cat,x,1")  # line 2's image again, on line 5
    with pytest.raises(tfrecorder.DuplicateImagesError, match=r"^1 image is .*: line 2 \("):
        tfrecorder.convert(path, str(images / "refused"), progress=False, duplicates="error")
    out = str(images / "out")
    tfrecorder.convert(path, out, progress=False)
    (duplicate,) = json.loads((images / "out" / "dataset.json").read_text())["duplicates"]
    assert [(c.get("line"), "row" in c) for c in duplicate["copies"]] == \
        [(2, False), (_LINE, False)]
    warnings = tfrecorder.info(out).warnings
    assert any(f"line 2 (train) = line {_LINE} (test)" in w for w in warnings), warnings
    tfrecorder.report(out, str(images / "r.html"))
    assert "<th>line</th><th>image_uri</th>" in (images / "r.html").read_text()
    frame = str(images / "frame")
    tfrecorder.convert(pd.read_csv(path), frame, progress=False)
    assert any("row 0 (train) = row 2 (test)" in w for w in tfrecorder.info(frame).warnings)


def test_the_beam_engine_names_a_csvs_lines_as_the_local_one_does(images):
    pytest.importorskip("apache_beam")
    path = _csv(images, "TRAIN,{d}/corrupt.png,cat,x,1")
    message = _message(path, images, runner="DirectRunner", on_error="raise")
    assert message.startswith(f"line {_LINE} ('{images}/corrupt.png'): corrupt"), message


def test_a_jsonl_file_names_its_lines(images):
    """Vertex AI's JSONL import file: a record is a line (a blank one counts)."""
    record = {"imageGcsUri": f"{images}/a.png",
              "classificationAnnotation": {"displayName": "cat"}}
    path = images / "import.jsonl"
    path.write_text(f"{json.dumps(record)}\n\n{json.dumps({**record, 'imageGcsUri': ''})}\n")
    message = _message(str(path), images)
    assert "'image_uri' has empty or non-text values at line 3." in message, message

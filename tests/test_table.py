import os

import numpy as np
import pandas as pd
import pytest

from tfrecorder import SchemaError
from tfrecorder.errors import Option
from tfrecorder.sources import load_table


def frame(**columns):
    n = len(next(iter(columns.values())))
    columns.setdefault("image_uri", [f"/img/{i}.jpg" for i in range(n)])
    return pd.DataFrame(columns)


def test_canonical_columns_and_normalized_splits():
    table = load_table(frame(split=["train", " Training", "VALIDATION", "test", "unassigned",
                                    ""], label=list("abcabc")))
    assert table.rows["split"].tolist() == ["train", "train", "validation", "test",
                                            "unassigned", "unassigned"]
    assert table.rows["label"].tolist() == list("abcabc")
    assert table.source is not None and len(table.source) == 6


def test_without_split_or_label_columns_every_row_is_unassigned_and_unlabelled():
    table = load_table(pd.DataFrame({"image_uri": ["/a.jpg", "/b.jpg"]}))
    assert set(table.rows["split"]) == {"unassigned"} and not table.has_labels


def test_a_misnamed_image_column_is_refused_not_stored_as_text():
    with pytest.raises(SchemaError, match=r"no 'image_uri' column, and column 'path' looks "
                                          r"like image paths .*schema=\{'path': 'ImageUri'\}"):
        load_table(pd.DataFrame({"path": ["a.jpg"], "label": ["x"]}))


def test_unknown_split_values_are_named_with_their_rows():
    df = frame(split=["TRAIN", "TRIAN", "prod", "TRIAN"], label=list("abcd"))
    with pytest.raises(SchemaError) as error:
        load_table(df)
    message = str(error.value)
    assert "column 'split'" in message
    assert "'TRIAN' at rows 1, 3" in message and "'prod' at row 2" in message


@pytest.mark.parametrize("bad", [None, np.nan, "", "   "])
def test_empty_uris_are_named_with_their_rows(bad):
    df = pd.DataFrame({"image_uri": ["/a.jpg", bad, "/c.jpg"], "label": ["a", "b", "c"]})
    with pytest.raises(SchemaError, match=r"column 'image_uri'.*at row 1\b"):
        load_table(df)


@pytest.mark.parametrize("blank", [None, np.nan, "", "   "])
def test_a_blank_label_is_an_unlabelled_row_not_a_class(blank):
    """AutoML imports unlabelled images: the row is kept with no label (the plan keeps
    or refuses it by `unlabeled`); the other rows keep their labels' type."""
    assert load_table(frame(label=["a", "b", blank])).rows["label"].tolist() == \
        ["a", "b", None]
    assert load_table(frame(label=[2, blank, 0] if blank is not np.nan else [2.0, blank, 0.0])
                      ).rows["label"].tolist() == [2, None, 0]
    with pytest.raises(SchemaError, match=r"column 'label' is empty in every row.*"
                                          r"schema=\{'label': None\}"):
        load_table(frame(label=[blank, blank]))


def test_labels_mixing_numbers_and_text_are_refused():
    with pytest.raises(SchemaError, match=r"mixes numbers \(rows 0, 2, e.g. 1\).*text"):
        load_table(frame(label=[1, "cat", 2]))


def test_many_bad_rows_are_summarized():
    with pytest.raises(SchemaError, match=r"rows 0, 1, 2, 3, 4 and 5 more"):
        load_table(frame(label=[-1] * 10))


def test_integer_labels_are_kept():
    assert load_table(frame(label=[3, 1, 2])).rows["label"].tolist() == [3, 1, 2]
    assert load_table(frame(label=[3.0, 1.0])).rows["label"].tolist() == [3, 1]
    assert load_table(frame(label=["3", " 1"])).rows["label"].tolist() == [3, 1]


def test_fractional_labels_are_refused():
    with pytest.raises(SchemaError, match=r"non-integer numbers at row 1 \(e.g. 1.5\)"):
        load_table(frame(label=[1.0, 1.5]))


def test_errors_name_the_dataframes_own_index():
    df = frame(label=["a", -1]).set_index(pd.Index([100, 200]))
    with pytest.raises(SchemaError, match=r"row 200\b"):
        load_table(df)


def test_relative_paths_resolve_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = load_table(pd.DataFrame({"image_uri": ["a/b.jpg", "/abs.jpg", "gs://b/c.jpg"]}))
    assert table.rows["uri"].tolist() == [str(tmp_path / "a/b.jpg"), "/abs.jpg", "gs://b/c.jpg"]
    assert table.rows["image_uri"].tolist() == ["a/b.jpg", "/abs.jpg", "gs://b/c.jpg"]



def schema(**columns) -> Option:
    return Option("schema", columns)


# A bad table (a DataFrame, or the text of a CSV file), what load_table is given besides,
# and the data its error carries: (column, rows, option, fix).
ERRORS_WITH_DATA = [
    pytest.param(frame(split=["TRAIN", "TRIAN", "prod"]), {},
                 ("split", [1, 2], None, ()), id="unknown split"),
    pytest.param("TRAIN,/a.jpg,cat\n\nTRAIN,/b.jpg,\nBOGUS,/c.jpg,cat\n", {},
                 ("split", [4], None, ()), id="unknown split in a CSV: its line"),
    pytest.param(frame(image_width=[1, 2]), {},
                 ("image_width", None, None, (schema(image_width=None),)), id="reserved name"),
    pytest.param(frame(label=["01", "1", "2", "1"]), {},
                 ("label", [0, 1, 3], None, (schema(label="StringLabel"),
                                             schema(label="IntegerLabel"))),
                 id="labels spelled two ways"),
    pytest.param(frame(label=[1, "cat", 2]), {},
                 ("label", [1], None, (schema(label="StringLabel"),)),
                 id="numbers and text labels: the fewer"),
    pytest.param(frame(label=["a", "b"], more=["c", 1.5]), {"schema": {"more": "StringLabel",
                                                                       "label": "IntegerLabel"}},
                 (None, [0, 1], None, (schema(label="StringLabel", more="StringLabel"),)),
                 id="text in IntegerLabel columns"),
    pytest.param(pd.DataFrame({"image_uri": ["/a.jpg", "", None]}), {},
                 ("image_uri", [1, 2], None, ()), id="empty image paths"),
    pytest.param("image_uri,label\n/a.jpg,cat\n/b.jpg,dog,x\n\n/c.jpg,x,y\n", {},
                 (None, [3, 5], None, ()), id="CSV rows with too many fields"),
    pytest.param(pd.DataFrame({"path": ["a.jpg"], "label": ["x"]}), {},
                 ("path", None, None, (schema(path="ImageUri"), schema(path="StringInput"))),
                 id="image paths in a column named otherwise"),
    pytest.param(frame(age=[1.0, 2.0]), {"fill_missing": {"agee": 0}},
                 ("agee", None, "fill_missing", ()), id="fill_missing names no input"),
]


@pytest.mark.parametrize("table,options,data", ERRORS_WITH_DATA)
def test_errors_carry_the_column_rows_and_options_at_fault(table, options, data, tmp_path):
    source = write_csv(tmp_path, table) if isinstance(table, str) else table
    with pytest.raises(SchemaError) as caught:
        load_table(source, **options)
    error = caught.value
    assert (error.column, error.rows, error.option, error.fix) == data
    assert all(str(option) in str(error) for option in data[3])


# --- CSV ------------------------------------------------------------------------------

def write_csv(tmp_path, text):
    path = tmp_path / "data" / "images.csv"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return str(path)


def test_automl_csv_without_header_resolves_paths_against_its_folder(tmp_path):
    path = write_csv(tmp_path, "TRAIN,img/a.jpg,cat\nTEST,gs://bucket/b.jpg,dog\n\n")
    table = load_table(path)
    assert table.rows["uri"].tolist() == [str(tmp_path / "data/img/a.jpg"), "gs://bucket/b.jpg"]
    assert table.rows["split"].tolist() == ["train", "test"]
    assert list(table.source.columns) == ["split", "image_uri", "label"]


def test_csv_with_header_is_detected(tmp_path):
    path = write_csv(tmp_path, "image_uri,label,split\n/a.jpg,1,train\n/b.jpg,2,test\n")
    table = load_table(path)
    assert table.rows["label"].tolist() == [1, 2]
    assert table.rows["split"].tolist() == ["train", "test"]


@pytest.mark.parametrize("text,columns", [
    ("/a.jpg\n/b.jpg\n", ["image_uri"]),
    ("/a.jpg,cat\n/b.jpg,dog\n", ["image_uri", "label"]),
    ("TRAIN,/a.jpg\nTEST,/b.jpg\n", ["split", "image_uri"]),
])
def test_automl_csv_column_counts(tmp_path, text, columns):
    assert list(load_table(write_csv(tmp_path, text)).source.columns) == columns


def test_csv_errors_name_line_numbers(tmp_path):
    path = write_csv(tmp_path, "TRAIN,/a.jpg,cat\n\nTRAIN,/b.jpg,\nBOGUS,/c.jpg,cat\n")
    with pytest.raises(SchemaError, match=r"'BOGUS' at line 4\b"):
        load_table(path)


def test_csv_label_mixing_numbers_and_text(tmp_path):
    path = write_csv(tmp_path, "TRAIN,/a.jpg,1\nTRAIN,/b.jpg,cat\n")
    with pytest.raises(SchemaError, match="mixes numbers"):
        load_table(path)


def test_csv_rows_with_several_labels_are_automl_multi_label_rows(tmp_path):
    table = load_table(write_csv(tmp_path, "TRAIN,/a.jpg,cat,dog\nTEST,/b.jpg,dog\n"
                                           "VALIDATION,/c.jpg,,\n"))
    assert table.multi_label
    assert table.rows["label"].tolist() == [["cat", "dog"], ["dog"], []]
    assert table.rows["split"].tolist() == ["train", "test", "validation"]


def test_csv_multi_label_rows_without_a_split_column(tmp_path):
    table = load_table(write_csv(tmp_path, "/a.jpg,cat,dog\n/b.png,bird\n"))
    assert table.rows["label"].tolist() == [["cat", "dog"], ["bird"]]
    assert set(table.rows["split"]) == {"unassigned"}


def test_a_misspelt_split_in_multi_label_rows_is_reported_as_a_split(tmp_path):
    with pytest.raises(SchemaError, match="column 'split' has unknown values: 'TRAN'"):
        load_table(write_csv(tmp_path, "TRAN,/a.jpg,cat,dog\n"))


def test_csv_records_parsed_in_batches_read_as_one(tmp_path, monkeypatch):
    """A large file's records are parsed a batch at a time, but what the columns are is
    told by every record: here a second label in the last batch makes every row
    multi-label, and a first cell that is no split name in a later batch is a path."""
    from tfrecorder.sources import csv

    monkeypatch.setattr(csv, "_BATCH_RECORDS", 2)
    table = load_table(write_csv(tmp_path, "TRAIN,/a.jpg,cat\nTEST,/b.jpg,dog\n\n"
                                           "TRAIN,/c.jpg,cat\nTEST,/d.jpg,dog,cat\n"))
    assert table.multi_label
    assert table.rows["label"].tolist() == [["cat"], ["dog"], ["cat"], ["dog", "cat"]]
    assert table.rows.index.tolist() == [1, 2, 4, 5]  # lines, the blank one skipped
    paths = load_table(write_csv(tmp_path, "TRAIN,/a.jpg\nTEST,/b.jpg\n/c.jpg,cat\n"))
    assert list(paths.source.columns) == ["image_uri", "label"]
    assert paths.rows["image_uri"].tolist() == ["TRAIN", "TEST", "/c.jpg"]


def test_csv_text_is_held_by_arrow_and_paths_read_as_given_once(tmp_path):
    table = load_table(write_csv(tmp_path, "TRAIN,/a.jpg,cat\nTEST,/b.jpg,dog\n"))
    assert all(str(table.source[name].dtype) == "str" for name in table.source.columns)
    import pyarrow as pa

    def text_buffers(name):
        values = pa.chunked_array([pa.array(table.rows[name].array)])
        return [b.address for c in values.chunks for b in c.buffers() if b is not None]

    assert text_buffers("uri") == text_buffers("image_uri")  # one copy of the text
    assert isinstance(table.rows.index, pd.RangeIndex) and table.rows.index[0] == 1


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such CSV file or image folder"):
        load_table(str(tmp_path / "nope.csv"))


# --- image folders -------------------------------------------------------------------

def touch(root, *paths):
    for p in paths:
        os.makedirs(os.path.dirname(root / p), exist_ok=True)
        (root / p).write_bytes(b"x")


def test_label_folders(tmp_path):
    touch(tmp_path, "cat/1.jpg", "cat/sub/2.jpg", "dog/3.png", ".hidden/4.jpg", "dog/.DS_Store")
    table = load_table(str(tmp_path))
    assert table.rows["label"].tolist() == ["cat", "cat", "dog"]
    assert table.rows["uri"].tolist() == [str(tmp_path / p) for p in
                                          ["cat/1.jpg", "cat/sub/2.jpg", "dog/3.png"]]
    assert set(table.rows["split"]) == {"unassigned"}


def test_split_and_label_folders(tmp_path):
    touch(tmp_path, "train/cat/1.jpg", "Validation/dog/2.jpg", "test/cat/3.jpg")
    table = load_table(str(tmp_path))
    assert table.rows["split"].tolist() == ["validation", "test", "train"]
    assert table.rows["label"].tolist() == ["dog", "cat", "cat"]


def test_images_outside_label_folders_are_named(tmp_path):
    touch(tmp_path, "cat/1.jpg", "stray.JPG", "README.md")
    with pytest.raises(SchemaError, match=r"1 image\(s\) sit outside a label folder.*stray.JPG"):
        load_table(str(tmp_path))


def test_other_files_outside_label_folders_are_skipped_with_a_warning(tmp_path, caplog):
    touch(tmp_path, "train/cat/1.jpg", "README.md")
    table = load_table(str(tmp_path))
    assert table.rows["label"].tolist() == ["cat"]
    assert "Skipping 1 file(s)" in caplog.text and "README.md" in caplog.text

"""A source of many table files (`sources/table_files.py`): a glob or a folder of CSV,
Parquet or JSONL files is listed without reading a row, read file by file with each
file's own reader, and converted to the same records as the one table of all their rows.
"""

import json
import os

import pandas as pd
import pytest
from helpers import write_image

import tfrecorder
from tfrecorder.errors import SchemaError, SourceNotFoundError
from tfrecorder.options import TableOptions
from tfrecorder.sources import load_table
from tfrecorder.sources.table_files import file_table, files_table, table_files
from tfrecorder.wording import name_rows

SPLITS = ["TRAIN", "TRAIN", "VALIDATION", "TEST", "TRAIN", "UNASSIGNED"]


@pytest.fixture
def images(tmp_path):
    """Thirty small JPEG files: one a row of `frames`, so that no image is a duplicate."""
    return [write_image(str(tmp_path / "images" / f"{i:02}.jpg"), seed=i, size=(24, 16))
            for i in range(30)]


def frames(images, files=5, rows=6):
    """`files` tables of `rows` rows each, cycling through `images`."""
    found = []
    for f in range(files):
        at = [(f * rows + r) % len(images) for r in range(rows)]
        found.append(pd.DataFrame({
            "split": [SPLITS[r % len(SPLITS)] for r in range(rows)],
            "image_uri": [images[i] for i in at],
            "label": ["cat" if i % 2 else "dog" for i in at],
            "age": [f * 10 + r for r in range(rows)]}))
    return found


def write_csvs(folder, parts):
    os.makedirs(folder, exist_ok=True)
    for f, part in enumerate(parts):
        part.to_csv(os.path.join(folder, f"rows-{f:05}.csv"), index=False)
    return str(folder)


def shards(output):
    """Each shard's bytes, by file name."""
    return {name: open(os.path.join(output, name), "rb").read()
            for name in sorted(os.listdir(output)) if ".tfrecord" in name}


# ---- listing ----

def test_a_glob_lists_its_matches_sorted_and_reads_no_rows(tmp_path):
    for name in ["b.csv", "a.csv", "c.csv"]:
        (tmp_path / name).write_text("not,read\n\x00\x01")  # unreadable: never read
    (tmp_path / "notes.txt").write_text("x")
    assert table_files(str(tmp_path / "*.csv")) == [str(tmp_path / n)
                                                    for n in ["a.csv", "b.csv", "c.csv"]]
    assert table_files(tmp_path / "[ab].csv") == [str(tmp_path / "a.csv"),
                                                  str(tmp_path / "b.csv")]


def test_a_folder_of_only_csv_or_only_jsonl_files_is_listed(tmp_path):
    rows = tmp_path / "rows"
    rows.mkdir()
    for name in ["2.csv", "1.csv", "_SUCCESS", ".1.csv.crc"]:
        (rows / name).write_text("x")
    assert table_files(str(rows)) == [str(rows / "1.csv"), str(rows / "2.csv")]
    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "a.jsonl").write_text("{}")
    assert table_files(str(lines)) == [str(lines / "a.jsonl")]


def test_any_other_source_is_left_to_the_readers(tmp_path):
    (tmp_path / "images" / "cat").mkdir(parents=True)  # an image folder
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.csv").write_text("x")
    (tmp_path / "mixed" / "b.jsonl").write_text("x")
    (tmp_path / "one.csv").write_text("x")
    for source in [tmp_path / "images", tmp_path / "mixed", tmp_path / "one.csv",
                   str(tmp_path / "one.csv"), tmp_path / "gone.csv", pd.DataFrame()]:
        assert table_files(source) is None


def test_a_file_whose_name_holds_a_glob_character_is_that_file(tmp_path, images):
    frames(images, files=1)[0].to_csv(tmp_path / "rows[1].csv", index=False)
    assert table_files(str(tmp_path / "rows[1].csv")) is None
    assert len(load_table(str(tmp_path / "rows[1].csv")).rows) == 6


def test_a_glob_without_a_match_is_not_found(tmp_path):
    with pytest.raises(SourceNotFoundError, match=r"no file matches .*rows.\*\.csv"):
        table_files(str(tmp_path / "rows" / "*.csv"))


def test_matches_of_two_formats_or_of_no_table_are_refused(tmp_path):
    for name in ["a.csv", "b.parquet", "c.txt"]:
        (tmp_path / name).write_text("x")
    with pytest.raises(SchemaError, match=r"two formats: .*a\.csv' \(CSV\) and "
                                          r".*b\.parquet' \(Parquet\)"):
        table_files(str(tmp_path / "[ab].*"))
    with pytest.raises(SchemaError, match=r"c\.txt', which is not a table file"):
        table_files(str(tmp_path / "*"))


# ---- converting ----

def test_a_glob_of_csv_files_converts_as_their_rows_in_one_table(tmp_path, images):
    parts = frames(images)
    rows = write_csvs(tmp_path / "rows", parts)
    whole = pd.concat([pd.read_csv(os.path.join(rows, name))
                       for name in sorted(os.listdir(rows))], ignore_index=True)
    from_files = tfrecorder.convert(os.path.join(rows, "*.csv"), tmp_path / "files")
    from_frame = tfrecorder.convert(whole, tmp_path / "frame")
    assert from_files.num_records == from_frame.num_records == 30
    files, frame = shards(tmp_path / "files"), shards(tmp_path / "frame")
    assert files and files == frame
    manifests = [json.loads((tmp_path / out / "dataset.json").read_text())
                 for out in ["files", "frame"]]
    differ = {key for key in manifests[0].keys() | manifests[1].keys()
              if manifests[0].get(key) != manifests[1].get(key)}
    assert differ <= {"source", "created", "run_id"}, differ  # what names the source


def test_a_files_rows_are_named_by_the_file_and_their_line(tmp_path, images):
    rows = write_csvs(tmp_path / "rows", frames(images, files=2, rows=3))
    table = load_table(os.path.join(rows, "*.csv"))
    assert table.rows.index.tolist() == [f"rows-{f:05}.csv[{line}]"
                                         for f in range(2) for line in (2, 3, 4)]
    assert name_rows(table.rows.index[:1]) == "line rows-00000.csv[2]"
    assert table.rows["age"].tolist() == [0, 1, 2, 10, 11, 12]


def test_a_folder_of_csv_files_is_read_as_its_glob(tmp_path, images):
    rows = write_csvs(tmp_path / "rows", frames(images, files=3))
    by_folder = load_table(rows)
    by_glob = load_table(os.path.join(rows, "*.csv"))
    pd.testing.assert_frame_equal(by_folder.rows, by_glob.rows)


def test_jsonl_files_of_plain_columns_read_as_their_csv_files(tmp_path, images):
    parts = frames(images, files=2)
    write_csvs(tmp_path / "csv", parts)
    (tmp_path / "jsonl").mkdir()
    for f, part in enumerate(parts):
        part.to_json(tmp_path / "jsonl" / f"rows-{f:05}.jsonl", orient="records",
                     lines=True)
    from_json = load_table(str(tmp_path / "jsonl"))
    from_csv = load_table(str(tmp_path / "csv" / "*.csv"))
    assert from_json.rows.drop(columns="uri").values.tolist() == \
        from_csv.rows.drop(columns="uri").values.tolist()
    assert from_json.rows.index[0] == "rows-00000.jsonl[1]"


def test_a_glob_of_parquet_files_in_a_bucket_converts(tmp_path, images, gcs_store):
    parts = frames(images, files=3)
    store = gcs_store.fs()
    for f, part in enumerate(parts):
        store.pipe(f"{gcs_store.bucket}/rows/part-{f}.parquet", part.to_parquet())
    store.pipe(f"{gcs_store.bucket}/rows/other/part-9.parquet", parts[0].to_parquet())
    pattern = f"{gcs_store.root}/rows/*.parquet"
    assert table_files(pattern) == [f"{gcs_store.root}/rows/part-{f}.parquet"
                                    for f in range(3)]
    result = tfrecorder.convert(pattern, tmp_path / "out")
    tfrecorder.convert(pd.concat(parts, ignore_index=True), tmp_path / "frame")
    assert result.num_records == 18
    assert shards(tmp_path / "out") == shards(tmp_path / "frame")


# ---- errors ----

@pytest.mark.parametrize(("column", "value", "says"), [
    ("split", "TRAINING-SET", "split"), ("image_uri", "", "image_uri")])
def test_an_error_in_a_file_names_the_file_and_its_line(tmp_path, images, column, value,
                                                        says):
    parts = frames(images)
    parts[3].loc[1, column] = value  # the 4th file's line 3
    rows = write_csvs(tmp_path / "rows", parts)
    with pytest.raises(SchemaError) as raised:
        load_table(os.path.join(rows, "*.csv"))
    message = str(raised.value)
    assert message.startswith("rows-00003.csv: "), message
    assert "line 3" in message and says in message, message
    assert raised.value.column == column
    assert list(raised.value.rows) == [3]


def test_file_table_names_the_file_as_told(tmp_path, images):
    parts = frames(images, files=1)
    parts[0].loc[0, "split"] = "nope"
    path = write_csvs(tmp_path / "rows", parts) + "/rows-00000.csv"
    with pytest.raises(SchemaError, match=r"^part 7 of 9: .*line 2"):
        file_table(path, TableOptions(), name="part 7 of 9")


def test_a_column_of_two_types_is_refused_naming_both_files_and_the_fix(tmp_path, images):
    parts = frames(images, files=3)
    parts[2]["age"] = parts[2]["age"] + 0.5
    rows = write_csvs(tmp_path / "rows", parts)
    with pytest.raises(SchemaError) as raised:
        load_table(os.path.join(rows, "*.csv"))
    message = str(raised.value)
    assert "'age'" in message and "rows-00002.csv" in message and \
        "rows-00000.csv" in message, message
    assert "schema={'age': 'FloatInput'}" in message, message
    fixed = load_table(os.path.join(rows, "*.csv"), schema={"age": "FloatInput"})
    assert fixed.rows["age"].tolist()[-1] == 25.5


def test_integer_labels_beside_text_labels_are_refused_naming_both_files(tmp_path,
                                                                         images):
    parts = frames(images, files=2)
    parts[1]["label"] = [i % 2 for i in range(len(parts[1]))]
    paths = [f"{write_csvs(tmp_path / 'rows', parts)}/rows-{f:05}.csv" for f in range(2)]
    with pytest.raises(SchemaError, match=r"'rows-00001.csv' has integer labels and "
                                          r"'rows-00000.csv' text labels"):
        files_table(paths, TableOptions())


def test_files_of_one_base_name_are_named_by_their_folder(tmp_path, images):
    parts = frames(images, files=2, rows=2)
    for f, part in enumerate(parts):
        os.makedirs(tmp_path / "rows" / f"d{f}")
        part.to_csv(tmp_path / "rows" / f"d{f}" / "part.csv", index=False)
    table = load_table(str(tmp_path / "rows" / "*" / "part.csv"))
    assert table.rows.index.tolist() == ["d0/part.csv[2]", "d0/part.csv[3]",
                                         "d1/part.csv[2]", "d1/part.csv[3]"]


def test_a_jsonl_line_that_is_not_an_object_is_named(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"image_uri": "x.jpg", "label": "a"}\n\n[1, 2]\n')
    (tmp_path / "b.jsonl").write_bytes(b'{"image_uri": "\xff.jpg"}\n')
    for name, line in [("a", 3), ("b", 1)]:
        with pytest.raises(SchemaError, match=rf"^{name}\.jsonl: line {line} of the JSONL "
                                              "file .* is not a JSON object in UTF-8"):
            load_table(str(tmp_path / f"[{name}].jsonl"))  # a glob: the single file is Vertex AI's

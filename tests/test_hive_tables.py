"""CSV and JSONL files in hive partitions (`sources/table_files.py`: `hive_format`,
`folder_table`): one table, its partition columns typed as the same data's Parquet
folder gives them, its errors naming the file and the line."""

import pandas as pd
import pytest
from helpers import write_hive, write_image

from tfrecorder.errors import SchemaError
from tfrecorder.sources import load_table
from tfrecorder.sources.table_files import pipeline_files


@pytest.fixture
def rows(tmp_path):
    """Twelve rows of distinct images, in two years and two splits."""
    images = [write_image(str(tmp_path / "images" / f"{i:02}.jpg"), seed=i, size=(16, 16))
              for i in range(12)]
    return pd.DataFrame({
        "image_uri": images, "label": ["cat", "dog", "emu"] * 4,
        "weight": [i / 4 for i in range(12)],
        "year": [2024, 2023] * 6, "split": ["TRAIN"] * 8 + ["TEST"] * 4})


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_hive_folder_of_csv_or_jsonl_files_reads_as_its_parquet_folder(rows, tmp_path,
                                                                          fmt):
    """Every file's rows in pyarrow's order of the files, then the partition columns,
    typed as the same rows' Parquet folder gives them (`year` a category of numbers)."""
    folder = write_hive(rows, tmp_path / fmt, fmt, ["year", "split"])
    rows.to_parquet(tmp_path / "parquet", partition_cols=["year", "split"])
    table, parquet = load_table(folder), load_table(str(tmp_path / "parquet"))
    assert table.rows.index.tolist() == list(range(12))  # as a Parquet folder's
    shown = ["image_uri", "label", "weight", "year", "split"]
    pd.testing.assert_frame_equal(table.rows[shown].astype(str),
                                  parquet.rows[shown].astype(str))
    assert table.inputs == parquet.inputs
    year = next(column for column in table.inputs if column.name == "year")
    assert (year.kind, year.categories) == ("categorical", ("2023", "2024"))
    assert pipeline_files(folder).format == fmt.upper()


def test_an_error_names_the_file_below_the_folder_and_its_line(rows, tmp_path):
    rows.loc[5, "image_uri"] = ""  # year=2023/split=TRAIN's 3rd row: line 4
    folder = write_hive(rows, tmp_path / "csv", "csv", ["year", "split"])
    with pytest.raises(SchemaError) as raised:
        load_table(folder)
    message = str(raised.value)
    assert message.startswith("year=2023/split=TRAIN/part-00000.csv: "), message
    assert "line 4" in message and list(raised.value.rows) == [4], message


def test_a_hive_folder_of_two_formats_is_refused_naming_both_files(rows, tmp_path):
    folder = write_hive(rows, tmp_path / "mixed", "csv", ["split"])
    rows.head(2).to_json(tmp_path / "mixed" / "split=TEST" / "more.jsonl",
                         orient="records", lines=True)
    with pytest.raises(SchemaError, match="two formats") as raised:
        load_table(folder)
    assert "more.jsonl' (JSONL)" in str(raised.value)
    assert "part-00000.csv' (CSV)" in str(raised.value)

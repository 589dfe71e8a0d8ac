"""The dispatcher of `tfrecorder.sources`: every file format is a module with `claims` and
`read`, asked in the order of `FILE_FORMATS`, so that a new format is one module and one
entry there. (Each format's reading is tested in test_table.py, test_parquet.py,
test_chunked.py and test_image_cells.py.)"""

import types
from pathlib import Path

import pandas as pd
import pytest

from tfrecorder import sources
from tfrecorder.sources import csv, folder, parquet
from tfrecorder.sources.validate import validate


def test_every_file_format_claims_and_reads_and_csv_is_asked_last():
    assert sources.FILE_FORMATS[-1] is csv  # it claims every file
    for module in sources.FILE_FORMATS:
        assert callable(module.claims) and callable(module.read), module.__name__


@pytest.mark.parametrize(("name", "is_folder", "format_"), [
    ("t.csv", False, csv), ("t.txt", False, csv), ("t.parquet", False, parquet),
    ("T.PQ", False, parquet), ("images", True, folder), ("t.parquet", True, parquet)])
def test_the_first_format_that_claims_a_path_reads_it(tmp_path, name, is_folder, format_):
    path = tmp_path / name
    if is_folder:
        (path / "cat").mkdir(parents=True)
    claimed = next(f for f in sources.FILE_FORMATS if f.claims(str(path), is_folder))
    assert claimed is format_


def test_a_new_format_is_one_module_and_one_entry(tmp_path, monkeypatch):
    """A format the dispatcher did not know, added as the docstring says: it is asked
    before CSV, reads its own files, and leaves every other file to the others."""
    def read(path, base_dir, options):
        names = Path(path).read_text().split()
        return validate(pd.DataFrame({"x": range(len(names)), "name": names}),
                        base_dir=base_dir, schema=options.schema, split=options.split)

    words = types.SimpleNamespace(claims=lambda path, is_folder: path.endswith(".words"),
                                  read=read)
    monkeypatch.setattr(sources, "FILE_FORMATS", (words, *sources.FILE_FORMATS))
    (tmp_path / "a.words").write_text("cat dog")
    (tmp_path / "a.csv").write_text("x\n1\n")
    table = sources.load_table(str(tmp_path / "a.words"), split="train")
    assert table.rows["name"].tolist() == ["cat", "dog"]
    assert table.rows["split"].tolist() == ["train", "train"]
    assert sources.load_table(str(tmp_path / "a.csv"), header=True).rows["x"].tolist() == [1]


def test_a_missing_path_is_named_as_the_format_its_name_says(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such Parquet file or folder"):
        sources.load_table(str(tmp_path / "gone.parquet"))
    with pytest.raises(FileNotFoundError, match="no such CSV file or image folder"):
        sources.load_table(str(tmp_path / "gone.csv"))

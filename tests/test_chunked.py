"""Sources read in chunks (`chunk_rows`, `tfrecorder.sources.chunked`): the same dataset, byte for
byte, as the whole file read at once, from CSV and Parquet files of every column kind;
the table memory-mapped from files that are already gone; type changes between chunks
refused with the way out.

Each case compares every file of the two datasets (shards, manifest, rejected-rows
report); the whole-file conversions are themselves checked against TensorFlow elsewhere,
and here too by reading records back."""

import contextlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import LABELS
from helpers import (
    _wait,
    assert_one_error_line,
    dataset_folder_files,
    read_split,
    run_cli,
    write_image,
)
from test_parquet import relative_images, write_parts
from test_remote import upload_folder
from test_schema import records

import tfrecorder
from tfrecorder import SchemaError
from tfrecorder.sources import chunked, load_table


def dataset_files(folder) -> dict[str, bytes]:
    return {name: Path(folder, name).read_bytes() for name in dataset_folder_files(folder)}


def assert_same_datasets(source, tmp_path, chunk_rows: int, **options) -> Path:
    """Converts `source` whole and in chunks; every file of the two datasets is equal."""
    whole, chunks = tmp_path / "whole", tmp_path / "chunks"
    tfrecorder.convert(str(source), str(whole), progress=False, **options)
    tfrecorder.convert(str(source), str(chunks), progress=False, chunk_rows=chunk_rows,
                       **options)
    assert dataset_files(chunks) == dataset_files(whole)
    return chunks


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """TMPDIR for this test, where the chunks are set aside."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    return folder


def structured_table(rows: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "split": rng.choice(["TRAIN", "VALIDATION", "TEST", "UNASSIGNED", ""], rows),
        "key": [f"row {i}, \"quoted\"\nand broken" if i % 7 == 0 else f"r{i}"
                for i in range(rows)],
        "price": rng.normal(size=rows).round(3),
        "count": rng.integers(-5, 10**12, rows),
        "label": rng.choice(LABELS, rows),
    })


@pytest.mark.parametrize("chunk_rows", [1, 37, 10_000])
def test_a_csv_with_a_header_converts_to_the_same_bytes_in_chunks(tmp_path, scratch,
                                                                    chunk_rows):
    csv = tmp_path / "table.csv"
    structured_table().to_csv(csv, index=False)
    out = assert_same_datasets(csv, tmp_path, chunk_rows)
    found = records(out)
    assert len(found) == 500 and found["r1"]["count"] == [
        int(structured_table()["count"][1])]
    assert os.listdir(scratch) == []  # nothing left behind


def test_an_automl_csv_of_images_converts_to_the_same_bytes_and_report(image_table,
                                                                       tmp_path, scratch):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a JPEG")
    table = pd.concat([image_table, pd.DataFrame(
        {"split": ["TRAIN"], "image_uri": [str(broken)], "label": ["dog"]})],
        ignore_index=True)
    csv = tmp_path / "automl.csv"
    table.to_csv(csv, index=False, header=False)
    out = assert_same_datasets(csv, tmp_path, chunk_rows=5)
    assert "broken.jpg" in (out / "rejected.csv").read_text()
    train = read_split(out, "train")
    assert len(train) == tfrecorder.info(str(out)).splits["train"].num_records > 0


def test_automl_multi_label_rows_convert_alike_in_chunks(image_table, tmp_path, scratch):
    lines = [f"{split},{uri},{label}" + (",dog" if i % 3 else "")
             for i, (split, uri, label) in enumerate(image_table.itertuples(index=False))]
    csv = tmp_path / "multi.csv"
    csv.write_text("\n".join(lines) + "\n")
    assert_same_datasets(csv, tmp_path, chunk_rows=4)


@pytest.fixture
def parquet_table() -> pd.DataFrame:
    """Every column kind Parquet keeps: ints, floats, text, a categorical whose row
    groups hold different categories, lists of 4 floats and of ints, integer labels, and
    an index of its own."""
    rows = 300
    rng = np.random.default_rng(1)
    colour = pd.Categorical(["red"] * 100 + list(rng.choice(["blue", "green", "red"], 200)),
                            categories=["red", "green", "blue"])
    return pd.DataFrame({
        "key": [f"k{i}" for i in range(rows)],
        "x": rng.normal(size=rows),
        "n": rng.integers(0, 100, rows),
        "colour": colour,
        "box": list(rng.normal(size=(rows, 4))),
        "ids": [list(range(i % 5)) for i in range(rows)],
        "label": rng.integers(0, 7, rows),
    }, index=pd.Index(np.arange(rows) * 3 + 1000, name="row"))


def test_a_parquet_file_converts_to_the_same_bytes_in_chunks(parquet_table, tmp_path,
                                                             scratch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "table.parquet"
    # Written in two parts whose categoricals differ (as appended files do): the first
    # holds "red" only, the second green, blue and red, in that order.
    first = parquet_table.iloc[:100].assign(
        colour=lambda t: t.colour.cat.remove_unused_categories())
    second = parquet_table.iloc[100:].assign(
        colour=lambda t: t.colour.cat.reorder_categories(["green", "blue", "red"]))
    schema = pa.Schema.from_pandas(first)
    with pq.ParquetWriter(path, schema) as writer:
        for part in (first, second):
            writer.write_table(pa.Table.from_pandas(part, schema=schema), row_group_size=64)
    assert pd.read_parquet(path).colour.cat.categories.tolist() == ["red", "green", "blue"]
    out = assert_same_datasets(path, tmp_path, chunk_rows=50)
    found = records(out)
    assert found["k7"]["box"] == pytest.approx(parquet_table["box"].iat[7].tolist(), 1e-6)
    assert found["k7"]["ids"] == parquet_table["ids"].iat[7]


def test_a_folder_of_parquet_parts_converts_to_the_same_bytes_in_chunks(
        parquet_table, tmp_path, scratch):
    folder = write_parts(parquet_table.reset_index(drop=True), tmp_path / "parts", parts=4)
    assert_same_datasets(folder, tmp_path, chunk_rows=70)


def test_a_resumed_chunked_run_finishes_the_dataset(image_table, tmp_path, scratch):
    late = tmp_path / "late.jpg"
    late.write_bytes(b"not yet an image")
    table = pd.concat([image_table, pd.DataFrame(
        {"split": ["TEST"], "image_uri": [str(late)], "label": ["cat"]})], ignore_index=True)
    csv = tmp_path / "table.csv"
    table.to_csv(csv, index=False)
    out, clean = tmp_path / "out", tmp_path / "clean"
    with pytest.raises(tfrecorder.ImageError):
        tfrecorder.convert(str(csv), str(out), on_error="raise", resume=True, chunk_rows=6,
                           progress=False)
    write_image(late, seed=5)
    tfrecorder.convert(str(csv), str(out), resume=True, chunk_rows=6, progress=False)
    tfrecorder.convert(str(csv), str(clean), progress=False)
    assert dataset_files(out) == dataset_files(clean)


def test_the_beam_engine_writes_a_chunked_table_alike(image_table, tmp_path, scratch):
    csv = tmp_path / "table.csv"
    image_table.to_csv(csv, index=False)
    assert_same_datasets(csv, tmp_path, chunk_rows=7, runner="DirectRunner")


def test_the_table_is_mapped_from_files_already_unlinked(tmp_path, scratch):
    csv = tmp_path / "table.csv"
    structured_table(rows=2000).to_csv(csv, index=False)
    table = load_table(str(csv), chunk_rows=300)
    with open("/proc/self/maps") as maps:
        mapped = [line for line in maps if str(scratch) in line]
    assert mapped and all(line.rstrip().endswith("(deleted)") for line in mapped)
    assert os.listdir(scratch) == []
    assert table.rows["count"].dtype == np.int64 and table.rows["price"].dtype == np.float64
    whole = load_table(str(csv))
    assert table.rows.index.equals(whole.rows.index)  # each record's line
    pd.testing.assert_frame_equal(table.rows.astype(object), whole.rows.astype(object),
                                  check_dtype=False, check_categorical=False)
    assert (table.value_hashes == whole.value_hashes).all()


def test_a_column_whose_type_changes_after_the_first_chunk_is_named(tmp_path, scratch):
    csv = tmp_path / "table.csv"
    table = structured_table(rows=100).assign(code=[str(i) for i in range(99)] + ["A7"])
    table.to_csv(csv, index=False)
    tfrecorder.convert(str(csv), str(tmp_path / "whole"), progress=False)  # text, whole
    with pytest.raises(SchemaError, match="code") as caught:
        tfrecorder.convert(str(csv), str(tmp_path / "out"), chunk_rows=40, progress=False)
    message, line = str(caught.value), load_table(str(csv)).rows.index[-1]
    assert "'A7'" in message and f"line {line} " in message  # the value and its line
    assert "chunks" in message and "schema" in message and "IntegerInput" in message
    assert caught.value.column == "code" and caught.value.rows == [line]
    assert not (tmp_path / "out").exists() and os.listdir(scratch) == []
    # The way out it names: declare the column.
    assert_same_datasets(csv, tmp_path / "declared", chunk_rows=40,
                         schema={"code": "StringInput"})
    # On the command line, the same advice as flags.
    line = assert_one_error_line(run_cli("convert", str(csv), str(tmp_path / "cli"),
                                         "--chunk-rows", "40"), "'A7'", "chunks")
    assert "--schema code=StringInput" in line and "--chunk-rows" in line
    assert "schema=" not in line.replace("--schema code=StringInput", "")


def test_a_large_source_is_read_in_chunks_by_default(tmp_path, scratch, monkeypatch,
                                                      caplog):
    csv = tmp_path / "table.csv"
    structured_table().to_csv(csv, index=False)
    whole = tmp_path / "whole"
    tfrecorder.convert(str(csv), str(whole), progress=False)
    assert "in chunks" not in caplog.text
    monkeypatch.setattr(chunked, "_AUTO_SHARE", 1e-12)
    monkeypatch.setattr(chunked, "DEFAULT_CHUNK_ROWS", 64)
    with caplog.at_level(logging.INFO, logger="tfrecorder.sources.chunked"):
        tfrecorder.convert(str(csv), str(tmp_path / "auto"), progress=False)
    assert "in chunks of 64 rows" in caplog.text
    assert dataset_files(tmp_path / "auto") == dataset_files(whole)


def test_the_command_line_takes_chunk_rows(tmp_path, scratch):
    csv = tmp_path / "table.csv"
    structured_table(rows=50).to_csv(csv, index=False)
    done = run_cli("convert", str(csv), str(tmp_path / "cli"), "--chunk-rows", "9")
    assert done.returncode == 0, done.stderr
    tfrecorder.convert(str(csv), str(tmp_path / "whole"), progress=False)
    assert dataset_files(tmp_path / "cli") == dataset_files(tmp_path / "whole")
    bad = run_cli("convert", str(csv), str(tmp_path / "bad"), "--chunk-rows", "0")
    assert bad.returncode != 0 and "chunk" in bad.stderr


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_source_in_a_bucket_is_read_in_chunks_as_a_stream(gcs_store, image_table,
                                                            tmp_path, scratch, kind):
    """A CSV or Parquet file on the GCS emulator, its images beside it: chunks of 5 rows
    give the local whole file's dataset."""
    src = tmp_path / "src"
    table = relative_images(image_table, src)
    source = src / f"table.{kind}"
    if kind == "csv":
        table.to_csv(source, index=False)
    else:
        table.to_parquet(source)
    upload_folder(gcs_store, src, f"{gcs_store.root}/chunked-{kind}")
    local, out = tmp_path / "local", tmp_path / "out"
    tfrecorder.convert(str(source), str(local), progress=False)
    tfrecorder.convert(f"{gcs_store.root}/chunked-{kind}/table.{kind}", str(out),
                       chunk_rows=5, progress=False)
    assert dataset_files(out) == dataset_files(local)
    assert len(read_split(out, "train")) == tfrecorder.info(str(out)).splits[
        "train"].num_records


def test_rows_are_read_from_arrow_chunks_in_the_order_asked():
    """`rows_at` (the report's rows, the size sample) and `ArrowColumn` (what workers
    read) take rows chunk by chunk and give them back in the order asked, as iloc does."""
    import pyarrow as pa

    from tfrecorder.sources.table import ArrowColumn, rows_at

    text = pa.chunked_array([pa.array(["a", "b", "c"], pa.large_string()), pa.array(
        [], pa.large_string()), pa.array(["d", "e"], pa.large_string())])
    lists = pa.chunked_array([pa.array([[1.0], [2.0, 3.0]]), pa.array([[4.0], [], [5.0]])])
    frame = pd.DataFrame({
        "text": pd.arrays.ArrowStringArray(text, dtype=pd.StringDtype("pyarrow", np.nan)),
        "number": [10, 11, 12, 13, 14],
        "lists": pd.arrays.ArrowExtensionArray(lists),
    }, index=[7, 3, 9, 1, 5])
    positions = [4, 0, 3, 3, 1, 2]
    found = rows_at(frame, positions)
    expected = frame.iloc[positions]
    pd.testing.assert_frame_equal(found, expected)
    assert ArrowColumn.of(frame["text"]).take(np.array(positions)).to_pylist() == list("eaddbc")
    assert ArrowColumn.of(frame["text"]).take(np.array([], np.int64)).to_pylist() == []


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_an_error_in_a_later_chunk_names_the_row_the_whole_file_names(tmp_path, scratch,
                                                                       kind):
    table = structured_table(rows=300)
    table.loc[250, "price"] = np.nan
    source = tmp_path / f"table.{kind}"
    if kind == "csv":
        table.to_csv(source, index=False)
    else:
        table.to_parquet(source)
    with pytest.raises(SchemaError, match="missing values") as whole:
        load_table(str(source))
    with pytest.raises(SchemaError, match="missing values") as chunks:
        load_table(str(source), chunk_rows=100)
    assert chunks.value.rows == whole.value.rows and chunks.value.column == "price"
    word = "line" if kind == "csv" else "row"  # a CSV file's line, a Parquet row number
    assert f"{word} {whole.value.rows[0]}." in str(chunks.value)
    assert os.listdir(scratch) == []


def _scratch_fds(pid: int, scratch: Path) -> list[str]:
    """Where the open files of process `pid` in `scratch` point."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith(str(scratch)):
                found.append(target)
    return found


def test_a_run_killed_while_it_sets_chunks_aside_leaves_nothing_in_tmpdir(tmp_path, scratch):
    """SIGKILL in the middle of the first pass, with the scratch files open: they have
    no name, so TMPDIR is as it was, and no dataset appears."""
    csv = tmp_path / "table.csv"
    structured_table(rows=400_000).to_csv(csv, index=False)
    out = tmp_path / "out"
    code = ("import sys, tfrecorder; tfrecorder.convert(sys.argv[1], sys.argv[2], "
            "chunk_rows=10_000, progress=False)")
    process = subprocess.Popen([sys.executable, "-c", code, str(csv), str(out)],
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(scratch)})
    try:
        _wait(process, lambda: _scratch_fds(process.pid, scratch), 120)
        assert all(target.endswith("(deleted)") for target in _scratch_fds(process.pid,
                                                                           scratch))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert os.listdir(scratch) == []
    assert not (out / "dataset.json").exists()

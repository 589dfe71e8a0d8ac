"""Parquet sources: a file or a folder of part files, local or in a bucket, read with its
column types and converted exactly as the same DataFrame is.

Records are read back with TensorFlow (`read_split`, `records`), independently of
tfrecorder's reader, and compared with the source images and values."""

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import LABELS
from helpers import assert_one_error_line, pixels, read_manifest, read_split, run_cli, shard_bytes
from test_remote import upload_folder
from test_schema import records

import tfrecorder
from tfrecorder import SchemaError
from tfrecorder.errors import OptionError
from tfrecorder.sources import load_table

SPLITS = ("train", "validation", "test")


def relative_images(image_table: pd.DataFrame, folder: Path, prefix: str = "") -> pd.DataFrame:
    """The table with its images copied into `folder/images/<label>/`, named `prefix` +
    `images/<label>/<file>`: relative to where the Parquet file will be."""
    uris = []
    for source, label in zip(image_table["image_uri"], image_table["label"]):
        relative = f"images/{label}/{os.path.basename(source)}"
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, folder / relative)
        uris.append(prefix + relative)
    return image_table.assign(image_uri=uris)


def write_parts(table: pd.DataFrame, folder: Path, parts: int = 3) -> Path:
    """`table` as a Spark-like dataset folder: part files, `_SUCCESS` and `.crc` files."""
    folder.mkdir(parents=True)
    for part, rows in enumerate(np.array_split(np.arange(len(table)), parts)):
        name = f"part-{part:05d}-1f2e.snappy.parquet"
        table.iloc[rows].to_parquet(folder / name, index=False)
        (folder / f".{name}.crc").write_bytes(b"crc")
    (folder / "_SUCCESS").write_bytes(b"")
    return folder


def assert_pixels_and_labels(out, base: Path, count: int) -> None:
    """Every record's pixels are its source file's (its path relative to `base`)."""
    vocabulary = read_manifest(out)["labels"]["vocabulary"]
    assert vocabulary == sorted(LABELS)
    found = 0
    for split in SPLITS:
        for record in read_split(out, split):
            source = base / record["image_uri"].decode()
            np.testing.assert_array_equal(record["pixels"], pixels(source))
            assert vocabulary[record["label"]] == source.parent.name
            found += 1
    assert found == count


@pytest.fixture
def image_parquet(image_table, tmp_path) -> Path:
    """`src/table.parquet`: split, image_uri relative to `src/`, label; images in
    `src/images/<label>/`."""
    src = tmp_path / "src"
    path = src / "table.parquet"
    relative_images(image_table, src).to_parquet(path, index=False)
    return path


def test_a_parquet_table_of_images_reads_paths_relative_to_its_folder(image_parquet, tmp_path):
    out = tmp_path / "out"
    result = tfrecorder.convert(str(image_parquet), str(out), num_shards=2, progress=False)

    assert result.num_records == 24 and result.num_rejected == 0
    assert_pixels_and_labels(out, image_parquet.parent, 24)
    # The same rows as a CSV beside it: the same records, byte for byte.
    csv = image_parquet.with_suffix(".csv")
    pd.read_parquet(image_parquet).to_csv(csv, index=False)
    tfrecorder.convert(str(csv), str(tmp_path / "from_csv"), num_shards=2, progress=False)
    assert shard_bytes(out) == shard_bytes(tmp_path / "from_csv")


def structured(n: int = 40) -> pd.DataFrame:
    """A table without images: int, float, text, categorical and list-of-4-floats."""
    rng = np.random.RandomState(0)
    return pd.DataFrame({
        "key": [f"row-{i}" for i in range(n)],
        "count": rng.randint(-2**40, 2**40, n, dtype=np.int64),
        "ratio": rng.randn(n),
        "color": pd.Categorical(rng.choice(["red", "blue"], n),
                                categories=["red", "green", "blue"]),  # not sorted
        "box": [rng.rand(4).tolist() for _ in range(n)],
    })


def test_a_table_without_images_keeps_its_types_and_converts_as_its_dataframe(tmp_path):
    table = structured()
    path = tmp_path / "table.PQ"  # either extension, any case
    table.to_parquet(path, index=False)
    from_frame, from_parquet = tmp_path / "frame", tmp_path / "parquet"
    tfrecorder.convert(table, from_frame, num_shards=2, progress=False)

    result = tfrecorder.convert(str(path), from_parquet, num_shards=2, progress=False)

    assert result.num_records == len(table) and result.num_rejected == 0
    assert shard_bytes(from_parquet) == shard_bytes(from_frame)
    manifest = read_manifest(from_parquet)
    assert manifest["features"] == read_manifest(from_frame)["features"]
    features = manifest["features"]
    assert {name: features[name]["dtype"] for name in table.columns} == {
        "key": "string", "count": "int64", "ratio": "float32", "color": "int64",
        "box": "float32"}
    assert features["color"]["vocabulary"] == ["red", "green", "blue"]
    found = records(from_parquet)
    for row in table.to_dict("records"):
        record = found[row["key"]]
        assert record["count"] == [row["count"]]
        assert record["ratio"] == [np.float32(row["ratio"])]
        assert record["color"] == [["red", "green", "blue"].index(row["color"])]
        assert record["box"] == [np.float32(v) for v in row["box"]]


def test_parquet_cells_arrive_as_their_dtypes(tmp_path):
    """Ints stay ints, a list column holds arrays, a dictionary column is Categorical."""
    path = tmp_path / "table.parquet"
    structured(6).to_parquet(path, index=False)
    table = load_table(str(path))
    assert isinstance(table.source["color"].dtype, pd.CategoricalDtype)
    assert table.source["count"].dtype == np.int64
    assert isinstance(table.source["box"].iloc[0], np.ndarray)
    kinds = {column.name: (column.kind, column.shape) for column in table.inputs}
    assert kinds == {"key": ("string", ()), "count": ("int64", ()), "ratio": ("float32", ()),
                     "color": ("categorical", ()), "box": ("float32", (None,))}
    assert table.base_dir == str(tmp_path)


@pytest.mark.parametrize("chunk_rows", [None, 5])
def test_a_folder_of_hive_partitions_is_one_table(image_table, tmp_path, monkeypatch,
                                                  chunk_rows):
    """`split=TRAIN/part.parquet` folders (df.to_parquet(partition_cols=), Spark): the
    partition column is read back as a column, whole or in chunks, as pandas reads it."""
    table = relative_images(image_table, tmp_path / "src", prefix="../")
    folder = tmp_path / "src" / "by_split"
    table.to_parquet(folder, partition_cols=["split"])
    assert not [p for p in folder.iterdir() if p.is_file()]  # only split=... folders
    out = tmp_path / "out"

    result = tfrecorder.convert(str(folder), str(out), num_shards=2, progress=False,
                                chunk_rows=chunk_rows)

    assert result.num_records == 24 and result.num_rejected == 0
    assert_pixels_and_labels(out, folder, 24)
    monkeypatch.chdir(folder)
    tfrecorder.convert(pd.read_parquet(folder), str(tmp_path / "frame"), num_shards=2,
                       progress=False)
    assert shard_bytes(out) == shard_bytes(tmp_path / "frame")


@pytest.mark.parametrize("name", ["parts", "table.parquet"])  # Spark names its folders so
def test_a_folder_of_part_files_is_one_table(image_table, tmp_path, monkeypatch, name):
    """Parts in path order, hidden and `_` files skipped, image paths relative to the
    folder: the same bytes as the DataFrame with paths relative to the working folder."""
    table = relative_images(image_table, tmp_path / "src", prefix="../")
    folder = write_parts(table, tmp_path / "src" / name)
    out = tmp_path / "out"

    result = tfrecorder.convert(str(folder), str(out), num_shards=2, progress=False)

    assert result.num_records == 24 and result.num_rejected == 0
    assert_pixels_and_labels(out, folder, 24)
    monkeypatch.chdir(folder)
    tfrecorder.convert(table, str(tmp_path / "frame"), num_shards=2, progress=False)
    assert shard_bytes(out) == shard_bytes(tmp_path / "frame")


@pytest.mark.parametrize("kind", ["file", "folder", "hive"])
def test_a_parquet_source_in_a_bucket(gcs_store, image_table, tmp_path, kind):
    """A Parquet file (or part files, or hive partitions) on the GCS emulator, its images
    beside it named relative to it: the same records as converting the local copy."""
    src = tmp_path / "src"
    table = relative_images(image_table, src, prefix="" if kind == "file" else "../")
    source = src / "table.parquet"
    if kind == "file":
        table.to_parquet(source, index=False)
    elif kind == "folder":
        write_parts(table, src / "parts")
        source = src / "parts"
    else:
        source = src / "by_split"
        table.to_parquet(source, partition_cols=["split"])
    prefix = f"{gcs_store.root}/parquet-{kind}"
    upload_folder(gcs_store, src, f"{prefix}/src")
    local = tmp_path / "local"
    tfrecorder.convert(str(source), str(local), num_shards=2, progress=False)

    remote = f"{prefix}/src/{source.relative_to(src).as_posix()}"
    out = tmp_path / "out"
    result = tfrecorder.convert(remote, str(out), num_shards=2, progress=False)

    assert result.num_records == 24 and result.num_rejected == 0
    assert shard_bytes(out) == shard_bytes(local)
    assert_pixels_and_labels(out, src if kind == "file" else source, 24)


def test_an_unreadable_parquet_file_in_a_bucket_is_a_schema_error(gcs_store, tmp_path):
    """pyarrow's verdict on the data is the user's to fix, not the store's to retry."""
    uri = gcs_store.upload_bytes(b"image_uri,label\n", f"{gcs_store.root}/parquet-bad/t.pq")
    with pytest.raises(SchemaError, match="magic bytes") as caught:
        tfrecorder.convert(uri, str(tmp_path / "out"), progress=False)
    assert uri in str(caught.value) and not isinstance(caught.value, OSError)
    with pytest.raises(FileNotFoundError, match="no such Parquet file"):
        load_table(f"{gcs_store.root}/parquet-bad/absent.parquet")


@pytest.mark.parametrize("damage", ["not parquet", "cut short"])
def test_an_unreadable_parquet_file_is_a_schema_error_naming_it(tmp_path, damage):
    path = tmp_path / "bad.parquet"
    structured(10).to_parquet(path, index=False)
    data = path.read_bytes()
    path.write_bytes(b"split,image_uri\n" if damage == "not parquet" else data[:len(data) // 2])

    with pytest.raises(SchemaError, match="Parquet") as caught:
        tfrecorder.convert(str(path), str(tmp_path / "out"), progress=False)

    assert str(path) in str(caught.value) and "magic bytes" in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("header", [True, False])
def test_header_is_refused_for_parquet(tmp_path, header):
    path = tmp_path / "table.parquet"
    structured(10).to_parquet(path, index=False)

    with pytest.raises(OptionError, match="Parquet.*header=.*CSV") as caught:
        tfrecorder.convert(str(path), str(tmp_path / "out"), header=header, progress=False)

    assert caught.value.option == "header"
    assert not (tmp_path / "out").exists()


def test_parquet_files_beside_other_files_are_neither_a_dataset_nor_an_image_folder(
        image_parquet):
    folder = image_parquet.parent  # table.parquet beside images/
    with pytest.raises(SchemaError, match="neither a Parquet dataset nor an image folder"):
        load_table(str(folder))


def test_a_missing_parquet_file_is_named_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such Parquet file"):
        load_table(str(tmp_path / "absent.parquet"))


def test_the_command_line_converts_a_parquet_file(image_parquet, tmp_path, gcs_store):
    out = tmp_path / "out"
    process = run_cli("convert", image_parquet, out, "--num-shards", "2", "--no-progress")

    assert process.returncode == 0, process.stderr
    assert f"Converted {image_parquet} into {out}" in process.stdout
    assert_pixels_and_labels(out, image_parquet.parent, 24)
    tfrecorder.convert(str(image_parquet), str(tmp_path / "python"), num_shards=2,
                       progress=False)
    assert shard_bytes(out) == shard_bytes(tmp_path / "python")
    # From a bucket, with only the dataset's warnings on stderr (gcsfs's read-ahead once
    # left "Task was destroyed but it is pending!" there).
    upload_folder(gcs_store, image_parquet.parent, f"{gcs_store.root}/parquet-cli")
    remote = run_cli("convert", f"{gcs_store.root}/parquet-cli/table.parquet",
                     tmp_path / "remote", "--num-shards", "2", "--no-progress")
    assert remote.returncode == 0, remote.stderr
    assert all(line.startswith("tfrecorder: warning: ")
               for line in remote.stderr.splitlines()), remote.stderr
    assert shard_bytes(tmp_path / "remote") == shard_bytes(out)
    refused = run_cli("convert", image_parquet, tmp_path / "refused", "--no-header")
    assert_one_error_line(refused, "Parquet", "--no-header", "--header")
    assert "Parquet" in run_cli("convert", "--help").stdout

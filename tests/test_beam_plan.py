"""A source of many table files on a Beam runner: the pipeline reads and plans it (the
launcher lists the files only), and writes the local engine's dataset, byte for byte."""

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from beam_workers import free_port, serve, stop, wait_for
from helpers import write_hive
from PIL import Image

import tfrecorder
from tfrecorder.errors import OptionError, SchemaError, TooManyRejectedError

FILES = 20
# The 100,000 rows take 13 minutes here (the emulator serves ~1,000 images a
# second): the suite runs 1,000; `TFRECORDER_BEAM_PLAN_ROWS=100000` runs them all.
ROWS = int(os.environ.get("TFRECORDER_BEAM_PLAN_ROWS", 1_000))
IMAGES = 400  # distinct images in the bucket; rows name them in turn
DIRECT = {"runner": "DirectRunner",
          "beam_options": {"direct_running_mode": "multi_processing", "direct_num_workers": 2}}
# For tests whose outcome the plan's rules decide whatever the runner: the DirectRunner in
# this process starts in seconds. Tests of bytes, errors, rejections, gzip, hosts and the
# finish step run on workers of their own (`beam_workers.external_workers`).
IN_PROCESS = {"runner": "DirectRunner"}


@pytest.fixture(scope="module")
def bucket_images(gcs_store, tmp_path_factory) -> list[str]:
    """IMAGES small PNGs and JPEGs in the emulator's bucket, and one missing object."""
    folder = tmp_path_factory.mktemp("plan-images")
    rng = np.random.default_rng(42)
    uris = []
    for i in range(IMAGES):
        pixels = rng.integers(0, 255, (8 + i % 5, 8, 3), dtype=np.uint8)
        data = io.BytesIO()
        Image.fromarray(pixels).save(data, "PNG" if i % 2 else "JPEG")
        path = folder / f"{i:04d}.{'png' if i % 2 else 'jpg'}"
        path.write_bytes(data.getvalue())
        uris.append(gcs_store.upload(path, f"{gcs_store.root}/plan/{path.name}"))
    return uris


def rows_table(uris: list[str], num_rows: int) -> pd.DataFrame:
    """Rows of every kind of split, text labels, a number and a category; one row names
    a missing object (rejected), and images repeat (the duplicates report)."""
    n = np.arange(num_rows)
    image_uris = [uris[i % len(uris)] for i in range(num_rows)]
    image_uris[num_rows // 3] = uris[0].rsplit("/", 1)[0] + "/missing.png"
    return pd.DataFrame({
        "split": np.array(["TRAIN", "VALIDATION", "TEST", "UNASSIGNED"])[n * 7 % 4],
        "image_uri": image_uris,
        "label": np.array(["cat", "dog", "emu", "fox", "gnu"])[n * 3 % 5],
        "weight": (n * 37 % 101) / 10,
        "colour": np.array(["red", "green", "blue"])[n % 3],
    })


def write_parts(table: pd.DataFrame, folder: Path, fmt: str, parts: int = FILES) -> str:
    """The table in `parts` files of `fmt` in `folder`; their glob."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, part in enumerate(np.array_split(np.arange(len(table)), parts)):
        rows = table.iloc[part]
        path = folder / f"part-{index:05d}.{fmt}"
        if fmt == "csv":
            rows.to_csv(path, index=False)
        elif fmt == "jsonl":
            rows.to_json(path, orient="records", lines=True)
        else:
            rows.reset_index(drop=True).to_parquet(path)
    return str(folder / f"*.{fmt}")


def dataset(folder) -> dict[str, bytes]:
    """Every file of a dataset folder, by its path in it."""
    root = Path(folder)
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module", params=["parquet", "csv"])
def source(request, bucket_images, tmp_path_factory):
    """(format, glob of FILES files of ROWS rows, the local engine's dataset of it)."""
    root = tmp_path_factory.mktemp(f"plan-{request.param}")
    pattern = write_parts(rows_table(bucket_images, ROWS), root / "rows", request.param)
    local = root / "local"
    tfrecorder.convert(pattern, str(local), progress=False, num_workers=2)
    return request.param, pattern, dataset(local)


@pytest.mark.parametrize("engine", ["direct", "external"])
def test_the_pipeline_writes_the_local_engines_bytes(source, engine, tmp_path,
                                                     external_workers):
    fmt, pattern, local = source
    if engine == "external" and fmt == "csv":
        pytest.skip("one format is enough for the second runner")
    engine = DIRECT if engine == "direct" else external_workers
    out = tmp_path / "beam"
    result = tfrecorder.convert(pattern, str(out), progress=False, **engine)
    written = dataset(out)
    assert written.keys() == local.keys()
    assert [name for name in written if written[name] != local[name]] == []
    assert result.num_records == ROWS - 1 and result.num_rejected == 1
    tfrecorder.verify(str(out))


def test_table_errors_in_the_15th_file_stop_the_job_before_any_image_is_read(
        bucket_images, gcs_store, tmp_path, external_workers):
    table = rows_table(bucket_images, 400)
    pattern = write_parts(table, tmp_path / "rows", "csv")
    bad = tmp_path / "rows" / "part-00014.csv"
    lines = bad.read_text().splitlines()
    lines[6] = lines[6].replace(lines[6].split(",")[0], "TRIAN", 1)  # line 7 of the file
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError) as local:
        tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False)
    gcs_store.reset_stats()
    with pytest.raises(SchemaError) as job:
        tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False,
                           **external_workers)
    assert "part-00014.csv" in str(job.value) and "line 7" in str(job.value)
    assert "TRIAN" in str(job.value)
    assert str(job.value) == str(local.value)
    reads = [line for line in gcs_store.stats()["log"] if line.startswith("GET")]
    assert reads == []  # not one image was read
    assert not (tmp_path / "beam" / "dataset.json").exists()
    assert [p for p in (tmp_path / "beam").rglob("*") if p.is_file()] == []


def test_options_the_pipeline_cannot_honour_are_refused_at_submit(bucket_images, tmp_path):
    pattern = write_parts(rows_table(bucket_images, 40), tmp_path / "rows", "parquet", 2)
    for options, said in (({"stratify": True}, "stratify=True ranks every UNASSIGNED row"),
                          ({"resume": True}, "resume=True checks the interrupted run")):
        with pytest.raises(OptionError, match=said):
            tfrecorder.convert(pattern, str(tmp_path / "out"), progress=False,
                               **options, **IN_PROCESS)
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options,rows,files", [
    ({"duplicates": "drop", "num_shards": 3}, 600, 5),
    ({"hosts": 4, "shard_size_mb": 0.001}, 600, 5),  # sized by the sample, rounded up
    ({"num_shards": {"train": 7, "validation": 2, "test": 150}}, 600, 5),  # empty shards
    ({"unassigned_split": (0.5, 0.25, 0.25), "seed": 7, "compression": "gzip"}, 600, 5),
    ({"shard_size_mb": 0.002}, 60, 20),  # files of fewer rows than the size sample
], ids=["drop", "hosts", "empty-shards", "fractions-seed-gzip", "tiny-files"])
def test_options_give_the_local_engines_bytes(bucket_images, tmp_path, options, rows, files,
                                              external_workers):
    pattern = write_parts(rows_table(bucket_images, rows), tmp_path / "rows", "parquet",
                          files)
    tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False, **options)
    tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False, **options,
                       **external_workers)
    local, written = dataset(tmp_path / "local"), dataset(tmp_path / "beam")
    assert written.keys() == local.keys()
    assert [name for name in written if written[name] != local[name]] == []


def test_json_lines_files_too(bucket_images, tmp_path):
    pattern = write_parts(rows_table(bucket_images, 300), tmp_path / "rows", "jsonl", 4)
    tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False)
    tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False, **IN_PROCESS)
    assert dataset(tmp_path / "beam") == dataset(tmp_path / "local")


def test_too_many_rejected_rows_fail_the_job_as_they_fail_a_local_run(bucket_images,
                                                                       tmp_path,
                                                                       external_workers):
    table = rows_table(bucket_images, 60)
    table.loc[::3, "image_uri"] = bucket_images[0].rsplit("/", 1)[0] + "/gone.png"
    pattern = write_parts(table, tmp_path / "rows", "csv", 3)
    with pytest.raises(TooManyRejectedError) as local:
        tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False,
                           max_rejected=0.1)
    with pytest.raises(TooManyRejectedError) as job:
        tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False,
                           max_rejected=0.1, **external_workers)
    # The local engine stops as soon as it is sure; the job counts at its finish step.
    assert job.value.num_rejected == 21 and 7 <= local.value.num_rejected <= 21
    assert job.value.num_rows == local.value.num_rows == 60
    assert str(job.value).split(" rows were rejected")[1].split("Most common")[0] == \
        str(local.value).split(" rows were rejected")[1].split("Most common")[0]
    assert [p for p in (tmp_path / "beam").rglob("*") if p.is_file()] == []


LAUNCHER = """
import sys, tfrecorder
tfrecorder.convert(sys.argv[1], sys.argv[2], runner="PortableRunner", progress=False,
                   wait=False, beam_options={"job_endpoint": sys.argv[3],
                   "environment_type": "EXTERNAL", "environment_config": sys.argv[4]})
print("submitted", flush=True)
import time; time.sleep(600)  # killed here
"""


def test_a_job_whose_launcher_is_killed_after_submitting_leaves_a_whole_dataset(
        bucket_images, tmp_path):
    table = rows_table(bucket_images, 300)
    pattern = write_parts(table, tmp_path / "rows", "parquet", 4)
    tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False)
    job_port, worker_port = free_port(), free_port()
    servers = [
        serve("apache_beam.runners.portability.local_job_service_main", f"--port={job_port}"),
        serve("apache_beam.runners.worker.worker_pool_main", f"--service_port={worker_port}")]
    try:
        for port in (job_port, worker_port):
            wait_for(port)
        out = tmp_path / "beam"
        launcher = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, pattern, str(out), f"localhost:{job_port}",
             f"localhost:{worker_port}"], stdout=subprocess.PIPE, text=True)
        assert launcher.stdout.readline().strip() == "submitted"
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 120
        while not (out / "dataset.json").exists() and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(1)  # the lock goes after the manifest
        tfrecorder.verify(str(out))
        assert dataset(out) == dataset(tmp_path / "local")
    finally:
        for server in servers:
            stop(server)


@pytest.mark.parametrize("engine", [IN_PROCESS, DIRECT], ids=["in-process", "multi-process"])
def test_a_table_without_images_gives_the_local_engines_bytes(tmp_path, engine,
                                                              monkeypatch):
    """Its rows cross the job's shuffle as the records the local engine writes
    (`EncodedRow`): the same shards, statistics and manifest (a shard written a few
    hundred records at a time, in the process that runs it in-process)."""
    from tfrecorder.write.engines import beam

    monkeypatch.setattr(beam, "_FRAMED_AT_ONCE", 300)
    n = np.arange(2_000)
    table = pd.DataFrame({
        "split": np.array(["TRAIN", "UNASSIGNED", "TEST"])[n % 3],
        "label": np.array(["cat", "dog", "emu", ""])[n * 7 % 4],
        "visits": n * 13 % 1000, "spend": (n * 37 % 101) / 10,
        "city": np.array(["Lyon", "Oslo", "Pune"])[n % 3],
        "scores": [[float(i), float(i % 7)] for i in n.tolist()],
        "note": [f"customer {i}" for i in n.tolist()]})
    pattern = write_parts(table, tmp_path / "rows", "parquet", 4)
    options = {"num_shards": 3, "schema": {"city": "CategoricalInput"}}
    tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False, **options)
    result = tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False, **options,
                                **engine)
    local, written = dataset(tmp_path / "local"), dataset(tmp_path / "beam")
    assert written.keys() == local.keys()
    assert [name for name in written if written[name] != local[name]] == []
    assert result.num_records == 2_000


@pytest.mark.parametrize("layout", ["flat", "hive", "bucket", "hive-csv"])
def test_a_parquet_folder_is_planned_by_the_pipeline_to_the_local_engines_dataset(
        bucket_images, gcs_store, tmp_path, layout, monkeypatch):
    """A folder of Parquet files, as pandas and Spark write them (in hive partitions
    too), or of CSV files in hive partitions, is read by the job a file each (the
    launcher lists it, reading no row), to the dataset the local engine writes from its
    whole read: the same shards, the partition columns and their categories,
    rejected.csv's rows named alike."""
    table = rows_table(bucket_images, 400)
    folder = tmp_path / "rows"
    if layout == "hive":
        table.to_parquet(folder, partition_cols=["colour", "split"])
    elif layout == "hive-csv":
        write_hive(table, folder, "csv", ["colour", "split"])
    else:
        write_parts(table, folder, "parquet", 5)
    if layout == "bucket":  # the same files in the bucket, named by their folder
        for path in sorted(folder.iterdir()):
            gcs_store.upload(path, f"{gcs_store.root}/rows-{tmp_path.name}/{path.name}")
        folder = f"{gcs_store.root}/rows-{tmp_path.name}/"
    tfrecorder.convert(str(folder), str(tmp_path / "local"), progress=False)
    from tfrecorder.sources import parquet, table_files

    monkeypatch.setattr(parquet, "read_parquet", None)  # the whole read: never, now
    monkeypatch.setattr(table_files, "folder_table", None)
    result = tfrecorder.convert(str(folder), str(tmp_path / "beam"), progress=False,
                                **IN_PROCESS)
    local, written = dataset(tmp_path / "local"), dataset(tmp_path / "beam")
    assert written.keys() == local.keys()
    assert [name for name in written if written[name] != local[name]] == []
    assert result.num_rejected == 1
    if layout.startswith("hive"):  # the partition column is an input, every category
        manifest = tfrecorder.info(str(tmp_path / "beam")).manifest
        assert manifest.features["colour"].vocabulary == ("blue", "green", "red")


def test_the_launcher_lists_a_parquet_folder_and_reads_no_row(tmp_path, monkeypatch):
    from tfrecorder.sources import parquet
    from tfrecorder.sources.table_files import pipeline_files

    table = pd.DataFrame({"image_uri": ["a.png"] * 6, "label": list("abcabc"),
                          "split": ["TRAIN"] * 3 + ["TEST"] * 3, "year": [1, 2] * 3})
    table.to_parquet(tmp_path / "hive", partition_cols=["split", "year"])
    monkeypatch.setattr(parquet, "read_parquet", None)  # any row read fails
    found = pipeline_files(str(tmp_path / "hive"))
    assert [Path(f).relative_to(tmp_path / "hive").parts[:2] for f in found.files] == [
        ("split=TEST", "year=1"), ("split=TEST", "year=2"), ("split=TRAIN", "year=1"),
        ("split=TRAIN", "year=2")]
    assert (found.fields, found.dictionaries) == (("split", "year"),
                                                  (("TEST", "TRAIN"), (1, 2)))


def test_a_list_of_files_is_a_source_read_in_its_order(bucket_images, tmp_path):
    table = rows_table(bucket_images, 300)
    write_parts(table, tmp_path / "rows", "parquet", 3)
    files = [str(tmp_path / "rows" / f"part-{i:05d}.parquet") for i in (2, 0, 1)]
    tfrecorder.convert(files, str(tmp_path / "local"), progress=False)
    tfrecorder.convert(files, str(tmp_path / "beam"), progress=False, **IN_PROCESS)
    local, written = dataset(tmp_path / "local"), dataset(tmp_path / "beam")
    assert [name for name in written if written[name] != local[name]] == []
    # In the list's order: the first file's rows are the table's first.
    rejected = pd.read_csv(tmp_path / "local" / "rejected.csv")
    assert rejected["row"].tolist() == ["part-00001.parquet[0]"]  # (row 100: the missing)
    with pytest.raises(SchemaError, match=r"the list of files .* holds .*notes\.txt', "
                                          r"which is not a table file"):
        tfrecorder.convert([*files, str(tmp_path / "notes.txt")], str(tmp_path / "x"))


def test_rejected_rows_of_many_files_are_joined_to_the_local_engines_file(
        bucket_images, tmp_path, external_workers):
    """Workers write each file's rejected rows, which the finish step joins: the same
    rejected.csv as the local engine's whole table gives, where the files' columns are
    typed apart (a fraction makes one file's column float), a cell holds a lone
    carriage return (the whole file is quoted), and dropped copies fall among them."""
    table = rows_table(bucket_images, 160)
    table.loc[[10, 60], "image_uri"] = table.loc[0, "image_uri"]  # copies to drop
    table["visits"] = (np.arange(160) % 7).astype(object)
    table["note"] = "plain"
    table.loc[90, "visits"] = 2.5  # in the third file only (no row of it is rejected)
    gone = bucket_images[0].rsplit("/", 1)[0] + "/gone.png"
    for row in (3, 50, 51, 130):  # rejected in three of the four files
        table.loc[row, "image_uri"] = gone
    table.loc[51, "note"] = "two\rlines"
    pattern = write_parts(table, tmp_path / "rows", "parquet", 4)
    options = {"duplicates": "drop", "num_shards": 2, "schema": {"visits": "FloatInput"}}
    tfrecorder.convert(pattern, str(tmp_path / "local"), progress=False, **options)
    result = tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False,
                                **options, **external_workers)
    local, written = dataset(tmp_path / "local"), dataset(tmp_path / "beam")
    assert written.keys() == local.keys()  # no part of rejected.csv is left
    assert [name for name in written if written[name] != local[name]] == []
    rejected = pd.read_csv(tmp_path / "beam" / "rejected.csv")
    assert result.num_rejected == len(rejected) > 4  # the copies dropped are among them
    assert rejected["reason"].str.startswith("duplicate image").any()
    assert '"two\rlines"' in written["rejected.csv"].decode()


def test_the_finish_step_receives_no_fact_a_record(bucket_images, tmp_path, monkeypatch):
    """What reaches the pipeline's finish step: shards without their records' facts,
    each split's tally, only the content hashes held by two records or more, and the
    rejected rows as parts the workers wrote (their rows never pass through it). No
    worker keeps or writes receipts of its shards' facts (the job cannot be resumed)."""
    from tfrecorder.write.engines import beam_files
    from tfrecorder.write.finish import RejectedParts
    from tfrecorder.write.resume import Journal

    pattern = write_parts(rows_table(bucket_images[:100], 300), tmp_path / "rows",
                          "parquet", 3)
    seen = []
    real = beam_files.finish

    def finish(folder, header, written, journal, limit, rows, report, summary):
        seen.append((written, summary))
        return real(folder, header, written, journal, limit, rows, report, summary)

    monkeypatch.setattr(beam_files, "finish", finish)
    journaled = []  # nor does a worker keep, or write, a receipt of each shard's facts
    monkeypatch.setattr(Journal, "_write", lambda self, name, _: journaled.append(name))
    tfrecorder.convert(pattern, str(tmp_path / "beam"), progress=False, **IN_PROCESS)
    assert journaled == []
    [(written, summary)] = seen
    assert written.shards and all(shard.facts is None for shard in written.shards)
    assert written.rejections == []
    assert sorted(summary.tallies) == ["test", "train", "validation"]
    assert sum(int(t.labels.sum()) + t.unlabeled for t in summary.tallies.values()) == 299
    assert len(summary.candidates) == 100  # each image thrice (one row's is missing)
    assert {len(group) for group in summary.candidates} <= {2, 3}
    assert isinstance(summary.rejected, RejectedParts) and summary.rejected.count == 1
    assert [p.name for p in (tmp_path / "beam").iterdir() if "part" in p.name] == []


def test_the_launcher_lists_a_folder_in_a_bucket_once_a_question(gcs_store, tmp_path):
    """Telling what a folder in a bucket is asks it several questions (its files, its
    folders, what lies below, then pyarrow's discovery); each listing is a request per
    1,000 objects, so each kind is made once."""
    from tfrecorder.sources.table_files import pipeline_files

    table = pd.DataFrame({"image_uri": ["a.png"] * 8, "label": list("abcdabcd"),
                          "split": ["TRAIN", "TEST"] * 4, "year": [1, 1, 2, 2] * 2})
    table.to_parquet(tmp_path / "hive", partition_cols=["split", "year"])
    root = f"{gcs_store.root}/hive-{tmp_path.name}"
    for path in sorted((tmp_path / "hive").rglob("*.parquet")):
        gcs_store.upload(path, f"{root}/{path.relative_to(tmp_path / 'hive').as_posix()}")
    gcs_store.reset_stats()
    found = pipeline_files(root + "/")
    assert len(found.files) == 4 and found.fields == ("split", "year")
    listings = [line for line in gcs_store.stats()["log"] if "prefix=" in line]
    assert len(listings) <= 4  # an is-it-a-folder probe, ls, find, and pyarrow's find

"""The Beam engine writes the local engine's dataset, byte for byte."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import image_bytes, make_image, read_manifest, shard_and_index_names, shard_bytes

import tfrecorder
from tfrecorder import ConversionAborted, ImageError


@pytest.fixture
def table_with_bad_rows(image_table, tmp_path) -> pd.DataFrame:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.jpg").write_bytes(b"")
    jpeg = image_bytes(make_image((200, 200)), "JPEG")
    (bad / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 3])
    rows = pd.DataFrame({"split": "TRAIN", "label": "cat",
                         "image_uri": [str(bad / "empty.jpg"), str(bad / "truncated.jpg")]})
    return pd.concat([image_table, rows], ignore_index=True)


def dataset_files(output_dir) -> dict[str, bytes]:
    """Shards and rejected.csv: what must be identical between engines."""
    files = shard_bytes(output_dir)
    files["rejected.csv"] = Path(output_dir, "rejected.csv").read_bytes()
    return files


# Compression is the shard writer's, whatever the runner's mode: gzip once.
@pytest.mark.parametrize("mode,compression", [("in_memory", None), ("in_memory", "gzip"),
                                              ("multi_processing", None)])
def test_direct_runner_writes_the_local_engines_bytes(table_with_bad_rows, tmp_path, mode,
                                                      compression):
    options = dict(num_shards=2, compression=compression, progress=False)
    local = str(tmp_path / "local")
    tfrecorder.convert(table_with_bad_rows, local, **options)
    beam = str(tmp_path / "beam")
    result = tfrecorder.convert(
        table_with_bad_rows, beam, runner="DirectRunner",
        beam_options={"direct_running_mode": mode, "direct_num_workers": 2}, **options)
    assert dataset_files(beam) == dataset_files(local)
    assert read_manifest(beam) == read_manifest(local)
    assert result.num_records == 24 and result.num_rejected == 2
    assert result.metrics == {"rows_read": 26, "records_written": 24, "rows_rejected": 2,
                              "rows": 26, "good_images": 24, "bad_images": 2}
    # The mapping copies nothing (a deep copy of Beam's PipelineResult raised TypeError).
    assert (result["metrics"], result["num_rejected"]) == (result.metrics, 2)
    assert dict(result)["job_id"] == "DirectRunner" and result["pipeline"] is result.pipeline
    assert sorted(os.listdir(beam)) == sorted(os.listdir(local))  # no temporary files


BEAM_RUN = """
import sys, pandas as pd, tfrecorder
table = pd.DataFrame({"x": [1.0, 2.0, 3.0], "split": ["train"] * 3})
tfrecorder.convert(table, sys.argv[1], runner="DirectRunner", progress=False)
"""


def test_a_run_leaves_no_empty_folders_of_beams_in_the_temporary_folder(tmp_path):
    """A fresh process, as a user's: the job server's beam-temp* and the SDK's tmp*
    folders go; an empty folder another program made before stays."""
    temp = tmp_path / "temp"
    (temp / "tmpabcd1234").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", BEAM_RUN, str(tmp_path / "out")],
                          env={**os.environ, "TMPDIR": str(temp)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "dataset.json").exists()
    left = sorted(os.listdir(temp))
    # Beam's requirements cache is one folder shared by every run, by design.
    assert [name for name in left if name != "beam-requirements-cache"] == ["tmpabcd1234"]


def test_a_failing_pipeline_leaves_no_dataset(table_with_bad_rows, tmp_path):
    """on_error="raise" stops the pipeline with the error the local engine gives: the
    row by its label in the table, its image and the reason."""
    out = tmp_path / "out"
    with pytest.raises(ImageError) as caught:
        tfrecorder.convert(table_with_bad_rows, str(out), runner="DirectRunner",
                           on_error="raise", progress=False)
    assert not out.exists()
    (row,) = caught.value.rows
    uri = table_with_bad_rows["image_uri"][row]
    assert row in (24, 25) and uri.endswith(("empty.jpg", "truncated.jpg"))
    assert str(caught.value).startswith(f"row {row} ({uri!r}): ")
    assert (caught.value.column, caught.value.option) == ("image_uri", "on_error")


def test_a_failing_pipeline_in_worker_processes_names_the_image(table_with_bad_rows,
                                                                 tmp_path):
    """Runners in other processes send back only the error's text."""
    out = tmp_path / "out"
    with pytest.raises(ConversionAborted, match=r"(empty|truncated)\.jpg': (corrupt|empty)"):
        tfrecorder.convert(table_with_bad_rows, str(out), runner="DirectRunner",
                           beam_options={"direct_running_mode": "multi_processing"},
                           on_error="raise", progress=False)
    assert not out.exists()


def test_an_unknown_runner_is_refused_before_any_work(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False)
    before = dataset_files(out)
    with pytest.raises(ValueError, match="NoSuchRunner"):
        tfrecorder.convert(image_table, str(out), runner="NoSuchRunner", overwrite=True,
                           progress=False)
    assert dataset_files(out) == before  # the existing dataset was not touched


@pytest.mark.parametrize("workers", ["loopback", "external"])
def test_portable_runner_writes_the_same_bytes(table_with_bad_rows, tmp_path, workers,
                                               external_workers):
    """The portable runner serializes the pipeline and its functions as a distributed
    runner does; an embedded job server runs it here, its harness in this process
    (LOOPBACK, the quick smoke test) or in worker processes of their own (EXTERNAL,
    `beam_workers`), with gzip shards for two hosts."""
    options = {} if workers == "loopback" else {"compression": "gzip", "hosts": 2}
    runner = (external_workers if workers == "external" else {
        "runner": "PortableRunner",
        "beam_options": {"job_endpoint": "embed", "environment_type": "LOOPBACK"}})
    local, portable = str(tmp_path / "local"), str(tmp_path / "portable")
    tfrecorder.convert(table_with_bad_rows, local, progress=False, **options)
    tfrecorder.convert(table_with_bad_rows, portable, progress=False, **options, **runner)
    assert dataset_files(portable) == dataset_files(local)
    assert read_manifest(portable) == read_manifest(local)


def test_gs_images_to_a_gs_dataset_on_beam(image_table, tmp_path, gcs_bucket):
    from helpers import TFDS_FILES, download
    from test_convert import upload_table

    remote = upload_table(image_table, f"gs://{gcs_bucket}/beam/images")
    beam_out, local_out = f"gs://{gcs_bucket}/beam/out", f"gs://{gcs_bucket}/beam/local"
    result = tfrecorder.convert(remote, beam_out, runner="DirectRunner", num_shards=2,
                                progress=False,
                                beam_options={"temp_location": f"gs://{gcs_bucket}/beam/tmp"})
    assert result.num_records == 24
    tfrecorder.convert(remote, local_out, num_shards=2, progress=False)
    beam_copy = download(beam_out, tmp_path / "beam")
    assert dataset_files(beam_copy) == dataset_files(download(local_out, tmp_path / "local"))
    assert sorted(os.listdir(beam_copy)) == sorted(
        ["dataset.json", "rejected.csv", *TFDS_FILES] + shard_and_index_names(result.shards))
    from tfrecorder.storage import fs

    assert list(fs.list_files(f"gs://{gcs_bucket}/beam/tmp")) == []  # staging cleaned up


def test_a_dataflow_job_stays_small_whatever_the_tables_size(gcs_bucket):
    """Dataflow refuses job graphs over 10 MB: the table must be staged, not embedded
    (250,000 rows' URIs alone are 8 MB). Beam's dry run builds the whole job and submits
    nothing."""
    sizes = {}
    for n in (1_000, 250_000):
        table = pd.DataFrame({"image_uri": [f"gs://{gcs_bucket}/dry/{i}.jpg" for i in range(n)],
                              "label": ["cat", "dog"] * (n // 2)})
        result = tfrecorder.convert(
            table, f"gs://{gcs_bucket}/dry/out{n}", runner="DataflowRunner",
            project="my-project", region="us-central1", num_shards=4,
            temp_location=f"gs://{gcs_bucket}/dry/tmp", beam_options={"dry_run": True},
            progress=False)
        assert result.counts == {} and result.num_rejected is None  # nothing ran
        job = result.pipeline.job
        sizes[n] = job.proto_pipeline.ByteSize()
        # tfrecorder's own code is staged for the workers: a wheel built on the fly
        staged = [artifact.role_payload for environment in
                  job.proto_pipeline.components.environments.values()
                  for artifact in environment.dependencies]
        wheel = f"tfrecorder-{tfrecorder.__version__}-py3-none-any.whl".encode()
        assert any(wheel in payload for payload in staged), staged
    assert sizes[250_000] < 200_000
    assert abs(sizes[250_000] - sizes[1_000]) < 1_000  # independent of the table
    from tfrecorder.storage import fs

    assert list(fs.list_files(f"gs://{gcs_bucket}/dry")) == []  # nothing staged is left


def test_a_dataflow_job_without_temp_location_stages_in_the_outputs_bucket(gcs_bucket):
    """As TFRecorder 2.0 did, the temporary location comes from a gs:// output_dir: here
    a folder at the top of its bucket, outside the dataset."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    table = pd.DataFrame({"image_uri": [f"gs://{gcs_bucket}/dry/a.jpg"], "label": ["cat"]})
    result = tfrecorder.convert(
        table, f"gs://{gcs_bucket}/dry/out", runner="DataflowRunner", project="my-project",
        region="us-central1", beam_options={"dry_run": True}, progress=False)
    options = result.pipeline.job.options.view_as(GoogleCloudOptions)
    assert options.temp_location.startswith(f"gs://{gcs_bucket}/tfrecorder-temp/")


@pytest.mark.parametrize("change,message", [
    ({"project": None}, "DataflowRunner needs project"),
    ({"temp_location": "/tmp/local"}, "temp_location must be a gs:// URI"),
    ({"output_dir": "/tmp/local-out"}, "output_dir must be a gs:// URI"),
    ({"image_uri": "/local/a.jpg"}, r"column 'image_uri' has local paths .* at row 0 "),
    ({"project": "My Project"}, "invalid Beam options for DataflowRunner: .*Project ID"),
])
def test_dataflow_mistakes_are_refused_before_any_job(change, message, tmp_path):
    options = {"project": "my-project", "region": "us-central1",
               "temp_location": "gs://bucket/tmp",
               "output_dir": "gs://bucket/out", "image_uri": "gs://bucket/a.jpg", **change}
    table = pd.DataFrame({"image_uri": [options.pop("image_uri")], "label": ["cat"]})
    with pytest.raises(ValueError, match=message):
        tfrecorder.convert(table, options.pop("output_dir"), runner="DataflowRunner",
                           progress=False, **options)
    assert not os.path.exists("/tmp/local-out")

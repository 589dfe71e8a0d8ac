"""The wheel tfrecorder builds of itself for remote Beam workers, and when it builds one."""

import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tfrecorder.write.engines.shipping import _metadata, build_worker_wheel, needs_package


def test_the_worker_wheel_installs_with_pip_and_encodes_the_same_records(tmp_path,
                                                                         image_table):
    wheel = build_worker_wheel(tmp_path)
    assert wheel.name == f"tfrecorder-{tfrecorder.__version__}-py3-none-any.whl"
    target = tmp_path / "site"
    # pip checks the archive, its metadata and its RECORD while installing it
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)],
                   check=True)

    # A fresh interpreter imports the installed copy (not this checkout) and encodes a row.
    uri = image_table["image_uri"][1]
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(target)!r})
        import tfrecorder.write.records as records
        from tfrecorder.options import ImageOptions
        from tfrecorder.write.rows import Row
        assert records.__file__.startswith({str(target)!r}), records.__file__
        assert "tensorflow" not in sys.modules
        row = Row(1, {uri!r}, {uri!r}, 2, "train")
        sys.stdout.buffer.write(records.encode_row(row, ImageOptions()).example)
    """)
    shipped = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True,
                             capture_output=True).stdout
    from tfrecorder.options import ImageOptions
    from tfrecorder.write.records import encode_row
    from tfrecorder.write.rows import Row

    assert shipped == encode_row(Row(1, uri, uri, 2, "train"), ImageOptions()).example


def test_the_worker_wheel_declares_only_what_workers_need(tmp_path):
    with zipfile.ZipFile(build_worker_wheel(tmp_path)) as archive:
        names = archive.namelist()
        metadata = archive.read(f"tfrecorder-{tfrecorder.__version__}.dist-info/METADATA")
    requires = [line.split(":", 1)[1].strip().split(">")[0].split("[")[0].lower()
                for line in metadata.decode().splitlines() if line.startswith("Requires-Dist")]
    assert {"pandas", "pillow", "simplejpeg", "google-crc32c", "fsspec", "gcsfs",
            "s3fs"} <= set(requires)
    assert not {"tensorflow", "apache-beam", "protobuf", "pytest"} & set(requires)
    assert "tfrecorder/write/engines/beam.py" in names and "tfrecorder/write/records.py" in names
    assert not [name for name in names if "__pycache__" in name or name.startswith("tests")]


def test_the_worker_metadata_of_this_pyproject_keeps_the_base_and_the_stores():
    """From pyproject.toml itself, as pip would write its Requires-Dist (the installed
    metadata may be older than the checkout): TensorFlow, an extra, stays behind, and so
    does protobuf, a base dependency that only the driver imports."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    project = project["project"]
    requirements = [*project["dependencies"], *(
        f'{requirement}; extra == "{extra}"'
        for extra, listed in project["optional-dependencies"].items()
        for requirement in listed)]
    kept = {re.split(r"[\s\[<>=!~;]", line.split(":", 1)[1].strip(), maxsplit=1)[0].lower()
            for line in _metadata("1.0", requirements).splitlines()
            if line.startswith("Requires-Dist")}
    assert {"pandas", "pillow", "simplejpeg", "google-crc32c", "fsspec", "gcsfs",
            "s3fs"} <= kept
    assert not {"tensorflow", "protobuf", "apache-beam", "tqdm", "datasets", "av",
                "pytest"} & kept


@pytest.mark.parametrize("runner,options,expected", [
    ("DataflowRunner", {}, True),
    ("PortableRunner", {"environment_type": "DOCKER"}, True),
    ("DataflowRunner", {"extra_packages": ["deps/other-1.0.tar.gz"]}, True),
    ("DirectRunner", {}, False),
    ("PortableRunner", {"environment_type": "LOOPBACK"}, False),
    ("DataflowRunner", {"extra_packages": ["dist/tfrecorder-0.1.0-py3-none-any.whl"]}, False),
    ("DataflowRunner", {"setup_file": "./setup.py"}, False),
    ("DataflowRunner", {"sdk_container_image": "gcr.io/p/tfrecorder-worker"}, False),
])
def test_the_package_is_built_unless_workers_have_it(runner, options, expected):
    assert needs_package(runner, options) is expected


def test_a_wheel_given_by_the_user_is_staged_instead(tmp_path, gcs_bucket):
    own = tmp_path / "tfrecorder-9.9-py3-none-any.whl"
    own.write_bytes(build_worker_wheel(tmp_path).read_bytes())
    result = tfrecorder.convert(
        pd.DataFrame({"image_uri": [f"gs://{gcs_bucket}/own/a.jpg"], "label": ["cat"]}),
        f"gs://{gcs_bucket}/own/out", runner="DataflowRunner", project="my-project",
        region="us-central1",
        temp_location=f"gs://{gcs_bucket}/own/tmp", tfrecorder_wheel=own,
        beam_options={"dry_run": True, "machine_type": "n2-highmem-8", "max_num_workers": 7,
                      "service_account_email": "sa@p.iam.gserviceaccount.com",
                      "network": "my-vpc", "use_public_ips": False},
        progress=False)
    job = result.pipeline.job
    staged = b" ".join(artifact.role_payload for environment in
                       job.proto_pipeline.components.environments.values()
                       for artifact in environment.dependencies)
    assert own.name.encode() in staged
    assert f"tfrecorder-{tfrecorder.__version__}-".encode() not in staged
    # Dataflow's own options reach the job as given: Beam's own code turns the job's
    # options into the worker environment it submits (a dry run stops just before)
    from apache_beam.runners.dataflow.internal.apiclient import Environment

    environment = Environment(packages=[], options=job.options, environment_version="",
                              proto_pipeline_staged_url="", proto_pipeline=job.proto_pipeline
                              ).proto
    pool = environment.worker_pools[0]
    assert (pool.machine_type, pool.autoscaling_settings.max_num_workers, pool.network) == (
        "n2-highmem-8", 7, "my-vpc")
    assert environment.service_account_email == "sa@p.iam.gserviceaccount.com"
    assert pool.ip_configuration.name == "WORKER_IP_PRIVATE"

"""Converting from and to buckets, through real local GCS and S3 servers (tests/stores.py):
the CSV, the images and the dataset on a store, reads overlapped with decoding, retries,
one clear error before any work, and resuming a killed run."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from detection_data import scenes
from helpers import (
    assert_one_error_line,
    children,
    dataset_folder_files,
    pixels,
    read_manifest,
    read_split,
    run_cli,
    shard_bytes,
    wait_gone,
    write_image,
)
from stores import closed_port

import tfrecorder
from tfrecorder import ResumeError, StorageError

STORES = ["gcs_store", "s3_store"]


@pytest.fixture(params=STORES)
def store(request):
    return request.getfixturevalue(request.param)


def download(store, prefix: str, local_dir: Path) -> Path:
    """Every object below `prefix`, copied into `local_dir` under its path there."""
    local_dir.mkdir(parents=True, exist_ok=True)
    for uri in store.list(prefix):
        path = local_dir / uri[len(prefix.rstrip("/")) + 1:]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(store.read_bytes(uri))
    return local_dir


def csv_with_relative_paths(image_table: pd.DataFrame, folder: Path) -> Path:
    """The table as an AutoML CSV in `folder`, its images in `folder/images/<label>/`, named
    relative to the CSV: the same file converts locally and from a bucket."""
    rows = []
    for split, source, label in image_table.itertuples(index=False):
        relative = f"images/{label}/{os.path.basename(source)}"
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(Path(source).read_bytes())
        rows.append((split, relative, label))
    path = folder / "data.csv"
    pd.DataFrame(rows).to_csv(path, header=False, index=False)
    return path


def upload_folder(store, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            store.upload(path, f"{prefix}/{path.relative_to(folder).as_posix()}")


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_csv_images_and_dataset_on_a_store(store, image_table, tmp_path, runner):
    """A CSV of relative paths on the store converts into a dataset on the store equal,
    byte for byte, to the local conversion of the same files; every pixel checks."""
    csv = csv_with_relative_paths(image_table, tmp_path / "src")
    prefix = f"{store.root}/{store.kind}-{runner}"
    upload_folder(store, tmp_path / "src", f"{prefix}/src")
    local = tmp_path / "local"
    tfrecorder.convert(str(csv), str(local), num_shards=2, progress=False)

    result = tfrecorder.convert(f"{prefix}/src/data.csv", f"{prefix}/out", num_shards=2,
                                runner=runner, progress=False)

    assert result.num_records == 24 and result.num_rejected == 0
    copy = download(store, f"{prefix}/out", tmp_path / "copy")
    # no journal, no temp files
    assert dataset_folder_files(copy) == dataset_folder_files(local)
    assert shard_bytes(copy) == shard_bytes(local)
    assert read_manifest(copy) == read_manifest(local)
    for split in ("train", "validation", "test"):
        for record in read_split(copy, split):
            source = tmp_path / "src" / record["image_uri"].decode()
            np.testing.assert_array_equal(record["pixels"], pixels(source))


def remote_images(store, tmp_path, count: int, prefix: str) -> pd.DataFrame:
    """`count` small JPEGs on the store, in a table."""
    uris = []
    for i in range(count):
        path = write_image(tmp_path / "img" / f"{i:03d}.jpg", size=(64, 48), seed=i)
        uris.append(store.upload(path, f"{store.root}/{prefix}/{i:03d}.jpg"))
    return pd.DataFrame({"image_uri": uris, "label": [f"c{i % 3}" for i in range(count)]})


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_reads_overlap_with_decoding(store, tmp_path, runner):
    """With 100 ms per request, many reads are in flight at once: counted by the server."""
    table = remote_images(store, tmp_path, 96, f"overlap-{runner}")
    store.set_latency(0.1)
    store.reset_stats()
    result = tfrecorder.convert(table, str(tmp_path / "out"), num_shards=1, runner=runner,
                                progress=False)
    assert result.num_records == 96
    # One read at a time per worker would give at most 2 (one shard on Beam: 1).
    assert store.stats()["max_in_flight"] >= 24


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_segmentation_masks_in_a_bucket_are_read_ahead_too(store, tmp_path, runner):
    """Images on local disk, their class masks in the bucket at 100 ms a request: the
    masks' reads overlap as images' do (one at a time per worker would give at most 2),
    and the stored masks are the files' pixels."""
    import tensorflow as tf

    drawn = scenes(str(tmp_path / "scenes"), count=48)
    masks = [store.upload(s["mask_uri"], f"{store.root}/masks-{runner}/{i:02d}.png")
             for i, s in enumerate(drawn)]
    table = pd.DataFrame({"split": ["TRAIN"] * len(drawn),
                          "image_uri": [s["image_uri"] for s in drawn], "mask_uri": masks})
    store.set_latency(0.1)
    store.reset_stats()
    out = tmp_path / "out"
    result = tfrecorder.convert(table, str(out), task="segmentation", num_shards=1,
                                runner=runner, progress=False)
    assert result.num_records == 48 and result.num_rejected == 0
    assert store.stats()["max_in_flight"] >= 12
    stored = {}
    for record in tf.data.TFRecordDataset(result.shards):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        name = example["image_name"].bytes_list.value[0].decode()
        stored[name] = tf.io.decode_png(example["segmentation_mask"].bytes_list.value[0])
    for s in drawn:
        np.testing.assert_array_equal(stored[os.path.basename(s["image_uri"])][..., 0],
                                      s["mask"])


def test_transient_errors_are_retried_and_missing_objects_rejected(store, tmp_path):
    table = remote_images(store, tmp_path, 6, "flaky")
    table.loc[len(table)] = [f"{store.root}/flaky/missing.jpg", "c0"]
    store.fail("flaky/002.jpg", 503, times=2)
    store.fail("flaky/004.jpg", 500, times=1)
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    assert result.num_records == 6 and result.num_rejected == 1
    assert store.stats()["failed"] == 3
    rejected = pd.read_csv(tmp_path / "out" / "rejected.csv")
    assert rejected["image_uri"].tolist() == [f"{store.root}/flaky/missing.jpg"]
    assert "not found (404)" in rejected["reason"][0]


@pytest.mark.parametrize("where", ["images", "output"])
def test_a_missing_bucket_is_one_clear_error_before_any_work(store, tmp_path, where):
    table = remote_images(store, tmp_path, 2, "buckets")
    out = str(tmp_path / "out")
    missing = f"{store.protocol}://no-such-bucket-{where}"
    if where == "images":
        table.loc[len(table)] = [f"{missing}/a.jpg", "c0"]
    else:
        out = f"{missing}/out"
    with pytest.raises(StorageError, match="bucket 'no-such-bucket-.*' does not exist") as e:
        tfrecorder.convert(table, out, progress=False)
    assert "\n" not in str(e.value) and e.value.__cause__ is None and e.value.uri
    assert not os.path.exists(tmp_path / "out")


def test_refused_credentials_are_one_clear_error_before_any_work(store, tmp_path):
    table = remote_images(store, tmp_path, 8, "denied")
    store.reset_stats()
    store.fail("denied", 403)
    with pytest.raises(StorageError, match="403") as e:
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    assert "denied/000.jpg" in str(e.value) and "credentials" in str(e.value)
    assert store.stats()["requests"] <= 3  # one probe (and a bucket check), no retries
    assert not os.path.exists(tmp_path / "out")


def test_the_cli_says_what_is_wrong_in_one_line(store, tmp_path):
    env = {**os.environ}
    process = subprocess.run(
        [sys.executable, "-m", "tfrecorder", "convert",
         f"{store.protocol}://no-such-bucket/data.csv", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=120)
    assert process.returncode != 0
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-bucket" in lines[0], process.stderr


# --- web URLs and stores that cannot be reached ------------------------------------------

def web_table(web_store, image_table, tmp_path) -> pd.DataFrame:
    """The image table, its first 6 images served by the web server, plus a URL the server
    answers 404 to and one on a port nothing listens on."""
    table = image_table.copy()
    for i in range(6):
        table.loc[i, "image_uri"] = web_store.upload(
            table["image_uri"][i], f"{web_store.root}/{tmp_path.name}/{i}.jpg")
    dead = f"http://127.0.0.1:{closed_port()}/image.jpg"
    extra = pd.DataFrame({"split": ["TRAIN", "TRAIN"], "label": ["cat", "dog"],
                          "image_uri": [f"{web_store.root}/missing.jpg", dead]})
    return pd.concat([table, extra], ignore_index=True)


def test_a_web_url_that_cannot_be_read_is_a_rejected_row_with_the_reason(
        web_store, image_table, tmp_path):
    """Web hosts differ by row: a host that is down rejects its row, not the run, and the
    reason is what happened (not a bucket's 404)."""
    table = web_table(web_store, image_table, tmp_path)
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    assert result.num_records == 24 and result.num_rejected == 2
    rejected = pd.read_csv(tmp_path / "out" / "rejected.csv")
    reasons = dict(zip(rejected["image_uri"], rejected["reason"]))
    assert reasons[table["image_uri"][24]] == "cannot read file: not found (404)"
    port = table["image_uri"][25].split(":")[2].split("/")[0]
    assert reasons[table["image_uri"][25]].endswith(
        f"cannot reach 127.0.0.1:{port}: connection refused.")
    # ...and they count against max_rejected, as any rejected row does.
    with pytest.raises(tfrecorder.TooManyRejectedError):
        tfrecorder.convert(table, str(tmp_path / "strict"), max_rejected=0.05,
                           progress=False)


class SilentServer:
    """A TCP port that accepts connections and never answers (a TLS handshake waits)."""

    def __enter__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.socket.getsockname()[1]}"
        self.url = f"https://{self.address}"
        return self

    def __exit__(self, *exc):
        self.socket.close()


TIMED_CONVERT = """
import logging, sys, time
import tfrecorder, tfrecorder.cli  # start-up (Python, pandas): not the command's own time
mode, source, out = sys.argv[1:]
started = time.monotonic()
try:
    if mode == "cli":
        code = tfrecorder.cli.main(["convert", source, out])
    else:
        logging.basicConfig()  # a store client's logged tracebacks would show
        try:
            tfrecorder.convert(source, out, progress=False)
            code = 0
        except tfrecorder.StorageError as error:
            print(error, file=sys.stderr)
            code = 1
finally:
    print(f"{time.monotonic() - started:.2f}")
sys.exit(code)
"""


def timed_convert(mode: str, source: str, out: Path, env: dict
                  ) -> tuple[subprocess.CompletedProcess, float]:
    """`tfrecorder convert` (mode "cli") or `tfrecorder.convert` ("api") in a new process,
    and the seconds it took after its imports: a shared host under load takes several
    times its idle seconds to start Python and pandas."""
    process = subprocess.run([sys.executable, "-c", TIMED_CONVERT, mode, source, str(out)],
                             capture_output=True, text=True, env=env, timeout=180)
    return process, float(process.stdout.split()[-1])


@pytest.mark.parametrize("cause, mode", [
    ("connection refused", "cli"), ("connection refused", "api"), ("timed out", "cli")],
    ids=["refused-cli", "refused-api", "timed-out-cli"])
def test_a_gcs_endpoint_that_cannot_be_reached_is_one_line_within_seconds(
        gcs_store, tmp_path, cause, mode):
    """No route to the store: the probe gives up within seconds and names the cause, in
    one line without the store client's tracebacks (gcsfs retried for 36 s before, then
    logged three tracebacks and blamed the bucket's name and the credentials)."""
    table_csv = tmp_path / "table.csv"
    pd.DataFrame({"image_uri": ["gs://bucket/a.jpg"], "label": ["a"]}).to_csv(
        table_csv, index=False)
    with SilentServer() as silent:
        endpoint = silent.url if cause == "timed out" else f"http://127.0.0.1:{closed_port()}"
        process, seconds = timed_convert(mode, str(table_csv), tmp_path / "out",
                                         {**os.environ, "STORAGE_EMULATOR_HOST": endpoint})
    assert seconds < 10  # the probe waits 5 s at most
    assert process.returncode == 1 and "Traceback" not in process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1, process.stderr
    assert f"cannot reach {endpoint.split('://')[1]} (STORAGE_EMULATOR_HOST): {cause}" \
           in lines[0]
    assert "credentials" not in lines[0] and "does not exist" not in lines[0]
    assert not os.path.exists(tmp_path / "out")


def offline(store: str, empty_dir: Path, silent: SilentServer) -> dict[str, str]:
    """This environment, with `store`'s client pointed at a host under `.invalid` (a DNS
    lookup fails at once, as offline) as a user's would be: credentials looked up, not
    given, and the metadata servers (GCE's, EC2's) silent, as where their address drops
    packets. A test's own stores (tests/stores.py) set none of this."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("AWS_", "GCE_", "GOOGLE_", "STORAGE_EMULATOR"))}
    env.update(CLOUDSDK_CONFIG=str(empty_dir), AWS_CONFIG_FILE=str(empty_dir / "config"),
               AWS_SHARED_CREDENTIALS_FILE=str(empty_dir / "credentials"))
    env.pop("NO_GCE_CHECK", None)
    if store == "gs":  # the default endpoint, https://storage.<universe domain>
        env.update(GOOGLE_CLOUD_UNIVERSE_DOMAIN="offline.invalid",
                   GCE_METADATA_HOST="metadata.offline.invalid",
                   GCE_METADATA_IP=silent.address)
    if store == "s3":
        env.update(AWS_ENDPOINT_URL="https://s3.offline.invalid",
                   AWS_EC2_METADATA_SERVICE_ENDPOINT=f"http://{silent.address}")
    return env


@pytest.mark.parametrize("source, host", [
    ("gs://bucket/table.csv", "storage.offline.invalid (GOOGLE_CLOUD_UNIVERSE_DOMAIN)"),
    ("s3://bucket/table.csv", "s3.offline.invalid (AWS_ENDPOINT_URL)"),
    ("https://tables.offline.invalid/table.csv", "tables.offline.invalid")],
    ids=["gs", "s3", "https"])
def test_offline_a_remote_table_fails_at_the_dns_lookup(tmp_path, source, host):
    """Issue 51: offline, `convert gs://bucket/table.csv out/` named the DNS failure
    after 20 s (here 85 s, as "no such CSV file"): gcsfs asked the GCE metadata server
    for credentials, then retried every request. The store's endpoint is probed before
    its client looks up credentials, and a failed lookup is the answer at once."""
    with SilentServer() as silent:
        process, seconds = timed_convert("cli", source, tmp_path / "out",
                                         offline(source.split(":")[0], tmp_path, silent))
    assert seconds < 10, (seconds, process.stderr)  # ~1 s here: importing the client
    assert_one_error_line(process, f"{source}: cannot reach {host}: DNS lookup failed. "
                                   "Check the network connection")
    assert not os.path.exists(tmp_path / "out")


def test_a_web_table_on_a_host_that_does_not_answer_fails_within_seconds(tmp_path):
    """A host that accepts the connection and never answers the TLS handshake: the web
    client waited 30 s for it; the probe gives up after 5 s."""
    with SilentServer() as silent:
        source = f"{silent.url}/table.csv"
        process, seconds = timed_convert("cli", source, tmp_path / "out", {**os.environ})
    assert seconds < 10, (seconds, process.stderr)
    assert_one_error_line(process, f"{source}: cannot reach {silent.address}: timed out.")


def test_an_s3_endpoint_that_cannot_be_reached_is_named_with_the_cause(s3_store, tmp_path):
    """botocore names only the URL it could not connect to, after its retries (13 s); the
    advice was about the bucket's name and the credentials."""
    table_csv = tmp_path / "table.csv"
    pd.DataFrame({"image_uri": ["s3://bucket/a.jpg"], "label": ["a"]}).to_csv(
        table_csv, index=False)
    port = closed_port()
    process = subprocess.run(
        [sys.executable, "-m", "tfrecorder", "convert", str(table_csv), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, env={
            **os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    line = assert_one_error_line(
        process, f"cannot reach 127.0.0.1:{port} (AWS_ENDPOINT_URL): connection refused")
    assert "credentials" not in line


def test_a_store_error_in_a_row_leaves_no_traceback_on_the_command_line(gcs_store,
                                                                          tmp_path):
    """gcsfs logs a traceback with an error it does not retry (here a 400) before raising
    it: the row is rejected with the answer, and the terminal shows no traceback."""
    table = remote_images(gcs_store, tmp_path, 4, "traceback")
    table.to_csv(tmp_path / "table.csv", index=False)
    gcs_store.fail("traceback/002.jpg?alt=media", 400)
    process = run_cli("convert", tmp_path / "table.csv", tmp_path / "out", "--no-progress")
    assert process.returncode == 0, process.stderr
    assert "Traceback" not in process.stderr and "_request" not in process.stderr
    rejected = pd.read_csv(tmp_path / "out" / "rejected.csv")
    assert rejected["reason"].str.contains("HTTP 400").tolist() == [True]


# --- stopping while reads are in flight ---------------------------------------------------

@pytest.mark.parametrize("runner", [[], ["--runner", "DirectRunner"]], ids=["local", "beam"])
@pytest.mark.parametrize("stop, said", [(signal.SIGINT, "tfrecorder: interrupted"),
                                        (signal.SIGTERM, "tfrecorder: stopped by signal 15")],
                         ids=["int", "term"])
def test_a_stop_ends_the_run_at_once_while_a_read_is_held(web_store, tmp_path, runner,
                                                           stop, said):
    """Ctrl-C or SIGTERM while the server holds an image's GET open: the process and its
    workers are gone within seconds, as after any stop, and no file of the run is left
    (the read was waited for: 10 s on the local engine, on Beam until the read's own
    timeout of 300 s, then Beam logged the interrupt's traceback and exited with 1)."""
    name = f"{tmp_path.name}/held.jpg"
    uris = [web_store.upload(write_image(tmp_path / "img" / f"{i}.jpg", seed=i),
                             f"{web_store.root}/{tmp_path.name}/{i}.jpg") for i in range(8)]
    uris.insert(4, web_store.upload(tmp_path / "img" / "0.jpg", f"{web_store.root}/{name}"))
    pd.DataFrame({"image_uri": uris, "label": ["a", "b", "c"] * 3}).to_csv(
        tmp_path / "table.csv", index=False)
    web_store.hold(name, 120)
    web_store.reset_stats()
    out = tmp_path / "out"
    # One shard given: no sample is read to size shards, so the engine holds the read.
    process = subprocess.Popen(
        [sys.executable, "-m", "tfrecorder", "convert", str(tmp_path / "table.csv"), str(out),
         "--num-shards", "1", "--num-workers", "2", "--no-progress", *runner],
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(name in line for line in web_store.stats()["log"]):
        assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)  # the other reads are done: only the held one is in flight
    workers = children(process.pid)
    assert len(workers) == (0 if runner else 2)
    started = time.monotonic()
    process.send_signal(stop)
    try:
        process.wait(timeout=20)
    finally:
        process.kill()
    # About 1.5 s for the local engine and 3.5 s for Beam on a busy 2-core host: room
    # for several times that, short of the waits this guards against (10 s for the
    # local engine's workers; on Beam, the held read's 120 s).
    assert time.monotonic() - started < (15 if runner else 8)
    stderr = process.stderr.read()
    assert process.returncode == 128 + stop and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == said
    for pid in workers:
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            assert wait_gone(pid, 1)
    assert not out.exists() or not os.listdir(out)


# --- resume ------------------------------------------------------------------------------

SLOW_REMOTE_RUN = """
import sys, pandas as pd, tfrecorder
table = pd.read_csv(sys.argv[1])
tfrecorder.convert(table, sys.argv[2], num_shards=12, progress=False, resume=True)
"""


def receipts(out: Path) -> list[str]:
    return sorted(n for n in os.listdir(out) if n.endswith(".receipt.json")) \
        if out.exists() else []


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT])
def test_a_stopped_run_resumes_to_the_same_bytes(gcs_store, tmp_path, stop):
    images = remote_images(gcs_store, tmp_path, 48, "resume")
    table = pd.concat([images] * 10 + [pd.DataFrame(  # 481 rows: reads take a while
        {"image_uri": [f"{gcs_store.root}/resume/missing.jpg"], "label": ["c1"]})],
        ignore_index=True)
    table_csv = tmp_path / "table.csv"
    table.to_csv(table_csv, index=False)
    clean = tmp_path / "clean"
    tfrecorder.convert(table, str(clean), num_shards=12, progress=False)

    out = tmp_path / "out"
    gcs_store.set_latency(0.3)  # slow enough to stop it halfway
    process = subprocess.Popen([sys.executable, "-c", SLOW_REMOTE_RUN, str(table_csv),
                                str(out)])
    deadline = time.monotonic() + 120
    while len(receipts(out)) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    with open(f"/proc/{process.pid}/task/{process.pid}/children") as f:
        workers = [int(pid) for pid in f.read().split()]
    process.send_signal(stop)
    process.wait()
    assert len(workers) == 2
    for pid in workers:  # no orphan goes on writing into the folder
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            assert wait_gone(pid)
    assert not any(".tmp-" in n for n in os.listdir(out)) or stop == signal.SIGKILL
    kept = receipts(out)
    assert 3 <= len(kept) < 12 * 3 and not (out / "dataset.json").exists()
    gcs_store.set_latency(0)
    before = {n: (out / n.removesuffix(".receipt.json")).stat().st_mtime_ns for n in kept}

    with pytest.raises(ResumeError, match="num_shards was 12, now 6"):
        tfrecorder.convert(table, str(out), num_shards=6, progress=False, resume=True)
    result = tfrecorder.convert(table, str(out), num_shards=12, progress=False, resume=True)

    assert sorted(os.listdir(out)) == sorted(os.listdir(clean))  # journal gone
    assert shard_bytes(out) == shard_bytes(clean)
    assert read_manifest(out) == read_manifest(clean)
    assert (out / "rejected.csv").read_bytes() == (clean / "rejected.csv").read_bytes()
    assert result.num_rejected == 1
    for name, mtime in before.items():  # committed shards were kept, not written again
        assert (out / name.removesuffix(".receipt.json")).stat().st_mtime_ns == mtime


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_a_stopped_resumable_run_keeps_its_shards_and_rewrites_a_corrupt_one(
        image_table, tmp_path, caplog, runner):
    bad = tmp_path / "late.jpg"
    bad.write_bytes(b"not yet an image")
    table = pd.concat([image_table, pd.DataFrame(
        {"split": ["TEST"], "image_uri": [str(bad)], "label": ["cat"]})], ignore_index=True)
    out = tmp_path / "out"
    with pytest.raises(tfrecorder.ImageError):  # stops in the test split, the last one
        tfrecorder.convert(table, str(out), num_shards=3, on_error="raise", progress=False,
                           resume=True)
    kept_receipts = receipts(out)
    earlier = [f"{split}-0000{i}-of-00003.tfrecord.receipt.json"
               for split in ("train", "validation") for i in range(3)]
    assert set(earlier) <= set(kept_receipts)
    # Workers run ahead, so a test shard without the bad row may be committed too (the
    # engines promise no order over shards), but never the one that holds it.
    late = [name for name in kept_receipts if name not in earlier]
    assert all(name.startswith("test-") for name in late) and len(late) < 3
    assert not any(".tmp-" in name for name in os.listdir(out))
    victim = out / "train-00001-of-00003.tfrecord"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    write_image(bad, seed=99)  # fixed since
    kept = out / "validation-00002-of-00003.tfrecord"
    os.utime(kept, ns=(1, 1))  # a shard written again would get a new time

    tfrecorder.convert(table, str(out), num_shards=3, progress=False, resume=True,
                       runner=runner)  # either engine continues the other's run
    clean = tmp_path / "clean"
    tfrecorder.convert(table, str(clean), num_shards=3, progress=False)
    assert shard_bytes(out) == shard_bytes(clean)
    assert sorted(os.listdir(out)) == sorted(os.listdir(clean))
    assert "writing train-00001-of-00003.tfrecord again" in caplog.text
    assert kept.stat().st_mtime_ns == 1


def test_resume_needs_an_interrupted_run_of_the_same_table(image_table, tmp_path):
    out = tmp_path / "out"
    broken = tmp_path / "broken.jpg"  # found mid-run (a missing file is found before)
    broken.write_bytes(b"not an image")
    with pytest.raises(tfrecorder.ImageError):
        tfrecorder.convert(image_table.assign(image_uri=lambda t: t.image_uri.where(
            t.index != 23, str(broken))), str(out), num_shards=2, on_error="raise",
            progress=False, resume=True)
    with pytest.raises(ResumeError, match="table's rows"):
        tfrecorder.convert(image_table, str(out), num_shards=2, progress=False, resume=True)
    with pytest.raises(ValueError, match="pass one of them"):
        tfrecorder.convert(image_table, str(out), resume=True, overwrite=True)
    # Without resume, the leftovers are refused with the way forward.
    with pytest.raises(tfrecorder.DatasetExistsError, match="resume=True"):
        tfrecorder.convert(image_table, str(out), num_shards=2, progress=False)


def test_resume_refuses_a_journal_of_format_1_saying_what_to_do(image_table, tmp_path):
    out = tmp_path / "out"
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not an image")
    with pytest.raises(tfrecorder.ImageError):
        tfrecorder.convert(image_table.assign(image_uri=lambda t: t.image_uri.where(
            t.index != 23, str(broken))), str(out), num_shards=2, on_error="raise",
            progress=False, resume=True)
    state = json.loads((out / "resume.json").read_text())  # as a format-1 run left it
    state["header"] = {**state["header"], "format_version": 1, "created_by": "tfrecorder 0.0.9"}
    (out / "resume.json").write_text(json.dumps(state))
    with pytest.raises(ResumeError, match=r"started by tfrecorder 0\.0\.9, which writes "
                       r"format 1 .* pass overwrite=True \(without resume\)"):
        tfrecorder.convert(image_table, str(out), num_shards=2, progress=False, resume=True)


def test_shards_are_uploaded_while_images_are_still_read(store, tmp_path):
    images = remote_images(store, tmp_path, 40, "streaming")
    table = pd.concat([images] * 10, ignore_index=True)  # more rows than reads in flight
    store.set_latency(0.02)
    store.reset_stats()
    out = f"{store.root}/streaming-out"
    tfrecorder.convert(table, out, num_shards=8, num_workers=2, progress=False)
    log = store.stats()["log"]
    uploads = [i for i, line in enumerate(log) if line.split()[0] in ("POST", "PUT")
               and "streaming-out/train-" in line]
    reads = [i for i, line in enumerate(log) if line.startswith("GET")
             and "streaming/" in line]
    assert len(log) < 1000 and uploads and reads
    assert uploads[0] < reads[-1]  # the first shard went up before the last image came in

"""The output folder's life: one run at a time, and a run deletes only what it created.

Races and faults are real: runs in subprocesses, real signals, a full tmpfs.
"""

import contextlib
import glob
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import (
    children,
    read_manifest,
    start_slow_run,
    wait_gone,
    wait_until,
    wait_writing,
    write_image,
)

import tfrecorder
from tfrecorder import ImageError, OutputLockedError, TooManyRejectedError
from tfrecorder.storage import local_files
from tfrecorder.write import output
from tfrecorder.write.output import LOCK


def listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


def private_dirs(pid: int) -> list[str]:
    return glob.glob(os.path.join(tempfile.gettempdir(), f"tfrecorder-run-{pid}-*"))


# --- the lock ------------------------------------------------------------------------------

def test_a_second_run_fails_at_once_naming_the_first_and_touches_nothing(tmp_path):
    """The reported race: an overwrite=True run started beside a running one deleted
    its temporary files, and the first run's clean-up then deleted the second's shards."""
    out = tmp_path / "out"
    first = start_slow_run(tmp_path, out, rows=150)
    try:
        before = listing(out)
        holder = json.loads((out / LOCK).read_text())
        assert holder["pid"] == first.pid
        for options in ({}, {"overwrite": True}, {"resume": True}):
            with pytest.raises(OutputLockedError, match=f"pid {first.pid} on "):
                tfrecorder.convert(pd.DataFrame({"image_uri": [str(tmp_path / "big.png")],
                                                 "label": ["a"]}), out, progress=False,
                                   **options)
        assert set(before) <= set(listing(out)) | {n for n in before if ".tmp-" in n}
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 0, stderr
    finally:
        first.kill()
    report = tfrecorder.verify(out, decode_images=False)
    assert sum(report.num_records.values()) == 150
    assert LOCK not in listing(out)


RUN = """
import sys, pandas as pd, tfrecorder
table = pd.read_csv(sys.argv[1])
try:
    tfrecorder.convert(table, sys.argv[2], seed=int(sys.argv[3]), num_workers=1,
                       progress=False)
except (tfrecorder.OutputLockedError, tfrecorder.DatasetExistsError) as error:
    print(type(error).__name__)
    sys.exit(3)
"""


def test_two_runs_started_together_into_one_folder_one_wins_the_other_says_so(tmp_path):
    paths = [write_image(tmp_path / f"{i}.png", (300, 300), fmt="PNG", seed=i)
             for i in range(60)]
    table_csv = tmp_path / "table.csv"
    pd.DataFrame({"image_uri": paths, "label": ["a", "b"] * 30}).to_csv(table_csv,
                                                                       index=False)
    out = tmp_path / "out"
    runs = [subprocess.Popen([sys.executable, "-c", RUN, str(table_csv), str(out), str(seed)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for seed in (1, 2)]
    results = [(run.wait(timeout=120), run.stdout.read(), run.stderr.read()) for run in runs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 3], results
    winner = next(seed for seed, (code, _, _) in zip((1, 2), results) if code == 0)
    assert read_manifest(out)["options"]["seed"] == winner
    assert tfrecorder.verify(out).ok


def test_a_killed_runs_lock_is_no_lock(tmp_path):
    """The kernel drops an flock with its process: a SIGKILL leaves a lock file that the
    next run takes over."""
    out = tmp_path / "out"
    run = start_slow_run(tmp_path, out)
    workers = children(run.pid)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert all(wait_gone(pid) for pid in workers)  # workers die with their driver
    assert LOCK in listing(out)
    table = pd.DataFrame({"image_uri": [str(tmp_path / "big.png")] * 2, "label": ["a", "b"]})
    result = tfrecorder.convert(table, out, progress=False, overwrite=True)
    assert result.num_records == 2 and LOCK not in listing(out)
    assert not any(".tmp-" in name for name in listing(out))


@pytest.mark.parametrize("store", ["gcs_store", "s3_store"])
def test_a_bucket_folder_is_locked_by_an_object_only_one_run_can_create(request, store):
    store = request.getfixturevalue(store)
    folder = f"{store.root}/locked"
    with output.claim(folder, "run1", overwrite=False, resume=False):
        holder = json.loads(store.read_bytes(f"{folder}/{LOCK}"))
        assert holder["run_id"] == "run1" and holder["pid"] == os.getpid()
        with pytest.raises(OutputLockedError, match="run run1 .* delete .*locked/.tfrecorder"), \
                output.claim(folder, "run2", overwrite=False, resume=False):
            pass
    assert f"{folder}/{LOCK}" not in store.list(folder) if store.list(folder) else True
    # A lock left on this machine by a process that is gone is taken over.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    store.upload_bytes(json.dumps({"run_id": "dead", "host": os.uname().nodename,
                                   "pid": int(gone)}).encode(), f"{folder}/{LOCK}")
    with output.claim(folder, "run3", overwrite=False, resume=False):
        assert json.loads(store.read_bytes(f"{folder}/{LOCK}"))["run_id"] == "run3"


# --- a run deletes only what it created ----------------------------------------------------

def test_a_failed_run_deletes_its_files_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "train-00000-of-00001.tfrecord.bak").write_text("mine too")
    good = [write_image(tmp_path / f"{i}.jpg", seed=i) for i in range(40)]
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff garbage")
    table = pd.DataFrame({"image_uri": good + [str(bad)], "label": ["a", "b"] * 20 + ["a"]})
    with pytest.raises(ImageError):
        tfrecorder.convert(table, out, progress=False, num_shards=4, on_error="raise")
    assert listing(out) == ["notes", "notes.txt", "train-00000-of-00001.tfrecord.bak"]


def test_a_failed_run_removes_the_folders_it_made_and_keeps_those_it_found(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff garbage")
    table = pd.DataFrame({"image_uri": [str(bad)], "label": ["a"]})
    found = tmp_path / "found"
    found.mkdir()
    for out in (tmp_path / "made" / "deeper" / "out", found, found / "out"):
        with pytest.raises(ImageError):
            tfrecorder.convert(table, out, progress=False, on_error="raise")
    assert sorted(os.listdir(tmp_path)) == ["bad.jpg", "found"]
    assert os.listdir(found) == []
    with output.claim(str(tmp_path / "kept"), "run", overwrite=False, resume=False) as run:
        run.write_bytes("rejected.csv", b"a file: its folder stays\n")
    assert listing(tmp_path / "kept") == ["rejected.csv"]


def test_too_many_rejected_rows_fail_the_run_naming_the_reasons(tmp_path):
    good = [write_image(tmp_path / f"{i}.jpg", seed=i) for i in range(4)]
    broken = []
    for i in range(6):
        broken.append(tmp_path / f"broken{i}.jpg")
        broken[-1].write_bytes(b"not an image at all")
    table = pd.DataFrame({"image_uri": good + [str(p) for p in broken],
                          "label": ["a", "b"] * 5})
    out = tmp_path / "out"
    with pytest.raises(TooManyRejectedError, match=r"max_rejected=0.5 .* 10 rows .*"
                                                   r"6 x not an image") as caught:
        tfrecorder.convert(table, out, progress=False, num_workers=1)
    assert caught.value.num_rows == 10 and caught.value.num_rejected >= 6
    assert not out.exists()
    result = tfrecorder.convert(table, out, progress=False, max_rejected=0.6)
    assert (result.num_records, result.num_rejected) == (4, 6)
    with pytest.raises(ValueError, match="max_rejected must be a fraction"):
        tfrecorder.convert(table, tmp_path / "x", max_rejected=60)


def test_paths_relative_to_the_wrong_folder_fail_before_any_image_is_read(tmp_path):
    images = tmp_path / "images"
    paths = [write_image(images / f"{i}.jpg", seed=i) for i in range(6)]
    (tmp_path / "csv").mkdir()
    table_csv = tmp_path / "csv" / "table.csv"  # relative paths resolve against csv/
    table_csv.write_text("image_uri,label\n" + "".join(
        f"images/{os.path.basename(p)},{'ab'[i % 2]}\n" for i, p in enumerate(paths)))
    out = tmp_path / "out"
    with pytest.raises(TooManyRejectedError, match=r"6 of 6 rows name local images that "
                       r"are not files.*6 x no such file.*resolved against") as caught:
        tfrecorder.convert(str(table_csv), out, progress=False)
    assert caught.value.num_rejected == 6 and not out.exists()
    with pytest.raises(ImageError, match=r"line 2 \('images/0.jpg'\): not a file"):
        tfrecorder.convert(str(table_csv), out, progress=False, on_error="raise",
                           max_rejected=1.0)
    assert not out.exists()


def test_the_beam_engine_fails_on_too_many_rejected_rows_too(tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    table = pd.DataFrame({"image_uri": [write_image(tmp_path / "ok.jpg"), str(broken),
                                        str(broken)], "label": ["a", "b", "a"]})
    out = tmp_path / "out"
    with pytest.raises(TooManyRejectedError, match="2 x "):
        tfrecorder.convert(table, out, progress=False, runner="DirectRunner")
    assert not out.exists()
    assert not private_dirs(os.getpid())


# --- signals and private temporary files ---------------------------------------------------

def test_sigterm_stops_a_run_like_ctrl_c(tmp_path, s3_store):
    """Workers stopped, the run's files deleted (in the bucket and in its local spool),
    the CLI's exit status 128 + 15."""
    out = f"{s3_store.root}/sigterm"
    run = start_slow_run(tmp_path, out)
    workers = children(run.pid)
    assert len(workers) == 2 and private_dirs(run.pid)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode != 0 and "Terminated" in stderr, stderr
    assert "No dataset was written" in stderr
    assert all(wait_gone(pid) for pid in workers)
    assert s3_store.list(out) == [] and not private_dirs(run.pid)


def test_private_folders_are_0700_and_those_of_dead_processes_are_swept(tmp_path):
    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)
    left = Path(tempfile.gettempdir(), f"tfrecorder-run-{gone}-spool-a1b2c3d4")
    left.mkdir()
    (left / "rows.jsonl").write_text("a full copy of someone's table")
    alike = Path(tempfile.gettempdir(), f"tfrecorder-run-{gone}-spool-mine")  # not ours
    alike.mkdir()
    with output.private_temp_dir("test") as path:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
        assert not left.exists() and alike.exists()
        with local_files.create_private(os.path.join(path, "f")) as file:
            file.write(b"x")
        assert stat.S_IMODE(os.stat(os.path.join(path, "f")).st_mode) == 0o600
    assert not os.path.exists(path)
    alike.rmdir()


def test_temporary_files_are_private_and_finished_files_are_not(tmp_path):
    path = tmp_path / "file"
    with output.fs.atomic_write(str(path), ".tmp-x") as file:
        file.write(b"data")
        assert stat.S_IMODE(os.stat(f"{path}.tmp-x").st_mode) == 0o600
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask


def test_a_temporary_name_never_writes_through_a_planted_link(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("precious")
    os.symlink(outside, tmp_path / "file.tmp-x")
    with pytest.raises(FileExistsError), output.fs.atomic_write(str(tmp_path / "file"),
                                                                ".tmp-x"):
        pass
    assert outside.read_text() == "precious"


# --- a full disk ------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 512 KB tmpfs (needs root, as in CI)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    with contextlib.suppress(Exception):
        subprocess.run(["umount", str(disk)], check=True)


def test_a_disk_that_fills_while_rejected_csv_is_written_leaves_nothing(tmp_path,
                                                                        small_disk):
    """The shards fit; rejected.csv (2,000 rows with long reasons) does not."""
    good = [write_image(tmp_path / f"{i}.jpg", seed=i) for i in range(8)]
    broken = tmp_path / ("broken-" + "x" * 200 + ".jpg")
    broken.write_bytes(b"not an image")
    table = pd.DataFrame({"image_uri": good + [str(broken)] * 2000,
                          "label": ["a", "b"] * 1004})
    out = small_disk / "out"
    with pytest.raises(OSError, match="No space left"):
        tfrecorder.convert(table, out, progress=False, max_rejected=1.0, num_workers=1)
    assert not out.exists()
    assert os.statvfs(small_disk).f_bfree == os.statvfs(small_disk).f_blocks


# --- only regular files are read ----------------------------------------------------------

def test_a_fifo_is_a_rejected_row_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    table = pd.DataFrame({"image_uri": [write_image(tmp_path / "ok.jpg"), str(fifo),
                                        str(tmp_path)], "label": ["a", "b", "a"]})
    signal.alarm(60)  # a hang fails the test instead of the suite
    try:
        result = tfrecorder.convert(table, tmp_path / "out", progress=False,
                                    max_rejected=1.0)
    finally:
        signal.alarm(0)
    assert result.num_rejected == 2
    reasons = pd.read_csv(result.rejected_path)["reason"].tolist()
    assert "a FIFO, not a regular file" in reasons[0]
    assert "a folder, not a regular file" in reasons[1]


BEAM_RUN = """
import sys, pandas as pd, tfrecorder
df = pd.DataFrame({"image_uri": [sys.argv[1]] * 2000, "label": ["a", "b"] * 1000})
tfrecorder.convert(df, sys.argv[2], runner="DirectRunner", progress=False)
"""


def test_sigterm_stops_a_beam_driver_and_removes_its_staged_copy_of_the_table(tmp_path):
    image = write_image(tmp_path / "big.png", (1600, 1600), fmt="PNG")
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-c", BEAM_RUN, image, str(out)],
                           stderr=subprocess.PIPE, text=True)
    wait_writing(run, out, seconds=120)
    # (the run writes its journal before it stages the table: on a loaded machine the
    # staged copy can come a moment after the first temporary file)
    wait_until(run, lambda: any("-staging-" in path for path in private_dirs(run.pid)),
               seconds=120)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode != 0 and "Terminated" in stderr, stderr
    assert not private_dirs(run.pid) and not out.exists()


HOLD_AND_DIE = """
import os, signal, sys, time
from tfrecorder.write import output
with output.claim(sys.argv[1], "killed-run", overwrite=True, resume=False):
    if os.fork() == 0:  # a worker, which shares the lock's file, dies a second later
        time.sleep(1.5)
        os._exit(0)
    print("locked", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_runs_lock_is_taken_once_its_dying_workers_let_go(tmp_path):
    """A killed driver's forked workers hold its flock until they are gone too (they
    die with it, a moment later): the next run waits for them instead of refusing."""
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-c", HOLD_AND_DIE, str(out)],
                           stdout=subprocess.PIPE, text=True)
    assert run.stdout.readline() == "locked\n"
    run.wait()
    started = time.monotonic()
    with output.claim(str(out), "next-run", overwrite=True, resume=False):
        assert time.monotonic() - started > 0.5  # it did wait for the worker


def test_a_resumable_runs_clean_up_keeps_its_shards_but_not_what_finishing_wrote(tmp_path):
    """Interrupted between the TFDS files and the manifest, a resumable run keeps its
    committed shards for `resume=True`, but no file a reader would take for a finished
    dataset: not the manifest, nor the files TensorFlow Datasets reads."""
    out = tmp_path / "out"
    with output.claim(str(out), "run", overwrite=False, resume=False) as folder:
        folder.clear([])
        names = ["train-00000-of-00001.tfrecord", "rejected.csv", "dataset_info.json",
                 "features.json", "label.labels.txt"]
        for name in names:
            folder.write_bytes(name, b"x")
        folder.clean_up(keep_committed=True)
    assert sorted(os.listdir(out)) == ["train-00000-of-00001.tfrecord"]

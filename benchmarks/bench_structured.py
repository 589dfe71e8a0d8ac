"""Rows/s and memory writing tables without images, beside the bare tf.train.Example loop
and TFX's C++ encoder.

    .venv/bin/python benchmarks/bench_structured.py [--sizes 1000000,10000000] [--rounds 2]

The table has the five columns of issue 16: a text key, a float, an int, a categorical
label and a list of 4 floats (NumPy arrays, as pandas users and Parquet give them). The
bare loop is the TF tutorial's way with protobuf's C implementation: a
`tf.train.Example` per row, written with `tf.io.TFRecordWriter`, with no validation,
splits, shuffle or manifest. tfx_bsl's `RecordBatchToExamplesEncoder` (C++, from Arrow;
TFX and Ray Data's fast path use it) encodes the same table, converted to Arrow in the
timed part, and `tf.io.TFRecordWriter` frames it: one process, no splits, shuffle or
manifest. It is installed on first use into .venv/tfx-bsl, beside and never into the
venv. tfrecorder runs with its defaults (2 workers here).

Each contender runs in a fresh process that builds the same table from a seed (untimed),
and the three alternate within a round; the median of the per-round ratios is reported,
with their spread.
The tfrecorder runs also report the DataFrame's own size (`memory_usage(deep=True)`),
the driver's RSS with the table built and its peak during the conversion (VmHWM, reset
before it), and the most memory a worker held for itself (Private_* in smaps_rollup:
its RSS would also count the pages it shares with the driver by fork). The bare loop
converts each array with `.tolist()`, its fastest form (0.25 s for 100k rows, 0.38 s
passing the array).
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
CONTENDERS = ("bare tf.train.Example loop, 1 process", "tfrecorder, 2 workers",
              "tfx_bsl RecordBatchToExamplesEncoder, 1 process")
BARE, OURS, TFX_BSL = CONTENDERS
# TFX's C++ encoder, in a folder of its own: never a dependency, and never replacing our
# TensorFlow, NumPy or pyarrow (it imports against them).
TFX_BSL_PINS = ("tfx-bsl==1.21.0", "tensorflow-metadata==1.21.0")
TFX_BSL_DIR = os.path.join(os.path.dirname(HERE), ".venv", "tfx-bsl")


def build_table(rows: int) -> pd.DataFrame:
    rng = np.random.RandomState(0)
    return pd.DataFrame({
        "key": [f"customer-{i}" for i in range(rows)],
        "spend": rng.randn(rows) * 100,
        "visits": rng.randint(0, 1000, rows),
        "label": pd.Categorical(rng.choice(["stays", "leaves", "unsure"], rows)),
        "embedding": [row.copy() for row in rng.rand(rows, 4)],  # each owns its floats
    })


def bare_loop(table: pd.DataFrame, output: str) -> None:
    import tensorflow as tf

    labels = table["label"].cat.codes.tolist()
    with tf.io.TFRecordWriter(output) as writer:
        for key, spend, visits, label, embedding in zip(
                table["key"].tolist(), table["spend"].tolist(), table["visits"].tolist(),
                labels, table["embedding"].tolist()):
            feature = {
                "key": tf.train.Feature(bytes_list=tf.train.BytesList(value=[key.encode()])),
                "spend": tf.train.Feature(float_list=tf.train.FloatList(value=[spend])),
                "visits": tf.train.Feature(int64_list=tf.train.Int64List(value=[visits])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                "embedding": tf.train.Feature(
                    float_list=tf.train.FloatList(value=embedding.tolist())),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def tfx_bsl_encoder():
    """tfx_bsl's `RecordBatchToExamplesEncoder`, installed on first use into TFX_BSL_DIR
    (`pip install --target DIR --no-deps`, as TFX's docs give no other way beside
    TensorFlow 2.21)."""
    if not os.path.isdir(os.path.join(TFX_BSL_DIR, "tfx_bsl")):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", TFX_BSL_DIR,
                        "--no-deps", *TFX_BSL_PINS], check=True)
    sys.path.append(TFX_BSL_DIR)
    from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

    return RecordBatchToExamplesEncoder()


def tfx_bsl_records(table: pd.DataFrame, output: str, encoder) -> None:
    """The table as the encoder takes it (an Arrow RecordBatch of list columns, built
    the fastest way we found: zero-copy text, one NumPy stack of the float lists), encoded
    16,384 rows at a time and framed by `tf.io.TFRecordWriter`."""
    import pyarrow as pa
    import tensorflow as tf

    rows = len(table)
    ones = np.arange(rows + 1, dtype=np.int32)

    def lists(values, width=1) -> pa.Array:
        return pa.ListArray.from_arrays(ones * width, values)

    batch = pa.RecordBatch.from_arrays([
        lists(pa.array(table["key"].array).cast(pa.binary())),
        lists(pa.array(table["spend"].to_numpy(dtype=np.float32))),
        lists(pa.array(table["visits"].to_numpy(dtype=np.int64))),
        lists(pa.array(table["label"].cat.codes.to_numpy().astype(np.int64))),
        lists(pa.array(np.stack(table["embedding"].to_numpy()).astype(np.float32).ravel()),
              4),
    ], ["key", "spend", "visits", "label", "embedding"])
    with tf.io.TFRecordWriter(output) as writer:
        for start in range(0, rows, 16384):
            for record in encoder.encode(batch.slice(start, 16384)):
                writer.write(record)


def _status_kb(field: str, pid="self") -> int:
    """A memory field of /proc/PID/status: VmRSS (now) or VmHWM (peak since reset)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))


def _private_kb(pid) -> int:
    """Memory a forked worker holds for itself (Private_Clean + Private_Dirty): its RSS
    also counts the pages it shares with the driver, which cost nothing more."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith("Private_"))


def _watch_workers(peaks: dict, done: threading.Event) -> None:
    """Workers exit before the run returns: their memory is sampled meanwhile."""
    me = os.getpid()
    while not done.wait(0.05):
        try:
            with open(f"/proc/{me}/task/{me}/children") as f:
                children = f.read().split()
            for pid in children:
                peaks[pid] = max(peaks.get(pid, 0), _private_kb(pid))
        except (OSError, StopIteration):
            pass


def contender(name: str, rows: int, out: str) -> dict:
    table = build_table(rows)
    if name == BARE:
        import tensorflow  # noqa: F401  (imports are not timed)

        started = time.perf_counter()
        bare_loop(table, os.path.join(out, "bare.tfrecord"))
        return {"seconds": time.perf_counter() - started}
    if name == TFX_BSL:
        import tensorflow  # noqa: F401

        encoder = tfx_bsl_encoder()
        started = time.perf_counter()
        tfx_bsl_records(table, os.path.join(out, "tfx_bsl.tfrecord"), encoder)
        return {"seconds": time.perf_counter() - started}
    import tfrecorder

    output = os.path.join(out, "structured")
    shutil.rmtree(output, ignore_errors=True)
    table_mb = table.memory_usage(deep=True).sum() / 2**20
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM := VmRSS: the peak from here
        f.write("5")
    before_kb, peaks, done = _status_kb("VmRSS"), {}, threading.Event()
    threading.Thread(target=_watch_workers, args=(peaks, done), daemon=True).start()
    started = time.perf_counter()
    result = tfrecorder.convert(table, output, progress=False)
    seconds = time.perf_counter() - started
    done.set()
    assert result.num_records == rows, result
    return {"seconds": seconds, "table_mb": table_mb, "before_mb": before_kb / 1024,
            "driver_peak_mb": _status_kb("VmHWM") / 1024,
            "worker_peak_mb": max(peaks.values(), default=0) / 1024}


def in_fresh_process(name: str, rows: int, out: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--contender", name, "--rows", str(rows),
                           "--out", out], capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr[-5000:])
        done.check_returncode()
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--without-bare-loop", action="store_true",
                        help="leave out the bare loop (3 minutes a round at 10M rows)")
    parser.add_argument("--out", default="/tmp/tfr-bench-structured")
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.contender:
        print(json.dumps(contender(args.contender, args.rows, args.out)))
        return
    os.makedirs(args.out, exist_ok=True)
    print(f"Machine: {platform.platform()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; median of {args.rounds} rounds\n")
    print("| rows | bare loop rows/s | tfx_bsl rows/s | tfrecorder rows/s "
          "| tfrecorder / bare loop | tfrecorder / tfx_bsl "
          "| DataFrame | driver with the table | driver peak | driver peak / DataFrame "
          "| worker peak, private |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rows in map(int, args.sizes.split(",")):
        names = CONTENDERS[1:] if args.without_bare_loop else CONTENDERS
        rounds = [{name: in_fresh_process(name, rows, args.out) for name in names}
                  for _ in range(args.rounds)]
        rates = {name: [rows / r[name]["seconds"] if name in r else math.nan for r in rounds]
                 for name in CONTENDERS}
        memory = max((r[OURS] for r in rounds), key=lambda m: m["driver_peak_mb"])
        bare = "not run" if args.without_bare_loop else f"{statistics.median(rates[BARE]):,.0f}"
        print(f"| {rows:,} | {bare} "
              f"| {statistics.median(rates[TFX_BSL]):,.0f} "
              f"| {statistics.median(rates[OURS]):,.0f} "
              f"| {_ratios(rates[OURS], rates[BARE])} | {_ratios(rates[OURS], rates[TFX_BSL])} "
              f"| {memory['table_mb']:,.0f} MB "
              f"| {memory['before_mb']:,.0f} MB | {memory['driver_peak_mb']:,.0f} MB "
              f"| {memory['driver_peak_mb'] / memory['table_mb']:.2f} "
              f"| {memory['worker_peak_mb']:,.0f} MB |", flush=True)


def _ratios(ours: list, theirs: list) -> str:
    """The median of the per-round ratios, and their spread (lowest to highest)."""
    ratios = [o / t for o, t in zip(ours, theirs)]
    if any(math.isnan(r) for r in ratios):
        return "not run"
    return (f"**{statistics.median(ratios):.2f}x** "
            f"({min(ratios):.2f}-{max(ratios):.2f})")

if __name__ == "__main__":
    main()

"""The Beam engine on the DirectRunner, beside the local engine and TFRecorder 2.0's way.

    cd benchmarks && ../.venv/bin/python bench_beam.py [--images 1000] [--rounds 2]

Same JPEGs as bench_write.py. Contenders (each in a fresh process, imports not timed):
- tfrecorder's local engine (2 workers, validate=True);
- tfrecorder's Beam engine on the DirectRunner, multi-processing mode, 2 workers;
- a pipeline written the way TFRecorder 2.0 did it: `beam.Create` of the DataFrame's rows,
  Pillow decode, base64 raw pixels, a `tf.train.Example` per row, `WriteToTFRecord`, on
  the DirectRunner.

`--launcher` measures what submitting a Dataflow job costs the launcher (the process
that calls `convert`), as a dry run (Beam builds the job and sends nothing), for a
source of 10 and of 1,000 Parquet files of `--rows-per-file` rows (`split`,
`image_uri` gs://bucket/images/NNNNNNN.jpg, `label` of 10 classes): one real file, the
others hard links of it. `--source` says how the source is named (`{dir}/*.parquet`, or
`{dir}/` for a folder). `--in-bucket` puts the files in the bucket instead (copies of
the one file, uploaded before the runs; `{dir}` is then gs://bucket/launcher-ROWS-FILES),
as a Dataflow job's source would be. Each run is a fresh process, stopped after
`--timeout` seconds; it reports its peak RSS (VmHWM: `ru_maxrss` would count the peak of
the process it was forked from) and the seconds from the call to the return.
`gs://bucket` is tests/stores.py's GCS emulator, and Beam's credentials are made
anonymous in the launcher before the clock starts: without, Beam's first GCS client
retries `google.auth.default()` for 15-30 s (`--credentials-wait` measures it once).

`--no-images` converts a table without images (`--rows` rows in `--files` Parquet files:
split UNASSIGNED, an int label, number and text columns) with the local engine (2
workers) and the Beam engine on the DirectRunner (multi-processing, 2 workers): rows/s,
and the peak memory of every process (the launcher and each worker: their VmHWM and
private memory, read from /proc every 0.2 s).

    cd benchmarks && ../.venv/bin/python bench_beam.py --launcher [--rows-per-file 1000000]
    cd benchmarks && ../.venv/bin/python bench_beam.py --launcher --in-bucket [--source '{dir}/']
    cd benchmarks && ../.venv/bin/python bench_beam.py --no-images [--rows 10000000]
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import harness
from bench_structured import _status_kb
from bench_write import build_images

import tfrecorder

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import stores  # noqa: E402

BUCKET = "bucket"
DRY_RUN = {"dry_run": True, "project": "my-project", "region": "us-central1",
           "temp_location": f"gs://{BUCKET}/tmp"}  # Beam refuses a project ID as short as "p"
TWO_WORKERS = {"local": {"num_workers": 2},
               "direct": {"runner": "DirectRunner",
                          "beam_options": {"direct_running_mode": "multi_processing",
                                           "direct_num_workers": 2}}}

def tfrecorder_2_style(table, output: str) -> None:
    """TFRecorder 2.0's pipeline shape (beam_pipeline.py / beam_image.py), condensed."""
    import base64

    import apache_beam as beam
    import tensorflow as tf
    from PIL import Image

    def load_and_encode(row):
        with tf.io.gfile.GFile(row["image_uri"], "rb") as f:
            image = Image.open(f)
            image.load()
        feature = {
            "image": base64.b64encode(image.tobytes(), altchars=b"-_"),
            "image_name": row["image_uri"].encode(),
            "image_width": image.size[0], "image_height": image.size[1],
            "image_channels": 1 if "L" in image.mode else 3,
            "label": row["label"].encode(), "split": row["split"].encode(),
        }
        return tf.train.Example(features=tf.train.Features(feature={
            k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) if isinstance(v, bytes)
            else tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
            for k, v in feature.items()})).SerializeToString()

    with beam.Pipeline(runner="DirectRunner") as pipeline:
        _ = (pipeline
             | beam.Create(table.to_dict("records"))
             | beam.Map(load_and_encode)
             | beam.io.WriteToTFRecord(os.path.join(output, "train")))


def contender(name: str, table_pickle: str, out: str) -> float:
    import pandas as pd

    table = pd.read_pickle(table_pickle)
    output = os.path.join(out, name)
    shutil.rmtree(output, ignore_errors=True)
    start = time.perf_counter()
    if name == "local":
        tfrecorder.convert(table, output, progress=False)
    elif name == "beam":
        tfrecorder.convert(table, output, progress=False, runner="DirectRunner",
                           beam_options={"direct_running_mode": "multi_processing",
                                         "direct_num_workers": os.cpu_count()})
    else:
        os.makedirs(output)
        tfrecorder_2_style(table, output)
    return time.perf_counter() - start


# ---- The launcher of a Dataflow job, and tables without images. ----

def image_table_file(path: str, rows: int) -> None:
    import numpy as np
    import pandas as pd

    index = np.arange(rows)
    pd.DataFrame({
        "split": np.array(["TRAIN"] * 8 + ["VALIDATION", "TEST"])[index % 10],
        "image_uri": [f"gs://{BUCKET}/images/{i:07d}.jpg" for i in range(rows)],
        "label": pd.Series([f"class{i}" for i in range(10)])[index % 10].to_numpy(),
    }).to_parquet(path)


def linked_files(folder: str, files: int, rows: int) -> str:
    """`folder` with `files` Parquet files of `rows` rows: part-00000 made once, the
    others hard links of it."""
    first = os.path.join(folder, "part-00000.parquet")
    if not os.path.exists(first):
        os.makedirs(folder, exist_ok=True)
        image_table_file(folder + ".tmp", rows)  # outside: the folder holds only the table
        os.replace(folder + ".tmp", first)
    for index in range(1, files):
        path = os.path.join(folder, f"part-{index:05d}.parquet")
        if not os.path.exists(path):
            os.link(first, path)
    return folder


def bucket_files(url: str, folder: str, files: int, rows: int) -> str:
    """`gs://bucket/<folder's name>` with `files` copies of `linked_files`' first file,
    put at once (fsspec uploads a list concurrently): the emulator keeps objects in
    memory, so once per start."""
    first = os.path.join(linked_files(folder, 1, rows), "part-00000.parquet")
    remote = f"gs://{BUCKET}/{os.path.basename(folder)}"
    stores.Store("gcs", url, BUCKET, {}).fs().put(
        [first] * files, [f"{remote}/part-{index:05d}.parquet" for index in range(files)])
    return remote


def table_without_images(folder: str, rows: int, files: int) -> str:
    """`rows` distinct rows in `files` Parquet files: split UNASSIGNED, an int label (10
    classes), two numbers and two texts."""
    import numpy as np
    import pandas as pd

    done = folder + ".done"  # outside: the folder holds only the table
    if os.path.exists(done):
        return folder
    os.makedirs(folder, exist_ok=True)
    bounds = np.linspace(0, rows, files + 1, dtype=np.int64)
    for part, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
        rng = np.random.default_rng(part)
        index = np.arange(start, stop)
        pd.DataFrame({
            "split": "UNASSIGNED",
            "label": (index % 10).astype(np.int64),
            "spend": rng.normal(100, 30, len(index)),
            "visits": rng.integers(0, 1000, len(index)),
            "key": [f"customer-{i}" for i in index.tolist()],
            "city": np.array(["Lyon", "Oslo", "Quito", "Pune", "Perth"])[index % 5],
        }).to_parquet(os.path.join(folder, f"part-{part:05d}.parquet"))
    open(done, "w").close()
    return folder


def launcher(source: str, out: str, anonymous: bool = True) -> dict:
    """In the fresh process: a Dataflow dry run of `source`, imports not timed."""
    importlib.import_module("tfrecorder.write.engines.beam")  # and Beam: not timed
    if anonymous:
        stores.use_anonymous_gcs_credentials()
    before = _status_kb("VmHWM") / 1024
    start = time.perf_counter()
    tfrecorder.convert(source, out, runner="DataflowRunner", progress=False,
                       beam_options=DRY_RUN)
    return {"seconds": time.perf_counter() - start, "before_mb": before,
            "peak_mb": _status_kb("VmHWM") / 1024}


def without_images(engine: str, source: str, out: str) -> dict:
    """In the fresh process: one conversion of the table without images. For
    `external`, the worker pool is this process's child (its processes are sampled
    too), and its processes load `finish_probe`, which measures the finish step."""
    if engine != "local":
        importlib.import_module("tfrecorder.write.engines.beam")  # and Beam: not timed
    output = os.path.join(out, f"no-images-{engine}")
    shutil.rmtree(output, ignore_errors=True)
    probe = os.path.join(out, "finish-probe.json")
    for stale in (probe, probe + ".writes"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)
    with _worker_pool(engine, probe) as options:
        start = time.perf_counter()
        result = tfrecorder.convert(source, output, progress=False, **options)
        seconds = time.perf_counter() - start
    shutil.rmtree(output, ignore_errors=True)
    found = {"seconds": seconds, "records": result.num_records,
             "peak_mb": _status_kb("VmHWM") / 1024}
    if os.path.exists(probe):
        with open(probe) as file:
            found["finish"] = json.load(file)
    if os.path.exists(probe + ".writes"):
        with open(probe + ".writes") as file:
            writes = [json.loads(line) for line in file]
        found["writes"] = {"shards": len(writes),
                           "records_mb": max(w["records_mb"] for w in writes),
                           "python_peak_mb": max(w["python_peak_mb"] for w in writes)}
    return found


@contextlib.contextmanager
def _worker_pool(engine: str, probe: str):
    """`convert`'s options for `engine`: for `external`, the PortableRunner (an embedded
    job service) on an EXTERNAL worker pool of 2 harnesses in processes of their own,
    as the tests run Beam (tests/beam_workers.py)."""
    if engine != "external":
        yield TWO_WORKERS[engine]
        return
    import beam_workers

    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "finish_probe"), os.path.join(here, ".."),
             os.environ.get("PYTHONPATH", "")]
    port = beam_workers.free_port()
    with stores._environment({"PYTHONPATH": os.pathsep.join(filter(None, paths)),
                              "TFRECORDER_FINISH_PROBE": probe}):
        pool = beam_workers.serve("apache_beam.runners.worker.worker_pool_main",
                                  f"--service_port={port}")
    try:
        beam_workers.wait_for(port)
        yield {"runner": "PortableRunner",
               "beam_options": {"job_endpoint": "embed", "environment_type": "EXTERNAL",
                                "environment_config": f"localhost:{port}",
                                "sdk_worker_parallelism": 2}}
    finally:
        beam_workers.stop(pool)


def child(args, contender_name: str, source: str, out: str):
    """Runs one contender in a fresh process; its JSON (None if it was stopped), the
    peaks of its processes and why it was stopped."""
    command = [sys.executable, __file__, "--contender", contender_name, "--input", source,
               "--out", out]
    line, peaks, stopped = harness.sampled_in_fresh_process(
        command, args.timeout, limit_mb=args.memory_limit_mb)
    return (json.loads(line) if line else None), peaks, stopped


@contextlib.contextmanager
def gcs_emulator():
    """tests/stores.py's GCS emulator with the bucket `gs://bucket`, and the environment
    that points clients at it (inherited by the contenders)."""
    proc, url = stores._start("gcs", BUCKET)
    try:
        with tempfile.TemporaryDirectory() as empty, \
                stores._environment(stores._gcs_env(url, empty)):
            yield url
    finally:
        stores._stop(proc)


def _role(command: str) -> str:
    """What a process of the tree is, from its command line."""
    words = command.split()
    if words[0].endswith("sh"):
        return "shell starting a worker"
    if "-m" in words[:-1]:
        return f"`{words[words.index('-m') + 1].rsplit('.', 1)[-1]}` worker"
    return "forked worker"


def _machine() -> str:
    return (f"{platform.platform()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}")


def launcher_main(args) -> None:
    print(f"Machine: {_machine()}; {args.rows_per_file:,} rows a file, source "
          f"{args.source!r}{' in the bucket' if args.in_bucket else ''}, timeout "
          f"{args.timeout:.0f} s\n", flush=True)
    print("| files | rows | seconds to submit | launcher peak RSS | after the imports |")
    print("|---|---|---|---|---|", flush=True)
    folder = os.path.join(args.out, f"launcher-{args.rows_per_file}")
    with gcs_emulator() as url:
        runs = [(files, "launcher") for files in args.files]
        if args.credentials_wait:
            runs.append((args.files[0], "launcher-credentials"))
        uploaded = {}
        for files, name in runs:
            if args.in_bucket and files not in uploaded:
                start = time.perf_counter()
                uploaded[files] = bucket_files(url, f"{folder}-{files}", files,
                                               args.rows_per_file)
                print(f"({files:,} files put in {uploaded[files]} in "
                      f"{time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
            source = args.source.format(dir=uploaded[files] if args.in_bucket else linked_files(
                f"{folder}-{files}", files, args.rows_per_file))
            out = f"gs://{BUCKET}/out-{files}-{time.time_ns()}"  # a stopped run's lock stays
            found, peaks, stopped = child(args, name, source, out)
            rows = f"{files * args.rows_per_file:,}"
            label = f"{files:,}" + (" (Beam's credentials lookup)" if name != "launcher"
                                    else "")
            if found is None:
                peak = peaks.get(min(peaks), {}).get("rss_kb", 0) / 1024 if peaks else 0
                print(f"| {label} | {rows} | {stopped} | >= {peak:,.0f} MB | |", flush=True)
            else:
                print(f"| {label} | {rows} | {found['seconds']:.1f} "
                      f"| {found['peak_mb']:,.0f} MB | {found['before_mb']:,.0f} MB |",
                      flush=True)


def no_images_main(args) -> None:
    folder = table_without_images(os.path.join(args.out, f"no-images-{args.rows}-{args.files[0]}"),
                                  args.rows, args.files[0])
    sources = {"local": args.local_source.format(dir=folder),
               "direct": args.source.format(dir=folder),
               "external": args.source.format(dir=folder)}
    print(f"Machine: {_machine()}; {args.rows:,} rows in {args.files[0]} Parquet files, "
          f"no images\n", flush=True)
    print("| engine | rows/s | seconds | process | peak RSS | peak private |")
    print("|---|---|---|---|---|---|", flush=True)
    names = {"local": "local engine, 2 workers",
             "direct": "Beam engine, DirectRunner multi-processing, 2 workers",
             "external": "Beam engine, PortableRunner, EXTERNAL pool of 2 harnesses"}
    finishes = []
    for engine in args.engines:
        found, peaks, stopped = child(args, f"no-images-{engine}", sources[engine], args.out)
        if found and "finish" in found:
            finishes.append((found["finish"], found.get("writes")))
        speed = (f"{args.rows / found['seconds']:,.0f} | {found['seconds']:.0f}" if found
                 else f"{stopped} | ")
        for pid in sorted(peaks):
            peak = peaks[pid]
            rss = peak["rss_kb"] / 1024
            if pid == min(peaks) and found:  # its peak as it returned
                rss = max(rss, found["peak_mb"])
            what = "launcher" if pid == min(peaks) else _role(peak["name"])
            print(f"| {names[engine]} | {speed} | {what} | {rss:,.0f} MB "
                  f"| {peak['private_kb'] / 1024:,.0f} MB |", flush=True)
            names[engine], speed = "", " | "
    for finish, writes in finishes:  # (`finish_probe`)
        print(f"\nThe finish step ({finish['shards']} shards): {finish['seconds']:.1f} s, "
              f"its worker's RSS {finish['rss_before_mb']:,.0f} MB before it, peak "
              f"{finish['rss_growth_mb']:,.1f} MB above that; Python allocations' peak "
              f"{finish['python_peak_mb']:,.1f} MB", flush=True)
        if writes:
            print(f"Writing a shard ({writes['shards']} shards): its records at most "
                  f"{writes['records_mb']:,.1f} MB, the step's Python allocations' peak at "
                  f"most {writes['python_peak_mb']:,.1f} MB", flush=True)


def main():
    parser = harness.parser(__doc__.splitlines()[0], images=1000, rounds=2)
    parser.add_argument("--launcher", action="store_true",
                        help="the launcher's peak memory and time to submit a Dataflow dry run")
    parser.add_argument("--no-images", action="store_true",
                        help="a table without images: local engine against DirectRunner")
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=10_000_000,
                        help="--no-images: the table's rows")
    parser.add_argument("--files", type=lambda text: [int(n) for n in text.split(",")],
                        help="--launcher: the sources' file counts (10,1000); --no-images: "
                             "the table's (10)")
    parser.add_argument("--source", default="{dir}/*.parquet",
                        help="how the source is named, {dir} its folder (a glob is planned "
                             "by the pipeline, as is a folder of Parquet files)")
    parser.add_argument("--local-source", default="{dir}/*.parquet",
                        help="--no-images: the same, for the local engine")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    parser.add_argument("--engines", type=lambda text: text.split(","),
                        default=["local", "direct"],
                        help="--no-images: local, direct, external (the PortableRunner on "
                             "an EXTERNAL worker pool, its finish step measured)")
    parser.add_argument("--memory-limit-mb", type=float, default=16_000,
                        help="stop a run whose processes' RSS adds up to more")
    parser.add_argument("--in-bucket", action="store_true",
                        help="--launcher: the source's files in the emulator's bucket, "
                             "{dir} a gs:// folder")
    parser.add_argument("--credentials-wait", action="store_true",
                        help="--launcher: one more run with Beam's own credentials lookup")
    args = parser.parse_args()
    if args.contender in ("launcher", "launcher-credentials"):
        print(json.dumps(launcher(args.input, args.out, args.contender == "launcher")))
        return
    if args.contender and args.contender.startswith("no-images-"):
        engine = args.contender.removeprefix("no-images-")
        print(json.dumps(without_images(engine, args.input, args.out)))
        return
    if args.contender:
        print(contender(args.contender, args.input, args.out))
        return
    if args.launcher:
        args.files = args.files or [10, 1000]
        return launcher_main(args)
    if args.no_images:
        args.files = args.files or [10]
        return no_images_main(args)
    table = build_images(os.path.join(args.out, "images"), args.images)
    pickle = os.path.join(args.out, f"beam_table_{args.images}.pkl")
    table.to_pickle(pickle)
    names = ["local", "beam", "tfrecorder_2"]
    rounds = harness.rounds(
        names, lambda name: harness.seconds_in_fresh_process(__file__, name, pickle, args.out),
        len(table), args.rounds)
    rate = {name: harness.median(rounds, name) for name in names}
    print(f"\n{len(table)} JPEGs, {os.cpu_count()} cores, median of {args.rounds} rounds\n")
    print("| contender | images/s |")
    print("|---|---|")
    print(f"| tfrecorder, local engine (validate=True) | {rate['local']:.0f} |")
    print(f"| tfrecorder, Beam engine, DirectRunner multi-processing | {rate['beam']:.0f} |")
    print(f"| TFRecorder 2.0-style pipeline, DirectRunner | {rate['tfrecorder_2']:.0f} |")


if __name__ == "__main__":
    main()

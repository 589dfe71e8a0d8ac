"""Images in a bucket: gs:// and s3:// conversions against local files and the I/O floor.

    .venv/bin/python benchmarks/bench_remote.py [--images 2000] [--rounds 5] [--quick]
    .venv/bin/python benchmarks/bench_remote.py --clients [--images 2000] [--rounds 3]

Same JPEGs as bench_write.py, served by the local object stores of tests/stores.py
(gcp-storage-emulator and moto's S3 server, each a Python process on this machine) with
a latency added to every request. Each round runs, each in a fresh process:

- `tfrecorder.convert` of the local files (no latency);
- per latency (40 and 100 ms): the I/O floor, a 64-way concurrent fetch of the same
  objects through the same server (64 threads reading with the library's own
  `fs.read_bytes`, so the same fsspec client and settings),
  then `tfrecorder.convert` of the same table with gs:// URIs;
- the same two on S3 (moto), at 40 ms.

Conversions take a DataFrame (image_uri, label) with default options (validate=True,
2 workers) and write to a local folder. Target: gs:// >= 0.8 x min(local, floor) at each
latency. Also reported, per remote contender (medians): CPU seconds of the contender's
driver, its workers and the server process, the most requests the server had in flight,
and where the driver's time went; then the peak memory (VmHWM) of driver and workers for
1x and 4x the rows, local and gs:// at 40 ms.

`--clients` compares the URL layers instead: the same objects at 40 ms fetched from 64
threads with gcsfs (fsspec) and with Apache Beam's `GcsIO().open(uri).read()` (one
GcsIO shared by the threads, and one per read as `FileSystems` makes them), and each
client's import time in a fresh process.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import harness
import numpy as np
import pandas as pd
from bench_write import build_images, peak_memory, tfrecorder_run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import stores  # noqa: E402

FETCH_THREADS = 64
LATENCIES = (0.04, 0.1)
S3_LATENCIES = (0.04,)
CLIENT_LATENCY = 0.04
IMPORTS = {"gcsfs": "from gcsfs.core import GCSFileSystem",
           "beam": "from apache_beam.io.gcp.gcsio import GcsIO"}


# ---- In the contender's process. ----

def remote_table(table: pd.DataFrame, root: str) -> pd.DataFrame:
    """The same table, its images at `root/images/<file name>`."""
    return table.assign(image_uri=[f"{root}/images/{os.path.basename(p)}"
                                   for p in table["image_uri"]])


def fetch_all(uris: list[str], read, threads: int = FETCH_THREADS) -> int:
    """Reads every URI with `threads` reads in flight; returns the bytes read."""
    with ThreadPoolExecutor(threads) as pool:
        return sum(len(data) for data in pool.map(read, uris))


def beam_reader(shared: bool):
    """Beam's way to read a whole gs:// object, anonymous against the emulator."""
    stores.use_anonymous_gcs_credentials()
    from apache_beam.io.gcp.gcsio import GcsIO

    if shared:
        client = GcsIO()
        return lambda uri: client.open(uri).read()
    return lambda uri: GcsIO().open(uri).read()


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class Phases:
    """Wall time spent in some of convert()'s steps, by wrapping them (measuring only)."""

    def __init__(self, targets: dict):
        """`targets`: phase name -> (module or class, the function's name in it)."""
        self.seconds = dict.fromkeys(targets, 0.0)
        for name, (owner, attribute) in targets.items():
            setattr(owner, attribute, self._timed(name, getattr(owner, attribute)))

    def _timed(self, name, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
        return timed


def contender(name: str, table_pickle: str, out: str) -> dict:
    """Runs one contender; returns its seconds, CPU seconds and phases (imports excluded).

    Names: "local", "gs", "s3" (conversions), "gs-floor", "s3-floor" (64 threads of the
    library's fsspec reads), "beam-shared", "beam-per-read" (Beam's GcsIO from 64
    threads), "import-gcsfs", "import-beam".
    """
    if name.startswith("import-"):
        start = time.perf_counter()
        exec(IMPORTS[name.split("-", 1)[1]])
        return {"seconds": time.perf_counter() - start}
    table = pd.read_pickle(table_pickle)[["image_uri", "label"]]
    kind = name.split("-")[0]
    if kind in ("gs", "s3", "beam"):
        table = remote_table(table, f"{'s3' if kind == 's3' else 'gs'}://{stores.BUCKET}")
    uris = table["image_uri"].tolist()
    phases = None
    if name.startswith("beam-"):
        read = beam_reader(shared=name == "beam-shared")
    elif name.endswith("-floor"):
        from tfrecorder.storage import fs

        read = fs.read_bytes
    else:
        from tfrecorder.write import prefetch
        from tfrecorder.write.engines import local

        phases = Phases({"_estimate_record_bytes": (prefetch, "mean_record_bytes"),
                         "write_local": (local, "write_local")})
    cpu = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if phases is None:
        fetch_all(uris, read)
    else:
        tfrecorder_run(table, os.path.join(out, f"dataset-{name}"))
    result = {"seconds": time.perf_counter() - start,
              "driver_cpu": cpu_seconds(resource.RUSAGE_SELF) - cpu[0],
              "workers_cpu": cpu_seconds(resource.RUSAGE_CHILDREN) - cpu[1]}
    if phases is not None:
        result["phases"] = phases.seconds
    return result


# ---- In the driver of the benchmark. ----

def server_pid(store: stores.Store) -> int:
    """The pid of the server subprocess behind `store` (a child of this process)."""
    port = store.url.rsplit(":", 1)[1]
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            for pid in f.read().split():
                with open(f"/proc/{pid}/cmdline", "rb") as cmd:
                    if port.encode() in cmd.read().split(b"\0"):
                        return int(pid)
    raise RuntimeError(f"no server process for {store}")


def process_cpu(pid: int) -> float:
    """utime + stime of a running process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def upload_images(store: stores.Store, table: pd.DataFrame) -> None:
    remote = remote_table(table, store.root)["image_uri"]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(store.upload, table["image_uri"], remote))


class Bench:
    """Runs contenders in fresh processes with the stores set up, and keeps everything
    each run measured (rates go through harness.rounds like every other benchmark)."""

    def __init__(self, table_pickle: str, out: str, servers: dict):
        self.table_pickle, self.out, self.servers = table_pickle, out, servers
        self.details: dict[str, list[dict]] = defaultdict(list)

    def seconds(self, key: str) -> float:
        """`key` is a contender name, with "@<ms>" for the server latency to set."""
        name, _, ms = key.partition("@")
        store = self.servers.get("s3" if name.startswith("s3") else "gs") if ms else None
        if store:
            store.set_latency(int(ms) / 1000)
            store.reset_stats()
            before = process_cpu(store.pid)
        result = json.loads(harness.last_line_in_fresh_process(
            __file__, name, self.table_pickle, self.out))
        if store:
            result["server_cpu"] = process_cpu(store.pid) - before
            stats = store.stats()
            result["max_in_flight"], result["requests"] = (stats["max_in_flight"],
                                                           stats["requests"])
        self.details[key].append(result)
        return result["seconds"]

    def median(self, key: str, field: str) -> float:
        return statistics.median(d[field] for d in self.details[key])

    def median_phase(self, key: str, phase: str) -> float:
        return statistics.median(d["phases"][phase] for d in self.details[key])


def ms(seconds: float) -> int:
    return round(seconds * 1000)


def start_stores(stack, with_s3: bool) -> dict:
    """The GCS emulator (and moto's S3), with the environment that points clients at
    them set in this process, so that every contender process inherits it."""
    servers = {"gs": stack.enter_context(stores._running("gcs", stores._gcs_env))}
    if with_s3:
        servers["s3"] = stack.enter_context(stores._running("s3", stores._s3_env))
        servers["s3"].make_bucket(stores.BUCKET)
    for store in servers.values():
        store.pid = server_pid(store)
    return servers


def machine() -> str:
    from importlib.metadata import version

    with open("/proc/cpuinfo") as f:
        cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    packages = ["fsspec", "gcsfs", "s3fs", "aiohttp", "pillow", "simplejpeg", "pandas",
                "gcp-storage-emulator", "moto", "apache-beam"]
    return (f"{platform.platform()}, {os.cpu_count()} cores ({cpu}), Python "
            f"{platform.python_version()}; "
            + ", ".join(f"{p} {version(p)}" for p in packages))


def report_conversions(bench: Bench, results, keys, n, latencies, s3_latencies):
    rate = {key: harness.median(results, key) for key in keys}
    print("| contender | " + " | ".join(f"{ms(latency)} ms" for latency in latencies) + " |")
    print("|---|" + "---|" * len(latencies))
    print(f"| local files, tfrecorder (no latency) | {rate['local']:.0f} |"
          + " |" * (len(latencies) - 1))
    rows = [("gs://, 64-way fetch through the emulator (floor)", "gs-floor"),
            ("gs://, tfrecorder", "gs")]
    rows += [("s3://, 64-way fetch through moto (floor)", "s3-floor"),
             ("s3://, tfrecorder", "s3")] if s3_latencies else []
    for label, name in rows:
        cells = [f"{rate[key]:.0f}" if key in rate else ""
                 for key in (f"{name}@{ms(latency)}" for latency in latencies)]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    for kind, kind_latencies in (("gs", latencies), ("s3", s3_latencies)):
        for latency in kind_latencies:
            key, floor = f"{kind}@{ms(latency)}", f"{kind}-floor@{ms(latency)}"
            per_round = [r[key] / min(r["local"], r[floor]) for r in results]
            print(f"{kind}:// at {ms(latency)} ms vs min(local, floor): "
                  f"{statistics.median(per_round):.2f} (target >= 0.8); vs local "
                  f"{harness.median_ratio(results, key, 'local'):.2f}, vs floor "
                  f"{harness.median_ratio(results, key, floor):.2f}; per round: "
                  + ", ".join(f"{r:.2f}" for r in per_round))
            # The driver reads a sample of images one by one to size shards, before any
            # worker starts: what the ratio would be without that wait.
            unsampled = [n / (d["seconds"] - d["phases"]["_estimate_record_bytes"])
                         / min(r["local"], r[floor])
                         for d, r in zip(bench.details[key], results)]
            print(f"    without the driver's size sample: {statistics.median(unsampled):.2f}")
    print(f"\nWhere the time and CPU went (medians; {n} images; CPU in seconds):\n")
    print("| contender | wall s | driver CPU | workers CPU | server CPU | cores busy "
          "| max in flight | requests/image | driver: size sample s | driver: engine s "
          "| driver: rest s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in keys:
        d = bench.details[key]
        wall = bench.median(key, "seconds")
        cpu = {f: bench.median(key, f) for f in ("driver_cpu", "workers_cpu")}
        server = bench.median(key, "server_cpu") if "server_cpu" in d[0] else 0.0
        busy = statistics.median((x["driver_cpu"] + x["workers_cpu"] + x.get("server_cpu", 0))
                                 / x["seconds"] for x in d)
        phases = ["", "", ""]
        if "phases" in d[0]:
            rest = statistics.median(x["seconds"] - sum(x["phases"].values()) for x in d)
            phases = [f"{bench.median_phase(key, p):.2f}"
                      for p in ("_estimate_record_bytes", "write_local")] + [f"{rest:.2f}"]
        in_flight = (f"{min(x['max_in_flight'] for x in d)}-{max(x['max_in_flight'] for x in d)}"
                     if "max_in_flight" in d[0] else "")
        requests = f"{bench.median(key, 'requests') / n:.2f}" if "requests" in d[0] else ""
        print(f"| {key} | {wall:.2f} | {cpu['driver_cpu']:.2f} | {cpu['workers_cpu']:.2f} | "
              f"{server:.2f} | {busy:.2f} | {in_flight} | {requests} | " + " | ".join(phases)
              + " |")


def report_memory(table: pd.DataFrame, out: str, servers: dict, latency: float):
    print(f"\nPeak memory (VmHWM), 1x and 4x the rows (the same images repeated); "
          f"gs:// at {ms(latency)} ms:\n")
    print("| images | rows | driver peak RSS | driver RSS before converting | "
          "worker peak RSS |")
    print("|---|---|---|---|---|")
    servers["gs"].set_latency(latency)
    for kind in ("local", "gs"):
        source = table if kind == "local" else remote_table(table, servers["gs"].root)
        for repeat in (1, 4):
            m = peak_memory(source[["image_uri", "label"]],
                            os.path.join(out, f"memory-{kind}"), repeat)
            print(f"| {kind} | {m['rows']} | {m['driver_kb'] / 1024:.0f} MB | "
                  f"{m['table_loaded_kb'] / 1024:.0f} MB | {m['worker_kb'] / 1024:.0f} MB |")


def main_conversions(args, table, table_pickle):
    latencies = (0.04,) if args.quick else LATENCIES
    s3_latencies = S3_LATENCIES
    keys = ["local"]
    for latency in latencies:
        keys += [f"gs-floor@{ms(latency)}", f"gs@{ms(latency)}"]
    for latency in s3_latencies:
        keys += [f"s3-floor@{ms(latency)}", f"s3@{ms(latency)}"]
    with contextlib.ExitStack() as stack:
        servers = start_stores(stack, bool(s3_latencies))
        for store in servers.values():
            upload_images(store, table)
        bench = Bench(table_pickle, args.out, servers)
        results = harness.rounds(keys, bench.seconds, len(table), args.rounds)
        report_conversions(bench, results, keys, len(table), latencies, s3_latencies)
        report_memory(table, args.out, servers, 0.04)


def main_clients(args, table, table_pickle):
    keys = [f"gs-floor@{ms(CLIENT_LATENCY)}", f"beam-shared@{ms(CLIENT_LATENCY)}",
            f"beam-per-read@{ms(CLIENT_LATENCY)}"]
    with contextlib.ExitStack() as stack:
        servers = start_stores(stack, False)
        upload_images(servers["gs"], table)
        bench = Bench(table_pickle, args.out, servers)
        results = harness.rounds(keys, bench.seconds, len(table), args.rounds)
        for _ in range(max(args.rounds, 5)):
            for name in IMPORTS:
                bench.seconds(f"import-{name}")
    labels = {"gs-floor": "gcsfs (fsspec), `cat_file`",
              "beam-shared": "Beam `GcsIO().open(uri).read()`, one GcsIO for all threads",
              "beam-per-read": "Beam `GcsIO().open(uri).read()`, a GcsIO per read"}
    print(f"\n{len(table)} objects at {ms(CLIENT_LATENCY)} ms, {FETCH_THREADS} threads, "
          f"median of {args.rounds} rounds\n")
    print("| client | objects/s | requests/object | max in flight | client CPU s | "
          "server CPU s |")
    print("|---|---|---|---|---|---|")
    for key in keys:
        print(f"| {labels[key.split('@')[0]]} | {harness.median(results, key):.0f} | "
              f"{bench.median(key, 'requests') / len(table):.1f} | "
              f"{max(d['max_in_flight'] for d in bench.details[key])} | "
              f"{bench.median(key, 'driver_cpu'):.2f} | {bench.median(key, 'server_cpu'):.2f} |")
    print(f"\ngcsfs vs Beam (shared GcsIO): "
          f"{harness.median_ratio(results, keys[0], keys[1]):.1f}x")
    print(f"\n| import, in a fresh process (median of {max(args.rounds, 5)}) | seconds |")
    print("|---|---|")
    for name, statement in IMPORTS.items():
        print(f"| `{statement}` | {bench.median(f'import-{name}', 'seconds'):.2f} |")


def main():
    parser = harness.parser(__doc__.splitlines()[0], images=2000, rounds=5)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 200 images, one round, 40 ms only")
    parser.add_argument("--clients", action="store_true",
                        help="compare gcsfs and Beam's GcsIO instead of converting")
    args = parser.parse_args()
    if args.contender:
        print(json.dumps(contender(args.contender, args.input, args.out)))
        return
    if args.quick:
        args.images, args.rounds = 200, 1
    table = build_images(os.path.join(args.out, "images"), args.images)
    sizes = [os.path.getsize(p) for p in table["image_uri"]]
    table_pickle = os.path.join(args.out, f"remote_table_{args.images}.pkl")
    table.to_pickle(table_pickle)
    print(f"Machine: {machine()}")
    print(f"Images: {len(table)} JPEGs, {np.mean(sizes) / 1000:.0f} KB mean; median of "
          f"{args.rounds} rounds")
    (main_clients if args.clients else main_conversions)(args, table, table_pickle)


if __name__ == "__main__":
    main()

"""A Parquet file converted whole and in chunks (`chunk_rows`): time, driver memory, and
whether each fits under a memory limit.

    .venv/bin/python benchmarks/bench_chunked.py [--rows 10000000] [--rounds 2]
        [--memory-limit-mb 0]

The table is bench_structured.py's five columns (text key, float, int, categorical label,
a list of 4 floats), written once as Parquet (1M-row row groups) and cached. Each
contender converts that file in a fresh process: the whole file read into pandas at once,
then in chunks of 250,000 rows (validated a chunk at a time and memory-mapped,
`tfrecorder.sources.chunked`). Reported: seconds, the driver's peak anonymous memory (RssAnon,
sampled every 20 ms: what the process holds for itself; mapped file pages are page cache
the kernel can drop), its peak RSS (VmHWM, which counts mapped pages too), and the
workers' peak private memory. The two datasets are compared file by file.

With --memory-limit-mb, each conversion runs in a cgroup (v1 memory controller, as
root) whose limit is that many MB, page cache included: a contender that needs more is
killed, and is reported so.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_structured import _private_kb, _status_kb, build_table  # noqa: E402

CONTENDERS = {"whole file": None, "in chunks of 250k rows (the default)": 250_000}
_CGROUP = "/sys/fs/cgroup/memory/tfrecorder-bench"


def source(rows: int, folder: str) -> str:
    path = os.path.join(folder, f"table-{rows}.parquet")
    if not os.path.exists(path):
        build_table(rows).to_parquet(path + ".tmp", row_group_size=1_000_000)
        os.replace(path + ".tmp", path)
    return path


def _watch(peaks: dict, done: threading.Event) -> None:
    """The driver's anonymous memory and its workers' private memory, sampled."""
    me = os.getpid()
    while not done.wait(0.02):
        try:
            peaks["anon"] = max(peaks.get("anon", 0), _status_kb("RssAnon"))
            with open(f"/proc/{me}/task/{me}/children") as f:
                for pid in f.read().split():
                    peaks[pid] = max(peaks.get(pid, 0), _private_kb(pid))
        except (OSError, StopIteration):
            pass


def contender(name: str, path: str, out: str) -> dict:
    import tfrecorder
    from tfrecorder.sources import chunked

    chunk_rows = CONTENDERS[name]
    if chunk_rows is None:
        chunked._AUTO_SHARE = float("inf")  # never chunked by default, whatever the size
    output = os.path.join(out, name.replace(" ", "-"))
    shutil.rmtree(output, ignore_errors=True)
    with open("/proc/self/clear_refs", "w") as f:  # VmHWM := VmRSS: the peak from here
        f.write("5")
    before_kb, peaks, done = _status_kb("RssAnon"), {}, threading.Event()
    threading.Thread(target=_watch, args=(peaks, done), daemon=True).start()
    started = time.perf_counter()
    result = tfrecorder.convert(path, output, progress=False, chunk_rows=chunk_rows)
    seconds = time.perf_counter() - started
    done.set()
    workers = [kb for pid, kb in peaks.items() if pid != "anon"]
    return {"seconds": seconds, "records": result.num_records, "before_mb": before_kb / 1024,
            "anon_peak_mb": peaks.get("anon", 0) / 1024,
            "rss_peak_mb": _status_kb("VmHWM") / 1024,
            "worker_peak_mb": max(workers, default=0) / 1024, "digest": _digest(output)}


def _digest(folder: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        digest.update(name.encode())
        with open(os.path.join(folder, name), "rb") as f:
            while block := f.read(1 << 24):
                digest.update(block)
    return digest.hexdigest()


def in_fresh_process(name: str, path: str, out: str, limit_mb: int) -> dict | None:
    """The contender's numbers; None if it was killed under the memory limit."""
    command = [sys.executable, __file__, "--contender", name, "--path", path, "--out", out]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True,
                               preexec_fn=_limited(limit_mb) if limit_mb else None)
    stdout, stderr = process.communicate()
    if process.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL) and limit_mb:
        return None
    if process.returncode:
        sys.stderr.write(stderr[-5000:])
        raise SystemExit(f"{name} failed ({process.returncode})")
    return json.loads(stdout.strip().splitlines()[-1])


def _limited(limit_mb: int):
    os.makedirs(_CGROUP, exist_ok=True)
    with open(os.path.join(_CGROUP, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit_mb << 20))

    def enter() -> None:  # in the child, before exec: it and its workers are limited
        with open(os.path.join(_CGROUP, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    return enter


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--memory-limit-mb", type=int, default=0)
    parser.add_argument("--out", default="/var/tmp/tfr-bench-chunked")
    parser.add_argument("--contender", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.contender:
        print(json.dumps(contender(args.contender, args.path, args.out)))
        return
    os.makedirs(args.out, exist_ok=True)
    path = source(args.rows, args.out)
    limit = f", memory limit {args.memory_limit_mb:,} MB" if args.memory_limit_mb else ""
    print(f"Machine: {platform.platform()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; {args.rows:,} rows, Parquet "
          f"{os.path.getsize(path) / 2**20:,.0f} MB; median of {args.rounds} rounds{limit}\n")
    rounds = [{name: in_fresh_process(name, path, args.out, args.memory_limit_mb)
               for name in CONTENDERS} for _ in range(args.rounds)]
    print("| contender | seconds | rows/s | driver anonymous peak | driver RSS peak "
          "| worker peak, private |")
    print("|---|---|---|---|---|---|")
    for name in CONTENDERS:
        runs = [r[name] for r in rounds if r[name] is not None]
        if not runs:
            print(f"| {name} | killed: over the memory limit | | | | |")
            continue
        seconds = statistics.median(r["seconds"] for r in runs)
        print(f"| {name} | {seconds:.1f} | {args.rows / seconds:,.0f} "
              f"| {max(r['anon_peak_mb'] for r in runs):,.0f} MB "
              f"| {max(r['rss_peak_mb'] for r in runs):,.0f} MB "
              f"| {max(r['worker_peak_mb'] for r in runs):,.0f} MB |")
    finished = [r[name]["digest"] for r in rounds for name in CONTENDERS if r[name]]
    print(f"\nDatasets identical across the {len(finished)} finished runs: "
          f"{len(set(finished)) == 1}")


if __name__ == "__main__":
    main()

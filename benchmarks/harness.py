"""What every benchmark here shares: contenders in fresh processes, rounds and medians.

This host's speed drifts by +-20% within minutes, so each round runs every contender
back to back, ratios are taken within a round, and medians over rounds are reported.
A contender runs in a fresh process, as a user's script would, and times only its work.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence


def parser(description: str, images: int, rounds: int) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=description)
    result.add_argument("--images", type=int, default=images)
    result.add_argument("--out", default="/tmp/tfr-bench")
    result.add_argument("--rounds", type=int, default=rounds,
                        help="rounds; each times every contender once, back to back")
    result.add_argument("--contender", help=argparse.SUPPRESS)  # set in the child process
    result.add_argument("--input", help=argparse.SUPPRESS)
    return result


def seconds_in_fresh_process(script: str, name: str, input_path: str, out: str) -> float:
    """Runs `script --contender name`, which prints the seconds its work took."""
    return float(last_line_in_fresh_process(script, name, input_path, out))


def last_line_in_fresh_process(script: str, name: str, input_path: str, out: str) -> str:
    """Runs `script --contender name` and returns the last line it printed (a contender
    that reports more than its seconds prints them as one JSON line)."""
    result = subprocess.run(
        [sys.executable, script, "--contender", name, "--input", input_path, "--out", out],
        capture_output=True, text=True)
    if result.returncode:
        sys.stderr.write(result.stderr[-5000:])  # why the contender failed
        result.check_returncode()
    return result.stdout.strip().splitlines()[-1]


def rounds(names: Sequence[str], seconds: Callable[[str], float], count: int,
           number: int) -> list[dict[str, float]]:
    """Items per second of every contender, round after round."""
    return [{name: count / seconds(name) for name in names} for _ in range(number)]


def median(results: list[dict[str, float]], name: str) -> float:
    return statistics.median(r[name] for r in results)


def median_ratio(results: list[dict[str, float]], name: str, reference: str,
                 factor: float = 1.0) -> float:
    return statistics.median(r[name] / (factor * r[reference]) for r in results)


# ---- Memory of a process tree, sampled from /proc. ----

def export_commit(repository: str, commit: str, folder: str) -> None:
    """Writes `commit`'s tree into `folder` (made here): the code to compare with, run
    from its own folder beside this tree's."""
    os.makedirs(folder)
    archive = subprocess.run(["git", "-C", repository, "archive", commit],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)


def descendants(pid: int) -> list[int]:
    """The processes started by `pid`, their children and so on (any thread's children)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # it has exited
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    children = [int(child) for child in f.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _rss_kb(pid: int) -> tuple[str, int, int, int]:
    """A process's name, its RSS now, its peak RSS (VmHWM: kept by the kernel between
    samples, and reset by fork and by exec) and the part of its RSS no other process
    shares (Private_* of smaps_rollup: a forked worker's RSS also counts the pages it
    shares with its parent, which cost nothing more)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        words = f.read().split(b"\0")
    name = " ".join(word.decode(errors="replace") for word in words[:4] if word)[:120]
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    rss, peak = (int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM"))
    with open(f"/proc/{pid}/smaps_rollup") as f:
        private = sum(int(line.split()[1]) for line in f if line.startswith("Private_"))
    return name, rss, peak, private


class TreePeaks:
    """Every process of a tree (a root and all it starts), sampled every `every` seconds
    from a thread while the tree runs: each pid's name, its peak RSS (the kernel's, last
    seen) and its largest private memory sampled, in kB. A process that lives less than
    `every` may be missed. With
    `limit_mb`, the tree (a session of its own) is killed once its RSS adds up to more,
    before it takes a shared machine's memory: `stopped` then says so."""

    def __init__(self, root: int, every: float = 0.2, limit_mb: float | None = None):
        self.root, self.every, self.limit_kb = root, every, (limit_mb or 0) * 1024
        self.peaks: dict[int, dict] = {}
        self.stopped: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while True:
            total = 0
            for pid in [self.root, *descendants(self.root)]:
                try:
                    name, rss, hwm, private = _rss_kb(pid)
                except (OSError, KeyError, ValueError):  # exited meanwhile
                    continue
                peak = self.peaks.setdefault(pid, {"name": name, "rss_kb": 0,
                                                   "private_kb": 0})
                peak["rss_kb"] = max(peak["rss_kb"], hwm)
                peak["private_kb"] = max(peak["private_kb"], private)
                total += rss
            if self.limit_kb and total > self.limit_kb and not self.stopped:
                self.stopped = f"stopped at {total / 1024:,.0f} MB, its processes' RSS"
                os.killpg(self.root, signal.SIGKILL)
            if self._done.wait(self.every):
                return

    def stop(self) -> dict[int, dict]:
        self._done.set()
        self._thread.join()
        return self.peaks


def sampled_in_fresh_process(command: Sequence[str], timeout: float, every: float = 0.2,
                             limit_mb: float | None = None
                             ) -> tuple[str | None, dict[int, dict], str | None]:
    """Runs `command` in a session of its own, sampling the memory of it and of every
    process it starts (`TreePeaks`); stops the whole tree after `timeout` seconds, or
    once it holds more than `limit_mb`. Returns the last line it printed, the peaks of
    its processes, and why it was stopped (the line is None then)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    peaks = TreePeaks(process.pid, every, limit_mb)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the tree, nothing else
        process.communicate()
        return None, peaks.stop(), f"did not finish in {timeout:.0f} s"
    found = peaks.stop()
    if peaks.stopped:
        return None, found, peaks.stopped
    if process.returncode:
        sys.stderr.write(stderr[-5000:])  # why it failed
        raise subprocess.CalledProcessError(process.returncode, command)
    return stdout.strip().splitlines()[-1], found, None

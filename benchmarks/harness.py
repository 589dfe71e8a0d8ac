"""What every benchmark here shares: contenders in fresh processes, rounds and medians.

This host's speed drifts by +-20% within minutes, so each round runs every contender
back to back, ratios are taken within a round, and medians over rounds are reported.
A contender runs in a fresh process, as a user's script would, and times only its work.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
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

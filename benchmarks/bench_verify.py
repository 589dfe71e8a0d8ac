"""A/B: `tfrecorder verify` (decoding every image) of this tree against an earlier commit.

    .venv/bin/python benchmarks/bench_verify.py --base main [--images 2000] [--rounds 3]

Both versions verify the same dataset: bench_write's crops of the sample photos
(`examples/sample_crops.py`, JPEGs of 400-800 px, about 55 KB), converted once by this
tree with default options. Each round runs, for each version in turn, in fresh processes:

- the command, `python -m tfrecorder verify OUT --no-progress`: its wall time and CPU
  time (user + system, of the process and its threads), measured from outside;
- its parts, timed inside one process, one after the other: `import tfrecorder`, the
  import of what `verify` imports to decode (`tfrecorder.read.verify_records`: with
  TensorFlow, before), `verify(decode_images=False)` (files, framing, checksums) and
  `verify()` (that again, then the record checks), each wall and CPU time.

Medians of the rounds are reported, as this shared host's speed drifts within minutes;
the record checks are verify() less verify(decode_images=False) of the same round. The
base is exported with `git archive`, so the work tree is untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
from harness import export_commit  # noqa: E402
from sample_crops import make_crops  # noqa: E402

PARTS = """
import json, sys, time

def timed(work):
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return [time.perf_counter() - wall, time.process_time() - cpu]

found = {"import tfrecorder": timed(lambda: __import__("tfrecorder"))}
import tfrecorder
assert tfrecorder.__file__.startswith(sys.path[1]), (tfrecorder.__file__, sys.path[:2])
found["import verify_records"] = timed(lambda: __import__("tfrecorder.read.verify_records"))
found["verify(decode_images=False)"] = timed(
    lambda: tfrecorder.verify(sys.argv[1], decode_images=False))
found["verify()"] = timed(lambda: tfrecorder.verify(sys.argv[1]))
print(json.dumps(found))
"""


def run(tree: str, args: list[str], cwd: str) -> tuple[float, float, str]:
    """Wall and CPU seconds of `python *args` with `tree` first on the path, and what it
    printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # cwd: `python -m` and `-c` put the working folder first on sys.path, before PYTHONPATH.
    done = subprocess.run([sys.executable, *args], env={**os.environ, "PYTHONPATH": tree},
                          cwd=cwd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-verify-")
    try:
        base = os.path.join(work, "base")
        export_commit(ROOT, args.base, base)
        table = os.path.join(work, "table.csv")
        make_crops(os.path.join(tempfile.gettempdir(), "tfr-bench-images"),
                   args.images).to_csv(table, index=False)
        out = os.path.join(work, "out")
        run(ROOT, ["-m", "tfrecorder", "convert", table, out, "--no-progress"], work)
        found: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round_ in range(args.rounds):
            for tree, path in (("base", base), ("this tree", ROOT)):
                wall, cpu, _ = run(path, ["-m", "tfrecorder", "verify", out, "--no-progress"],
                                   work)
                parts = {"tfrecorder verify (the command)": (wall, cpu),
                         **json.loads(run(path, ["-c", PARTS, out], work)[2])}
                checks = [a - b for a, b in zip(parts["verify()"],
                                                parts["verify(decode_images=False)"])]
                parts["record checks: verify() - verify(decode_images=False)"] = checks
                for name, (wall, cpu) in parts.items():
                    found.setdefault((tree, name), []).append((wall, cpu))
                    print(f"round {round_}, {tree}, {name}: {wall:.2f} s wall, {cpu:.2f} s "
                          "CPU", flush=True)
        print(f"\nmedians of {args.rounds} rounds, {args.images} images:")
        for (tree, name), times in found.items():
            wall = statistics.median(t[0] for t in times)
            cpu = statistics.median(t[1] for t in times)
            each = f" ({cpu / args.images * 1000:.2f} ms an image)" \
                if name.startswith("record") else ""
            print(f"{tree:9s} {name:55s} {wall:6.2f} s wall {cpu:6.2f} s CPU{each}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

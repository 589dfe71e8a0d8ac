"""A/B: `tfrecorder verify` (decoding every image) of this tree against an earlier commit.

    .venv/bin/python benchmarks/bench_verify.py --base main [--images 2000] [--rounds 3]

Both versions verify the same dataset: bench_write's crops of the sample photos
(`examples/sample_crops.py`, JPEGs of 400-800 px, about 55 KB), converted once by this
tree with default options. Each run is the command line in a fresh process
(`python -m tfrecorder verify OUT --no-progress`), its wall time and CPU time (user +
system, of the process and its threads) measured from outside; the versions alternate
within a round and medians are reported, as this shared host's speed drifts. Beside the
whole command: `--no-decode` (files, framing and checksums only) and the import of what
`verify` imports to decode (`tfrecorder.read.verify_records`), each alone in a fresh
process, with `import tfrecorder` alone to subtract. The base is exported with `git
archive`, so the work tree is untouched.
"""

from __future__ import annotations

import argparse
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
from sample_crops import make_crops  # noqa: E402

DECODING = "tfrecorder.read.verify_records"  # what verify imports to decode


def timed(tree: str, args: list[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds of `python *args` with `tree` first on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # cwd: `python -m` and `-c` put the working folder first on sys.path, before PYTHONPATH.
    subprocess.run([sys.executable, *args], env={**os.environ, "PYTHONPATH": tree},
                   cwd=cwd, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-verify-")
    try:
        base = os.path.join(work, "base")
        os.makedirs(base)
        archive = subprocess.run(["git", "-C", ROOT, "archive", args.base],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        table = os.path.join(work, "table.csv")
        make_crops(os.path.join(tempfile.gettempdir(), "tfr-bench-images"),
                   args.images).to_csv(table, index=False)
        out = os.path.join(work, "out")
        timed(ROOT, ["-m", "tfrecorder", "convert", table, out, "--no-progress"], work)
        runs = {"verify": ["-m", "tfrecorder", "verify", out, "--no-progress"],
                "verify --no-decode": ["-m", "tfrecorder", "verify", out, "--no-decode",
                                       "--no-progress"],
                "import tfrecorder": ["-c", "import tfrecorder"],
                f"import {DECODING}": ["-c", f"import {DECODING}"]}
        found = {(tree, run): [] for tree in ("base", "this tree") for run in runs}
        for round_ in range(args.rounds):
            for run, command in runs.items():
                for tree, path in (("base", base), ("this tree", ROOT)):
                    wall, cpu = timed(path, command, work)
                    found[tree, run].append((wall, cpu))
                    print(f"round {round_}, {tree}, {run}: {wall:.2f} s wall, {cpu:.2f} s CPU",
                          flush=True)
        print(f"\nmedians of {args.rounds} rounds, {args.images} images:")
        medians = {key: [statistics.median(t[i] for t in times) for i in (0, 1)]
                   for key, times in found.items()}
        for (tree, run), (wall, cpu) in medians.items():
            print(f"{tree:9s} {run:45s} {wall:6.2f} s wall {cpu:6.2f} s CPU")
        for tree in ("base", "this tree"):
            checks = [a - b for a, b in zip(medians[tree, "verify"],
                                            medians[tree, "verify --no-decode"])]
            imports = [a - b for a, b in zip(medians[tree, f"import {DECODING}"],
                                             medians[tree, "import tfrecorder"])]
            print(f"{tree:9s} record checks (verify - --no-decode): {checks[0]:.2f} s wall, "
                  f"{checks[1]:.2f} s CPU, {checks[1] / args.images * 1000:.2f} ms CPU an "
                  f"image; of which importing what decodes: {imports[0]:.2f} s wall, "
                  f"{imports[1]:.2f} s CPU")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

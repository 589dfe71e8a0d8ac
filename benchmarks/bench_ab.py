"""A/B: conversion throughput of this tree against an earlier commit, in one run.

    .venv/bin/python benchmarks/bench_ab.py --base 8eb43bd [--images 3000] [--rounds 7]
        [--sides 400,800] [--validate both|true|false]
    .venv/bin/python benchmarks/bench_ab.py --base 8eb43bd --csv-rows 1000000 [--rounds 5]
    .venv/bin/python benchmarks/bench_ab.py --base 8eb43bd --arrays 50000 [--rounds 5]

Both versions convert the same real-looking JPEGs (bench_write's crops of the sample
photos, about 55 KB) with default options, `validate=True` and `validate=False`; each run
is a fresh process, the two versions alternate within a round, and the median of the
per-round ratios (this tree / base) is reported, because this shared host's speed drifts
within minutes. The base is exported with `git archive`, so the work tree is untouched.

With --csv-rows, both versions convert a CSV file (its path) of bench_structured's table
without the list column (text key, float, int, label): rows/s, "CSV to TFRecord".

With --arrays, both versions convert bench_memory_images' 32x32x3 uint8 arrays (made
and cached by it) as `(x, y)`: images held in memory, stored as PNG.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))
from harness import export_commit  # noqa: E402
from sample_crops import make_crops  # noqa: E402

RUN = """
import sys, time, pandas as pd, tfrecorder
assert tfrecorder.__file__.startswith(sys.path[1]), (tfrecorder.__file__, sys.path[:2])
table = pd.read_csv(sys.argv[1])
started = time.perf_counter()
tfrecorder.convert(table, sys.argv[2], progress=False, validate=sys.argv[3] == "1")
print(len(table) / (time.perf_counter() - started))
"""


RUN_CSV = """
import sys, time, tfrecorder
assert tfrecorder.__file__.startswith(sys.path[1]), (tfrecorder.__file__, sys.path[:2])
started = time.perf_counter()
result = tfrecorder.convert(sys.argv[1], sys.argv[2], progress=False)
print(result.num_records / (time.perf_counter() - started))
"""


RUN_ARRAYS = """
import sys, time, numpy as np, tfrecorder
assert tfrecorder.__file__.startswith(sys.path[1]), (tfrecorder.__file__, sys.path[:2])
with np.load(sys.argv[1]) as data:
    x, y = data["x"], data["y"]
started = time.perf_counter()
result = tfrecorder.convert((x, y), sys.argv[2], progress=False)
print(result.num_records / (time.perf_counter() - started))
"""


def rate(tree: str, table: str, out: str, validate: bool | None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    code, flag = ((RUN_ARRAYS if table.endswith(".npz") else RUN_CSV, "")
                  if validate is None else (RUN, str(int(validate))))
    # cwd: `python -c` puts the working folder first on sys.path, before PYTHONPATH.
    done = subprocess.run([sys.executable, "-c", code, table, out, flag],
                          env={**os.environ, "PYTHONPATH": tree}, cwd=os.path.dirname(out),
                          capture_output=True, text=True, check=True)
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sides", default="400,800",
                        help="the crops' longer side, least and most (small: many rows fast)")
    parser.add_argument("--validate", choices=("both", "true", "false"), default="both")
    parser.add_argument("--csv-rows", type=int, help="convert a CSV file of this many rows "
                        "without images instead")
    parser.add_argument("--arrays", type=int, help="convert this many 32x32x3 arrays held "
                        "in memory instead")
    args = parser.parse_args()
    sides = tuple(int(side) for side in args.sides.split(","))
    modes = {"both": (False, True), "true": (True,), "false": (False,)}[args.validate]
    if args.csv_rows or args.arrays:
        modes = (None,)
    work = tempfile.mkdtemp(prefix="bench-ab-")
    try:
        base = os.path.join(work, "base")
        export_commit(ROOT, args.base, base)
        table = os.path.join(work, "table.csv")
        if args.arrays:
            sys.path.insert(0, HERE)
            from bench_memory_images import arrays_input

            folder = "/var/tmp/tfr-bench-memory-images"
            os.makedirs(folder, exist_ok=True)
            table = arrays_input(args.arrays, folder)
        elif args.csv_rows:
            sys.path.insert(0, HERE)
            from bench_structured import build_table

            build_table(args.csv_rows).drop(columns=["embedding"]).to_csv(table, index=False)
        else:
            images = "tfr-bench-images" + ("" if sides == (400, 800)
                                           else "-{}-{}".format(*sides))
            make_crops(os.path.join(tempfile.gettempdir(), images), args.images,
                       sides=sides).to_csv(table, index=False)
        out = os.path.join(work, "out")
        ratios: dict[bool, list[float]] = {validate: [] for validate in modes}
        for round_ in range(args.rounds):
            for validate in modes:
                old, new = rate(base, table, out, validate), rate(ROOT, table, out, validate)
                ratios[validate].append(new / old)
                unit = "rows/s" if validate is None and not args.arrays else "images/s"
                print(f"round {round_}, validate={validate}: base {old:.0f}, this tree "
                      f"{new:.0f} {unit} ({new / old:.2f}x)", flush=True)
        for validate, found in ratios.items():
            print(f"validate={validate}: this tree / {args.base} = "
                  f"{statistics.median(found):.2f} (median of {len(found)} rounds)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

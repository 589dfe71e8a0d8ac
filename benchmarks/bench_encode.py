"""CPU a row of a worker's encoding of a table without images: bench_structured's table,
planned as `convert` plans it, every segment encoded and framed into its segment file by
`engines.local._encode_without_images`, in this process.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_encode.py [--rows 1000000] [--rounds 5]

The workers' share of a conversion, without the driver's: what issue 31's columnar
encoder changed. For a before/after, run it from an exported tree of the older commit
(`git archive REV | tar -x -C DIR`, then `PYTHONPATH=DIR`), alternating. Reports the
median and range of `time.process_time()` over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_structured import build_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from tfrecorder.engines import local
    from tfrecorder.options import ConvertOptions
    from tfrecorder.plan import PlannedTable, make_plan
    from tfrecorder.sources import load_table

    table = load_table(build_table(args.rows))
    plan = make_plan(table, ConvertOptions.from_keywords())
    planned = PlannedTable(plan, table)
    size = local._MAX_SEGMENT_ROWS_WITHOUT_IMAGES
    with tempfile.TemporaryDirectory() as folder:
        segments = [local.Segment(0, shard.split, shard.positions[start:start + size],
                                  os.path.join(folder, "segment"))
                    for shard in plan.shards
                    for start in range(0, len(shard.positions), size)]
        seconds = []
        for _ in range(args.rounds):
            started = time.process_time()
            for segment in segments:
                local._encode_without_images(segment, planned, plan.image_options)
            seconds.append(time.process_time() - started)
    per_row = [s / args.rows * 1e6 for s in seconds]
    print(f"{args.rows:,} rows, {len(segments)} segments of up to {size}: "
          f"{statistics.median(per_row):.2f} µs of CPU a row "
          f"({min(per_row):.2f}-{max(per_row):.2f}, {args.rounds} rounds)")


if __name__ == "__main__":
    main()

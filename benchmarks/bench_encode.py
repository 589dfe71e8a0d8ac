"""CPU a row of a worker's encoding of a table without images: bench_structured's table,
planned as `convert` plans it, every segment encoded and framed into its segment file by
`engines.local._encode_without_images`, in this process.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_encode.py [--rows 1000000] [--rounds 5]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_encode.py --whole   # a whole convert

With `--whole`, one `convert` with the defaults (2 workers) instead: its wall time, the
driver's CPU and the workers' (`getrusage`: user, system) and the workers' page faults,
which show what reading the driver's pages by fork costs them.

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
    parser.add_argument("--whole", action="store_true", help="time one whole convert")
    args = parser.parse_args()
    if args.whole:
        return whole(args.rows)

    from tfrecorder.options import ConvertOptions
    from tfrecorder.sources import load_table
    from tfrecorder.write.engines import local
    from tfrecorder.write.plan import make_plan
    from tfrecorder.write.planned_table import PlannedTable

    table = load_table(build_table(args.rows))
    plan = make_plan(table, ConvertOptions.from_keywords())
    planned = PlannedTable(plan, table)
    size = local._MAX_SEGMENT_ROWS_WITHOUT_IMAGES
    with tempfile.TemporaryDirectory() as folder:
        segments = [local.Segment(0, shard.split, shard.positions[start:start + size],
                                  os.path.join(folder, f"segment-{shard.filename}-{start}"))
                    for shard in plan.shards
                    for start in range(0, len(shard.positions), size)]
        seconds = []
        for _ in range(args.rounds):
            started = time.process_time()
            for segment in segments:
                local._encode_without_images(segment, planned, plan.image_options)
            seconds.append(time.process_time() - started)
            for segment in segments:  # (the driver's work, untimed)
                os.unlink(segment.path)
    per_row = [s / args.rows * 1e6 for s in seconds]
    print(f"{args.rows:,} rows, {len(segments)} segments of up to {size}: "
          f"{statistics.median(per_row):.2f} µs of CPU a row "
          f"({min(per_row):.2f}-{max(per_row):.2f}, {args.rounds} rounds)")


def whole(rows: int) -> None:
    import resource

    import tfrecorder

    table = build_table(rows)
    with tempfile.TemporaryDirectory() as folder:
        driver, workers = (resource.getrusage(who) for who in
                           (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        started = time.perf_counter()
        tfrecorder.convert(table, os.path.join(folder, "out"), progress=False)
        seconds = time.perf_counter() - started
        driver_after, workers_after = (resource.getrusage(who) for who in
                                       (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(f"{rows:,} rows: {seconds:.2f} s; driver CPU "
          f"{driver_after.ru_utime - driver.ru_utime:.2f} s user, "
          f"{driver_after.ru_stime - driver.ru_stime:.2f} s system; workers' CPU "
          f"{workers_after.ru_utime - workers.ru_utime:.2f} s user, "
          f"{workers_after.ru_stime - workers.ru_stime:.2f} s system, "
          f"{workers_after.ru_minflt - workers.ru_minflt:,} page faults")


if __name__ == "__main__":
    main()

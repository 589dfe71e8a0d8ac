"""Where a validated JPEG write spends its CPU, stage by stage, per image.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_stages.py [--images 3000] [--rounds 5]
        [--base COMMIT]

bench_write's JPEGs (crops of the sample photos, 400-800 px, about 55 KB, read from the
page cache) go through the local engine's own functions with `validate=True`, on a real
plan: each segment through `_encode_segment` (the worker's), reading through the
`Prefetcher`, with the functions it calls for each stage wrapped in timers of CPU time
(`time.thread_time`, which the shared machine's load does not inflate; the timers' own
cost, about a microsecond a call, is measured and taken off):

- worker: taking a segment's rows from the planned table (`PlannedTable.rows`), reading
  the file, the header (`jpeg_header`), the check (`check_jpeg_data`: the strict scaled
  decode), the record's Example (`encode_example`), the content hash (xxh3-128), framing
  and writing the segment file, the statistics (`ShardFacts.add`), and "the rest": each
  segment's CPU time less those (what `_encode_segment`, `encode_read` and `encode_row`
  do themselves: the features' dicts, the prefetcher's bookkeeping, the file's opening);
- both: the task and the result through a multiprocessing queue (`time.process_time`:
  its feeder is a thread);
- driver: appending the segments to their shard (`ShardWriter.append_file`: `sendfile`,
  the shard's SHA-256 from the page cache, the index's frame sizes; the last two also
  timed alone), deleting the segment files, opening and committing each shard.

The table also gives `encode_segments` whole (the worker's loop over the same segments),
a whole conversion with one worker (`num_workers=1`: the driver encodes, so one process
does all the work) and one with two (the workers' CPU and the driver's, from
`getrusage`), in CPU seconds an image, fixed costs included.

With --base, the same measurement of an earlier commit (exported with `git archive`)
runs in alternating fresh processes, and the table gives both, before and after. Each
number is the median over rounds, with the range over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (key, what the row says); the worker's stages, then the driver's.
STAGES = [
    ("rows", "worker: take a segment's rows (`PlannedTable.rows`)"),
    ("read", "worker: read the file (`Prefetcher.reader`)"),
    ("header", "worker: JPEG header (`jpeg_header`)"),
    ("check", "worker: **the check: strict decode at 1/8 scale** (`check_jpeg_data`)"),
    ("record", "worker: the record's Example (`encode_example`)"),
    ("hash", "worker: content hash (xxh3-128)"),
    ("rest", "worker: the rest (`_encode_segment`, `encode_read`, `encode_row` themselves)"),
    ("frame", "worker: frame, CRC32C, write the segment (`write_framed`; `_SegmentFile._flush`)"),
    ("facts", "worker: statistics (`ShardFacts.add`)"),
    ("queue", "both: task and result through a multiprocessing queue"),
    ("append", "driver: `ShardWriter.append_file` (sendfile, SHA-256, index frames)"),
    ("delete", "driver: delete the segment file"),
    ("commit", "driver: open and commit the shard (index file, rename)"),
]
DETAIL = [
    ("append_sha256", "of `append_file`: the SHA-256 of the segment (from the page cache)"),
    ("append_frames", "of `append_file`: the index's frame sizes (`frame_sizes`; none "
                      "since workers send them)"),
]
TOTALS = [
    ("worker_faults", "page faults an image in the worker's stages (a worker: 2)"),
    ("timer", "µs of CPU a timer costs (taken off the stages above)"),
    ("encode_segments", "`encode_segments` whole (rows to facts, no queue)"),
    ("convert_1", "`convert(num_workers=1)` whole, one process"),
    ("convert_2_workers", "`convert(num_workers=2)`: the two workers together"),
    ("convert_2_driver", "`convert(num_workers=2)`: the driver"),
]


def measure(images: int, folder: str) -> dict[str, float]:
    """µs of CPU an image for every stage, measured in this process."""
    import gc
    import hashlib
    import mmap
    import multiprocessing
    import resource

    import xxhash

    import tfrecorder
    from tfrecorder.format import tfrecord
    from tfrecorder.format.tfrecord import ShardWriter
    from tfrecorder.storage import fs
    from tfrecorder.write import records
    from tfrecorder.write.engines import local
    from tfrecorder.write.planned_table import PlannedTable
    from tfrecorder.write.prefetch import Prefetcher, RowReads
    from tfrecorder.write.statistics import ShardFacts

    # Before the workers sent their frame sizes (c2c3415), the driver walked each
    # segment for the index; a --base tree from then still does.
    walk = getattr(tfrecord, "frame_sizes", None)

    sys.path.insert(0, HERE)
    from bench_write import build_images

    table = build_images(os.path.join(folder, "images"), images)
    for path in table["image_uri"]:  # into the page cache
        with open(path, "rb") as f:
            f.read()
    out = tempfile.mkdtemp(prefix="stages-", dir=folder)
    captured = {}
    original = local.write_local

    def capturing(plan, table, *args, **kwargs):
        captured["plan"], captured["table"] = plan, table
        return original(plan, table, *args, **kwargs)

    local.write_local = capturing
    try:  # a real plan, and a warm-up of the whole path
        tfrecorder.convert(table, os.path.join(out, "warm"), progress=False, num_workers=1,
                           validate=True)
    finally:
        local.write_local = original
    plan, options = captured["plan"], captured["plan"].image_options
    assert options.validate
    planned = PlannedTable(plan, captured["table"])
    spool = os.path.join(out, "spool")
    os.makedirs(spool)
    segments = [local.Segment(n, shard.split, positions, os.path.join(spool, f"{n:06d}"))
                for n, (shard, positions) in enumerate(
                    (shard, shard.positions[start:start + local._MAX_SEGMENT_ROWS])
                    for shard in plan.shards
                    for start in range(0, len(shard.positions), local._MAX_SEGMENT_ROWS))]
    count = sum(len(s.positions) for s in segments)
    cpu: dict[str, float] = {}

    def timed(key: str, clock=time.thread_time):
        class Timer:
            def __enter__(self):
                self.start = clock()

            def __exit__(self, *exc):
                cpu[key] = cpu.get(key, 0.0) + clock() - self.start
        return Timer()

    facts = []
    # The worker's own function on every segment (`_encode_segment`, reading through the
    # prefetcher), with the functions it calls for each stage wrapped in CPU-time timers
    # (`time.thread_time`, which another process's load does not inflate). A timer costs
    # about a microsecond a call here, so its cost is measured first (`calibrated`) and
    # taken off: the part inside a timed interval off the stage, the rest off "the rest",
    # which is each segment's CPU time less its timed stages. Objects made before are
    # frozen out of the garbage collector, as the engine freezes them before it forks.
    stage_cpu: dict[str, float] = {}
    calls: dict[str, int] = {}
    clock = time.thread_time

    def wrapped(key: str, function):
        def timed_call(*args, **kwargs):
            started = clock()
            try:
                return function(*args, **kwargs)
            finally:
                stage_cpu[key] = stage_cpu.get(key, 0.0) + clock() - started
                calls[key] = calls.get(key, 0) + 1
        return timed_call

    def calibrated(n: int = 20_000) -> tuple[float, float]:
        """(CPU seconds a timed call of nothing records, CPU seconds it costs)."""
        nothing = wrapped("nothing", lambda: None)
        started = clock()
        for _ in range(n):
            nothing()
        spent = clock() - started
        inside = stage_cpu.pop("nothing") / n
        calls.pop("nothing")
        return inside, spent / n

    patches = [(records, "jpeg_header", "header"), (records, "check_jpeg_data", "check"),
               (records, "encode_example", "record"), (local, "write_framed", "frame"),
               (ShardFacts, "add", "facts")]
    segment_file = getattr(local, "_SegmentFile", None)  # its flush: framing's system call
    if segment_file is not None:
        patches.append((segment_file, "_flush", "frame"))
    hash_module = type(sys)("xxhash")  # records' xxhash, with its one function timed
    hash_module.xxh3_128_digest = wrapped("hash", xxhash.xxh3_128_digest)
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    saved.append((records, "xxhash", records.xxhash))
    for owner, name, key in patches:
        setattr(owner, name, wrapped(key, getattr(owner, name)))
    records.xxhash = hash_module
    gc.collect()
    gc.freeze()
    before = [calibrated()]
    worker_cpu = 0.0
    sizes = []  # each segment's frame sizes, as its worker kept them
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    try:
        with Prefetcher() as prefetcher:
            for segment in segments:
                started = clock()
                rows = planned.rows(segment.positions, segment.split)
                taken = clock()
                reads = [RowReads(wrapped("read", r.image), r.mask)
                         for r in map(prefetcher.reads, rows)]
                wrapping = clock()  # (making the read timers: not the worker's work)
                encoded = local._encode_segment(segment, rows, options, reads, prefetcher)
                ended = clock()
                stage_cpu["rows"] = stage_cpu.get("rows", 0.0) + taken - started
                worker_cpu += (taken - started) + (ended - wrapping)
                assert not encoded.rejections
                facts.append(encoded.facts)
                sizes.append(getattr(encoded, "frame_sizes", None))
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    finally:
        for owner, name, function in saved:
            setattr(owner, name, function)
        before.append(calibrated())
        gc.unfreeze()
    inside = statistics.mean(i for i, _ in before)
    outside = statistics.mean(o for _, o in before) - inside
    timed_calls = sum(calls.values())
    for key, n in calls.items():
        cpu[key] = stage_cpu[key] - n * inside
    cpu["rows"] = stage_cpu["rows"]
    cpu["rest"] = worker_cpu - sum(stage_cpu.values()) - timed_calls * outside
    cpu["timer"] = (inside + outside) * count  # (µs a timed call, once divided by count)
    cpu["worker_faults"] = faults / 1e6  # (page faults an image, once divided by count)
    encoded = [local.Encoded(s.number, s.path, len(s.positions), [], f,
                             *([] if walk else [z]))
               for s, f, z in zip(segments, facts, sizes)]
    context = multiprocessing.get_context("fork")
    tasks, results_queue = context.Queue(), context.Queue()
    with timed("queue", time.process_time):  # the feeder thread's time too
        for segment, done in zip(segments, encoded):
            tasks.put(segment)
            tasks.get()
            results_queue.put(done)
            results_queue.get()
    for channel in (tasks, results_queue):
        channel.close()
        channel.join_thread()
    with timed("append_sha256"):
        digest = hashlib.sha256()
        for segment in segments:
            with open(segment.path, "rb") as f, \
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
                digest.update(view)
    with timed("append_frames"):
        for segment in segments if walk else ():
            with open(segment.path, "rb") as f, \
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
                walk(view)
    sizes_of = {segment.path: found for segment, found in zip(segments, sizes)}
    shards_out = os.path.join(out, "shards")
    os.makedirs(shards_out)
    by_shard: dict[str, list] = {}
    for shard in plan.shards:
        by_shard[shard.filename] = []
    it = iter(segments)
    for shard in plan.shards:
        for _ in range(-(-len(shard.positions) // local._MAX_SEGMENT_ROWS)):
            by_shard[shard.filename].append(next(it))
    for name, shard_segments in by_shard.items():
        with timed("commit"):
            writer = ShardWriter(os.path.join(shards_out, name), ".tmp").__enter__()
        for segment in shard_segments:
            with timed("append"):
                if walk:
                    writer.append_file(segment.path, len(segment.positions))
                else:
                    writer.append_file(segment.path, sizes_of[segment.path])
            with timed("delete"):
                fs.delete([segment.path])
        with timed("commit"):
            writer.__exit__(None, None, None)
    with timed("encode_segments"):
        queued = iter(segments)
        for _ in local.encode_segments(lambda block: next(queued, None), planned, options, 1):
            pass
    fs.delete([s.path for s in segments])
    shutil.rmtree(os.path.join(out, "warm"))
    started = time.process_time()
    tfrecorder.convert(table, os.path.join(out, "one"), progress=False, num_workers=1,
                       validate=True)
    cpu["convert_1"] = time.process_time() - started
    driver, workers = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                           resource.RUSAGE_CHILDREN))
    tfrecorder.convert(table, os.path.join(out, "two"), progress=False, num_workers=2,
                       validate=True)
    for key, who, before in (("convert_2_driver", resource.RUSAGE_SELF, driver),
                             ("convert_2_workers", resource.RUSAGE_CHILDREN, workers)):
        after = resource.getrusage(who)
        cpu[key] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    shutil.rmtree(out)
    return {key: seconds / count * 1e6 for key, seconds in cpu.items()}


def export(commit: str, folder: str) -> str:
    """The tree at `commit`, exported (the work tree is not touched)."""
    target = os.path.join(folder, f"base-{commit}")
    if not os.path.isdir(target):
        os.makedirs(target)
        archive = subprocess.run(["git", "-C", ROOT, "archive", commit, "tfrecorder"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return target


def in_fresh_process(tree: str, args) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": tree}
    result = subprocess.run(
        [sys.executable, __file__, "--measure", "--images", str(args.images), "--out",
         args.out], env=environment, capture_output=True, text=True)
    if result.returncode:
        sys.stderr.write(result.stderr[-5000:])
        result.check_returncode()
    return json.loads(result.stdout.strip().splitlines()[-1])


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="/tmp/tfr-stages")
    parser.add_argument("--base", help="a commit to measure before this tree, alternating")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.measure:
        import tfrecorder

        assert tfrecorder.__file__.startswith(os.environ["PYTHONPATH"]), tfrecorder.__file__
        print(json.dumps(measure(args.images, args.out)))
        return
    trees = {"this tree": ROOT}
    if args.base:
        trees = {f"before ({args.base})": export(args.base, args.out), "after": ROOT}
    found: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            found[name].append(in_fresh_process(tree, args))

    print(f"\n    PYTHONPATH=. {os.path.relpath(sys.executable, ROOT)} "
          f"benchmarks/bench_stages.py {' '.join(sys.argv[1:])}\n")
    print(f"Machine: {platform.platform()}, {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
          f"; load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{args.images} JPEGs; µs of CPU an image, median of {args.rounds} rounds "
          f"(range)\n")
    names = list(trees)
    print("| stage | " + " | ".join(f"{name}: µs/image | share" for name in names) + " |")
    print("|---|" + "---|---|" * len(names))

    def line(key: str, label: str, share: bool) -> None:
        cells = []
        for name in names:
            values = [r[key] for r in found[name]]
            total = statistics.median(sum(r[k] for k, _ in STAGES) for r in found[name])
            cells.append(f"{cell(values)} | "
                         + (f"{statistics.median(values) / total:.0%}" if share else ""))
        print(f"| {label} | " + " | ".join(cells) + " |")

    for key, label in STAGES:
        line(key, label, True)
    for result in found.values():
        for r in result:
            r["sum"] = sum(r[k] for k, _ in STAGES)
            r["not_check"] = r["sum"] - r["check"]
    line("sum", "**sum of the stages**", True)
    line("not_check", "**all but the check**", True)
    for key, label in DETAIL + TOTALS:
        line(key, label, False)
    if args.base:
        before, after = names
        ratios = [a["not_check"] / b["not_check"] for a, b in zip(found[after], found[before])]
        print(f"\nall but the check, after / before, per round: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()

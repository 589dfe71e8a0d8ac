"""What knowing a million-image dataset costs: `info()` on its manifest, locally and in a
bucket 50 ms away, and the writer's last step summing up a million records' facts.

    .venv/bin/python benchmarks/bench_info.py [--records 1000000] [--rounds 5]

1. A manifest as a run over `--records` images would write it (1,000 classes, three
   splits, 1,000 shards, 200 duplicated images): `info(path)` in a fresh process, its
   call alone and with the import, from a local folder and from gcp-storage-emulator
   (tests/stores.py) with 50 ms added to every request; TensorFlow must stay unimported.
2. `ShardFacts` for `--records` records (as workers send them), then `split_statistics`
   and the duplicate search as `finish.finish` runs them: seconds, and the facts' memory.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import harness  # noqa: E402
import stores  # noqa: E402

from tfrecorder.format.manifest import (  # noqa: E402
    IMAGE_FEATURES,
    Labels,
    Manifest,
    Rejected,
    ShardInfo,
    Split,
    SplitInfo,
    record_feature_types,
)
from tfrecorder.format.manifest_statistics import (  # noqa: E402
    Copy,
    Distribution,
    Duplicate,
    SplitStatistics,
)
from tfrecorder.storage import fs  # noqa: E402
from tfrecorder.write.rows import Record, Row, StoredImage  # noqa: E402
from tfrecorder.write.statistics import (  # noqa: E402
    ShardFacts,
    candidate_duplicates,
    describe_duplicates,
    split_statistics,
)

CLASSES, SHARDS, DUPLICATES = 1000, 1000, 200
INFO = f"""
import sys, time
started = time.perf_counter()
import tfrecorder
imported = time.perf_counter()
found = tfrecorder.info(sys.argv[1])
done = time.perf_counter()
assert found.num_records == int(sys.argv[2]) and len(found.duplicates) == {DUPLICATES}
assert "tensorflow" not in sys.modules
print(imported - started, done - imported)
"""


def big_manifest(records: int) -> Manifest:
    fractions = {Split.TRAIN: 0.8, Split.VALIDATION: 0.1, Split.TEST: 0.1}
    names = tuple(f"class_{i:04d}" for i in range(CLASSES))
    splits, stats = {}, {}
    for split, fraction in fractions.items():
        count, shards = int(records * fraction), max(1, int(SHARDS * fraction))
        splits[split] = SplitInfo.of(tuple(
            ShardInfo(f"{split}-{i:05d}-of-{shards:05d}.tfrecord", count // shards,
                      count // shards * 55_000, "ab" * 32) for i in range(shards)), 0)
        size = Distribution(240, 480, 512, 600, 4000, 540.5)
        stats[split] = SplitStatistics(tuple([count // CLASSES] * CLASSES), 0, size, size,
                                       Distribution(8000, 40000, 55000, 70000, 900000, 55000),
                                       {"jpeg": count - 10, "png": 10}, {3: count})
    duplicates = tuple(Duplicate(f"{i:032x}", (
        Copy(i, f"gs://bucket/images/{i}.jpg", Split.TRAIN, names[i % CLASSES]),
        Copy(records - i, f"gs://bucket/images/copy-{i}.jpg", Split.TEST, names[i % CLASSES])),
        f"train-00000-of-{int(SHARDS * 0.8):05d}.tfrecord", i) for i in range(DUPLICATES))
    header = Manifest(None, {**IMAGE_FEATURES, **record_feature_types(True, False)},
                      records, {"seed": 0}, Labels("text", names, False, CLASSES))
    return header.finished(splits, Rejected("rejected.csv", 0), stats, duplicates)


def info_seconds(path: str, records: int) -> tuple[float, float]:
    done = subprocess.run([sys.executable, "-c", INFO, path, str(records)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr)
    imported, called = map(float, done.stdout.split())
    return imported, called


def facts_for(records: int, rng) -> list[tuple[Split, str, ShardFacts]]:
    """What workers would send for `records` records, with DUPLICATES repeated images."""
    digests = rng.bytes(16 * records)
    digests = bytearray(digests)
    for i in range(DUPLICATES):  # the last records repeat the first ones
        digests[16 * (records - 1 - i):16 * (records - i)] = digests[16 * i:16 * (i + 1)]
    shards, per_shard = [], records // SHARDS
    for index in range(SHARDS):
        facts = ShardFacts()
        for position in range(index * per_shard, (index + 1) * per_shard):
            image = StoredImage("jpeg", 480, 640, 3, 55_000,
                                bytes(digests[16 * position:16 * (position + 1)]))
            facts.add(Row(position, None, None, position % CLASSES, "TRAIN"),
                      Record(b"", image))
        shards.append((Split.TRAIN, f"train-{index:05d}-of-{SHARDS:05d}.tfrecord", facts))
    return shards


def main() -> None:
    parser = harness.parser(__doc__.splitlines()[0], images=1_000_000, rounds=5)
    args = parser.parse_args()
    records = args.images
    manifest = big_manifest(records)
    data = manifest.to_bytes()
    print(f"manifest of {manifest.num_records:,} images: {len(data) / 1024:.0f} KB")

    with tempfile.TemporaryDirectory() as folder:
        fs.write_bytes(os.path.join(folder, "dataset.json"), data)
        with stores._running("gcs", stores._gcs_env) as store:
            uri = f"{store.root}/big"
            fs.write_bytes(f"{uri}/dataset.json", data)
            store.set_latency(0.05)
            for where, path in (("local folder", folder), ("gs:// at 50 ms", uri)):
                runs = [info_seconds(path, manifest.num_records) for _ in range(args.rounds)]
                imported = statistics.median(r[0] for r in runs)
                called = statistics.median(r[1] for r in runs)
                print(f"info() from a {where}: {called:.3f} s (import tfrecorder "
                      f"{imported:.2f} s), median of {args.rounds}")

    rng = np.random.default_rng(0)
    tracemalloc.start()
    started = time.perf_counter()
    shards = facts_for(records, rng)
    built = time.perf_counter() - started
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    started = time.perf_counter()
    split_statistics([facts for _, _, facts in shards], CLASSES)
    summed = time.perf_counter() - started
    started = time.perf_counter()
    candidates = candidate_duplicates(shards)  # then read back and confirmed: 200 records
    found = describe_duplicates([(f"{i:032x}", group) for i, group in enumerate(candidates)],
                                [name for _, name, _ in shards], pd.RangeIndex(records),
                                [f"img/{i}.jpg" for i in range(records)], None)
    searched = time.perf_counter() - started
    assert len(found) == DUPLICATES
    print(f"facts of {records:,} records: {held / records:.0f} bytes a record "
          f"({held / 2**20:.0f} MB; noted in {built:.1f} s here, spread over the workers "
          f"in a run); split_statistics {summed:.2f} s; duplicates found in {searched:.2f} s")


if __name__ == "__main__":
    main()

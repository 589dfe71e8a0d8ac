"""Rows/s writing a table without images, beside the hand-written tf.train.Example loop.

    .venv/bin/python benchmarks/bench_structured.py [--images 200000] [--rounds 3]

(`--images` counts rows here.) The table has five columns: a text key, a float, an int,
a pandas categorical and a text label. The hand-written loop is the TF tutorial's way:
build a `tf.train.Example` per row and write it with `tf.io.TFRecordWriter`.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CONTENDERS = ("hand-written tf.train.Example loop, 1 process",
              "tfrecorder, 2 workers (validate, plan, write)")


def build_table(rows: int) -> pd.DataFrame:
    rng = np.random.RandomState(0)
    return pd.DataFrame({
        "key": [f"customer-{i}" for i in range(rows)],
        "spend": rng.randn(rows) * 100,
        "visits": rng.randint(0, 1000, rows),
        "plan": pd.Categorical(rng.choice(["basic", "plus", "pro"], rows)),
        "label": rng.choice(["stays", "leaves"], rows),
    })


def handwritten_loop(table: pd.DataFrame, output: str) -> None:
    import tensorflow as tf

    plans = {name: i for i, name in enumerate(table["plan"].cat.categories)}
    labels = {name: i for i, name in enumerate(sorted(set(table["label"])))}
    with tf.io.TFRecordWriter(output) as writer:
        for key, spend, visits, plan, label in zip(*(table[c].tolist() for c in table)):
            feature = {
                "key": tf.train.Feature(bytes_list=tf.train.BytesList(value=[key.encode()])),
                "spend": tf.train.Feature(float_list=tf.train.FloatList(value=[spend])),
                "visits": tf.train.Feature(int64_list=tf.train.Int64List(value=[visits])),
                "plan": tf.train.Feature(int64_list=tf.train.Int64List(value=[plans[plan]])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[label]])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def contender(name: str, table_pickle: str, out: str) -> float:
    table = pd.read_pickle(table_pickle)
    if name == CONTENDERS[0]:
        import tensorflow  # noqa: F401  (imports are not timed)

        started = time.perf_counter()
        handwritten_loop(table, os.path.join(out, "hand.tfrecord"))
        return time.perf_counter() - started
    import tfrecorder

    output = os.path.join(out, "structured")
    shutil.rmtree(output, ignore_errors=True)
    result = tfrecorder.convert(table, output, progress=False)
    assert result.num_records == len(table)
    return result.elapsed_seconds


def main() -> None:
    args = harness.parser(__doc__.splitlines()[0], images=200_000, rounds=3).parse_args()
    if args.contender:
        print(contender(args.contender, args.input, args.out))
        return
    os.makedirs(args.out, exist_ok=True)
    table_pickle = os.path.join(args.out, f"structured_{args.images}.pkl")
    build_table(args.images).to_pickle(table_pickle)
    results = harness.rounds(
        CONTENDERS, lambda name: harness.seconds_in_fresh_process(
            __file__, name, table_pickle, args.out), args.images, args.rounds)
    print(f"Rows: {args.images}; median of {args.rounds} rounds\n")
    print("| contender | rows/s |\n|---|---|")
    for name in CONTENDERS:
        print(f"| {name} | {harness.median(results, name):.0f} |")
    print(f"\ntfrecorder vs the loop: "
          f"{harness.median_ratio(results, CONTENDERS[1], CONTENDERS[0]):.1f}x")


if __name__ == "__main__":
    main()

"""Write throughput and memory of the local engine, against the usual hand-written way.

    .venv/bin/python benchmarks/bench_write.py [--images 3000] [--out /tmp/tfr-bench]

Builds real-looking JPEGs (random crops and rescales of the bundled sample photos,
400-800 px, about 50 KB), then reports images/s for:

- Pillow decode on one core (the cost of validating one image), and in one bare process
  per core (the most any validating writer can reach on this machine),
- the hand-written loop of TensorFlow's TFRecord tutorial (read the file, decode_jpeg for
  the shape, build a tf.train.Example, TFRecordWriter), one process,
- tfrecorder's local engine with and without validation,
- validation as it is (a strict decode at 1/8 DCT scale, `image_checks.check_jpeg_data`)
  against a full strict decode (the method before issue 12, patched in its own process),
  and against its ceiling: the scaled strict decode alone, of bytes in memory, on one core
  (times the cores) and in one bare process per core; and both decodes alone, on one core,

and the peak memory of a conversion for N and 4N rows (driver and each worker).
Results go in docs/performance.md; run on an idle machine.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time

import numpy as np
import pandas as pd
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import harness  # noqa: E402
from sample_crops import make_crops  # noqa: E402


def build_images(folder: str, count: int) -> pd.DataFrame:
    """`count` JPEGs of 400-800 px made from the sample photos; cached between runs."""
    return make_crops(folder, count, sides=(400, 800))


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def pillow_decode(paths):
    for path in paths:
        with Image.open(path) as image:
            image.load()


def in_processes(work, items, processes: int):
    """`work` on `items` in `processes` forked processes: what the machine can do at best."""
    pids = []
    for k in range(processes):
        pid = os.fork()
        if pid == 0:
            work(items[k::processes])
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def handwritten_loop(paths, labels, output: str):
    """The loop of TensorFlow's "TFRecord and tf.train.Example" tutorial."""
    import tensorflow as tf

    def image_example(image_string, label):
        image_shape = tf.io.decode_jpeg(image_string).shape
        feature = {
            "height": tf.train.Feature(int64_list=tf.train.Int64List(value=[image_shape[0]])),
            "width": tf.train.Feature(int64_list=tf.train.Int64List(value=[image_shape[1]])),
            "depth": tf.train.Feature(int64_list=tf.train.Int64List(value=[image_shape[2]])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_string])),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature))

    with tf.io.TFRecordWriter(output) as writer:
        for path, label in zip(paths, labels):
            with open(path, "rb") as f:
                image_string = f.read()
            writer.write(image_example(image_string, label).SerializeToString())


def scaled_decode(datas):
    """The writer's check alone: a strict decode at 1/8 DCT scale, in grey."""
    import simplejpeg

    for data in datas:
        simplejpeg.decode_jpeg(data, colorspace="GRAY", fastdct=True, fastupsample=True,
                               strict=True, min_height=1, min_width=1)


def full_decode(datas):
    """The check before issue 12 alone: a strict decode at full scale, in colour."""
    import simplejpeg

    for data in datas:
        simplejpeg.decode_jpeg(data, fastdct=True, fastupsample=True, strict=True)


def check_by_full_decode():
    """Makes validation decode every JPEG fully (colour, full scale), as it did before
    issue 12: patched in this process, which the local engine's workers fork from."""
    import simplejpeg

    from tfrecorder.format import image_checks
    from tfrecorder.write import records

    def check(data, header):
        colorspace = {1: "GRAY", 4: "CMYK"}.get(header.components, "RGB")
        try:
            simplejpeg.decode_jpeg(data, colorspace=colorspace, fastdct=True,
                                   fastupsample=True, strict=True)
        except ValueError as error:
            raise image_checks.ImageRejected(
                image_checks._jpeg_reason(str(error).strip())) from None

    records.check_jpeg_data = check  # the name the writer calls


def tfrecorder_run(table, output: str, **options) -> float:
    import tfrecorder

    shutil.rmtree(output, ignore_errors=True)
    result = tfrecorder.convert(table, output, progress=False, **options)
    assert result.num_rejected == 0 and result.num_records == len(table)
    return result.elapsed_seconds


def contender(name: str, table_pickle: str, out: str) -> float:
    """Seconds one contender takes, timing only its work (imports excluded)."""
    table = pd.read_pickle(table_pickle)
    paths = table["image_uri"].tolist()
    if name == "decode":
        return timed(lambda: pillow_decode(paths))
    if name == "ceiling":
        return timed(lambda: in_processes(pillow_decode, paths, os.cpu_count()))
    if name in ("scaled-decode", "scaled-ceiling", "full-decode"):
        datas = []
        for path in paths:
            with open(path, "rb") as f:
                datas.append(f.read())
        if name == "scaled-ceiling":
            return timed(lambda: in_processes(scaled_decode, datas, os.cpu_count()))
        return timed(lambda: (scaled_decode if name == "scaled-decode" else full_decode)(datas))
    if name == "handwritten":
        import tensorflow as tf  # noqa: F401  (imported before the clock starts)

        labels = table["label"].astype("category").cat.codes.tolist()
        return timed(lambda: handwritten_loop(paths, labels, os.path.join(out, "hand.tfr")))
    import tfrecorder  # noqa: F401

    if name == "validated-full":
        check_by_full_decode()
    dataset = os.path.join(out, "dataset")
    return tfrecorder_run(table, dataset, validate=name.startswith("validated"))


MEMORY_RUN = """
import json, os, sys, threading, time
import pandas as pd, tfrecorder

def hwm_kb(pid="self"):  # peak RSS of one process; unlike ru_maxrss, reset by exec
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))

workers_kb, done = {}, threading.Event()
def watch_workers():  # workers exit before the run returns: sample their peaks meanwhile
    me = os.getpid()
    while not done.wait(0.05):
        try:
            for pid in open(f"/proc/{me}/task/{me}/children").read().split():
                workers_kb[pid] = max(workers_kb.get(pid, 0), hwm_kb(pid))
        except (OSError, StopIteration):
            pass

table = pd.read_pickle(sys.argv[1])
table = pd.concat([table] * int(sys.argv[3]), ignore_index=True)
before = hwm_kb()
threading.Thread(target=watch_workers, daemon=True).start()
tfrecorder.convert(table, sys.argv[2], progress=False, overwrite=True)
done.set()
print(json.dumps({"rows": len(table), "table_loaded_kb": before, "driver_kb": hwm_kb(),
                  "worker_kb": max(workers_kb.values(), default=0)}))
"""


def peak_memory(table, output: str, repeat: int) -> dict:
    import json

    pickled = output + ".pkl"
    table.to_pickle(pickled)
    out = subprocess.run([sys.executable, "-c", MEMORY_RUN, pickled, output, str(repeat)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    args = harness.parser(__doc__.splitlines()[0], images=3000, rounds=5).parse_args()
    if args.contender:
        print(contender(args.contender, args.input, args.out))
        return

    table = build_images(os.path.join(args.out, "images"), args.images)
    n, sizes = len(table), [os.path.getsize(p) for p in table["image_uri"]]
    table_pickle = os.path.join(args.out, "table.pkl")
    table.to_pickle(table_pickle)
    pillow_decode(table["image_uri"])  # warm the page cache: every contender reads memory
    names = ["decode", "ceiling", "handwritten", "validated", "trusted", "validated-full",
             "scaled-decode", "scaled-ceiling", "full-decode"]
    rounds = harness.rounds(
        names, lambda name: harness.seconds_in_fresh_process(__file__, name, table_pickle,
                                                              args.out), n, args.rounds)
    rate = {name: harness.median(rounds, name) for name in names}
    cores = os.cpu_count()
    validated_ratio = harness.median_ratio(rounds, "validated", "decode", cores)
    ceiling_ratio = harness.median_ratio(rounds, "ceiling", "decode", cores)
    trusted_ratio = harness.median_ratio(rounds, "trusted", "handwritten")
    scaled_vs_full = harness.median_ratio(rounds, "validated", "validated-full")
    scaled_vs_ceiling = harness.median_ratio(rounds, "validated", "scaled-decode", cores)
    scaled_ceiling = harness.median_ratio(rounds, "scaled-ceiling", "scaled-decode", cores)
    scaled_vs_bare = harness.median_ratio(rounds, "validated", "scaled-ceiling")
    decode_gain = harness.median_ratio(rounds, "scaled-decode", "full-decode")
    memory = [peak_memory(table, os.path.join(args.out, "dataset"), repeat)
              for repeat in (1, 4)]

    print(f"\nMachine: {platform.platform()}, {cores} cores, Python {platform.python_version()}")
    print(f"Images: {n} JPEGs, {np.mean(sizes) / 1000:.0f} KB mean, 400-800 px; "
          f"median of {args.rounds} rounds\n")
    print("| contender | images/s |")
    print("|---|---|")
    print(f"| Pillow full decode, 1 core (reference) | {rate['decode']:.0f} |")
    print(f"| Pillow full decode, {cores} bare processes (the machine's ceiling) | "
          f"{rate['ceiling']:.0f} |")
    print(f"| hand-written tf.train.Example loop (TF tutorial), 1 process | "
          f"{rate['handwritten']:.0f} |")
    print(f"| tfrecorder, validate=True, {cores} workers | {rate['validated']:.0f} |")
    print(f"| tfrecorder, validate=False, {cores} workers | {rate['trusted']:.0f} |")
    print(f"| tfrecorder, validate=True by a full decode (before issue 12), {cores} workers "
          f"| {rate['validated-full']:.0f} |")
    print(f"| strict decode at 1/8 scale (the check alone), 1 core | "
          f"{rate['scaled-decode']:.0f} |")
    print(f"| strict decode at 1/8 scale, {cores} bare processes | "
          f"{rate['scaled-ceiling']:.0f} |")
    print(f"| strict decode at full scale (the check before issue 12 alone), 1 core | "
          f"{rate['full-decode']:.0f} |")
    print()
    per_round = ", ".join(f"{r['validated'] / (cores * r['decode']):.0%}" for r in rounds)
    print(f"validate=True vs {cores}x Pillow decode: {validated_ratio:.0%} (target >= 85%); "
          f"per round: {per_round}")
    print(f"the machine's own ceiling ({cores} bare decode processes) vs {cores}x: "
          f"{ceiling_ratio:.0%}")
    print(f"validate=False vs hand-written loop: {trusted_ratio:.1f}x (target >= 2x)")
    print(f"validate=True, scaled check vs full decode: {scaled_vs_full:.2f}x (target >= 1.6x); "
          f"the decodes alone, 1 core: {decode_gain:.2f}x")
    per_round = ", ".join(f"{r['validated'] / (cores * r['scaled-decode']):.0%}"
                          for r in rounds)
    print(f"validate=True vs {cores}x the scaled check alone: {scaled_vs_ceiling:.0%} "
          f"(target >= 85%); per round: {per_round}")
    print(f"the check alone in {cores} bare processes vs {cores}x: {scaled_ceiling:.0%}; "
          f"validate=True vs the check alone in {cores} bare processes: {scaled_vs_bare:.0%}")
    print()
    print("| rows | driver peak RSS | driver RSS before converting | worker peak RSS |")
    print("|---|---|---|---|")
    for m in memory:
        print(f"| {m['rows']} | {m['driver_kb'] / 1024:.0f} MB | "
              f"{m['table_loaded_kb'] / 1024:.0f} MB | {m['worker_kb'] / 1024:.0f} MB |")


if __name__ == "__main__":
    main()

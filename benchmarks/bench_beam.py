"""The Beam engine on the DirectRunner, beside the local engine and TFRecorder 2.0's way.

    cd benchmarks && ../.venv/bin/python bench_beam.py [--images 1000] [--rounds 2]

Same JPEGs as bench_write.py. Contenders (each in a fresh process, imports not timed):
- tfrecorder's local engine (2 workers, validate=True);
- tfrecorder's Beam engine on the DirectRunner, multi-processing mode, 2 workers;
- a pipeline written the way TFRecorder 2.0 did it: `beam.Create` of the DataFrame's rows,
  Pillow decode, base64 raw pixels, a `tf.train.Example` per row, `WriteToTFRecord`, on
  the DirectRunner.
"""

from __future__ import annotations

import os
import shutil
import time

import harness
from bench_write import build_images

import tfrecorder


def tfrecorder_2_style(table, output: str) -> None:
    """TFRecorder 2.0's pipeline shape (beam_pipeline.py / beam_image.py), condensed."""
    import base64

    import apache_beam as beam
    import tensorflow as tf
    from PIL import Image

    def load_and_encode(row):
        with tf.io.gfile.GFile(row["image_uri"], "rb") as f:
            image = Image.open(f)
            image.load()
        feature = {
            "image": base64.b64encode(image.tobytes(), altchars=b"-_"),
            "image_name": row["image_uri"].encode(),
            "image_width": image.size[0], "image_height": image.size[1],
            "image_channels": 1 if "L" in image.mode else 3,
            "label": row["label"].encode(), "split": row["split"].encode(),
        }
        return tf.train.Example(features=tf.train.Features(feature={
            k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) if isinstance(v, bytes)
            else tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
            for k, v in feature.items()})).SerializeToString()

    with beam.Pipeline(runner="DirectRunner") as pipeline:
        _ = (pipeline
             | beam.Create(table.to_dict("records"))
             | beam.Map(load_and_encode)
             | beam.io.WriteToTFRecord(os.path.join(output, "train")))


def contender(name: str, table_pickle: str, out: str) -> float:
    import pandas as pd

    table = pd.read_pickle(table_pickle)
    output = os.path.join(out, name)
    shutil.rmtree(output, ignore_errors=True)
    start = time.perf_counter()
    if name == "local":
        tfrecorder.convert(table, output, progress=False)
    elif name == "beam":
        tfrecorder.convert(table, output, progress=False, runner="DirectRunner",
                           beam_options={"direct_running_mode": "multi_processing",
                                         "direct_num_workers": os.cpu_count()})
    else:
        os.makedirs(output)
        tfrecorder_2_style(table, output)
    return time.perf_counter() - start


def main():
    args = harness.parser(__doc__.splitlines()[0], images=1000, rounds=2).parse_args()
    if args.contender:
        print(contender(args.contender, args.input, args.out))
        return
    table = build_images(os.path.join(args.out, "images"), args.images)
    pickle = os.path.join(args.out, f"beam_table_{args.images}.pkl")
    table.to_pickle(pickle)
    names = ["local", "beam", "tfrecorder_2"]
    rounds = harness.rounds(
        names, lambda name: harness.seconds_in_fresh_process(__file__, name, pickle, args.out),
        len(table), args.rounds)
    rate = {name: harness.median(rounds, name) for name in names}
    print(f"\n{len(table)} JPEGs, {os.cpu_count()} cores, median of {args.rounds} rounds\n")
    print("| contender | images/s |")
    print("|---|---|")
    print(f"| tfrecorder, local engine (validate=True) | {rate['local']:.0f} |")
    print(f"| tfrecorder, Beam engine, DirectRunner multi-processing | {rate['beam']:.0f} |")
    print(f"| TFRecorder 2.0-style pipeline, DirectRunner | {rate['tfrecorder_2']:.0f} |")


if __name__ == "__main__":
    main()

"""Convert the bundled sample photos into a TFRecord dataset and read it back.

    python examples/quickstart.py [OUTPUT_DIR]
"""

import os
import sys

import tfrecorder
from tfrecorder.dataset import read_manifest

HERE = os.path.dirname(os.path.abspath(__file__))


def main(output_dir: str) -> None:
    # images.csv is an AutoML Vision CSV: split,image_uri,label without a header row.
    result = tfrecorder.convert(os.path.join(HERE, "images.csv"), output_dir, overwrite=True)
    print(f"Wrote {result.num_records} records to {result.output_dir} "
          f"in {result.elapsed_seconds:.2f}s: {result.counts}; rejected: {result.num_rejected}",
          flush=True)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # only to show the dataset reads back

    manifest = read_manifest(output_dir)
    vocabulary = manifest["labels"]["vocabulary"]
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    for split, info in manifest["splits"].items():
        files = [os.path.join(output_dir, shard["file"]) for shard in info["shards"]]
        for serialized in tf.data.TFRecordDataset(files).take(1):
            example = tf.io.parse_single_example(serialized, spec)
            image = tf.io.decode_image(example["image"])
            print(f"  {split}: {info['num_records']} records; first: {image.shape} "
                  f"{vocabulary[example['label']]!r}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/samples")

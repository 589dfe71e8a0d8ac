"""Convert the bundled sample photos into a TFRecord dataset and load it for training.

    python examples/quickstart.py [OUTPUT_DIR]
"""

import os
import sys

import tfrecorder
from tfrecorder.manifest import read_manifest

HERE = os.path.dirname(os.path.abspath(__file__))


def main(output_dir: str) -> None:
    # images.csv is an AutoML Vision CSV: split,image_uri,label without a header row.
    result = tfrecorder.convert(os.path.join(HERE, "images.csv"), output_dir, overwrite=True)
    print(f"Wrote {result.num_records} records to {result.output_dir} "
          f"in {result.elapsed_seconds:.2f}s: {result.counts}; rejected: {result.num_rejected}",
          flush=True)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    vocabulary = read_manifest(output_dir).labels.vocabulary
    datasets = tfrecorder.load(output_dir, batch_size=4, image_size=(224, 224))
    for split, ds in datasets.items():
        batch = next(iter(ds))
        labels = [vocabulary[i] for i in batch["label"].numpy()]
        print(f"  {split}: {len(ds)} batches; first: images {tuple(batch['image'].shape)} "
              f"{batch['image'].dtype.name}, labels {labels}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/samples")

"""Convert the bundled sample photos into a TFRecord dataset, describe it, and load it
for training. Also writes OUTPUT_DIR-report.html, a page to open in a browser (beside
the dataset: `verify` names any file inside it that the manifest does not list).

    python examples/quickstart.py [OUTPUT_DIR]
"""

import os
import sys

import tfrecorder

HERE = os.path.dirname(os.path.abspath(__file__))


def main(output_dir: str) -> None:
    # images.csv is an AutoML Vision CSV: split,image_uri,label without a header row.
    result = tfrecorder.convert(os.path.join(HERE, "images.csv"), output_dir, overwrite=True)
    print(f"Wrote {result.num_records} records to {result.output_dir} "
          f"in {result.elapsed_seconds:.2f}s: {result.counts}; rejected: {result.num_rejected}",
          flush=True)

    datasets, info = tfrecorder.load(output_dir, batch_size=4, image_size=(224, 224),
                                     with_info=True)
    for split, ds in datasets.items():
        batch = next(iter(ds))
        labels = [info.class_names[i] for i in batch["label"].numpy()]
        print(f"  {split}: {len(ds)} batches; first: images {tuple(batch['image'].shape)} "
              f"{batch['image'].dtype.name}, labels {labels}")
    print(f"Records per class: {info.class_counts['train']} (train); "
          f"report: {tfrecorder.report(output_dir, output_dir.rstrip('/') + '-report.html')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/samples")

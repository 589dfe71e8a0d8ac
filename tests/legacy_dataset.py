"""Writes a dataset as Google's TFRecorder 2.0 laid it out, independently of tfrecorder:
TensorFlow's own `tf.io.TFRecordWriter` and `tf.train.Example`.

What 2.0 wrote (github.com/google/tensorflow-recorder, release 2.0: `beam_pipeline.py`,
`beam_image.py`, `input_schema.py`, and its `test_data/sample_tfrecords`):

    train-00000-of-00002.tfrecord.gz       Beam's WriteToTFRecord, gzip (or `.tfrecord`)
    validation-00000-of-00001.tfrecord.gz
    test-00000-of-00001.tfrecord.gz
    discarded-data-00000-of-00001          rows it could not use (text)
    transformed_metadata/schema.pbtxt      TF Metadata schema of the records
    transform_fn/assets/vocab_compute_and_apply_vocabulary_vocabulary

Records: `image` = web-safe base64 (padded) of Pillow's `tobytes()`; `image_height`,
`image_width`; `image_channels` = 1 if "L" is in the mode, else 3 (whatever the mode
really holds); `image_name` = the file's base name; `label` = the id of the text label in
TensorFlow Transform's vocabulary of the TRAIN rows (most frequent first, ties in reverse
byte order; -1 for a label TRAIN lacks); `split` = "TRAIN".

The TensorFlow Transform graph (`transform_fn/saved_model.pb`) is not written: nothing
but TensorFlow Transform reads it, and migrate does not.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from dataclasses import dataclass

from PIL import Image

VOCABULARY_FILE = "vocab_compute_and_apply_vocabulary_vocabulary"


@dataclass(frozen=True)
class Row:
    split: str  # "TRAIN", "VALIDATION" or "TEST"
    image_name: str
    image: Image.Image
    label: str


def vocabulary(rows: list[Row]) -> list[str]:
    """TensorFlow Transform's order for `compute_and_apply_vocabulary` over TRAIN: by
    count, most frequent first; equal counts in reverse byte order."""
    counts = Counter(row.label for row in rows if row.split == "TRAIN")
    return [label for label, _ in sorted(counts.items(),
                                         key=lambda item: (item[1], item[0].encode()),
                                         reverse=True)]


def write_legacy_dataset(folder, rows: list[Row], *, compression: str | None = "gzip",
                         num_shards: dict[str, int] | None = None) -> list[str]:
    """Writes `rows` into `folder` as TFRecorder 2.0 did; returns the label vocabulary.
    Records go round-robin into `num_shards[split]` shards (default 1) per split that
    has rows."""
    import tensorflow as tf

    folder = str(folder)
    os.makedirs(os.path.join(folder, "transform_fn", "assets"), exist_ok=True)
    os.makedirs(os.path.join(folder, "transformed_metadata"), exist_ok=True)
    labels = vocabulary(rows)
    with open(os.path.join(folder, "transform_fn", "assets", VOCABULARY_FILE), "w") as f:
        f.write("".join(f"{label}\n" for label in labels))
    with open(os.path.join(folder, "transformed_metadata", "schema.pbtxt"), "w") as f:
        f.write(_schema(len(labels)))
    open(os.path.join(folder, "discarded-data-00000-of-00001"), "w").close()

    suffix = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    options = tf.io.TFRecordOptions(compression_type="GZIP" if compression == "gzip" else "")
    for split in ("TRAIN", "VALIDATION", "TEST"):
        examples = [_example(row, labels) for row in rows if row.split == split]
        if not examples:
            continue
        count = (num_shards or {}).get(split.lower(), 1)
        for index in range(count):
            name = f"{split.lower()}-{index:05d}-of-{count:05d}{suffix}"
            with tf.io.TFRecordWriter(os.path.join(folder, name), options) as writer:
                for example in examples[index::count]:
                    writer.write(example.SerializeToString())
    return labels


def _example(row: Row, labels: list[str]):
    import tensorflow as tf

    def ints(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def strings(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    width, height = row.image.size
    return tf.train.Example(features=tf.train.Features(feature={
        "image": strings(base64.b64encode(row.image.tobytes(), altchars=b"-_")),
        "image_height": ints(height),
        "image_width": ints(width),
        "image_channels": ints(1 if "L" in row.image.mode else 3),
        "image_name": strings(row.image_name.encode()),
        "label": ints(labels.index(row.label) if row.label in labels else -1),
        "split": strings(row.split.encode()),
    }))


def _schema(num_labels: int) -> str:
    """transformed_metadata/schema.pbtxt: the features sorted by name, each present in
    every record, scalar; the label an int domain from -1 (TFT's default id)."""
    types = {"image": "BYTES", "image_channels": "INT", "image_height": "INT",
             "image_name": "BYTES", "image_width": "INT", "label": "INT", "split": "BYTES"}
    parts = []
    for name, kind in types.items():
        domain = (f"  int_domain {{\n    min: -1\n    max: {num_labels - 1}\n"
                  "    is_categorical: true\n  }\n") if name == "label" else ""
        parts.append(f'feature {{\n  name: "{name}"\n  type: {kind}\n{domain}'
                     "  presence {\n    min_fraction: 1.0\n  }\n  shape {\n  }\n}\n")
    return "".join(parts)

"""Train a small CNN with Keras on a tfrecorder dataset; about a minute on a laptop CPU.

    python examples/train_keras.py [WORK_DIR]

Makes 800 training photos from the bundled samples (random crops and rescales, so the
task is easy: recognise which of 4 photos a crop came from), converts them with
tfrecorder, and trains on `tfrecorder.load(...)` with Keras augmentation layers.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from sample_crops import make_crops  # noqa: E402

import tfrecorder  # noqa: E402

SIZE = (64, 64)


def main(work_dir: str) -> None:
    table = make_crops(os.path.join(work_dir, "crops"), count=800, sides=(96, 192))
    dataset_dir = os.path.join(work_dir, "dataset")
    result = tfrecorder.convert(table, dataset_dir, overwrite=True, progress=False)
    print(f"Converted {result.num_records} images: {result.counts}")
    class_names = tfrecorder.info(dataset_dir).class_names

    data = tfrecorder.load(dataset_dir, batch_size=32, image_size=SIZE, as_supervised=True)
    model = tf.keras.Sequential([
        tf.keras.Input((*SIZE, 3)),
        tf.keras.layers.Rescaling(1 / 255),
        tf.keras.layers.RandomFlip("horizontal"),  # augmentation, active in fit() only
        tf.keras.layers.RandomRotation(0.05),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(len(class_names)),
    ])
    model.compile(optimizer="adam", metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    started = time.perf_counter()
    model.fit(data["train"], validation_data=data["validation"], epochs=8, verbose=2)
    loss, accuracy = model.evaluate(data["test"], verbose=0)
    print(f"Test accuracy: {accuracy:.1%} on {result.counts['test']} images of "
          f"{list(class_names)}; trained in {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/train_keras")

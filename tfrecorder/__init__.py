"""tfrecorder: tables of images -> sharded TFRecord datasets.

    import pandas as pd, tfrecorder
    df = pd.read_csv("images.csv", names=["split", "image_uri", "label"])
    result = df.tensorflow.to_tfrecord(output_dir="out/")

Importing the package registers the `df.tensorflow` accessor; TensorFlow itself is only
imported by the functions that read datasets back.
"""

from tfrecorder import accessor as _accessor  # noqa: F401  (registers df.tensorflow)
from tfrecorder._version import __version__
from tfrecorder.convert import ConversionResult, convert
from tfrecorder.errors import (
    ConversionAborted,
    DatasetExistsError,
    ImageError,
    SchemaError,
    TFRecorderError,
)

__all__ = [
    "ConversionAborted",
    "ConversionResult",
    "DatasetExistsError",
    "ImageError",
    "SchemaError",
    "TFRecorderError",
    "__version__",
    "convert",
]

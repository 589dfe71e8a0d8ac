"""TFRecorder 2.0's `tfrecorder.input_schema`, so that `from tfrecorder import
input_schema` runs: `Schema` lives in `tfrecorder.legacy.input_schema`. Importing this
module warns."""

import warnings

from tfrecorder.legacy.input_schema import (  # noqa: F401  (2.0's names, re-exported)
    IMAGE_CSV_SCHEMA,
    Schema,
    image_csv_schema_map,
    types,
)

warnings.warn("tfrecorder.input_schema is TFRecorder 2.0's; pass schema= a dict of "
              "column names to type names, e.g. {'split': 'SplitKey'}.", DeprecationWarning,
              stacklevel=2)

"""`df.tensorflow`: the pandas accessor, a thin facade over `tfrecorder.convert`."""

from __future__ import annotations

import pandas as pd

from tfrecorder.legacy.edge import convert  # 2.0's spellings too (`to_tfr`'s callers')
from tfrecorder.write.convert import ConversionResult


@pd.api.extensions.register_dataframe_accessor("tensorflow")
class TensorFlowAccessor:
    """`df.tensorflow.to_tfrecord(output_dir, ...)` converts the DataFrame's images."""

    def __init__(self, frame: pd.DataFrame):
        self._frame = frame

    def to_tfrecord(self, output_dir: str | None = None, **options) -> ConversionResult:
        """Writes the DataFrame as a TFRecord dataset; see `tfrecorder.convert`."""
        return convert(self._frame, output_dir, **options)

    to_tfr = to_tfrecord  # TFRecorder's name

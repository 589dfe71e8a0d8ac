"""TFRecorder 2.0's `tfrecorder.types`, so that `from tfrecorder import types` runs: the
classes live in `tfrecorder.legacy.types`. Importing this module warns."""

import warnings

from tfrecorder.legacy.types import (  # noqa: F401  (2.0's names, re-exported)
    CategoricalInput,
    FloatInput,
    ImageUri,
    IntegerInput,
    IntegerLabel,
    SplitKey,
    StringInput,
    StringLabel,
    SupportedType,
)

warnings.warn("tfrecorder.types is TFRecorder 2.0's; name the types as strings instead, "
              "e.g. schema={'path': 'ImageUri'}.", DeprecationWarning, stacklevel=2)

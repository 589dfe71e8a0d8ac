"""TFRecorder 2.0's column types, for code that passes `schema={"x": types.ImageUri}`.

Importing it warns: tfrecorder names types by strings (`schema={"x": "ImageUri"}`), and
reads these classes by their names (see docs/schema.md).
"""

import warnings

warnings.warn("tfrecorder.types is TFRecorder 2.0's; name the types as strings instead, "
              "e.g. schema={'path': 'ImageUri'}.", DeprecationWarning, stacklevel=2)


class SupportedType:
    """A column type, known by its class name."""


class SplitKey(SupportedType):
    allowed_values = ("TRAIN", "VALIDATION", "TEST", "DISCARD")


class ImageUri(SupportedType):
    pass


class StringLabel(SupportedType):
    pass


class IntegerLabel(SupportedType):
    pass


class StringInput(SupportedType):
    pass


class IntegerInput(SupportedType):
    pass


class FloatInput(SupportedType):
    pass


class CategoricalInput(SupportedType):
    pass

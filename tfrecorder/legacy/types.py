"""TFRecorder 2.0's column types, for code that passes `schema={"x": types.ImageUri}`.

tfrecorder names types by strings (`schema={"x": "ImageUri"}`) and reads these classes by
their names (see docs/schema.md). 2.0's code imports them as `tfrecorder.types`, a module
that re-exports them and warns; importing them from here does not warn.
"""

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

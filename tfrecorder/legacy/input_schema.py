"""TFRecorder 2.0's `input_schema.Schema`, for code that passes `schema=Schema({...})`.

`schema=` takes the mapping itself (`{"split": "SplitKey", ...}`). 2.0's code imports this
as `tfrecorder.input_schema`, a module that re-exports it and warns; importing it from
here does not warn.
"""

from tfrecorder.legacy import types


class Schema:
    """A mapping of columns to types; `convert(schema=...)` reads `input_schema_map`."""

    def __init__(self, schema_map):
        self.input_schema_map = dict(schema_map)

    def get_input_keys(self):
        return self.input_schema_map.keys()


image_csv_schema_map = {"split": types.SplitKey, "image_uri": types.ImageUri,
                        "label": types.StringLabel}
IMAGE_CSV_SCHEMA = Schema(image_csv_schema_map)

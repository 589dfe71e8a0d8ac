"""TFRecorder 2.0's `input_schema.Schema`, for code that passes `schema=Schema({...})`.

Importing it warns: `schema=` takes the mapping itself (`{"split": "SplitKey", ...}`).
"""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # this module warns once, below
    from tfrecorder import types

warnings.warn("tfrecorder.input_schema is TFRecorder 2.0's; pass schema= a dict of "
              "column names to type names, e.g. {'split': 'SplitKey'}.", DeprecationWarning,
              stacklevel=2)


class Schema:
    """A mapping of columns to types; `convert(schema=...)` reads `input_schema_map`."""

    def __init__(self, schema_map):
        self.input_schema_map = dict(schema_map)

    def get_input_keys(self):
        return self.input_schema_map.keys()


image_csv_schema_map = {"split": types.SplitKey, "image_uri": types.ImageUri,
                        "label": types.StringLabel}
IMAGE_CSV_SCHEMA = Schema(image_csv_schema_map)

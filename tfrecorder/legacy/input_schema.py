"""TFRecorder 2.0's `input_schema.Schema`, for code that passes `schema=Schema({...})`.

`schema=` takes the mapping itself (`{"split": "SplitKey", ...}`). 2.0's code imports this
as `tfrecorder.input_schema`, a module that re-exports it and warns; importing it from
here does not warn.
"""

from tfrecorder.legacy import types
from tfrecorder.sources.schema import IMAGE_URI, LABEL_TYPES, SPLIT_KEY


class Schema:
    """A mapping of columns to types; `convert(schema=...)` reads `input_schema_map`.

    Like 2.0's, it names its key columns: `split_key`, `image_uri_key` and `label_key`
    (None where the schema has no such column). Types are 2.0's classes
    (`types.SplitKey`) or our type names (`"SplitKey"`).
    """

    def __init__(self, schema_map):
        self.input_schema_map = dict(schema_map)
        self.split_key = self._key_of(SPLIT_KEY)
        self.image_uri_key = self._key_of(IMAGE_URI)
        self.label_key = self._key_of(*LABEL_TYPES)

    def get_input_keys(self):
        return self.input_schema_map.keys()

    def _key_of(self, *type_names: str):
        """The first column of one of these types: 2.0 allowed one of each."""
        return next((column for column, kind in self.input_schema_map.items()
                     if getattr(kind, "__name__", kind) in type_names), None)


image_csv_schema_map = {"split": types.SplitKey, "image_uri": types.ImageUri,
                        "label": types.StringLabel}
IMAGE_CSV_SCHEMA = Schema(image_csv_schema_map)

"""Google's TFRecorder 2.0 (2020): what its users' code and datasets need, in one place.

- `spellings`: 2.0's spellings the readers accept (splits named "TRAIN",
  `tfrecord_dir=`), and `deprecated`, the warning every 2.0 spelling gives. A leaf:
  `load`, `inspect` and `show` import it and nothing else of 2.0's.
- `convert_spellings`: 2.0's spellings of `convert()`'s arguments (`dataflow_options=`,
  `num_shards=0`, `names=`, no output folder), which `convert` translates, and 2.0's
  names of the result's counters (`rows`, `good_images`, `bad_images`).
- `functions`: 2.0's top-level functions, made of ours: `create_tfrecords`,
  `check_tfrecords` (deprecated) and `convert_and_load`. They call the writer and the
  readers, so only `tfrecorder/__init__.py` and the command line import them.
- `types`, `input_schema`: 2.0's classes for `schema=` (`types.ImageUri`,
  `input_schema.Schema`). 2.0's code imports them as `tfrecorder.types` and
  `tfrecorder.input_schema`, tiny modules that re-export them and warn once.
- `detect`: whether a folder is a 2.0 dataset, and the hint readers add to "no
  dataset.json" (imports only `fs`), which importing this package registers with
  `manifest`: the contract imports nothing of 2.0's.
- `migration`: reading a 2.0 dataset and `migrate`, which writes a tfrecorder dataset of
  it (a writer).

Named `legacy` (not `v2`) because `tfrecorder.legacy` is where `migrate` and
`is_legacy_dataset` have been documented, and stay. Importing this package loads only
`detect`: `migrate` is imported when first asked for, so a reader that imports
`tfrecorder.legacy.detect` never loads the writer.
"""

from tfrecorder.legacy.detect import is_legacy_dataset, legacy_hint
from tfrecorder.manifest import add_no_manifest_hint

add_no_manifest_hint(legacy_hint)

__all__ = ["is_legacy_dataset", "legacy_hint", "migrate"]


def __getattr__(name: str):
    if name == "migrate":
        from tfrecorder.legacy.migration import migrate

        return migrate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Google's TFRecorder 2.0 (2020): what its users' code and datasets need, in one place.

- `edge`: the package's public functions (`tfrecorder.convert`, `load`, `inspect`,
  `show`, `open_split`), each ours with 2.0's spellings translated first: the one door.
  The writer and the readers import nothing of `legacy/`; the package, the accessor and
  the command line call these.
- `spellings`: 2.0's spellings the readers accept (splits named "TRAIN",
  `tfrecord_dir=`), and `deprecated`, the warning every 2.0 spelling gives.
- `convert_spellings`: 2.0's spellings of `convert()`'s arguments (`dataflow_options=`,
  `num_shards=0`, `names=`, no output folder), and 2.0's names of the result's counters
  (`rows`, `good_images`, `bad_images`).
- `inspection`: what `inspect(tfrecord_dir=...)` writes, as 2.0's `check_tfrecords` did.
- `cli`: 2.0's commands (`create-tfrecords`, `check-tfrecords`), `migrate`, and
  python-fire's flags, added to the command line through two hooks.
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
`detect` and `manifest`, where it registers the hint: `migrate` is imported when first
asked for.
"""

from tfrecorder.format.manifest import add_no_manifest_hint
from tfrecorder.legacy.detect import is_legacy_dataset, legacy_hint

add_no_manifest_hint(legacy_hint)

__all__ = ["is_legacy_dataset", "legacy_hint", "migrate"]


def __getattr__(name: str):
    if name == "migrate":
        from tfrecorder.legacy.migration import migrate

        return migrate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

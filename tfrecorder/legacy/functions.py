"""TFRecorder 2.0's top-level functions, each made of ours: `create_tfrecords` (our
`convert`, deprecated), `check_tfrecords` (our `inspect`, deprecated) and
`convert_and_load` (`convert`, then `load`: kept as it is, without a warning).

They call the public functions (`edge`), which take 2.0's spellings, so they sit at the
top of the package: only `tfrecorder/__init__.py` and the command line (`legacy.cli`)
import this module, and nothing it imports imports it back.
"""

from __future__ import annotations

import warnings

from tfrecorder._tensorflow import check_installed
from tfrecorder.legacy.edge import convert, inspect, load
from tfrecorder.legacy.spellings import deprecated


def create_tfrecords(source, output_dir=None, **options):
    """TFRecorder 2.0's `create_tfrecords`: `tfrecorder.convert`."""
    deprecated("create_tfrecords()", "tfrecorder.convert()")
    return convert(source, output_dir, **options)


def check_tfrecords(tfrecord_dir, split: str = "TRAIN", num_records: int = 1,
                    output_dir: str = "output") -> str:
    """TFRecorder 2.0's `check_tfrecords`: `tfrecorder.inspect`, writing 2.0's layout
    (`output_dir/check-tfrecords-<timestamp>/data.csv` and an image per record)."""
    deprecated("check_tfrecords()", "tfrecorder.inspect(path, split=..., num_records=..., "
               "output_dir=...)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # said once, above
        return inspect(tfrecord_dir=tfrecord_dir, split=split, num_records=num_records,
                       output_dir=output_dir)


def convert_and_load(source, output_dir=None, *, split: str | None = None,
                     load_options: dict | None = None, **convert_options):
    """Converts `source` (see `tfrecorder.convert`) and loads the result (see `load`),
    as TFRecorder's function of the same name did."""
    # Before converting, which can take minutes; and without importing TensorFlow, which
    # the conversion's forked workers would inherit.
    check_installed("tfrecorder.convert_and_load()", "tfrecorder.convert() writes the "
                    "dataset without it, and tfrecorder.open_split() reads it.")
    result = convert(source, output_dir, **convert_options)
    return load(result.output_dir, split, **(load_options or {}))

"""TFRecorder 2.0's spellings, in one place, so that its users' code runs.

Google's TFRecorder 2.0 (2020) no longer installs; code written for it calls
`create_tfrecords`, passes `dataflow_options=` or `num_shards=0`, and names splits
"TRAIN". Each such spelling is translated here to ours, with a `DeprecationWarning` that
names the new one. Where 2.0 gave another *result* (label ids in frequency order, CSV
paths relative to the working folder, gzip by default) nothing is translated silently:
see docs/migrating.md. Light on purpose: `convert`, `load` and `inspect` call it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

from tfrecorder import fs
from tfrecorder.errors import OptionError, warn_user
from tfrecorder.splits import Split

# Where 2.0 wrote when no output_dir was given.
DEFAULT_OUTPUT_DIR = "./tfrecords"
# convert()'s keywords that 2.0 spelled otherwise.
_RENAMED = {"dataflow_options": "beam_options", "schema_map": "schema"}
_RUNNERS = {"DataFlowRunner": "DataflowRunner"}  # 2.0's README spelling


def deprecated(old: str, new: str) -> None:
    """Warns that `old` is 2.0's spelling of `new`, pointing at the user's line."""
    warn_user(f"{old} is TFRecorder 2.0's spelling; use {new}.", DeprecationWarning)


def output_dir(given) -> str:
    """`given`, or 2.0's default folder."""
    if given is not None:
        return os.fspath(given)
    deprecated("convert() without output_dir", f"output_dir (this run writes into "
               f"{DEFAULT_OUTPUT_DIR!r}, as TFRecorder 2.0 did)")
    return DEFAULT_OUTPUT_DIR


def convert_keywords(source, options: Mapping):
    """`source` and `convert()`'s keywords, with 2.0's spellings translated."""
    options = dict(options)
    for old, new in _RENAMED.items():
        if old in options:
            if new in options:
                raise TypeError(f"convert() got both {old!r} and {new!r}; pass {new!r}.")
            deprecated(f"{old}=", f"{new}=")
            options[new] = options.pop(old)
    schema = options.get("schema")
    if hasattr(schema, "input_schema_map"):  # 2.0's input_schema.Schema
        options["schema"] = dict(schema.input_schema_map)
    if "job_label" in options:
        label = options.pop("job_label")
        deprecated("job_label=", "beam_options={'job_name': ...}")
        if options.get("runner") and label:
            beam_options = dict(options.get("beam_options") or {})
            beam_options.setdefault("job_name", f"tfrecorder-{label}".replace("_", "-").lower())
            options["beam_options"] = beam_options
    if options.get("header") == "infer":
        deprecated("header='infer'", "header=None (the first line is read as a header "
                   "when it names columns)")
        options["header"] = None
    if "names" in options:
        source = _named_columns(source, options.pop("names"), options.pop("header", None))
    if isinstance(options.get("num_shards"), Mapping):  # {"TRAIN": 8}
        options["num_shards"] = {split_name(split) if isinstance(split, str) else split: count
                                 for split, count in options["num_shards"].items()}
    if isinstance(options.get("num_shards"), int) and options["num_shards"] == 0 \
            and not isinstance(options["num_shards"], bool):
        deprecated("num_shards=0", "num_shards=None (shards of about shard_size_mb)")
        options["num_shards"] = None
    runner = options.get("runner")
    if runner in _RUNNERS:
        deprecated(f"runner={runner!r}", f"runner={_RUNNERS[runner]!r}")
        options["runner"] = _RUNNERS[runner]
    return source, options


def _named_columns(source, names, header):
    """2.0's `names=` (and `header=`), which it passed to pandas: the DataFrame's
    columns `names`, or the CSV read by pandas with them, as 2.0 read it (paths relative
    to the working folder, not to the CSV)."""
    import pandas as pd

    if names is None:
        return source
    names = list(names)
    if isinstance(source, pd.DataFrame):
        deprecated("names=", f"a DataFrame of the columns {names}")
        return source[names]
    path = os.fspath(source)
    if not path.lower().endswith(".csv") and (fs.is_folder(path) or _parquet(path)):
        raise OptionError(
            f"names= names the columns of a CSV file (as TFRecorder 2.0 read it), but "
            f"{path!r} is a folder or a Parquet file, which names its own columns. Leave "
            "names= out (and select or drop columns with schema=, e.g. "
            "schema={'notes': None}).", option="names")
    deprecated("names=", "a CSV whose first line names its columns (its image paths are "
               "then read relative to the CSV; with names=, as TFRecorder 2.0 did, "
               "relative to the working folder)")
    if header not in (None, 0):
        raise OptionError(f"header must be None or 0 with names=, not {header!r}",
                          option="header")
    with fs.open_read(path) as file:
        return pd.read_csv(file, header=header, names=names)


def _parquet(path: str) -> bool:
    """A Parquet file, by its name or its first bytes (a Parquet file begins `PAR1`)."""
    from tfrecorder.sources.parquet import has_parquet_name

    if has_parquet_name(path):
        return True
    try:
        with fs.open_read(path) as file:
            return file.read(4) == b"PAR1"
    except Exception:  # unreadable: pandas says why, below
        return False


def split_name(name: str | None) -> str | None:
    """A split as a user names it to `load` or `inspect`: "train", or 2.0's "TRAIN"."""
    if name is None:
        return None
    try:
        split = Split(name)
    except ValueError:  # the manifest names the splits there are
        return name
    if name.strip() == split.stored:  # "TRAIN"; other spellings ("val") are ours too
        deprecated(f"split={name!r}", f"split={split.value!r}")
    return split.value


# What a 2.0 script that reads the datasets must change.
_READ_DIFFERENCES = {
    "load": ". Unlike 2.0's, the elements' 'image' is the decoded image (uint8, height x "
            "width x channels), not base64 pixels to decode: drop tf.io.decode_base64",
}


def dataset_dir(path, tfrecord_dir, function: str) -> str:
    """`path`, or 2.0's `tfrecord_dir=`."""
    if tfrecord_dir is not None:
        if path is not None:
            raise TypeError(f"{function}() got both path and tfrecord_dir; pass path.")
        deprecated("tfrecord_dir=", f"{function}(path)" + _READ_DIFFERENCES.get(function, ""))
        return os.fspath(tfrecord_dir)
    if path is None:
        raise TypeError(f"{function}() missing the dataset folder: {function}(path)")
    return os.fspath(path)


def create_tfrecords(source, output_dir=None, **options):
    """TFRecorder 2.0's `create_tfrecords`: `tfrecorder.convert`."""
    from tfrecorder.convert import convert

    deprecated("create_tfrecords()", "tfrecorder.convert()")
    return convert(source, output_dir, **options)


def check_tfrecords(tfrecord_dir, split: str = "TRAIN", num_records: int = 1,
                    output_dir: str = "output") -> str:
    """TFRecorder 2.0's `check_tfrecords`: `tfrecorder.inspect`, writing 2.0's layout
    (`output_dir/check-tfrecords-<timestamp>/data.csv` and an image per record)."""
    from tfrecorder.inspection import inspect

    deprecated("check_tfrecords()", "tfrecorder.inspect(path, split=..., num_records=..., "
               "output_dir=...)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # said once, above
        return inspect(tfrecord_dir=tfrecord_dir, split=split, num_records=num_records,
                       output_dir=output_dir)

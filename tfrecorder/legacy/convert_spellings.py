"""TFRecorder 2.0's spellings of `convert()`'s arguments, translated to ours.

Google's TFRecorder 2.0 (2020) no longer installs; code written for it passes
`dataflow_options=`, `num_shards=0`, `names=` or no output folder. Each such spelling is
translated here to ours, with a `DeprecationWarning` that names the new one. Where 2.0
gave another *result* (label ids in frequency order, CSV paths relative to the working
folder, gzip by default) nothing is translated silently: see docs/migrating.md. The public
`convert` (`edge`) calls it before ours; the readers' spellings (splits named "TRAIN",
`tfrecord_dir=`) are in `spellings`. `with_2_0_metrics` adds 2.0's names of the result's
counters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tfrecorder.errors import OptionError
from tfrecorder.legacy.spellings import deprecated, split_name
from tfrecorder.storage import fs

# Where 2.0 wrote when no output_dir was given.
DEFAULT_OUTPUT_DIR = "./tfrecords"
# convert()'s keywords that 2.0 spelled otherwise.
_RENAMED = {"dataflow_options": "beam_options", "schema_map": "schema"}
_RUNNERS = {"DataFlowRunner": "DataflowRunner"}  # 2.0's README spelling


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


def with_2_0_metrics(metrics: Mapping[str, int], has_images: bool) -> dict[str, int]:
    """Our counters, and 2.0's Beam counters beside them, for code that reads
    `result["metrics"]["good_images"]`: `rows` (rows read), `good_images` (images read
    and written) and `bad_images` (images that could not be: their rows are rejected). A
    table without images has neither good nor bad images."""
    if not metrics:  # a job still running: nothing counted yet
        return {}
    return {**metrics, "rows": metrics["rows_read"],
            "good_images": metrics["records_written"] if has_images else 0,
            "bad_images": metrics["rows_rejected"] if has_images else 0}


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

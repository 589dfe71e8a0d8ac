"""The package's public functions, with TFRecorder 2.0's spellings translated: the one door
2.0's code comes in by.

`tfrecorder.convert`, `load`, `inspect`, `show` and `open_split` are the functions of
`convert`, `load`, `inspection`, `show` and `reader`, wrapped here. Each wrapper
translates what 2.0's code passes (`tfrecord_dir=`, splits named "TRAIN",
`dataflow_options=`, ...), with a `DeprecationWarning` naming ours, and calls our
function, which knows nothing of 2.0. The package, the accessor and the command line call
these, so the writer and the readers import nothing of `legacy/`. A wrapper shows its
function's signature and docstring, with 2.0's keyword added where it is accepted, so
`help(tfrecorder.load)` documents `tfrecord_dir=`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect as _inspect
from collections.abc import Callable

from tfrecorder.legacy import convert_spellings
from tfrecorder.legacy import inspection as _inspection_2_0
from tfrecorder.legacy.spellings import dataset_dir, split_name
from tfrecorder.read import inspection as _inspection
from tfrecorder.read import load as _load
from tfrecorder.read import reader as _reader
from tfrecorder.read import show as _show
from tfrecorder.write import convert as _convert


def _public(function: Callable, *, tfrecord_dir: str | None = None, after: str = "split"):
    """Makes the decorated wrapper look like `function`; with `tfrecord_dir` (its
    docstring entry), with 2.0's `tfrecord_dir=` keyword too, documented after `after`'s
    entry, and `path` optional (either names the folder)."""

    def decorate(wrapper: Callable) -> Callable:
        functools.update_wrapper(wrapper, function)
        if tfrecord_dir is not None:
            wrapper.__signature__ = _with_tfrecord_dir(_inspect.signature(function))
            wrapper.__doc__ = _documented(function.__doc__, after, tfrecord_dir)
        return wrapper

    return decorate


def _with_tfrecord_dir(signature: _inspect.Signature) -> _inspect.Signature:
    """`signature` with `path` optional and `tfrecord_dir=` the first keyword-only one."""
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.name == "path":
            parameter = parameter.replace(default=None,
                                          annotation=f"{parameter.annotation} | None")
        parameters.append(parameter)
    where = next((i for i, parameter in enumerate(parameters)
                  if parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD)),
                 len(parameters))
    parameters.insert(where, _inspect.Parameter(
        "tfrecord_dir", _inspect.Parameter.KEYWORD_ONLY, default=None,
        annotation="str | os.PathLike | None"))
    return signature.replace(parameters=parameters)


def _documented(doc: str, after: str, entry: str) -> str:
    """`doc` with `entry` (an Args entry, indented) after the entry of `after`."""
    lines = doc.split("\n")
    end = next(i for i, line in enumerate(lines) if line.startswith(f"        {after}:")) + 1
    while lines[end].startswith(" " * 12):  # the entry's continued lines
        end += 1
    return "\n".join(lines[:end] + entry.split("\n") + lines[end:])


@_public(_convert.convert)
def convert(source, output_dir=None, **options):
    output_dir = convert_spellings.output_dir(output_dir)
    source, options = convert_spellings.convert_keywords(source, options)
    result = _convert.convert(source, output_dir, **options)
    has_images = result.info is not None and result.info.manifest.has_images
    return dataclasses.replace(
        result, metrics=convert_spellings.with_2_0_metrics(result.metrics, has_images))


@_public(_load.load, tfrecord_dir="        tfrecord_dir: TFRecorder 2.0's name for `path`.")
def load(path=None, split=None, *, tfrecord_dir=None, **options):
    path = dataset_dir(path, tfrecord_dir, "load")
    split = split_name(split)
    loaded = _load.load(path, split, **options)
    if split is not None:
        return loaded
    if options.get("with_info"):
        return _Splits(loaded[0]), loaded[1]
    return _Splits(loaded)


class _Splits(dict):
    """`load()`'s datasets by split: "train", and TFRecorder 2.0's "TRAIN"."""

    def __missing__(self, key):
        name = split_name(key) if isinstance(key, str) else None
        if name is None or name == key or not super().__contains__(name):
            raise KeyError(key)
        return self[name]

    def __contains__(self, key) -> bool:
        return super().__contains__(key) or (
            isinstance(key, str) and super().__contains__(key.lower()))


@_public(_inspection.inspect, after="output_dir", tfrecord_dir=_inspection_2_0.DOCUMENTED)
def inspect(path=None, split="train", num_records=5, output_dir=None, *, tfrecord_dir=None):
    written_as_2_0 = tfrecord_dir is not None
    path = dataset_dir(path, tfrecord_dir, "inspect")
    split = split_name(split)
    if written_as_2_0:
        return _inspection.write_first_records(path, split, num_records, output_dir,
                                               _inspection_2_0.CHECK_TFRECORDS)
    return _inspection.inspect(path, split, num_records, output_dir)


@_public(_show.show)
def show(path, split="train", *args, **options):
    return _show.show(path, split_name(split), *args, **options)


@_public(_reader.open_split)
def open_split(path, split="train", **options):
    path = dataset_dir(path, None, "open_split")
    # Not a string: `open_split` says what a split must be.
    return _reader.open_split(path, split_name(split) if isinstance(split, str) else split,
                              **options)


__all__ = ["convert", "inspect", "load", "open_split", "show"]

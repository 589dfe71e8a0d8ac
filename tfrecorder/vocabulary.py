"""A given label vocabulary (`label_vocabulary=`): class names whose order is their ids.

Users keep a model's ids across conversions, and across tools, by giving the vocabulary
instead of letting the plan sort the table's labels. It comes as a list of names, or as
a path (local or any fsspec URI) to one of:

- a text file, one class name per line (the first line is id 0);
- TFRecorder 2.0's output folder, or its `transform_fn` folder: 2.0 numbered labels with
  TensorFlow Transform's `compute_and_apply_vocabulary`, whose vocabulary file is
  `transform_fn/assets/vocab_compute_and_apply_vocabulary_vocabulary`, one label per line,
  most frequent first (ties in reverse byte order), counted on the TRAIN split only;
- a tfrecorder dataset (a folder with `dataset.json`), whose `labels.vocabulary` is
  reused, so that new data gets the ids a model was trained with.

Light on purpose (no TensorFlow, Pillow or pandas): the options check a given list, and
the plan reads a path, before any image is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tfrecorder import fs
from tfrecorder.errors import Option, OptionError
from tfrecorder.manifest import MANIFEST, read_manifest

OPTION = "label_vocabulary"
# Where TFRecorder 2.0 (TensorFlow Transform's `WriteTransformFn`) left its vocabulary.
TRANSFORM_FN = "transform_fn"
ASSETS = "assets"


def class_names(names: Iterable, where: str = "", option: str = OPTION) -> tuple[str, ...]:
    """`names` as a vocabulary: text, at least one, each once; whitespace around a name
    is no part of it (as in the table's labels). `where` names the file they were read
    from, and `option` the option that gave them, for the errors."""
    def place(i: int) -> str:
        return f"line {i + 1} of {where}" if where else f"position {i}"

    found: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise OptionError(Option(option), f" holds {name!r} at {place(i)}: class names "
                              "are text.", option=option)
        name = name.strip()
        if not name:
            raise OptionError(Option(option), f" holds a blank class name at {place(i)}. "
                              "Remove it: a blank would shift the ids of the names after it.",
                              option=option)
        if name in found:
            places = (f"lines {found[name] + 1} and {i + 1} of {where}" if where
                      else f"positions {found[name]} and {i}")
            raise OptionError(Option(option), f" names {name!r} twice ({places}). Each class "
                              "has one id: remove one.", option=option)
        found[name] = i
    if not found:
        raise OptionError(Option(option), f" is empty{f' ({where})' if where else ''}: give "
                          "the class names in the order of their ids.", option=option)
    return tuple(found)


def load(given: Iterable[str] | str | os.PathLike) -> tuple[str, ...]:
    """The vocabulary `label_vocabulary` gives: its names, or those its path holds."""
    if not isinstance(given, (str, os.PathLike)):
        return class_names(given)
    path = os.fspath(given)
    if fs.is_file_uri(path):
        path = fs.file_uri_path(path)
    if fs.exists(path):
        return _read_lines(path)
    if not fs.is_folder(path):
        raise OptionError(
            Option(OPTION), f" names {path!r}, which is neither a file nor a folder. Give a "
            "text file with one class name per line, a tfrecorder dataset or TFRecorder "
            "2.0's output folder, or a list of class names.", option=OPTION)
    if fs.exists(fs.join(path, MANIFEST)):
        return _from_dataset(path)
    return _read_lines(_transform_fn_file(path))


def _read_lines(path: str) -> tuple[str, ...]:
    try:
        text = fs.read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise OptionError(Option(OPTION), f" names {path!r}, which is not UTF-8 text "
                          f"({error}).", option=OPTION) from None
    return class_names(text.rstrip("\r\n").splitlines(), path)


def _from_dataset(path: str) -> tuple[str, ...]:
    labels = read_manifest(path).labels
    if labels is None or labels.vocabulary is None:
        what = "no labels" if labels is None else "integer labels (class ids, no names)"
        raise OptionError(
            Option(OPTION), f" names the dataset {path!r}, which has {what}: there is no "
            "vocabulary to reuse.", option=OPTION)
    return class_names(labels.vocabulary)


def _transform_fn_file(path: str) -> str:
    """The vocabulary file in a TFRecorder 2.0 folder: the folder 2.0 wrote
    (`tfrecorder-<time>-<label>`), its `transform_fn` folder, or that folder's `assets`."""
    folders = [fs.join(path, TRANSFORM_FN, ASSETS), fs.join(path, ASSETS)]
    if fs.basename(path.rstrip("/")) == ASSETS:
        folders.append(path)
    for folder in folders:
        names = fs.list_dir(folder)
        if len(names) == 1:
            return fs.join(folder, names[0])
        if names:
            raise OptionError(
                Option(OPTION), f" names {path!r}, whose {folder!r} holds several "
                f"vocabularies ({', '.join(names)}). Give the path of the label's file.",
                option=OPTION)
    raise OptionError(
        Option(OPTION), f" names the folder {path!r}, which holds neither a tfrecorder "
        f"dataset ({MANIFEST}) nor TFRecorder 2.0's {TRANSFORM_FN}/{ASSETS}/ vocabulary. "
        "Give the vocabulary file's path (or 2.0's tfrecorder-<time>-<label> folder), or a "
        "list of class names.", option=OPTION)

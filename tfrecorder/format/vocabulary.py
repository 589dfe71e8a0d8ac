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
  reused, so that new data gets the ids a model was trained with;
- a label map (`*.pbtxt`): the Object Detection API's `StringIntLabelMap`, whose `id`s
  are the ids TensorFlow's models see (`LabelMap`).

A source may bring its own classes in their order with their ids (a COCO file's
`categories`, a YOLO `data.yaml`'s `names`): a `LabelMap` too (`Table.label_map`).

Light on purpose (no TensorFlow, Pillow or pandas): the options check a given list, and
the plan reads a path, before any image is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tfrecorder.errors import Option, OptionError
from tfrecorder.format.manifest import MANIFEST, read_manifest
from tfrecorder.storage import fs

OPTION = "label_vocabulary"
# Where TFRecorder 2.0 (TensorFlow Transform's `WriteTransformFn`) left its vocabulary.
TRANSFORM_FN = "transform_fn"
ASSETS = "assets"


@dataclass(frozen=True)
class LabelMap:
    """Classes in the order of their ids, and the ids TensorFlow's models see.

    Our layout numbers `names` 0, 1, ...; the `tf_models` layout stores `ids[i]` for class
    i (`image/object/class/label`) and lists every class in `label_map.pbtxt`, as the
    Object Detection API's label maps do (COCO's 80 categories have ids 1 to 90).

    Attributes:
        names: the classes' names, each once, in the order of their ids.
        ids: each name's id in TensorFlow's label maps, increasing; None for 1, 2, ...
    """

    names: tuple[str, ...]
    ids: tuple[int, ...] | None = None

    def __post_init__(self):
        if self.ids is not None:
            if len(self.ids) != len(self.names):
                raise ValueError(f"{len(self.ids)} ids for {len(self.names)} names")
            if tuple(self.ids) == tuple(range(1, len(self.names) + 1)):
                object.__setattr__(self, "ids", None)  # the default, said once
            else:
                object.__setattr__(self, "ids", tuple(int(i) for i in self.ids))

    @property
    def model_ids(self) -> tuple[int, ...]:
        """Each class's id in TensorFlow's label maps (1, 2, ... unless given)."""
        return self.ids if self.ids is not None else tuple(range(1, len(self.names) + 1))

    @classmethod
    def of(cls, names: Sequence[str], ids: Sequence[int] | None = None) -> LabelMap:
        """The map of `names` with `ids` (None: 1, 2, ...), ordered by id."""
        if ids is None:
            return cls(tuple(names))
        pairs = sorted(zip(ids, names))
        return cls(tuple(n for _, n in pairs), tuple(i for i, _ in pairs))


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
    return load_map(given).names


def load_map(given: Iterable[str] | str | os.PathLike | LabelMap) -> LabelMap:
    """The classes `label_vocabulary` gives, with their label-map ids where it has them
    (a label map, or a dataset written with one)."""
    if isinstance(given, LabelMap):
        return given
    if not isinstance(given, (str, os.PathLike)):
        return LabelMap(class_names(given))
    path = os.fspath(given)
    if fs.is_file_uri(path):
        path = fs.file_uri_path(path)
    if fs.exists(path):
        return _read_file(path)
    if not fs.is_folder(path):
        raise OptionError(
            Option(OPTION), f" names {path!r}, which is neither a file nor a folder. Give a "
            "text file with one class name per line, a tfrecorder dataset or TFRecorder "
            "2.0's output folder, or a list of class names.", option=OPTION)
    if fs.exists(fs.join(path, MANIFEST)):
        return _from_dataset(path)
    return _read_file(_transform_fn_file(path))


def _read_file(path: str) -> LabelMap:
    try:
        text = fs.read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise OptionError(Option(OPTION), f" names {path!r}, which is not UTF-8 text "
                          f"({error}).", option=OPTION) from None
    if path.lower().endswith((".pbtxt", ".pbtxt.txt")) or _LABEL_MAP_START.match(text):
        return parse_label_map(text, path)
    return LabelMap(class_names(text.rstrip("\r\n").splitlines(), path))


# A label map opens with an `item {` (after comments), as the Object Detection API writes.
_LABEL_MAP_START = re.compile(r"\A\s*(#[^\n]*\n\s*)*item\s*\{")


def parse_label_map(text: str, where: str = "the label map") -> LabelMap:
    """A `StringIntLabelMap` in protobuf text format, as the Object Detection API reads it
    (`label_map_util.load_labelmap`): `item { id: 1 name: 'cat' }`, ... A class is named
    by its `display_name` where it has one (COCO's map names 'person' so, and '/m/01g317'
    by `name`), else by its `name`; its id is `id`. Other fields (keypoints, frequency)
    are allowed and ignored. Ids must be positive (0 is the background) and distinct.

    Raises:
        OptionError: naming the file and the line at fault.
    """
    from google.protobuf import text_format

    message = _label_map_message()()
    try:
        text_format.Parse(text, message, allow_unknown_field=True)
    except text_format.ParseError as error:
        raise OptionError(Option(OPTION), f" names {where!r}, which is not a label map: "
                          f"{str(error).rstrip('.')}. A label map is items such as "
                          "`item { id: 1 name: 'cat' }`.", option=OPTION) from None
    lines = _item_lines(text)
    names, ids, seen = [], [], {}
    for k, item in enumerate(message.item):
        line = f"line {lines[k]} of {where}" if k < len(lines) else f"item {k + 1} of {where}"
        name = item.display_name or item.name
        if not item.HasField("id") or item.id <= 0:
            raise OptionError(Option(OPTION), f": {line} gives {name!r} "
                              f"{'no id' if not item.HasField('id') else f'id {item.id}'}. "
                              "Ids start at 1: 0 is the background.", option=OPTION)
        if item.id in seen:
            raise OptionError(Option(OPTION), f": {line} gives id {item.id} to {name!r}, "
                              f"already {seen[item.id]!r}'s. Give each class its own id.",
                              option=OPTION)
        seen[item.id] = name
        names.append(name)
        ids.append(item.id)
    checked = class_names(names, where)  # text, each once, none blank
    return LabelMap.of(checked, ids)


def _item_lines(text: str) -> list[int]:
    """The line of each `item` of a label map, for errors."""
    return [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r"\bitem\s*\{", text)]


def _label_map_message():
    """The message class of the Object Detection API's `StringIntLabelMap` (its fields
    that name classes), built from a descriptor: that API's proto module is no
    dependency of ours."""
    global _LABEL_MAP_CLASS
    if _LABEL_MAP_CLASS is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        proto = descriptor_pb2.FileDescriptorProto(
            name="tfrecorder_string_int_label_map.proto", package="tfrecorder",
            syntax="proto2")
        item = proto.message_type.add(name="StringIntLabelMapItem")
        for number, (field, kind) in enumerate((
                ("name", "TYPE_STRING"), ("id", "TYPE_INT32"),
                ("display_name", "TYPE_STRING")), start=1):
            item.field.add(name=field, number=number, label=1,  # optional
                           type=getattr(descriptor_pb2.FieldDescriptorProto, kind))
        items = proto.message_type.add(name="StringIntLabelMap")
        items.field.add(name="item", number=1, label=3,  # repeated
                        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                        type_name=".tfrecorder.StringIntLabelMapItem")
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        _LABEL_MAP_CLASS = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("tfrecorder.StringIntLabelMap"))
    return _LABEL_MAP_CLASS


_LABEL_MAP_CLASS = None


def _from_dataset(path: str) -> LabelMap:
    labels = read_manifest(path).labels
    if labels is None or labels.vocabulary is None:
        what = "no labels" if labels is None else "integer labels (class ids, no names)"
        raise OptionError(
            Option(OPTION), f" names the dataset {path!r}, which has {what}: there is no "
            "vocabulary to reuse.", option=OPTION)
    return LabelMap(class_names(labels.vocabulary), labels.model_ids)


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

"""The Object Detection API's Pascal VOC converter, loaded on its own, for interop tests.

`pascal_example(xml, dataset_directory, label_map_dict, ...)` runs
`create_pascal_tf_record.dict_to_tf_example` (PyPI's `object-detection` 0.0.3, a build of
tensorflow/models' research/object_detection, pinned in tests/interop.py) on one XML file
parsed as its script parses it (lxml's `etree.fromstring`, then its own
`dataset_util.recursive_parse_xml_to_dict`), and returns the tf.train.Example's features
as Python lists.

Loading: the package's `__init__` files are empty and run as they are. The code is TF1's:
`create_pascal_tf_record.py` reads `tf.app.flags` at import and `tf.gfile.GFile` when it
runs, so while its modules import, `tensorflow` is `tensorflow.compat.v1` (its
`tf.train.Example` is TensorFlow 2's own), and the loaded modules keep that `tf`. The
module's flags (`--data_dir`, `--set`, ...) are defined on absl's global flags once a
session. `label_map_util` imports a generated `string_int_label_map_pb2` the wheel does not
hold; the converter's `dict_to_tf_example` does not use it (the label map is an argument),
so an empty module stands in for `label_map_util` and the tests build `label_map_dict`
from their own names and ids. lxml comes from the same pinned folder. Once loaded, every
`object_detection.*` and `lxml.*` entry leaves `sys.modules` and `sys.path` is restored.

`label_map_util()` loads the API's own `label_map_util` (unmodified: `load_labelmap`,
`get_label_map_dict`, ... as training and evaluation configs read `label_map_path`), with
the generated module it imports built from its `.proto`'s text instead: package
`object_detection.protos`, `StringIntLabelMapItem` {optional string name = 1; optional
int32 id = 2; optional string display_name = 3;} and `StringIntLabelMap` {repeated
StringIntLabelMapItem item = 1;}, the fields of the 2019 release the wheel is a build of
(later releases add keypoints and ancestry, which a label map of names and ids lacks).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import types
import warnings

import tensorflow as tf
from interop import interop_path

_OURS = ("object_detection", "lxml")  # top-level names we bring


@contextlib.contextmanager
def _the_wheel_on_the_path():
    """The pinned wheel's folder first on `sys.path` while its modules import; afterwards
    `sys.path`, TensorFlow's entry and the session's own `object_detection` or `lxml` (if
    any) are as they were, the wheel's taken out again: the loaded modules keep theirs."""
    folder = interop_path("object-detection")
    saved_path, saved_tf = list(sys.path), sys.modules["tensorflow"]
    shadowed = {n: m for n, m in sys.modules.items() if n.partition(".")[0] in _OURS}
    for name in shadowed:
        del sys.modules[name]
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.modules["tensorflow"] = saved_tf
        sys.path[:] = saved_path
        for name in [n for n in sys.modules if n.partition(".")[0] in _OURS]:
            del sys.modules[name]
        sys.modules.update(shadowed)
        importlib.invalidate_caches()


@functools.cache
def object_detection() -> types.SimpleNamespace:
    """`create_pascal_tf_record`, `dataset_util` and lxml's `etree`, loaded once."""
    with _the_wheel_on_the_path() as folder:
        stand_in = types.ModuleType("object_detection.utils.label_map_util")
        stand_in.__doc__ = "stands in: the wheel lacks its generated proto module"
        importlib.import_module("object_detection.utils")
        sys.modules[stand_in.__name__] = stand_in
        sys.modules["tensorflow"] = tf.compat.v1
        loaded = types.SimpleNamespace(
            create_pascal_tf_record=importlib.import_module(
                "object_detection.dataset_tools.create_pascal_tf_record"),
            dataset_util=importlib.import_module("object_detection.utils.dataset_util"),
            etree=importlib.import_module("lxml.etree"), folder=folder)
    assert loaded.create_pascal_tf_record.tf is tf.compat.v1
    return loaded


@functools.cache
def label_map_util() -> types.ModuleType:
    """The Object Detection API's `label_map_util`, loaded once (module doc)."""
    with _the_wheel_on_the_path():
        importlib.import_module("object_detection.protos")
        sys.modules[_LABEL_MAP_PB2] = _string_int_label_map_pb2()
        sys.modules["tensorflow"] = tf.compat.v1  # it reads files with tf.gfile.GFile
        module = importlib.import_module("object_detection.utils.label_map_util")
    assert module.tf is tf.compat.v1
    return module


_LABEL_MAP_PB2 = "object_detection.protos.string_int_label_map_pb2"


def _string_int_label_map_pb2() -> types.ModuleType:
    """`string_int_label_map_pb2` of the .proto's fields (module doc), in a pool of its own."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="object_detection/protos/string_int_label_map.proto",
        package="object_detection.protos", syntax="proto2")
    item = proto.message_type.add(name="StringIntLabelMapItem")
    for name, number, kind in (("name", 1, field.TYPE_STRING), ("id", 2, field.TYPE_INT32),
                               ("display_name", 3, field.TYPE_STRING)):
        item.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL)
    proto.message_type.add(name="StringIntLabelMap").field.add(
        name="item", number=1, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
        type_name=".object_detection.protos.StringIntLabelMapItem")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    module = types.ModuleType(_LABEL_MAP_PB2)
    module.__doc__ = "built from string_int_label_map.proto's fields (tests)"
    for name in ("StringIntLabelMapItem", "StringIntLabelMap"):
        setattr(module, name, message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"object_detection.protos.{name}")))
    return module


def pascal_example(xml: bytes, dataset_directory: str, label_map_dict: dict,
                   ignore_difficult_instances: bool = False,
                   image_subdirectory: str = "JPEGImages") -> dict[str, list]:
    """`dict_to_tf_example` of one XML file's bytes, as {feature key: list of values}.

    The image is read at `dataset_directory/<folder>/image_subdirectory/<filename>`, as
    the reference reads it; it must be a JPEG (the reference raises otherwise).
    """
    od = object_detection()
    with warnings.catch_warnings():  # lxml's FutureWarning on its `if not xml:`
        warnings.simplefilter("ignore", FutureWarning)
        data = od.dataset_util.recursive_parse_xml_to_dict(
            od.etree.fromstring(xml))["annotation"]
    example = od.create_pascal_tf_record.dict_to_tf_example(
        data, dataset_directory, label_map_dict, ignore_difficult_instances,
        image_subdirectory=image_subdirectory)
    return features_of(example)


def features_of(example: tf.train.Example) -> dict[str, list]:
    """An Example's features as Python lists, by key."""
    found = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        found[key] = list(getattr(feature, kind).value) if kind else []
    return found

"""A layout is one class plus one entry in `layouts.LAYOUTS`: a third layout, registered
here, is accepted by the options, written by `convert` and read back without TensorFlow,
and no module outside `layouts.py` branches on a layout's name."""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import pytest
from helpers import read_manifest, write_image

import tfrecorder
from tfrecorder.errors import OptionError
from tfrecorder.format import layouts
from tfrecorder.format.manifest import Feature
from tfrecorder.options import ImageOptions

PACKAGE = Path(__file__).parent.parent / "tfrecorder"
_PREFIX = "toy/"


class ToyLayout(layouts.Layout):
    """Every key of tfrecorder's layout under `toy/`; refuses tables without images."""

    name = "toy"
    tfds_readable = False

    def record(self, values: dict, position: int) -> dict:
        return {_PREFIX + key: value for key, value in super().record(values, position).items()}

    def features(self, task, image, label, objects, inputs, vocabulary):
        return {_PREFIX + key: feature for key, feature
                in super().features(task, image, label, objects, inputs, vocabulary).items()}

    def key(self, name: str) -> str | None:
        return _PREFIX + name

    def canonical(self, parsed: dict) -> dict:
        return {key.removeprefix(_PREFIX): value for key, value in parsed.items()}

    def values(self, features: Mapping[str, list]) -> dict[str, list]:
        return self.canonical(dict(features))

    def read_features(self, stored: Mapping[str, Feature]) -> dict[str, Feature]:
        return self.canonical(dict(stored))

    def check(self, has_images: bool, image_format: str) -> None:
        if not has_images:
            raise OptionError("toy records need images", option="layout")


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(layouts.LAYOUTS, ToyLayout.name, ToyLayout)
    layouts.layout_named.cache_clear()
    yield ToyLayout
    layouts.layout_named.cache_clear()


def test_a_registered_layout_is_an_option_choice(toy):
    assert ImageOptions(layout="toy").layout == "toy"
    choices = next(f for f in tfrecorder.options.fields() if f.name == "layout")
    assert "toy" in choices.metadata["choices"]


def test_an_unregistered_layout_is_refused():
    with pytest.raises(OptionError, match="layout"):
        ImageOptions(layout="toy")


def test_a_registered_layout_flows_through_convert_and_the_reader(toy, tmp_path):
    rows = [{"image_uri": write_image(tmp_path / "images" / f"{i}.jpg", seed=i),
             "label": "cat" if i % 2 else "dog", "split": "TRAIN"} for i in range(4)]
    out = tmp_path / "out"
    tfrecorder.convert(pd.DataFrame(rows), str(out), layout="toy", num_workers=1,
                       progress=False)
    manifest = read_manifest(out)
    assert manifest["layout"] == "toy"
    assert manifest["features"] and all(key.startswith(_PREFIX) for key in manifest["features"])
    assert not os.path.exists(out / "dataset_info.json")  # not tfds_readable
    records = list(tfrecorder.open_split(str(out), "train", decode=False))
    assert sorted(record["label"] for record in records) == [0, 0, 1, 1]
    assert all(isinstance(record["image"], bytes) for record in records)


def test_a_layouts_check_refuses_what_it_cannot_store(toy, tmp_path):
    with pytest.raises(OptionError, match="toy records need images"):
        tfrecorder.convert(pd.DataFrame({"x": [1, 2], "split": ["TRAIN", "TEST"]}),
                           str(tmp_path / "out"), layout="toy", num_workers=1,
                           progress=False)


def _compared_names(tree: ast.AST, names: set[str]) -> list[int]:
    """The lines of comparisons (==, !=, in) with a literal layout name, alone or in a
    tuple, list or set."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            literals = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) \
                else [operand]
            if any(isinstance(v, ast.Constant) and v.value in names for v in literals):
                found.append(node.lineno)
    return found


def test_no_module_but_layouts_branches_on_a_layout_name():
    names = set(layouts.LAYOUTS)
    branches = [f"{path.relative_to(PACKAGE.parent)}:{line}"
                for path in sorted(PACKAGE.rglob("*.py")) if path.name != "layouts.py"
                for line in _compared_names(ast.parse(path.read_text()), names)]
    assert not branches, ("ask the layout (an attribute or method of `layouts.Layout`), "
                          f"not its name: {branches}")


def test_the_options_read_the_one_registry():
    source = (PACKAGE / "options.py").read_text()
    assert "tf_models" not in {node.value for node in ast.walk(ast.parse(source))
                               if isinstance(node, ast.Constant)}

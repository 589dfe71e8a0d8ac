"""The examples run as the README says, and print what they promise."""

import ast
import os
import re
import subprocess
import sys

from helpers import read_manifest

import tfrecorder

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def run_example(name: str, *args) -> list[str]:
    """The example's printed lines, once it has exited cleanly."""
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *map(str, args)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_quickstart_converts_and_loads_the_samples(tmp_path):
    lines = run_example("quickstart.py", tmp_path / "samples")
    assert lines[0].startswith("Wrote 16 records to ")
    assert "{'train': 7, 'validation': 5, 'test': 4}; rejected: 0" in lines[0]
    assert [line.split(":")[0].strip() for line in lines[1:4]] == ["train", "validation",
                                                                   "test"]
    assert all("images (4, 224, 224, 3) uint8" in line for line in lines[1:3])
    assert lines[4].startswith("Records per class: {'cat': 2, 'coffee': 2, 'rocket': 1, "
                               "'texture': 2} (train); report: ")
    assert (tmp_path / "samples-report.html").stat().st_size > 10_000


def test_object_detection_reads_labelimg_and_a_coco_pair_into_both_layouts(tmp_path):
    lines = run_example("object_detection.py", tmp_path)
    boxes = re.compile(r"^(from_labelimg|from_coco): 48 images, (\d+) boxes, ")
    found = [m.groups() for m in map(boxes.match, lines) if m]
    # The XML files and the COCO pair describe the same shapes: the same boxes, in two
    # layouts; the COCO pair's files are its train and validation splits.
    assert [name for name, _ in found] == ["from_labelimg", "from_coco"]
    assert found[0][1] == found[1][1] and int(found[0][1]) > 48
    assert any(line.startswith("from_coco: 48 images, ") and
               "{'train': 40, 'validation': 8}" in line for line in lines)
    # Every category, used or not, with its COCO id.
    assert 'label_map.pbtxt: item { id: 3 name: "square" display_name: "square" } item { ' \
        'id: 7 name: "circle" display_name: "circle" } item { id: 9 name: "triangle" ' \
        'display_name: "triangle" }' in lines
    assert any(line.startswith("a padded batch: image (8, 96, 128, 3), objects/bbox "
                               "(8, 4, 4), objects/label (8, 4), objects/num [")
               for line in lines)
    assert any(re.match(r"a tf_models record loads the same way: objects/bbox \((\d+), 4\), "
                        r"objects/mask \(\1, 96, 128\)", line) for line in lines)
    assert (tmp_path / "from_coco" / "label_map.pbtxt").exists()
    assert read_manifest(tmp_path / "from_coco")["layout"] == "tf_models"
    assert (tmp_path / "show.png").stat().st_size > 10_000


def test_cifar_arrays_converts_numpy_splits_and_learns_the_classes(tmp_path):
    lines = run_example("cifar_arrays.py", tmp_path)
    assert lines[0].startswith("Converted 5500 images in ")
    assert lines[0].endswith(": {'train': 4000, 'validation': 500, 'test': 1000}; "
                             "rejected: 0")
    manifest = read_manifest(tmp_path / "dataset")
    assert {name: split["num_records"] for name, split in manifest["splits"].items()} == \
        {"train": 4000, "validation": 500, "test": 1000}
    assert manifest["labels"]["vocabulary"] == [
        "disc", "ring", "square", "diamond", "plus", "cross", "triangle",
        "horizontal_stripes", "vertical_stripes", "checks"]
    # 10 classes: chance is 0.1; the example reaches 0.95 to 0.97.
    accuracy = [m[1] for m in map(re.compile(r"^Test accuracy: (\d\.\d{3})$").match, lines)
                if m]
    assert len(accuracy) == 1 and float(accuracy[0]) > 0.5, lines


def test_examples_use_only_the_public_api():
    """Users copy examples: a name they import from inside the package breaks with it."""
    for name in sorted(os.listdir(EXAMPLES)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(EXAMPLES, name)) as f:
            tree = ast.parse(f.read(), name)
        for node in ast.walk(tree):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            inside = [m for m in modules if m.startswith("tfrecorder.")]
            assert not inside, f"examples/{name}:{node.lineno} imports {inside[0]}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "tfrecorder":
                assert node.attr in tfrecorder.__all__, \
                    f"examples/{name}:{node.lineno} uses tfrecorder.{node.attr}"

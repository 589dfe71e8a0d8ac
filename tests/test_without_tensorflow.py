"""The base install, without TensorFlow (issue 51): `pip install tfrecorder` converts
image tables and detection datasets (COCO, YOLO, Pascal VOC, with a label map), reads
them back with `open_split`, and describes and checks them (`info`, `show`, `report`,
`verify`, decoding or not), in Python and on the command line, and none of it tries
to import TensorFlow; `load()` and `inspect`, which read with it, fail with one line that
names the `tf` extra, before they read or write a file.

Everything runs in one fresh interpreter (one import of tfrecorder, one set of
conversions) in which TensorFlow cannot be imported: a finder first on `sys.meta_path`
raises the ModuleNotFoundError that a package that is not installed raises, and logs
each attempt with the stack that made it, to a file, so that forked workers' attempts
count too. (`sys.modules["tensorflow"] = None` fails the import alike, but before any
finder is asked: nobody would see who tried.) The commands run in that interpreter
through `cli.main`, which is all that `python -m tfrecorder` runs.

With TFRECORDER_BASE_PYTHON=/path/to/venv/bin/python, that interpreter is another
venv's: one with `pip install -e .` and no extra is the base install itself, which also
checks that the base dependencies are all the code needs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from detection_data import CLASSES, coco_split, scenes
from helpers import pixels, write_image

PYTHON = os.environ.get("TFRECORDER_BASE_PYTHON", sys.executable)

# verify with and without decoding: `tfrecorder verify` and `--no-decode` too.
VERIFY_DECODES = [False, True]

LABEL_MAP = {"cat": 7, "dog": 3, "zebra": 12}  # ids that no order of the names gives

# Before anything else: TensorFlow is not installed, as far as this interpreter can tell.
PRELUDE = '''
import os, sys, traceback

class NoTensorFlow:
    """Answers an import of tensorflow as a missing package does, and logs it."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] != "tensorflow":
            return None
        with open(os.path.join(sys.argv[1], "attempts.txt"), "a") as log:
            log.write(f"import {name} (pid {os.getpid()}):\\n"
                      + "".join(traceback.format_stack()[:-1]) + "\\n")
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTensorFlow())
'''

SCRIPT = '''
import contextlib, io, json
from pathlib import Path

import numpy as np
import pandas as pd

import tfrecorder
from tfrecorder import cli

folder, verify_decodes = Path(sys.argv[1]), json.loads(sys.argv[2])
label_map = str(folder / "label_map.pbtxt")
found = {}


def attempts():
    log = folder / "attempts.txt"
    return log.read_text() if log.exists() else ""


def command(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(arg) for arg in args])
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


# An image table, through the pandas accessor, read back and described.
classes = folder / "classes"
table = pd.read_csv(folder / "table.csv")
found["counts"] = table.tensorflow.to_tfrecord(str(classes), progress=False).counts
train = tfrecorder.open_split(classes, "train")
found["read"] = []
for i in range(2):
    np.save(folder / f"pixels_{i}.npy", train[i]["image"])
    found["read"].append(train[i]["image_uri"].decode())
described = tfrecorder.info(classes)
found["info"] = {str(split): s.num_records for split, s in described.manifest.splits.items()}
found["class_counts"] = described.class_counts
found["caption"] = tfrecorder.show(classes, "train", 4).caption()
found["report"] = tfrecorder.report(classes, folder / "report.html")
found["verified"] = [tfrecorder.verify(classes, decode_images=decode).num_records
                     for decode in verify_decodes]

# Detection datasets: COCO's categories; YOLO and Pascal VOC numbered by a label map.
coco = tfrecorder.convert(str(folder / "coco" / "_annotations.coco.json"),
                          str(folder / "coco_out"), progress=False)
found["coco"] = {"counts": coco.counts, "boxes": {
    record["image_name"].decode(): record["objects/bbox"].tolist()
    for split in coco.counts for record in tfrecorder.open_split(folder / "coco_out", split)}}
for name in ("yolo", "voc"):
    out = folder / f"{name}_out"
    result = tfrecorder.convert(str(folder / name), str(out), layout="tf_models",
                                label_vocabulary=label_map, progress=False)
    described = tfrecorder.info(out)
    found[name] = {"counts": result.counts, "label_map_ids": described.label_map_ids,
                   "labels": sorted(described.class_names[label] for split in result.counts
                                    for record in tfrecorder.open_split(out, split)
                                    for label in record["objects/label"])}

# The same on the command line.
cli_out = folder / "cli_out"
found["commands"] = {
    "help": command("--help"),
    "convert": command("convert", folder / "table.csv", cli_out, "--no-progress"),
    "info": command("info", cli_out),
    "show": command("show", cli_out, "-o", folder / "sheet.png", "--per-class", 4),
    "report": command("report", cli_out, "-o", folder / "cli_report.html"),
}
for decode in verify_decodes:
    found["commands"][f"verify decode={decode}"] = command(
        "verify", cli_out, "--no-progress", *([] if decode else ["--no-decode"]))
found["attempts"] = attempts()

# What reads records with TensorFlow says so, and what to install.
found["inspect"] = command("inspect", cli_out, "--output-dir", folder / "inspected")
try:
    tfrecorder.load(classes, "train")
except ImportError as error:
    found["load"] = {"type": type(error).__name__, "message": str(error),
                     "extra": getattr(error, "extra", None), "name": error.name}
found["attempts_by_load_and_inspect"] = attempts()[len(found["attempts"]):]
(folder / "found.json").write_text(json.dumps(found))
'''


def _sources(folder: Path) -> dict:
    """The inputs: an image table (PNG, so pixels compare exactly), a COCO folder, a YOLO
    folder and a LabelImg (Pascal VOC) folder of the same classes, and a label map."""
    rows = [(["TRAIN", "VALIDATION", "TEST"][i % 3],
             write_image(folder / "images" / f"img_{i}.png", size=(20 + 3 * i, 16 + i),
                         fmt="PNG", seed=i), ["cat", "dog"][i % 2]) for i in range(6)]
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).to_csv(
        folder / "table.csv", index=False)
    drawn = coco_split(str(folder / "coco"), str(folder / "coco" / "_annotations.coco.json"),
                       4)
    drawn_for_yolo = scenes(str(folder / "scenes"), 4, seed=1)
    for i, scene in enumerate(drawn_for_yolo):
        split = "val" if i == 3 else "train"
        image = folder / "yolo" / "images" / split / os.path.basename(scene["image_uri"])
        image.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(scene["image_uri"], image)
        labels = folder / "yolo" / "labels" / split / (image.stem + ".txt")
        labels.parent.mkdir(parents=True, exist_ok=True)
        labels.write_text("".join(
            f"{CLASSES.index(label)} {(x0 + x1) / 2} {(y0 + y1) / 2} {x1 - x0} {y1 - y0}\n"
            for (y0, x0, y1, x1), label in zip(scene["boxes"], scene["labels"])))
    (folder / "yolo" / "data.yaml").write_text(
        f"names: [{', '.join(CLASSES)}]\ntrain: images/train\nval: images/val\n")
    voc = {"a": ["dog", "zebra"], "b": ["cat"]}
    for seed, (stem, names) in enumerate(voc.items()):
        write_image(folder / "voc" / f"{stem}.jpg", size=(40, 30), seed=seed)
        (folder / "voc" / f"{stem}.xml").write_text(
            f"<annotation><folder>voc</folder><filename>{stem}.jpg</filename><size>"
            "<width>40</width><height>30</height><depth>3</depth></size>" + "".join(
                f"<object><name>{name}</name><difficult>0</difficult><bndbox><xmin>2</xmin>"
                "<ymin>3</ymin><xmax>20</xmax><ymax>25</ymax></bndbox></object>"
                for name in names) + "</annotation>")
    (folder / "label_map.pbtxt").write_text("".join(
        f"item {{ id: {i} name: '{name}' }}\n" for name, i in LABEL_MAP.items()))
    return {"coco": drawn, "voc": voc,
            "yolo": [label for scene in drawn_for_yolo for label in scene["labels"]]}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("without_tensorflow")
    sources = _sources(folder)
    done = subprocess.run([PYTHON, "-c", PRELUDE + SCRIPT, str(folder),
                           json.dumps(VERIFY_DECODES)],
                          capture_output=True, text=True, timeout=600)
    log = folder / "attempts.txt"
    assert done.returncode == 0, done.stderr + (log.read_text() if log.exists() else "")
    return {**json.loads((folder / "found.json").read_text()), "folder": folder,
            "sources": sources}


def test_nothing_tries_to_import_tensorflow(run):
    assert run["attempts"] == ""
    # and the finder does see an attempt: load's and inspect's
    assert "import tensorflow" in run["attempts_by_load_and_inspect"]


def test_the_accessor_converts_and_open_split_reads_the_source_pixels(run):
    assert run["counts"] == {"train": 2, "validation": 2, "test": 2}
    assert len(run["read"]) == 2
    for i, uri in enumerate(run["read"]):
        np.testing.assert_array_equal(np.load(run["folder"] / f"pixels_{i}.npy"), pixels(uri))


def test_info_show_report_and_verify(run):
    assert run["info"] == run["counts"]
    assert run["class_counts"] == {split: {"cat": 1, "dog": 1} for split in run["counts"]}
    assert run["caption"] == "train: 2 images; 2 classes x 1: cat, dog"
    report = Path(run["report"])
    assert report == run["folder"] / "report.html"
    assert "<title>tfrecorder report: classes</title>" in report.read_text()
    assert run["verified"] == [run["counts"]] * len(VERIFY_DECODES)


def test_detection_sources_convert_with_their_boxes_and_label_map(run):
    coco, drawn = run["coco"], {os.path.basename(s["image_uri"]): s
                                for s in run["sources"]["coco"]}
    assert sum(coco["counts"].values()) == len(drawn) == len(coco["boxes"])
    for name, boxes in coco["boxes"].items():
        np.testing.assert_allclose(np.reshape(boxes, (-1, 4)),
                                   np.reshape(drawn[name]["boxes"], (-1, 4)), atol=1e-6)
    for name in ("yolo", "voc"):
        assert run[name]["label_map_ids"] == LABEL_MAP
        assert (run["folder"] / f"{name}_out" / "label_map.pbtxt").is_file()
    assert run["yolo"]["counts"] == {"train": 3, "validation": 1}
    assert run["yolo"]["labels"] == sorted(run["sources"]["yolo"])
    assert sum(run["voc"]["counts"].values()) == 2
    assert run["voc"]["labels"] == sorted(n for names in run["sources"]["voc"].values()
                                          for n in names)


def test_the_commands(run):
    commands = run["commands"]
    for name, done in commands.items():
        assert done["code"] == 0, (name, done)
        assert "Traceback" not in done["stderr"], (name, done["stderr"])
    assert all(name in commands["help"]["stdout"] for name in
               ("convert", "info", "show", "report", "verify", "inspect"))
    assert "into " + str(run["folder"] / "cli_out") in commands["convert"]["stdout"]
    assert "train      " in commands["info"]["stdout"]
    assert commands["info"]["stdout"].count("2 records") == 3
    assert commands["show"]["stdout"].endswith("sheet.png: train: 2 images; 2 classes x 1: "
                                               "cat, dog\n")
    assert (run["folder"] / "sheet.png").is_file()
    assert commands["report"]["stdout"].strip() == str(run["folder"] / "cli_report.html")
    assert "cli_out" in (run["folder"] / "cli_report.html").read_text()
    for decode in VERIFY_DECODES:
        assert commands[f"verify decode={decode}"]["stdout"].startswith(
            "OK: 6 records in 3 shards")


def test_load_and_inspect_name_the_tf_extra(run):
    load = run["load"]
    assert load["type"] == "MissingExtraError" and load["extra"] == "tf"
    assert load["name"] == "tensorflow"
    assert load["message"].startswith("tfrecorder.load() reads records with TensorFlow, "
                                      "which is not installed: pip install 'tfrecorder[tf]'")
    assert "open_split()" in load["message"]
    inspect = run["inspect"]
    assert inspect["code"] == 1
    lines = inspect["stderr"].splitlines()
    assert len(lines) == 1, inspect["stderr"]
    assert lines[0].startswith("tfrecorder: error: tfrecorder.inspect() reads records with "
                               "TensorFlow, which is not installed: pip install "
                               "'tfrecorder[tf]'")
    assert not (run["folder"] / "inspected").exists()  # failed before writing anything

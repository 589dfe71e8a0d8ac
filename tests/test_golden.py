"""The bytes on disk do not change by accident: datasets written now against SHA-256s of
the same datasets written by an earlier version (`tests/golden/datasets.json`).

A refactor must leave every file byte-identical. A deliberate change of the format (or a
dependency that encodes differently, such as zlib for gzip shards) regenerates the file:

    TFRECORDER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py

and says why in its commit message. The manifest is compared without `created_by`, which
names the version.
"""

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "datasets.json"
SAMPLES = HERE.parent / "examples" / "images.csv"


def structured_table() -> pd.DataFrame:
    """Every kind of input column, from plain arithmetic (no RNG whose stream could move)."""
    rows = range(300)
    return pd.DataFrame({
        "split": [("TRAIN", "VALIDATION", "TEST", "UNASSIGNED")[i % 4] for i in rows],
        "label": [f"class_{i * 7 % 5}" for i in rows],
        "count": [i * 37 % 1000 - 500 for i in rows],
        "score": [(i * 0.137) % 3.0 for i in rows],
        "note": [f"row {i} \u00e9\u4e2d" * (i % 3) for i in rows],
        "colour": pd.Categorical([("red", "green", "blue")[i * 5 % 3] for i in rows]),
        "box": [[i / 300, (i + 1) / 300, (i + 2) / 300, (i + 3) / 300] for i in rows],
    })


def samples_with_bad_rows(tmp_path: Path) -> str:
    """The sample CSV plus rows that are rejected, beside a link to the sample images (so
    the relative paths, which records store, are the same)."""
    (tmp_path / "images").symlink_to(SAMPLES.parent / "images")
    (tmp_path / "images-broken").mkdir()
    (tmp_path / "images-broken" / "b.jpg").write_bytes(b"\xff\xd8\xff not a JPEG")
    table = tmp_path / "images.csv"
    table.write_text(SAMPLES.read_text() + "TRAIN,images-broken/b.jpg,cat\n"
                     "TEST,images-broken/b.jpg,dog\n")
    return str(table)


CASES = {
    "samples": lambda tmp_path: (str(SAMPLES), {"num_shards": 2}),
    "samples_gzip_seed7": lambda tmp_path: (str(SAMPLES), {"compression": "gzip",
                                                           "seed": 7}),
    "samples_with_rejected_rows": lambda tmp_path: (samples_with_bad_rows(tmp_path), {}),
    "structured": lambda tmp_path: (structured_table(), {"num_shards": {"train": 3}}),
    # Empty lists of each dtype, stored typed since issue 30 (`float_list {}`).
    "empty_lists": lambda tmp_path: (lists_table(), {}),
}


def lists_table() -> pd.DataFrame:
    rows = range(40)
    return pd.DataFrame({
        "split": [("TRAIN", "VALIDATION", "TEST")[i % 3] for i in rows],
        "label": [i % 4 for i in rows],
        "boxes": [[[i / 40, 0.0, 1.0, 1.0]] * (i % 3) for i in rows],
        "ids": [list(range(i % 2 * 3)) for i in rows],
        "words": [["a", "b"][: i % 3] for i in rows],
    })


def digests(folder: Path) -> dict[str, str]:
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "dataset.json":
            manifest = json.loads(data)
            manifest.pop("created_by")
            data = json.dumps(manifest, sort_keys=True).encode()
        found[path.relative_to(folder).as_posix()] = hashlib.sha256(data).hexdigest()
    return found


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("case", sorted(CASES))
def test_datasets_are_byte_identical_to_the_golden_ones(case, golden, tmp_path):
    source, options = CASES[case](tmp_path)
    out = tmp_path / "out"
    tfrecorder.convert(source, out, progress=False, num_workers=2, **options)
    found = digests(out)
    if os.environ.get("TFRECORDER_UPDATE_GOLDEN"):
        golden[case] = found
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(sorted(golden.items())), indent=1) + "\n")
        pytest.skip("golden file updated")
    assert found == golden[case]

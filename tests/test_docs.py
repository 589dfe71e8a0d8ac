"""The code in README.md and docs/usage.md runs, and shows what it prints.

Each file's code blocks run in order in one namespace, as a notebook's cells, in a
temporary folder that holds what they name (the bundled sample photos, their CSV, a
Parquet copy, an image folder). Where a block shows output, it is compared:

- a comment after an expression is its value when it starts like one (`{`, `[`, `(`,
  `<`, a quote, a digit, or `Name(`): it is compared with the value's repr, `...`
  standing for anything, double and single quotes alike, runs of spaces as one;
- comment lines `# NameError: message` right after a statement are the error it raises,
  compared the same way;
- comment lines `# folder/a.csv, folder/b.jpg, ...` right after `folder = ...` name files
  in the folder it holds;
- an untyped block right after a block is what it wrote or printed, compared by the
  checker in `SHOWN` that its first line starts (a folder listing).
Any other comment is prose.

Blocks that cannot run here are in `SKIPPED` with the reason, keyed by a snippet of the
block; `STAND_INS` swap a download in a block for data made here. A key that matches no
block fails the test, so neither list can go stale. A code block that shows output in
another way is not compared: keep to the forms above.

Messages shown in the docs are other people's too: when one changes, this test names the
doc line to update.
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import tokenize
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "docs/usage.md"]

# A snippet of a block that cannot run here -> why.
SKIPPED = {
    "uv pip install": "installs the package into a new virtualenv (network, minutes)",
    "--no-loadscope-reorder": "runs this test suite (a quarter of an hour)",
    "tf.keras.datasets.cifar10.load_data()":
        "downloads CIFAR-10 (170 MB); README.md's arrays and Hugging Face lines run",
    'tfrecorder.convert("gs://my-bucket/images.csv", "gs://my-bucket/datasets/flowers")':
        "needs Google Cloud Storage and S3 buckets",
    "StorageError: gs://my-bucket": "the error of a bucket, shown without running",
    "resume=True)": "needs a Google Cloud Storage bucket",
    "chunk_rows=1_000_000": "needs a bucket and a large Parquet file",
    'runner="DataflowRunner"': "needs a Google Cloud project (Dataflow)",
}
# A snippet of code -> the code run instead, for a download the docs make.
STAND_INS = {
    'datasets.load_dataset("cifar10")': "small_hugging_face_dataset()",
}


@dataclass
class Block:
    doc: str
    line: int  # of the block's first line, 1-based
    language: str  # "python", "" (untyped), "indented"
    text: str

    def where(self, offset: int = 0) -> str:
        return f"{self.doc}:{self.line + offset}"


def blocks(doc: str) -> list[Block]:
    """The fenced and indented code blocks of a Markdown file."""
    lines = (REPO / doc).read_text().splitlines()
    found, index = [], 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            found.append(Block(doc, index + 2, line[3:].strip(), "\n".join(lines[index + 1:end])))
            index = end + 1
        elif line.startswith("    ") and (index == 0 or not lines[index - 1].strip()):
            end = index
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            found.append(Block(doc, index + 1, "indented",
                               "\n".join(text[4:] for text in lines[index:end]).strip()))
            index = end
        else:
            index += 1
    return found


def skip_reason(block: Block) -> str | None:
    return next((reason for snippet, reason in SKIPPED.items() if snippet in block.text),
                None)


# --- shown output ----------------------------------------------------------------------------

_VALUE_START = re.compile(r"""[{\[(<'"\d-]|[A-Z]\w*\(""")
_ERROR = re.compile(r"(\w+(?:Error|Exception|Warning)): ")


def matches(shown: str, actual: str) -> bool:
    """`actual` is what `shown` shows: `...` for anything, quotes and spaces normalized."""
    def normal(text: str) -> str:
        return " ".join(text.replace('"', "'").split())

    pattern = ".*?".join(re.escape(part) for part in normal(shown).split("..."))
    return re.fullmatch(pattern, normal(actual), re.DOTALL) is not None


def folder_listing(shown: str, folder: Path) -> None:
    """A listing of a folder written by the block before: `out/` and a file (or a
    `folder/`) a line (each line's first word), in any order."""
    first, *rest = shown.splitlines()
    listed = sorted(line.split()[0].rstrip("/") for line in rest if line.strip())
    assert listed == sorted(os.listdir(folder / first.strip())), shown


SHOWN = {"out/": folder_listing}  # an untyped block's first line -> its checker


def comments(source: str) -> dict[int, str]:
    """Line number (1-based) -> the text of the comment on it."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string[1:].strip()
    return found


def run_python(block: Block, namespace: dict) -> None:
    """Runs a block statement by statement, comparing the output it shows."""
    source = block.text
    for snippet, instead in STAND_INS.items():
        source = source.replace(snippet, instead)
    tree = ast.parse(source)
    lines = source.splitlines()
    remarks = comments(source)
    for statement in tree.body:
        where = block.where(statement.lineno - 1)
        end = statement.end_lineno
        trailing = remarks.get(end) if not lines[end - 1].lstrip().startswith("#") else None
        following = []  # the comment lines right under the statement
        for number in range(end + 1, len(lines) + 1):
            if not lines[number - 1].lstrip().startswith("#"):
                break
            following.append(remarks[number])
        code = compile(ast.Module([statement], type_ignores=[]), where, "exec")
        error = _ERROR.match(following[0]) if following else None
        if error:
            expected = " ".join(following)
            with pytest.raises(Exception) as raised:
                exec(code, namespace)
            actual = f"{type(raised.value).__name__}: {raised.value}"
            assert matches(expected, actual), f"{where} shows\n  {expected}\nbut raises\n  {actual}"
        elif isinstance(statement, ast.Expr) and trailing and _VALUE_START.match(trailing):
            value = eval(compile(ast.Expression(statement.value), where, "eval"), namespace)
            assert matches(trailing, repr(value)), \
                f"{where} shows\n  {trailing}\nbut the value is\n  {value!r}"
        else:
            exec(code, namespace)
            if following and isinstance(statement, ast.Assign):
                files_listed(" ".join(following), statement, namespace, where)


def files_listed(shown: str, statement: ast.Assign, namespace: dict, where: str) -> None:
    """`name/a.csv, name/b.jpg, ...` under `name = ...`: those files are in the folder
    `name` holds."""
    name = statement.targets[0].id if isinstance(statement.targets[0], ast.Name) else None
    if name is None or not shown.startswith(f"{name}/"):
        return  # prose
    listed = [item.strip()[len(name) + 1:] for item in shown.split(",")
              if item.strip() != "..."]
    found = os.listdir(namespace[name])
    assert set(listed) <= set(found), f"{where} shows {shown}, but {name} holds {found}"


# --- what the docs' readers have -------------------------------------------------------------

def sample_photos(doc: str, folder: Path) -> None:
    """The bundled sample photos and their AutoML CSV where `doc` names them: under
    `examples/`, as in the repository (docs/usage.md runs from its root); for README.md,
    `images.csv` beside `images/`, with `images.parquet`, `huge.csv` and the image folder
    `photos/`."""
    if doc != "README.md":
        shutil.copytree(REPO / "examples" / "images", folder / "examples" / "images")
        shutil.copy(REPO / "examples" / "images.csv", folder / "examples" / "images.csv")
        return
    shutil.copytree(REPO / "examples" / "images", folder / "images")
    shutil.copytree(REPO / "examples" / "images", folder / "photos")
    for name in ("images.csv", "huge.csv"):
        shutil.copy(REPO / "examples" / "images.csv", folder / name)
    pd.read_csv(folder / "images.csv", names=["split", "image_uri", "label"]).to_parquet(
        folder / "images.parquet")


def small_hugging_face_dataset():
    """A Hugging Face DatasetDict of images and ClassLabel labels, made here: the docs'
    `load_dataset("cifar10")` downloads 170 MB."""
    import datasets

    rng = np.random.default_rng(0)
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["cat", "dog"])})
    split = {"img": [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(4)],
             "label": [0, 1, 0, 1]}
    return datasets.DatasetDict({name: datasets.Dataset.from_dict(split, features=features)
                                 for name in ("train", "test")})


def reader_namespace() -> dict:
    """What the docs leave to the reader: CIFAR-like arrays and a model to fit."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    model = tf.keras.Sequential([tf.keras.layers.Input((224, 224, 3)),
                                 tf.keras.layers.Rescaling(1 / 255),
                                 tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(10)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return {"__name__": "__main__", "model": model,
            "small_hugging_face_dataset": small_hugging_face_dataset,
            "x_train": rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8),
            "y_train": np.arange(20) % 10,
            "x_test": rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8),
            "y_test": np.arange(10) % 10}


# --- the tests -------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::tfrecorder.errors.DatasetWarning")
@pytest.mark.parametrize("doc", DOCS)
def test_every_code_block_runs_and_shows_what_it_prints(doc, tmp_path, monkeypatch):
    sample_photos(doc, tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace = reader_namespace()
    found = blocks(doc)
    assert found, f"no code blocks in {doc}"
    previous = None
    for block in found:
        reason = skip_reason(block)
        if reason is not None:
            previous = None
        elif block.language == "python":
            run_python(block, namespace)
            previous = block
        elif block.language == "" and previous is not None:
            first = block.text.splitlines()[0]
            checker = SHOWN.get(first.strip())
            assert checker, f"{block.where()}: output of a kind no checker in SHOWN reads"
            checker(block.text, tmp_path)
        else:
            pytest.fail(f"{block.where()}: a {block.language or 'untyped'} block that "
                        "neither runs nor is skipped: add it to SKIPPED with the reason")


def test_every_skip_and_stand_in_names_a_block():
    texts = [block.text for doc in DOCS for block in blocks(doc)]
    for snippet in [*SKIPPED, *STAND_INS]:
        assert any(snippet in text for text in texts), f"no block holds {snippet!r}"


def test_shown_output_is_compared():
    """The comparison this test relies on: `...` for anything, quotes alike."""
    assert matches("{'train': {'cat': 2, ...}, ...}", "{'train': {'cat': 2, 'dog': 1}, 'test': {}}")
    assert matches('<X "a": 3 ..., ... s>', "<X 'a': 3 records, 0.4 s>")
    assert not matches("{'train': 7}", "{'train': 8}")
    assert _VALUE_START.match("ConversionResult(...)") and not _VALUE_START.match("the paths")


def test_the_readme_says_what_the_tests_need_beyond_python_packages():
    """A new user's run of the test command meets Chromium and 2.5 GB of readers; the README
    says so, and how to skip the readers, in the names the tests use."""
    from interop import SKIP_VARIABLE
    from test_report import NO_BROWSER

    setup = (REPO / "README.md").read_text().split("## Set up")[1].split("\n## ")[0]
    assert "apt-get install chromium" in setup and "apt-get install chromium" in NO_BROWSER
    assert ".venv/interop/" in setup and "2.5 GB" in setup
    assert f"{SKIP_VARIABLE}=1" in setup


def test_the_reader_tests_skip_without_installing_when_told(tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "interop"
    env = {**os.environ, "TFRECORDER_SKIP_READERS": "1", "TFRECORDER_INTEROP_DIR": str(folder)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_open_split.py", "-k", "recipes or torch"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"\b\d+ skipped\b", run.stdout) and " passed" not in run.stdout, run.stdout
    assert not folder.exists()

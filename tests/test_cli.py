"""The `tfrecorder` command, end to end: a real interpreter runs `python -m tfrecorder`."""

import argparse
import csv
import json
import os
import pkgutil
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import (
    assert_one_error_line,
    image_bytes,
    make_image,
    read_manifest,
    read_split,
    run_cli,
    wait_writing,
)

import tfrecorder
from tfrecorder import cli, options
from tfrecorder.__main__ import main as tfrecorder_main
from tfrecorder.errors import VALUE, Option, SchemaError
from tfrecorder.sources import FILE_FORMATS

SAMPLE_CSV = Path(__file__).resolve().parent.parent / "examples" / "images.csv"
SAMPLE_COUNTS = {"train": 7, "validation": 5, "test": 4}
SAMPLE_LABELS = ["cat", "coffee", "rocket", "texture"]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The bundled sample CSV converted with default options (progress bar included)."""
    out = tmp_path_factory.mktemp("cli") / "samples"
    return out, run_cli("convert", SAMPLE_CSV, out, "--num-workers", "1")


# --- convert -------------------------------------------------------------------------------

def test_convert_prints_a_summary_and_writes_the_dataset(sample):
    out, process = sample
    assert process.returncode == 0, process.stderr
    assert "Writing TFRecords" in process.stderr  # the progress bar shows by default
    assert "Traceback" not in process.stderr
    summary = process.stdout
    assert f"into {out} in " in summary and ": 16 records" in summary
    for split, count in SAMPLE_COUNTS.items():
        assert f"{split}:" in summary and f"{count} records" in summary
    assert f"0 rows (see {out / 'rejected.csv'})" in summary
    manifest = read_manifest(out)
    assert {s: info["num_records"] for s, info in manifest["splits"].items()} == SAMPLE_COUNTS
    assert manifest["labels"]["vocabulary"] == SAMPLE_LABELS


def test_convert_flags_take_effect(tmp_path):
    out = tmp_path / "out"
    process = run_cli("convert", SAMPLE_CSV, out, "--no-header", "--num-shards", "train=2",
                  "--image-size", "32x48", "--compression", "gzip", "--seed", "3",
                  "--jpeg-quality", "80", "--unassigned-split", "0.5,0.25,0.25",
                  "--num-workers", "1", "--no-progress")
    assert process.returncode == 0, process.stderr
    assert "Writing TFRecords" not in process.stderr
    manifest = read_manifest(out)
    assert [len(manifest["splits"][s]["shards"]) for s in SAMPLE_COUNTS] == [2, 1, 1]
    assert all(shard["file"].endswith(".tfrecord.gz")
               for split in manifest["splits"].values() for shard in split["shards"])
    options = manifest["options"]
    assert (options["seed"], options["jpeg_quality"], options["compression"]) == (3, 80, "gzip")
    assert options["image_size"] == [32, 48]
    assert options["unassigned_split"] == [0.5, 0.25, 0.25]
    train = read_split(out, "train")
    assert train and all(r["pixels"].shape[:2] == (32, 48) for r in train)
    assert all((r["image_height"], r["image_width"]) == (32, 48) for r in train)


def test_every_convert_option_has_a_flag_with_the_library_default():
    """The flags come from `tfrecorder.options`: an option without a flag of its own
    (a default alone is no flag) fails here."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {a.dest: a for a in commands.choices["convert"]._actions if a.option_strings}
    declared = {f.name: f for f in options.fields()}
    assert set(declared) <= set(flags), set(declared) - set(flags)
    assert {name: flags[name].default for name in declared} == {
        name: f.default for name, f in declared.items()}
    args = parser.parse_args(["convert", "in.csv", "out/"])
    assert {name: getattr(args, name) for name in declared} == cli.CONVERT_DEFAULTS
    # convert() takes exactly the declared options.
    assert set(cli.CONVERT_DEFAULTS) == set(declared)
    # ... and docs/cli.md lists each flag with its option.
    table = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    undocumented = [name for name, action in flags.items() if name in declared
                    and not all(f"`{flag}" in table and f"`{name}" in table
                                for flag in action.option_strings)]
    assert not undocumented, f"add these options to docs/cli.md: {undocumented}"


def test_convert_flags_map_to_the_library_options():
    args = cli.build_parser().parse_args([
        "convert", "in.csv", "out/", "--header", "--image-format", "raw",
        "--max-image-side", "64", "--no-validate", "--num-shards", "train=8,validation=1",
        "--shard-size-mb", "16", "--on-error", "raise", "--num-workers", "2",
        "--overwrite", "--no-progress", "--runner", "DirectRunner",
        "--beam-option", "direct_num_workers=2", "--beam-option", "direct-running-mode=x",
        "--tfrecorder-wheel", "dist/tfrecorder-1.0-py3-none-any.whl",
    ])
    assert {name: getattr(args, name) for name in cli.CONVERT_DEFAULTS} == {
        **cli.CONVERT_DEFAULTS, "header": True, "image_format": "raw", "max_image_side": 64,
        "validate": False, "num_shards": {"train": 8, "validation": 1}, "shard_size_mb": 16.0,
        "on_error": "raise", "num_workers": 2, "overwrite": True, "progress": False,
        "runner": "DirectRunner", "tfrecorder_wheel": "dist/tfrecorder-1.0-py3-none-any.whl",
        "beam_options": {"direct_num_workers": 2, "direct_running_mode": "x"},
    }
    args = cli.build_parser().parse_args(["convert", "a", "b", "--no-header",
                                          "--num-shards", "4", "--resume"])
    assert (args.header, args.num_shards, args.resume) == (False, 4, True)


def test_schema_and_fill_missing_flags_collect_columns():
    args = cli.build_parser().parse_args([
        "convert", "in.csv", "out/", "--schema", "color=CategoricalInput",
        "--schema", "my notes = drop", "--schema", "id=StringInput",
        "--fill-missing", "age=0", "--fill-missing", "name=unknown",
        "--fill-missing", "tags=[]", "--fill-missing", "weight=0.5",
    ])
    assert args.schema == {"color": "CategoricalInput", "my notes": None, "id": "StringInput"}
    assert args.fill_missing == {"age": 0, "name": "unknown", "tags": [], "weight": 0.5}
    args = cli.build_parser().parse_args(["convert", "a", "b", "--fill-missing", "-1"])
    assert args.fill_missing == -1
    args = cli.build_parser().parse_args(["convert", "a", "b", "--fill-missing", "n/a"])
    assert args.fill_missing == "n/a"


# Options as errors' advice names them, each with a value of its kind.
ADVICE = [
    Option("schema", {"notes": None, "my col": "StringInput"}),
    Option("fill_missing", {"age": 0, "name": "n/a"}),
    Option("beam_options", {"temp_location": "gs://bucket/tmp"}),
    Option("overwrite", True), Option("validate", False), Option("header", False),
    Option("max_rejected", 1.0), Option("num_workers", 4), Option("on_error", "reject"),
    Option("runner", "DirectRunner"), Option("image_size", (224, 200)),
    Option("unassigned_split", (0.7, 0.2, 0.1)), Option("num_shards", {"train": 8}),
    Option("max_image_pixels", None), Option("class_names", ["cat", "dog"]),
    Option("image_root", {"train": "train2017", "validation": "val 2017"}),
]


@pytest.mark.parametrize("option", ADVICE, ids=lambda option: option.name)
def test_an_option_in_an_errors_advice_is_shown_as_the_flags_that_set_it(option):
    """The flag form reads back as the very value the advice names."""
    flags = shlex.split(cli._as_flag(option))
    args = cli.build_parser().parse_args(["convert", "in.csv", "out/", *flags])
    assert getattr(args, option.name) == option.value, flags


def test_advice_covers_every_kind_of_option():
    kinds = {f.name: f.metadata["kind"] for f in options.fields()}
    assert {kinds[option.name] for option in ADVICE} == set(kinds.values())


def test_named_options_placeholders_and_arguments_as_flags():
    assert cli._as_flag(Option("max_rejected")) == "--max-rejected"
    assert cli._as_flag(Option("validate")) == "--no-validate"
    assert cli._as_flag(Option("beam_options")) == "--beam-option"
    assert cli._as_flag(Option("fill_missing", {"age": VALUE})) == "--fill-missing age=VALUE"
    assert cli._as_flag(Option("schema", {"a b": None})) == "--schema 'a b=drop'"
    assert cli._as_flag(Option("output_dir")) == "OUTPUT_DIR"
    assert cli._as_flag(Option("batch_size", 32)) == "batch_size=32"  # not convert's


def test_an_error_line_gives_flags_where_python_gives_keywords():
    error = SchemaError("column 'when' cannot be stored. Drop it with ",
                        Option("schema", {"when": None}), ", or pass a larger ",
                        Option("max_rejected"), ".", column="when")
    assert cli._one_line(error) == ("column 'when' cannot be stored. Drop it with --schema "
                                    "when=drop, or pass a larger --max-rejected.")
    assert "schema={'when': None}" in str(error)


@pytest.mark.parametrize("args", [
    ["--schema", "color"], ["--schema", "=StringInput"], ["--schema", "color="],
    ["--fill-missing", "0", "--fill-missing", "age=1"],
    ["--fill-missing", "age=1", "--fill-missing", "0"],
])
def test_malformed_schema_and_fill_missing_flags_are_usage_errors(args, capsys):
    assert cli.main(["convert", "in.csv", "out/", *args]) == 2
    err = capsys.readouterr().err
    assert "usage: tfrecorder convert" in err
    assert ("COLUMN=TYPE" in err) if args[0] == "--schema" else ("not both" in err)


def test_an_unknown_split_value_is_one_error_line(tmp_path):
    table = tmp_path / "bad.csv"
    table.write_text("split,image_uri,label\nTRAIN,a.jpg,cat\nBOGUS,b.jpg,dog\n")
    process = run_cli("convert", table, tmp_path / "out", "--no-progress")
    assert_one_error_line(process, "'BOGUS'", "split")
    assert not (tmp_path / "out").exists()


def test_converting_into_an_existing_dataset_suggests_overwrite(tmp_path):
    out = tmp_path / "out"
    options = ["--num-workers", "1", "--no-progress"]
    assert run_cli("convert", SAMPLE_CSV, out, *options).returncode == 0
    line = assert_one_error_line(run_cli("convert", SAMPLE_CSV, out, *options), "--overwrite")
    assert "overwrite=True" not in line
    assert run_cli("convert", SAMPLE_CSV, out, "--overwrite", *options).returncode == 0


@pytest.mark.parametrize("args, words", [
    (["--num-shards", "-1"], ["--num-shards must be"]),
    (["--unassigned-split", "0.5,0.5"], ["--unassigned-split must be"]),
    (["--image-size", "0x10"], ["--image-size must be"]),
])
def test_bad_option_values_are_one_error_line(tmp_path, args, words):
    process = run_cli("convert", SAMPLE_CSV, tmp_path / "out", "--no-progress", *args)
    assert_one_error_line(process, *words)


@pytest.mark.parametrize("args", [
    ["convert", SAMPLE_CSV, "out", "--bogus"],
    ["convert", SAMPLE_CSV, "out", "--resume", "--overwrite"],
    ["convert", SAMPLE_CSV, "out", "--image-size", "32"],
    ["convert", SAMPLE_CSV, "out", "--num-shards", "train=x"],
    ["convert", SAMPLE_CSV],
    [],
])
def test_usage_errors_exit_2(args):
    process = run_cli(*args)
    assert process.returncode == 2, process.stderr
    assert "usage: tfrecorder" in process.stderr and "Traceback" not in process.stderr


@pytest.mark.parametrize(("stop", "code", "said"), [
    (signal.SIGINT, 130, "tfrecorder: interrupted"),
    (signal.SIGTERM, 143, "tfrecorder: stopped by signal 15"),
], ids=["ctrl-c", "sigterm"])
def test_a_stopped_conversion_exits_without_a_traceback_and_leaves_nothing(
        tmp_path, stop, code, said):
    image = tmp_path / "big.png"
    image.write_bytes(image_bytes(make_image((1000, 1000), seed=1), "PNG"))
    table = tmp_path / "slow.csv"
    table.write_text("".join(f"TRAIN,{image},a\n" for _ in range(2000)))
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "tfrecorder", "convert", str(table), str(out),
         "--num-workers", "1", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_writing(process, out)
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == said
    assert not out.exists()  # the folder the run made, empty, goes too


def wait_mapped(process: subprocess.Popen, folder: str, seconds: float = 60) -> None:
    """Waits until `process` has mapped a shared library from `folder` (`/pandas/`): it
    is then importing that package, the stage of its start-up a test interrupts."""
    deadline = time.time() + seconds
    while folder not in Path(f"/proc/{process.pid}/maps").read_text():
        assert time.time() < deadline and process.poll() is None, process.stderr.read()
        time.sleep(0.005)


def console_script(folder: Path) -> Path:
    """The `tfrecorder` script pip writes for pyproject.toml's entry point, in `folder`
    (the one installed may predate a change of the entry point)."""
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    module, function = re.search(r'^tfrecorder = "([\w.]+):(\w+)"$', pyproject, re.M).groups()
    script = folder / "tfrecorder"
    script.write_text(f"import sys\nfrom {module} import {function}\n"
                      f"if __name__ == '__main__':\n    sys.exit({function}())\n")
    return script


# The command's two entries, and the stages of its start-up, by the shared libraries it
# maps as it imports: numpy's (early in pandas' import), pandas' own (a second of its
# import), Pillow's (near the end of `import tfrecorder`).
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize(("entry", "stage"), [
    (["-m", "tfrecorder"], "/numpy/"),
    (["-m", "tfrecorder"], "/pandas/"),
    (["-m", "tfrecorder"], "/PIL/"),
    (["script"], "/pandas/"),
], ids=["numpy", "pandas", "pillow", "script-pandas"])
def test_ctrl_c_while_the_command_starts_prints_one_line(tmp_path, entry, stage):
    if entry == ["script"]:
        entry = [str(console_script(tmp_path))]
    image = tmp_path / "a.png"
    image.write_bytes(image_bytes(make_image((8, 8)), "PNG"))
    table = tmp_path / "t.csv"
    table.write_text(f"TRAIN,{image},a\n")
    process = subprocess.Popen([sys.executable, *entry, "convert", str(table),
                                str(tmp_path / "out"), "--no-progress"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_mapped(process, stage)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert (process.returncode, stderr, stdout) == (130, "tfrecorder: interrupted\n", "")


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc")
def test_ctrl_c_while_python_imports_tfrecorder_stays_a_keyboard_interrupt():
    """Only the command turns it into its line: a program importing the package keeps
    Python's KeyboardInterrupt, to catch or to see."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import tfrecorder\nprint('imported')"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_mapped(process, "/pandas/")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode != 130 and "tfrecorder: interrupted" not in stderr
    # (unless the interrupt lands in an import pandas tries and forgives)
    assert stderr.endswith("KeyboardInterrupt\n") or stdout == "imported\n", stderr


# A command that prints, with a reader that has gone before it prints a line; argparse
# (--help) drops what it cannot write and exits 0 itself. Every command goes through the
# same entry (`__main__`), so two are enough (verify, inspect and convert took 40 s more).
@pytest.mark.parametrize(("command", "code"), [
    (["info", "--json", "{out}"], 141), (["convert", "--help"], 0),
], ids=["info-json", "help"])
def test_a_closed_stdout_ends_the_command_quietly(sample, tmp_path, command, code):
    out, _ = sample
    process = subprocess.Popen(
        [sys.executable, "-m", "tfrecorder",
         *(word.format(out=out, tmp=tmp_path) for word in command)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # long before the command, still importing, prints
    try:
        stderr = process.stderr.read()
        process.wait(timeout=120)
    finally:
        process.kill()
    assert process.returncode == code, stderr  # 141: as a shell reports `yes | head -1`
    # (TensorFlow, which inspect imports, logs lines of its own)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_info_piped_into_head_prints_its_line_and_no_traceback(sample, tmp_path):
    """`tfrecorder info out/ | head -1`, as a shell runs it: whether head has gone by the
    time info writes varies run to run, so it runs a few times."""
    out, _ = sample
    for _ in range(3):
        info = subprocess.Popen([sys.executable, str(console_script(tmp_path)), "info", out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        head = subprocess.Popen(["head", "-1"], stdin=info.stdout, stdout=subprocess.PIPE,
                                text=True)
        info.stdout.close()  # head alone reads the pipe, and closes it after its line
        try:
            line, _ = head.communicate(timeout=120)
            stderr = info.stderr.read()
            info.wait(timeout=120)
        finally:
            info.kill()
        assert line.startswith(f"{out}: a tfrecorder dataset")
        assert stderr == "" and info.returncode in (0, 141), stderr


def test_a_broken_pipe_not_of_stdout_keeps_its_traceback(monkeypatch):
    """Only stdout's closed pipe ends the command quietly; another is a bug to see."""
    def broken(*args, **kwargs):
        raise BrokenPipeError("a worker's pipe")

    monkeypatch.setattr(cli, "main", broken)
    with pytest.raises(BrokenPipeError, match="a worker's pipe"):
        tfrecorder_main()


def test_unexpected_errors_keep_their_traceback(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(tfrecorder, "convert", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["convert", "in.csv", "out/"])


def test_several_files_convert_as_the_splits_of_one_dataset(tmp_path, capsys):
    tables = {}
    for split, labels in [("train", "abab"), ("validation", "ab")]:
        lines = ["image_uri,label"]
        for i, label in enumerate(labels):
            image = tmp_path / split / f"{i}.png"
            image.parent.mkdir(exist_ok=True)
            image.write_bytes(image_bytes(make_image((8, 8), seed=i), "PNG"))
            lines.append(f"{i}.png,{label}")  # relative to its own CSV's folder
        tables[split] = tmp_path / split / "labels.csv"
        tables[split].write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    sources = [f"train={tables['train']}", f"val={tables['validation']}"]
    assert cli.main(["convert", *sources, str(out), "--no-progress", "--num-workers", "1"]) == 0
    assert capsys.readouterr().out.startswith(f"Converted {' '.join(sources)} into {out} in ")
    assert {split: found["num_records"] for split, found in read_manifest(out)["splits"].items()
            if found["num_records"]} == {"train": 4, "validation": 2}


@pytest.mark.parametrize("sources", [
    ["a.csv", "b.csv"], ["train=a.csv", "b.csv"], ["train=a.csv", "train=b.csv"],
    ["holdout=a.csv", "test=b.csv"],
])
def test_several_sources_each_need_a_split_once(sources, capsys):
    assert cli.main(["convert", *sources, "out/"]) == 2
    assert "give one SOURCE, or SPLIT=PATH for each of several files" in capsys.readouterr().err


def test_a_source_with_an_equals_sign_that_names_no_split_is_a_path():
    parser = cli.build_parser()
    assert parser.parse_args(["convert", "table/split=TRAIN", "out/"]).source == \
        "table/split=TRAIN"  # a hive partition
    assert "SPLIT=PATH" in " ".join(_commands(parser)["convert"].format_help().split())


@pytest.fixture
def table_csv(tmp_path) -> Path:
    """A CSV with a header, images, and extra columns: a number with a blank cell, a
    colour, free text, and a float."""
    lines = ["split,image_uri,label,age,color,notes,weight"]
    for i in range(6):
        image = tmp_path / "images" / f"img{i}.png"
        image.parent.mkdir(exist_ok=True)
        image.write_bytes(image_bytes(make_image((6, 5), seed=i), "PNG"))
        age = "" if i == 2 else str(20 + i)
        lines.append(f"{['TRAIN', 'VALIDATION', 'TEST'][i % 3]},images/{image.name},"
                     f"{['cat', 'dog'][i % 2]},{age},{['red', 'blue', 'green'][i % 3]},"
                     f"note {i},{i / 2}")
    table = tmp_path / "table.csv"
    table.write_text("\n".join(lines) + "\n")
    return table


def test_convert_a_csv_with_extra_columns_and_a_schema_end_to_end(table_csv, tmp_path):
    out = tmp_path / "out"
    line = assert_one_error_line(run_cli("convert", table_csv, out, "--no-progress"),
                                 "'age'", "--fill-missing age=VALUE")
    assert "fill_missing=" not in line

    process = run_cli("convert", table_csv, out, "--schema", "color=CategoricalInput",
                  "--schema", "notes=drop", "--fill-missing", "age=0", "--num-workers", "1",
                  "--no-progress")
    assert process.returncode == 0, process.stderr
    assert ": 6 records" in process.stdout
    features = read_manifest(out)["features"]
    assert "notes" not in features
    assert features["age"] == {"dtype": "int64", "shape": [], "role": "input"}
    assert features["weight"] == {"dtype": "float32", "shape": [], "role": "input"}
    assert features["color"] == {"dtype": "int64", "shape": [], "role": "input",
                                 "vocabulary": ["blue", "green", "red"]}
    rows = []
    for split in SAMPLE_COUNTS:
        with open(Path(tfrecorder.inspect(out, split, output_dir=tmp_path / split),
                       "records.csv")) as f:
            rows += list(csv.DictReader(f))
    assert sorted((int(row["age"]), row["color_value"]) for row in rows) == [
        (0, "green"), (20, "red"), (21, "blue"), (23, "red"), (24, "blue"), (25, "green")]

    lines = [" ".join(line.split()) for line in run_cli("info", out).stdout.splitlines()]
    assert "color int64 [] input (categorical, 3 values)" in lines
    assert "weight float32 [] input" in lines and "label int64 [] label (2 classes)" in lines

    process = run_cli("verify", out, "--no-progress")
    assert process.returncode == 0, process.stderr
    assert "OK: 6 records in 3 shards (6 records parsed, 6 images decoded)" in process.stdout


# --- info ----------------------------------------------------------------------------------

def test_info_describes_the_dataset_from_its_manifest(sample):
    out, _ = sample
    process = run_cli("info", out)
    assert process.returncode == 0, process.stderr
    text = process.stdout
    for split, count in SAMPLE_COUNTS.items():
        assert any(line.split()[:2] == [split, str(count)] for line in text.splitlines())
    assert "4 classes: " + ", ".join(SAMPLE_LABELS) in text
    assert "Rejected:     0 of 16 source rows" in text
    assert "Compression:  none" in text and "Image format: auto" in text
    assert " MB" in text and "1 shard" in text
    for feature, spec in read_manifest(out)["features"].items():
        assert any(line.split()[:4] == [feature, spec["dtype"], "[]", spec["role"]]
                   for line in text.splitlines())
    assert "label (4 classes)" in text and "multi-label" not in text


def test_docs_cli_md_shows_what_info_prints(tmp_path, monkeypatch, capsys):
    """docs/cli.md's `info` sample is this command's output today, as a newcomer runs it:
    word for word, with every number but the format's standing for any number (sizes
    follow the JPEG encoder, the version is 0.1.0's)."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    shown = doc.split("    $ tfrecorder info out/samples\n")[1].split("\n\n")[0]
    shown = [line.removeprefix("    ") for line in shown.splitlines()]
    monkeypatch.chdir(tmp_path)
    shutil.copytree(SAMPLE_CSV.parent, "examples")
    assert cli.main(["convert", "examples/images.csv", "out/samples", "--image-size",
                     "224x224", "--no-progress", "--num-workers", "1"]) == 0
    capsys.readouterr()
    assert cli.main(["info", "out/samples"]) == 0
    printed = capsys.readouterr().out.splitlines()
    version = f"tfrecorder {tfrecorder.__version__})"
    assert shown[0] == printed[0].replace(version, "tfrecorder 0.1.0)")  # the format's
    assert [re.sub(r"\d+(\.\d+)?", "N", line) for line in shown] == [
        re.sub(r"\d+(\.\d+)?", "N", line) for line in printed]


def test_info_shows_shapes_roles_vocabularies_and_multi_label(tmp_path, capsys):
    out = tmp_path / "out"
    table = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TEST"],
                          "label": [["cat", "dog"], [], ["dog"]],
                          "boxes": [[[0, 0, 1, 1]], [], [[0.5, 0.5, 1, 1]]],
                          "tags": pd.Categorical(["a", "b", "a"])})
    tfrecorder.convert(table, out, progress=False, num_workers=1)
    assert cli.main(["info", str(out)]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert "Labels: 2 classes, multi-label: cat, dog" in lines
    assert "Image format: none (the records hold no images)" in lines
    assert "label int64 [None] label (multi-label, 2 classes)" in lines
    assert "boxes float32 [None, 4] input" in lines
    assert "tags int64 [] input (categorical, 2 values)" in lines


def test_info_gives_small_images_sizes_that_are_not_0_kb(tmp_path, capsys):
    """Images under a kilobyte in bytes; a split of larger ones in KB, with a decimal
    under 10 KB, so that no size reads 0."""
    rows = []
    for i, (split, size, fmt) in enumerate([("TRAIN", (8, 8), "PNG"), ("TRAIN", (9, 9), "PNG"),
                                            ("TEST", (8, 8), "PNG"),
                                            ("TEST", (160, 120), "JPEG")]):
        path = tmp_path / f"{i}.{fmt.lower()}"
        path.write_bytes(image_bytes(make_image(size, seed=i), fmt))
        rows.append((split, str(path), "a"))
    out = tmp_path / "out"
    tfrecorder.convert(pd.DataFrame(rows, columns=["split", "image_uri", "label"]), out,
                       progress=False)
    assert cli.main(["info", str(out)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()
             if "height" in line}
    train = read_manifest(out)["statistics"]["train"]["image_bytes"]
    assert train["max"] < 1024
    assert (f"; {train['min']:.0f}-{train['max']:.0f} bytes (median {train['median']:.0f} "
            "bytes);") in lines["train"]
    test = read_manifest(out)["statistics"]["test"]["image_bytes"]
    assert test["min"] < 1024 <= test["max"] < 10 * 1024
    assert (f"; {test['min'] / 1024:.1f}-{test['max'] / 1024:.1f} KB (median "
            f"{test['median'] / 1024:.1f} KB);") in lines["test"]


# A count of one before a plural noun: "1 records", "0 of 1 source rows", "1 boxes".
ONE_OF_A_PLURAL = re.compile(r"(?<![\d.,])1 (?:source )?(?:records|shards|rows|annotations|"
                             r"classes|boxes|objects|images|warnings|values|problems)\b")


@pytest.fixture(scope="module")
def one_record(tmp_path_factory) -> Path:
    """A detection dataset of one record: one image, one box, one class."""
    folder = tmp_path_factory.mktemp("one")
    (folder / "a.png").write_bytes(image_bytes(make_image((16, 16)), "PNG"))
    table = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(folder / "a.png")],
                          "label": [["cat"]], "boxes": [[[0.1, 0.1, 0.6, 0.6]]]})
    tfrecorder.convert(table, folder / "out", task="detection", progress=False, num_workers=1)
    return folder / "out"


def test_info_of_one_record_says_record_not_records(one_record, capsys):
    assert cli.main(["info", str(one_record)]) == 0
    text = capsys.readouterr().out
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert "train 1 record 1 shard 0.00 MB" in lines
    assert f"Rejected: 0 of 1 source row (see {one_record / 'rejected.csv'})" in lines
    assert any(line.startswith("train 1 box; ") for line in lines)
    assert ONE_OF_A_PLURAL.findall(text) == []


def test_info_json_prints_what_info_returns(sample):
    out, _ = sample
    process = run_cli("info", out, "--json")
    assert process.returncode == 0, process.stderr
    printed, manifest = json.loads(process.stdout), read_manifest(out)
    assert printed == json.loads(json.dumps(tfrecorder.info(out).to_json()))
    assert printed["statistics"] == manifest["statistics"]
    assert printed["splits"]["train"]["num_records"] == manifest["splits"]["train"][
        "num_records"]


def test_info_of_a_folder_without_a_dataset_is_one_error_line(tmp_path):
    assert_one_error_line(run_cli("info", tmp_path), "dataset.json")


# --- verify and inspect --------------------------------------------------------------------

def test_verify_a_sound_dataset(sample):
    out, _ = sample
    process = run_cli("verify", out)
    assert process.returncode == 0, process.stderr
    assert "OK: 16 records in 3 shards (16 records parsed, 16 images decoded)" in process.stdout
    assert "Traceback" not in process.stderr


def test_verify_a_corrupt_shard_lists_the_problem_and_exits_1(sample, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(sample[0], out)
    shard = out / read_manifest(out)["splits"]["train"]["shards"][0]["file"]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    process = run_cli("verify", out, "--no-decode", "--no-progress")
    assert_one_error_line(process, "1 problem", "--overwrite")
    assert "FAILED: 1 problem" in process.stdout and shard.name in process.stdout


def test_inspect_writes_records_into_the_folder_it_prints(sample, tmp_path):
    out, _ = sample
    look = tmp_path / "look"
    process = run_cli("inspect", out, "--split", "validation", "--num-records", "2",
                  "--output-dir", look)
    assert process.returncode == 0, process.stderr
    folder = process.stdout.strip()
    assert os.path.samefile(folder, look)
    files = sorted(os.listdir(look))
    assert "records.csv" in files and len(files) == 3, files  # and two images



# --- TFRecorder 2.0's python-fire flags on the new commands ---------------------------------

def test_convert_and_inspect_take_2_0s_fire_flags_with_a_warning(sample, tmp_path):
    """`convert --source=... --output_dir=...` and `inspect --tfrecord_dir=...`, as 2.0's
    scripts spelled arguments, run as `convert SOURCE OUTPUT_DIR` and `inspect PATH`."""
    out = tmp_path / "out"
    process = run_cli("convert", f"--source={SAMPLE_CSV}", "--output_dir", out,
                      "--num_shards=1", "--no-progress")
    assert process.returncode == 0, process.stderr
    assert process.stderr == (
        "tfrecorder: warning: convert --source= --output_dir= --num_shards= is TFRecorder "
        "2.0's command; use: tfrecorder convert SOURCE OUTPUT_DIR --num-shards\n")
    assert ": 16 records" in process.stdout
    assert all(len(split["shards"]) == 1 for split in read_manifest(out)["splits"].values())
    look = tmp_path / "look"
    process = run_cli("inspect", f"--tfrecord_dir={sample[0]}", "--split=TEST",
                      "--num_records=2", f"--output_dir={look}")
    assert process.returncode == 0, process.stderr
    assert "inspect --tfrecord_dir= --num_records= --output_dir= is TFRecorder 2.0's " \
           "command; use: tfrecorder inspect PATH --num-records --output-dir" in process.stderr
    assert os.path.samefile(process.stdout.strip(), look) and len(os.listdir(look)) == 3


@pytest.mark.parametrize("args, expected", [
    (["convert", "data.csv", "--output_dir=out", "--image-size", "8x8"],
     ["convert", "data.csv", "--image-size", "8x8", "out"]),
    (["convert", "--source", "data.csv", "out", "--seed=3"],
     ["convert", "data.csv", "out", "--seed=3"]),
    (["convert", "data.csv", "out", "--num-shards", "2"],  # ours: untouched
     ["convert", "data.csv", "out", "--num-shards", "2"]),
    (["info", "--source=x"], ["info", "--source=x"]),  # only convert and inspect
])
def test_fire_flags_become_the_arguments_argparse_reads(args, expected):
    assert cli.from_fire_flags(args)[0] == expected


# --- help and version ----------------------------------------------------------------------

@pytest.mark.parametrize("command", [[], ["convert"], ["info"], ["verify"], ["inspect"]])
def test_help_has_a_description_and_an_example(command, capsys):
    assert cli.main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: tfrecorder") and "example" in text


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands, read from the parser, so that a new one is covered."""
    return {name: command for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, command in action.choices.items()}


def _help(capsys, *command: str) -> str:
    assert cli.main([*command, "--help"]) == 0
    return capsys.readouterr().out


# File names a help text may give: the files a user writes or reads.
_FILE_EXTENSIONS = {"csv", "json", "jsonl", "pbtxt", "yaml", "xml", "txt", "parquet", "pq",
                    "png", "jpg", "jpeg", "html", "md", "zip"}
_MODULES = {module.name.rpartition(".")[2]
            for module in pkgutil.walk_packages(tfrecorder.__path__, "tfrecorder.")}


def internals_named(text: str) -> list[str]:
    """What a help text says that only a reader of the code knows: dotted names
    (`prefetch.mean_record_bytes`, `tfrecorder.info`; not file names like
    `label_map.pbtxt`, nor "e.g."), calls (`to_json()`), backticked code, tfrecorder's
    module names with an underscore, and convert()'s keywords as Python spells them
    (`shard_size_mb`; not a flag, `--output_dir`, nor a KEY=VALUE)."""
    found = [name for name in re.findall(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", text)
             if name.rpartition(".")[2].lower() not in _FILE_EXTENSIONS
             and any(len(part) > 1 for part in name.split("."))]
    found += re.findall(r"\b[A-Za-z_]\w*\([^()\s]*\)", text)
    found += re.findall(r"`[^`]*`", text)
    snake = {name for name in _MODULES | set(cli.CONVERT_DEFAULTS) if "_" in name.strip("_")}
    found += [word for word in re.findall(r"(?<![-\w])[a-z]\w*_\w+(?![\w=])", text)
              if word in snake]
    return found


def test_internals_named_finds_what_leaked():
    leaked = ("a given count, or as many as keep shards near `shard_size_mb` (measured by "
              "prefetch.mean_record_bytes; see tfrecorder.info(PATH).to_json()), as "
              "create_pascal_tf_record.py does; shard_size_mb, image_checks")
    assert internals_named(leaked) == [
        "prefetch.mean_record_bytes", "tfrecorder.info", "create_pascal_tf_record.py",
        "info(PATH)", "to_json()", "`shard_size_mb`", "shard_size_mb", "shard_size_mb",
        "image_checks"]
    assert internals_named("rejected.csv, label_map.pbtxt, data.yaml, e.g. 224x224, "
                           "--output_dir, temp_location=gs://bucket/tmp, [split,]image_uri, "
                           "tf_models, TFRecorder 2.0's output, OUTPUT_DIR") == []


@pytest.mark.parametrize("command", [[], *([name] for name in _commands(cli.build_parser()))],
                         ids=lambda command: " ".join(command) or "tfrecorder")
def test_help_texts_speak_to_users_not_of_the_code(command, capsys):
    text = _help(capsys, *command)
    assert internals_named(text) == []


# What names each of the file formats `convert` reads (`sources.FILE_FORMATS`), as the
# SOURCE argument's help must say it.
_FORMAT_WORDS = {
    "csv": ["CSV"], "parquet": ["Parquet"], "folder": ["image folder"],
    "tables": ["boxes", "mask_uri"], "automl_detection": ["AutoML", "detection CSV"],
    "vertex_jsonl": ["Vertex AI JSONL"], "coco": ["COCO JSON"],
    "coco_folder": ["COCO folder", "Roboflow"],
    "pascal_voc": ["Pascal VOC", "LabelImg", "CVAT"], "yolo": ["YOLO", "data.yaml"],
    "vertex_video": ["Vertex AI video JSONL or CSV", "object tracking"],
    "clips_csv": ["DMVR clips CSV"], "table_files": ["glob", "folder of only CSV"],
}


def test_the_source_argument_names_every_format_convert_reads(capsys):
    assert {module.__name__.rpartition(".")[2] for module in FILE_FORMATS} == set(
        _FORMAT_WORDS), "a format was added: say in convert's SOURCE help that it reads it"
    convert = _commands(cli.build_parser())["convert"]
    source = next(action for action in convert._actions if action.dest == "source")
    said = " ".join(source.help.split())
    assert [words for words in _FORMAT_WORDS.values()
            if not all(word in said for word in words)] == [], said
    shown = " ".join(_help(capsys, "convert").split())
    assert said in shown


def test_the_installed_console_script_prints_the_version():
    script = Path(sys.executable).parent / "tfrecorder"
    process = subprocess.run([str(script), "--version"], capture_output=True, text=True,
                             timeout=120)
    assert process.returncode == 0, process.stderr
    assert process.stdout == f"tfrecorder {tfrecorder.__version__}\n"


@pytest.mark.parametrize("command", ["show", "inspect"])
def test_an_unknown_split_is_refused_naming_the_splits_as_typed(command, capsys):
    assert cli.main([command, "out/", "--split", "holdout"]) == 2
    err = capsys.readouterr().err
    assert "(choose from 'train', 'validation', 'test')" in err and "Split." not in err


def test_advice_in_logs_and_rejection_errors_names_flags_not_python(tmp_path):
    """`--resume` and `--max-image-pixels none`, never `resume=True` or `None`; and one
    `tfrecorder: warning:` spelling for log lines and warnings alike."""
    table = tmp_path / "images.csv"
    rows = []
    for i, size in enumerate([(8, 8)] * 4 + [(20, 20)]):
        path = tmp_path / f"{i}.png"
        path.write_bytes(image_bytes(make_image(size, seed=i), "PNG"))
        rows.append(f"TRAIN,{path},{'ab'[i % 2]}\n")
    table.write_text("".join(rows))
    out = tmp_path / "out"
    process = run_cli("convert", table, out, "--no-progress", "--num-workers", "1",
                      "--on-error", "raise", "--max-image-pixels", "100", "--resume")
    assert process.returncode == 1, process.stderr
    warning, error = process.stderr.strip().splitlines()
    assert warning == (f"tfrecorder: warning: Conversion stopped (ImageError); kept the 0 "
                       f"committed shard(s) in {out}: run again with --resume to write the "
                       "rest.")
    assert error.startswith("tfrecorder: error: line 5 ("), error
    assert error.endswith(
        "image too large: 20x20 is 400 pixels, more than the limit of 100. To convert such "
        "images, pass a larger --max-image-pixels, or --max-image-pixels none for no limit. "
        "Fix or drop the row, or use --on-error reject to list such rows in rejected.csv."
    ), error


def test_rejection_advice_reads_as_python_in_python(tmp_path):
    table = pd.DataFrame({"image_uri": [str(tmp_path / "big.png")], "label": ["a"]})
    (tmp_path / "big.png").write_bytes(image_bytes(make_image((20, 20)), "PNG"))
    with pytest.raises(tfrecorder.ImageError) as raised:
        tfrecorder.convert(table, tmp_path / "out", on_error="raise", max_image_pixels=100,
                           progress=False)
    assert ("more than the limit of 100. To convert such images, pass a larger "
            "max_image_pixels, or max_image_pixels=None for no limit.") in str(raised.value)

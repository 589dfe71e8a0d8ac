"""TFRecorder 2.0's command line: `migrate` (a 2.0 dataset into ours), 2.0's commands
`create-tfrecords` and `check-tfrecords`, and python-fire's flags (`--source=S`,
`--num_shards`) that 2.0's scripts give the commands we kept, `convert` and `inspect`.

`tfrecorder.cli` calls two hooks: `from_fire_flags` on the arguments before argparse reads
them, and `add_commands` to add these commands to the parser.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import warnings
from collections.abc import Callable, Iterator

from tfrecorder import options
from tfrecorder.cli_arguments import command, flag_names, literal
from tfrecorder.legacy.functions import check_tfrecords, create_tfrecords
from tfrecorder.storage import fs
from tfrecorder.wording import count


def add_commands(commands, print_conversion: Callable[[str, object], None]) -> None:
    """`migrate`, `create-tfrecords` and `check-tfrecords`; `print_conversion` prints a
    conversion's result as `convert` does."""
    _add_migrate(commands)
    _add_tfrecorder_2(commands, print_conversion)


# --- migrate -------------------------------------------------------------------------------

def _add_migrate(commands) -> None:
    migrate = command(
        commands, "migrate", "write a tfrecorder dataset from a TFRecorder 2.0 one",
        "Read every record of the TFRecorder 2.0 dataset in OLD (the folder holding "
        "transform_fn/) and write it into NEW as a tfrecorder dataset: the same pixels, "
        "label ids, vocabulary order, splits and shards; records 2.0 could not read back "
        "go to rejected.csv.",
        "tfrecorder migrate tfrecords/tfrecorder-20201005-161123-convert out/",
        _migrate, reads_dataset=False)
    migrate.add_argument("old_dir", metavar="OLD",
                         help="the TFRecorder 2.0 folder (local, gs:// or s3://)")
    migrate.add_argument("new_dir", metavar="NEW", help="the folder to write")
    migrate.add_argument("--overwrite", action="store_true",
                         help="replace a dataset already in NEW")


def _migrate(args: argparse.Namespace) -> int:
    from tfrecorder.legacy.migration import migrate  # a writer: loaded when asked for

    manifest = migrate(args.old_dir, args.new_dir, overwrite=args.overwrite)
    print(f"Wrote {args.new_dir}: {count(manifest.num_records, 'record')}, "
          f"{count(manifest.rejected.num_rows, 'row')} rejected (see "
          f"{fs.join(args.new_dir, manifest.rejected.file)})")
    return 0


# --- TFRecorder 2.0's commands ------------------------------------------------------------

# 2.0's `create-tfrecords` flags (python-fire: `--name=value`, values read as literals).
_CREATE_FLAGS = ("header", "names", "runner", "project", "region", "tfrecorder_wheel",
                 "dataflow_options", "job_label", "compression", "num_shards")


def _add_tfrecorder_2(commands, print_conversion: Callable[[str, object], None]) -> None:
    """`create-tfrecords` and `check-tfrecords`, as TFRecorder 2.0's scripts call them."""
    create = command(
        commands, "create-tfrecords", "TFRecorder 2.0's name for convert",
        "TFRecorder 2.0's command, kept for its scripts: converts --source into "
        "--output_dir (default ./tfrecords). Use 'tfrecorder convert SOURCE OUTPUT_DIR'.",
        "tfrecorder create-tfrecords --source=images.csv --output_dir=out/",
        _create_tfrecords, reads_dataset=False)
    create.set_defaults(print_result=print_conversion)
    create.add_argument("--source", required=True)
    create.add_argument("--output_dir", default=None)
    for name in _CREATE_FLAGS:
        create.add_argument(f"--{name}", type=literal, default=argparse.SUPPRESS)
    check = command(
        commands, "check-tfrecords", "TFRecorder 2.0's name for inspect",
        "TFRecorder 2.0's command, kept for its scripts: writes the first records of "
        "--split into --output_dir/check-tfrecords-<timestamp>/ as data.csv and image "
        "files. Use 'tfrecorder inspect PATH'.",
        "tfrecorder check-tfrecords --tfrecord_dir=out/ --split=TRAIN --num_records=3",
        _check_tfrecords, reads_dataset=False)
    check.add_argument("--tfrecord_dir", required=True)
    check.add_argument("--split", default="TRAIN")
    check.add_argument("--num_records", type=int, default=1)
    check.add_argument("--output_dir", default="output")


def _create_tfrecords(args: argparse.Namespace) -> int:
    options = {name: getattr(args, name) for name in _CREATE_FLAGS if hasattr(args, name)}
    with _tfrecorder_2("create-tfrecords", "convert SOURCE OUTPUT_DIR"):
        result = create_tfrecords(args.source, args.output_dir, **options)
    args.print_result(args.source, result)
    return 0


def _check_tfrecords(args: argparse.Namespace) -> int:
    with _tfrecorder_2("check-tfrecords",
                       "inspect PATH --split train --num-records N --output-dir DIR"):
        print(check_tfrecords(args.tfrecord_dir, args.split, args.num_records,
                              args.output_dir))
    return 0


# 2.0's python-fire flags (`--name=value`) for what is an argument of the new commands.
_FIRE_ARGUMENTS = {"convert": ("--source", "--output_dir"), "inspect": ("--tfrecord_dir",)}
_ARGUMENT_NAMES = {"convert": "SOURCE OUTPUT_DIR", "inspect": "PATH"}


def from_fire_flags(argv: list[str]) -> tuple[list[str], contextlib.AbstractContextManager]:
    """`convert --source=S --output_dir=O` as `convert S O`, `inspect --tfrecord_dir=P` as
    `inspect P`, and python-fire's `--num_shards` as `--num-shards`: TFRecorder 2.0's
    scripts spelled every argument as a flag. Returns the arguments argparse reads, and
    what to run the command in: a warning that names the 2.0 spelling and ours instead of
    Python's DeprecationWarnings, or nothing when no flag was 2.0's."""
    command = argv[0] if argv else None
    if command not in _FIRE_ARGUMENTS:
        return argv, contextlib.nullcontext()
    flags = _dashed_flags(command)
    values, rest, found, instead = {}, [], [], []
    arguments = iter(argv[1:])
    for argument in arguments:
        name, equals, value = argument.partition("=")
        if name in _FIRE_ARGUMENTS[command]:
            values[name] = value if equals else next(arguments, "")
        elif name in flags:
            rest.append(flags[name] + equals + value)
            instead.append(flags[name])
        else:
            rest.append(argument)
            continue
        found.append(f"{name}=")
    if not found:
        return argv, contextlib.nullcontext()
    given = [values.get(name) for name in _FIRE_ARGUMENTS[command]]
    # An argument given as a flag goes where argparse reads it: leading ones first, a
    # trailing one (OUTPUT_DIR after a positional SOURCE) last.
    leading = list(itertools.takewhile(lambda value: value is not None, given))
    trailing = [value for value in given[len(leading):] if value is not None]
    spelled = " ".join([command, *found])
    return ([command, *leading, *rest, *trailing],
            _tfrecorder_2(spelled, " ".join([command, _ARGUMENT_NAMES[command], *instead])))


def _dashed_flags(command: str) -> dict[str, str]:
    """The command's flags in python-fire's spelling (`--num_shards`), with ours."""
    if command == "inspect":
        names = ["--num-records", "--output-dir"]
    else:
        names = [name for field in options.fields() for name in flag_names(field)]
    return {name.replace("-", "_").replace("__", "--", 1): name
            for name in names if "-" in name[2:]}


@contextlib.contextmanager
def _tfrecorder_2(command: str, instead: str) -> Iterator[None]:
    """Runs a 2.0 command: one warning line naming ours, instead of the library's
    DeprecationWarnings, which speak of Python."""
    logging.warning("%s is TFRecorder 2.0's command; use: tfrecorder %s", command, instead)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield

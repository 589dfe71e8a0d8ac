"""The command line's arguments: how a subcommand is made (`command`), `convert`'s flags,
one per option of `tfrecorder.options` with how argparse reads each kind, its SOURCE, and
the reverse, an option that an error's advice names spelled as the flags that set it
(`as_flag`).

Apart from `cli`, which holds the commands, so that `legacy/cli.py` (TFRecorder 2.0's
commands, which `cli` adds) builds its commands with the same parts without importing
`cli` back.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import re
import shlex
import textwrap
from collections.abc import Mapping

from tfrecorder import options
from tfrecorder.errors import VALUE, Option
from tfrecorder.format.splits import split_named


def command(commands, name: str, summary: str, description: str, example: str, run,
            *, reads_dataset: bool = True) -> argparse.ArgumentParser:
    """A subcommand that runs `run(args)`; one that reads a dataset takes its PATH."""
    parser = commands.add_parser(
        name, help=summary, description=textwrap.fill(description, 80),
        epilog=f"example:\n  {example}", formatter_class=_HelpFormatter,
    )
    parser.set_defaults(run=run)
    if reads_dataset:
        parser.add_argument("path", metavar="PATH",
                            help="a dataset folder (local, gs:// or s3://)")
    return parser


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """An argument's help wrapped line by line, so that it can be a list (SOURCE's): each
    line of "- item" wrapped under its item's text."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        lines = []
        for line in text.splitlines():
            item = line.startswith("- ")
            wrapped = super()._split_lines(line[2:] if item else line, width - 2 * item)
            lines += [("- " if i == 0 else "  ") + part if item else part
                      for i, part in enumerate(wrapped)]
        return lines


def add_option_flags(command: argparse.ArgumentParser) -> None:
    """One flag for each option of `tfrecorder.options`, in argument groups by option group."""
    for group in options.GROUPS:
        summary = group.__doc__.split("\n\n")[0]  # the docstring's first paragraph
        arguments = command.add_argument_group(_GROUP_TITLES[group],
                                               textwrap.fill(" ".join(summary.split()), 78))
        exclusive = getattr(group, "exclusive", ())
        if exclusive:
            together = arguments.add_mutually_exclusive_group()
        for field in dataclasses.fields(group):
            adder = together if field.name in exclusive else arguments
            kind = _flag_kind(field)
            kind["action"] = _noting(command._registry_get("action", kind.get("action"),
                                                           kind.get("action")))
            adder.add_argument(*flag_names(field), dest=field.name, default=field.default,
                               help=_flag_help(field), **kind)


GIVEN = "given_options"  # the namespace's set of the options whose flags were given


@functools.cache
def _noting(action: type[argparse.Action]) -> type[argparse.Action]:
    """`action`, also noting its option in the namespace's `GIVEN`: `convert` passes
    only those, so that a preset (`strict`) refuses what the user gave, not a default."""

    class Noting(action):
        def __call__(self, parser, namespace, values, option_string=None):
            super().__call__(parser, namespace, values, option_string)
            setattr(namespace, GIVEN, {*getattr(namespace, GIVEN, ()), self.dest})

    Noting.__name__ = Noting.__qualname__ = f"Noting{action.__name__}"
    return Noting


SOURCE_HELP = """what to convert, local, gs:// or s3://. One of:
- a table: a CSV file (AutoML Vision rows, or any columns under a header), or a Parquet \
file or folder; with a boxes or mask_uri column, for detection or segmentation
- several table files read as one table: a glob of CSV, Parquet or JSONL files ("rows/*.csv"), \
or a folder of only CSV or only JSONL files (hive partitions too)
- an image folder: label/file or split/label/file
- an AutoML Vision or Vertex AI detection CSV, or a Vertex AI JSONL import file
- COCO: a COCO JSON file (boxes, masks or keypoints), or a COCO folder as downloaded \
(annotations/instances_*.json, or a Roboflow COCO export)
- Pascal VOC: an XML file, or a folder of them (LabelImg, CVAT, VOCdevkit)
- YOLO: a data.yaml, or its folder
- video or audio: a table with a video_uri or audio_uri column; a Vertex AI video JSONL \
or CSV file (classification, action recognition, object tracking); a DMVR clips CSV \
(video_path,start,end,label); or a folder of videos or audio files (docs/video.md)
- several files as the splits of one dataset, each as SPLIT=PATH \
(train=instances_train.json validation=instances_val.json)"""


class Sources(argparse.Action):
    """SOURCE: one path, or SPLIT=PATH for each file of a dataset whose splits are files of
    their own, read as `convert`'s dict of files by split ({"train": PATH, ...})."""

    def __call__(self, parser, namespace, values, option_string=None):
        pairs = [value.partition("=") for value in values]
        named = [bool(sep and path) and split_named(split) is not None
                 for split, sep, path in pairs]
        if len(values) == 1 and not named[0]:
            source = values[0]
        elif all(named) and len({split for split, _, _ in pairs}) == len(pairs):
            source = {split: path for split, _, path in pairs}
        else:
            parser.error("give one SOURCE, or SPLIT=PATH for each of several files, each "
                         "split once (train=a.json validation=b.json); not "
                         + " ".join(map(shlex.quote, values)))
        setattr(namespace, self.dest, source)

# Each group of `tfrecorder.options`, as the command's help shows it.
_GROUP_TITLES = {
    options.TableOptions: "table", options.SplitOptions: "splits",
    options.ImageOptions: "images", options.MediaOptions: "video and audio",
    options.RejectOptions: "rejected rows",
    options.ShardOptions: "shards", options.OutputOptions: "output folder",
    options.RunOptions: "local run", options.BeamOptions: "Apache Beam",
}


def flag_names(field: dataclasses.Field) -> list[str]:
    """--name-with-dashes (--no-name for a switch that is on by default)."""
    if field.metadata["flag"]:
        return [field.metadata["flag"]]
    name = field.name.replace("_", "-")
    return [f"--no-{name}" if field.metadata["kind"] == "switch" and field.default
            else f"--{name}"]


def _flag_help(field: dataclasses.Field) -> str:
    text = (field.metadata["help"] or field.metadata["doc"]).rstrip(".")
    if field.default is None or field.metadata["kind"] in ("switch", "tristate") \
            or "default" in text:
        return text
    default = (",".join(map(str, field.default)) if isinstance(field.default, tuple)
               else field.default)
    return f"{text} (default: {default})"


def _flag_kind(field: dataclasses.Field) -> dict:
    """How an option of its kind (`options.option`) is read: argparse's keywords."""
    kind, metavar = field.metadata["kind"], field.metadata["metavar"]
    if kind == "switch":
        return {"action": "store_false" if field.default else "store_true"}
    if kind == "tristate":
        return {"action": argparse.BooleanOptionalAction}
    if kind == "choice":
        return {"choices": field.metadata["choices"]}
    reads = {"int": {"type": int}, "float": {"type": float}, "text": {},
             "size": {"type": _image_size}, "fractions": {"type": _fractions},
             "shards": {"type": _num_shards}, "pixels": {"type": _pixels},
             "schema": {"type": _schema_entry, "action": _MergeDict},
             "fill": {"type": _fill_entry, "action": _FillMissing},
             "pairs": {"type": _key_value, "action": _MergeDict},
             "folders": {"action": _Folders},
             "names": {"type": _names}}
    return {"metavar": metavar, **reads[kind]}


def _names(value: str) -> list[str]:
    """NAME,NAME,...: the names (checked, and stripped, as the option is)."""
    return value.split(",")


def _key_value(value: str) -> dict:
    """KEY=VALUE, the value read as a Python literal where it is one (2, True, 0.5)."""
    key, sep, text = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return {key.strip().replace("-", "_"): literal(text)}


def literal(text: str):
    """`text` as a Python literal where it is one (2, True, 0.5, [1, 2]), else as text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _schema_entry(value: str) -> dict:
    """COLUMN=TYPE; the column name is kept as it is, the type checked by `convert`."""
    column, sep, kind = value.partition("=")
    if not sep or not column.strip() or not kind.strip():
        raise argparse.ArgumentTypeError(
            f"expected COLUMN=TYPE like color=CategoricalInput or notes=drop, not {value!r}")
    kind = kind.strip()
    return {column.strip(): None if kind.lower() == "drop" else kind}


def _fill_entry(value: str) -> tuple[str | None, object]:
    """(column, value) for COLUMN=VALUE, (None, value) for a VALUE for every column."""
    column, sep, text = value.partition("=")
    if sep and column.strip():
        return column.strip(), literal(text)
    return None, literal(value)


class _MergeDict(argparse.Action):
    """Collects repeated KEY=VALUE flags into one dict."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, {**(getattr(namespace, self.dest) or {}), **values})


class _FillMissing(argparse.Action):
    """One value for every column, or COLUMN=VALUE pairs collected into a dict."""

    def __call__(self, parser, namespace, values, option_string=None):
        column, value = values
        current = getattr(namespace, self.dest)
        pairs = isinstance(current, dict)
        if (pairs and column is None) or (not pairs and current is not None and column):
            parser.error(f"{option_string}: give one VALUE for every column, or COLUMN=VALUE "
                         "for each, not both")
        setattr(namespace, self.dest,
                value if column is None else {**(current or {}), column: value})


class _Folders(argparse.Action):
    """FOLDER once, or SPLIT=FOLDER for each split (a dict by split): a value whose part
    before "=" names no split is one folder (`a=b/`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        split, sep, folder = values.partition("=")
        by_split = bool(sep and folder) and split_named(split) is not None
        current = getattr(namespace, self.dest)
        if current is not None and not (by_split and isinstance(current, dict)):
            parser.error(f"{option_string}: give one FOLDER, or SPLIT=FOLDER for each split "
                         f"(train=train2017 validation=val2017), not both; not {values!r}")
        setattr(namespace, self.dest,
                {**(current or {}), split: folder} if by_split else values)


def _pixels(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of pixels: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


def _image_size(value: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", value)
    if not match:
        raise argparse.ArgumentTypeError(f"expected HEIGHTxWIDTH like 224x224, not {value!r}")
    return int(match[1]), int(match[2])


def _num_shards(value: str) -> int | dict[str, int]:
    try:
        if "=" not in value:
            return int(value)
        counts = {}
        for part in value.split(","):
            split, _, count = part.partition("=")
            counts[split.strip()] = int(count)
        return counts
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number or SPLIT=N pairs like train=8,validation=1, not {value!r}"
        ) from None


def _fractions(value: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected fractions like 0.8,0.1,0.1, not {value!r}") from None


# --- errors' advice as flags ---------------------------------------------------------------

_OPTION_FIELDS = {field.name: field for field in options.fields()}
# The positional arguments of convert() and migrate().
_ARGUMENTS = {"source": "SOURCE", "output_dir": "OUTPUT_DIR", "new_dir": "NEW"}


def as_flag(option: Option) -> str:
    """An option that an error's advice names (`errors.Option`), as the flags that set it:
    `schema={'notes': None}` is `--schema notes=drop`, `overwrite=True` is `--overwrite`."""
    if option.name in _ARGUMENTS:
        return _ARGUMENTS[option.name]
    field = _OPTION_FIELDS.get(option.name)
    if field is None:  # not an option of convert (a Python-only one): as Python
        return str(option)
    flag = flag_names(field)[0]
    if option.named_only:
        return flag
    kind, value = field.metadata["kind"], option.value
    if kind in ("switch", "tristate"):
        name = field.name.replace("_", "-")
        return f"--{name}" if value else f"--no-{name}"
    if kind in ("schema", "fill", "pairs", "folders") and isinstance(value, Mapping):
        return " ".join(f"{flag} {shlex.quote(f'{key}={_flag_value(kind, item)}')}"
                        for key, item in value.items())
    return f"{flag} {shlex.quote(_flag_value(kind, value))}"


def _flag_value(kind: str, value) -> str:
    """A value as a flag reads it back (see `_flag_kind`)."""
    if value is VALUE:
        return "VALUE"
    if value is None:
        return "drop" if kind == "schema" else "none"
    if kind == "size":
        return "x".join(map(str, value))
    if kind in ("fractions", "names"):
        return ",".join(map(str, value))
    if kind == "shards" and isinstance(value, Mapping):
        return ",".join(f"{split}={count}" for split, count in value.items())
    return value if isinstance(value, str) else repr(value)


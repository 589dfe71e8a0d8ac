"""The `tfrecorder` command: convert, info, verify and inspect from a shell.

A thin layer: it parses arguments, calls the public functions of `tfrecorder`, and prints
what they return. `convert`'s flags are generated from `tfrecorder.options`, so the command
cannot drift from `tfrecorder.convert`; and the advice in an error names options as
`errors.Option` parts, which this module renders as the same flags (`--schema notes=drop`
where Python reads `schema={'notes': None}`), never by rewording the message.

Exit codes: 0 success; 1 a user error (bad table, existing dataset, failed verification,
a store that cannot be reached), printed as one `tfrecorder: error: ...` line without a
traceback; 2 a usage error; 130 Ctrl-C. Any other exception is a bug and keeps its
traceback.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import io
import itertools
import json
import logging
import re
import shlex
import sys
import textwrap
import warnings
from collections.abc import Iterator, Mapping, Sequence
from inspect import Parameter, signature

import tfrecorder
from tfrecorder import fs, options
from tfrecorder._interrupt import PROG, interrupted
from tfrecorder.errors import VALUE, Option, Terminated, TFRecorderError, VerificationError
from tfrecorder.legacy.functions import check_tfrecords, create_tfrecords
from tfrecorder.manifest import (
    DEFAULT_LAYOUT,
    LABEL,
    SPLITS,
    Feature,
    Labels,
)
from tfrecorder.splits import split_named
from tfrecorder.wording import byte_unit, count, in_unit

# Errors whose message alone tells the user what to fix: printed on one line, exit 1.
# (TFRecorderError includes StorageError, ResumeError and DatasetExistsError.)
USER_ERRORS = (TFRecorderError, ValueError, FileNotFoundError, FileExistsError,
               NotADirectoryError)

# Every keyword option of `tfrecorder.convert` and its default; each has a flag below.
CONVERT_DEFAULTS = {
    name: parameter.default
    for name, parameter in signature(tfrecorder.convert).parameters.items()
    if parameter.kind is Parameter.KEYWORD_ONLY
}
_INSPECT_DEFAULTS = {name: parameter.default
                     for name, parameter in signature(tfrecorder.inspect).parameters.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line with `argv` (default: `sys.argv[1:]`); returns the exit code."""
    try:
        return _run(build_parser(),
                    *from_fire_flags(sys.argv[1:] if argv is None else list(argv)))
    except USER_ERRORS as error:
        print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
        return 1
    except Terminated as stop:
        print(f"{PROG}: stopped by signal {stop.signum}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:  # at any moment: while parsing too (see `_interrupt`)
        return interrupted()


def _run(parser: argparse.ArgumentParser, argv: list[str],
         spelled_as_2_0: tuple[str, str] | None) -> int:
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help and --version (0), usage errors (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    # The library reports through `logging` (e.g. how many rows were rejected).
    handler = logging.StreamHandler()
    handler.setFormatter(_LogLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    with warnings.catch_warnings():  # restores the caller's display (tests call main)
        warnings.showwarning = _show_warning
        if spelled_as_2_0 is None:
            return args.run(args)
        with _tfrecorder_2(*spelled_as_2_0):
            return args.run(args)


class _LogLine(logging.Formatter):
    """A log record as a line of the command line's own, `tfrecorder: warning: ...` as a
    warning prints, with the options among its arguments (`errors.Option`) as the flags
    that set them: `--resume` where Python's log reads `resume=True`."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.message}"

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.args, tuple) and any(isinstance(a, Option) for a in record.args):
            record = logging.makeLogRecord({**record.__dict__, "args": tuple(
                _as_flag(a) if isinstance(a, Option) else a for a in record.args)})
        return super().format(record)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line of the command line's own (`tfrecorder: warning: ...`), not
    Python's `file:line: Category: ...`: the user ran a command, not that file."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=textwrap.fill(
            "Turn images and their labels (an AutoML Vision CSV, a Parquet table, an image "
            "folder, a Vertex AI JSONL, COCO, Pascal VOC or YOLO dataset) into a sharded "
            "TFRecord dataset, and look at the result.", 80),
        epilog="examples:\n"
               "  tfrecorder convert images.csv out/\n"
               "  tfrecorder info out/\n"
               "  tfrecorder report out/ -o report.html\n"
               "  tfrecorder verify out/\n"
               "  tfrecorder inspect out/ --split validation\n"
               "  tfrecorder migrate tfrecorder-2.0-folder/ out/\n\n"
               "Run 'tfrecorder COMMAND --help' for a command's options.\n"
               "Exit codes: 0 success, 1 error, 2 bad usage, 130 interrupted.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {tfrecorder.__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    _add_convert(commands)
    _add_info(commands)
    _add_show(commands)
    _add_report(commands)
    _add_verify(commands)
    _add_inspect(commands)
    _add_migrate(commands)
    _add_tfrecorder_2(commands)
    return parser


def _command(commands, name: str, summary: str, description: str, example: str, run,
             *, reads_dataset: bool = True):
    """A subcommand that runs `run(args)`; one that reads a dataset takes its PATH."""
    command = commands.add_parser(
        name, help=summary, description=textwrap.fill(description, 80),
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.set_defaults(run=run)
    if reads_dataset:
        command.add_argument("path", metavar="PATH",
                             help="a dataset folder (local, gs:// or s3://)")
    return command


# --- convert -------------------------------------------------------------------------------

def _add_convert(commands) -> None:
    command = _command(
        commands, "convert",
        "convert a table, an image folder or a detection dataset into TFRecords",
        "Convert SOURCE into sharded TFRecords, rejected.csv and the dataset.json manifest "
        "in OUTPUT_DIR. A CSV holds AutoML Vision rows [split,]image_uri[,label...] with or "
        "without a header, or any columns under a header row; columns other than split, "
        "image_uri and label pass through as features, typed by --schema or by their "
        "values (a Parquet table's by their Parquet types). Relative image paths are "
        "relative to SOURCE's folder.",
        "tfrecorder convert images.csv out/ --image-size 224x224 --num-shards train=8\n"
        "  tfrecorder convert table.csv out/ --schema color=CategoricalInput "
        "--schema notes=drop --fill-missing age=0", _convert, reads_dataset=False,
    )
    command.add_argument("source", metavar="SOURCE", nargs="+", action=_Sources,
                         help=_SOURCE_HELP)
    command.add_argument("output_dir", metavar="OUTPUT_DIR",
                         help="the dataset folder to write (local, gs:// or s3://)")
    for group in options.GROUPS:
        summary = group.__doc__.split("\n\n")[0]  # the docstring's first paragraph
        arguments = command.add_argument_group(_GROUP_TITLES[group],
                                               textwrap.fill(" ".join(summary.split()), 78))
        exclusive = getattr(group, "exclusive", ())
        if exclusive:
            together = arguments.add_mutually_exclusive_group()
        for field in dataclasses.fields(group):
            adder = together if field.name in exclusive else arguments
            adder.add_argument(*_flag_names(field), dest=field.name, default=field.default,
                               help=_flag_help(field), **_flag_kind(field))


# What `convert` reads (one reader each in `tfrecorder.sources`), for SOURCE's help.
_SOURCE_HELP = (
    "what to convert (local, gs:// or s3://): a CSV file; a Parquet file or folder; a CSV "
    "or Parquet table with a boxes or mask_uri column (detection, segmentation); an image "
    "folder (label/file or split/label/file); an AutoML Vision or Vertex AI detection CSV; "
    "a Vertex AI JSONL import file; a COCO JSON file (boxes, masks or keypoints); a Pascal "
    "VOC XML file or folder (LabelImg, CVAT, VOCdevkit); a YOLO data.yaml or its folder; "
    "or several files as the splits of one dataset, each as SPLIT=PATH "
    "(train=instances_train.json validation=instances_val.json)")


class _Sources(argparse.Action):
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
    options.ImageOptions: "images", options.RejectOptions: "rejected rows",
    options.ShardOptions: "shards", options.OutputOptions: "output folder",
    options.RunOptions: "local run", options.BeamOptions: "Apache Beam",
}


def _flag_names(field: dataclasses.Field) -> list[str]:
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
    return {key.strip().replace("-", "_"): _literal(text)}


def _literal(text: str):
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
        return column.strip(), _literal(text)
    return None, _literal(value)


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


def _convert(args: argparse.Namespace) -> int:
    options = {name: getattr(args, name) for name in CONVERT_DEFAULTS}
    source = args.source if isinstance(args.source, str) else " ".join(
        f"{split}={path}" for split, path in args.source.items())
    _print_result(source, tfrecorder.convert(args.source, args.output_dir, **options))
    return 0


def _print_result(source: str, result) -> None:
    width = max(len("rejected"), *(len(split) for split in result.counts))
    print(f"Converted {source} into {result.output_dir} in "
          f"{result.elapsed_seconds:.1f} s: {count(result.num_records, 'record')}")
    for split, records in result.counts.items():
        print(f"  {split + ':':{width + 1}} {count(records, 'record')}")
    print(f"  {'rejected:':{width + 1}} {count(result.num_rejected, 'row')} "
          f"(see {result.rejected_path})")
    if result.skipped_annotations:
        print(f"  {'skipped:':{width + 1}} "
              f"{count(sum(result.skipped_annotations.values()), 'annotation')} ("
              + ", ".join(f"{n:,} {reason}" for reason, n in result.skipped_annotations.items())
              + ")")


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


# --- info ----------------------------------------------------------------------------------

def _add_info(commands) -> None:
    command = _command(
        commands, "info", "describe a dataset from its manifest",
        "Print what the manifest (dataset.json) of the dataset in PATH says: splits with "
        "their records, shards and sizes, records per class and split, image sizes, "
        "rejected rows by reason, images stored more than once and in more than one "
        "split, labels, compression, image options, and every feature's dtype, shape and "
        "role. Reads no shard.",
        "tfrecorder info out/", _info,
    )
    command.add_argument("--json", action="store_true",
                         help="print all of it as JSON, every class and reason included")


def _info(args: argparse.Namespace) -> int:
    found = tfrecorder.info(args.path)
    if args.json:
        print(json.dumps(found.to_json(), indent=2))
        return 0
    manifest = found.manifest
    print(f"{args.path}: a tfrecorder dataset (format {manifest.format_version}, "
          f"written by {manifest.created_by})")
    print("Splits:")
    rows = [(str(name), split.num_records, len(split.shards), split.num_bytes)
            for name, split in manifest.splits.items()]
    total = ("total", *(sum(row[i] for row in rows) for i in (1, 2, 3)))
    for name, records, shards, num_bytes in [*rows, total]:
        print(f"  {name:<11}{_counted(records, 8, 'record')} {_counted(shards, 5, 'shard')} "
              f"{_megabytes(num_bytes):>12}")
    _print_class_counts(found)
    _print_boxes(found)
    _print_image_statistics(found)
    rejected = manifest.rejected
    print(f"Rejected:     {rejected.num_rows:,} of "
          f"{count(manifest.num_source_rows, 'source row')} "
          f"(see {fs.join(args.path, rejected.file)})")
    for reason, rows in list(rejected.reasons.items())[:_REASONS_SHOWN]:
        print(f"  {rows:>8,}  {reason}")
    skipped = manifest.skipped_annotations
    if skipped is not None:
        print(f"Skipped:      {count(skipped.num_annotations, 'annotation')} "
              f"(see {fs.join(args.path, skipped.file)})")
        for reason, annotations in skipped.reasons.items():
            print(f"  {annotations:>8,}  {reason}")
    if not found.duplicates_checked:
        print("Duplicates:   not sought (written before tfrecorder sought them)")
    elif not found.duplicates:
        print("Duplicates:   none (no image is stored twice)")
    if found.warnings:
        print("Warnings:")
        for warning in found.warnings:
            print(textwrap.fill(warning, 88, initial_indent="  - ", subsequent_indent="    "))
    labels = manifest.labels
    print(f"Labels:       {_labels(labels, manifest.task)}")
    if manifest.task != "classification" or manifest.layout != DEFAULT_LAYOUT:
        print(f"Task:         {manifest.task}, in the {manifest.layout} layout")
    print(f"Compression:  {manifest.compression or 'none'}")
    images = (_image_options(manifest.options) if manifest.has_images
              else "none (the records hold no images)")
    print(f"Image format: {images}")
    print("Features:")
    rows = [(name, feature.dtype, _shape(feature.shape), _role(name, feature, labels))
            for name, feature in manifest.features.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  " + "  ".join(f"{cell:<{width}}" for cell, width in zip(row, widths))
              + f"  {row[3]}".rstrip())
    return 0


_REASONS_SHOWN = 5
_CLASSES_SHOWN = 50


def _print_class_counts(found: tfrecorder.DatasetInfo) -> None:
    """Records per class (rows) and split (columns): the commonest classes first."""
    counts = found.class_counts
    if not counts or not found.class_names:
        return
    splits = list(counts)
    totals = {name: sum(counts[split].get(name, 0) for split in splits)
              for name in found.class_names}
    shown = sorted(totals, key=lambda name: -totals[name])[:_CLASSES_SHOWN]
    width = max(len("(no label)" if found.unlabeled else "class"), *map(len, shown))
    print(f"{found.counted.capitalize()} per class:")
    print(f"  {'class':<{width}}" + "".join(f"{split:>12}" for split in splits))
    for name in shown:
        print(f"  {name:<{width}}" + "".join(f"{counts[split].get(name, 0):>12,}"
                                             for split in splits))
    if len(totals) > len(shown):
        print(f"  ... and {count(len(totals) - len(shown), 'more class', 'more classes')} "
              "(--json lists them all)")
    if found.unlabeled:
        print(f"  {'(no label)':<{width}}" + "".join(f"{found.unlabeled.get(split, 0):>12,}"
                                                   for split in splits))


def _print_boxes(found: tfrecorder.DatasetInfo) -> None:
    """Per split of a detection dataset: boxes, boxes per image, box sizes."""
    if not found.objects:
        return
    print("Boxes:")
    for split, objects in found.objects.items():
        per_image, size = objects.boxes_per_image, objects.box_size
        sizes = (f"; size (sqrt of the image's fraction) {size.min:.3f}-{size.max:.3f}, "
                 f"median {size.median:.3f}" if size is not None else "")
        print(f"  {split:<12}{_counted(objects.num_boxes, 10, 'box', 'boxes').rstrip()}; "
              f"{per_image.min:.0f}-{per_image.max:.0f} an image, median "
              f"{per_image.median:g}{sizes}; {count(objects.without_boxes, 'image')} without "
              f"boxes, {objects.tiny_boxes:,} tiny")


def _print_image_statistics(found: tfrecorder.DatasetInfo) -> None:
    """Per split: height and width ranges with medians, stored sizes, formats."""
    rows = [(split, s) for split, s in found.statistics.items() if s.image_height]
    if not rows:
        return
    print("Images:")
    for split, s in rows:
        height, width, size = s.image_height, s.image_width, s.image_bytes
        formats = ", ".join(f"{name} {n:,}" for name, n in s.image_formats.items())
        channels = ", ".join(f"{c}: {n:,}" for c, n in s.image_channels.items())
        unit, unit_name = byte_unit(size.max)
        print(f"  {split:<11}height {height.min:g}-{height.max:g} (median {height.median:g}),"
              f" width {width.min:g}-{width.max:g} (median {width.median:g}); "
              f"{in_unit(size.min, unit)}-{in_unit(size.max, unit)} {unit_name} (median "
              f"{in_unit(size.median, unit)} {unit_name}); {formats}; channels {channels}")


def _labels(labels: Labels | None, task: str = "classification") -> str:
    if labels is None:
        return "none"
    multi = ", multi-label" if labels.multi_label else ""
    if task == "detection":
        multi = ", one per object"
    if labels.vocabulary is None:
        classes = labels.num_classes
        return f"integer ids{multi}" + (f" (num_classes {classes})" if classes is not None
                                         else "")
    vocabulary = labels.vocabulary
    return f"{count(len(vocabulary), 'class', 'classes')}{multi}: {', '.join(vocabulary)}"


def _shape(shape: Sequence) -> str:
    """[], [None] or [None, 4]: the dimensions of one record's value (None: any length)."""
    return "[" + ", ".join("None" if size is None else str(size) for size in shape) + "]"


def _role(name: str, feature: Feature, labels: Labels | None) -> str:
    """The feature's role, with its vocabulary's size, and whether labels are multi-label."""
    notes = []
    if feature.vocabulary is not None:
        notes.append(f"categorical, {count(len(feature.vocabulary), 'value')}")
    if name == LABEL and labels:
        if labels.multi_label:
            notes.append("multi-label")
        if labels.vocabulary is not None:
            notes.append(count(len(labels.vocabulary), "class", "classes"))
        elif labels.num_classes is not None:
            notes.append(f"num_classes {labels.num_classes}")
    role = feature.role
    return f"{role} ({', '.join(notes)})" if notes else role


def _image_options(options: Mapping) -> str:
    described = options["image_format"]
    if options.get("image_size"):
        height, width = options["image_size"]
        described += f", resized to {height}x{width} (height x width)"
    if options.get("max_image_side"):
        described += f", longer side at most {options['max_image_side']} px"
    return described


# --- show and report -----------------------------------------------------------------------

def _add_show(commands) -> None:
    command = _command(
        commands, "show", "draw a contact sheet of a split's images",
        "Draw a grid of thumbnails of the dataset in PATH: one row per class, its first "
        "images in shard order, each captioned with its class and file name, and save it "
        "as a PNG. Reads only the records it shows.",
        "tfrecorder show out/ --split validation --per-class 4 -o sheet.png", _show,
    )
    command.add_argument("-o", "--output", default="sheet.png", metavar="FILE",
                         help="the PNG to write (default: %(default)s)")
    command.add_argument("--split", default="train", choices=SPLITS, type=str.lower,
                         help="the split to show (default: %(default)s)")
    command.add_argument("--per-class", type=int, default=8, metavar="N",
                         help="images per class (default: %(default)s)")
    command.add_argument("--thumbnail-size", type=int, default=128, metavar="PX",
                         help="the longer side of a thumbnail (default: %(default)s)")
    command.add_argument("--classes", type=lambda text: text.split(","), metavar="A,B,...",
                         help="only these classes, in this order")


def _show(args: argparse.Namespace) -> int:
    from tfrecorder.show import show

    sheet = show(args.path, args.split, args.per_class, thumbnail_size=args.thumbnail_size,
                 classes=args.classes)
    buffer = io.BytesIO()
    sheet.save(buffer, "PNG")
    fs.write_bytes(args.output, buffer.getvalue())
    print(f"{args.output}: {sheet.caption()}")
    return 0


def _add_report(commands) -> None:
    command = _command(
        commands, "report", "write a self-contained HTML report of a dataset",
        "Write one HTML file (images and charts inside it, nothing fetched from the "
        "network) describing the dataset in PATH: warnings, records per class and split, "
        "image and file sizes, thumbnails of each class, rejected rows with their "
        "reasons, duplicated images and leaks between splits, and the options it was "
        "written with.",
        "tfrecorder report out/ -o report.html", _report,
    )
    command.add_argument("-o", "--output", default="report.html", metavar="FILE",
                         help="the HTML file to write, local or in a bucket "
                              "(default: %(default)s)")
    command.add_argument("--per-class", type=int, default=8, metavar="N",
                         help="thumbnails per class (default: %(default)s)")


def _report(args: argparse.Namespace) -> int:
    from tfrecorder.report import report

    print(report(args.path, args.output, per_class=args.per_class))
    return 0


# --- verify --------------------------------------------------------------------------------

def _add_verify(commands) -> None:
    command = _command(
        commands, "verify", "check every shard of a dataset against its manifest",
        "Read every shard of the dataset in PATH and check it against its manifest, and "
        "(unless --no-decode) that every record parses with the manifest's features, its "
        "label and categorical ids are inside their vocabularies, its split is its "
        "shard's, and its image decodes. Prints 'OK: N records in M shards', or lists the "
        "problems and exits 1.",
        "tfrecorder verify out/ --no-decode", _verify,
    )
    command.add_argument("--no-decode", dest="decode_images", action="store_false",
                         help="skip parsing the records and decoding the images (much "
                              "faster)")
    command.add_argument("--no-progress", dest="progress", action="store_false",
                         help="hide the progress bar")


def _verify(args: argparse.Namespace) -> int:
    try:
        report = tfrecorder.verify(args.path, decode_images=args.decode_images,
                                   progress=args.progress)
        if not report.ok:  # verify raises instead; never print OK over a problem
            raise VerificationError("", report=report)
    except VerificationError as error:
        if error.report is None:
            raise
        # The library's message lists the first problems and advises in Python terms;
        # here every problem goes to stdout and the error line only sums them up.
        problems = error.report.problems
        print(f"FAILED: {count(len(problems), 'problem')} in {error.report.dataset_dir}")
        for problem in problems:
            print(f"  - {problem}")
        raise VerificationError(
            f"the dataset in {args.path!r} does not match its manifest "
            f"({count(len(problems), 'problem')}, listed above). Restore the files from "
            "a copy, or convert again with --overwrite.", report=error.report) from None
    checked = ""
    if args.decode_images:
        images = report.num_images_decoded
        checked = f" ({count(report.num_records_parsed, 'record')} parsed" + (
            f", {count(images, 'image')} decoded)" if images else ")")
    print(f"OK: {count(sum(report.num_records.values()), 'record')} in "
          f"{count(report.num_shards, 'shard')}{checked}")
    return 0


# --- inspect -------------------------------------------------------------------------------

def _add_inspect(commands) -> None:
    d = _INSPECT_DEFAULTS
    command = _command(
        commands, "inspect", "write a few records as files you can look at",
        "Write the first records of a split of the dataset in PATH as files a person can "
        "look at: their images, and their other features in records.csv (lists as JSON, "
        "label and categorical ids with their names). Prints the folder written.",
        "tfrecorder inspect out/ --split validation --num-records 3 --output-dir look/",
        _inspect,
    )
    command.add_argument("--split", default=d["split"], choices=SPLITS, type=str.lower,
                         help="the split to read (default: %(default)s)")
    command.add_argument("--num-records", type=int, default=d["num_records"], metavar="N",
                         help="how many records to write (default: %(default)s)")
    command.add_argument("--output-dir", default=d["output_dir"], metavar="DIR",
                         help="a local folder to write into (default: a new temporary "
                              "folder)")


def _inspect(args: argparse.Namespace) -> int:
    folder = tfrecorder.inspect(args.path, split=args.split, num_records=args.num_records,
                                output_dir=args.output_dir)
    print(folder)
    return 0


# --- migrate -------------------------------------------------------------------------------

def _add_migrate(commands) -> None:
    command = _command(
        commands, "migrate", "write a tfrecorder dataset from a TFRecorder 2.0 one",
        "Read every record of the TFRecorder 2.0 dataset in OLD (the folder holding "
        "transform_fn/) and write it into NEW as a tfrecorder dataset: the same pixels, "
        "label ids, vocabulary order, splits and shards; records 2.0 could not read back "
        "go to rejected.csv.",
        "tfrecorder migrate tfrecords/tfrecorder-20201005-161123-convert out/",
        _migrate, reads_dataset=False)
    command.add_argument("old_dir", metavar="OLD",
                         help="the TFRecorder 2.0 folder (local, gs:// or s3://)")
    command.add_argument("new_dir", metavar="NEW", help="the folder to write")
    command.add_argument("--overwrite", action="store_true",
                         help="replace a dataset already in NEW")


def _migrate(args: argparse.Namespace) -> int:
    from tfrecorder.legacy.migration import migrate

    manifest = migrate(args.old_dir, args.new_dir, overwrite=args.overwrite)
    print(f"Wrote {args.new_dir}: {count(manifest.num_records, 'record')}, "
          f"{count(manifest.rejected.num_rows, 'row')} rejected (see "
          f"{fs.join(args.new_dir, manifest.rejected.file)})")
    return 0


# --- TFRecorder 2.0's commands ------------------------------------------------------------

# 2.0's `create-tfrecords` flags (python-fire: `--name=value`, values read as literals).
_CREATE_FLAGS = ("header", "names", "runner", "project", "region", "tfrecorder_wheel",
                 "dataflow_options", "job_label", "compression", "num_shards")


def _add_tfrecorder_2(commands) -> None:
    """`create-tfrecords` and `check-tfrecords`, as TFRecorder 2.0's scripts call them."""
    create = _command(
        commands, "create-tfrecords", "TFRecorder 2.0's name for convert",
        "TFRecorder 2.0's command, kept for its scripts: converts --source into "
        "--output_dir (default ./tfrecords). Use 'tfrecorder convert SOURCE OUTPUT_DIR'.",
        "tfrecorder create-tfrecords --source=images.csv --output_dir=out/",
        _create_tfrecords, reads_dataset=False)
    create.add_argument("--source", required=True)
    create.add_argument("--output_dir", default=None)
    for name in _CREATE_FLAGS:
        create.add_argument(f"--{name}", type=_literal, default=argparse.SUPPRESS)
    check = _command(
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
    _print_result(args.source, result)
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


def from_fire_flags(argv: list[str]) -> tuple[list[str], tuple[str, str] | None]:
    """`convert --source=S --output_dir=O` as `convert S O`, `inspect --tfrecord_dir=P` as
    `inspect P`, and python-fire's `--num_shards` as `--num-shards`: TFRecorder 2.0's
    scripts spelled every argument as a flag. Returns the arguments argparse reads, and
    the 2.0 spelling with ours for the warning (None when nothing was 2.0's)."""
    command = argv[0] if argv else None
    if command not in _FIRE_ARGUMENTS:
        return argv, None
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
        return argv, None
    given = [values.get(name) for name in _FIRE_ARGUMENTS[command]]
    # An argument given as a flag goes where argparse reads it: leading ones first, a
    # trailing one (OUTPUT_DIR after a positional SOURCE) last.
    leading = list(itertools.takewhile(lambda value: value is not None, given))
    trailing = [value for value in given[len(leading):] if value is not None]
    spelled = " ".join([command, *found])
    return ([command, *leading, *rest, *trailing],
            (spelled, " ".join([command, _ARGUMENT_NAMES[command], *instead])))


def _dashed_flags(command: str) -> dict[str, str]:
    """The command's flags in python-fire's spelling (`--num_shards`), with ours."""
    if command == "inspect":
        names = ["--num-records", "--output-dir"]
    else:
        names = [name for field in options.fields() for name in _flag_names(field)]
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


# --- formatting ----------------------------------------------------------------------------

def _counted(number: int, width: int, singular: str, plural: str | None = None) -> str:
    """`count` for a column: the number right-aligned in `width`, the noun padded to its
    plural's length, so that "1 record" lines up with "16 records"."""
    amount, _, noun = count(number, singular, plural).partition(" ")
    return f"{amount:>{width}} {noun:<{len(plural or singular + 's')}}"


def _megabytes(num_bytes: int) -> str:
    return f"{num_bytes / 2**20:,.2f} MB"


def _one_line(error: BaseException) -> str:
    """The message on one line, so `tfrecorder: error:` starts the only line printed; the
    options its advice names are given as this command's flags."""
    text = error.render(_as_flag) if isinstance(error, TFRecorderError) else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines) or type(error).__name__


# --- errors' advice as flags ---------------------------------------------------------------

_OPTION_FIELDS = {field.name: field for field in options.fields()}
# The positional arguments of convert() and migrate().
_ARGUMENTS = {"source": "SOURCE", "output_dir": "OUTPUT_DIR", "new_dir": "NEW"}


def _as_flag(option: Option) -> str:
    """An option that an error's advice names (`errors.Option`), as the flags that set it:
    `schema={'notes': None}` is `--schema notes=drop`, `overwrite=True` is `--overwrite`."""
    if option.name in _ARGUMENTS:
        return _ARGUMENTS[option.name]
    field = _OPTION_FIELDS.get(option.name)
    if field is None:  # not an option of convert (a Python-only one): as Python
        return str(option)
    flag = _flag_names(field)[0]
    if option.named_only:
        return flag
    kind, value = field.metadata["kind"], option.value
    if kind in ("switch", "tristate"):
        name = field.name.replace("_", "-")
        return f"--{name}" if value else f"--no-{name}"
    if kind in ("schema", "fill", "pairs") and isinstance(value, Mapping):
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

"""The `tfrecorder` command: convert, info, verify and inspect from a shell.

A thin layer: it parses arguments, calls the public functions of `tfrecorder`, and prints
what they return. `convert`'s flags are generated from `tfrecorder.options`, so the command
cannot drift from `tfrecorder.convert`; and the advice in an error names options as
`errors.Option` parts, which are printed as the same flags (`--schema notes=drop` where
Python reads `schema={'notes': None}`), never by rewording the message. The flags, both
ways, are built in `cli_arguments`; TFRecorder 2.0's commands and flags are added by
`legacy.cli`'s two hooks.

Exit codes: 0 success; 1 a user error (bad table, existing dataset, failed verification,
a store that cannot be reached), printed as one `tfrecorder: error: ...` line without a
traceback; 2 a usage error; 130 Ctrl-C; 141 stdout closed (`| head -1`, see `__main__`),
quietly. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import textwrap
import warnings
from collections.abc import Mapping, Sequence
from inspect import Parameter, signature

import tfrecorder
from tfrecorder._interrupt import PROG, interrupted
from tfrecorder.cli_arguments import GIVEN, SOURCE_HELP, Sources, add_option_flags
from tfrecorder.cli_arguments import as_flag as _as_flag
from tfrecorder.cli_arguments import command as _command
from tfrecorder.errors import Option, Terminated, TFRecorderError, VerificationError
from tfrecorder.format.manifest import (
    DEFAULT_LAYOUT,
    LABEL,
    SPLITS,
    Feature,
    Labels,
)
from tfrecorder.legacy.cli import add_commands as add_tfrecorder_2_commands
from tfrecorder.legacy.cli import from_fire_flags
from tfrecorder.read.info import duration
from tfrecorder.storage import fs
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
         spelled_as_2_0: contextlib.AbstractContextManager) -> int:
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
        with spelled_as_2_0:  # TFRecorder 2.0's flags: one warning naming ours
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
    add_tfrecorder_2_commands(commands, _print_result)
    return parser


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
    command.add_argument("source", metavar="SOURCE", nargs="+", action=Sources,
                         help=SOURCE_HELP)
    command.add_argument("output_dir", metavar="OUTPUT_DIR",
                         help="the dataset folder to write (local, gs:// or s3://)")
    add_option_flags(command)


def _convert(args: argparse.Namespace) -> int:
    # The options given, not their defaults: a preset refuses only what was given.
    given = getattr(args, GIVEN, set())
    options = {name: getattr(args, name) for name in CONVERT_DEFAULTS if name in given}
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
    _print_clips(found)
    _print_class_counts(found)
    _print_boxes(found)
    _print_image_statistics(found)
    rejected = manifest.rejected
    print(f"Rejected:     {rejected.num_rows:,} of "
          f"{count(manifest.num_source_rows, 'source row')} "
          f"(see {fs.join(args.path, rejected.file)})")
    for reason, rows in list(rejected.reasons.items())[:_REASONS_SHOWN]:
        print(f"  {rows:>8,}  {reason}")
    for split, turned in found.orientation.items():
        print(f"Oriented:     {split}: " + ", ".join(
            f"{n:,} {name.replace('_', ' ')}" for name, n in turned.items())
            + " (EXIF orientation)")
    skipped = manifest.skipped_annotations
    if skipped is not None:
        print(f"Skipped:      {count(skipped.num_annotations, 'annotation')} "
              f"(see {fs.join(args.path, skipped.file)})")
        for reason, annotations in skipped.reasons.items():
            print(f"  {annotations:>8,}  {reason}")
    _print_objects(found)
    if not found.duplicates_checked:
        print("Duplicates:   " + ("not sought for clips" if manifest.media is not None else
                                  "not sought (written before tfrecorder sought them)"))
    elif not found.duplicates:
        print("Duplicates:   none (no image is stored twice)")
    if found.warnings:
        print("Warnings:")
        for warning in found.warnings:
            print(textwrap.fill(warning, 88, initial_indent="  - ", subsequent_indent="    "))
    labels = manifest.labels
    print(f"Labels:       {_labels(labels, manifest.task)}")
    if found.label_map_ids:
        print("Label map:    " + ", ".join(f"{id_} {name}"
                                          for name, id_ in found.label_map_ids.items()))
    if manifest.task != "classification" or manifest.layout != DEFAULT_LAYOUT:
        print(f"Task:         {manifest.task}, in the {manifest.layout} layout")
    print(f"Compression:  {manifest.compression or 'none'}")
    if manifest.media is not None:
        print(f"Media:        {manifest.media.kind}, stored as "
              f"{_STORED[manifest.media.stored]} (SequenceExamples, MediaSequence keys)")
    else:
        images = (_image_options(manifest.options) if manifest.has_images
                  else "none (the records hold no images)")
        print(f"Image format: {images}")
    rows = [(name, feature.dtype, _shape(feature.shape), _role(name, feature, labels))
            for name, feature in manifest.features.items()]
    if not rows:  # a clip's keys are MediaSequence's (docs), not manifest features
        return 0
    print("Features:")
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  " + "  ".join(f"{cell:<{width}}" for cell, width in zip(row, widths))
              + f"  {row[3]}".rstrip())
    return 0


_REASONS_SHOWN = 5
_CLASSES_SHOWN = 50
_STORED = {"frames": "JPEG frames", "waveform": "float32 waveforms",
           "encoded_media": "the source files' bytes"}


def _print_clips(found: tfrecorder.DatasetInfo) -> None:
    """Per split of a video or audio dataset: clips, frames, seconds."""
    if not found.media:
        return
    print("Clips:")
    for split, counts in found.media.items():
        frames = (f" {_counted(counts['frames'], 10, 'frame')}" if found.media_kind == "video"
                  else "")
        print(f"  {split:<11}{_counted(counts['clips'], 8, 'clip')}{frames} "
              f"{duration(counts['seconds']):>14}")


def _print_objects(found: tfrecorder.DatasetInfo) -> None:
    """What became of a detection source's objects: every one is written or listed."""
    counts = found.annotations
    if counts is None:
        return
    print(f"Objects:      {counts.objects:,} in the source: {counts.written:,} written, "
          f"{counts.skipped:,} skipped, {counts.in_rejected_images:,} in rejected images")
    for number, what in ((counts.clipped, "clipped to the image's edge"),
                         (counts.without_mask, "without a mask"),
                         (counts.unannotated_images, "without an annotation file")):
        if number:
            noun = "images" if what.startswith("without an") else "objects"
            print(f"  {number:>8,}  {noun if number > 1 else noun[:-1]} {what}")


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
    clips = found.manifest.media is not None  # a clip's frames: its size, its bytes
    print("Frames:" if clips else "Images:")
    for split, s in rows:
        height, width, size = s.image_height, s.image_width, s.image_bytes
        formats = ", ".join(f"{name} {n:,}" for name, n in s.image_formats.items())
        channels = ", ".join(f"{c}: {n:,}" for c, n in s.image_channels.items())
        unit, unit_name = byte_unit(size.max)
        print(f"  {split:<11}height {height.min:g}-{height.max:g} (median {height.median:g}),"
              f" width {width.min:g}-{width.max:g} (median {width.median:g}); "
              f"{in_unit(size.min, unit)}-{in_unit(size.max, unit)} {unit_name} (median "
              f"{in_unit(size.median, unit)} {unit_name})" + (
                  " a clip" if clips else f"; {formats}; channels {channels}"))


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
    from tfrecorder.read.show import show

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
    from tfrecorder.read.report import report

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
            f", {count(images, report.decoded)} decoded)" if images else ")")
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

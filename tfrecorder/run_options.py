"""The options of how a conversion runs, not of what it writes: what becomes of a dataset
already in the output folder, the local engine's workers and progress bar, and running
the plan as an Apache Beam pipeline.

Apart from `options`' other groups because none of these changes a byte of the dataset:
the manifest records none of them (`ConvertOptions.recorded`). `convert` takes them,
and the command line gives them flags, with the other groups (`options.GROUPS`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from tfrecorder.errors import Option, OptionError
from tfrecorder.option_checks import Checked, option


@dataclass(frozen=True)
class OutputOptions(Checked):
    """What to do with what is already in the output folder."""

    overwrite: bool = option(
        False, "replace a dataset already in output_dir. A run holds a lock on output_dir "
        "throughout: a second run into it fails at once, naming the first.", "switch",
        help="replace a dataset already in OUTPUT_DIR")
    resume: bool = option(
        False, "continue a run that was interrupted (Ctrl-C, killed, a lost machine): keep "
        "the shards it committed, after checking every record, and write the rest; the "
        "dataset is the same, byte for byte, as an uninterrupted run's. A run with another "
        "table or other options is refused. A resumable run that is interrupted keeps its "
        "committed shards (without resume, it deletes them).", "switch",
        help="continue an interrupted run into OUTPUT_DIR: keep the shards it finished "
             "(after checking them) and write the rest")

    exclusive = ("overwrite", "resume")  # the command line offers one or the other

    def __post_init__(self):
        self._bool("overwrite")
        self._bool("resume")
        if self.resume and self.overwrite:
            raise OptionError(
                Option("resume", True), " continues an interrupted run and ",
                Option("overwrite", True), " replaces it: pass one of them.",
                option="resume")


@dataclass(frozen=True)
class RunOptions(Checked):
    """How the local engine runs."""

    num_workers: int | None = option(
        None, "worker processes (default: all cores; 1 runs in this process).", "int",
        metavar="N", help="worker processes (default: all cores)")
    progress: bool = option(True, "show a progress bar.", "switch",
                            help="hide the progress bar")

    def __post_init__(self):
        self._int("num_workers", "a positive int or None", minimum=1)
        self._bool("progress")


@dataclass(frozen=True)
class BeamOptions(Checked):
    """Running the plan as an Apache Beam pipeline instead of the local engine."""

    runner: str | None = option(
        None, "None writes with the local process pool; an Apache Beam runner name "
        "(\"DirectRunner\", \"DataflowRunner\", ...) runs the same plan as a Beam pipeline "
        "and gives the same shards.", "text", metavar="NAME",
        help="run as an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, "
             "...) instead of the local process pool")
    beam_options: Mapping | None = option(
        None, "Beam pipeline options for runner, e.g. {\"machine_type\": \"n2-standard-4\", "
        "\"max_num_workers\": 20, \"direct_running_mode\": \"multi_processing\"}; Dataflow "
        "options pass through.", "pairs", metavar="KEY=VALUE", flag="--beam-option",
        help="a Beam pipeline option for --runner, e.g. temp_location=gs://bucket/tmp "
             "(repeatable)")
    project: str | None = option(None, "Google Cloud project, for DataflowRunner.", "text")
    region: str | None = option(None, "Google Cloud region, for DataflowRunner.", "text")
    temp_location: str | None = option(
        None, "for DataflowRunner: gs://, where the job stages its input and temporary "
        "files.", "text", metavar="GS_URI",
        help="gs:// folder for the job's staged input and temporary files")
    tfrecorder_wheel: str | os.PathLike | None = option(
        None, "a tfrecorder wheel (or sdist) for a Beam runner's workers to install. By "
        "default tfrecorder builds one from the package this process runs (declaring only "
        "what workers need: no TensorFlow) and stages it, unless beam_options ship the "
        "code already (extra_packages with a tfrecorder package, setup_file or "
        "sdk_container_image).", "text", metavar="PATH",
        help="a tfrecorder wheel for remote Beam workers to install (default: one is built "
             "from this installation and staged)")
    wait: bool | None = option(
        None, "wait for a Beam job to finish; default True, but False for DataflowRunner, "
        "which then returns the job id and console URL at once (the job writes the "
        "manifest itself when it is done).", "tristate",
        help="wait for a Beam job to finish (default: yes, but not for DataflowRunner, "
             "which prints the job's id and console URL)")

    def __post_init__(self):
        self._require("runner", self.runner is None or isinstance(self.runner, str),
                      "a Beam runner's name")
        self._require("beam_options", self.beam_options is None
                      or isinstance(self.beam_options, Mapping), "a dict of Beam options")
        self._require("tfrecorder_wheel", self.tfrecorder_wheel is None
                      or isinstance(self.tfrecorder_wheel, (str, os.PathLike)),
                      "a path to a wheel")
        self._bool("wait", optional=True)

    @property
    def waits(self) -> bool:
        return self.wait if self.wait is not None else self.runner != "DataflowRunner"

    def pipeline_options(self) -> dict:
        """`beam_options` with the Dataflow options and the wheel given on their own."""
        found = {**(self.beam_options or {}), **{
            name: value for name, value in (("project", self.project), ("region", self.region),
                                            ("temp_location", self.temp_location))
            if value is not None}}
        if self.tfrecorder_wheel is not None:
            found["extra_packages"] = [*(found.get("extra_packages") or []),
                                       os.fspath(self.tfrecorder_wheel)]
        return found

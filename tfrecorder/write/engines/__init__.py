"""The engines: the same plan executed by a local process pool or by Apache Beam.

Both follow one protocol (`Engine`): they check what they need before any work starts,
then write every shard of the plan into the run's output folder and return the same
`finish.Written`, which `finish.finish` turns into the dataset. Engines only move rows
to workers and bytes to files; what a record holds is `records`' business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tfrecorder.errors import MissingExtraError

if TYPE_CHECKING:
    from tfrecorder.format.manifest import Manifest
    from tfrecorder.options import ConvertOptions
    from tfrecorder.sources.table import Table
    from tfrecorder.write.finish import RejectionLimit, Written
    from tfrecorder.write.output import OutputFolder
    from tfrecorder.write.plan import Plan
    from tfrecorder.write.resume import Journal


@dataclass(frozen=True)
class EngineRun:
    """What an engine did: `written`, or None for a job that runs on after the driver
    returns and finishes the dataset itself."""

    written: Written | None
    job_id: str | None = None
    pipeline: object = None  # Beam's PipelineResult (for a dry run, `.job` is the job)


class Engine(Protocol):
    def check(self, output_dir: str, table: Table) -> None:
        """Refuses, before any image is read, what this engine could not do."""

    def write(self, plan: Plan, table: Table, folder: OutputFolder, *, header: Manifest,
              journal: Journal, limit: RejectionLimit) -> EngineRun:
        """Writes every shard of `plan` (keeping those the journal holds as committed),
        stopping as soon as `limit` is exceeded."""


def engine_for(options: ConvertOptions) -> Engine:
    """The local engine, or the Beam engine when a runner is asked for (it imports Beam:
    only then)."""
    if options.beam.runner is None:
        from tfrecorder.write.engines.local import LocalEngine

        return LocalEngine(options)
    try:
        from tfrecorder.write.engines.beam import BeamEngine
    except ImportError as error:
        if error.name is None or not error.name.startswith("apache_beam"):
            raise
        raise MissingExtraError("runner= needs Apache Beam, which is not installed: pip "
                                "install 'tfrecorder[beam]' (or apache-beam).", extra="beam",
                                package="apache_beam") from None
    return BeamEngine(options)

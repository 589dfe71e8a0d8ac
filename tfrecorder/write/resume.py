"""The run journal: what a conversion has committed, so that a killed run can continue.

Before its first shard, every run writes `resume.json` into the output folder: the
manifest header it is going to write and a digest of its table and plan. After each
shard is committed, a receipt `<shard>.receipt.json` records its counts, its size and the
rows it rejected. The manifest is still written last, so a folder with a journal and no
`dataset.json` is an interrupted run, never a dataset.

`convert(resume=True)` compares the new run with the journal: the same header and digest
keep every shard whose receipt matches and whose records all check out, and write the
rest, which gives the bytes of an uninterrupted run. Anything else is refused with what
differs. The journal is deleted once the manifest is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, ResumeError
from tfrecorder.format.manifest import FORMAT_VERSION, RECEIPT_SUFFIX, RUN_STATE
from tfrecorder.format.tfrecord import CorruptRecordError, file_sha256, open_read, read_records
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs
from tfrecorder.write.finish import WrittenShard
from tfrecorder.write.plan import Plan
from tfrecorder.write.rows import Rejection
from tfrecorder.write.statistics import ShardFacts

if TYPE_CHECKING:
    from tfrecorder.write.output import OutputFolder

logger = logging.getLogger(__name__)

STATE = RUN_STATE


def receipt_name(shard_filename: str) -> str:
    return shard_filename + RECEIPT_SUFFIX


@dataclass
class Journal:
    """This run's journal. `committed`: shard file name -> (the shard, its rejections),
    for shards already written (kept from an interrupted run, or committed by this one).
    Deleting a stopped run's files is `OutputFolder.clean_up`'s job."""

    folder: OutputFolder
    digest: str
    resumable: bool  # keep committed shards when stopped, for a later resume
    committed: dict[str, tuple[WrittenShard, list[Rejection]]] = field(default_factory=dict)
    # Whether shards are committed at all: a job that plans its table (`beam_files`)
    # cannot be resumed, and its workers must not keep each shard's facts.
    receipts: bool = True

    def begin(self, header: dict) -> None:
        """Writes the run's fingerprint, before the first shard."""
        self._write(STATE, {"digest": self.digest, "header": header})

    def commit(self, shard: WrittenShard, rejections: list[Rejection]) -> None:
        """Records a committed shard (after its file is in place)."""
        if not self.receipts:
            return
        self.committed[shard.filename] = (shard, list(rejections))
        receipt = {"digest": self.digest,
                   "shard": asdict(replace(shard, facts=None)),
                   "rejections": [list(r) for r in rejections],
                   "facts": shard.facts.to_json() if shard.facts is not None else None}
        self._write(receipt_name(shard.filename), receipt)

    @property
    def run_id(self) -> str:
        return self.folder.run_id

    def close(self, shard_names: list[str]) -> None:
        """Deletes the journal once the manifest is written."""
        names = [*map(receipt_name, shard_names), STATE]
        fs.delete([self.folder.uri(name) for name in names])

    def _write(self, name: str, content: dict) -> None:
        self.folder.write_bytes(name, json.dumps(content).encode())


def table_digest(plan: Plan, table: Table) -> str:
    """A digest of every planned row: the table's columns and cells as validated (by
    their 64-bit words, `Table.value_hashes`), every row's split, the index and each
    shard's rows; the same in every run and version (about a second for 10M rows)."""
    digest = hashlib.sha256()
    rows = table.rows
    for name in rows.columns:
        digest.update(f"\0{name}:{rows[name].dtype}\0".encode())
    digest.update(table.value_hashes.tobytes())
    codes, splits = pd.factorize(rows["split"])
    digest.update("\0".join(map(str, splits)).encode())
    digest.update(codes.astype(np.int64).tobytes())
    index = rows.index
    digest.update(repr((index.start, index.stop, index.step)).encode()
                  if isinstance(index, pd.RangeIndex) else
                  pickle.dumps(index.tolist(), protocol=4))
    for shard in plan.shards:
        digest.update(shard.filename.encode())
        digest.update(np.asarray(shard.positions, dtype=np.int64).tobytes())
    return digest.hexdigest()


def open_journal(folder: OutputFolder, header: dict, plan: Plan, table: Table, *,
                 resume: bool) -> Journal:
    """This run's journal. With `resume`, the interrupted run's journal among the
    folder's files is checked against this run, and the shards it committed that still
    check out are kept. Writes nothing: see `Journal.begin`."""
    journal = Journal(folder, table_digest(plan, table), resumable=resume)
    if resume and folder.existing:
        _resume(journal, header, plan, folder.existing)
    return journal


def _resume(journal: Journal, header: dict, plan: Plan, existing: list[str]) -> None:
    output_dir = journal.folder.path
    if STATE not in existing:
        raise ResumeError(
            f"{output_dir!r} holds files of an incomplete dataset but no {STATE}, so "
            "there is nothing to resume. Pass ", Option("overwrite", True),
            " to start again.", option="resume")
    state = json.loads(fs.read_bytes(fs.join(output_dir, STATE)))
    _check_format(output_dir, state["header"])
    differences = _differences(state["header"], header)
    if not differences and state["digest"] != journal.digest:
        differences = ["the table's rows (or their order) differ from the interrupted run's"]
    if differences:
        raise ResumeError(
            f"cannot resume the run in {output_dir!r}: it was started with other inputs "
            f"({'; '.join(differences)}). Rerun with the same table and options, or pass ",
            Option("overwrite", True), " (without ", Option("resume"), ") to start again.",
            option="resume")
    shards = {s.filename: s for s in plan.shards}
    for name in existing:
        if not name.endswith(RECEIPT_SUFFIX):
            continue
        shard_name = name[: -len(RECEIPT_SUFFIX)]
        receipt = json.loads(fs.read_bytes(fs.join(output_dir, name)))
        facts = receipt.get("facts")
        written = WrittenShard(**{**receipt["shard"], "facts": (
            ShardFacts.from_json(facts) if facts is not None else None)})
        problem = (_check(output_dir, written, plan.compression)
                   if receipt["digest"] == journal.digest and shard_name in shards
                   and shard_name in existing else "its receipt is for another run")
        if problem:
            logger.warning("Resume: writing %s again (%s).", shard_name, problem)
            fs.delete([fs.join(output_dir, name)])
            continue
        journal.committed[shard_name] = (written, [Rejection(*r) for r in receipt["rejections"]])
    logger.info("Resuming in %s: %d of %d shards were committed and check out.", output_dir,
                len(journal.committed), len(plan.shards))


def _check_format(output_dir: str, header: dict) -> None:
    """Refuses a journal of a version that planned another order of records (format 1
    drew a permutation; format 2 sorts by a seeded hash): its shards are not this run's."""
    version = header.get("format_version")
    if version == FORMAT_VERSION:
        return
    raise ResumeError(
        f"cannot resume the run in {output_dir!r}: it was started by "
        f"{header.get('created_by') or 'an older tfrecorder'}, which writes format "
        f"{version} (records in another order), and this version writes format "
        f"{FORMAT_VERSION}. Its shards cannot be continued: pass ", Option("overwrite", True),
        " (without ", Option("resume"), ") to convert again, or resume it with the version "
        "that started it.", option="resume")


def _differences(before: dict, now: dict) -> list[str]:
    """What differs between two manifest headers, option by option."""
    found = []
    options_before, options_now = before.get("options", {}), now.get("options", {})
    for name in sorted(set(options_before) | set(options_now)):
        if options_before.get(name) != options_now.get(name):
            found.append(f"{name} was {options_before.get(name)!r}, now "
                         f"{options_now.get(name)!r}")
    for name in sorted(set(before) | set(now)):
        if name != "options" and before.get(name) != now.get(name):
            found.append(f"the {name.replace('_', ' ')} differ" if name != "created_by" else
                         f"written by {before.get(name)}, now {now.get(name)}")
    return found


def _check(output_dir: str, shard: WrittenShard, compression: str | None) -> str | None:
    """Why a committed shard cannot be kept, or None: its size and SHA-256 must match
    the receipt (receipts without one: every record's checksum and the count)."""
    path = fs.join(output_dir, shard.filename)
    try:
        size = fs.size(path)
        if size != shard.num_bytes:
            return f"{size} bytes, the receipt says {shard.num_bytes}"
        if shard.sha256:
            found = file_sha256(path)
            return None if found == shard.sha256 else (
                f"its SHA-256 is {found[:12]}..., the receipt says {shard.sha256[:12]}...")
        with open_read(path, compression) as file:
            count = sum(1 for _ in read_records(file))
    except (OSError, EOFError, CorruptRecordError) as error:
        return f"it cannot be read back: {error}"
    if count != shard.num_records:
        return f"{count} records, the receipt says {shard.num_records}"
    return None

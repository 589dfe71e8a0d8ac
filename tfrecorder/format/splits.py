"""The split vocabulary, in one place: the three splits a dataset has (`Split`), the
UNASSIGNED rows whose split the plan draws, and every spelling a user may name one by.

Every entry point reads a split name through `split_named`, so they all accept the same
spellings, in any case and with whitespace around them: a CSV or DataFrame cell, the
`split=` option, the keys of a dict of splits, an image folder's first level, the keys
of `num_shards={...}`, and `load(split=...)`. Besides the names themselves, the
spellings of published datasets are taken: `training`, `valid`, `val`, `dev` and
`testing` (a `val/` folder beside `train/` is the validation split, never a class).
"""

from __future__ import annotations

import enum
from typing import Final


class Split(enum.StrEnum):
    """A split of the dataset. Its value names it in the manifest, in file names and in
    `load` ("train"); AutoML tables and the records' `split` feature spell it in capitals
    (`stored`), as TFRecorder did."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"

    @property
    def stored(self) -> str:
        """The split as records store it: "TRAIN"."""
        return self.name

    def __repr__(self) -> str:
        """'train', as a user types it: in messages, argparse's choices and the keys of
        `load()`'s dict, where the enum's `<Split.TRAIN: 'train'>` would show."""
        return repr(self.value)

    @classmethod
    def _missing_(cls, value):
        """Any spelling of `SPELLINGS` names it too: "TRAIN", "val"."""
        found = split_named(value) if isinstance(value, str) else None
        return found if isinstance(found, Split) else None


SPLITS: Final = tuple(Split)  # in writing order
UNASSIGNED: Final = "unassigned"  # a row whose split the plan draws (not a `Split`)

# Every spelling of a split, in lower case, and what it names.
SPELLINGS: Final[dict[str, Split | str]] = {
    "train": Split.TRAIN, "training": Split.TRAIN,
    "validation": Split.VALIDATION, "valid": Split.VALIDATION, "val": Split.VALIDATION,
    "dev": Split.VALIDATION,
    "test": Split.TEST, "testing": Split.TEST,
    "unassigned": UNASSIGNED,
}


def split_named(name: str) -> Split | str | None:
    """The `Split` (or UNASSIGNED) that `name` spells, in any case; None for a name that
    spells none. A blank is no name here: only a table's cell means UNASSIGNED by it."""
    return SPELLINGS.get(name.strip().lower())


def spellings_text() -> str:
    """The spellings, for an error message: "TRAIN, VALIDATION, TEST or UNASSIGNED (any
    case; also TRAINING, ...)"."""
    names = [split.name for split in SPLITS] + [UNASSIGNED.upper()]
    others = [s.upper() for s in SPELLINGS if s.upper() not in names]
    return (f"{', '.join(names[:-1])} or {names[-1]} (any case; also "
            f"{', '.join(others[:-1])} or {others[-1]})")

"""The few exceptions tfrecorder raises on purpose, and the data they carry.

Each names what is wrong (column, value, rows) and ends with how to fix it, so the
message alone is enough to act on. The advice names options as `Option` parts, not as
prose: `str()` renders them as Python (`schema={'notes': None}`) and the command line
renders the same parts as flags (`--schema notes=drop`), so no one parses a message.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


class _Placeholder:
    """A value that stands for another: one the user fills in (`VALUE`, shown as
    `fill_missing={'age': value}`), or none given (an option named alone). Pickled by
    name, so it is still itself in the process an error reaches."""

    def __init__(self, name: str, shown: str):
        self.name, self.shown = name, shown

    def __repr__(self) -> str:
        return self.shown

    def __reduce__(self) -> str:
        return self.name


VALUE = _Placeholder("VALUE", "value")
_NAME_ONLY = _Placeholder("_NAME_ONLY", "")


@dataclass(frozen=True)
class Option:
    """An option in an error's advice: its name alone (`max_rejected`) or set to a value
    (`max_rejected=1.0`); for a per-column option, `value` is a dict by column."""

    name: str
    value: Any = _NAME_ONLY

    @property
    def named_only(self) -> bool:
        return self.value is _NAME_ONLY

    def __str__(self) -> str:
        return self.name if self.named_only else f"{self.name}={self.value!r}"


class TFRecorderError(Exception):
    """Base class of every error raised on purpose by tfrecorder.

    Built from parts, text and `Option`s; data about the problem goes with it as
    attributes: `column` (the column at fault), `rows` (index labels of the rows at
    fault), `option` (the option at fault) and `fix` (the options the advice names).
    """

    column: str | None = None
    rows: Sequence | None = None
    option: str | None = None

    def __init__(self, *parts: str | Option, column: str | None = None,
                 rows: Sequence | None = None, option: str | None = None):
        self.parts = parts
        super().__init__("".join(map(str, parts)))
        self.column, self.rows, self.option = column, rows, option

    @property
    def fix(self) -> tuple[Option, ...]:
        return tuple(part for part in self.parts if isinstance(part, Option))

    def render(self, option: Callable[[Option], str]) -> str:
        """The message with each `Option` rendered by `option` (the CLI's flags)."""
        return "".join(part if isinstance(part, str) else option(part)
                       for part in self.parts)

    def __reduce__(self):
        # Keeps parts and data across processes (a Beam worker's error reaches the driver).
        return _rebuild, (type(self), self.__dict__)


def _rebuild(cls: type, state: dict) -> TFRecorderError:
    error = cls.__new__(cls)
    Exception.__init__(error, "".join(map(str, state.get("parts", ()))))
    error.__dict__.update(state)
    return error


class SchemaError(TFRecorderError, ValueError):
    """The input table is not usable: a column is missing or holds bad values."""


class SourceNotFoundError(SchemaError, FileNotFoundError):
    """Nothing is at the source's path: a FileNotFoundError, and a ValueError as
    TFRecorder 2.0 raised for a source it could not read."""


class OptionError(TFRecorderError, ValueError):
    """An option of `convert` (or `load`, `verify`, `inspect`) has a value it cannot take;
    `.option` names it."""


class ImageError(TFRecorderError, ValueError):
    """An image could not be read or decoded and `on_error="raise"` was asked for."""


class DatasetExistsError(TFRecorderError, FileExistsError):
    """The output folder already holds a dataset and `overwrite` was not set."""


class ConversionAborted(TFRecorderError, RuntimeError):
    """The conversion stopped before finishing; no dataset was left behind."""


class VerificationError(TFRecorderError, ValueError):
    """A dataset on disk does not match its manifest; `.report` lists every problem."""

    def __init__(self, *parts: str | Option, report=None, **data):
        super().__init__(*parts, **data)
        self.report = report


class StorageError(TFRecorderError, OSError):
    """A file or bucket could not be reached: missing credentials, a missing bucket, a
    refused permission, or a store that kept failing. `.uri` names what was asked for."""

    def __init__(self, *parts: str | Option, uri: str | None = None, **data):
        super().__init__(*parts, **data)
        self.uri = uri


class ResumeError(TFRecorderError, ValueError):
    """`resume=True` found nothing to resume, or an interrupted run of another table or
    other options."""


class OutputLockedError(TFRecorderError, FileExistsError):
    """Another run is writing into the output folder."""

    def __init__(self, *parts: str | Option, path: str | None = None, **data):
        super().__init__(*parts, **data)
        self.path = path


class TooManyRejectedError(ConversionAborted):
    """More than `max_rejected` of the rows were rejected: the table, not a few images,
    is wrong. `.reasons` maps each common reason to its number of rows."""

    def __init__(self, *parts: str | Option, num_rejected: int = 0, num_rows: int = 0,
                 reasons: dict | None = None, **data):
        super().__init__(*parts, option="max_rejected", **data)
        self.num_rejected, self.num_rows, self.reasons = num_rejected, num_rows, reasons or {}


class DuplicateImagesError(ConversionAborted):
    """`duplicates="error"` and some image is stored more than once. `.duplicates` holds
    each (`manifest_statistics.Duplicate`, with every copy's row)."""

    def __init__(self, *parts: str | Option, duplicates=(), **data):
        super().__init__(*parts, option="duplicates", **data)
        self.duplicates = tuple(duplicates)


class MissingExtraError(TFRecorderError, ImportError):
    """A function needs a package that only one of tfrecorder's extras installs:
    TensorFlow (`tf`) to read records with it, PyAV or soundfile (`video`, `audio`) to
    decode clips. `.extra` names the extra, `.name` (ImportError's) the missing package."""

    def __init__(self, *parts: str | Option, extra: str, package: str, **data):
        super().__init__(*parts, **data)
        self.extra, self.name = extra, package

    def __reduce__(self):
        # ImportError keeps `name` outside __dict__, where `_rebuild` would lose it.
        return _rebuild_missing_extra, (self.parts, self.extra, self.name)


def _rebuild_missing_extra(parts, extra, package) -> MissingExtraError:
    return MissingExtraError(*parts, extra=extra, package=package)


class DatasetWarning(UserWarning):
    """Something about the data a person should look at: duplicated images, an image in
    two splits, a split that lacks a class, classes far out of balance."""


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM): handled as Ctrl-C is, and by the command
    line with the exit status a signal gives (128 + its number)."""

    def __init__(self, signum: int = 15):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning]) -> None:
    """`warnings.warn`, pointing at the user's line: the first caller outside this
    package, however deep the call (the accessor, `create_tfrecords`, the CLI)."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)

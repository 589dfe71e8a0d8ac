"""The few exceptions tfrecorder raises on purpose.

Each names what is wrong (column, value, rows) and ends with how to fix it, so the
message alone is enough to act on.
"""


class TFRecorderError(Exception):
    """Base class of every error raised on purpose by tfrecorder."""


class SchemaError(TFRecorderError, ValueError):
    """The input table is not usable: a column is missing or holds bad values."""


class ImageError(TFRecorderError, ValueError):
    """An image could not be read or decoded and `on_error="raise"` was asked for."""


class DatasetExistsError(TFRecorderError, FileExistsError):
    """The output folder already holds a dataset and `overwrite` was not set."""


class ConversionAborted(TFRecorderError, RuntimeError):
    """The conversion stopped before finishing; no dataset was left behind."""


class VerificationError(TFRecorderError, ValueError):
    """A dataset on disk does not match its manifest; `.report` lists every problem."""

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class StorageError(TFRecorderError, OSError):
    """A file or bucket could not be reached: missing credentials, a missing bucket, a
    refused permission, or a store that kept failing. `.uri` names what was asked for."""

    def __init__(self, message: str, uri: str | None = None):
        super().__init__(message)
        self.uri = uri


class ResumeError(TFRecorderError, ValueError):
    """`resume=True` found nothing to resume, or an interrupted run of another table or
    other options."""


class OutputLockedError(TFRecorderError, FileExistsError):
    """Another run is writing into the output folder."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path


class TooManyRejectedError(ConversionAborted):
    """More than `max_rejected` of the rows were rejected: the table, not a few images,
    is wrong. `.reasons` maps each common reason to its number of rows."""

    def __init__(self, message: str, num_rejected: int = 0, num_rows: int = 0,
                 reasons: dict | None = None):
        super().__init__(message)
        self.num_rejected, self.num_rows, self.reasons = num_rejected, num_rows, reasons or {}


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM): handled as Ctrl-C is, and by the command
    line with the exit status a signal gives (128 + its number)."""

    def __init__(self, signum: int = 15):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum

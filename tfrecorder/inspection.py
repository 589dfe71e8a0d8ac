"""`inspect()`: a few records as files a person can look at."""

from __future__ import annotations

import os


def inspect(path: str | os.PathLike, split: str = "train", num_records: int = 5,
            output_dir: str | os.PathLike | None = None) -> str:
    """Writes records' features to a CSV and their images as files; returns the folder."""
    raise NotImplementedError  # being written

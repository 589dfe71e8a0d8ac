"""Small helpers for the sentences tfrecorder writes: messages, warnings and pages. Every
error that names rows or advises dropping a column words it here, so the wording is one."""

from __future__ import annotations

from collections.abc import Iterable

from tfrecorder.errors import Option

_MAX_ROWS_NAMED = 5


def count(number: int, singular: str, plural: str | None = None) -> str:
    """'1 image', '3 images', '1,200 classes' (give `plural` where "s" is wrong)."""
    return f"{number:,} {singular if number == 1 else plural or singular + 's'}"


def name_rows(index) -> str:
    """'rows 3, 7 and 12 more' for an error message."""
    index = list(index)
    shown = ", ".join(str(i) for i in index[:_MAX_ROWS_NAMED])
    more = f" and {len(index) - _MAX_ROWS_NAMED} more" if len(index) > _MAX_ROWS_NAMED else ""
    return f"row{'s' if len(index) > 1 else ''} {shown}{more}"


def sole(names: Iterable):
    """The one column at fault, for an error's `column`; None when several are."""
    names = list(names)
    return names[0] if len(names) == 1 else None


def dropping(*columns: str) -> Option:
    """The advice that drops `columns`: `schema={'notes': None}` (`--schema notes=drop`)."""
    return Option("schema", dict.fromkeys(columns))

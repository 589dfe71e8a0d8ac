"""How an option is declared and checked: `option`, the field that declares an option of
`convert` with its documentation and flag, and the checks of one value, each raising an
`OptionError` that names the option.

Apart from `options`, which declares `convert`'s option groups: the readers check their
own keywords (`load`'s `image_size`, `open_split`'s `decode`, `inspect`'s counts) with
the same checks and the same words, and import these without the groups. Light on
purpose: no pandas, no Pillow.
"""

from __future__ import annotations

import numbers
from collections.abc import Collection
from dataclasses import field
from typing import Any

import numpy as np

from tfrecorder.errors import Option, OptionError
from tfrecorder.wording import shown


def option(default: Any, doc: str, kind: str, *, help: str | None = None,
           metavar: str | None = None, choices: Collection | None = None,
           flag: str | None = None) -> Any:
    """A field that is an option of `convert`.

    Args:
        doc: what it does, for `convert`'s docstring (Python values).
        kind: how the command line reads it: "switch" (a bool), "tristate" (True, False
            or None), "int", "float", "text", "choice" (one of `choices`), or one of the
            command line's own parsers ("size", "fractions", "shards", "pixels",
            "schema", "fill", "pairs", "folders").
        help: the flag's help, where it must say something else than `doc`.
        flag: the flag's name, where it is not `--` + the name with dashes.
    """
    return field(default=default, metadata={
        "doc": doc, "kind": kind, "help": help, "metavar": metavar, "choices": choices,
        "flag": flag})


def is_int(value) -> bool:
    """An int (NumPy ints too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def refusal(name: str, expected: str, value) -> OptionError:
    """The error of an option that cannot take `value`: "image_size must be (height,
    width) with positive ints, not 224" (`--image-size` on the command line)."""
    return OptionError(Option(name), f" must be {expected}, not {shown(value)}", option=name)


def require(name: str, value, ok: bool, expected: str) -> None:
    if not ok:
        raise refusal(name, expected, value)


def checked_int(name: str, value, expected: str, minimum: int, maximum: int | None = None,
                optional: bool = True) -> int | None:
    """`value` as an int (a NumPy int would not go into JSON), or None where allowed."""
    if value is None and optional:
        return None
    require(name, value, is_int(value) and minimum <= value
            and (maximum is None or value <= maximum), expected)
    return int(value)


def checked_bool(name: str, value, optional: bool = False) -> bool | None:
    if value is None and optional:
        return None
    require(name, value, isinstance(value, (bool, np.bool_)),
            "True, False or None" if optional else "True or False")
    return bool(value)


def checked_image_size(value, name: str = "image_size") -> tuple[int, int] | None:
    """(height, width) as ints, or None: the same check for `convert` and `load`."""
    if value is None:
        return None
    require(name, value, isinstance(value, (tuple, list)) and len(value) == 2
            and all(is_int(v) and v > 0 for v in value), "(height, width) with positive ints")
    return int(value[0]), int(value[1])


class Checked:
    """Checks of one option, used by the groups' `__post_init__`."""

    def _require(self, name: str, ok: bool, expected: str) -> None:
        require(name, getattr(self, name), ok, expected)

    def _int(self, name: str, expected: str, minimum: int, maximum: int | None = None,
             optional: bool = True) -> None:
        object.__setattr__(self, name, checked_int(name, getattr(self, name), expected,
                                                   minimum, maximum, optional))

    def _bool(self, name: str, optional: bool = False) -> None:
        object.__setattr__(self, name, checked_bool(name, getattr(self, name), optional))

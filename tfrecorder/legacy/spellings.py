"""TFRecorder 2.0's spellings that the readers accept, and `deprecated`, the warning every
2.0 spelling gives.

Code written for 2.0 names splits "TRAIN" and passes `tfrecord_dir=`; the public `load`,
`inspect`, `show` and `open_split` (`edge`) translate both here, with a
`DeprecationWarning` that names ours, before calling the readers. A leaf (errors, splits
and wording only). What `convert` translates is in `convert_spellings`.
"""

from __future__ import annotations

import os

from tfrecorder.errors import OptionError, warn_user
from tfrecorder.format.splits import SPLITS, Split
from tfrecorder.wording import shown


def deprecated(old: str, new: str) -> None:
    """Warns that `old` is 2.0's spelling of `new`, pointing at the user's line."""
    warn_user(f"{old} is TFRecorder 2.0's spelling; use {new}.", DeprecationWarning)


def split_name(name: str | None) -> str | None:
    """A split as a user names it to `load` or `inspect`: "train", or 2.0's "TRAIN"."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise OptionError(f"split must be the name of one split "
                          f"({', '.join(map(repr, SPLITS))}) or None, not "
                          f"{shown(name)}.", option="split")
    try:
        split = Split(name)
    except ValueError:  # the manifest names the splits there are
        return name
    if name.strip() == split.stored:  # "TRAIN"; other spellings ("val") are ours too
        deprecated(f"split={name!r}", f"split={split.value!r}")
    return split.value


# What a 2.0 script that reads the datasets must change.
_READ_DIFFERENCES = {
    "load": ". Unlike 2.0's, the elements' 'image' is the decoded image (uint8, height x "
            "width x channels), not base64 pixels to decode: drop tf.io.decode_base64",
}


def dataset_dir(path, tfrecord_dir, function: str) -> str:
    """`path`, or 2.0's `tfrecord_dir=`."""
    if tfrecord_dir is not None:
        if path is not None:
            raise TypeError(f"{function}() got both path and tfrecord_dir; pass path.")
        deprecated("tfrecord_dir=", f"{function}(path)" + _READ_DIFFERENCES.get(function, ""))
        return os.fspath(tfrecord_dir)
    if path is None:
        raise TypeError(f"{function}() missing the dataset folder: {function}(path)")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{function}() takes the dataset's folder, a path or a URI such "
                        f"as 'gs://bucket/data', not {shown(path)}.")
    return os.fspath(path)

"""Image paths in a table: read exactly as written and resolved against the source's
folder, told from other text by their extension or a local file's first bytes, and
checked to exist (one `os.stat` a row) before any image is read.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import stat
from collections import Counter

import pandas as pd

from tfrecorder.errors import SchemaError
from tfrecorder.sources.schema import is_missing
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs, local_files
from tfrecorder.wording import name_row, name_rows

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def indexed_values(column: pd.Series) -> list[tuple]:
    """(index, value) pairs as plain Python objects: iterating pandas' own (Arrow-backed)
    arrays element by element is many times slower."""
    return list(zip(column.index.tolist(), column.tolist()))


def image_uris(column: pd.Series, base_dir: str) -> tuple[pd.api.extensions.ExtensionArray,
                                                         pd.api.extensions.ExtensionArray]:
    """The image URIs exactly as given, and as read (`resolve`), as Arrow-backed text.

    Nothing is stripped: `'padded.jpg '` names another file than `padded.jpg`. A local
    path with whitespace around it that names no file, where the stripped path does, is
    an error rather than a silent fix or a row rejected later.

    Rows are looked at a slice at a time (a Python string a row costs 50-100 bytes), and
    where every URI is read as given (absolute paths, bucket URIs), both are the given
    column's one array, not two copies.
    """
    bad, malformed, unreadable, padded, slices, same = [], {}, [], [], [], True
    for start in range(0, len(column), _SLICE_ROWS):
        items = indexed_values(column.iloc[start:start + _SLICE_ROWS])
        bad += [i for i, v in items if is_missing(v) or not isinstance(v, str)]
        if bad:  # reported once every row is looked at, before any other error
            continue
        resolved = []
        for i, uri in items:
            try:
                resolved.append(resolve(uri, base_dir))
            except ValueError as error:
                malformed.setdefault(str(error), []).append((i, uri))
                unreadable.append(i)
                resolved.append("")
        padded += [(i, uri, path) for (i, uri), path in zip(items, resolved)
                   if uri != uri.strip() and not fs.is_remote(path)
                   and not is_regular_file(path) and names_a_file(uri.strip(), base_dir)]
        if same and not all(path is uri for (_, uri), path in zip(items, resolved)):
            same = False
            if start:  # the rows before, read as given
                slices.append(column.iloc[:start].astype("str").reset_index(drop=True))
        if not same:
            slices.append(pd.Series(resolved, dtype="str"))
    if bad:
        raise SchemaError(
            f"column {column.name!r} has empty or non-text values at "
            f"{name_rows(bad, of=column.index)}. "
            "Every row needs the path or gs:// URI of its image; drop or fix those rows.",
            column=column.name, rows=bad)
    if malformed:
        problems = "; ".join(
            f"{values[0][1]!r} at {name_rows((i for i, _ in values), of=column.index)}: "
            f"{why}" for why, values in malformed.items())
        raise SchemaError(f"column {column.name!r} has URIs that cannot be read as written: "
                          f"{problems}.", column=column.name, rows=unreadable)
    if padded:
        _, uri, _ = padded[0]
        rows = [i for i, _, _ in padded]
        raise SchemaError(
            f"column {column.name!r} has paths with whitespace around them that name no file "
            f"as written, though they do without it: {uri!r} at "
            f"{name_rows(rows, of=column.index)} (the file is {uri.strip()!r}). Paths are "
            "read exactly as written: remove the whitespace from the table (e.g. "
            f"df[{column.name!r}] = df[{column.name!r}].str.strip(), or 'a,b' for 'a, b' in "
            "a CSV file).", column=column.name, rows=rows)
    given = column.astype("str").array
    if same:
        return given, given
    return given, pd.concat(slices, ignore_index=True).array


_SLICE_ROWS = 65_536  # rows held as Python strings at a time


def resolve(uri: str, base_dir: str) -> str:
    """Where to read `uri`: a bucket URI as it is, a `file://` URI as its local path, a
    relative path joined to `base_dir`.

    Raises:
        ValueError: for a URI that is malformed as written (its reason).
    """
    if fs.is_file_uri(uri):
        return fs.file_uri_path(uri)
    if fs.is_remote(uri):
        if uri[:1].isspace() and _SCHEME.match(uri.lstrip()):
            raise ValueError("whitespace before a URI's scheme; remove it (a CSV file "
                             "written as 'a, b' puts one after each comma)")
        return uri
    if os.path.isabs(uri) or not base_dir:
        return uri
    if fs.is_remote(base_dir):
        scheme, folder = base_dir.split("://", 1)
        return f"{scheme}://{posixpath.normpath(posixpath.join(folder, uri))}"
    return os.path.normpath(os.path.join(base_dir, uri))


def names_a_file(uri: str, base_dir: str) -> bool:
    """Whether `uri` resolves to an existing local regular file."""
    try:
        path = resolve(uri, base_dir)
    except ValueError:
        return False
    return not fs.is_remote(path) and is_regular_file(path)


def is_regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return False


# --- what an image is ------------------------------------------------------------------
# By its name where that says (Pillow's registered extensions, and common ones), else by
# the first bytes of a local file. Pillow's list is asked for only for an extension the
# common ones lack: it imports all of Pillow's plugins (80 ms).

_IMAGE_EXTENSIONS = frozenset({
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".apng", ".gif", ".bmp", ".dib", ".tif",
    ".tiff", ".webp", ".avif", ".avifs", ".heic", ".heif", ".jxl", ".jp2", ".j2k", ".jpf",
    ".jpx", ".jpc", ".j2c", ".ico", ".cur", ".icns", ".tga", ".pbm", ".pgm", ".ppm",
    ".pnm", ".pcx", ".psd", ".dds", ".qoi"})
# Formats Pillow opens that are not pictures to train on: documents, video, science data.
_NOT_IMAGES = frozenset({".pdf", ".eps", ".ps", ".mpg", ".mpeg", ".h5", ".hdf", ".bufr",
                         ".grib", ".fit", ".fits"})


@functools.cache
def _pillow_extensions() -> frozenset[str]:
    from PIL import Image

    return frozenset(ext for ext, name in Image.registered_extensions().items()
                     if name in Image.OPEN) - _NOT_IMAGES


def has_image_extension(path: str) -> bool:
    extension = posixpath.splitext(path.lower())[1]
    return extension in _IMAGE_EXTENSIONS or (
        len(extension) > 1 and extension in _pillow_extensions())


def looks_like_path(cell: str) -> bool:
    cell = cell.strip()
    return "/" in cell or "\\" in cell or has_image_extension(cell)


def is_image_file(path: str) -> bool:
    """Whether Pillow recognises a local regular file as an image, from its header (so
    any format we can read, whatever its name; a FIFO is never opened to wait)."""
    from PIL import Image  # only for a column whose extensions said nothing

    try:
        with fs.open_read(path) as file, Image.open(file):
            return True
    except Exception:  # not a file, not an image: Pillow raises many kinds
        return False


def first_local_file_is_image(values: list, base_dir: str) -> bool:
    """Whether the first value that names an existing local file names an image, by the
    file's first bytes: one read for the whole column."""
    for value in values:
        if isinstance(value, str) and names_a_file(value, base_dir):
            return is_image_file(resolve(value, base_dir))
    return False


# --- a cheap check that local images exist ----------------------------------------------

def missing_local_images(table: Table) -> list[int]:
    """The positions (0-based, in table order) of rows whose local image is not an
    existing regular file: missing, a folder, a FIFO, a device, a broken link. Remote
    URIs are skipped. Reads no image: one `os.stat` per path (0.28 s for 200,000 paths
    with a warm cache; listing folders instead saved a third of that, not worth its code).
    """
    if not table.image_files:
        return []
    uris = table.rows["uri"]
    return [start + i for start in range(0, len(uris), _SLICE_ROWS)  # bounded: 90 B a str
            for i, uri in enumerate(uris.iloc[start:start + _SLICE_ROWS].tolist())
            if "://" not in uri and not is_regular_file(uri)]


def describe_missing_images(table: Table, positions: list[int],
                            examples: int = 3) -> tuple[str, dict[str, int]]:
    """What is wrong with the rows `missing_local_images` found, for an error message:
    the commonest reasons with their number of rows, examples (as written and as read),
    and the folder relative paths were resolved against, so that "paths relative to the
    wrong folder" is plain to see. Also returns the reasons' counts (commonest first).
    """
    written = table.rows["image_uri"].tolist()
    uris = table.rows["uri"].tolist()
    reasons = Counter(_why_missing(uris[p]) for p in positions)
    text = "Most common reasons: " + "; ".join(
        f"{count} x {reason}" for reason, count in reasons.most_common(3)) + ". E.g. " + \
        "; ".join(f"{name_row(table.rows.index[p], table.rows.index)}: {written[p]!r}"
                  + (f" (read as {uris[p]!r})" if written[p] != uris[p] else "")
                  for p in positions[:examples]) + "."
    relative = [p for p in positions if not os.path.isabs(written[p].strip())
                and not fs.is_file_uri(written[p])]
    if relative and table.base_dir:
        text += (f" Relative paths ({len(relative)} of these rows) are resolved against "
                 f"{table.base_dir!r}.")
        first = written[relative[0]]
        here = os.path.abspath(first)
        if os.getcwd() != table.base_dir and is_regular_file(here):
            text += (f" {first!r} exists relative to the working directory instead "
                     f"({here!r}): paths in a CSV or Parquet file are relative to that "
                     "file's folder (TFRecorder 2.0 read them relative to the working "
                     "directory). Make them relative to that folder, or absolute.")
    return text, dict(reasons.most_common())


def _why_missing(path: str) -> str:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ("no such file" if os.path.isdir(os.path.dirname(path) or ".")
                else "no such file, nor its folder")
    except NotADirectoryError:
        return "a file where its path needs a folder"
    except PermissionError:
        return "permission denied"
    except (OSError, ValueError) as error:
        return getattr(error, "strerror", None) or str(error)
    return "a folder, not a file" if stat.S_ISDIR(mode) else local_files.not_regular(mode)

"""Images held in a table's cells instead of at a URI: encoded bytes, NumPy arrays, PIL
images, and Hugging Face's `{"bytes": ..., "path": ...}` dicts.

This module is their one home. `schema` asks it whether a column holds such images
(`holds_images`); `table` has it check every cell before any work starts
(`check_cells`: a wrong dtype or shape is an error naming the rows) and name each image
(`names_and_paths`), and hash each image once (`image_words`, `Table.image_hashes`: an
image keeps its split between runs, and exact copies share one); `records` takes each cell
as it encodes it (`image_data`: bytes, as a file's, or pixels); the Beam engine stages
cells with `staged`/`unstaged`; the rejected-rows report shows a cell as `describe` puts
it. The cells themselves are never copied in the driver: workers read them from the
table they share by fork, or from the Beam engine's staged Parquet file.
"""

from __future__ import annotations

import io
import pickle
import sys

import numpy as np
import pandas as pd
import xxhash

from tfrecorder.errors import SchemaError
from tfrecorder.wording import name_rows

# Arrays are images when they are one of these: 8- or 16-bit, grey (H x W or H x W x 1),
# grey and alpha (x 2), RGB (x 3) or RGBA (x 4): what a PNG holds exactly.
DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))
CHANNELS = (1, 2, 3, 4)
_SHAPES = "H x W, H x W x 1, H x W x 3 or H x W x 4"
_BYTES = (bytes, bytearray, memoryview)
_SAMPLE = 100  # cells looked at to tell whether a column holds images


def _is_pil(value) -> bool:
    # Never imports Pillow: where it is not imported, no value is a PIL image.
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(value, image.Image)


def _is_image_dict(value) -> bool:
    return isinstance(value, dict) and "bytes" in value and set(value) <= {"bytes", "path"}


def _opens_as_image(data) -> bool:
    """Whether Pillow recognises `data` as an image (from its header: nothing is
    decoded)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(bytes(data))):
            return True
    except Exception:  # UnidentifiedImageError, and whatever a damaged header raises
        return False


def holds_images(column: pd.Series) -> bool:
    """Whether `column` holds images in memory, judged by its first values: arrays of 3
    dimensions (or 2, of uint8 or uint16), PIL images, Hugging Face image dicts, or bytes
    that Pillow recognises as an image. Bytes that are not images stay text (`bytes`
    features): a column of other binary data is not to be taken for images."""
    if _arrow_images(column) is not None:
        return True
    if column.dtype != object:
        return False
    sample = [v for v in column.head(_SAMPLE * 10).tolist() if v is not None][:_SAMPLE]
    for value in sample:
        if isinstance(value, np.ndarray):
            return value.ndim == 3 or (value.ndim == 2 and value.dtype in DTYPES)
        if _is_pil(value) or _is_image_dict(value):
            return True
        if isinstance(value, _BYTES):
            return any(_opens_as_image(v) for v in sample if isinstance(v, _BYTES) and len(v))
        if not (isinstance(value, float) and value != value):
            return False
    return False


def holds_bytes(column: pd.Series) -> bool:
    """Whether a column `holds_images` holds them as encoded bytes (not pixels)."""
    first = next((v for v in column.head(_SAMPLE).tolist() if v is not None), None)
    return isinstance(first, _BYTES)


def _arrow_images(column: pd.Series):
    """The Arrow type of an Arrow-backed column of images (`struct<bytes, path>`, as
    Hugging Face and its Parquet files store them), else None."""
    if not isinstance(column.dtype, pd.ArrowDtype):
        return None
    import pyarrow as pa

    kind = column.dtype.pyarrow_dtype
    if pa.types.is_struct(kind) and {kind.field(i).name for i in range(kind.num_fields)} \
            == {"bytes", "path"}:
        return kind
    return None


# --- checking -----------------------------------------------------------------------------

def check_cells(column: pd.Series) -> None:
    """Raises a SchemaError naming the rows whose cells are not images we can store: a
    missing cell, an array of another dtype or shape, a dict without bytes (a column of
    such dicts is read as paths: `path_only`) or a value of another type. (Bytes are
    checked as a file's are, as they are written: a corrupt one is a rejected row.)"""
    if _arrow_images(column) is not None:
        _check_arrow_cells(column)
        return
    problems: dict[str, list] = {}
    for index, value in zip(column.index.tolist(), column.tolist()):
        problem = _cell_problem(value)
        if problem is not None:
            problems.setdefault(problem, []).append(index)
    if problems:
        _raise(column.name, problems, column.index)


def _cell_problem(value) -> str | None:
    """Why `value` cannot be an image cell, or None."""
    if isinstance(value, _BYTES) or _is_pil(value):
        return None
    if isinstance(value, np.ndarray):
        return _array_problem(value)
    if isinstance(value, dict):
        if not _is_image_dict(value):
            return (f"a dict with keys {sorted(map(str, value))}; an image dict has "
                    "'bytes' (and 'path'), as Hugging Face stores images")
        if value["bytes"] is None:  # (a column of such dicts is read as paths)
            return "a dict without bytes, beside images given by their bytes"
        return None if isinstance(value["bytes"], _BYTES) else \
            f"a dict whose 'bytes' is a {type(value['bytes']).__name__}, not bytes"
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "no image (a missing value)"
    return f"a {type(value).__name__}, not an image"


def _array_problem(array: np.ndarray) -> str | None:
    """Why `array` cannot be stored as an image, or None."""
    shape = "x".join(map(str, array.shape)) or "()"
    kind = f"{'an' if array.dtype.name[0] in 'aio' else 'a'} {array.dtype} array"  # a uint8
    if array.dtype not in DTYPES:
        advice = {"f": " (scale it to 0..255 and use .astype(np.uint8))",
                  "i": " (if its values are 0..255, use .astype(np.uint8))",
                  "u": " (if its values are 0..255, use .astype(np.uint8))",
                  "b": " (as 0 and 255: .astype(np.uint8) * 255)"}.get(array.dtype.kind, "")
        return f"{kind} of shape {shape}; images are uint8 or uint16{advice}"
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in CHANNELS)):
        return f"{kind} of shape {shape}; images are {_SHAPES} arrays"
    if array.size == 0:
        return f"an empty {array.dtype} array (shape {shape})"
    return None


def _check_arrow_cells(column: pd.Series) -> None:
    import pyarrow.compute as pc

    values = _arrow(column)
    missing = pc.or_(pc.is_null(values), pc.is_null(pc.struct_field(values, "bytes")))
    bad = np.flatnonzero(missing.to_numpy(zero_copy_only=False))
    if len(bad):
        _raise(column.name, {"no bytes (a missing image, or one given by its path beside "
                             "images given by their bytes)": column.index[bad].tolist()},
               column.index)


def _arrow(column: pd.Series):
    import pyarrow as pa

    return pa.array(column.array)


def _raise(name, problems: dict[str, list], index: pd.Index) -> None:

    rows = [i for found in problems.values() for i in found]
    named = "; ".join(f"{name_rows(found, of=index)}: {problem}"
                      for problem, found in problems.items())
    raise SchemaError(
        f"column {name!r} holds images in memory, and some cells are not images tfrecorder "
        f"can store: {named}. Each cell must be encoded bytes (JPEG, PNG, ...), a uint8 or "
        f"uint16 NumPy array ({_SHAPES}), a PIL image or a dict {{'bytes': ..., 'path': "
        f"...}}; fix or drop those rows.", column=name, rows=rows)


def path_only(column: pd.Series) -> bool:
    """Whether every cell is a dict with a path and no bytes (Hugging Face's images that
    stay in their files): such a column is read as image paths."""
    if _arrow_images(column) is not None:
        import pyarrow.compute as pc

        values = _arrow(column)
        return not values.null_count and bool(
            pc.all(pc.is_null(pc.struct_field(values, "bytes"))).as_py())
    return all(_is_image_dict(v) and v["bytes"] is None for v in column.tolist())


def paths(column: pd.Series) -> list:
    """The paths of a column's image dicts (None where there is none)."""
    if _arrow_images(column) is not None:
        import pyarrow.compute as pc

        values = _arrow(column)
        return pc.struct_field(values, "path").to_pylist()
    return [v.get("path") if isinstance(v, dict) else None for v in column.tolist()]


def names_and_paths(column: pd.Series) -> tuple[list[str], list[str]]:
    """Each image's `image_name` and `image_uri` features: a dict's path and its base
    name; else the row's index label as the name, and no URI (an empty one)."""
    from tfrecorder.storage import fs

    found = paths(column)
    uris = [p if isinstance(p, str) else "" for p in found]
    names = [fs.basename(p) if p else str(index)
             for p, index in zip(uris, column.index.tolist())]
    return names, uris


# --- what workers and the report take --------------------------------------------------------

def image_data(cell):
    """A cell as `records` encodes it: bytes (read as a file's bytes), a NumPy array or a
    PIL image of pixels."""
    if isinstance(cell, dict):
        cell = cell["bytes"]
    if isinstance(cell, (bytearray, memoryview)):
        return bytes(cell)
    return cell


def image_words(column: pd.Series) -> np.ndarray:
    """A 64-bit word a cell, from its content (xxh3-64 of the bytes, or of an array's
    dtype, shape and pixels): equal images give equal words, whatever row they are in.
    An Arrow column is read a few rows at a time, never all its bytes at once."""
    if _arrow_images(column) is None:
        cells = column.tolist()  # the cells themselves: nothing is copied
        return np.fromiter((_word(image_data(c)) for c in cells), np.uint64, len(cells))
    import pyarrow.compute as pc

    data = pc.struct_field(_arrow(column), "bytes")
    return np.fromiter((xxhash.xxh3_64_intdigest(value.as_buffer()) for value in data),
                       np.uint64, len(data))


def _word(data) -> int:
    if isinstance(data, bytes):
        return xxhash.xxh3_64_intdigest(data)
    if isinstance(data, np.ndarray):
        header = f"{data.dtype.str}{data.shape}".encode()
        return xxhash.xxh3_64_intdigest(header + np.ascontiguousarray(data).tobytes())
    header = f"{data.mode}{data.size}".encode()  # a PIL image
    return xxhash.xxh3_64_intdigest(header + data.tobytes())


def typical_bytes(column: pd.Series, sample: int = 32) -> int:
    """The mean size of the first `sample` images (encoded bytes, or pixels), at least 1:
    what the local engine sizes its segments by."""
    head = column.head(sample)
    if _arrow_images(column) is not None:
        import pyarrow.compute as pc

        sizes = pc.binary_length(pc.struct_field(_arrow(head), "bytes")).to_pylist()
    else:
        sizes = [_size(image_data(cell)) for cell in head.tolist()]
    return max(1, sum(s or 0 for s in sizes) // max(1, len(sizes)))


def _size(data) -> int:
    if isinstance(data, bytes):
        return len(data)
    if isinstance(data, np.ndarray):
        return data.nbytes
    return data.size[0] * data.size[1] * len(data.getbands())  # a PIL image


def describe(cell) -> str:
    """A cell as the rejected-rows report shows it (never its pixels or bytes)."""
    if isinstance(cell, str):  # described already (the Beam engine stages it so)
        return cell
    if isinstance(cell, dict):
        path = cell.get("path")
        return path if path else describe(cell.get("bytes"))
    if isinstance(cell, _BYTES):
        return f"<{len(cell):,} bytes>"
    if isinstance(cell, np.ndarray):
        return f"<{cell.dtype} array of shape {'x'.join(map(str, cell.shape))}>"
    if _is_pil(cell):
        return f"<PIL image, {cell.mode}, {cell.size[0]}x{cell.size[1]}>"
    return repr(cell)


def described(column: pd.Series) -> pd.Series:
    return pd.Series([describe(c) for c in column.tolist()], index=column.index,
                     dtype=object, name=column.name)


def staged(cell) -> tuple[bytes | None, bytes | None]:
    """A cell as the Beam engine stages it in Parquet: (encoded bytes, None), or for
    pixels (None, their pickle), which keeps a PIL image's mode and palette exactly."""
    data = image_data(cell)
    if isinstance(data, bytes):
        return data, None
    return None, pickle.dumps(data, protocol=5)


def unstaged(encoded: bytes | None, pickled: bytes | None):
    """`staged`'s inverse (the job reads only what its own driver staged)."""
    return encoded if pickled is None else pickle.loads(pickled)

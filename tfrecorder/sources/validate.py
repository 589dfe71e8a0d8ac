"""A DataFrame, from any source, -> the canonical `Table`: the checks every reader shares.

Every mistake in the input is found here, before a single image is read, and reported
with the column, the offending values and the first rows that hold them. The table keeps
the source rows exactly as given, so rejected rows can be reported in the user's terms.
Columns besides split, image and label are typed in `tfrecorder.sources.schema`; labels are
read in `labels`, image paths in `image_paths`, split names by `tfrecorder.format.splits`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, OptionError, SchemaError
from tfrecorder.format.manifest import RESERVED
from tfrecorder.format.splits import SPLITS, UNASSIGNED, spellings_text, split_named
from tfrecorder.sources import image_cells, media
from tfrecorder.sources.column_values import input_column
from tfrecorder.sources.image_paths import (
    first_local_file_is_image,
    has_image_extension,
    image_uris,
    indexed_values,
)
from tfrecorder.sources.labels import INTEGER, row_labels
from tfrecorder.sources.schema import (
    AUDIO_URI,
    FILE_TYPES,
    IMAGE,
    IMAGE_URI,
    INPUT_KINDS,
    MEDIA_TYPES,
    SPLIT_KEY,
    VIDEO_URI,
    column_types,
    is_missing,
    label_columns,
    misspelled_role,
    synonym_role,
)
from tfrecorder.sources.table import Table
from tfrecorder.wording import dropping, name_rows, shown, sole


def validate(frame: pd.DataFrame, base_dir: str, schema: Mapping | None = None,
             fill_missing=None, text_numbers: bool = False, split: str | None = None
             ) -> Table:
    """Checks every column and returns the canonical table (see `Table`).

    Args:
        base_dir: relative local image paths are resolved against it (the CSV's folder,
            or the working directory for a DataFrame).
        schema: column name -> TFRecorder type name (see `tfrecorder.sources.schema`), or None to
            drop the column; columns it does not name are typed by name and dtype.
        fill_missing: the value for missing cells of input columns: one for all, or a
            dict by column; by default a missing value is an error.
        text_numbers: type text columns whose values all read as numbers as numbers (a
            CSV file's columns are all text).
        split: the split of every row of a table without a split column.

    Raises:
        SchemaError: for a table with no rows, or nothing to store but labels and
            splits, and for every column that does not hold what its role needs.
    """
    schema = schema or {}
    types = column_types(frame, schema)
    # A table of video or audio files: its `start` and `end` columns are each row's clip
    # (`media`), not inputs.
    kind = next((MEDIA_TYPES[t] for t in types.values() if t in MEDIA_TYPES), None)
    spans = media.span_columns(frame, schema) if kind else (None, None)
    for name in spans:
        types.pop(name, None)
    fills = fill_missing if isinstance(fill_missing, Mapping) else {}
    inputs = [name for name, type_name in types.items() if type_name in INPUT_KINDS]
    strangers = sorted(set(fills) - set(inputs))
    if strangers:
        raise SchemaError(f"fill_missing names columns that are not inputs: {strangers} "
                          f"(the inputs: {inputs}).", column=sole(strangers),
                          option="fill_missing")
    if frame.index.has_duplicates:
        frame = frame.reset_index(drop=True)
    if frame.empty:
        raise SchemaError(
            f"the table has no rows (its columns: {list(frame.columns)}), so there is "
            "nothing to convert. Pass the table with its rows (did a filter remove them "
            "all?).")
    _check_roles(frame, types, schema, base_dir)
    image_column = next((n for n, t in types.items() if t in FILE_TYPES), None)
    if image_column is None and not inputs:
        _nothing_to_store(frame, types)
    rows = pd.DataFrame(index=frame.index)
    if image_column is not None and types[image_column] == IMAGE:
        _images_in_memory(frame[image_column], base_dir, rows)
    elif image_column is not None:
        rows["image_uri"], rows["uri"] = image_uris(frame[image_column], base_dir)
    split_column = next((n for n, t in types.items() if t == SPLIT_KEY), None)
    if split is not None and split_column is not None:
        raise OptionError(Option("split"), " gives every row one split, but the table names "
                          f"each row's split (column {split_column!r}, or the keys of a dict "
                          "of splits). Leave it out.", option="split")
    # Categorical: one byte a row, where a column of references took eight.
    rows["split"] = _splits(frame[split_column]) if split_column is not None \
        else pd.Categorical.from_codes(np.zeros(len(frame), dtype=np.int8),
                                       [split_cell(split)])
    multi_label, names = False, label_columns(types)
    if names:
        labels, multi_label = row_labels(frame, names, types)
        # Unlabelled rows' None kept as it is: pandas would turn ids beside a NaN to floats.
        rows["label"] = labels if multi_label or isinstance(labels, pd.Categorical) \
            or None not in labels else \
            pd.Series(labels, index=frame.index, dtype=object)
    columns, words, grids = [], {}, {}
    for name in inputs:
        type_name = types[name]
        if text_numbers and name not in schema and type_name == "StringInput":
            type_name = _number_type(frame[name]) or type_name
        column, values, arrays = input_column(
            frame[name], type_name, fills.get(name) if fills else fill_missing)
        columns.append(column)
        if arrays is not None:
            words[name] = arrays.words
            if arrays.grid is not None:
                grids[name] = arrays.grid
        # Number arrays and pandas' own arrays (Arrow-backed text) are kept as they are:
        # a Python object a cell would cost 30 to 60 bytes a row.
        kept = isinstance(values, pd.api.extensions.ExtensionArray) or (
            isinstance(values, np.ndarray) and values.dtype.kind in "if")
        rows[name] = pd.Series(values, index=frame.index, dtype=None if kept else object)
    table = Table(rows=rows, source=frame, inputs=tuple(columns), cell_words=words,
                  number_grids=grids,
                  multi_label=multi_label,
                  label_column=names[0] if len(names) == 1 else None,
                  base_dir=base_dir, image_column=image_column if "image" in rows else None)
    if kind is None:
        return table
    return media.clip_table(table, kind, *media.span_values(frame, *spans))


_ROLE_TYPES = {"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel",
               "video_uri": VIDEO_URI, "audio_uri": AUDIO_URI}
SAMPLE = 100  # values looked at to tell what an unnamed column holds


def _check_roles(frame: pd.DataFrame, types: Mapping, schema: Mapping,
                 base_dir: str) -> None:
    """A table without a split, image or label column must not hold one under another
    name unnoticed: its labels would be stored as text and its rows hash-split. Columns
    the schema leaves untyped are asked about when they hold split names or are named
    like a split (`set`), look like image paths (by extension or by their first file's
    bytes), are named like a label (`class`, `category`, `target`), or are named one
    typing slip from a role (`lable`, `spilt`). No input may take a feature's name
    either."""
    files = bool(set(FILE_TYPES) & set(types.values()))  # one kind of file a table
    roles = {"split": SPLIT_KEY in types.values(), "image_uri": files, "video_uri": files,
             "audio_uri": files, "label": bool(label_columns(types))}
    untyped = [n for n, t in types.items() if t in INPUT_KINDS and n not in schema]
    found: dict[str, list[tuple[str, str]]] = {}  # role -> (column, why)
    for name in untyped:
        is_text = types[name] in ("StringInput", "CategoricalInput")
        sample = [v for v in frame[name].head(SAMPLE * 10).tolist()
                  if not is_missing(v)][:SAMPLE]
        if not roles["split"] and is_text and _holds_split_names(frame[name], sample):
            found.setdefault("split", []).append((name, f"holds only split names (e.g. "
                                                        f"{shown(_first_split_name(sample))})"))
        elif not roles["split"] and is_text and synonym_role(name) == "split":
            found.setdefault("split", []).append((name, "is named like a split column"))
        elif not roles["image_uri"] and is_text and sample and all(
                isinstance(v, str) for v in sample) and (
                all(has_image_extension(v.strip()) for v in sample)
                or first_local_file_is_image(sample, base_dir)):
            found.setdefault("image_uri", []).append(
                (name, f"looks like image paths (e.g. {shown(sample[0])})"))
        elif not roles["image_uri"] and is_text and (clips := _clip_paths(sample)):
            found.setdefault(f"{clips}_uri", []).append(
                (name, f"looks like {clips} paths (e.g. {shown(sample[0])})"))
        elif not roles["label"] and synonym_role(name) == "label":
            found.setdefault("label", []).append((name, "is named like a label column"))
        elif (role := misspelled_role(name)) and not roles[role]:
            found.setdefault(role, []).append((name, "is one typo from that name"))
    if found:
        clauses, declared = [], {}
        for role, columns in found.items():
            names = " and ".join(repr(n) for n, _ in columns)
            what = "; ".join(f"column {n!r} {why}" + (
                f" (did you mean {role!r}?)" if misspelled_role(n) == role else "")
                for n, why in columns)
            clauses.append(f"no {role!r} column, and {what}")
            first = columns[0][0]
            declared[first] = _ROLE_TYPES[role]
            if role == "label" and _integer_values(frame[first]):
                declared[first] = "IntegerLabel"
            if len(columns) > 1:
                clauses[-1] += f" (only one of {names} can be the {role})"
        them = "the columns" if len(declared) > 1 else "the column"
        raise SchemaError(
            f"the table has {'; '.join(clauses)}. Rename {them} to "
            f"{' and '.join(repr(r) for r in found)}, or declare "
            f"{'them' if len(declared) > 1 else 'it'}: ", Option("schema", declared),
            "; to store a column as an input instead, declare that (e.g. ",
            Option("schema", {next(iter(declared)): "StringInput"}), ").",
            column=sole(n for columns in found.values() for n, _ in columns))
    taken = [n for n in types if types[n] in INPUT_KINDS and n in RESERVED]
    if taken:
        raise SchemaError(
            f"column {taken[0]!r} would replace a feature tfrecorder writes "
            f"({', '.join(RESERVED)}). Rename it, or drop it with ", dropping(taken[0]), ".",
            column=taken[0])


def _clip_paths(sample: list) -> str | None:
    """"video" or "audio" where every value of a sample is a path with that kind's
    extension (`media.media_of_path`)."""
    kinds = {media.media_of_path(v.strip()) if isinstance(v, str) else None for v in sample}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def _holds_split_names(column: pd.Series, sample: list) -> bool:
    """Whether every value is a split name and one at least is TRAIN, VALIDATION or TEST
    (the sample first: the whole column only when the sample says so)."""
    def split_names(values) -> bool:
        texts = [v for v in values if not is_missing(v)]
        return bool(texts) and all(
            isinstance(v, str) and split_cell(v) is not None for v in texts) \
            and any(split_cell(v) in SPLITS for v in texts)

    if not split_names(sample):
        return False
    try:
        return split_names(pd.unique(column.astype(object)).tolist())
    except TypeError:  # lists in the cells
        return False


def _first_split_name(sample: list) -> str:
    return next(v for v in sample if split_cell(v) in SPLITS)


def _integer_values(column: pd.Series) -> bool:
    if pd.api.types.is_integer_dtype(column):
        return True
    values = [v for v in column.head(SAMPLE).tolist() if not is_missing(v)]
    return bool(values) and all(isinstance(v, str) and INTEGER.match(v.strip())
                                for v in values)


def _nothing_to_store(frame: pd.DataFrame, types: Mapping) -> None:
    """Raises for a table whose records would hold nothing but labels and splits."""
    found = [f"{n!r} ({'the split' if t == SPLIT_KEY else 'a label'})"
             for n, t in types.items()]
    found = ", ".join(found[:-1]) + " and " + found[-1] if len(found) > 1 else \
        "".join(found) or "none"
    dropped = [n for n in frame.columns if n not in types]
    raise SchemaError(
        f"the table has nothing to store: its columns are {found}"
        f"{f' (schema drops {dropped})' if dropped else ''}; it has no image column and no "
        "input column, so every record would hold only a label and a split. Add the "
        "images' paths as an 'image_uri' column (or declare the column that holds them: ",
        Option("schema", {"<column>": IMAGE_URI}), "), or keep the input columns to store.")


def _number_type(column: pd.Series) -> str | None:
    """IntegerInput or FloatInput for a text column whose values all read as numbers
    (blanks aside). Each value is looked at by C loops (`map`): a million take 0.3 s."""
    cells = column.tolist()
    if pd.api.types.infer_dtype(column, skipna=False) == "string":  # text only: a CSV's
        values = list(filter(None, map(str.strip, cells)))
    else:
        values = [v.strip() for v in cells if isinstance(v, str) and v.strip()]
        if len(values) < sum(not is_missing(v) for v in cells):
            return None
    if not values:
        return None
    if all(map(INTEGER.match, values)):
        return "IntegerInput"
    try:
        deque(map(float, values), maxlen=0)
    except ValueError:
        return None
    return "FloatInput"


def _images_in_memory(column: pd.Series, base_dir: str, rows: pd.DataFrame) -> None:
    """Adds an `Image` column's rows: the cells as given (`image`; never copied), each
    image's `image_uri` (a Hugging Face dict's path, else empty) and `image_name` (the
    path's base name, else the row's index label). Dicts that all have a path and no
    bytes (Hugging Face's images left in their files) are read as image paths."""
    if image_cells.path_only(column):
        paths = pd.Series(image_cells.paths(column), index=column.index, name=column.name)
        rows["image_uri"], rows["uri"] = image_uris(paths, base_dir)
        return
    image_cells.check_cells(column)
    rows["image"] = column
    rows["image_name"], rows["image_uri"] = image_cells.names_and_paths(column)


def split_cell(value) -> str | None:
    """The split a table's cell names (`splits.split_named`); a blank is UNASSIGNED."""
    if is_missing(value) or not str(value).strip():
        return UNASSIGNED
    return split_named(str(value))


def _splits(column: pd.Series) -> pd.Categorical:
    """Every row's split (a `Split`, or UNASSIGNED), each distinct value read once."""
    try:
        codes, distinct = pd.factorize(column, use_na_sentinel=False)
    except TypeError:  # unhashable values: read one by one, below
        return pd.Categorical(_each_split(column))
    normalized = [split_cell(value) for value in distinct.tolist()]
    if None in normalized:
        _each_split(column)  # raises, naming the rows
    return pd.Categorical(np.array(normalized, dtype=object)[codes])


def _each_split(column: pd.Series) -> list[str]:
    normalized, bad = [], {}
    for i, value in indexed_values(column):
        split = split_cell(value)
        if split is None:
            bad.setdefault(str(value), []).append(i)
        normalized.append(split)
    if bad:
        values = "; ".join(f"{shown(v)} at {name_rows(rows, of=column.index)}"
                           for v, rows in bad.items())
        raise SchemaError(
            f"column {column.name!r} has unknown values: {values}. Use {spellings_text()}; a "
            "blank is UNASSIGNED.",
            column=column.name,
            rows=[i for i, split in zip(column.index.tolist(), normalized) if split is None])
    return normalized

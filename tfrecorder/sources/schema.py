"""Column types: what each column of the table becomes in the records.

Without a `schema`, columns are typed by name and dtype: `split`, `image_uri` and `label`
are the AutoML Vision columns, and `video_uri` or `audio_uri` name a clip's file in the
place of `image_uri` (a table has one kind of file: `media.py`); all are also read in
another case, with `-` or a space for `_`, or in the plural (`Label`, `IMAGE_URI`,
`labels`). Every other column passes through as a feature typed from its pandas dtype
(integers and booleans -> int64, floats -> float32, text -> bytes, pandas categoricals ->
ids in a saved vocabulary; cells holding lists -> lists). A `schema` maps column names to
TFRecorder's type names to say otherwise, or to None to drop a column.

The values themselves are checked and converted to what is stored by `column_values`,
apart because that is a job of its own: this module decides a column's type, that one
takes the type as given. Errors name the column, the values and the rows.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from operator import attrgetter

import numpy as np
import pandas as pd

from tfrecorder.errors import Option, SchemaError
from tfrecorder.format.example import number_grid
from tfrecorder.sources import image_cells
from tfrecorder.wording import dropping, one_slip_apart, shown, sole

logger = logging.getLogger(__name__)

# TFRecorder's type names. Label, split and image columns become the features `label`,
# `split` and `image` (+ `image_uri`); inputs keep their column's name.
SPLIT_KEY, IMAGE_URI, IMAGE = "SplitKey", "ImageUri", "Image"  # Image: held in memory
# A video or an audio file's path: the row is a clip of it (`Table.media`; `media.py`).
VIDEO_URI, AUDIO_URI = "VideoUri", "AudioUri"
MEDIA_TYPES = {VIDEO_URI: "video", AUDIO_URI: "audio"}
STRING_LABEL, INTEGER_LABEL = "StringLabel", "IntegerLabel"
INPUT_KINDS = {"IntegerInput": "int64", "FloatInput": "float32", "StringInput": "string",
               "CategoricalInput": "categorical"}
IMAGE_TYPES = (IMAGE_URI, IMAGE)
# The types that give a row its file, of which a table has one column: images (by path or
# held in memory), or a video or audio file's path.
FILE_TYPES = (*IMAGE_TYPES, *MEDIA_TYPES)
TYPES = (SPLIT_KEY, IMAGE_URI, IMAGE, VIDEO_URI, AUDIO_URI, STRING_LABEL, INTEGER_LABEL,
         *INPUT_KINDS)
LABEL_TYPES = (STRING_LABEL, INTEGER_LABEL)
_LABEL = "Label"  # a `label` column not named in the schema: text or integer, as found
_DEFAULT_TYPES = {"split": SPLIT_KEY, "image_uri": IMAGE_URI, "label": _LABEL,
                  "video_uri": VIDEO_URI, "audio_uri": AUDIO_URI}
# The columns read by name: split, image_uri, label, and a clip's video_uri or audio_uri.
ROLES = tuple(_DEFAULT_TYPES)
# Names other tools give these columns. Never taken silently (a `class` column may be a
# ticket class, a `set` a Lego set): a table that lacks the role and has such a column is
# asked what it is (see `tfrecorder.sources.table`). Compared by `name_key`.
SYNONYMS = {
    "split": frozenset({"set", "sets", "subset", "subsets", "partition", "mluse",
                        "datasplit", "splitname"}),
    "image_uri": frozenset({"image", "images", "img", "imguri", "imgurl", "imgpath",
                            "imagepath", "imagepaths",
                            "imagefile", "imagename", "imageurl", "imageurls", "path",
                            "paths", "filepath", "filepaths", "file", "files", "filename",
                            "filenames", "uri", "uris", "url", "urls", "gcsuri"}),
    "label": frozenset({"class", "classes", "classname", "classid", "category",
                        "categories", "target", "targets", "labelname", "labelid",
                        "labelids", "labelnames"}),
    "video_uri": frozenset({"video", "videos", "videopath", "videopaths", "videofile",
                            "videourl", "videogcsuri", "videoname", "clip", "clips",
                            "clippath"}),
    "audio_uri": frozenset({"audio", "audios", "audiopath", "audiopaths", "audiofile",
                            "audiourl", "audiogcsuri", "wav", "wavpath", "sound",
                            "soundfile"}),
}
_BY_LOWER_NAME = {re.sub(r"[_\s]", "", name.lower()): name for name in TYPES}


def name_key(name) -> str:
    """A column name as compared with the role names: lower case, without '_', '-' and
    spaces."""
    return re.sub(r"[\s_\-]", "", name.lower()) if isinstance(name, str) else ""


def role_by_name(name) -> str | None:
    """The role of a column named `split`, `image_uri`, `label`, `video_uri` or
    `audio_uri` in any case, with `-` or a space for `_`, or in the plural (`Split`,
    `IMAGE_URI`, `Image URI`, `labels`); else None. Such a column takes the role unless
    the schema says otherwise."""
    key = name_key(name)
    for role in ROLES:
        if key in (name_key(role), name_key(role) + "s"):
            return role
    return None


def synonym_role(name) -> str | None:
    """The role another tool's name for a column suggests (`set`, `path`, `class`)."""
    key = name_key(name)
    return next((role for role, names in SYNONYMS.items() if key in names), None)


def misspelled_role(name) -> str | None:
    """The role a column's name is one typing slip away from (`lable`, `spilt`,
    `imge_uri`, `lables`): one letter left out, added, changed or two swapped, in the
    name as `name_key` compares it. Names that are a role or another tool's name for one
    are not slips (`role_by_name`, `synonym_role`)."""
    key = name_key(name)
    if not key or role_by_name(name) or synonym_role(name):
        return None
    return next((role for role in ROLES for spelling in (name_key(role), name_key(role) + "s")
                 if one_slip_apart(key, spelling)), None)


def is_missing(value) -> bool:
    """None, NaN, NA or blank text (a CSV's empty cell)."""
    if isinstance(value, str):  # the common case first: this runs for every cell
        return not value.strip()
    return value is None or value is pd.NA or value is pd.NaT or (
        isinstance(value, float) and value != value)


def column_types(frame: pd.DataFrame, schema: Mapping | None) -> dict[str, str]:
    """Every kept column's type name, from `schema`, else from its name or dtype.

    A column the schema does not name whose name is a role's (`role_by_name`: `Label`,
    `labels`, `IMAGE_URI`) takes the role; that is logged at INFO.

    Raises:
        SchemaError: for an unknown type name, a schema column the table lacks, two
            split or two image columns, or two columns whose names give one role (`label`
            and `Label`): which one is meant is not for tfrecorder to guess.
    """
    schema = dict(schema or {})
    repeated = sorted({name for name in frame.columns if list(frame.columns).count(name) > 1})
    if repeated:
        first = repeated[0]
        raise SchemaError(
            f"the table has several columns named {repeated}. Give each column its own "
            f"name (several label columns: e.g. {first!r} and {f'{first}_2'!r}, with ",
            Option("schema", dict.fromkeys([first, f"{first}_2"], STRING_LABEL)), ").",
            column=sole(repeated))
    missing = [name for name in schema if name not in frame.columns]
    if missing:
        raise SchemaError(
            f"schema names columns the table does not have: {missing} (its columns: "
            f"{list(frame.columns)}). Fix the names, or add the columns.",
            column=sole(missing), option="schema")
    types, by_role, detected = {}, {}, []
    for name in frame.columns:
        if not isinstance(name, str):
            raise SchemaError(f"column names must be text, not {shown(name)}: it names a feature. "
                              "Rename the column, e.g. df.columns = df.columns.astype(str).",
                              column=name)
        if name in schema:
            declared = schema[name]
            if declared is None or (isinstance(declared, str) and declared.lower() == "drop"):
                continue
            types[name] = _type_name(name, declared)
        elif role := role_by_name(name):
            by_role.setdefault(role, []).append(name)
            types[name] = _DEFAULT_TYPES[role]
            if role == "image_uri" and image_cells.holds_images(frame[name]):
                types[name] = IMAGE
        elif image_cells.holds_images(frame[name]):
            types[name] = IMAGE
            detected.append(name)
        else:
            types[name] = _input_type(frame[name])
    for role, names in by_role.items():
        if len(names) > 1:
            raise SchemaError(
                f"columns {names} all name the {role!r} column (names are read in any case, "
                f"with '-' or a space for '_', singular or plural), so which one is meant is "
                "unclear. Keep one: drop the others with ", dropping(*names[1:]),
                ", or say what each is, e.g. ", Option("schema", {names[-1]: "StringInput"}),
                ".")
        if names[0] != role:
            logger.info("Reading column %r as the %r column.", names[0], role)
    images = [name for name, kind in types.items() if kind in FILE_TYPES]
    if len(images) > len(detected):  # an image column by name or schema: the others
        for name in detected:       # are typed by their dtype, as any input column
            types[name] = _input_type(frame[name])
    elif detected:
        # Image bytes in a column the schema does not name become images: said at WARNING,
        # because a column meant as a bytes feature must then be declared as one.
        log = logger.warning if image_cells.holds_bytes(frame[detected[0]]) else logger.info
        log("Reading column %r as images held in memory; to store it as bytes instead, "
            "declare schema={%r: 'StringInput'}.", detected[0], detected[0])
    for roles in ((SPLIT_KEY,), FILE_TYPES):
        columns = [name for name, kind in types.items() if kind in roles]
        if len(columns) > 1:
            raise SchemaError(
                f"the table has {len(columns)} "
                f"{' and '.join(sorted({types[c] for c in columns}))} columns: {columns}. Keep "
                "one: drop the others with ", dropping(*columns[1:]),
                ", or give them another type.")
    return types


def label_columns(types: Mapping[str, str]) -> list[str]:
    """The label columns, in table order (two or more make multi-label rows)."""
    return [name for name, kind in types.items() if kind in (*LABEL_TYPES, _LABEL)]


def _type_name(column: str, declared) -> str:
    name = getattr(declared, "__name__", declared)  # TFRecorder's types were classes
    found = isinstance(name, str) and _BY_LOWER_NAME.get(re.sub(r"[_\s]", "", name.lower()))
    if not found:
        raise SchemaError(
            f"schema gives column {column!r} the unknown type {shown(declared)}. Use one of "
            f"{', '.join(TYPES)}, or drop the column with ", dropping(column), ".",
            column=column, option="schema")
    return found


def _input_type(column: pd.Series) -> str:
    """The type of a column the schema does not name, from its dtype (or its values)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return "CategoricalInput"
    if pd.api.types.is_bool_dtype(column) or pd.api.types.is_integer_dtype(column):
        return "IntegerInput"
    if pd.api.types.is_float_dtype(column):
        return "FloatInput"
    if isinstance(column.dtype, pd.StringDtype):  # text only: nothing to look into
        return "StringInput"
    if pd.api.types.is_string_dtype(column) or column.dtype == object:
        return {"int64": "IntegerInput", "float32": "FloatInput"}.get(
            _element_kind(column), "StringInput")
    raise SchemaError(
        f"column {column.name!r} has dtype {column.dtype}, which a record cannot hold. "
        "Convert it (e.g. to text or to a number), or drop it with ", dropping(column.name),
        ".", column=column.name)


def _element_kind(column: pd.Series) -> str:
    """int64, float32 or string, from the values of an object column (lists looked into).
    Columns of text, and of equal-length lists of numbers, are told at C speed; anything
    else is looked at value by value."""
    if pd.api.types.infer_dtype(column, skipna=False) == "string":
        return "string"
    values = column.to_numpy(dtype=object)
    kind = _array_cells_kind(values)
    if kind is not None:
        return kind
    grid = number_grid(values.tolist()) if len(values) and is_list(values[0]) else None
    if grid is not None and grid.dtype.kind in "biu":
        return "int64"
    if grid is not None and not np.isnan(grid).any():
        return "float32"
    kinds = set()
    for value in column.tolist():
        for element in flat(value):
            if isinstance(element, (bool, np.bool_, int, np.integer)):
                kinds.add("int64")
            elif isinstance(element, (float, np.floating)):
                if not math.isnan(element):
                    kinds.add("float32")
            elif element is not None and element is not pd.NA:
                kinds.add("string")
    if kinds == {"int64"}:
        return "int64"
    if kinds <= {"int64", "float32"} and kinds:
        return "float32"
    return "string"


def _array_cells_kind(values: np.ndarray) -> str | None:
    """`_element_kind` of cells that are all NumPy arrays of integers (or all of floats),
    told by their dtypes, without a look at each number: int64 if any holds a number,
    float32 if any holds a float that is not NaN (NaN says nothing), else string. None
    for any other cells."""
    if not len(values) or set(map(type, values)) != {np.ndarray}:
        return None
    kinds = {dtype.kind for dtype in set(map(attrgetter("dtype"), values))}
    if kinds <= set("biu"):
        return "int64" if any(map(attrgetter("size"), values)) else "string"
    if kinds == {"f"}:
        return "float32" if any(v.size and not np.isnan(v).all() for v in values) \
            else "string"
    return None


def flat(value) -> list:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [e for item in value for e in flat(item)]
    return [value]


def is_list(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


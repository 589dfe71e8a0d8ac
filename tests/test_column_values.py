"""`column_values`: each input column's values checked against its type and stored as
the records hold them, whole columns at a time where the dtype allows."""

import numpy as np
import pandas as pd
import pytest

from tfrecorder import SchemaError
from tfrecorder.format.example import number_grid
from tfrecorder.sources import column_values
from tfrecorder.sources.hashing import cell_words


def cells_of(values: list) -> pd.Series:
    """A column whose cells are `values` as given (NumPy arrays stay arrays)."""
    found = np.empty(len(values), dtype=object)
    found[:] = values
    return pd.Series(found, name="n")


@pytest.mark.parametrize("kind,spellings", [
    ("FloatInput", ["1e3", " 2.5 ", "+7", "-0", "-0.0", "1_000.5", "inf", "-Infinity",
                    "\u0663.5", "3.4028234e38", "0.1", "1e-50"]),
    ("IntegerInput", ["12", " -3 ", "+7", "-0", "\u0663", "9223372036854775807",
                      "-9223372036854775808", "007"]),
])
def test_numbers_written_as_text_are_read_as_each_value_alone_reads(kind, spellings):
    """A column of number text (a CSV file's) is read a column at a time; the values are
    exactly those of `_to_float` / `_to_int` one by one."""
    column = pd.Series(spellings, name="n", dtype=object)
    read = {"FloatInput": column_values._to_float, "IntegerInput": column_values._to_int}[kind]
    found, values, _ = column_values.input_column(column, kind, None)
    assert isinstance(values, np.ndarray)
    assert [repr(v) for v in values.tolist()] == [repr(read(v)) for v in spellings]



@pytest.mark.parametrize("kind,cells", [
    ("FloatInput", [np.array([0.5, -0.0]), np.array([1e30, 2.0])]),  # kept
    ("FloatInput", [np.array([0.5, 1.0], dtype=np.float32), np.array([3.0, 4.0])]),
    ("FloatInput", [[np.float64(1.5), 2.0], [3.0, 4.0]]),  # NumPy floats: converted
    ("FloatInput", [[0.5, -0.0], [1.0, 2.0]]),  # Python floats: kept
    ("FloatInput", [[1, 2.5], (3.0, 4)]),  # mixed: converted
    ("IntegerInput", [np.array([1, -2]), np.array([2**62, 0])]),
    ("IntegerInput", [np.array([1, 2], dtype=np.uint8), np.array([3, 4], dtype=np.uint8)]),
    ("IntegerInput", [[1, 2], [3, 4]]),
    ("IntegerInput", [[True, 2], [3, 4]]),
])
def test_list_columns_words_are_those_of_the_values_stored(kind, cells):
    """Validation hands the words of the list columns it checked as one array to
    hashing (which then skips them): they are what hashing the stored cells gives,
    whatever the cells were (a row's split depends on them)."""

    _, values, arrays = column_values.input_column(cells_of(cells), kind, None)
    assert arrays is not None
    words = arrays.words
    assert words.tolist() == cell_words(pd.Series(values, dtype=object)).tolist()
    assert words.tolist() != cell_words(cells_of([[7.0, 8.0]] * len(cells))).tolist()
    # What workers encode in place of float cells: the float32 bits each cell stores.
    if kind == "FloatInput":
        stored = np.array([np.asarray(v, dtype=np.float64) for v in values]).astype("<f4")
        assert arrays.grid.tobytes() == stored.tobytes()
    else:
        assert arrays.grid is None


_GRID = np.arange(24, dtype=np.float64).reshape(6, 4)


@pytest.mark.parametrize("cells", [
    [np.array([0.5, -0.0]), np.array([np.nan, -np.inf])],
    [_GRID[:, 0], _GRID[:, 1]],  # strided views
    [np.array([1, 2], dtype=np.int32), np.array([-3, 4], dtype=np.int32)],
    [np.array([2**64 - 1, 0], dtype=np.uint64)] * 2,
    [np.array([1.0, 2.0]), np.array([3.0])],  # ragged
    [_GRID, _GRID],  # 2-D cells
    [np.array([]), np.array([])],
    [_GRID[0].astype(">f8"), _GRID[1].astype(">f8")],  # big-endian
])
def test_arrays_are_joined_as_number_grid_joins_them(cells):
    found = column_values._array_rows(cells_of(cells).to_numpy(), cells[0].dtype)
    expected = number_grid(cells)
    if found is None:
        assert expected is None or cells[0].dtype.byteorder == ">"
    else:
        assert found.dtype == expected.dtype and found.tobytes() == expected.tobytes()


@pytest.mark.parametrize("kind,bad", [
    ("FloatInput", ["1.5", "nan"]), ("FloatInput", ["1.5", "3.5e38"]),
    ("FloatInput", ["1.5", "x"]), ("FloatInput", ["1.5", " "]),
    ("IntegerInput", ["1", "1_000"]), ("IntegerInput", ["1", "9223372036854775808"]),
    ("IntegerInput", ["1", "2.0"]),
])
def test_number_text_that_does_not_read_is_named_by_its_row(kind, bad):
    with pytest.raises(SchemaError, match=r"at row 1\b") as caught:
        column_values.input_column(pd.Series(bad, name="n", dtype=object), kind, None)
    assert caught.value.rows == [1]

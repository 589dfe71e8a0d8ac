"""Row hashes decide splits, so a row's hash must depend on its values alone: never on
the other rows, on how a column is stored, or on which path computed it."""

import numpy as np
import pandas as pd

from tfrecorder.sources.hashing import _value_word, cell_words, row_hashes


def objects(values: list) -> np.ndarray:
    found = np.empty(len(values), dtype=object)
    found[:] = values
    return found


def one_by_one(values) -> list[int]:
    return [_value_word(v) for v in values]


def test_a_cells_word_does_not_depend_on_the_other_cells():
    boxes = [[i / 7, 0.5, -0.0, 1e30] for i in range(50)]
    alone = cell_words(objects(boxes))
    with_odd_rows = cell_words(objects([*boxes, [1.0, 2.0], ["a"], [], [1, 2.5]]))
    assert alone.tolist() == with_odd_rows[:50].tolist() == one_by_one(boxes)


def test_storage_does_not_change_a_word():
    floats = [0.25, -3.0, 1e-300, 0.0]
    assert cell_words(pd.Series(floats)).tolist() == cell_words(objects(floats)).tolist() \
        == one_by_one(floats)
    ints = [0, -1, 2**63 - 1, -(2**63)]
    assert cell_words(pd.Series(ints, dtype=np.int64)).tolist() == \
        cell_words(objects(ints)).tolist() == one_by_one(ints)
    as_lists = objects([[1.5, 2.5], [3.0, 4.0]])
    as_arrays = objects([np.array([1.5, 2.5]), np.array([3.0, 4.0], dtype=np.float32)])
    assert cell_words(as_lists).tolist() == cell_words(as_arrays).tolist()
    text = ["a", "b", "a", "é", ""]
    for dtype in (object, "str", "string[pyarrow]", "large_string[pyarrow]",
                  "string[python]"):  # Arrow's bytes, or Python strings
        assert cell_words(pd.Series(text, dtype=dtype)).tolist() == one_by_one(text)
    assert cell_words(pd.Series(text, dtype="category").astype(object)).tolist() == \
        one_by_one(text)


def test_different_cells_differ():
    cells = [1, 1.0, True, "1", [1], [1.0], [[1]], 0.0, -0.0, None, b"1"]
    words = one_by_one(cells)
    assert len(set(words)) == len(cells) - 3  # 1 is True; 0.0 is -0.0
    for mixed in ([1, 1.0, "1"], [1.0, 1, True], [0.0, -0.0, 0]):
        assert cell_words(objects(mixed)).tolist() == one_by_one(mixed)


def test_rows_fold_every_column_in_order():
    a = ("a", cell_words(pd.Series([1, 2])))
    b = ("b", cell_words(pd.Series(["x", "y"])))
    assert row_hashes([a, b]).tolist() != row_hashes([b, a]).tolist()
    renamed = ("c", b[1])
    assert row_hashes([a, b]).tolist() != row_hashes([a, renamed]).tolist()


def test_the_words_never_change():
    """Frozen: a table's UNASSIGNED rows keep their splits in every later version."""
    words = [("key", cell_words(pd.Series(["customer-0", "é"]))),
             ("spend", cell_words(pd.Series([176.25, -0.0]))),
             ("box", cell_words(objects([[0.5, 1.0], [2, 3]])))]
    assert row_hashes(words).tolist() == FROZEN


FROZEN = [2876720265253709284, 16798906730901512895]


def test_arrays_of_arrays_hash_as_their_nested_lists():
    """A cell that is a 2-D array is a list of rows, as `_value_word` reads it."""
    grids = [np.arange(6, dtype=np.float64).reshape(2, 3) + i for i in range(4)]
    assert cell_words(objects(grids)).tolist() == one_by_one(grids)

"""The words of messages (`tfrecorder/wording.py`)."""

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder.errors import OptionError
from tfrecorder.options import ImageOptions
from tfrecorder.wording import shown


@pytest.mark.parametrize(("value", "said"), [
    (np.zeros((100, 28, 28)), "ndarray of shape (100, 28, 28), dtype float64"),
    (pd.DataFrame({"a": range(500)}), "DataFrame of shape (500, 1)"),
    (pd.Series(range(9)), "Series of shape (9,), dtype int64"),
    (list(range(1000)), "[0, 1, 2, 3, 4, 5, 6, 7, ...]"),
    ("cat", "'cat'"),
    ((224,), "(224,)"),
])
def test_a_value_is_shown_on_one_short_line(value, said):
    assert shown(value) == said


def test_a_long_value_is_cut():
    text = shown("x" * 10_000)
    assert len(text) <= 80 and text.startswith("'xxx") and "..." in text


def test_a_bare_array_as_source_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError) as raised:
        tfrecorder.convert(np.zeros((100, 28, 28)), str(tmp_path / "out"), progress=False)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 400, message
    assert "not ndarray of shape (100, 28, 28), dtype float64" in message


def test_an_option_error_cuts_the_value_it_quotes():
    with pytest.raises(OptionError) as raised:
        ImageOptions(image_size=list(range(10_000)))
    assert len(str(raised.value)) < 200, raised.value

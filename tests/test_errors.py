"""Errors carry their data: the message is built from parts, and the options its advice
names are `Option`s, which `str()` renders as Python and a caller renders its own way."""

import pickle

import pytest

from tfrecorder.errors import VALUE, ImageError, Option, SchemaError, TooManyRejectedError


def schema_error() -> SchemaError:
    return SchemaError("column 'notes' has dtype complex128. Drop it with ",
                       Option("schema", {"notes": None}), ", or fill it with ",
                       Option("fill_missing", {"notes": VALUE}), ".", column="notes",
                       rows=[3, 7])


def test_str_renders_the_advice_as_python():
    assert str(schema_error()) == (
        "column 'notes' has dtype complex128. Drop it with schema={'notes': None}, or fill "
        "it with fill_missing={'notes': value}.")
    assert str(Option("max_rejected")) == "max_rejected"
    assert str(Option("overwrite", True)) == "overwrite=True"


def test_the_data_goes_with_the_message():
    error = schema_error()
    assert (error.column, error.rows, error.option) == ("notes", [3, 7], None)
    assert error.fix == (Option("schema", {"notes": None}),
                         Option("fill_missing", {"notes": VALUE}))
    assert isinstance(error, ValueError)


def test_render_gives_each_option_to_the_caller():
    rendered = schema_error().render(lambda option: f"<{option.name}>")
    assert rendered == "column 'notes' has dtype complex128. Drop it with <schema>, or fill " \
                       "it with <fill_missing>."


@pytest.mark.parametrize("error", [
    schema_error(),
    ImageError("row 2: ", Option("on_error", "reject"), rows=[2], option="on_error"),
    TooManyRejectedError("too many; raise ", Option("max_rejected"), num_rejected=3,
                         num_rows=4, reasons={"not a file": 3}),
], ids=["schema", "image", "too-many"])
def test_parts_and_data_cross_processes(error):
    """A Beam or pool worker's error reaches the driver pickled."""
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.fix == error.fix and copy.parts == error.parts
    assert vars(copy) == vars(error)

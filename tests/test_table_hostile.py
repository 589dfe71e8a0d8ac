"""The table is read exactly as written: hostile and unusual inputs to `load_table`.

Every input is built here: CSV bytes with quotes, line breaks and odd characters, small
images made with Pillow, folders under tmp_path.
"""

import io
import logging
import os

import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tfrecorder import SchemaError
from tfrecorder.sources import load_table
from tfrecorder.sources.image_paths import describe_missing_images, missing_local_images


def image_file(path, fmt="PNG", size=(16, 16)) -> str:
    """A small image in `fmt`, whatever the file's name says."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format=fmt)
    with open(path, "wb") as f:
        f.write(buffer.getvalue())
    return str(path)


def csv_file(tmp_path, data: bytes | str, name="table.csv") -> str:
    """A CSV file in tmp_path/data, written byte for byte (no newline translation)."""
    path = tmp_path / "data" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


# --- 1. CSV records, not lines ------------------------------------------------------------

def test_a_quoted_file_name_keeps_its_line_break(tmp_path):
    image_file(tmp_path / "data" / "we\nird.png")
    table = load_table(csv_file(tmp_path, 'TRAIN,"we\nird.png",cat\nTEST,b.png,dog\n'))
    assert table.rows["image_uri"].tolist() == ["we\nird.png", "b.png"]
    assert table.rows["uri"].tolist()[0] == str(tmp_path / "data" / "we\nird.png")
    assert missing_local_images(table) == [1]  # the odd name is read, b.png is absent
    assert table.source.index.tolist() == [1, 3]  # the line each record starts on


@pytest.mark.parametrize("character", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c",
                                       "\x1d", "\x1e"])
@pytest.mark.parametrize("quoted", [True, False])
def test_characters_splitlines_would_split_on_stay_in_the_cell(tmp_path, character, quoted):
    name = f"a{character}b.png"
    cell = f'"{name}"' if quoted else name
    table = load_table(csv_file(tmp_path, f"TRAIN,{cell},cat\nTEST,c.png,dog\n"))
    assert table.rows["image_uri"].tolist() == [name, "c.png"]
    assert table.rows["label"].tolist() == ["cat", "dog"]
    assert table.source.index.tolist() == [1, 2]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_errors_name_the_physical_line_a_record_starts_on(tmp_path, newline):
    text = newline.join(['TRAIN,"a', 'b.png",cat', "", 'BOGUS,"c', "", 'd.png",dog',
                         "TRIAN,e.png,cat", ""])
    with pytest.raises(SchemaError, match=r"'BOGUS' at line 4; 'TRIAN' at line 7\b"):
        load_table(csv_file(tmp_path, text))


def test_the_index_holds_start_lines_of_multi_line_records(tmp_path):
    text = 'image_uri,label\r\n"x\r\ny.png",cat\r\n\r\n"p.png","two\nlines"\r\nq.png,dog\r\n'
    table = load_table(csv_file(tmp_path, text))
    assert table.source.index.tolist() == [2, 5, 7]
    assert table.rows["image_uri"].tolist() == ["x\r\ny.png", "p.png", "q.png"]
    assert table.rows["label"].tolist() == ["cat", "two\nlines", "dog"]


def test_a_byte_order_mark_does_not_hide_the_header(tmp_path):
    table = load_table(csv_file(tmp_path, b"\xef\xbb\xbfimage_uri,label\r\n/a.png,cat\r\n"))
    assert list(table.source.columns) == ["image_uri", "label"]
    assert table.rows["label"].tolist() == ["cat"] and table.source.index.tolist() == [2]


def test_an_unclosed_quote_is_an_error_at_its_line_not_a_merge_of_the_rest(tmp_path):
    text = 'TRAIN,a.png,cat\nTRAIN,"b.png,cat\nTEST,c.png,dog\nTEST,d.png,dog\n'
    with pytest.raises(SchemaError, match=r"malformed record at line 2: unexpected end of "
                                          r"data\. Quote a cell"):
        load_table(csv_file(tmp_path, text))


def test_text_after_a_closing_quote_is_an_error(tmp_path):
    with pytest.raises(SchemaError, match=r"malformed record at line 2: ',' expected"):
        load_table(csv_file(tmp_path, 'TRAIN,a.png,cat\nTRAIN,"b".png,cat\n'))


def test_a_file_that_is_not_utf8_names_the_line(tmp_path):
    with pytest.raises(SchemaError, match=r"not UTF-8: byte 0xe9 at line 3 .*Save it as UTF-8"):
        load_table(csv_file(tmp_path, b"TRAIN,a.png,x\r\nTRAIN,b.png,x\r\nTEST,caf\xe9.png,x\n"))
    utf16 = "TRAIN,a.png,cat\n".encode("utf-16")
    with pytest.raises(SchemaError, match=r"is UTF-16 .*Save it as UTF-8"):
        load_table(csv_file(tmp_path, utf16))


# --- 2. Paths exactly as written ----------------------------------------------------------

def test_a_padded_path_names_its_own_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    image_file(tmp_path / "padded.png ")
    image_file(tmp_path / "padded.png")
    table = load_table(pd.DataFrame({"image_uri": ["padded.png ", " absent.png "]}))
    assert table.rows["image_uri"].tolist() == ["padded.png ", " absent.png "]
    assert table.rows["uri"].tolist() == [str(tmp_path / "padded.png "),
                                          str(tmp_path / " absent.png ")]
    assert missing_local_images(table) == [1]  # no file, stripped or not: rejected later


def test_a_padded_path_that_names_a_file_only_once_stripped_is_an_error(tmp_path):
    image_file(tmp_path / "data" / "padded.png")
    image_file(tmp_path / "data" / "ok.png")
    path = csv_file(tmp_path, "TRAIN,ok.png,cat\nTRAIN,padded.png ,cat\nTEST, padded.png,dog\n")
    with pytest.raises(SchemaError, match=r"column 'image_uri' has paths with whitespace around "
                                          r"them .*'padded.png ' at lines 2, 3 .*exactly as "
                                          r"written: remove the whitespace"):
        load_table(path)


def test_whitespace_before_a_uri_scheme_is_an_error(tmp_path):
    with pytest.raises(SchemaError, match=r"' gs://bucket/b.jpg' at row 1: whitespace before a "
                                          r"URI's scheme"):
        load_table(pd.DataFrame({"image_uri": ["gs://bucket/a.jpg", " gs://bucket/b.jpg"]}))


def test_other_columns_ignore_whitespace_as_before(tmp_path):
    table = load_table(csv_file(tmp_path, " train ,/a.png, cat \nTEST ,/b.png,dog\n"))
    assert table.rows["split"].tolist() == ["train", "test"]
    assert table.rows["label"].tolist() == ["cat", "dog"]
    assert table.rows["image_uri"].tolist() == ["/a.png", "/b.png"]


@pytest.mark.parametrize("uri,path", [
    ("file:///abs/a.png", "/abs/a.png"),
    ("file://localhost/abs/a.png", "/abs/a.png"),
    ("file://LOCALHOST/abs/a.png", "/abs/a.png"),
    ("FILE:///abs/a.png", "/abs/a.png"),
    ("file:/abs/a.png", "/abs/a.png"),
    ("file:///abs/a%20b%23.png", "/abs/a b#.png"),
    ("file:///abs/caf%C3%A9.png", "/abs/café.png"),
    ("file:///abs/tab\there.png", "/abs/tab\there.png"),
])
def test_file_uris_are_local_absolute_paths(tmp_path, uri, path):
    table = load_table(csv_file(tmp_path, f"TRAIN,{uri},cat\n"))
    assert table.rows["uri"].tolist() == [path]
    assert table.rows["image_uri"].tolist() == [uri]
    assert not table.has_remote_images


@pytest.mark.parametrize("uri,why", [
    ("file://images/a.png", r"names a host, here 'images'.* \(e.g. 'images/a.png'\)"),
    ("file://server/share/a.png", r"names a host, here 'server'"),
    ("file:///abs/a.png?x=1", r"'\?' or '#' in a file:// URI"),
    ("file:///abs/a.png#frag", r"'\?' or '#' in a file:// URI"),
    ("file:///abs/100%.png", r"a '%' not followed by two hex digits"),
    ("file:///abs/%FF.png", r"percent-escapes that are not UTF-8"),
    ("file://", r"without a path"),
    ("file://localhost", r"without a path"),
])
def test_malformed_file_uris_are_errors_naming_value_and_row(tmp_path, uri, why):
    path = csv_file(tmp_path, f"TRAIN,/ok.png,cat\nTRAIN,{uri},cat\n")
    with pytest.raises(SchemaError, match=rf"column 'image_uri' has URIs that cannot be read "
                                          rf"as written: '.*' at line 2: .*{why}"):
        load_table(path)


def test_a_csv_named_by_a_localhost_file_uri(tmp_path):
    path = csv_file(tmp_path, "TRAIN,img/a.png,cat\n")
    table = load_table(f"file://localhost{path}")
    assert table.rows["uri"].tolist() == [str(tmp_path / "data" / "img" / "a.png")]
    with pytest.raises(ValueError, match="names a host"):
        load_table("file://data/table.csv")


def test_folder_file_names_are_kept_as_listed(tmp_path):
    image_file(tmp_path / "cat" / "a.png ")
    table = load_table(str(tmp_path))
    assert table.rows["uri"].tolist() == [str(tmp_path / "cat" / "a.png ")]
    assert missing_local_images(table) == []


# --- 3. Label spellings -------------------------------------------------------------------

def frame(**columns):
    n = len(next(iter(columns.values())))
    columns.setdefault("image_uri", [f"/img/{i}.png" for i in range(n)])
    return pd.DataFrame(columns)


@pytest.mark.parametrize("labels,both", [
    (["1", "01", "2", "1"], r"'1' \(rows 0, 3\) and '01' \(row 1\)"),
    (["+1", "1"], r"'\+1' \(row 0\) and '1' \(row 1\)"),
    (["-0", "0"], r"'-0' \(row 0\) and '0' \(row 1\)"),
    ([1, "01"], r"'1' \(row 0\) and '01' \(row 1\)"),
])
def test_two_spellings_of_one_class_id_are_an_error(labels, both):
    with pytest.raises(SchemaError, match=rf"column 'label' spells class id -?\d in different "
                                          rf"ways: {both}\. .*schema=\{{'label': 'StringLabel'\}}"
                                          rf".*schema=\{{'label': 'IntegerLabel'\}}"):
        load_table(frame(label=labels))


def test_colliding_spellings_in_a_csv_name_its_lines(tmp_path):
    with pytest.raises(SchemaError, match=r"'01' \(line 1\) and '1' \(lines 2, 4\)"):
        load_table(csv_file(tmp_path, "TRAIN,/a.png,01\nTRAIN,/b.png,1\nTEST,/c.png,2\n"
                                      "TEST,/d.png,1\n"))


def test_colliding_spellings_in_multi_label_rows(tmp_path):
    with pytest.raises(SchemaError, match=r"column 'label' spells class id 7 in different ways: "
                                          r"'7' \(row 0\) and '07' \(row 1\)"):
        load_table(frame(label=[["7"], ["07", "1"]]))
    with pytest.raises(SchemaError, match=r"column 'label' spells class id 7 in different ways: "
                                          r"'7' \(lines 1, 2\) and '07' \(line 2\)"):
        load_table(csv_file(tmp_path, "TRAIN,/a.png,7,1\nTEST,/b.png,07,7\n"))  # AutoML rows
    table = load_table(frame(label=[["7"], ["07", "1"]]), schema={"label": "IntegerLabel"})
    assert table.rows["label"].tolist() == [[7], [7, 1]]


def test_a_declared_type_decides_what_spellings_mean():
    labels = ["1", "01", "2"]
    assert load_table(frame(label=labels), schema={"label": "StringLabel"}) \
        .rows["label"].tolist() == ["1", "01", "2"]
    assert load_table(frame(label=labels), schema={"label": "IntegerLabel"}) \
        .rows["label"].tolist() == [1, 1, 2]


def test_labels_without_a_collision_are_read_as_before():
    assert load_table(frame(label=["007", "2"])).rows["label"].tolist() == [7, 2]
    assert load_table(frame(label=[" 1", "1", "2 "])).rows["label"].tolist() == [1, 1, 2]
    assert load_table(frame(label=[3, 1])).rows["label"].tolist() == [3, 1]
    assert load_table(frame(label=["b", " b"])).rows["label"].tolist() == ["b", "b"]


# --- 4. Nothing to convert ----------------------------------------------------------------

@pytest.mark.parametrize("text", ["image_uri,label\n", "\ufeffsplit,image_uri,label\r\n\r\n  \n"])
def test_a_csv_with_a_header_and_no_rows_is_an_error(tmp_path, text):
    path = csv_file(tmp_path, text)
    with pytest.raises(SchemaError, match=r"has a header \((split, )?image_uri, label\) but no "
                                          r"rows"):
        load_table(path)
    with pytest.raises(SchemaError, match="but no rows"):
        tfrecorder.convert(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_table_without_rows_is_an_error():
    with pytest.raises(SchemaError, match=r"the table has no rows \(its columns: \['image_uri', "
                                          r"'label'\]\)"):
        load_table(pd.DataFrame({"image_uri": [], "label": []}))


@pytest.mark.parametrize("columns,schema,found", [
    ({"split": ["TRAIN"], "label": ["cat"]}, None,
     r"'split' \(the split\) and 'label' \(a label\)"),
    ({"label": ["cat"]}, None, r"'label' \(a label\);"),
    ({"split": ["TRAIN"]}, None, r"'split' \(the split\);"),
    ({"image_uri": ["/a.png"], "label": [1]}, {"image_uri": None},
     r"'label' \(a label\) \(schema drops \['image_uri'\]\)"),
])
def test_a_table_of_labels_and_splits_only_is_an_error(columns, schema, found):
    with pytest.raises(SchemaError, match=rf"the table has nothing to store: its columns are "
                                          rf"{found}.*no image column and no input column.*"
                                          rf"'image_uri'"):
        load_table(pd.DataFrame(columns), schema=schema)


def test_a_csv_of_split_and_label_only_is_an_error(tmp_path):
    with pytest.raises(SchemaError, match="nothing to store"):
        load_table(csv_file(tmp_path, "split,label\nTRAIN,cat\n"))


def test_inputs_without_images_stay_allowed():
    table = load_table(pd.DataFrame({"split": ["TRAIN"], "label": ["cat"], "x": [1.5]}))
    assert not table.has_images and [c.name for c in table.inputs] == ["x"]


# --- 5. Image columns by what the values are ------------------------------------------------

@pytest.mark.parametrize("extension", [".avif", ".jp2", ".ico", ".JP2", ".heic", ".qoi", ".dds"])
def test_a_column_of_less_common_image_paths_is_not_stored_as_text(extension):
    with pytest.raises(SchemaError, match=r"no 'image_uri' column, and column 'pic' looks like "
                                          r"image paths"):
        load_table(pd.DataFrame({"pic": [f"a{extension}", f"b{extension}"], "label": ["x", "y"]}))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP", "ICO",
                                 "JPEG2000", "AVIF", "QOI", "DDS"])
def test_files_without_an_extension_are_known_by_their_first_bytes(tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    image_file(tmp_path / "shots" / "0001", fmt=fmt)
    with pytest.raises(SchemaError, match=r"column 'pic' looks like image paths \(e.g. "
                                          r"'missing'\)"):
        load_table(pd.DataFrame({"pic": ["missing", "shots/0001"], "label": ["x", "y"]}))


def test_text_that_names_a_non_image_file_stays_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").write_bytes(b"BM plain text, not a bitmap")
    table = load_table(pd.DataFrame({"note": ["notes", "other"], "label": ["x", "y"]}))
    assert [c.name for c in table.inputs] == ["note"]


def test_a_fifo_is_never_waited_on_to_sniff_it(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    table = load_table(pd.DataFrame({"note": ["pipe"], "label": ["x"]}))  # returns at once
    assert [c.name for c in table.inputs] == ["note"]
    image_file(tmp_path / "cat" / "1.png")  # a stray FIFO in an image folder: skipped
    assert load_table(str(tmp_path)).rows["label"].tolist() == ["cat"]
    assert "Skipping 1 file(s)" in caplog.text


def test_headerless_rows_of_less_common_images_have_no_split(tmp_path):
    table = load_table(csv_file(tmp_path, "a.avif,cat,dog\nb.jp2,bird\n"))
    assert list(table.source.columns) == ["image_uri", "label"]
    assert table.rows["label"].tolist() == [["cat", "dog"], ["bird"]]


def test_headerless_rows_of_extensionless_images_have_no_split(tmp_path):
    image_file(tmp_path / "data" / "img001")
    table = load_table(csv_file(tmp_path, "img001,cat,dog\nimg002,bird\n"))
    assert list(table.source.columns) == ["image_uri", "label"]
    # nothing there to look at: the first cell is a (misspelt) split, as before
    with pytest.raises(SchemaError, match="column 'split' has unknown values: 'img009'"):
        load_table(csv_file(tmp_path, "img009,cat,dog\n", name="other.csv"))


@pytest.mark.parametrize("stray,fmt", [("stray.avif", "PNG"), ("stray.JP2", "PNG"),
                                       ("stray", "PNG"), ("scan", "TIFF")])
def test_images_outside_label_folders_are_known_by_name_or_bytes(tmp_path, stray, fmt):
    image_file(tmp_path / "cat" / "1.png")
    image_file(tmp_path / stray, fmt=fmt)
    with pytest.raises(SchemaError, match=rf"1 image\(s\) sit outside a label folder.*{stray}"):
        load_table(str(tmp_path))


def test_other_files_outside_label_folders_are_still_skipped(tmp_path, caplog):
    image_file(tmp_path / "cat" / "1.png")
    (tmp_path / "LICENSE").write_text("MIT")
    (tmp_path / "notes.pdf").write_bytes(b"%PDF-1.4")
    assert load_table(str(tmp_path)).rows["label"].tolist() == ["cat"]
    assert "Skipping 2 file(s)" in caplog.text


# --- 6. Column names ------------------------------------------------------------------------

@pytest.mark.parametrize("split,image,label", [
    ("Split", "IMAGE_URI", "Label"), ("SPLITS", "Image URI", "labels"),
    ("split", "image-uri", "LABELS"), ("splits", "ImageUri", "Labels"),
])
def test_role_names_in_another_case_or_the_plural_take_their_role(split, image, label, caplog):
    caplog.set_level(logging.INFO, logger="tfrecorder")
    table = load_table(pd.DataFrame({split: ["test"], image: ["/a.png"], label: ["cat"]}))
    assert table.rows["split"].tolist() == ["test"]
    assert table.rows["image_uri"].tolist() == ["/a.png"]
    assert table.rows["label"].tolist() == ["cat"] and not table.inputs
    assert list(table.source.columns) == [split, image, label]
    for name, role in ((split, "split"), (image, "image_uri"), (label, "label")):
        if name != role:
            assert f"Reading column {name!r} as the {role!r} column." in caplog.text


def test_a_csv_header_in_another_case_is_detected_and_mapped(tmp_path):
    table = load_table(csv_file(tmp_path, "Split,Image_URI,Labels\nTRAIN,/a.png,cat\n"))
    assert table.rows["split"].tolist() == ["train"] and table.rows["label"].tolist() == ["cat"]


@pytest.mark.parametrize("names", [["label", "Label"], ["label", "labels"],
                                   ["split", "SPLIT"], ["image_uri", "Image_URI"]])
def test_two_columns_naming_one_role_are_an_error(names):
    columns = {"image_uri": ["/a.png"], "split": ["TRAIN"], "label": ["x"], names[1]: ["y"]}
    with pytest.raises(SchemaError, match=rf"columns \['{names[0]}', '{names[1]}'\] all name "
                                          rf"the '{names[0]}' column .* schema=\{{'{names[1]}': "
                                          rf"None\}}"):
        load_table(pd.DataFrame(columns))


def test_the_schema_settles_which_column_is_which():
    table = load_table(pd.DataFrame({"image_uri": ["/a.png"], "label": ["x"], "Label": ["y"]}),
                       schema={"Label": "StringInput"})
    assert table.rows["label"].tolist() == ["x"] and table.rows["Label"].tolist() == ["y"]


SET_PATH_CLASS = (r"the table has no 'split' column, and column 'set' holds only split names "
                  r"\(e.g. 'TRAIN'\); no 'image_uri' column, and column 'path' looks like image "
                  r"paths \(e.g. '(/img/)?a.png'\); no 'label' column, and column 'class' is "
                  r"named like a label column\. Rename the columns to 'split' and 'image_uri' "
                  r"and 'label', or declare them: schema=\{'set': 'SplitKey', 'path': "
                  r"'ImageUri', 'class': 'StringLabel'\}")


def test_set_path_class_columns_are_asked_about():
    with pytest.raises(SchemaError, match=SET_PATH_CLASS):
        load_table(pd.DataFrame({"set": ["TRAIN", "TEST"], "path": ["/img/a.png", "/img/b.png"],
                                 "class": ["cat", "dog"]}))


def test_a_set_path_class_csv_header_is_detected_and_asked_about(tmp_path):
    path = csv_file(tmp_path, "set,path,class\nTRAIN,a.png,cat\nTEST,b.png,dog\n")
    with pytest.raises(SchemaError, match=SET_PATH_CLASS):
        load_table(path)
    table = load_table(path, schema={"set": "SplitKey", "path": "ImageUri",
                                     "class": "StringLabel"})
    assert table.rows["split"].tolist() == ["train", "test"]
    assert table.rows["label"].tolist() == ["cat", "dog"]


@pytest.mark.parametrize("columns,message", [
    ({"image_uri": ["/a.png", "/b.png"], "fold": ["train", "Validation"], "label": ["x", "y"]},
     r"no 'split' column, and column 'fold' holds only split names \(e.g. 'train'\).*"
     r"schema=\{'fold': 'SplitKey'\}"),
    ({"image_uri": ["/a.png", "/b.png"], "subset": ["A", "B"], "label": ["x", "y"]},
     r"column 'subset' is named like a split column"),
    ({"image_uri": ["/a.png", "/b.png"], "Category": ["x", "y"]},
     r"no 'label' column, and column 'Category' is named like a label column.*"
     r"schema=\{'Category': 'StringLabel'\}"),
    ({"image_uri": ["/a.png", "/b.png"], "class_id": [3, 4]},
     r"column 'class_id' is named like a label column.*schema=\{'class_id': 'IntegerLabel'\}"),
    ({"target": ["1", "0"], "x": [1.0, 2.0]},
     r"column 'target' is named like a label column.*'IntegerLabel'"),
    ({"image_uri": ["/a.png"], "class": ["x"], "category": ["y"]},
     r"column 'class' is named like a label column; column 'category' is named like a label "
     r"column \(only one of 'class' and 'category' can be the label\)"),
])
def test_columns_that_look_like_a_missing_role_are_asked_about(columns, message):
    with pytest.raises(SchemaError, match=message):
        load_table(pd.DataFrame(columns))


# Typos of each role's name, as a header would hold them: one letter left out, added,
# changed, or two swapped, in any case and with '_', '-' or a space.
NEAR_MISSES = {
    "label": ["lable", "lables", "labl", "labe", "lbel", "Lable", "LABELL", "lablels", "labes"],
    "split": ["spilt", "splt", "spli", "Spilt", "slpit", "spliit", "SPLTS"],
    "image_uri": ["imge_uri", "image_ur", "imageuir", "image-urri", "Imag_URI", "imagesuri",
                  "iamge_uri"],
}
DECLARED = {"label": "StringLabel", "split": "SplitKey", "image_uri": "ImageUri"}


def _one_role_misspelled(role: str, typo: str) -> str:
    """A headed CSV of three rows with `role`'s column named `typo`."""
    columns = {"split": ["TRAIN", "TRAIN", "TEST"], "image_uri": ["a.png", "b.png", "c.png"],
               "label": ["cat", "dog", "cat"]}
    columns[typo] = columns.pop(role)
    return "\n".join([",".join(columns), *map(",".join, zip(*columns.values())), ""])


@pytest.mark.parametrize("role,typo", [(role, typo) for role, typos in NEAR_MISSES.items()
                                       for typo in typos])
def test_a_misspelled_role_column_is_asked_about_with_did_you_mean(tmp_path, role, typo):
    path = csv_file(tmp_path, _one_role_misspelled(role, typo))
    for name in "abc":
        image_file(tmp_path / "data" / f"{name}.png")
    with pytest.raises(SchemaError, match=rf"no {role!r} column, and column {typo!r} "
                                          rf"[^;]* \(did you mean {role!r}\?\)\. Rename the "
                                          rf"column to {role!r}, or declare it: "
                                          rf"schema=\{{{typo!r}: {DECLARED[role]!r}\}}"):
        load_table(path)
    table = load_table(path, schema={typo: DECLARED[role]})
    assert role in table.rows and typo not in table.rows


def test_a_header_of_only_misspelled_roles_is_read_as_a_header(tmp_path):
    path = csv_file(tmp_path, "spilt,imge_uri,lable\nTRAIN,a.png,cat\nTEST,b.png,dog\n")
    with pytest.raises(SchemaError, match=r"schema=\{'spilt': 'SplitKey', 'imge_uri': "
                                          r"'ImageUri', 'lable': 'StringLabel'\}"):
        load_table(path)


@pytest.mark.parametrize("name", ["table", "cable", "level", "spill", "lab", "image_id",
                                  "image_uid", "image_size", "labeled", "uri_2", "splitter"])
def test_names_two_slips_from_a_role_pass_through_as_inputs(name):
    table = load_table(pd.DataFrame({"image_uri": ["/a.png"], name: ["x"]}))
    assert [c.name for c in table.inputs] == [name]


def test_such_columns_beside_the_role_pass_through_as_inputs():
    table = load_table(pd.DataFrame({"split": ["TRAIN"], "image_uri": ["/a.png"],
                                     "label": ["x"], "class": ["y"], "set": ["TEST"],
                                     "thumb": ["/t.png"], "lable": ["z"]}))
    assert [c.name for c in table.inputs] == ["class", "set", "thumb", "lable"]


def test_a_headerless_row_whose_label_is_a_column_name_is_not_a_header(tmp_path):
    table = load_table(csv_file(tmp_path, "TRAIN,/a.png,label\nTEST,/b.png,class\n"))
    assert table.rows["label"].tolist() == ["label", "class"]


@pytest.mark.parametrize("layout", [["train", "val"], ["Train", "VALID"], ["train", "dev"],
                                    ["TRAIN", "Dev", "test"], ["train", "Validation", "val"]])
def test_val_valid_and_dev_folders_are_the_validation_split(tmp_path, layout):
    for i, split in enumerate(layout):
        image_file(tmp_path / split / "cat" / f"{i}.png")
        image_file(tmp_path / split / "dog" / f"{i}.png")
    table = load_table(str(tmp_path))
    assert set(table.rows["label"]) == {"cat", "dog"}
    expected = {{"train": "train", "test": "test"}.get(s.lower(), "validation") for s in layout}
    assert set(table.rows["split"]) == expected


def test_split_folders_beside_other_folders_are_an_error(tmp_path):
    image_file(tmp_path / "train" / "cat" / "1.png")
    image_file(tmp_path / "val" / "cat" / "2.png")
    image_file(tmp_path / "extra" / "3.png")
    with pytest.raises(SchemaError, match=r"split folders with label folders inside "
                                          r"\(\['train', 'val'\]\) beside other folders "
                                          r"\(\['extra'\]\)"):
        load_table(str(tmp_path))


def test_a_class_folder_named_like_a_split_stays_a_class(tmp_path):
    image_file(tmp_path / "cat" / "1.png")
    image_file(tmp_path / "dev" / "2.png")
    assert load_table(str(tmp_path)).rows["label"].tolist() == ["cat", "dev"]


@pytest.mark.parametrize("text,what", [
    ("image_uri;label\n/a.png;cat\n/b.png;dog\n", "semicolon"),
    ("split\timage_uri\tlabel\nTRAIN\t/a.png\tcat\n", "tab"),
    ("Image_URI;Labels\n", "semicolon"),
    ("TRAIN;/a.png;cat\nTEST;/b.png;dog\n", "semicolon"),
])
def test_a_semicolon_or_tab_separated_file_is_named_as_such(tmp_path, text, what):
    with pytest.raises(SchemaError, match=rf"looks {what}-separated: its first line .* save it "
                                          rf"with commas"):
        load_table(csv_file(tmp_path, text))


def test_a_path_with_a_semicolon_is_not_taken_for_a_separator(tmp_path):
    table = load_table(csv_file(tmp_path, "/img/a;b.png\n/img/c.png\n"))
    assert table.rows["image_uri"].tolist() == ["/img/a;b.png", "/img/c.png"]


# --- 7. A cheap check that local images exist -----------------------------------------------

def test_missing_local_images_names_every_kind_of_non_file(tmp_path):
    image_file(tmp_path / "img" / "ok.png")
    os.symlink(tmp_path / "img" / "ok.png", tmp_path / "img" / "link.png")
    os.symlink(tmp_path / "img" / "gone.png", tmp_path / "img" / "broken.png")
    os.mkfifo(tmp_path / "img" / "pipe.png")
    (tmp_path / "img" / "folder.png").mkdir()
    uris = ["img/ok.png", "img/link.png", "img/broken.png", "img/pipe.png", "img/folder.png",
            "img/absent.png", "nowhere/a.png", "img/ok.png/x.png", "gs://bucket/a.png",
            f"file://{tmp_path}/img/ok.png", "img/OK.PNG", str(tmp_path / "img" / "ok.png"),
            "img/../img/ok.png", "img/./ok.png"]
    (tmp_path / "t.csv").write_text("".join(f"TRAIN,{uri},cat\n" for uri in uris))
    table = load_table(tmp_path / "t.csv")
    missing = missing_local_images(table)
    assert [uris[p] for p in missing] == ["img/broken.png", "img/pipe.png", "img/folder.png",
                                          "img/absent.png", "nowhere/a.png", "img/ok.png/x.png",
                                          "img/OK.PNG"]
    text, reasons = describe_missing_images(table, missing)
    assert reasons == {"no such file": 3, "a FIFO, not a regular file": 1,
                       "a folder, not a file": 1, "no such file, nor its folder": 1,
                       "a file where its path needs a folder": 1}
    assert text.startswith("Most common reasons: 3 x no such file; ")
    assert f"line 3: 'img/broken.png' (read as '{tmp_path}/img/broken.png')" in text
    assert f"Relative paths (7 of these rows) are resolved against '{tmp_path}'." in text


def test_the_description_says_where_a_relative_path_would_have_been(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    image_file(tmp_path / "img" / "a.png")
    table = load_table(csv_file(tmp_path, "TRAIN,img/a.png,cat\n"))
    text, _ = describe_missing_images(table, missing_local_images(table))
    assert f"'img/a.png' exists relative to the working directory instead " \
           f"('{tmp_path}/img/a.png'): paths in a CSV or Parquet file are relative to that " \
           "file's folder" \
        in text


def test_tables_without_local_images_have_nothing_missing():
    assert missing_local_images(load_table(pd.DataFrame({"x": [1], "label": ["a"]}))) == []
    table = load_table(pd.DataFrame({"image_uri": ["gs://b/a.png", "s3://b/c.png"]}))
    assert missing_local_images(table) == []


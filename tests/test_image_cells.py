"""Images held in memory (issue 17): bytes, arrays, PIL images and Hugging Face dicts in a
table's cells, and arrays, dicts and Hugging Face datasets as sources. Every dataset is
read back with TensorFlow and its pixels compared with the source's, exactly."""

from __future__ import annotations

import filecmp
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import (
    dataset_folder_files,
    image_bytes,
    make_image,
    read_manifest,
    read_split,
    run_cli,
)
from PIL import Image

import tfrecorder
from tfrecorder.errors import OptionError, SchemaError


def _records(out, split="train") -> dict[bytes, dict]:
    """The split's records by image_name."""
    return {r["image_name"]: r for r in read_split(out, split)}


def _decoded16(record: dict) -> np.ndarray:
    import tensorflow as tf

    return tf.io.decode_png(record["image"], dtype=tf.uint16).numpy()


def _convert(source, tmp_path, name="out", **options):
    out = str(tmp_path / name)
    options.setdefault("progress", False)
    return tfrecorder.convert(source, out, **options), out


ARRAYS = {  # shape, dtype -> the channels TensorFlow decodes
    ((9, 7), np.uint8): 1, ((9, 7, 1), np.uint8): 1, ((9, 7, 2), np.uint8): 2,
    ((9, 7, 3), np.uint8): 3, ((9, 7, 4), np.uint8): 4, ((9, 7), np.uint16): 1,
    ((9, 7, 1), np.uint16): 1, ((9, 7, 2), np.uint16): 2, ((9, 7, 3), np.uint16): 3,
    ((9, 7, 4), np.uint16): 4,
}


@pytest.mark.parametrize("shape, dtype", list(ARRAYS), ids=lambda v: str(v))
def test_arrays_of_every_shape_and_dtype_round_trip_exactly_as_png(shape, dtype, tmp_path):
    rng = np.random.default_rng(7)
    x = rng.integers(0, np.iinfo(dtype).max + 1, (5, *shape), dtype=dtype)
    result, out = _convert((x, np.arange(5) % 2), tmp_path, split="train")
    assert result.counts == {"train": 5} and result.num_rejected == 0
    records = _records(out)
    assert sorted(records) == [b"0", b"1", b"2", b"3", b"4"]  # the row index names them
    for i, array in enumerate(x):
        record = records[str(i).encode()]
        assert record["image_format"] == b"png" and record["image_uri"] == b""
        assert record["image_channels"] == ARRAYS[shape, dtype]
        assert (record["image_height"], record["image_width"]) == (9, 7)
        expected = array if array.ndim == 3 else array[..., None]
        decoded = _decoded16(record) if dtype == np.uint16 else record["pixels"]
        assert decoded.dtype == expected.dtype
        np.testing.assert_array_equal(decoded, expected)
        assert record["label"] == i % 2
    tfrecorder.verify(out)  # every stored image passes the writer's own checks


def test_bytes_pil_images_and_hugging_face_dicts_round_trip(tmp_path):
    jpeg = image_bytes(make_image((40, 30), seed=1), "JPEG", quality=90)
    png = image_bytes(make_image((20, 10), "RGBA", seed=2), "PNG")
    grey = make_image((12, 8), "L", seed=3)
    palette = make_image((16, 16), seed=4).convert("P", palette=Image.Palette.ADAPTIVE)
    cells = [jpeg, bytearray(png), grey, palette, {"bytes": png, "path": "crops/cat.png"},
             {"bytes": jpeg, "path": None}]
    table = pd.DataFrame({"image": pd.Series(cells, dtype=object),
                          "label": ["a", "b", "a", "b", "a", "b"]})
    result, out = _convert(table, tmp_path, split="train")
    assert result.counts == {"train": 6}
    records = _records(out)
    assert records[b"0"]["image"] == jpeg and records[b"0"]["image_format"] == b"jpeg"
    assert records[b"1"]["image"] == png  # bytes are kept as a file's are
    np.testing.assert_array_equal(records[b"2"]["pixels"][..., 0], np.asarray(grey))
    np.testing.assert_array_equal(records[b"3"]["pixels"], np.asarray(palette.convert("RGB")))
    named = records[b"cat.png"]  # a dict's path names its image
    assert named["image_uri"] == b"crops/cat.png" and named["image"] == png
    assert records[b"5"]["image"] == jpeg and records[b"5"]["image_uri"] == b""


def test_every_image_option_applies_to_arrays(tmp_path):
    x = np.stack([np.asarray(make_image((64, 48), seed=s)) for s in range(3)])
    wide = (x.astype(np.uint16) * 257)[:2]  # 16-bit colour
    _, out = _convert((x, [0, 1, 0]), tmp_path, "jpeg", split="train", image_format="jpeg",
                      jpeg_quality=80)
    for i, record in _records(out).items():
        assert record["image_format"] == b"jpeg"
        reference = Image.open(io.BytesIO(image_bytes(Image.fromarray(x[int(i)]), "JPEG",
                                                      quality=80)))
        np.testing.assert_array_equal(record["pixels"], np.asarray(reference))
    _, out = _convert((x, [0, 1, 0]), tmp_path, "side", split="train", max_image_side=32)
    for record in _records(out).values():  # resized: JPEG, as for files ("auto")
        assert (record["image_height"], record["image_width"]) == (24, 32)
        assert record["image_format"] == b"jpeg"
    _, out = _convert((wide, [0, 1]), tmp_path, "wide", split="train", image_size=(24, 32),
                      image_format="png")
    for i, record in _records(out).items():  # 16-bit colour, resized plane by plane
        decoded = _decoded16(record)
        assert decoded.shape == (24, 32, 3) and decoded.dtype == np.uint16
        plane = Image.fromarray(wide[int(i)][..., 0]).resize((32, 24), Image.Resampling.BICUBIC)
        np.testing.assert_array_equal(decoded[..., 0], np.asarray(plane))
    rgba = np.stack([np.asarray(make_image((64, 48), "RGBA", seed=s)) for s in range(2)])
    _, out = _convert((rgba, [0, 1]), tmp_path, "rgba", split="train", max_image_side=32)
    for i, record in _records(out).items():  # with alpha: PNG, resized as Pillow resizes
        assert record["image_format"] == b"png"
        expected = Image.fromarray(rgba[int(i)]).resize((32, 24), Image.Resampling.BICUBIC)
        np.testing.assert_array_equal(record["pixels"], np.asarray(expected))
    _, out = _convert((wide, [0, 1]), tmp_path, "raw", split="train", image_format="raw")
    for i, record in _records(out).items():  # 8 bits of 16, as TensorFlow reads them
        np.testing.assert_array_equal(record["pixels"], (wide[int(i)] >> 8).astype(np.uint8))
    result, out = _convert((x, [0, 1, 0]), tmp_path, "pixels", split="train",
                           max_image_pixels=1000, max_rejected=1.0)
    assert result.num_rejected == 3
    rejected = pd.read_csv(os.path.join(out, "rejected.csv"))
    assert rejected["image"].tolist() == ["<uint8 array of shape 48x64x3>"] * 3
    assert rejected["reason"].str.endswith("more than the limit of 1,000").all()


def test_a_bad_array_is_an_error_that_names_its_rows_before_any_work(tmp_path):
    good = np.zeros((4, 4, 3), np.uint8)
    cells = [good, good, good, good.astype(np.float64), good, good[:, :, 0][0], good,
             np.zeros((4, 4, 5), np.uint8), "a string"]
    table = pd.DataFrame({"image": pd.Series(cells, dtype=object), "label": [0] * 9})
    with pytest.raises(SchemaError) as error:
        _convert(table, tmp_path)
    message = str(error.value)
    assert "row 3: a float64 array of shape 4x4x3; images are uint8 or uint16" in message
    assert "row 5: a uint8 array of shape 4; images are H x W" in message
    assert "row 7: a uint8 array of shape 4x4x5" in message
    assert "row 8: a str, not an image" in message
    assert error.value.column == "image" and sorted(error.value.rows) == [3, 5, 7, 8]
    assert not (tmp_path / "out").exists()
    with pytest.raises(SchemaError, match="rows 0, 1.*float32 array"):
        _convert((np.zeros((2, 4, 4, 3), np.float32), [0, 1]), tmp_path)


def test_both_engines_write_the_same_bytes_for_images_in_memory(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (12, 8, 8, 3), dtype=np.uint8)
    cells = [*x[:4], *(Image.fromarray(a) for a in x[4:8]),
             *(image_bytes(Image.fromarray(a), "PNG") for a in x[8:11]), b"not an image"]
    table = pd.DataFrame({"image": pd.Series(cells, dtype=object), "label": ["a", "b"] * 6,
                          "n": np.arange(12)})
    _, local = _convert(table, tmp_path, "local", max_rejected=0.5)
    _, beam = _convert(table, tmp_path, "beam", max_rejected=0.5, runner="DirectRunner")
    names = dataset_folder_files(local)
    assert names == dataset_folder_files(beam) and "rejected.csv" in names
    for name in names:
        assert filecmp.cmp(os.path.join(local, name), os.path.join(beam, name),
                           shallow=False), name
    rejected = pd.read_csv(os.path.join(local, "rejected.csv"))
    assert rejected["image"].tolist() == ["<12 bytes>"]
    assert rejected["reason"].str.startswith("not an image").all()


def test_a_dict_of_splits_with_class_names(tmp_path):
    rng = np.random.default_rng(1)
    x_train = rng.integers(0, 256, (6, 5, 5), dtype=np.uint8)
    x_test = rng.integers(0, 256, (3, 5, 5), dtype=np.uint8)
    result, out = _convert({"train": (x_train, [0, 1, 2, 0, 1, 2]), "test": (x_test, [2, 2, 0])},
                           tmp_path, class_names=["cat", "dog", "eel"])
    assert result.counts == {"train": 6, "test": 3}
    labels = read_manifest(out)["labels"]
    assert labels["vocabulary"] == ["cat", "dog", "eel"]
    test = _records(out, "test")
    assert sorted(test) == [b"test[0]", b"test[1]", b"test[2]"]  # x_test[i]
    for i in range(3):
        record = test[f"test[{i}]".encode()]
        np.testing.assert_array_equal(record["pixels"][..., 0], x_test[i])
        assert record["label"] == [2, 2, 0][i]
    with pytest.raises(SchemaError, match=r"do not name: 3, at row 1\b"):
        _convert((x_test, [0, 3, 1]), tmp_path, "bad", class_names=["cat", "dog"])
    with pytest.raises(OptionError, match="holds text labels"):
        _convert((x_test, ["a", "b", "a"]), tmp_path, "text", class_names=["a", "b"])
    with pytest.raises(SchemaError, match="split names as its keys"):
        _convert({"training": (x_test, [0, 1, 1]), "extra": (x_test, [0, 1, 1])}, tmp_path)


def test_a_dict_of_columns_and_the_split_option(tmp_path):
    x = np.random.default_rng(2).integers(0, 256, (4, 6, 6, 3), dtype=np.uint8)
    boxes = np.arange(16, dtype=np.float32).reshape(4, 4)
    result, out = _convert({"image": x, "label": ["a", "b", "a", "b"], "box": boxes},
                           tmp_path, split="validation")
    assert result.counts == {"validation": 4}
    assert read_manifest(out)["features"]["box"]["shape"] == [None]  # a list a row
    with pytest.raises(OptionError, match="split gives every row one split"):
        _convert({"image": x, "split": ["TRAIN"] * 4}, tmp_path, "both", split="test")
    with pytest.raises(SchemaError, match="different lengths"):
        _convert({"image": x, "label": [0, 1]}, tmp_path, "short")


def test_unassigned_rows_split_by_content_so_copies_share_a_split(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (200, 4, 4), dtype=np.uint8)
    x[100:] = x[:100]  # every image twice
    _, out = _convert((x, np.zeros(200, int)), tmp_path, duplicates="warn")
    split_of = {}
    for split in ("train", "validation", "test"):
        for record in read_split(out, split):
            split_of.setdefault(record["pixels"].tobytes(), set()).add(split)
    assert len(split_of) == 100 and all(len(s) == 1 for s in split_of.values())
    assert len({s for found in split_of.values() for s in found}) == 3
    shuffled = np.random.default_rng(4).permutation(200)  # another order: the same splits
    _, again = _convert((x[shuffled], np.zeros(200, int)), tmp_path, "again")
    for split in ("train", "validation", "test"):
        for record in read_split(again, split):
            assert split_of[record["pixels"].tobytes()] == {split}


def test_byte_columns_that_are_not_images_stay_bytes_features(tmp_path):
    table = pd.DataFrame({"image_uri": [str(tmp_path / "a.png")], "label": ["a"],
                          "blob": [b"\x00\x01 not an image"],
                          "thumb": [image_bytes(make_image((8, 8)), "PNG")]})
    make_image((8, 8)).save(tmp_path / "a.png")
    _, out = _convert(table, tmp_path, split="train")
    features = read_manifest(out)["features"]
    assert features["blob"]["dtype"] == "string" and features["thumb"]["dtype"] == "string"
    record = read_split(out, "train")[0]
    assert record["blob"] == b"\x00\x01 not an image"  # stored as they are
    # Without an image column, bytes that are images are the images; others stay bytes.
    _, out = _convert(pd.DataFrame({"blob": [b"abc", b"def"], "n": [1, 2]}), tmp_path,
                      "blobs", split="train")
    assert read_manifest(out)["features"]["blob"]["dtype"] == "string"
    assert "image" not in read_manifest(out)["features"]
    _, out = _convert(pd.DataFrame({"thumb": table["thumb"], "n": [1]}), tmp_path,
                      "thumbs", split="train")
    assert read_split(out, "train")[0]["image"] == table["thumb"][0]


def test_a_hugging_face_dataset_dict_with_class_labels(tmp_path):
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(5)
    images = [Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8))
              for _ in range(9)]
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["cat", "dog"])})
    full = datasets.Dataset.from_dict({"img": images, "label": [i % 2 for i in range(9)]},
                                      features=features)
    splits = datasets.DatasetDict({"train": full.select([0, 2, 4, 6, 8, 1]),
                                   "test": full.select([3, 5, 7])})
    result, out = _convert(splits, tmp_path)
    assert result.counts == {"train": 6, "test": 3}
    assert read_manifest(out)["labels"]["vocabulary"] == ["cat", "dog"]
    for name, order in (("train", [0, 2, 4, 6, 8, 1]), ("test", [3, 5, 7])):
        for i, record in enumerate(sorted(read_split(out, name),
                                          key=lambda r: r["image_name"])):
            np.testing.assert_array_equal(record["pixels"], np.asarray(images[order[i]]))
            assert record["label"] == order[i] % 2


def test_parquet_files_with_image_columns_convert(tmp_path):
    pngs = [image_bytes(make_image((10, 8), seed=s), "PNG") for s in range(4)]
    plain = tmp_path / "bytes.parquet"
    pd.DataFrame({"image": pngs, "label": ["a", "b", "a", "b"],
                  "split": ["TRAIN"] * 4}).to_parquet(plain)
    result, out = _convert(str(plain), tmp_path, "plain")
    assert result.counts == {"train": 4}
    stored = {r["image"] for r in read_split(out, "train")}
    assert stored == set(pngs)
    hf = tmp_path / "hf.parquet"  # struct<bytes, path>, as Hugging Face writes images
    pd.DataFrame({"image": [{"bytes": b, "path": f"{i}.png"} for i, b in enumerate(pngs)],
                  "label": [0, 1, 0, 1]}).to_parquet(hf)
    result, out = _convert(str(hf), tmp_path, "hf", split="test")
    records = _records(out, "test")
    assert sorted(records) == [b"0.png", b"1.png", b"2.png", b"3.png"]
    assert all(records[f"{i}.png".encode()]["image"] == b for i, b in enumerate(pngs))


def test_the_command_line_converts_a_parquet_file_of_image_bytes(tmp_path):
    pngs = [image_bytes(make_image((10, 8), seed=s), "PNG") for s in range(4)]
    source = tmp_path / "images.parquet"
    pd.DataFrame({"image": pngs, "label": [0, 1, 1, 0]}).to_parquet(source)
    process = run_cli("convert", str(source), str(tmp_path / "out"), "--split", "train",
                      "--class-names", "cat, dog", "--no-progress")
    assert process.returncode == 0, process.stderr
    manifest = read_manifest(tmp_path / "out")
    assert manifest["labels"]["vocabulary"] == ["cat", "dog"]
    assert {r["image"] for r in read_split(tmp_path / "out", "train")} == set(pngs)


def test_a_source_of_image_bytes_is_read_whole_not_in_chunks(tmp_path, monkeypatch):
    from tfrecorder.sources import chunked

    source = tmp_path / "images.parquet"
    pngs = [image_bytes(make_image((10, 8), seed=s), "PNG") for s in range(6)]
    pd.DataFrame({"image": pngs, "label": [0, 1] * 3}).to_parquet(source)
    with pytest.raises(SchemaError, match="holds its images in its cells") as error:
        _convert(str(source), tmp_path, "chunked", chunk_rows=2)
    assert error.value.option == "chunk_rows"
    # Chunks chosen by size, not asked for: the source is read whole instead.
    monkeypatch.setattr(chunked, "default_chunk_rows", lambda size: 2)
    result, out = _convert(str(source), tmp_path, "whole", split="train")
    assert result.counts == {"train": 6}
    assert {r["image"] for r in read_split(out, "train")} == set(pngs)


def test_hugging_face_dicts_without_bytes_are_read_from_their_paths(tmp_path):
    paths = [str(tmp_path / f"{i}.png") for i in range(3)]
    for i, path in enumerate(paths):
        make_image((8, 6), seed=i).save(path)
    cells = [{"bytes": None, "path": path} for path in paths]
    table = pd.DataFrame({"image": pd.Series(cells, dtype=object), "label": [0, 1, 0]})
    result, out = _convert(table, tmp_path, split="train")
    records = _records(out)
    assert sorted(records) == [b"0.png", b"1.png", b"2.png"]
    for i, path in enumerate(paths):
        assert records[f"{i}.png".encode()]["image_uri"] == path.encode()
        assert records[f"{i}.png".encode()]["image"] == Path(path).read_bytes()
    cells[1] = {"bytes": image_bytes(make_image((8, 6)), "PNG"), "path": None}
    with pytest.raises(SchemaError, match="rows 0, 2: a dict without bytes"):
        _convert(pd.DataFrame({"image": pd.Series(cells, dtype=object)}), tmp_path, "mixed")


def test_a_hugging_face_dataset_converts_as_the_same_dicts_in_a_dataframe(tmp_path):
    """Arrow-backed (read a few rows at a time) or Python dicts: the same dataset, with
    UNASSIGNED rows split by the same content hashes."""
    datasets = pytest.importorskip("datasets")
    pngs = [image_bytes(make_image((6, 5), seed=s), "PNG") for s in range(40)]
    cells = [{"bytes": png, "path": None} for png in pngs]
    labels = [i % 3 for i in range(40)]
    features = datasets.Features({"image": datasets.Image(decode=False),
                                  "label": datasets.Value("int64")})
    hf = datasets.Dataset.from_dict({"image": cells, "label": labels}, features=features)
    _, from_hf = _convert(hf, tmp_path, "hf")
    frame = pd.DataFrame({"image": pd.Series(cells, dtype=object), "label": labels})
    _, from_frame = _convert(frame, tmp_path, "frame")
    manifest = read_manifest(from_hf)
    assert len(manifest["splits"]) == 3  # UNASSIGNED rows went to every split
    for name in dataset_folder_files(from_hf):
        assert filecmp.cmp(os.path.join(from_hf, name), os.path.join(from_frame, name),
                           shallow=False), name


def test_on_error_raise_names_the_row_of_an_image_in_memory(tmp_path):
    from tfrecorder.errors import ImageError

    cells = [image_bytes(make_image((8, 8)), "PNG"), b"\x89PNG\r\n\x1a\n broken"]
    table = pd.DataFrame({"pixels": pd.Series(cells, dtype=object, index=["first", "second"]),
                          "label": [0, 1]})
    with pytest.raises(ImageError, match=r"row second \('second'\): corrupt") as error:
        _convert(table, tmp_path, on_error="raise")
    assert error.value.column == "pixels" and error.value.rows == ["second"]


def test_keras_labels_of_shape_n_by_1_are_one_a_row_and_one_hot_ones_are_refused(tmp_path):
    x = np.zeros((4, 5, 5, 3), np.uint8) + np.arange(4, dtype=np.uint8)[:, None, None, None]
    y = np.array([[3], [1], [0], [3]])  # keras.datasets.cifar10.load_data()'s shape
    result, out = _convert((x, y), tmp_path, split="train")
    manifest = read_manifest(out)
    assert manifest["labels"]["multi_label"] is False
    assert {r["pixels"][0, 0, 0]: r["label"] for r in read_split(out, "train")} == \
        {0: 3, 1: 1, 2: 0, 3: 3}
    with pytest.raises(SchemaError, match=r"shape \(4, 4\).*label.argmax\(axis=1\)"):
        _convert((x, np.eye(4, dtype=int)), tmp_path, "one_hot")


def test_a_column_of_image_bytes_read_as_images_says_so(tmp_path, caplog):
    thumbs = [image_bytes(make_image((8, 8), seed=s), "PNG") for s in range(2)]
    with caplog.at_level("INFO", logger="tfrecorder.sources.schema"):
        _convert(pd.DataFrame({"thumb": thumbs, "n": [1, 2]}), tmp_path, split="train")
    warned = [r for r in caplog.records if "'thumb' as images held in memory" in r.message]
    assert [r.levelname for r in warned] == ["WARNING"]
    assert "schema={'thumb': 'StringInput'}" in warned[0].message
    _, out = _convert(pd.DataFrame({"thumb": thumbs, "n": [1, 2]}), tmp_path, "kept",
                      split="train", schema={"thumb": "StringInput"})
    assert read_manifest(out)["features"]["thumb"]["dtype"] == "string"


def test_a_pil_image_is_stored_as_the_array_of_its_pixels_is(tmp_path):
    arrays = [np.asarray(make_image((12, 9), mode, seed=1)) for mode in ("L", "RGB", "RGBA")]
    grey16 = (np.arange(108, dtype=np.uint16).reshape(9, 12) * 601)
    images = [Image.fromarray(a) for a in arrays] + [Image.fromarray(grey16)]
    _, from_arrays = _convert(pd.DataFrame({"image": pd.Series([*arrays, grey16],
                                                               dtype=object)}),
                              tmp_path, "arrays", split="train")
    _, from_pil = _convert(pd.DataFrame({"image": pd.Series(images, dtype=object)}),
                           tmp_path, "pil", split="train")
    assert {k: r["image"] for k, r in _records(from_arrays).items()} == \
        {k: r["image"] for k, r in _records(from_pil).items()}
    result, out = _convert(pd.DataFrame({"image": pd.Series(
        [Image.fromarray(np.ones((4, 4), np.float32))], dtype=object)}), tmp_path, "float",
        split="train", max_rejected=1.0)
    assert result.num_rejected == 1
    assert "32-bit floating-point pixels" in (Path(out) / "rejected.csv").read_text()

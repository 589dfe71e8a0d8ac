import base64

import numpy as np
import pytest
import tensorflow as tf
from helpers import decode, image_bytes, make_image, pixels, write_image
from PIL import Image

from tfrecorder.options import ImageOptions
from tfrecorder.write.records import encode_row
from tfrecorder.write.rows import Rejection, Row


def encode(path, **options):
    result = encode_row(Row(0, str(path), str(path), 1, "train"), ImageOptions(**options))
    if isinstance(result, Rejection):
        return result
    example = tf.train.Example.FromString(result.example).features.feature
    fields = {k: (v.bytes_list.value or v.int64_list.value)[0] for k, v in example.items()}
    fields["pixels"] = decode(fields)
    return fields


def save(tmp_path, image, fmt, name="img", **save_args):
    path = tmp_path / f"{name}.{fmt.lower()}"
    path.write_bytes(image_bytes(image, fmt, **save_args))
    return path


# (format, mode, extra save arguments): what TensorFlow must decode as Pillow does.
CASES = [
    ("JPEG", "L", {}), ("JPEG", "RGB", {}), ("JPEG", "CMYK", {}),
    ("PNG", "1", {}), ("PNG", "L", {}), ("PNG", "LA", {}), ("PNG", "RGB", {}),
    ("PNG", "RGBA", {}), ("PNG", "P", {}), ("PNG", "P", {"transparency": 0}),
    ("GIF", "P", {}), ("BMP", "RGB", {}), ("BMP", "L", {}), ("BMP", "1", {}),
    ("TIFF", "RGB", {}), ("TIFF", "RGBA", {}), ("WEBP", "RGB", {"lossless": True}),
]


@pytest.mark.parametrize("fmt,mode,save_args", CASES)
def test_every_record_decodes_with_tensorflow_to_the_source_pixels(tmp_path, fmt, mode,
                                                                    save_args):
    path = save(tmp_path, make_image((37, 23), mode), fmt, **save_args)
    record = encode(path)
    expected = pixels(path)
    assert record["pixels"].shape == expected.shape
    assert (record["image_height"], record["image_width"], record["image_channels"]) == (
        expected.shape)
    if fmt == "JPEG" and mode == "CMYK":  # TensorFlow and Pillow convert CMYK differently
        assert np.abs(record["pixels"].astype(int) - expected).mean() < 8
    else:
        np.testing.assert_array_equal(record["pixels"], expected)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_jpeg_and_png_are_stored_byte_for_byte(tmp_path, fmt):
    path = save(tmp_path, make_image(), fmt)
    record = encode(path)
    assert record["image"] == path.read_bytes()
    assert record["image_format"] == fmt.lower().encode()
    assert record["image_name"] == path.name.encode()
    assert record["label"] == 1 and record["split"] == b"TRAIN"


@pytest.mark.parametrize("fmt", ["GIF", "BMP", "TIFF", "WEBP"])
def test_other_formats_become_png(tmp_path, fmt):
    record = encode(save(tmp_path, make_image(), fmt, lossless=True))
    assert record["image_format"] == b"png"
    assert Image.open(__import__("io").BytesIO(record["image"])).format == "PNG"


def test_image_size_resizes_and_reencodes_as_jpeg(tmp_path):
    record = encode(save(tmp_path, make_image((400, 300)), "PNG"), image_size=(64, 48))
    assert record["pixels"].shape == (64, 48, 3)
    assert record["image_format"] == b"jpeg"


def test_resized_images_with_transparency_stay_png(tmp_path):
    record = encode(save(tmp_path, make_image((400, 300), "RGBA"), "PNG"), image_size=(32, 32))
    assert record["pixels"].shape == (32, 32, 4) and record["image_format"] == b"png"


def test_max_image_side_keeps_aspect_and_leaves_small_images_alone(tmp_path):
    big = save(tmp_path, make_image((800, 400)), "JPEG", "big")
    small = save(tmp_path, make_image((100, 50)), "JPEG", "small")
    assert encode(big, max_image_side=200)["pixels"].shape == (100, 200, 3)
    kept = encode(small, max_image_side=200)
    assert kept["image"] == small.read_bytes()


def test_resized_pixels_are_close_to_a_pillow_resize(tmp_path):
    image = make_image((64, 48)).resize((640, 480), Image.Resampling.BICUBIC)  # photo-smooth
    record = encode(save(tmp_path, image, "PNG"), image_size=(120, 160), jpeg_quality=95)
    expected = np.asarray(image.resize((160, 120), Image.Resampling.BICUBIC))
    assert np.abs(record["pixels"].astype(int) - expected).mean() < 3


@pytest.mark.parametrize("mode,channels", [("L", 1), ("RGB", 3), ("RGBA", 4), ("P", 3)])
def test_raw_format_is_tfrecorder_base64_pixels(tmp_path, mode, channels):
    path = save(tmp_path, make_image((20, 10), mode), "PNG")
    record = encode(path, image_format="raw")
    assert record["image_format"] == b"raw"
    raw = base64.b64decode(record["image"], altchars=b"-_")
    expected = pixels(path)
    assert expected.shape[-1] == channels
    np.testing.assert_array_equal(
        np.frombuffer(raw, np.uint8).reshape(expected.shape), expected)


def test_forced_jpeg_drops_alpha(tmp_path):
    record = encode(save(tmp_path, make_image(mode="RGBA"), "PNG"), image_format="jpeg")
    assert record["image_format"] == b"jpeg" and record["pixels"].shape[-1] == 3


def truncated_jpeg(tmp_path):
    data = (tmp_path / "full.jpg").read_bytes() if (tmp_path / "full.jpg").exists() else \
        image_bytes(make_image((200, 200)), "JPEG")
    path = tmp_path / "truncated.jpg"
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize("make,reason", [
    (lambda d: d / "missing.jpg", "cannot read file: no such file or directory"),
    (lambda d: (d / "folder.jpg").mkdir() or d / "folder.jpg",
     "cannot read file: a folder, not a regular file"),
    (lambda d: (d / "empty.jpg").write_bytes(b"") and None or d / "empty.jpg",
     "empty file (0 bytes)"),
    (lambda d: (d / "notes.jpg").write_text("not an image") and None or d / "notes.jpg",
     "not an image"),
    (truncated_jpeg, "corrupt or truncated image"),
])
def test_unreadable_images_are_rejected_with_a_reason(tmp_path, make, reason):
    result = encode(make(tmp_path))
    assert isinstance(result, Rejection)
    assert result.reason.startswith(reason), result.reason
    assert "Errno" not in result.reason and "Error" not in result.reason  # words, not codes


def test_corrupt_png_data_is_rejected(tmp_path):
    data = bytearray(image_bytes(make_image((64, 64)), "PNG"))
    data[len(data) // 2] ^= 0xFF  # breaks the zlib stream and its CRC
    path = tmp_path / "corrupt.png"
    path.write_bytes(bytes(data))
    assert isinstance(encode(path), Rejection)


def jpeg_with(tmp_path, edit) -> str:
    data = image_bytes(make_image((64, 48)).resize((320, 240)), "JPEG")
    path = tmp_path / "edited.jpg"
    path.write_bytes(edit(data))
    return path


def test_corrupt_jpeg_data_that_pillow_decodes_silently_is_rejected(tmp_path):
    middle = 2000
    path = jpeg_with(tmp_path, lambda d: d[:middle] + bytes(300) + d[middle + 300:])
    Image.open(path).load()  # Pillow fills the damage with grey and says nothing
    result = encode(path)
    assert isinstance(result, Rejection)
    assert "corrupt or truncated image" in result.reason and "Corrupt JPEG data" in result.reason


def test_zero_padding_before_eoi_is_kept(tmp_path):
    # libjpeg reads a few bytes after the scan ahead into its bit buffer and warns about
    # nothing; damage, and junk it reports as extraneous bytes, are rejected
    # (test_hostile_images).
    path = jpeg_with(tmp_path, lambda d: d[:-2] + b"\x00\x00" + d[-2:])
    assert encode(path)["image"] == path.read_bytes()


def test_validate_false_reads_only_headers(tmp_path):
    path = truncated_jpeg(tmp_path)
    assert isinstance(encode(path), Rejection)
    trusted = encode_row(Row(0, str(path), str(path), 1, "train"), ImageOptions(validate=False))
    image = tf.train.Example.FromString(trusted.example).features.feature["image"]
    assert image.bytes_list.value == [path.read_bytes()]


@pytest.mark.parametrize("options,message", [
    ({"image_format": "gif"}, "image_format"),
    ({"image_size": (10,)}, "image_size"),
    ({"image_size": (10, 10), "max_image_side": 5}, "not both"),
    ({"max_image_side": 0}, "max_image_side"),
    ({"jpeg_quality": 0}, "jpeg_quality"),
    ({"image_size": 224}, "image_size must be \\(height, width\\) with positive ints, not 224"),
    ({"jpeg_quality": "90"}, "jpeg_quality must be an int from 1 to 100, not '90'"),
    ({"validate": "no"}, "validate must be True or False"),
    ({"max_image_pixels": 0}, "max_image_pixels must be a positive int"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        ImageOptions(**options)


def test_write_image_helper_round_trips(tmp_path):
    path = write_image(tmp_path / "a" / "x.png", fmt="PNG")
    assert pixels(path).shape == (30, 40, 3)


def test_rows_without_images_encode_a_column_at_a_time_to_the_row_encoders_bytes():
    """The columnar path the engines take for tables without images, against
    `encode_row` (the reference), on planned rows of every kind of input."""
    import pandas as pd

    from tfrecorder.options import ConvertOptions
    from tfrecorder.sources import load_table
    from tfrecorder.write.plan import make_plan
    from tfrecorder.write.planned_table import PlannedTable
    from tfrecorder.write.records import encode_rows_without_images

    rows = 200
    table = load_table(pd.DataFrame({
        "key": [f"row {i} é" * (i % 3) for i in range(rows)],
        "spend": [i * 0.37 - 20 for i in range(rows)],
        "visits": [i * 7919 - 10**12 for i in range(rows)],
        "plan": pd.Categorical([("basic", "plus", "pro")[i % 3] for i in range(rows)]),
        "embedding": list(np.arange(rows * 4).reshape(rows, 4) / 3),
        "tags": [["a", "b"][: i % 3] for i in range(rows)],
        "label": [("stays", "leaves")[i % 2] for i in range(rows)],
    }))
    plan = make_plan(table, ConvertOptions.from_keywords(num_shards=2))
    planned = PlannedTable(plan, table)
    for shard in plan.shards:
        columnar = encode_rows_without_images(shard.split, planned.labels_at(shard.positions),
                                              planned.inputs_at(shard.positions),
                                              plan.image_options).to_pylist()
        by_row = [encode_row(row, plan.image_options).example
                  for row in planned.rows(shard.positions, shard.split)]
        assert columnar == by_row
        assert any(not row.inputs["tags"] for row in planned.rows(shard.positions, shard.split))
        parsed = tf.train.Example.FromString(columnar[0]).features.feature
        position = int(shard.positions[0])
        assert parsed["visits"].int64_list.value == [position * 7919 - 10**12]
        assert parsed["embedding"].float_list.value == pytest.approx(
            (np.arange(position * 4, position * 4 + 4) / 3).tolist())

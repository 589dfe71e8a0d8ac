"""verify(): passes on what convert writes, and names each kind of damage."""

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import tensorflow as tf
from helpers import (
    features_of,
    partly_labelled_csv,
    read_manifest,
    read_split,
    rewrite_split,
    run_without_tensorflow,
    write_image,
)

import tfrecorder
from tfrecorder import VerificationError
from tfrecorder.format.tfrecord import open_read, read_records, write_framed
from tfrecorder.read.verify import Problem


@pytest.fixture
def dataset(image_table, tmp_path) -> str:
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    return out


def edit_manifest(output_dir, edit) -> None:
    manifest = read_manifest(output_dir)
    edit(manifest)
    Path(output_dir, "dataset.json").write_text(json.dumps(manifest))


def first_shard(output_dir, split="train") -> Path:
    return Path(output_dir, read_manifest(output_dir)["splits"][split]["shards"][0]["file"])


def found(output_dir, **options) -> list[Problem]:
    """The problems verify finds, after checking that its error counts and quotes them."""
    with pytest.raises(VerificationError) as caught:
        tfrecorder.verify(output_dir, **options)
    report = caught.value.report
    assert not report.ok
    assert f"{len(report.problems)} problem" in str(caught.value)
    assert str(report.problems[0]) in str(caught.value)
    return report.problems


def problems_of(output_dir, **options) -> list[str]:
    return texts(found(output_dir, **options))


def texts(problems: list[Problem]) -> list[str]:
    """The problems as sentences, as the error message and the command line print them."""
    return [str(problem) for problem in problems]


def kinds(problems: list[Problem]) -> list[tuple[str, int | None, str]]:
    """Each problem's file, record and check."""
    return [(problem.file, problem.record, problem.check) for problem in problems]


@pytest.mark.parametrize("options", [{}, {"compression": "gzip"}, {"image_format": "raw"}],
                         ids=["plain", "gzip", "raw"])
def test_verify_passes_on_a_fresh_dataset_and_counts_match_the_manifest(
        image_table, tmp_path, options):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False, num_shards=2, **options)
    manifest = read_manifest(out)
    report = tfrecorder.verify(out)
    assert report.ok and report.problems == []
    assert report.num_records == {s: v["num_records"] for s, v in manifest["splits"].items()}
    assert report.num_images_decoded == sum(report.num_records.values()) == len(image_table)
    assert report.num_shards == sum(len(v["shards"]) for v in manifest["splits"].values())


def test_verify_shows_progress_and_can_skip_decoding(dataset, capsys):
    report = tfrecorder.verify(dataset, decode_images=False, progress=True)
    assert report.ok and report.num_images_decoded == 0
    assert "Checking records" in capsys.readouterr().err


def test_verify_without_decoding_never_imports_tensorflow(dataset):
    """Files, framing and checksums need no TensorFlow: only the record checks load it."""
    run_without_tensorflow("import sys, tfrecorder; "
                           "tfrecorder.verify(sys.argv[1], decode_images=False)", dataset)


# verify() in an interpreter where `import tensorflow` fails: the dataset folders given,
# a report of each printed as `ok decoded parsed [record check, ...]`.
WITHOUT_TENSORFLOW = """
import sys, tfrecorder
for path in sys.argv[1:]:
    try:
        report = tfrecorder.verify(path)
    except tfrecorder.VerificationError as error:
        report = error.report
    print(report.ok, report.num_images_decoded, report.num_records_parsed,
          [(p.record, str(p.check)) for p in report.problems])
"""


def test_verify_decodes_and_checks_records_where_tensorflow_cannot_be_imported(
        dataset, tmp_path):
    """TensorFlow is an extra: verify parses, decodes and checks every record without."""
    damaged = str(tmp_path / "damaged")
    shutil.copytree(dataset, damaged)
    manifest = read_manifest(damaged)
    examples = [features_of(r, manifest) for r in read_split(damaged, "train")]
    examples[1]["label"] = 7
    examples[2]["image"] = examples[2]["image"][:len(examples[2]["image"]) // 2]
    rewrite_split(damaged, "train", examples)
    total = sum(split["num_records"] for split in manifest["splits"].values())
    printed = run_without_tensorflow(WITHOUT_TENSORFLOW, dataset, damaged, installed=False)
    assert printed.splitlines() == [f"True {total} {total} []",
                                    f"False {total - 1} {total} [(1, 'ids'), (2, 'decode')]"]


def test_a_flipped_byte_inside_an_image_fails_its_checksum(dataset):
    record = read_split(dataset, "train")[0]
    shard = first_shard(dataset)
    data = bytearray(shard.read_bytes())
    start = data.find(record["image"])
    assert start > 0
    data[start + len(record["image"]) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    problems = problems_of(dataset)
    assert len(problems) == 1
    assert problems[0].startswith(f"{shard.name}: bad data checksum in the record at byte ")


def test_a_truncated_shard_is_named_with_its_missing_bytes(dataset):
    shard = first_shard(dataset)
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-10])
    problems = found(dataset)
    assert kinds(problems) == [(shard.name, None, "framing"), (shard.name, None, "size")]
    assert texts(problems)[0].startswith(f"{shard.name}: truncated record at byte ")
    assert texts(problems)[1] == f"{shard.name}: {size - 10} bytes, but the manifest says {size}"


def test_a_truncated_gzip_shard_is_found(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False, compression="gzip")
    shard = first_shard(out)
    shard.write_bytes(shard.read_bytes()[:-100])
    problems = problems_of(out)
    assert any(p.startswith(f"{shard.name}: unreadable gzip data") for p in problems)


def test_a_missing_shard_is_named(dataset):
    shard = first_shard(dataset, "validation")
    shard.unlink()
    problems = found(dataset)
    assert texts(problems) == [f"{shard.name}: missing; the manifest lists it"]
    assert kinds(problems) == [(shard.name, None, "missing")]


def test_each_shard_has_its_index_listed_and_a_stale_or_missing_one_is_named(dataset):
    """Seeking readers (DALI, the `tfrecord` package) trust the index: one line off sends
    them into the middle of a record."""
    shard = first_shard(dataset)
    index = shard.parent / "index" / shard.with_suffix(".idx").name
    listed = read_manifest(dataset)["splits"]["train"]["shards"][0]
    assert listed["index"] == f"index/{index.name}"
    lines = index.read_text().splitlines()
    assert len(lines) == listed["num_records"] and lines[0].startswith("0 ")
    offset, length = map(int, lines[1].split())
    lines[1] = f"{offset} {length - 1}"
    index.write_text("\n".join(lines) + "\n")
    assert texts(found(dataset, decode_images=False)) == [
        f"index/{index.name}: does not index its shard: line 2 is '{offset} {length - 1}', "
        f"but the shard's record 1 is at '{offset} {length}' (offset, length)"]
    index.write_text("\n".join(lines[:-1]) + "\n")
    assert kinds(found(dataset, decode_images=False)) == [
        (f"index/{index.name}", None, "index")]
    index.unlink()
    assert texts(found(dataset, decode_images=False)) == [
        f"index/{index.name}: missing; the manifest lists it"]


def test_gzip_shards_have_no_index(image_table, tmp_path):
    out = tmp_path / "out"
    tfrecorder.convert(image_table, out, compression="gzip", progress=False)
    assert not (out / "index").exists()
    assert all("index" not in shard for split in read_manifest(out)["splits"].values()
               for shard in split["shards"])
    assert tfrecorder.verify(out, decode_images=False).ok


def test_every_file_the_manifest_does_not_list_is_named(dataset):
    shard = first_shard(dataset)
    shutil.copy(shard, Path(dataset, "train-00001-of-00002.tfrecord"))
    shutil.copy(shard, Path(dataset, "train-extra.tfrecord"))
    Path(dataset, f"{shard.name}.tmp-0123abcd").write_bytes(b"")
    Path(dataset, "notes.txt").write_text("a reader would take it for part of the dataset")
    problems = found(dataset, decode_images=False)
    assert texts(problems) == [
        "notes.txt: a file the manifest does not list",
        "train-00000-of-00001.tfrecord.tmp-0123abcd: a temporary file left by an "
        "interrupted run",
        "train-00001-of-00002.tfrecord: a shard the manifest does not list",
        "train-extra.tfrecord: a file the manifest does not list",
    ]
    assert kinds(problems) == [
        ("notes.txt", None, "unlisted"),
        ("train-00000-of-00001.tfrecord.tmp-0123abcd", None, "temporary"),
        ("train-00001-of-00002.tfrecord", None, "unlisted"),
        ("train-extra.tfrecord", None, "unlisted"),
    ]


def test_a_record_swapped_for_another_valid_one_is_caught_by_the_sha256(dataset):
    """Same size, same count, every checksum sound: only the SHA-256 of the shard, taken
    while it was written, tells the file changed."""
    shard = first_shard(dataset)
    with open_read(str(shard), None) as stream:
        records = list(read_records(stream))
    assert len(records) >= 2 and records[0] != records[-1]
    swapped = [records[-1], *records[1:-1], records[0]]
    with open(shard, "wb") as out:
        for record in swapped:
            write_framed(out, record)
    problems = problems_of(dataset, decode_images=False)
    assert problems[0] == (
        f"{shard.name}: its SHA-256 is {sha256_of(shard)[:16]}..., but the manifest says "
        f"{read_manifest(dataset)['splits']['train']['shards'][0]['sha256'][:16]}...: the "
        "file was changed after it was written")
    # Records of other sizes move the others: the index no longer finds them.
    assert problems[1:] == ([] if len(records[0]) == len(records[-1]) else [
        f"index/{shard.stem}.idx: does not index its shard: line 1 is '0 "
        f"{len(records[0]) + 16}', but the shard's record 0 is at '0 "
        f"{len(records[-1]) + 16}' (offset, length)"])


def sha256_of(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_manifest_records_each_shards_sha256_as_written(image_table, tmp_path):
    for options in ({}, {"compression": "gzip"}):
        out = tmp_path / str(len(options))
        tfrecorder.convert(image_table, out, progress=False, num_shards=2, **options)
        shards = [s for split in read_manifest(out)["splits"].values() for s in split["shards"]]
        assert shards and all(s["sha256"] == sha256_of(out / s["file"]) for s in shards)


def test_a_record_count_that_differs_from_the_manifest_is_named(dataset):
    shard = first_shard(dataset)

    def add_one(manifest):
        manifest["splits"]["train"]["shards"][0]["num_records"] += 1
        manifest["splits"]["train"]["num_records"] += 1

    edit_manifest(dataset, add_one)
    count = read_manifest(dataset)["splits"]["train"]["num_records"] - 1
    assert problems_of(dataset) == [
        f"{shard.name}: {count} records, but the manifest says {count + 1}"]


def test_split_totals_that_differ_from_their_shards_are_named(dataset):
    def inflate(manifest):
        manifest["splits"]["test"]["num_bytes"] += 5

    edit_manifest(dataset, inflate)
    (problem,) = problems_of(dataset)
    assert problem.startswith("dataset.json: the test split has num_bytes ")
    assert problem.endswith("but its shards add up to "
                            f"{first_shard(dataset, 'test').stat().st_size}")


def test_a_rejected_rows_count_that_differs_is_named(dataset):
    edit_manifest(dataset, lambda manifest: manifest["rejected"].update(num_rows=3))
    assert problems_of(dataset) == ["rejected.csv: 0 rows, but the manifest says 3"]


def test_an_image_that_does_not_decode_is_found_though_its_checksum_is_sound(dataset):
    manifest = read_manifest(dataset)
    records = read_split(dataset, "train")
    examples = [features_of(r, manifest) for r in records]
    examples[2]["image"] = b"\xff\xd8\xff garbage, not a JPEG"
    rewrite_split(dataset, "train", examples)
    assert tfrecorder.verify(dataset, decode_images=False).ok  # framing and counts hold

    with pytest.raises(VerificationError) as caught:
        tfrecorder.verify(dataset)
    report = caught.value.report
    name = records[2]["image_name"].decode()
    (problem,) = map(str, report.problems)
    assert problem.startswith(
        f"train-00000-of-00001.tfrecord, record 2 ({name!r}): the image does not decode: ")
    assert report.num_images_decoded == sum(report.num_records.values()) - 1


def test_shapes_formats_and_features_that_differ_from_the_record_are_found(dataset):
    manifest = read_manifest(dataset)
    records = read_split(dataset, "train")
    examples = [features_of(r, manifest) for r in records]
    examples[0]["image_height"] += 1
    examples[1]["image_format"] = b"png" if records[1]["image_format"] == b"jpeg" else b"jpeg"
    del examples[3]["label"]
    rewrite_split(dataset, "train", examples)
    problems = found(dataset)
    name = [r["image_name"].decode() for r in records]
    shard = "train-00000-of-00001.tfrecord"
    assert sorted(kinds(problems)) == [(shard, 0, "shape"), (shard, 1, "format"),
                                       (shard, 3, "parse")]
    assert sorted((p.record, p.image_name) for p in problems) == [
        (0, name[0]), (1, name[1]), (3, None)]  # a record that does not parse has no name
    shape = "x".join(str(v) for v in records[0]["pixels"].shape)
    taller = "x".join(str(v) for v in (records[0]["image_height"] + 1,
                                       *records[0]["pixels"].shape[1:]))
    assert sorted(texts(problems)) == sorted([
        f"train-00000-of-00001.tfrecord, record 0 ({name[0]!r}): the image decodes to "
        f"{shape}, but the record says {taller} (height x width x channels)",
        f"train-00000-of-00001.tfrecord, record 1 ({name[1]!r}): image_format is "
        f"{examples[1]['image_format'].decode()!r}, but the image bytes are not in that "
        "format",
        "train-00000-of-00001.tfrecord, record 3: does not parse with the manifest's "
        "features: label: missing, but the manifest says every record holds one int64 "
        "value",
    ])


def test_raw_pixels_that_are_not_the_recorded_shape_or_base64_do_not_decode(
        image_table, tmp_path):
    out = str(tmp_path / "raw")
    tfrecorder.convert(image_table.head(6), out, image_format="raw", progress=False)
    manifest = read_manifest(out)
    records = read_split(out, "train")
    examples = [features_of(r, manifest) for r in records]
    examples[0]["image_width"] += 1
    examples[1]["image"] = b"*" + examples[1]["image"][1:]
    rewrite_split(out, "train", examples)
    height, width, channels = records[0]["pixels"].shape
    where = [f"train-00000-of-00001.tfrecord, record {i} "
             f"({records[i]['image_name'].decode()!r})" for i in (0, 1)]
    assert problems_of(out) == [
        f"{where[0]}: the image does not decode: {height * width * channels:,} bytes of raw "
        f"pixels, but the record says {height}x{width + 1}x{channels} (height x width x "
        f"channels), {height * (width + 1) * channels:,} bytes",
        f"{where[1]}: the image does not decode: raw pixels that are not web-safe base64: "
        "Only base64 data is allowed"]


def test_the_message_counts_every_problem_and_quotes_the_first_few(dataset):
    manifest = read_manifest(dataset)
    for split in manifest["splits"].values():
        for shard in split["shards"]:
            Path(dataset, shard["file"]).write_bytes(b"\x00")
    with pytest.raises(VerificationError, match="problems") as caught:
        tfrecorder.verify(dataset)
    problems = [str(problem) for problem in caught.value.report.problems]
    assert len(problems) == 6  # three shards, each truncated and of the wrong size
    message = str(caught.value)
    assert "6 problems" in message and "... and 1 more" in message
    assert problems[4] in message and problems[5] not in message
    assert message.endswith("tfrecorder.convert(..., overwrite=True)).")


# --- datasets with a schema: inputs, multi-label rows, no images ---------------------------

def schema_table(tmp_path, images: bool = True) -> pd.DataFrame:
    """Multi-label rows with number, text, box and categorical inputs; tiny images."""
    table = pd.DataFrame({
        "split": ["TRAIN", "TRAIN", "TRAIN", "VALIDATION", "TEST"],
        "label": [["cat", "dog"], ["dog"], [], ["bird"], ["cat"]],
        "age": [1, 2, 3, 4, 5],
        "score": [0.5, 1.5, 2.5, 2.0, -1.0],
        "name": ["a", "=b", "c", "d", "e"],
        "boxes": [[[0.1, 0.2, 0.3, 0.4]], [], [[0, 0, 1, 1], [0.5, 0.5, 1, 1]],
                  [[0.2, 0.2, 0.4, 0.4]], []],
        "classes": [["cat"], [], ["dog", "cat"], ["bird"], ["dog"]],
    })
    if images:
        table.insert(1, "image_uri", [
            write_image(tmp_path / "images" / f"s{i}.png", size=(6 + i, 5), fmt="PNG", seed=i)
            for i in range(len(table))])
    return table


def convert_schema(tmp_path, images: bool = True, **options) -> str:
    out = str(tmp_path / ("with_images" if images else "no_images"))
    tfrecorder.convert(schema_table(tmp_path, images), out, schema={"classes":
                       "CategoricalInput"}, progress=False, num_workers=1, **options)
    return out


def examples_of(output_dir, split: str) -> list[dict]:
    """Every record of `split` as `encode_example` takes it: each feature a list of its
    values (ints, floats or bytes), so that encoding them again gives the same bytes."""
    from tensorflow.core.example.example_pb2 import Example

    manifest = read_manifest(output_dir)
    examples = []
    for shard in manifest["splits"][split]["shards"]:
        with open_read(str(Path(output_dir, shard["file"])), manifest["compression"]) as f:
            for record in read_records(f):
                features = Example.FromString(record).features.feature
                examples.append({
                    name: list(getattr(feature, feature.WhichOneof("kind")).value)
                    if feature.WhichOneof("kind") else []
                    for name, feature in features.items()})
    return examples


@pytest.mark.parametrize("images", [True, False], ids=["images", "no_images"])
def test_datasets_with_a_schema_and_multi_label_rows_verify(tmp_path, images):
    out = convert_schema(tmp_path, images)
    manifest = read_manifest(out)
    assert manifest["labels"]["multi_label"]
    assert ("image" in manifest["features"]) is images
    report = tfrecorder.verify(out)
    assert report.ok and report.num_records_parsed == 5
    assert report.num_images_decoded == (5 if images else 0)
    rewrite_split(out, "train", examples_of(out, "train"))  # the same records, re-encoded
    assert tfrecorder.verify(out).ok


def test_a_dataset_without_images_says_it_parses_records(tmp_path, capsys):
    out = convert_schema(tmp_path, images=False, compression="gzip")
    assert tfrecorder.verify(out, progress=True).ok
    err = capsys.readouterr().err
    assert "Parsing records" in err and "Decoding images" not in err


def test_a_label_id_outside_the_vocabulary_is_named(dataset):
    manifest = read_manifest(dataset)
    records = read_split(dataset, "train")
    examples = [features_of(r, manifest) for r in records]
    examples[1]["label"] = 3
    examples[2]["label"] = -1
    rewrite_split(dataset, "train", examples)
    name = [r["image_name"].decode() for r in records]
    problems = found(dataset)
    assert texts(problems) == [
        f"train-00000-of-00001.tfrecord, record 1 ({name[1]!r}): label id 3 is outside the "
        "3 classes of the manifest's labels (ids 0 to 2)",
        f"train-00000-of-00001.tfrecord, record 2 ({name[2]!r}): label id -1 is outside the "
        "3 classes of the manifest's labels (ids 0 to 2)",
    ]
    shard = "train-00000-of-00001.tfrecord"
    assert kinds(problems) == [(shard, 1, "ids"), (shard, 2, "ids")]
    assert [p.image_name for p in problems] == name[1:3]
    assert tfrecorder.verify(dataset, decode_images=False).ok  # ids need parsing


@pytest.mark.parametrize("images", [True, False], ids=["images", "no_images"])
def test_multi_label_and_categorical_ids_outside_their_vocabularies_are_named(
        tmp_path, images):
    out = convert_schema(tmp_path, images)
    examples = examples_of(out, "train")
    examples[0]["label"] = [0, 5, 2, 9]
    examples[2]["classes"] = [1, 3]
    rewrite_split(out, "train", examples)
    report_problems = problems_of(out)
    where = [f"train-00000-of-00001.tfrecord, record {i}" + (
        f" ({examples[i]['image_name'][0].decode()!r})" if images else "") for i in (0, 2)]
    assert report_problems == [
        f"{where[0]}: label ids 5, 9 are outside the 3 classes of the manifest's labels "
        "(ids 0 to 2)",
        f"{where[1]}: classes id 3 is outside the 3 values of its vocabulary (ids 0 to 2)",
    ]


def test_a_record_in_the_shard_of_another_split_is_named(tmp_path):
    out = convert_schema(tmp_path, images=False)
    examples = examples_of(out, "train")
    examples[1]["split"] = [b"TEST"]
    examples[2]["split"] = [b"VALIDATION"]
    examples[2]["label"] = [7]
    rewrite_split(out, "train", examples)
    problems = found(out)
    assert texts(problems) == [
        "train-00000-of-00001.tfrecord, record 1: split is 'TEST', but the record is in a "
        "shard of the train split",
        "train-00000-of-00001.tfrecord, record 2: label id 7 is outside the 3 classes of "
        "the manifest's labels (ids 0 to 2)",
        "train-00000-of-00001.tfrecord, record 2: split is 'VALIDATION', but the record is "
        "in a shard of the train split",
    ]
    shard = "train-00000-of-00001.tfrecord"
    assert kinds(problems) == [(shard, 1, "split"), (shard, 2, "ids"), (shard, 2, "split")]


def test_a_record_that_does_not_match_the_schema_is_named_without_images(tmp_path):
    out = convert_schema(tmp_path, images=False)
    examples = examples_of(out, "train")
    examples[0]["age"] = [b"one"]
    examples[1]["score"] = [1.0, 2.0]
    examples[2]["boxes"] = [0.0, 0.5, 1.0]  # not rows of 4
    rewrite_split(out, "train", examples)
    where = "train-00000-of-00001.tfrecord, record {}: does not parse with the manifest's " \
        "features: "
    assert problems_of(out) == [
        where.format(0) + "age: a bytes_list, but the manifest says int64 (an int64_list)",
        where.format(1) + "score: 2 values, but the manifest says one float32 value",
        where.format(2) + "boxes: 3 values, not rows of 4 (the manifest's shape is [None, 4])"]


def test_integer_labels_are_checked_against_num_classes(tmp_path):
    out = str(tmp_path / "out")
    table = pd.DataFrame({"split": ["TRAIN"] * 3, "x": [1.0, 2.0, 3.0], "label": [1, 0, 4]})
    tfrecorder.convert(table, out, progress=False, num_workers=1)
    assert read_manifest(out)["labels"]["num_classes"] == 5
    assert tfrecorder.verify(out).ok
    examples = examples_of(out, "train")
    examples[0]["label"], examples[1]["label"] = [5], [-1]
    rewrite_split(out, "train", examples)
    assert problems_of(out) == [
        "train-00000-of-00001.tfrecord, record 0: label id 5 is outside the manifest's "
        "num_classes 5 (ids 0 to 4)",
        "train-00000-of-00001.tfrecord, record 1: label id -1 is outside the manifest's "
        "num_classes 5 (ids 0 to 4)"]


def test_a_manifest_whose_num_classes_differs_from_its_vocabulary_is_named(dataset):
    edit_manifest(dataset, lambda manifest: manifest["labels"].update(num_classes=2))
    assert problems_of(dataset) == [
        "dataset.json: labels has num_classes 2, but a vocabulary of 3 classes"]


def test_damaged_jpeg_data_that_tensorflow_decodes_with_a_warning_is_a_problem(dataset):
    """TensorFlow decodes it (grey where data was lost); strict means strict in verify,
    as in the writer."""
    manifest = read_manifest(dataset)
    records = read_split(dataset, "train")
    jpeg = next(r for r in records if r["image_format"] == b"jpeg")
    damaged = jpeg["image"][:-2] + b"junk" * 4 + b"\xff\xd9"
    tf.io.decode_image(damaged)  # TensorFlow itself does not object
    rewrite_split(dataset, "train", [features_of(jpeg, manifest, image=damaged)])
    (problem,) = found(dataset)
    assert (problem.record, problem.check) == (0, "strict")
    assert str(problem).startswith("train-00000-of-00001.tfrecord, record 0 (") \
        and "extraneous bytes before marker 0xd9" in str(problem), problem


def test_a_dataset_without_records_is_not_ok(tmp_path):
    """A run told to keep whatever it can (max_rejected=1.0) may write nothing."""
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not an image")
    out = tmp_path / "out"
    result = tfrecorder.convert(pd.DataFrame({"image_uri": [str(broken)] * 3, "label": ["a"] * 3}),
                                out, progress=False, max_rejected=1.0)
    assert (result.num_records, result.num_rejected) == (0, 3)
    assert problems_of(out) == ["dataset.json: the dataset holds no records (3 rows were "
                                "rejected)"]


def test_records_without_a_label_pass_where_the_manifest_counts_them(dataset, tmp_path):
    """Unlabelled rows' records hold no label: sound where the manifest counts them, a
    problem in a dataset whose every record should have one."""
    out = str(tmp_path / "partly")
    tfrecorder.convert(partly_labelled_csv(tmp_path), out, progress=False)
    assert tfrecorder.verify(out).ok
    manifest = read_manifest(dataset)
    examples = [features_of(r, manifest) for r in read_split(dataset, "train")]
    del examples[1]["label"]
    rewrite_split(dataset, "train", examples)
    problems = found(dataset)
    assert kinds(problems) == [("train-00000-of-00001.tfrecord", 1, "parse")]

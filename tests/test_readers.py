"""Other people's readers read tfrecorder's datasets as written (issue 30, "read anywhere").

One dataset (39 images, 3 classes: 12 sample photos and 27 small JPEG and PNG images, RGB
and greyscale; `train` in 2 shards, `validation` in 1; a `boxes` column of 4-float rows and a
`tags` column of ints, both empty in some rows and `tags` of one value in others) is read by
each reader, installed from PyPI into a folder of its own (tests/interop.py), and every record
is checked against the table it came from and `tfrecorder.load()`: the count of each split,
each record once, its label, its lists (empty ones included), its image bytes and their
pixels. Records are matched by `image_uri`. docs/reading.md gives each reader's recipe; what
it says is what these tests show.

- the PyPI `tfrecord` package (1.14.4, the newest wheel), with our `.idx` files and
  without, alone and under a PyTorch `DataLoader` with 2 workers;
- NVIDIA DALI's `fn.readers.tfrecord` with our `.idx` files, on the CPU, and its CPU image
  decoder;
- Ray Data's `read_tfrecords` on the dataset's folder;
- Apache Beam's `ReadFromTFRecord` on a split's shards.
"""

from __future__ import annotations

import ast
import collections
import io
import math
import os
import re
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import write_image
from interop import interop_path
from PIL import Image

import tfrecorder
from tfrecorder.format.manifest import Manifest, read_manifest

# Ray's own modules warn of their own deprecated settings as Ray Data starts.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")

CLASSES = ("cat", "coffee", "rocket")  # sorted: the label ids are their positions
SAMPLES = Path(__file__).resolve().parents[1] / "examples" / "images"
SPLITS = ("train", "validation")
# What the `tfrecord` package reads of a record, and how.
TFRECORD_DESCRIPTION = {"image": "byte", "image_uri": "byte", "label": "int",
                        "boxes": "float", "tags": "int"}


@dataclass(frozen=True)
class Written:
    """The dataset on disk and the table it was written from."""

    path: Path
    table: pd.DataFrame
    manifest: Manifest

    def shards(self, split: str) -> list[str]:
        return [str(self.path / s.file) for s in self.manifest.splits[split].shards]

    def indexes(self, split: str) -> list[str]:
        return [str(self.path / s.index) for s in self.manifest.splits[split].shards]


@dataclass(frozen=True)
class Record:
    """One record as the tests compare it: the features every reader is asked for."""

    label: int
    boxes: tuple[float, ...]  # flat, as stored: 4 values a box
    tags: tuple[int, ...]
    image: bytes


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Written:
    root = tmp_path_factory.mktemp("readers")
    rows = [(str(SAMPLES / name / f"{name}_{k}.jpg"), name)
            for name in CLASSES for k in range(1, 5)]
    for i in range(27):
        fmt = "PNG" if i % 4 == 0 else "JPEG"
        path = root / "images" / f"img_{i:02d}.{fmt.lower()}"
        write_image(path, size=(32 + i, 24 + i), mode=("RGB", "L", "RGB")[i % 3], fmt=fmt,
                    seed=i)
        rows.append((str(path), CLASSES[i % 3]))
    n = len(rows)
    table = pd.DataFrame({
        "split": ["VALIDATION" if i % 5 == 2 else "TRAIN" for i in range(n)],
        "image_uri": [uri for uri, _ in rows],
        "label": [label for _, label in rows],
        # 0, 1 or 2 boxes; tags of 0 to 5 ints (one in some rows: Ray unwraps those)
        "boxes": [[[0.1 * j, 0.2, 0.5 + 0.1 * j, 0.9] for j in range(i % 3)] for i in range(n)],
        "tags": [[] if i % 4 == 1 else list(range(i % 5 + 1)) for i in range(n)],
    })
    out = root / "dataset"
    tfrecorder.convert(table, str(out), num_shards={"train": 2, "validation": 1},
                       progress=False)
    written = Written(out, table, read_manifest(str(out)))
    assert {s: written.manifest.splits[s].num_records for s in SPLITS} == \
        {"train": 31, "validation": 8}
    assert [len(written.shards(s)) for s in SPLITS] == [2, 1]
    for split in SPLITS:  # each shard's index in index/, as the docs' recipes name it
        assert written.indexes(split) == [
            str(out / "index" / Path(shard).name.removesuffix(".tfrecord")) + ".idx"
            for shard in written.shards(split)]
    return written


def expected_records(written: Written, split: str) -> dict[str, Record]:
    """What the table says each record of `split` holds, by `image_uri`: its label's id,
    its lists flat in float32 and int64, and its image file's own bytes (JPEG and PNG
    that TensorFlow decodes exactly are stored as they are)."""
    rows = written.table[written.table["split"] == split.upper()]
    return {row.image_uri: Record(
        CLASSES.index(row.label),
        tuple(np.asarray(row.boxes, np.float32).reshape(-1).tolist()),
        tuple(row.tags),
        Path(row.image_uri).read_bytes()) for row in rows.itertuples()}


@pytest.fixture(scope="module")
def loaded(written) -> dict[str, dict[str, np.ndarray]]:
    """`tfrecorder.load()`'s pixels of every record, by split and `image_uri`."""
    return {split: {e["image_uri"].decode(): e["image"] for e in
                    tfrecorder.load(str(written.path), split, shuffle=False).as_numpy_iterator()}
            for split in SPLITS}


def check_split(written: Written, loaded, split: str, got: list[tuple[str, Record]],
                pixels: dict[str, np.ndarray] | None = None) -> None:
    """A reader's records of `split` are the table's, each once; their images decode (by
    Pillow, unless the reader's own `pixels` are given) to `load()`'s pixels exactly."""
    counts = collections.Counter(uri for uri, _ in got)
    assert sorted(counts.values()) == [1] * len(got), \
        [uri for uri, count in counts.items() if count > 1]
    assert dict(got) == expected_records(written, split)
    assert sum(1 for _, r in got if not r.boxes) > 0 and sum(1 for _, r in got if not r.tags)
    for uri, record in got:
        decoded = pixels[uri] if pixels is not None else np.asarray(
            Image.open(io.BytesIO(record.image)).convert("RGB"))
        np.testing.assert_array_equal(decoded, loaded[split][uri], err_msg=uri)


# --- tf.data ---------------------------------------------------------------------------


def test_load_and_tf_data_read_the_records_as_written(written, loaded):
    """docs/reading.md, "tf.data and Keras": load(), and tf.data with the manifest's spec;
    and the shards' indexes: each line a record's frame, `<offset> <length>`."""
    import tensorflow as tf

    spec = read_manifest(str(written.path)).parse_spec()
    assert spec["tags"] == tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)
    assert spec["boxes"] == tf.io.RaggedFeature(
        tf.float32, partitions=[tf.io.RaggedFeature.UniformRowLength(4)],
        row_splits_dtype=tf.int64)
    for split in SPLITS:
        batch = next(iter(tfrecorder.load(str(written.path), split, batch_size=8,
                                          image_size=(64, 64))))
        assert batch["image"].shape == (8, 64, 64, 3) and batch["image"].dtype == tf.uint8
        assert isinstance(batch["boxes"], tf.RaggedTensor) and batch["boxes"].shape[2] == 4
        assert isinstance(batch["tags"], tf.RaggedTensor) and batch["tags"].shape[0] == 8
        images, labels = next(iter(tfrecorder.load(
            str(written.path), split, batch_size=8, image_size=(64, 64), as_supervised=True)))
        assert images.shape == (8, 64, 64, 3) and labels.shape == (8,)
        expected = expected_records(written, split)
        for e in tfrecorder.load(str(written.path), split, shuffle=False).as_numpy_iterator():
            record = expected[e["image_uri"].decode()]
            assert e["boxes"].shape == (len(record.boxes) // 4, 4)
            assert (int(e["label"]), tuple(e["boxes"].reshape(-1).tolist()),
                    tuple(e["tags"].tolist())) == (record.label, record.boxes, record.tags)

        files = sorted(tf.io.gfile.glob(f"{written.path}/{split}-*.tfrecord"))
        assert files == written.shards(split)
        records = tf.data.TFRecordDataset(files).map(
            lambda r: tf.io.parse_single_example(r, spec))
        got = [(e["image_uri"].decode(), Record(int(e["label"]),
                                               tuple(e["boxes"].reshape(-1).tolist()),
                                               tuple(e["tags"].tolist()), e["image"]))
               for e in records.as_numpy_iterator()]
        check_split(written, loaded, split, got)

        for shard, index in zip(files, written.indexes(split)):
            # A frame: the record's 8-byte length and its 4-byte CRC, the record, its CRC.
            frames = [16 + len(r) for r in tf.data.TFRecordDataset(shard).as_numpy_iterator()]
            offsets = np.cumsum([0, *frames[:-1]])
            assert Path(index).read_text() == "".join(
                f"{offset} {frame}\n" for offset, frame in zip(offsets, frames))


# --- the PyPI `tfrecord` package ---------------------------------------------------------


def _writes_untyped_empty_lists() -> bool:
    """Whether this tfrecorder writes an empty list as a Feature with no list set, as it
    did before empty lists were typed (`float_list {}`); since then an empty list without
    a dtype is an error."""
    from tfrecorder.format.example import encode_example

    try:
        return encode_example({"x": []}).endswith(b"\x12\x00")
    except TypeError:
        return False


# The package takes a Feature's first set field: an untyped empty list stops it.
needs_typed_empty_lists = pytest.mark.xfail(
    _writes_untyped_empty_lists(), raises=IndexError, strict=True,
    reason="this tfrecorder writes empty lists untyped, which the tfrecord package cannot read")


@pytest.fixture(scope="module")
def tfrecord_package():
    """The `tfrecord` package (and PyTorch) from their interop folders, on `sys.path` for
    this module's tests (DataLoader workers are forked, so they have it too).

    tfrecord 1.14.4's `example_pb2.py` was made by an old protoc: under the project's
    protobuf (6.x: TensorFlow 2.21 needs >= 6.31) it fails on import ("Descriptors cannot be
    created directly"), and with PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python it imports but reads
    `Features.feature` as a list, not a map (`AttributeError: ... no attribute 'keys'`). So
    its module is made again from the file's own serialized descriptor by the installed
    protobuf, as protoc would now; the reader's code is the package's, unchanged."""
    folders = [str(interop_path("tfrecord")), str(interop_path("torch"))]
    saved_path = list(sys.path)
    sys.path[:0] = folders
    sys.modules.setdefault("tfrecord.example_pb2", _example_pb2(Path(folders[0])))
    import tfrecord.reader
    import tfrecord.torch.dataset
    import torch.utils.data

    yield types.SimpleNamespace(reader=tfrecord.reader, dataset=tfrecord.torch.dataset,
                                torch=torch)
    sys.path[:] = saved_path


def _example_pb2(site: Path) -> types.ModuleType:
    from google.protobuf import descriptor_pool
    from google.protobuf.internal import builder

    source = (site / "tfrecord" / "example_pb2.py").read_text()
    literal = re.search(r"serialized_pb=_b\((.*?)\)\n", source, re.S).group(1)
    pool = descriptor_pool.DescriptorPool()  # its own: the messages are `tfrecord.Example`
    descriptor = pool.AddSerializedFile(ast.literal_eval(literal).encode("latin1"))
    module = types.ModuleType("tfrecord.example_pb2")
    module.DESCRIPTOR = descriptor
    builder.BuildMessageAndEnumDescriptors(descriptor, module.__dict__)
    builder.BuildTopDescriptorsAndMessages(descriptor, module.__name__, module.__dict__)
    return module


def _from_tfrecord(features: dict) -> tuple[str, Record]:
    """A record as the `tfrecord` package gives it (numpy arrays, or tensors through a
    DataLoader; bytes for a single bytes value)."""
    as_list = lambda v: np.asarray(v).tolist()  # noqa: E731
    [label] = as_list(features["label"])
    return features["image_uri"].decode(), Record(
        label, tuple(np.asarray(features["boxes"], np.float32).tolist()),
        tuple(as_list(features["tags"])), bytes(features["image"]))


@needs_typed_empty_lists
def test_tfrecord_loader_reads_every_record_with_our_index_and_without(
        written, loaded, tfrecord_package):
    """Whole shards, with our index (the package then starts at a random record and wraps
    around) and without; and each shard in three parts cut at the index's offsets (`shard=`,
    what its PyTorch dataset does in each DataLoader worker)."""
    loader = tfrecord_package.reader.tfrecord_loader
    for split in SPLITS:
        pairs = list(zip(written.shards(split), written.indexes(split)))
        for index in (True, False):
            got = []
            for shard, index_path in pairs:
                records = list(loader(shard, index_path if index else None,
                                      TFRECORD_DESCRIPTION))
                assert len(records) == Path(index_path).read_text().count("\n")
                got += map(_from_tfrecord, records)
            check_split(written, loaded, split, got)
        parts = [_from_tfrecord(r) for shard, index_path in pairs for part in range(3)
                 for r in loader(shard, index_path, TFRECORD_DESCRIPTION, shard=(part, 3))]
        check_split(written, loaded, split, parts)


def test_tfrecord_cannot_read_the_index_of_a_one_record_shard(tmp_path, tfrecord_package):
    """The package reads an index with `np.loadtxt(path)[:, 0]`, which fails on one line
    (a one-dimensional array), as its own `tfrecord2idx` writes it too: a shard of one record
    is read without its index."""
    out = tmp_path / "one"
    tfrecorder.convert(pd.DataFrame({"split": ["TRAIN"], "label": ["cat"], "image_uri": [
        write_image(tmp_path / "cat.jpg")]}), str(out), progress=False)
    [shard] = read_manifest(str(out)).splits["train"].shards
    assert (out / shard.index).read_text().count("\n") == 1
    loader = tfrecord_package.reader.tfrecord_loader
    with pytest.raises(IndexError, match="1-dimensional"):
        list(loader(str(out / shard.file), str(out / shard.index), {"label": "int"}))
    [record] = loader(str(out / shard.file), None, {"label": "int"})
    assert record["label"].tolist() == [0]


@needs_typed_empty_lists
def test_gzip_shards_have_no_index_and_are_read_whole(written, tmp_path, tfrecord_package):
    """tf.data and the `tfrecord` package read a gzip shard from its start."""
    import tensorflow as tf

    out = tmp_path / "gzip"
    tfrecorder.convert(written.table[written.table["split"] == "VALIDATION"], str(out),
                       compression="gzip", progress=False)
    [shard] = read_manifest(str(out)).splits["validation"].shards
    assert shard.file.endswith(".tfrecord.gz") and shard.index == ""
    assert {p.name for p in out.iterdir()} == {shard.file, "dataset.json", "rejected.csv"}
    spec = read_manifest(str(out)).parse_spec()
    parsed = tf.data.TFRecordDataset(str(out / shard.file), compression_type="GZIP").map(
        lambda r: tf.io.parse_single_example(r, spec))
    assert {e["image_uri"].decode(): e["image"] for e in parsed.as_numpy_iterator()} == {
        uri: r.image for uri, r in expected_records(written, "validation").items()}
    got = [_from_tfrecord(r) for r in tfrecord_package.reader.tfrecord_loader(
        str(out / shard.file), None, TFRECORD_DESCRIPTION, compression_type="gzip")]
    assert dict(got) == expected_records(written, "validation")


def _dataloader_counts(tfrecord_package, dataset) -> collections.Counter:
    torch = tfrecord_package.torch
    # A worker that dies unseen would leave the loader waiting forever: five minutes.
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                         multiprocessing_context="fork", timeout=300)
    return collections.Counter(_from_tfrecord(r) for r in loader)


@needs_typed_empty_lists
@pytest.mark.usefixtures("short_temporary_folder")  # the workers' sockets (conftest.py)
def test_tfrecord_torch_datasets_under_a_dataloader_with_two_workers(
        written, loaded, tfrecord_package):
    """With our index, each worker reads its own part of each shard: every record once.
    Without one, each worker reads every shard whole; and MultiTFRecordDataset never
    divides its shards between workers, index or not: every record once per worker."""
    torch, datasets = tfrecord_package.torch, tfrecord_package.dataset
    split = "train"
    expected = collections.Counter(expected_records(written, split).items())
    pairs = list(zip(written.shards(split), written.indexes(split)))

    indexed = torch.utils.data.ChainDataset(
        [datasets.TFRecordDataset(shard, index, TFRECORD_DESCRIPTION) for shard, index in pairs])
    got = _dataloader_counts(tfrecord_package, indexed)
    assert got == expected
    check_split(written, loaded, split, list(got))

    unindexed = torch.utils.data.ChainDataset(
        [datasets.TFRecordDataset(shard, None, TFRECORD_DESCRIPTION) for shard, _ in pairs])
    assert _dataloader_counts(tfrecord_package, unindexed) == expected + expected

    stems = {Path(shard).name.removesuffix(".tfrecord"): 1.0 for shard, _ in pairs}
    multi = datasets.MultiTFRecordDataset(
        str(written.path / "{}.tfrecord"), str(written.path / "index" / "{}.idx"), stems,
        TFRECORD_DESCRIPTION, infinite=False)
    assert _dataloader_counts(tfrecord_package, multi) == expected + expected
    alone = torch.utils.data.DataLoader(multi, batch_size=None, num_workers=0)
    assert collections.Counter(map(_from_tfrecord, alone)) == expected


def test_tfrecord_fails_on_an_untyped_empty_list(tfrecord_package, tmp_path):
    """Why tfrecorder writes an empty list as TensorFlow does (`float_list {}`): a Feature
    with no list set, which TensorFlow parses as an empty list of any dtype, stops the
    `tfrecord` package (it takes the Feature's first set field)."""
    import tensorflow as tf

    typed = tf.train.Example(features=tf.train.Features(feature={
        "boxes": tf.train.Feature(float_list=tf.train.FloatList(value=[]))}))
    untyped = tf.train.Example(features=tf.train.Features(feature={
        "boxes": tf.train.Feature()}))
    path = str(tmp_path / "two.tfrecord")
    with tf.io.TFRecordWriter(path) as f:
        f.write(typed.SerializeToString())
    [record] = tfrecord_package.reader.tfrecord_loader(path, None, {"boxes": "float"})
    assert record["boxes"].shape == (0,)
    with tf.io.TFRecordWriter(path) as f:
        f.write(untyped.SerializeToString())
    with pytest.raises(IndexError):
        list(tfrecord_package.reader.tfrecord_loader(path, None, {"boxes": "float"}))


# --- NVIDIA DALI -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def dali():
    folder = str(interop_path("nvidia-dali-cuda120"))
    saved_path = list(sys.path)
    sys.path.insert(0, folder)
    import nvidia.dali
    import nvidia.dali.fn
    import nvidia.dali.tfrecord
    import nvidia.dali.types

    yield nvidia.dali
    sys.path[:] = saved_path


def test_dali_reads_every_record_with_our_index_on_the_cpu(written, loaded, dali):
    fn, tfrec, dali_types = dali.fn, dali.tfrecord, dali.types
    batch_size = 8
    for split in SPLITS:
        @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
        def pipeline(split=split):
            r = fn.readers.tfrecord(
                path=written.shards(split), index_path=written.indexes(split),
                features={"image": tfrec.FixedLenFeature((), tfrec.string, ""),
                          "image_uri": tfrec.FixedLenFeature((), tfrec.string, ""),
                          "label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                          "boxes": tfrec.VarLenFeature(tfrec.float32, 0.0),
                          "tags": tfrec.VarLenFeature(tfrec.int64, 0)},
                random_shuffle=False, pad_last_batch=True, name="reader")
            pixels = fn.decoders.image(r["image"], device="cpu",
                                       output_type=dali_types.RGB)
            return r["image_uri"], r["label"], r["boxes"], r["tags"], r["image"], pixels

        pipe = pipeline()
        pipe.build()
        size = pipe.epoch_size("reader")
        assert size == written.manifest.splits[split].num_records
        got, pixels = [], {}
        for _ in range(math.ceil(size / batch_size)):
            uris, labels, boxes, tags, images, decoded = pipe.run()
            for i in range(batch_size):
                uri = bytes(uris.at(i)).decode()
                if len(got) == size:  # the last batch is padded with the last record
                    assert uri == got[-1][0]
                    continue
                [label] = labels.at(i).tolist()
                got.append((uri, Record(label, tuple(boxes.at(i).tolist()),
                                        tuple(tags.at(i).tolist()), bytes(images.at(i)))))
                pixels[uri] = decoded.at(i)
        check_split(written, loaded, split, got, pixels)


# --- Ray Data ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray(tmp_path_factory):
    """Ray on one CPU and the loopback address, its workers finding the Ray folder (for
    TensorFlow Metadata's schema, which they unpickle) through PYTHONPATH; its session
    files in a short temporary folder (Ray's sockets live there: a Unix socket's path is
    short). Ray's token authentication stays on, its token in a temporary home (Ray writes
    it to ~/.ray/auth_token, and sets RAY_AUTH_MODE for the process: both undone)."""
    folder = str(interop_path("ray"))
    saved_path = list(sys.path)
    sys.path.insert(0, folder)
    temporary = tmp_path_factory.mktemp("ray")
    session = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(
            [folder, *filter(None, [os.environ.get("PYTHONPATH")])]))
        patch.setenv("HOME", str(temporary))
        patch.setenv("RAY_AUTH_MODE", "token")
        import ray
        import ray.data

        # Ray gives its raylet and its GCS server fixed times to start (node.py: 30 s,
        # and the GCS port file's wait), which a loaded 2-core host has missed ("timed
        # out during startup", "Timed out waiting for file .../gcs_server_port_..."):
        # start it again, twice at most.
        for attempt in (1, 2, 3):
            try:
                ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
                         _node_ip_address="127.0.0.1", _temp_dir=session)
                break
            except Exception as error:
                if attempt == 3 or "timed out" not in str(error).lower():
                    raise
                ray.shutdown()
        ray.data.DataContext.get_current().enable_progress_bars = False
        try:
            yield ray
        finally:
            ray.shutdown()
            sys.path[:] = saved_path
            shutil.rmtree(session, ignore_errors=True)


def ray_schema(manifest: Manifest):
    """The `tf_schema` Ray reads records with: each feature's dtype from the manifest."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    dtypes = {"string": schema_pb2.BYTES, "int64": schema_pb2.INT,
              "float32": schema_pb2.FLOAT}
    return schema_pb2.Schema(feature=[schema_pb2.Feature(name=name, type=dtypes[f.dtype])
                                      for name, f in manifest.features.items()])


def _from_ray(row: dict) -> tuple[str, Record]:
    """A row as Ray gives it with a `tf_schema`: every feature a list."""
    [uri], [label], [image] = row["image_uri"], row["label"], row["image"]
    return uri.decode(), Record(label, tuple(row["boxes"]), tuple(row["tags"]), image)


def test_ray_reads_the_dataset_folder_with_the_extension_filter(written, loaded, ray):
    schema = ray_schema(written.manifest)
    rows = ray.data.read_tfrecords(str(written.path), file_extensions=["tfrecord"],
                                   tf_schema=schema, include_paths=True).take_all()
    by_split = collections.defaultdict(list)
    for row in rows:
        by_split[Path(row["path"]).name.split("-")[0]].append(_from_ray(row))
    assert sorted(by_split) == list(SPLITS)
    for split in SPLITS:
        check_split(written, loaded, split, by_split[split])
    # One split: its shards, as the manifest lists them.
    rows = ray.data.read_tfrecords(written.shards("validation"), tf_schema=schema).take_all()
    check_split(written, loaded, "validation", [_from_ray(row) for row in rows])


def test_ray_needs_the_extension_filter_and_a_schema(written, ray):
    """Without `file_extensions` Ray reads every file of the folder as records (the
    manifest first); without `tf_schema` it makes a one-value list a scalar, and a column
    holding both (`tags`) cannot be put together."""
    with pytest.raises(Exception, match="dataset.json"):
        ray.data.read_tfrecords(str(written.path),
                                tf_schema=ray_schema(written.manifest)).take_all()
    with pytest.raises(Exception, match="Types mismatch"):
        ray.data.read_tfrecords(written.shards("train")).take_all()


# --- Apache Beam -----------------------------------------------------------------------


def test_beam_reads_a_split_s_shards_exactly(written):
    import apache_beam as beam
    import tensorflow as tf
    from apache_beam.testing.util import assert_that, equal_to

    for split in SPLITS:
        records = [r.numpy() for r in tf.data.TFRecordDataset(written.shards(split))]
        assert len(records) == written.manifest.splits[split].num_records
        with beam.Pipeline(runner="DirectRunner") as pipeline:
            read = pipeline | beam.io.ReadFromTFRecord(str(written.path / f"{split}-*.tfrecord"))
            assert_that(read, equal_to(records))

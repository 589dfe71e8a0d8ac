"""`tfrecorder.open_split` (tfrecorder/read/reader.py): records by position without
TensorFlow, the same values and pixels as `load()`, for PyTorch's DataLoader and Grain.

One small dataset of the bundled sample photos (two shards a split, a list column with
empty rows, rows of 4 floats, a float and a text column) is written once and read by
both; PyTorch and Grain come from their pinned interop folders (tests/interop.py).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import shutil
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from detection_data import scenes, write_detection, write_segmentation
from helpers import make_image, partly_labelled_csv
from interop import interop_path
from PIL import Image

import tfrecorder
from tfrecorder.errors import OptionError, VerificationError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPLITS = ("train", "validation", "test")


def sample_table() -> pd.DataFrame:
    table = pd.read_csv(EXAMPLES / "images.csv", names=["split", "image_uri", "label"])
    table["image_uri"] = [str(EXAMPLES / uri) for uri in table["image_uri"]]
    rows = range(len(table))
    table["tags"] = [list(range(i % 3)) for i in rows]  # a third of the rows: []
    table["boxes"] = [[[0.1 * j, 0.2, 0.3, 0.4 + i / 100] for j in range(i % 3)]
                      for i in rows]
    table["score"] = np.linspace(0, 1, len(table)).astype("float32")
    table["note"] = [f"row {i}" for i in rows]
    return table


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("open_split") / "data")
    tfrecorder.convert(sample_table(), out, num_shards=2, progress=False)
    return out


@pytest.fixture(scope="module")
def loaded(dataset) -> dict[str, dict[bytes, dict]]:
    """Every record of every split as `load()` gives it, by image_uri."""
    return {split: by_uri(load_numpy(dataset, split)) for split in SPLITS}


def load_numpy(path: str, split: str, **options) -> list[dict]:
    return [{name: value.numpy() for name, value in element.items()}
            for element in tfrecorder.load(path, split, shuffle=False, **options)]


def by_uri(records) -> dict[bytes, dict]:
    found = {record["image_uri"]: record for record in records}
    assert len(found) == len(records)
    return found


def assert_same_record(ours: dict, theirs: dict) -> None:
    """Same names, and each value of the same type, dtype, shape and content."""
    assert list(ours) == list(theirs) or set(ours) == set(theirs), (ours.keys(), theirs.keys())
    for name, value in theirs.items():
        mine = ours[name]
        assert type(mine) is type(value), (name, type(mine), type(value))
        if isinstance(value, np.ndarray):
            assert (mine.dtype, mine.shape) == (value.dtype, value.shape), name
            np.testing.assert_array_equal(mine, value, err_msg=name)
        else:
            assert mine == value, name


def copy_of(dataset: str, tmp_path) -> str:
    return shutil.copytree(dataset, tmp_path / "copy")


# --- values --------------------------------------------------------------------------------

def test_every_split_has_the_manifests_counts(dataset):
    manifest = json.loads(Path(dataset, "dataset.json").read_text())
    for split in SPLITS:
        ds = tfrecorder.open_split(dataset, split)
        assert len(ds) == manifest["splits"][split]["num_records"] > 0
        assert len(manifest["splits"][split]["shards"]) == 2
    assert isinstance(ds, tfrecorder.SplitDataset)


def test_records_are_loads_values_and_pixels(dataset, loaded):
    empty = 0
    for split in SPLITS:
        ds = tfrecorder.open_split(dataset, split)
        records = list(ds)
        assert by_uri(records).keys() == loaded[split].keys()
        for record in records:
            assert_same_record(record, loaded[split][record["image_uri"]])
            empty += record["tags"].size == 0
            assert record["tags"].dtype == np.int64 and record["tags"].ndim == 1
            assert record["boxes"].dtype == np.float32 and record["boxes"].shape[1:] == (4,)
            assert record["image"].dtype == np.uint8 and record["image"].shape[2] == 3
    assert empty >= 3  # empty lists were compared: [] as int64 (0,), boxes as (0, 4)


def test_own_channels_match_load_with_channels_0(dataset):
    theirs = by_uri(load_numpy(dataset, "train", channels=0))
    for record in tfrecorder.open_split(dataset, "train", channels=0):
        assert_same_record(record, theirs[record["image_uri"]])


def test_undecoded_images_are_the_stored_bytes_and_transform_runs_last(dataset, loaded):
    raw = tfrecorder.open_split(dataset, "test", decode=False)
    decoded = tfrecorder.open_split(dataset, "test", transform=lambda r: r["image"].shape)
    for i in range(len(raw)):
        record = raw[i]
        assert record["image"] == Path(record["image_uri"].decode()).read_bytes()
        assert decoded[i] == loaded["test"][record["image_uri"]]["image"].shape
    with pytest.raises(OptionError, match="channels"):
        tfrecorder.open_split(dataset, "test", channels=1)
    with pytest.raises(OptionError, match="split"):
        tfrecorder.open_split(dataset, "nope")
    with pytest.raises(OptionError, match="the name of one split .*, not None"):
        tfrecorder.open_split(dataset, None)


def test_indexes_count_from_the_end_and_out_of_range_is_an_index_error(dataset):
    ds = tfrecorder.open_split(dataset, "validation", decode=False)
    assert ds.record(-1) == ds.record(len(ds) - 1) and ds.record(-len(ds)) == ds.record(0)
    assert ds[np.int64(1)]["image_uri"] == ds[1]["image_uri"] != ds[0]["image_uri"]
    for index in (len(ds), -len(ds) - 1):
        with pytest.raises(IndexError, match=f"record {index} of a dataset of {len(ds)}"):
            ds[index]
    with pytest.raises(TypeError, match="int"):
        ds["0"]
    assert [r["image_uri"] for r in ds] == [ds[i]["image_uri"] for i in range(len(ds))]


def test_a_damaged_record_is_an_error_naming_its_shard(dataset, tmp_path):
    path = copy_of(dataset, tmp_path)
    ds = tfrecorder.open_split(path, "train", decode=False)
    shard = ds.manifest.splits["train"].shards[1]
    offset, size = map(int, Path(path, shard.index).read_text().splitlines()[0].split())
    data = bytearray(Path(path, shard.file).read_bytes())
    data[offset + size // 2] ^= 0xFF  # inside the first record's image
    Path(path, shard.file).write_bytes(bytes(data))
    first = shard_sizes(ds)[0]
    assert [ds[i]["image_uri"] for i in range(first)]  # the other shard reads
    with pytest.raises(VerificationError, match=rf"{shard.file}: record 0 \(at byte 0\) "
                                                r"is damaged: bad data checksum"):
        ds[first]


def shard_sizes(ds) -> list[int]:
    return [shard.num_records for shard in ds.manifest.splits[ds.split].shards]


def test_shards_without_an_index_are_read_by_their_frame_headers(dataset, loaded, tmp_path):
    path = copy_of(dataset, tmp_path)
    manifest = json.loads(Path(path, "dataset.json").read_text())
    for split in manifest["splits"].values():  # a dataset from before indexes
        for shard in split["shards"][:1]:
            os.remove(Path(path, shard.pop("index")))
    Path(path, "dataset.json").write_text(json.dumps(manifest))
    os.remove(Path(path, "index", "test-00001-of-00002.idx"))  # listed, but lost
    for split in SPLITS:
        for record in tfrecorder.open_split(path, split):
            assert_same_record(record, loaded[split][record["image_uri"]])


def test_a_truncated_shard_without_an_index_is_an_error(dataset, tmp_path):
    path = copy_of(dataset, tmp_path)
    shard = Path(path, "train-00000-of-00002.tfrecord")
    shard.write_bytes(shard.read_bytes()[:-100])
    os.remove(Path(path, "index", "train-00000-of-00002.idx"))
    with pytest.raises(VerificationError, match="train-00000-of-00002.tfrecord cannot be "
                       "read: truncated record at byte"):
        tfrecorder.open_split(path, "train")[0]


def test_gzip_shards_are_read_from_memory(dataset, loaded, tmp_path):
    path = str(tmp_path / "gzip")
    tfrecorder.convert(sample_table(), path, num_shards=2, compression="gzip",
                       progress=False)
    assert not list(Path(path).rglob("*.idx"))
    for split in SPLITS:
        ds = tfrecorder.open_split(path, split)
        for record in ds:
            assert_same_record(record, loaded[split][record["image_uri"]])
        copy = pickle.loads(pickle.dumps(ds))  # without the decompressed bytes
        assert all(s.memory is None for s in copy._shards)
        assert copy[-1]["image_uri"] == ds[-1]["image_uri"]
    damaged = Path(path, "train-00000-of-00002.tfrecord.gz")
    data = bytearray(gzip.decompress(damaged.read_bytes()))
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(VerificationError, match="train-00000-of-00002.tfrecord.gz: record "
                       r"\d+ \(at byte \d+ of its decompressed stream\) is damaged"):
        list(tfrecorder.open_split(path, "train", decode=False))


def test_the_tf_models_layout_reads_as_load_reads_it(tmp_path):
    path = str(tmp_path / "tf_models")
    tfrecorder.convert(sample_table(), path, num_shards=2, layout="tf_models",
                       progress=False)
    theirs = {r["image_name"]: r for r in load_numpy(path, "train")}
    records = list(tfrecorder.open_split(path, "train"))
    assert len(records) == len(theirs)
    for record in records:
        assert_same_record(record, theirs[record["image_name"]])


def test_a_record_without_a_label_reads_minus_one_as_in_load(tmp_path):
    path = str(tmp_path / "out")
    tfrecorder.convert(partly_labelled_csv(tmp_path), path, progress=False)
    theirs = by_uri(load_numpy(path, "train"))
    labels = {}
    for record in tfrecorder.open_split(path, "train"):
        assert_same_record(record, theirs[record["image_uri"]])
        labels[os.path.basename(record["image_uri"])] = int(record["label"])
    assert labels == {b"0.jpg": 0, b"1.jpg": -1, b"2.jpg": 1, b"6.jpg": -1, b"7.jpg": 1}


@pytest.fixture(params=["gcs_store", "s3_store"])
def store(request):
    return request.getfixturevalue(request.param)


def test_a_dataset_in_a_bucket_reads_one_ranged_request_a_record(dataset, store, tmp_path):
    gzipped = str(tmp_path / "gzip")
    tfrecorder.convert(sample_table(), gzipped, num_shards=2, compression="gzip",
                       progress=False)
    for name, folder in [("plain", dataset), ("gzip", gzipped)]:
        prefix = f"{store.root}/open_split/{name}"
        for file in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            store.upload_bytes(file.read_bytes(),
                               f"{prefix}/{file.relative_to(folder).as_posix()}")
        local = tfrecorder.open_split(folder, "train", decode=False)
        remote = tfrecorder.open_split(prefix, "train", decode=False)
        assert [remote.record(i) for i in range(len(remote))] == [
            local.record(i) for i in range(len(local))]
        store.wait_idle()
        store.reset_stats()
        remote[-1], remote[0]  # indexes and shards read: a record is one request
        stats = store.wait_idle()
        assert stats["requests"] == (2 if name == "plain" else 0), stats["log"]
        assert_same_record(pickle.loads(pickle.dumps(remote))[3], local[3])


@pytest.fixture(scope="module")
def many_modes(tmp_path_factory) -> pd.DataFrame:
    """Images of every kind a dataset stores: grey, RGB, RGBA, grey+alpha, palette and
    16-bit PNGs; grey, colour and CMYK JPEGs."""
    folder = tmp_path_factory.mktemp("modes")
    images = {"l.png": make_image(mode="L"), "rgba.png": make_image(mode="RGBA", seed=1),
              "la.png": make_image(mode="LA", seed=2), "p.png": make_image(seed=3).convert(
                  "P", palette=Image.Palette.ADAPTIVE),
              "i16.png": Image.fromarray((np.arange(1200, dtype=np.uint16) * 50).reshape(
                  30, 40)),
              "l.jpg": make_image(mode="L", seed=4), "rgb.jpg": make_image(seed=5),
              "cmyk.jpg": make_image(seed=6).convert("CMYK")}
    for name, image in images.items():
        image.save(folder / name)
    return pd.DataFrame({"split": "TRAIN", "label": "a",
                         "image_uri": [str(folder / name) for name in images]})


@pytest.mark.parametrize("image_format", ["auto", "raw"])
def test_pixels_of_every_kind_of_image_are_loads(many_modes, tmp_path, image_format):
    path = str(tmp_path / "out")
    tfrecorder.convert(many_modes, path, image_format=image_format, progress=False)
    for channels in (3, 0):
        theirs = by_uri(load_numpy(path, "train", channels=channels))
        records = list(tfrecorder.open_split(path, "train", channels=channels))
        assert len(records) == len(many_modes)
        for record in records:
            assert_same_record(record, theirs[record["image_uri"]])
            # torch warns of (and may not write to) an array it cannot write
            assert record["image"].flags.writeable, record["image_uri"]


@pytest.mark.parametrize("layout", ["tfrecorder", "tf_models"])
@pytest.mark.parametrize("task", ["detection", "segmentation"])
def test_detection_and_segmentation_records_are_loads(tmp_path, task, layout):
    """Boxes [n, 4], 0-based object classes, instance masks [n, H, W] and segmentation
    masks [H, W, 1] as load() gives them, in both layouts."""
    drawn = scenes(str(tmp_path / "scenes"))
    path = str(tmp_path / "out")
    write = write_detection if task == "detection" else write_segmentation
    write(path, drawn, layout=layout, num_workers=1,
          **({"masks": True} if task == "detection" else {}))
    theirs = {r["image_name"]: r for r in load_numpy(path, "train")}
    records = list(tfrecorder.open_split(path, "train"))
    assert len(records) == len(theirs) == len(drawn)
    for record in records:
        assert_same_record(record, theirs[record["image_name"]])


# --- hosts and processes -------------------------------------------------------------------

@pytest.mark.parametrize("count", [1, 2, 3, 5, 40])
def test_host_shards_cover_the_split_once_and_evenly(dataset, count):
    ds = tfrecorder.open_split(dataset, "train", decode=False)
    parts = [ds.shard(i, count) for i in range(count)]
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == len(ds)
    uris = [r["image_uri"] for part in parts for r in part]
    assert uris == [r["image_uri"] for r in ds]  # in order: each record once
    halves = [parts[0].shard(i, 2) for i in range(2)]  # a host's part, shared by workers
    assert [r["image_uri"] for h in halves for r in h] == [r["image_uri"] for r in parts[0]]
    assert isinstance(parts[0], tfrecorder.SplitDataset)
    with pytest.raises(OptionError, match="index"):
        ds.shard(count, count)


@pytest.mark.parametrize("count", [1, 3])
def test_in_order_streams_what_positions_give(dataset, count):
    """`in_order` (what `show` reads through): each record of the dataset (or of a host's
    part) once, as `ds[i]` gives it, with its shard file and its index there."""
    ds = tfrecorder.open_split(dataset, "train", decode=False)
    shards = ds.manifest.splits["train"].shards
    for part in (ds.shard(i, count) for i in range(count)):
        streamed = list(part.in_order())
        assert [r["image_uri"] for *_, r in streamed] == [r["image_uri"] for r in part]
        for file, index, record in streamed:
            before = sum(s.num_records for s in shards[:[s.file for s in shards].index(file)])
            assert ds[before + index]["image_uri"] == record["image_uri"]


def test_a_host_reads_the_records_load_gives_it(dataset):
    """Shards that split evenly across hosts: each host's block of them, as in load()."""
    ds = tfrecorder.open_split(dataset, "train", decode=False)
    assert len(ds.manifest.splits["train"].shards) == 2
    for i in range(2):
        theirs = tfrecorder.load(dataset, "train", host=(i, 2), shuffle=False)
        assert [r["image_uri"] for r in ds.shard(i, 2)] == [
            e["image_uri"].numpy() for e in theirs]


def test_a_pickled_dataset_reads_with_its_own_files(dataset):
    ds = tfrecorder.open_split(dataset, "train", decode=False)
    first = ds.record(0)  # opens a shard in this process
    copy = pickle.loads(pickle.dumps(ds.shard(0, 1)))
    assert copy.record(0) == first and len(copy) == len(ds)


def test_a_process_keeps_few_shards_open_and_threads_share_them(dataset, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from tfrecorder.storage import fs

    monkeypatch.setattr(fs._descriptors, "limit", 2)
    splits = [tfrecorder.open_split(dataset, split, decode=False) for split in SPLITS]
    wanted = [(ds, i) for ds in splits for i in range(len(ds))] * 3
    np.random.default_rng(0).shuffle(wanted)  # six shards, in random order
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda item: item[0].record(item[1]), wanted))
    assert found == [ds.record(i) for ds, i in wanted]
    assert len(fs._descriptors.open) == 2  # after the reads on one thread
    for ds in splits:
        ds.close()
    assert not fs._descriptors.open
    assert splits[0].record(0) == found[wanted.index((splits[0], 0))]  # opened again


@pytest.fixture
def torch(monkeypatch, short_temporary_folder):
    """PyTorch from its interop folder, in this process and in the ones it starts (its
    DataLoader workers' sockets in a short folder: conftest.py)."""
    folder = str(interop_path("torch"))
    monkeypatch.syspath_prepend(folder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [folder, *sys.path[1:]]))  # spawned workers: our tree and the venv's as here
    import torch

    return torch


@pytest.mark.parametrize("sampler, context", [("random", "spawn"), ("default", "fork")])
def test_torch_dataloader_workers_read_every_record_once(dataset, torch, sampler, context):
    from torch.utils.data import DataLoader, RandomSampler

    records = tfrecorder.open_split(dataset, "train").to_torch()
    assert isinstance(records, torch.utils.data.Dataset)
    # A worker that dies unseen would leave the loader waiting forever: five minutes.
    loader = DataLoader(records, batch_size=None, num_workers=2,
                        sampler=RandomSampler(records) if sampler == "random" else None,
                        multiprocessing_context=context, timeout=300)
    seen = Counter()
    for record in loader:
        assert record["image"].dtype == torch.uint8 and record["image"].shape[2] == 3
        seen[record["image_uri"]] += 1
    assert seen == Counter(r["image_uri"] for r in records.records)


def test_torch_batches_of_a_transformed_split(dataset, torch):
    from torch.utils.data import DataLoader

    records = tfrecorder.open_split(dataset, "test", transform=pair)
    batches = list(DataLoader(records.to_torch(), batch_size=2, num_workers=2, timeout=300))
    labels = torch.cat([labels for _, labels in batches])
    assert sorted(labels.tolist()) == sorted(int(r["label"]) for r in
                                             tfrecorder.open_split(dataset, "test"))
    assert batches[0][0].shape == (2, 8, 8, 3)


def pair(record):
    """(a corner of the image, the label): a transform for DataLoader's workers."""
    return np.ascontiguousarray(record["image"][:8, :8]), record["label"]


@pytest.fixture
def grain(monkeypatch):
    folder = str(interop_path("grain"))
    monkeypatch.syspath_prepend(folder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([folder, *sys.path[1:]]))
    import grain

    return grain


def test_grain_map_dataset_reads_every_record_once(dataset, grain):
    ds = tfrecorder.open_split(dataset, "validation")
    assert isinstance(ds, grain.sources.RandomAccessDataSource)
    shuffled = grain.MapDataset.source(ds).shuffle(seed=0).map(lambda r: r["image_uri"])
    assert sorted(shuffled) == sorted(r["image_uri"] for r in ds)


def test_grain_dataloader_workers_read_every_record_once(dataset, grain):
    ds = tfrecorder.open_split(dataset, "train")
    sampler = grain.samplers.IndexSampler(
        num_records=len(ds), shard_options=grain.sharding.NoSharding(), shuffle=True,
        num_epochs=1, seed=0)
    loader = grain.DataLoader(data_source=ds, sampler=sampler, worker_count=2)
    seen = Counter(record["image_uri"] for record in loader)
    assert seen == Counter(r["image_uri"] for r in ds)


# --- docs/reading.md -----------------------------------------------------------------------

OURS = ("## PyTorch, without TensorFlow", "## JAX and Grain")


def recipes() -> list[str]:
    """The code blocks of docs/reading.md's sections on this reader, in order."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "reading.md").read_text()
    sections = re.split(r"(?m)^(?=## )", text)
    return [block for section in sections if section.startswith(OURS)
            for block in re.findall(r"```python\n(.*?)```", section, re.S)]


def test_the_recipes_in_the_docs_run(tmp_path, monkeypatch, torch, grain):
    tfrecorder.convert(sample_table(), str(tmp_path / "flowers"), progress=False)
    monkeypatch.chdir(tmp_path)
    blocks = recipes()
    assert len(blocks) == 4
    namespace: dict = {}
    with warnings.catch_warnings():  # raised in the forked workers too, and passed on
        warnings.simplefilter("error", UserWarning)  # e.g. torch's for a read-only array
        for block in blocks:
            exec(compile(block, "docs/reading.md", "exec"), namespace)
    assert tuple(namespace["images"].shape[1:]) == (224, 224, 3)  # the last loop's
    assert len(namespace["part"]) == len(namespace["train"]) // 2

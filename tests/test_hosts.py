"""Shards that split evenly across hosts: `convert(hosts=N)` and `load(host=(i, N))`.

Every host's share is read back with TensorFlow, and the shares must cover the split
exactly once. tf.distribute's own sharding is run through its rewrite (`_AutoShardDataset`,
what `experimental_distribute_dataset` applies to a dataset on each worker)."""

import logging

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from helpers import read_manifest, write_image

import tfrecorder
from tfrecorder.errors import OptionError


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    folder = tmp_path_factory.mktemp("images")
    return pd.DataFrame({
        "split": ["TRAIN"] * 23 + ["TEST"] * 3,
        "image_uri": [write_image(folder / f"{i}.jpg", seed=i) for i in range(26)],
        "label": [f"class{i % 3}" for i in range(26)],
    })


def uris(ds) -> list[str]:
    return [element["image_uri"].numpy().decode() for element in ds]


@pytest.mark.parametrize("hosts", [2, 3])
def test_every_split_gets_a_multiple_of_hosts_shards_of_equal_size(tmp_path, table, hosts):
    out = tmp_path / "out"
    tfrecorder.convert(table, out, hosts=hosts, progress=False)
    manifest = read_manifest(out)
    assert manifest["options"]["hosts"] == hosts
    for name, split in manifest["splits"].items():
        sizes = [shard["num_records"] for shard in split["shards"]]
        # 3 test rows on 3 hosts: one each; on 2 hosts: 2 and 1
        assert len(sizes) % hosts == 0 and max(sizes) - min(sizes) <= 1, (name, sizes)
    shares = [uris(tfrecorder.load(out, "train", host=(i, hosts), shuffle=False))
              for i in range(hosts)]
    assert sorted(sum(shares, [])) == sorted(table.image_uri[:23])  # each record once
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    for i, share in enumerate(shares):  # len() is the share's, for Keras' steps
        assert len(tfrecorder.load(out, "train", host=(i, hosts))) == len(share)


def test_a_shard_count_that_does_not_split_evenly_is_refused_before_any_work(tmp_path, table):
    with pytest.raises(OptionError, match=r"num_shards=3 does not split evenly across "
                                          r"hosts=2: give a multiple of 2 \(e.g. 4\)"):
        tfrecorder.convert(table, tmp_path / "out", num_shards=3, hosts=2)
    assert not (tmp_path / "out").exists()
    with pytest.raises(OptionError, match="for train does not split evenly"):
        tfrecorder.convert(table, tmp_path / "out", num_shards={"train": 3}, hosts=2)


def test_without_even_shards_a_host_keeps_every_nth_record_and_says_so(tmp_path, table, caplog):
    out = tmp_path / "out"
    tfrecorder.convert(table, out, num_shards=2, progress=False)
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        shares = [uris(tfrecorder.load(out, "train", host=(i, 3))) for i in range(3)]
    assert "2 shards do not split evenly across 3 hosts" in caplog.text
    assert sorted(sum(shares, [])) == sorted(table.image_uri[:23])
    assert [len(s) for s in shares] == [8, 8, 7]
    assert [len(tfrecorder.load(out, "train", host=(i, 3))) for i in range(3)] == [8, 8, 7]


@pytest.mark.parametrize("host", [(2, 2), (-1, 2), (0, 0), 3, (0.5, 2), "0/2"])
def test_a_host_that_is_not_index_and_count_is_refused(tmp_path, table, host):
    with pytest.raises(OptionError, match="host"):
        tfrecorder.load(tmp_path, "train", host=host)


def test_tf_distribute_splits_a_one_shard_split_across_two_workers(tmp_path, table):
    """tf.distribute's default file sharding fails on a split of one shard and two
    workers ('Could not apply FILE based sharding'); load() shards by record instead."""
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    out = tmp_path / "out"
    tfrecorder.convert(table, out, progress=False)
    assert len(read_manifest(out)["splits"]["train"]["shards"]) == 1
    ds = tfrecorder.load(out, "train", shuffle=False)
    shares = [uris(_AutoShardDataset(ds, 2, i)) for i in range(2)]
    assert sorted(sum(shares, [])) == sorted(table.image_uri[:23])
    assert [len(s) for s in shares] == [12, 11]
    # With its host's share already, tf.distribute shards nothing more.
    written = tmp_path / "even"
    tfrecorder.convert(table, written, hosts=2, progress=False)
    mine = tfrecorder.load(written, "train", host=(1, 2), shuffle=False)
    assert uris(_AutoShardDataset(mine, 2, 1)) == uris(mine)


def test_hosts_reads_the_same_records_as_one_host(tmp_path, table):
    out = tmp_path / "out"
    tfrecorder.convert(table, out, hosts=2, progress=False)
    whole = {e["image_uri"].numpy(): e["image"].numpy()
             for e in tfrecorder.load(out, "train", shuffle=False)}
    for i in range(2):
        for element in tfrecorder.load(out, "train", host=(i, 2)):
            assert np.array_equal(element["image"].numpy(), whole[element["image_uri"].numpy()])
    assert tf.data.experimental.cardinality(tfrecorder.load(out, "train")) == 23

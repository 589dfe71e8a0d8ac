"""The read side of video and audio datasets (issue 49): `load()`'s temporal sampling as
DMVR samples (a seeded random window for train, new each epoch; the centre for the rest;
short clips looping), tracking boxes and action segments per clip, audio crops,
`open_split` giving the same elements without TensorFlow (and to a PyTorch DataLoader),
`verify` decoding every frame, `info`'s counts, and `show`'s strips of frames.

Datasets come from `clip_datasets.write_clip_dataset`: frames whose pixels say which
frame they are (`frame_index`), so which frames were sampled is read off the pixels.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from clip_datasets import (
    FRAME_RATE,
    HEIGHT,
    WIDTH,
    frame_index,
    frame_pixels,
    jpeg,
    write_clip_dataset,
)
from interop import interop_path

import tfrecorder
from tfrecorder.errors import OptionError, VerificationError
from tfrecorder.format import media_sequence as ms

STEP_US = round(1e6 / FRAME_RATE)


def indices(video) -> list[int]:
    return [frame_index(frame) for frame in np.asarray(video)]


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> str:
    """Train: clips of 20, 5 and 12 frames; validation: 12 and 7 frames."""
    return write_clip_dataset(tmp_path_factory.mktemp("videos"), [
        {"label": "run", "num_frames": 20}, {"label": "jump", "num_frames": 5},
        {"label": "jump", "num_frames": 12},
        {"label": "run", "num_frames": 12, "split": "validation"},
        {"label": "jump", "num_frames": 7, "split": "validation"},
    ], records_per_shard=2)


def test_train_windows_are_seeded_strided_and_new_every_epoch(videos):
    def epochs(seed):
        ds = tfrecorder.load(videos, "train", num_frames=4, frame_stride=2, seed=seed,
                             shuffle=False)
        return [[(indices(e["video"]), e["timestamps"].numpy().tolist()) for e in ds]
                for _ in range(3)]

    first, again = epochs(7), epochs(7)
    assert first == again  # the same seed, the same windows
    long_clip = [epoch[0][0] for epoch in first]  # 20 frames: 13 possible offsets
    assert len(set(map(tuple, long_clip))) > 1  # a new window each epoch
    for epoch in first:
        for frames, times in epoch:
            assert times == [k * STEP_US for k in frames]  # timestamps of those frames
        frames = epoch[0][0]
        assert frames == list(range(frames[0], frames[0] + 8, 2)) and frames[0] <= 20 - 7
    assert epochs(8) != first  # another seed, other windows


def test_other_splits_take_the_centre_window(videos):
    ds = tfrecorder.load(videos, "validation", num_frames=4, frame_stride=2)
    assert [indices(e["video"]) for e in ds] == [[2, 4, 6, 8], [0, 2, 4, 6]]
    assert [indices(e["video"]) for e in ds] == [[2, 4, 6, 8], [0, 2, 4, 6]]  # each epoch
    ds = tfrecorder.load(videos, "validation", num_frames=3)
    assert [indices(e["video"]) for e in ds] == [[4, 5, 6], [2, 3, 4]]


def test_clips_shorter_than_the_window_loop(videos):
    ds = tfrecorder.load(videos, "train", num_frames=4, frame_stride=2, shuffle=False)
    short = next(e for e in ds if e["data_path"] == b"clips/1.mp4")
    # 5 frames, a window of 8: the only offset is 0, and frame 6 is frame 1 again.
    assert indices(short["video"]) == [0, 2, 4, 1]
    assert short["timestamps"].numpy().tolist() == [0, 2 * STEP_US, 4 * STEP_US, STEP_US]
    ds = tfrecorder.load(videos, "validation", num_frames=10)
    assert indices(next(iter(ds.skip(1)))["video"]) == [0, 1, 2, 3, 4, 5, 6, 0, 1, 2]


def test_frames_resize_and_batch_with_labels(videos):
    ds = tfrecorder.load(videos, "train", num_frames=4, image_size=(12, 16), batch_size=2,
                         shuffle=False)
    batches = list(ds)
    assert [b["video"].shape for b in batches] == [(2, 4, 12, 16, 3), (1, 4, 12, 16, 3)]
    assert batches[0]["video"].dtype == tf.uint8
    assert batches[0]["label"].numpy().tolist() in ([1, 0], [0, 1], [1, 1], [0, 0])
    labels = sorted(int(v) for b in batches for v in b["label"])
    assert labels == [0, 0, 1]  # jump, jump, run
    assert len(ds) == 2


def test_the_records_parse_with_tensorflows_own_parser(videos):
    files = tf.io.gfile.glob(os.path.join(videos, "validation-*.tfrecord"))
    record = next(iter(tf.data.TFRecordDataset(files)))
    context, steps = tf.io.parse_single_sequence_example(
        record, {ms.CLIP_LABEL_INDEX: tf.io.VarLenFeature(tf.int64),
                 ms.IMAGE_HEIGHT: tf.io.FixedLenFeature([], tf.int64)},
        {ms.IMAGE_ENCODED: tf.io.FixedLenSequenceFeature([], tf.string),
         ms.IMAGE_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64)})
    assert int(context[ms.IMAGE_HEIGHT]) == HEIGHT
    frames = [tf.io.decode_jpeg(data).numpy() for data in steps[ms.IMAGE_ENCODED]]
    assert [frame_index(f) for f in frames] == list(range(len(frames)))
    loaded = next(iter(tfrecorder.load(videos, "validation")))  # every frame: the same
    assert np.array_equal(loaded["video"].numpy()[3], tf.io.decode_jpeg(
        steps[ms.IMAGE_ENCODED][3], dct_method="INTEGER_ACCURATE").numpy())


def test_a_keras_model_trains_an_epoch_on_clips(videos):
    import keras

    ds = tfrecorder.load(videos, "train", num_frames=4, batch_size=2, as_supervised=True,
                         seed=1)
    video, label = ds.element_spec
    assert video.shape.as_list() == [None, 4, None, None, 3]  # sizes: per clip
    model = keras.Sequential([
        keras.Input((4, None, None, 3)), keras.layers.Rescaling(1 / 255),
        keras.layers.Conv3D(4, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling3D(), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.fixture(scope="module")
def tracks(tmp_path_factory) -> str:
    box = [0.1, 0.2, 0.5, 0.6]
    return write_clip_dataset(tmp_path_factory.mktemp("tracks"), [
        {"num_frames": 6, "split": "validation", "regions": [
            (1, [box, [0.3, 0.3, 0.9, 0.9]], ["car", "person"], [7, 8]),
            (3, [box], ["car"], [7]), (4, [], [], [])]},
        # At 0.46 s: 0.04 s from frame 5, within half a frame's 0.05 s; 0.06 s from frame 4.
        {"num_frames": 6, "split": "validation", "regions": [(2, [box], ["person"], [1]),
                                                               (4.6, [box], ["car"], [2])]},
    ], task="object_tracking")


def test_tracking_clips_give_each_sampled_frames_boxes(tracks):
    first = next(iter(tfrecorder.load(tracks, "validation", num_frames=6)))
    assert first["objects/bbox"].shape == (6, 2, 4)
    assert first["objects/num"].numpy().tolist() == [0, 2, 0, 1, 0, 0]
    assert first["objects/is_annotated"].numpy().tolist() == [False, True, False, True, True,
                                                               False]
    assert np.allclose(first["objects/bbox"][1], [[0.1, 0.2, 0.5, 0.6], [0.3, 0.3, 0.9, 0.9]])
    assert first["objects/label"][1].numpy().tolist() == [0, 1]  # car, person
    assert first["objects/track"].numpy()[[1, 3]].tolist() == [[7, 8], [7, -1]]
    assert np.all(first["objects/bbox"][0] == -1)  # padding
    window = next(iter(tfrecorder.load(tracks, "validation", num_frames=2, frame_stride=2)))
    assert indices(window["video"]) == [1, 3]  # the centre: offset (6 - 2 * 2) // 2
    assert window["objects/num"].numpy().tolist() == [2, 1]
    assert window["objects/track"].numpy().tolist() == [[7, 8], [7, -1]]
    batch = next(iter(tfrecorder.load(tracks, "validation", num_frames=6, batch_size=2,
                                      max_boxes=3)))
    assert batch["objects/bbox"].shape == (2, 6, 3, 4)
    assert batch["objects/num"].numpy()[1].tolist() == [0, 0, 1, 0, 0, 1]
    assert batch["objects/track"].numpy()[1, :, 0].tolist() == [-1, -1, 1, -1, -1, 2]
    padded = next(iter(tfrecorder.load(tracks, "validation", num_frames=6, batch_size=2)))
    assert padded["objects/bbox"].shape == (2, 6, 2, 4)  # the batch's most boxes a frame
    assert np.all(padded["objects/label"].numpy()[1, :, 1] == -1)
    video, target = next(iter(tfrecorder.load(tracks, "validation", num_frames=6,
                                              as_supervised=True)))
    assert set(target) == {"boxes", "classes"} and video.shape == (6, HEIGHT, WIDTH, 3)


def test_action_recognition_clips_carry_their_segments(tmp_path):
    path = write_clip_dataset(tmp_path, [{"num_frames": 4, "label": "kick", "segments": [
        (100_000, 200_000, "kick"), (300_000, 300_000, "jump")]}], task="action_recognition")
    clip = next(iter(tfrecorder.load(path, "train", num_frames=2)))
    assert clip["segments/start"].numpy().tolist() == [100_000, 300_000]
    assert clip["segments/end"].numpy().tolist() == [200_000, 300_000]
    assert clip["segments/label"].numpy().tolist() == [1, 0]  # jump, kick
    assert int(clip["label"]) == 1


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> str:
    ramp = np.arange(0, 1000, dtype=np.float32)[:, None] / 1000 * [1, -1]
    return write_clip_dataset(tmp_path_factory.mktemp("sounds"), [
        {"label": "a", "samples": ramp, "packet": 256},
        {"label": "b", "samples": ramp[:300], "packet": 128},
        {"label": "a", "samples": ramp, "split": "validation", "packet": 256},
    ], kind="audio")


def test_audio_crops_are_random_for_train_central_otherwise_and_padded(sounds):
    clip = next(iter(tfrecorder.load(sounds, "validation")))
    assert clip["audio"].shape == (1000, 2) and float(clip["sample_rate"]) == 8000
    assert np.allclose(clip["audio"][:, 1], -clip["audio"][:, 0])  # channels kept apart
    clip = next(iter(tfrecorder.load(sounds, "validation", num_samples=400)))
    assert np.allclose(clip["audio"][:, 0] * 1000, np.arange(300, 700))
    starts = set()
    for seed in range(3):
        for clip in tfrecorder.load(sounds, "train", num_samples=400, seed=seed,
                                    shuffle=False):
            samples = np.round(clip["audio"].numpy()[:, 0] * 1000)
            if int(clip["label"]) == 0:
                assert np.all(np.diff(samples) == 1)  # one contiguous crop
                starts.add(round(samples[0]))
            else:  # 300 samples: all of them, then zeros
                assert np.all(samples[:300] == np.arange(300))
                assert np.all(clip["audio"].numpy()[300:] == 0)
    assert len(starts) > 1
    batch = next(iter(tfrecorder.load(sounds, "train", num_samples=400, batch_size=2)))
    assert batch["audio"].shape == (2, 400, 2)


def test_open_split_gives_loads_elements_as_numpy(videos, tracks, sounds):
    ours = tfrecorder.open_split(videos, "validation", num_frames=4, frame_stride=2)
    theirs = list(tfrecorder.load(videos, "validation", num_frames=4, frame_stride=2))
    for mine, loaded in zip(ours, theirs):
        assert np.array_equal(mine["video"], loaded["video"].numpy())  # the same pixels
        assert np.array_equal(mine["timestamps"], loaded["timestamps"].numpy())
        assert mine["label"] == loaded["label"].numpy()
    train = tfrecorder.open_split(videos, "train", num_frames=4, frame_stride=2, seed=5)
    first = [indices(train[i]["video"]) for i in range(len(train))]
    assert first == [indices(train[i]["video"]) for i in range(len(train))]  # seeded
    seen = {tuple(first[0])}
    for epoch in range(1, 6):
        train.set_epoch(epoch)
        seen.add(tuple(indices(train[0]["video"])))
    assert len(seen) > 1
    mine = tfrecorder.open_split(tracks, "validation", num_frames=6)[0]
    loaded = next(iter(tfrecorder.load(tracks, "validation", num_frames=6)))
    for key in ("objects/bbox", "objects/label", "objects/track", "objects/num",
                "objects/is_annotated"):
        assert np.array_equal(mine[key], loaded[key].numpy()), key
    mine = tfrecorder.open_split(sounds, "validation", num_samples=400)[0]
    loaded = next(iter(tfrecorder.load(sounds, "validation", num_samples=400)))
    assert np.array_equal(mine["audio"], loaded["audio"].numpy())


@pytest.fixture
def torch(monkeypatch):
    folder = interop_path("torch")
    monkeypatch.syspath_prepend(str(folder))
    import torch

    return torch


def test_a_torch_dataloader_batches_open_split_clips(videos, torch):
    from torch.utils.data import DataLoader

    records = tfrecorder.open_split(
        videos, "train", num_frames=4, seed=0,
        transform=lambda clip: (clip["video"], clip["label"])).to_torch()
    batches = list(DataLoader(records, batch_size=2, num_workers=0))
    assert [tuple(video.shape) for video, _ in batches] == [(2, 4, HEIGHT, WIDTH, 3),
                                                             (1, 4, HEIGHT, WIDTH, 3)]
    assert batches[0][0].dtype == torch.uint8
    assert sorted(torch.cat([label for _, label in batches]).tolist()) == [0, 0, 1]


def test_verify_decodes_every_frame_and_names_the_corrupt_one(tmp_path):
    frames = [jpeg(frame_pixels(k)) for k in range(8)]
    frames[7] = frames[7][:len(frames[7]) // 2]  # truncated
    # Not in tmp_path itself, the test's temporary folder: load() below makes TensorFlow
    # write AutoGraph's files there (the first time it converts a function in the
    # process), which verify names as files the manifest does not list.
    path = write_clip_dataset(tmp_path / "clips", [
        {"label": "run", "split": "validation"},
        {"label": "run", "split": "validation", "encoded": frames}], records_per_shard=1)
    # load decodes only the frames it samples: the centre 4 of 8 are sound.
    assert len(list(tfrecorder.load(path, "validation", num_frames=4))) == 2
    with pytest.raises(VerificationError) as raised:
        tfrecorder.verify(path)
    problems = raised.value.report.problems
    assert [(p.file, p.record, p.check) for p in problems] == [
        ("validation-00001-of-00002.tfrecord", 0, "decode")]
    assert "frame 7" in str(problems[0]) and "1 of its 8 frames" in str(problems[0])
    report = tfrecorder.verify(write_clip_dataset(tmp_path / "sound", [
        {"label": "run"}, {"label": "run", "num_frames": 3}]))
    assert report.num_images_decoded == 11 and report.num_records_parsed == 2


def test_verify_checks_the_manifests_media_counts(tmp_path):
    path = write_clip_dataset(tmp_path, [{"label": "run"}])
    manifest = json.loads(Path(path, "dataset.json").read_text())
    manifest["media"]["counts"]["train"]["frames"] = 9
    Path(path, "dataset.json").write_text(json.dumps(manifest))
    with pytest.raises(VerificationError, match="holds 9 frames, and its records hold 8"):
        tfrecorder.verify(path)


def test_info_counts_clips_frames_seconds_and_labels(videos, sounds):
    from tfrecorder import cli

    info = tfrecorder.info(videos)
    assert info.media == {"train": {"clips": 3, "frames": 37, "seconds": 3.7},
                          "validation": {"clips": 2, "frames": 19, "seconds": 1.9}}
    assert info.class_counts == {"train": {"jump": 2, "run": 1},
                                 "validation": {"jump": 1, "run": 1}}
    assert info.counted == "clips" and info.to_json()["media"]["kind"] == "video"
    assert "video: 5 clips, 56 frames, 5.6 s" in repr(info)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cli._info(argparse.Namespace(path=videos, json=False))
    lines = printed.getvalue().splitlines()
    assert any(line.split()[:5] == ["train", "3", "clips", "37", "frames"] for line in lines)
    assert "Media:        video, stored as JPEG frames" in printed.getvalue()
    assert tfrecorder.info(sounds).media["train"] == {"clips": 2, "frames": 0,
                                                      "seconds": 1300 / 8000}


def test_show_draws_a_strip_of_frames_and_a_waveform(videos, sounds):
    from tfrecorder.read.thumbnails import thumbnails

    strip = thumbnails(videos, "validation", per_class=1, size=64, classes=["run"])[0]
    pixels = np.asarray(strip.image)
    assert pixels.shape[1] == 64  # four frames of 16 pixels, first to last
    assert [frame_index(pixels[:, k * 16:(k + 1) * 16]) for k in range(4)] == [0, 4, 7, 11]
    assert strip.image_name == "clips/3.mp4"
    wave = thumbnails(sounds, "train", per_class=1, size=64)[0].image
    assert wave.size == (64, 32) and len(set(np.asarray(wave).reshape(-1, 3).sum(1))) > 2
    sheet = tfrecorder.show(videos, "validation", 1, thumbnail_size=64)
    assert sheet.width > 64


def test_options_that_do_not_apply_are_refused_by_name(videos, sounds, tmp_path):
    refused = [
        (videos, {"augment": "basic", "num_frames": 4}, "augment"),
        (videos, {"crop": "center", "image_size": (8, 8)}, "crop"),
        (videos, {"num_samples": 100}, "num_samples"),
        (videos, {"batch_size": 2}, "num_frames"),
        (videos, {"max_boxes": 3}, "max_boxes"),
        (videos, {"channels": 1}, "channels"),
        (sounds, {"num_frames": 4}, "num_frames"),
        (sounds, {"image_size": (8, 8)}, "image_size"),
        (sounds, {"batch_size": 2}, "num_samples"),
        (videos, {"frame_stride": 0}, "frame_stride"),
    ]
    for path, options, option in refused:
        with pytest.raises(OptionError) as raised:
            tfrecorder.load(path, "train", **options)
        assert raised.value.option == option, (options, raised.value)
    images = tmp_path / "images"
    images.mkdir()
    manifest = json.loads(Path(videos, "dataset.json").read_text())
    del manifest["media"]
    manifest["features"] = {"image": {"dtype": "string", "shape": [], "role": "image"}}
    (images / "dataset.json").write_text(json.dumps(manifest))
    for options in ({"num_frames": 4}, {"frame_stride": 2}, {"num_samples": 9}):
        with pytest.raises(OptionError, match="clips") as raised:
            tfrecorder.load(images, "train", **options)
        assert raised.value.option == next(iter(options))
    with pytest.raises(OptionError) as raised:
        tfrecorder.open_split(videos, "train", num_samples=5)
    assert raised.value.option == "num_samples"


def test_a_dataset_of_kept_media_bytes_is_refused_with_the_reason(videos, tmp_path):
    manifest = json.loads(Path(videos, "dataset.json").read_text())
    manifest["media"]["stored"] = "encoded_media"
    (tmp_path / "dataset.json").write_text(json.dumps(manifest))
    with pytest.raises(OptionError, match="keep_media"):
        tfrecorder.load(tmp_path, "train", num_frames=4)


def test_reading_clips_without_tensorflow(videos):
    from helpers import run_without_tensorflow

    printed = run_without_tensorflow(
        "import sys, tfrecorder\n"
        "ds = tfrecorder.open_split(sys.argv[1], 'validation', num_frames=2)\n"
        "print(ds[0]['video'].shape)\n"
        "tfrecorder.verify(sys.argv[1])\n", videos)
    assert printed.strip() == f"(2, {HEIGHT}, {WIDTH}, 3)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

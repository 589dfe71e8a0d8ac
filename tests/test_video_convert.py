"""Video and audio end to end: real files (tests/media_data.py, made with PyAV and soundfile)
converted by `convert()` on both engines, read back by TensorFlow's own
`parse_single_sequence_example`, by MediaPipe's MediaSequence getters, by `load()`, and
checked by `verify`; the frames against PyAV's own decode, the samples against soundfile's.
"""

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import av
import media_data
import numpy as np
import pandas as pd
import pytest
import soundfile
import tensorflow as tf
from mediapipe_sequence import media_sequence

import tfrecorder
from tfrecorder.errors import MissingExtraError
from tfrecorder.format.manifest import read_manifest

FPS, SHORT_SIDE = 5, 32


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, str]:
    return media_data.files(str(tmp_path_factory.mktemp("media")))


@pytest.fixture(scope="module")
def converted(made, tmp_path_factory) -> dict:
    """A video table with files a converter meets (an H.264 MP4, a VP9 WebM, a phone clip,
    a variable frame rate, a span within a file) and files it must reject (garbage, an
    audio-only file, a span after the video's end, a truncated file), written by both
    engines."""
    table = pd.DataFrame({
        "split": ["TRAIN"] * 5 + ["TEST"] * 4,
        "video_uri": [made["h264"], made["vp9"], made["phone"], made["vfr"], made["h264"],
                      made["garbage"], made["m4a"], made["h264"], made["cut_mp4"]],
        "label": ["walk", "run", "walk", "run", "walk", "run", "walk", "run", "walk"],
        "start": [None, None, None, None, 0.5, None, None, 5.0, None],
        "end": [None, None, None, None, 1.5, None, None, 6.0, None],
        "note": [f"clip {i}" for i in range(9)]})
    found = {}
    for runner in (None, "DirectRunner"):
        out = str(tmp_path_factory.mktemp("video"))
        result = tfrecorder.convert(table, out, frame_rate=FPS, short_side=SHORT_SIDE,
                                    runner=runner, overwrite=True, progress=False,
                                    max_rejected=0.6)
        found[runner] = (out, result)
    return {"table": table, "runs": found}


def read_json(folder: str) -> dict:
    with open(os.path.join(folder, "dataset.json")) as file:
        return json.load(file)


def records(folder: str, split: str) -> list[bytes]:
    files = sorted(f for f in os.listdir(folder) if f.startswith(split + "-"))
    return [r.numpy() for r in tf.data.TFRecordDataset([os.path.join(folder, f)
                                                        for f in files])]


def parsed(record: bytes) -> tuple[dict, dict]:
    """A clip record as TensorFlow parses it, by MediaSequence's documented keys."""
    context, lists = tf.io.parse_single_sequence_example(record, context_features={
        "clip/data_path": tf.io.FixedLenFeature([], tf.string),
        "clip/start/timestamp": tf.io.FixedLenFeature([], tf.int64),
        "clip/end/timestamp": tf.io.FixedLenFeature([], tf.int64),
        "clip/label/index": tf.io.VarLenFeature(tf.int64),
        "clip/label/string": tf.io.VarLenFeature(tf.string),
        "image/format": tf.io.FixedLenFeature([], tf.string),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        "image/frame_rate": tf.io.FixedLenFeature([], tf.float32),
        "note": tf.io.FixedLenFeature([], tf.string, default_value=b"")},
        sequence_features={
        "image/encoded": tf.io.FixedLenSequenceFeature([], tf.string),
        "image/timestamp": tf.io.FixedLenSequenceFeature([], tf.int64)})
    return ({k: tf.sparse.to_dense(v).numpy() if isinstance(v, tf.SparseTensor) else v.numpy()
             for k, v in context.items()}, {k: v.numpy() for k, v in lists.items()})


def pyav_frames(path: str) -> list[tuple[int, np.ndarray]]:
    """Every frame of the video with its time (µs), upright, as PyAV decodes it."""
    with av.open(path) as container:
        stream = container.streams.video[0]
        found = []
        for frame in container.decode(stream):
            pixels = frame.to_ndarray(format="rgb24")
            turns = round(frame.rotation / 90) % 4
            found.append((round(frame.pts * frame.time_base * 1_000_000),
                          np.rot90(pixels, turns) if turns else pixels))
        return found


def test_both_engines_write_the_same_bytes_and_list_the_same_rejections(converted):
    (local, result), (beam, _) = converted["runs"][None], converted["runs"]["DirectRunner"]
    shards = sorted(f for f in os.listdir(local) if f.endswith(".tfrecord"))
    assert shards == sorted(f for f in os.listdir(beam) if f.endswith(".tfrecord"))
    for name in shards:
        with open(os.path.join(local, name), "rb") as a, open(os.path.join(beam, name),
                                                               "rb") as b:
            assert hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest()
    rejected = pd.read_csv(os.path.join(local, "rejected.csv"))
    assert rejected.equals(pd.read_csv(os.path.join(beam, "rejected.csv")))
    reasons = dict(zip(rejected["video_uri"].map(os.path.basename), rejected["reason"]))
    assert set(reasons) == {"garbage.mp4", "stereo.m4a", "h264.mp4", "cut.mp4"}
    assert "not a media file" in reasons["garbage.mp4"]
    assert "no video stream" in reasons["stereo.m4a"]
    assert "starts after the video's end" in reasons["h264.mp4"]
    assert "truncated" in reasons["cut.mp4"] or "corrupt" in reasons["cut.mp4"]
    # Every row ends in a record or in the list.
    assert result.num_records + len(rejected) == len(converted["table"])


def test_frames_are_the_decoders_own_at_their_times_upright_and_resized(converted, made):
    out, _ = converted["runs"][None]
    by_path = {}
    for record in records(out, "train"):
        context, lists = parsed(record)
        by_path.setdefault(context["clip/data_path"].decode(), []).append((context, lists))
    assert sorted(map(os.path.basename, by_path)) == ["h264.mp4", "phone.mp4", "vfr.mp4",
                                                      "vp9.webm"]
    spans = sorted((c["clip/start/timestamp"], c["clip/end/timestamp"])
                   for c, _ in by_path[made["h264"]])
    assert spans == [(0, 2_000_000), (500_000, 1_500_000)]  # the whole file; the row's span
    for path, clips in by_path.items():
        decoded = pyav_frames(path)
        for context, lists in clips:
            start, end = context["clip/start/timestamp"], context["clip/end/timestamp"]
            assert context["clip/label/string"].tolist() == [
                b"walk" if "h264" in path or "phone" in path else b"run"]
            assert context["image/frame_rate"] == FPS and context["image/format"] == b"JPEG"
            # FPS frames a second, each the one shown at start + k / FPS.
            wanted = [start + k * 1_000_000 // FPS for k in range((end - start) * FPS // 10**6)]
            shown = [max(((t, p) for t, p in decoded if t <= w), key=lambda f: f[0])
                     if decoded[0][0] <= w else decoded[0] for w in wanted]
            assert lists["image/timestamp"].tolist() == wanted
            for jpeg, (_, pixels) in zip(lists["image/encoded"], shown):
                frame = tf.io.decode_jpeg(jpeg).numpy()
                assert min(frame.shape[:2]) == SHORT_SIDE
                assert frame.shape[:2] == (context["image/height"], context["image/width"])
                reference = tf.image.resize(pixels, frame.shape[:2], antialias=True).numpy()
                assert np.abs(frame.astype(float) - reference).mean() < 6, path
    # The phone clip is stored upright: taller than wide, as its display matrix shows it.
    (context, _), = by_path[made["phone"]]
    assert context["image/height"] > context["image/width"]


def test_mediapipes_getters_read_the_records(converted, made):
    ms = media_sequence()
    out, _ = converted["runs"][None]
    for record in records(out, "train"):
        example = tf.train.SequenceExample.FromString(record)
        context, lists = parsed(record)
        assert ms.get_clip_data_path(example) == context["clip/data_path"]
        assert ms.get_clip_start_timestamp(example) == context["clip/start/timestamp"]
        assert list(ms.get_clip_label_string(example)) == context["clip/label/string"].tolist()
        steps = ms.get_image_timestamp_size(example)
        assert [ms.get_image_timestamp_at(k, example) for k in range(steps)] == \
            lists["image/timestamp"].tolist()
        assert [ms.get_image_encoded_at(k, example) for k in range(steps)] == \
            lists["image/encoded"].tolist()
        assert ms.get_image_height(example) == context["image/height"]


def test_the_manifest_counts_clips_frames_and_seconds_and_verify_decodes_them(converted):
    out, result = converted["runs"][None]
    manifest = read_json(out)
    media = manifest["media"]
    assert (media["kind"], media["stored"]) == ("video", "frames")
    train = media["counts"]["train"]
    assert train == {"clips": 5, "frames": sum(len(parsed(r)[1]["image/timestamp"])
                                               for r in records(out, "train")),
                     "seconds": pytest.approx(2 + 2 + 2 + 1.3 + 1, abs=0.2)}
    assert manifest["options"]["frame_rate"] == FPS
    assert manifest["options"]["short_side"] == SHORT_SIDE
    assert tfrecorder.verify(out).ok


def test_load_gives_clips_of_num_frames(converted):
    out, _ = converted["runs"][None]
    # The phone clip stands upright: frames of two shapes, resized to stack.
    ds = tfrecorder.load(out, "train", num_frames=4, batch_size=5, shuffle=False,
                         image_size=(24, 24))
    batch = next(iter(ds))
    assert batch["video"].shape == (5, 4, 24, 24, 3) and batch["video"].dtype == tf.uint8


def test_an_audio_folder_converts_to_waveforms_read_back_as_soundfile_reads_them(
        made, tmp_path):
    folder = tmp_path / "sounds"
    for label, kind in (("beep", "wav"), ("beep", "flac"), ("hum", "ogg")):
        (folder / label).mkdir(parents=True, exist_ok=True)
        os.link(made[kind], folder / label / f"a.{kind}")
    out = str(tmp_path / "out")
    result = tfrecorder.convert(str(folder), out, progress=False, unassigned_split=(1, 0, 0))
    assert result.num_records == 3
    elements = list(tfrecorder.load(out, "train", shuffle=False).as_numpy_iterator())
    for element in elements:
        path = element["data_path"].decode()
        samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
        assert element["sample_rate"] == rate
        np.testing.assert_allclose(element["audio"], samples, atol=1e-4 if "ogg" in path
                                   else 1e-6)
    assert tfrecorder.verify(out).ok


def test_long_videos_are_cut_into_clips_of_clip_seconds(made, tmp_path):
    table = pd.DataFrame({"video_uri": [made["h264"], made["phone"]], "label": ["a", "b"],
                          "split": "TRAIN"})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, clip_seconds=0.6, frame_rate=FPS, progress=False)
    spans = sorted((parsed(r)[0]["clip/data_path"].decode(), parsed(r)[0][
        "clip/start/timestamp"], len(parsed(r)[1]["image/timestamp"]))
        for r in records(out, "train"))
    assert spans == [(made["h264"], 0, 3), (made["h264"], 600_000, 3),
                     (made["h264"], 1_200_000, 3),
                     (made["phone"], 0, 3), (made["phone"], 600_000, 3),
                     (made["phone"], 1_200_000, 3)]
    cut = read_json(out)["media"]["cut"]
    assert cut["clips"] == 6 and cut["tails_dropped"] == 2


def test_keep_media_stores_the_files_bytes(made, tmp_path):
    table = pd.DataFrame({"video_uri": [made["vp9"]], "label": ["a"], "split": "TRAIN"})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, keep_media=True, progress=False)
    record, = records(out, "train")
    example = tf.train.SequenceExample.FromString(record)
    with open(made["vp9"], "rb") as file:
        assert media_sequence().get_clip_encoded_media_bytes(example) == file.read()
    with av.open(io.BytesIO(media_sequence().get_clip_encoded_media_bytes(example))) as c:
        assert c.streams.video[0].codec_context.name == "vp9"


def test_a_vertex_tracking_file_gives_each_sampled_frame_its_boxes(made, tmp_path):
    def box(name, seconds, track, x0, y0, x1, y1):
        return {"displayName": name, "timeOffset": f"{seconds}s", "instanceId": track,
                "xMin": x0, "yMin": y0, "xMax": x1, "yMax": y1}

    jsonl = tmp_path / "tracking.jsonl"
    jsonl.write_text(json.dumps({"videoGcsUri": made["h264"], "temporalBoundingBoxAnnotations": [
        box("car", 0.2, 1, 0.1, 0.2, 0.5, 0.6), box("car", 0.4, 1, 0.2, 0.2, 0.6, 0.6),
        box("bus", 0.4, 2, 0.0, 0.0, 0.3, 0.3)]}) + "\n")
    out = str(tmp_path / "out")
    tfrecorder.convert(str(jsonl), out, frame_rate=FPS, unassigned_split=(1, 0, 0),
                       progress=False)
    element, = tfrecorder.load(out, "train", num_frames=10, shuffle=False).as_numpy_iterator()
    assert element["timestamps"].tolist() == [k * 200_000 for k in range(10)]
    assert element["objects/is_annotated"].tolist() == [False, True, True] + [False] * 7
    # bus is class 0, car 1 (sorted); boxes [ymin, xmin, ymax, xmax]; -1 pads.
    np.testing.assert_allclose(element["objects/bbox"][1:3], [
        [[0.2, 0.1, 0.6, 0.5], [-1, -1, -1, -1]], [[0.2, 0.2, 0.6, 0.6], [0, 0, 0.3, 0.3]]])
    assert element["objects/label"][1:3].tolist() == [[1, -1], [1, 0]]
    assert element["objects/track"][1:3].tolist() == [[1, -1], [1, 2]]
    assert tfrecorder.verify(out).ok


def test_a_vertex_action_file_gives_each_clip_its_segments(made, tmp_path):
    jsonl = tmp_path / "actions.jsonl"
    jsonl.write_text(json.dumps({
        "videoGcsUri": made["vp9"], "timeSegments": [{"startTime": "0s", "endTime": "2s"}],
        "timeSegmentAnnotations": [
            {"displayName": "wave", "startTime": "0.5s", "endTime": "1.0s"},
            {"displayName": "jump", "startTime": "1.5s", "endTime": "1.5s"}]}) + "\n")
    out = str(tmp_path / "out")
    tfrecorder.convert(str(jsonl), out, frame_rate=FPS, unassigned_split=(1, 0, 0),
                       progress=False)
    element, = tfrecorder.load(out, "train", num_frames=10, shuffle=False).as_numpy_iterator()
    assert element["segments/start"].tolist() == [500_000, 1_500_000]
    assert element["segments/end"].tolist() == [1_000_000, 1_500_000]
    assert element["segments/label"].tolist() == [1, 0]  # jump, wave


KILLED_RUN = """
import sys, pandas as pd, tfrecorder
table = pd.read_csv(sys.argv[1])
tfrecorder.convert(table, sys.argv[2], num_shards=12, frame_rate=10, progress=False,
                   resume=True, num_workers=1)
"""


def test_a_killed_video_run_resumes_to_the_same_dataset(made, tmp_path):
    table = pd.DataFrame({"video_uri": [made["h264"], made["vp9"], made["phone"]] * 12,
                          "label": ["a", "b", "c"] * 12, "split": "TRAIN",
                          "start": [0.1 * i for i in range(36)]})
    table_csv = tmp_path / "table.csv"
    table.to_csv(table_csv, index=False)
    clean = tmp_path / "clean"
    tfrecorder.convert(table, str(clean), num_shards=12, frame_rate=10, progress=False)
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(table_csv), str(out)])
    deadline = time.monotonic() + 120
    while len(receipts(out)) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    kept = receipts(out)
    assert 2 <= len(kept) < 12 and not (out / "dataset.json").exists()
    tfrecorder.convert(table, str(out), num_shards=12, frame_rate=10, progress=False,
                       resume=True)
    assert read_manifest(str(out)) == read_manifest(str(clean))  # counts from the receipts too
    for name in os.listdir(clean):
        if name.endswith(".tfrecord"):
            assert (out / name).read_bytes() == (clean / name).read_bytes()


def receipts(out) -> list[str]:
    return sorted(n for n in os.listdir(out) if n.endswith(".receipt.json")) \
        if out.exists() else []


def test_a_missing_extra_is_refused_before_any_file_is_touched(made, tmp_path, monkeypatch):
    table = pd.DataFrame({"audio_uri": [made["wav"]], "label": ["a"]})
    out = tmp_path / "out"
    tfrecorder.convert(table, str(out), num_shards=1, progress=False)
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    monkeypatch.setitem(sys.modules, "soundfile", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'tfrecorder\[audio\]'"):
        tfrecorder.convert(table, str(out), num_shards=1, overwrite=True, progress=False)
    # The dataset there before is as it was: the run stopped before claiming the folder.
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before

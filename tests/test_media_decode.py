"""A video or audio row decoded into its clip's SequenceExample (`write/media.py`,
`write/clip_records.py`), read back by TensorFlow's parser under MediaSequence's keys and
compared with what the decoders themselves give: PyAV's frames at the same times,
soundfile's samples."""

from __future__ import annotations

import subprocess
import sys

import av
import media_data
import numpy as np
import pytest
import soundfile
import tensorflow as tf
from PIL import Image

from tfrecorder.errors import MissingExtraError
from tfrecorder.format import media_sequence as ms
from tfrecorder.options import MediaOptions, RecordOptions
from tfrecorder.write import media
from tfrecorder.write.records import encode_row
from tfrecorder.write.rows import Record, Rejection, Row

CLASSES = ("run", "jump", "car", "dog")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return media_data.files(str(tmp_path_factory.mktemp("media")))


def encoded(path: str, kind: str = "video", start_us=None, end_us=None, label=None,
            timed=None, task="classification", inputs=None, **media_options):
    row = Row(position=7, uri=path, image_uri=f"clips/{path.rsplit('/', 1)[-1]}",
              label=label, split="train", inputs=inputs or {}, clip_start_us=start_us,
              clip_end_us=end_us, timed=timed)
    options = RecordOptions(class_names=CLASSES, media=kind, task=task,
                            media_options=MediaOptions(**media_options))
    return encode_row(row, options)


CONTEXT = {ms.CLIP_DATA_PATH: tf.io.FixedLenFeature([], tf.string),
           ms.CLIP_START: tf.io.FixedLenFeature([], tf.int64),
           ms.CLIP_END: tf.io.FixedLenFeature([], tf.int64),
           ms.CLIP_LABEL_INDEX: tf.io.VarLenFeature(tf.int64),
           ms.CLIP_LABEL_STRING: tf.io.VarLenFeature(tf.string)}
FRAMES = {ms.IMAGE_HEIGHT: tf.io.FixedLenFeature([], tf.int64),
          ms.IMAGE_WIDTH: tf.io.FixedLenFeature([], tf.int64),
          ms.IMAGE_FRAME_RATE: tf.io.FixedLenFeature([], tf.float32),
          ms.IMAGE_FORMAT: tf.io.FixedLenFeature([], tf.string)}
FRAME_LISTS = {ms.IMAGE_ENCODED: tf.io.FixedLenSequenceFeature([], tf.string),
               ms.IMAGE_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64)}


def parsed(record: Record, context=None, lists=None) -> dict:
    assert isinstance(record, Record), record
    found_context, found_lists = tf.io.parse_single_sequence_example(
        record.example, context_features={**CONTEXT, **(context or {})},
        sequence_features=lists or {})
    return {k: tf.sparse.to_dense(v).numpy() if isinstance(v, tf.SparseTensor)
            else v if isinstance(v, tf.RaggedTensor) else v.numpy()
            for k, v in {**found_context, **found_lists}.items()}


def video_record(path: str, **kwargs):
    record = encoded(path, **kwargs)
    found = parsed(record, FRAMES, FRAME_LISTS)
    found["frames"] = [tf.io.decode_jpeg(j).numpy() for j in found[ms.IMAGE_ENCODED]]
    return record, found


def decoder_frames(path: str) -> dict[int, np.ndarray]:
    """PyAV's own frames of a video, RGB, by their time in microseconds."""
    with av.open(path) as container:
        return {round(f.pts * f.time_base * 1_000_000): f.to_ndarray(format="rgb24")
                for f in container.decode(video=0)}


def shown_at(frames: dict[int, np.ndarray], time_us: int) -> np.ndarray:
    """The frame a player shows at `time_us`: the last at or before it."""
    return frames[max(t for t in frames if t <= time_us)]


def mean_difference(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a.astype(int) - b.astype(int)).mean())


@pytest.mark.parametrize("name", ["h264", "vp9"])
def test_every_frame_is_the_decoders_own_at_its_own_time(files, name):
    record, found = video_record(files[name], label=1)
    truth = decoder_frames(files[name])
    assert list(found[ms.IMAGE_TIMESTAMP]) == sorted(truth) == [k * 100_000 for k in range(20)]
    for time_us, frame in zip(found[ms.IMAGE_TIMESTAMP], found["frames"], strict=True):
        assert mean_difference(frame, truth[time_us]) < 3
    assert (found[ms.IMAGE_HEIGHT], found[ms.IMAGE_WIDTH]) == (48, 64)
    assert found[ms.IMAGE_FRAME_RATE] == 10.0 and found[ms.IMAGE_FORMAT] == b"JPEG"
    assert found[ms.CLIP_DATA_PATH] == f"clips/{files[name].rsplit('/', 1)[-1]}".encode()
    assert (found[ms.CLIP_START], found[ms.CLIP_END]) == (0, 2_000_000)
    assert list(found[ms.CLIP_LABEL_INDEX]) == [1]
    assert list(found[ms.CLIP_LABEL_STRING]) == [b"jump"]
    assert record.image is None
    assert record.clip.frames == 20 and record.clip.duration_us == 2_000_000
    assert (record.clip.height, record.clip.width) == (48, 64)
    assert record.clip.num_bytes == sum(len(j) for j in found[ms.IMAGE_ENCODED])


def test_a_span_is_sampled_at_the_frame_rate_on_the_timeline(files):
    # 10 fps source, 4 fps asked, from 0.3 s: the frames shown at 0.3, 0.55, 0.8, 1.05 s.
    _, found = video_record(files["h264"], start_us=300_000, end_us=1_300_000,
                            frame_rate=4)
    assert list(found[ms.IMAGE_TIMESTAMP]) == [300_000, 550_000, 800_000, 1_050_000]
    truth = decoder_frames(files["h264"])
    for time_us, frame in zip(found[ms.IMAGE_TIMESTAMP], found["frames"], strict=True):
        assert mean_difference(frame, shown_at(truth, time_us)) < 3
    assert found[ms.IMAGE_FRAME_RATE] == 4.0
    assert (found[ms.CLIP_START], found[ms.CLIP_END]) == (300_000, 1_300_000)


def test_variable_frame_rates_keep_their_times_and_sample_by_time(files):
    _, every = video_record(files["vfr"])
    times = [0, 40, 80, 200, 220, 500, 520, 540, 900, 1000, 1300]
    assert list(every[ms.IMAGE_TIMESTAMP]) == [t * 1000 for t in times]
    # At 10 fps: the frames shown at 0, 0.1, ... 0.9 s, under those times; a frame held
    # 0.36 s is stored 3 times.
    record, found = video_record(files["vfr"], end_us=1_000_000, frame_rate=10)
    assert list(found[ms.IMAGE_TIMESTAMP]) == [k * 100_000 for k in range(10)]
    truth = decoder_frames(files["vfr"])
    shown = [0, 80, 200, 220, 220, 500, 540, 540, 540, 900]
    for time_ms, frame in zip(shown, found["frames"], strict=True):
        assert mean_difference(frame, truth[time_ms * 1000]) < 3
        others = [t for t in truth if t != time_ms * 1000]  # and it is told from them
        assert min(mean_difference(frame, truth[t]) for t in others) > 3
    assert record.clip.frames == 10 and record.clip.duration_us == 1_000_000


def test_frames_are_resized_to_the_short_side(files):
    _, found = video_record(files["h264"], short_side=24, end_us=500_000)
    assert (found[ms.IMAGE_HEIGHT], found[ms.IMAGE_WIDTH]) == (24, 32)
    truth = decoder_frames(files["h264"])
    for time_us, frame in zip(found[ms.IMAGE_TIMESTAMP], found["frames"], strict=True):
        expected = np.asarray(Image.fromarray(shown_at(truth, time_us)).resize((32, 24),
                                                                     Image.Resampling.BILINEAR))
        assert mean_difference(frame, expected) < 5


def red_corner(frame: np.ndarray) -> tuple[str, str]:
    """Where the red square is: ('top' | 'bottom', 'left' | 'right')."""
    red = (frame[..., 0] > 180) & (frame[..., 1] < 90)
    ys, xs = np.nonzero(red)
    height, width = red.shape
    return ("top" if ys.mean() < height / 2 else "bottom",
            "left" if xs.mean() < width / 2 else "right")


@pytest.mark.parametrize("name", ["phone", "tagged"])
def test_a_rotated_clip_is_stored_upright(files, name):
    # Both say: turn 90 degrees clockwise to show (a phone held upright); the top-left
    # corner as stored is the top-right one as shown.
    record, found = video_record(files[name], short_side=24, end_us=300_000)
    assert (found[ms.IMAGE_HEIGHT], found[ms.IMAGE_WIDTH]) == (32, 24)
    assert (record.clip.height, record.clip.width) == (32, 24)
    for frame in found["frames"]:
        assert frame.shape == (32, 24, 3)
        assert red_corner(frame) == ("top", "right")


def test_an_unrotated_clip_keeps_its_corner(files):
    _, found = video_record(files["h264"], end_us=200_000)
    assert red_corner(found["frames"][0]) == ("top", "left")


AUDIO_CONTEXT = {ms.AUDIO_SAMPLE_RATE: tf.io.FixedLenFeature([], tf.float32),
                 ms.AUDIO_NUM_CHANNELS: tf.io.FixedLenFeature([], tf.int64),
                 ms.AUDIO_NUM_SAMPLES: tf.io.FixedLenFeature([], tf.int64)}
AUDIO_LISTS = {ms.AUDIO_FLOATS: tf.io.VarLenFeature(tf.float32),
               ms.AUDIO_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64)}


def waveform(record: Record) -> tuple[np.ndarray, dict]:
    found = parsed(record, AUDIO_CONTEXT, AUDIO_LISTS)
    samples = found[ms.AUDIO_FLOATS].reshape(-1, found[ms.AUDIO_NUM_CHANNELS])
    return samples, found


@pytest.mark.parametrize("name", ["wav", "flac", "ogg", "mp3"])
def test_audio_samples_are_soundfiles_own(files, name):
    record = encoded(files[name], "audio", start_us=250_000, end_us=750_000, label=3)
    samples, found = waveform(record)
    truth, rate = soundfile.read(files[name], dtype="float32", always_2d=True)
    # MP3's decoder rounds the last bit differently by the size of a read.
    np.testing.assert_allclose(samples, truth[4000:12000], rtol=0,
                               atol=2e-7 if name == "mp3" else 0)
    assert found[ms.AUDIO_SAMPLE_RATE] == rate == 16000
    assert found[ms.AUDIO_NUM_SAMPLES] == 8000 and found[ms.AUDIO_NUM_CHANNELS] == 2
    assert list(found[ms.AUDIO_TIMESTAMP]) == [250_000]
    assert (found[ms.CLIP_START], found[ms.CLIP_END]) == (250_000, 750_000)
    assert list(found[ms.CLIP_LABEL_STRING]) == [b"dog"]
    assert record.clip.frames == 0 and record.clip.duration_us == 500_000
    assert record.clip.num_bytes == 8000 * 2 * 4


def pyav_samples(path: str) -> tuple[np.ndarray, int, int]:
    """PyAV's own decode of a file's first audio stream: (samples, rate, first time)."""
    with av.open(path) as container:
        frames = list(container.decode(audio=0))
    pieces = [f.to_ndarray().T if f.format.is_planar else
              f.to_ndarray().reshape(-1, f.layout.nb_channels) for f in frames]
    first = frames[0]
    return (np.concatenate(pieces).astype(np.float32), first.sample_rate,
            round(first.pts * first.time_base * 1_000_000))


@pytest.mark.parametrize("name", ["m4a", "with_sound"])
def test_what_soundfile_cannot_read_is_pyavs_own_decode(files, name):
    record = encoded(files[name], "audio", start_us=500_000, end_us=800_000)
    samples, found = waveform(record)
    truth, rate, first_us = pyav_samples(files[name])
    start = round((500_000 - first_us) * rate / 1e6)
    np.testing.assert_array_equal(samples, truth[start:start + round(0.3 * rate)])
    assert found[ms.AUDIO_SAMPLE_RATE] == rate == 16000


def test_audio_is_resampled_and_mixed_down(files):
    record = encoded(files["wav44k"], "audio", start_us=100_000, end_us=900_000,
                     sample_rate=16000, audio_channels=1)
    samples, found = waveform(record)
    assert samples.shape == (12800, 1) and found[ms.AUDIO_SAMPLE_RATE] == 16000
    # The channels are the same sine at 0.8 and 0.5: mono is their mean, 0.65.
    t = 0.1 + np.arange(12800) / 16000
    expected = 0.65 * np.sin(2 * np.pi * 440 * t)
    # 16-bit WAV, then swresample: well within a thousandth.
    assert np.abs(samples[100:-100, 0] - expected[100:-100]).max() < 1e-3


def test_keep_media_stores_the_file_and_no_frames(files):
    record = encoded(files["h264"], start_us=500_000, end_us=9_000_000, keep_media=True)
    found = parsed(record, {ms.CLIP_ENCODED_MEDIA: tf.io.FixedLenFeature([], tf.string)},
                   {ms.IMAGE_ENCODED: tf.io.VarLenFeature(tf.string)})
    with open(files["h264"], "rb") as f:
        data = f.read()
    assert found[ms.CLIP_ENCODED_MEDIA] == data
    assert found[ms.IMAGE_ENCODED].size == 0
    assert (found[ms.CLIP_START], found[ms.CLIP_END]) == (500_000, 2_000_000)
    assert record.clip.frames == 0 and record.clip.num_bytes == len(data)


def test_segments_regions_and_inputs_are_in_the_record(files):
    segments = ((200_000, 600_000), (900_000, 900_000))
    record = encoded(files["h264"], end_us=1_000_000, label=[0, 1], timed=segments,
                     task="action_recognition", inputs={"caption": "a run", "take": 3})
    found = parsed(record, {ms.SEGMENT_START: tf.io.VarLenFeature(tf.int64),
                            ms.SEGMENT_END: tf.io.VarLenFeature(tf.int64),
                            ms.SEGMENT_LABEL_STRING: tf.io.VarLenFeature(tf.string),
                            "caption": tf.io.FixedLenFeature([], tf.string),
                            "take": tf.io.FixedLenFeature([], tf.int64)})
    assert list(found[ms.SEGMENT_START]) == [200_000, 900_000]
    assert list(found[ms.SEGMENT_END]) == [600_000, 900_000]
    assert list(found[ms.SEGMENT_LABEL_STRING]) == [b"run", b"jump"]
    assert list(found[ms.CLIP_LABEL_INDEX]) == []  # the segments are labelled, not the clip
    assert found["caption"] == b"a run" and found["take"] == 3

    regions = ((400_000, .5, .5, .9, .9, 2), (0, .1, .2, .3, .4, 1),
               (400_000, .0, .1, .2, .3, 1))
    record = encoded(files["h264"], end_us=1_000_000, label=[2, 3, 2], timed=regions,
                     task="object_tracking")
    found = parsed(record, lists={
        ms.REGION_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64),
        ms.REGION_BOX[0]: tf.io.RaggedFeature(tf.float32),
        ms.REGION_BOX[3]: tf.io.RaggedFeature(tf.float32),
        ms.REGION_LABEL_STRING: tf.io.RaggedFeature(tf.string),
        ms.REGION_TRACK_INDEX: tf.io.RaggedFeature(tf.int64)})
    assert list(found[ms.REGION_TIMESTAMP]) == [0, 400_000]
    assert found[ms.REGION_BOX[0]].to_list() == [[np.float32(.1)], [np.float32(.5), 0.0]]
    assert found[ms.REGION_BOX[3]].to_list() == [[np.float32(.4)],
                                                 [np.float32(.9), np.float32(.3)]]
    assert found[ms.REGION_LABEL_STRING].to_list() == [[b"dog"], [b"car", b"car"]]
    assert found[ms.REGION_TRACK_INDEX].to_list() == [[1], [2, 1]]


@pytest.mark.parametrize(("name", "kind", "span", "reason"), [
    ("garbage", "video", (None, None), "not a media file FFmpeg reads, or corrupt"),
    ("cut_mp4", "video", (None, None), "corrupt or truncated"),
    ("cut_webm", "video", (None, None), "corrupt or truncated video: its frames stop at "
                                        "'0.5 s', but its header says it lasts '2.0 s'"),
    ("m4a", "video", (None, None), "no video stream: the file holds audio (aac)"),
    ("h264", "audio", (None, None), "no audio stream: the file holds video (h264)"),
    ("h264", "video", (12_000_000, 15_000_000),
     "clip '12.0-15.0 s' starts after the video's end at '2.0 s'"),
    ("wav", "audio", (3_000_000, None), "clip '3.0-end s' starts after the audio's end at "
                                        "'1.0 s'"),
    ("m4a", "audio", (3_000_000, None), "starts after the audio's end"),
    ("h264", "video", (1_000_000, 1_000_000), "no frame in the clip's span '1.0-1.0 s'"),
    ("unknown_codec", "video", (None, None),
     "unsupported codec: FFmpeg has no decoder for the video stream's codec"),
])
def test_hostile_files_are_rejected_with_their_reason(files, name, kind, span, reason):
    found = encoded(files[name], kind, *span)
    assert isinstance(found, Rejection) and found.position == 7
    assert reason in found.reason


def test_a_span_between_frames_of_a_variable_rate_has_no_frame(files):
    found = encoded(files["vfr"], start_us=600_000, end_us=850_000)
    assert found == Rejection(7, "no frame in the clip's span '0.6-0.8 s'")


def test_an_empty_file_is_rejected_before_decoding(tmp_path):
    (tmp_path / "empty.mp4").write_bytes(b"")
    assert encoded(str(tmp_path / "empty.mp4")) == Rejection(7, "empty file (0 bytes)")


def test_duration_is_read_from_headers(files):
    for name, expected in (("h264", 2_000_000), ("vp9", 2_000_000), ("wav", 1_000_000),
                           ("mp3", 1_000_000)):
        with open(files[name], "rb") as f:
            assert media.media_duration_us(f.read()) == expected
        with open(files[name], "rb") as f:  # a file open for reading
            assert media.media_duration_us(f) == expected


def test_a_missing_extra_says_what_to_install(files, monkeypatch):
    monkeypatch.setitem(sys.modules, "av", None)
    with open(files["h264"], "rb") as f, pytest.raises(ImportError,
                                                       match=r'tfrecorder\[video\]'):
        media.video_frames(f.read(), None, None, MediaOptions(), 90)


def test_image_users_never_import_the_decoders():
    code = ("import sys, tfrecorder\nfrom tfrecorder.write import records\n"
            "print(sorted({'av', 'soundfile'} & set(sys.modules)))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True)
    assert found.stdout.strip() == "[]"


def test_records_decode_with_mediapipes_getters(files):
    from mediapipe_sequence import media_sequence

    mediapipe = media_sequence()
    record = encoded(files["h264"], end_us=500_000, label=2)
    example = tf.train.SequenceExample.FromString(record.example)
    assert [mediapipe.get_image_timestamp_at(i, example) for i in range(
        mediapipe.get_image_timestamp_size(example))] == [0, 100_000, 200_000, 300_000,
                                                          400_000]
    assert list(mediapipe.get_clip_label_index(example)) == [2]
    assert mediapipe.get_clip_data_path(example) == b"clips/h264.mp4"
    assert (mediapipe.get_image_height(example), mediapipe.get_image_width(example)) == (
        48, 64)
    frame = tf.io.decode_jpeg(mediapipe.get_image_encoded_at(1, example)).numpy()
    assert mean_difference(frame, decoder_frames(files["h264"])[100_000]) < 3


def test_an_error_no_decoder_check_foresaw_is_the_rows_rejection(files, monkeypatch):
    def fails(*args, **kwargs):
        raise RuntimeError("swscale refused the size")

    monkeypatch.setattr(media, "video_clip", fails)
    assert encoded(files["h264"]) == Rejection(
        7, "corrupt or truncated video: RuntimeError: swscale refused the size")


@pytest.mark.parametrize("kind,missing", [("video", "av"), ("audio", "soundfile")])
def test_a_missing_decoder_is_an_import_error_naming_its_extra(monkeypatch, kind, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed
    with pytest.raises(MissingExtraError) as caught:
        media.check_installed(kind)
    assert isinstance(caught.value, ImportError)
    assert (caught.value.extra, caught.value.name) == (kind, missing)
    assert str(caught.value) == (f"{kind} files are decoded with {missing}, which is not "
                                 f"installed: pip install 'tfrecorder[{kind}]'.")

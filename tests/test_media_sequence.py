"""SequenceExample records under MediaPipe's MediaSequence keys (issue 49, the record
layout): written without TensorFlow, read back by TensorFlow's own parser and protobuf
classes, key by key."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfrecorder.format import media_sequence as ms
from tfrecorder.format.example import EmptyListError, encode_sequence_example


def tf_feature(value) -> tf.train.Feature:
    values = value if isinstance(value, list) else [value]
    if values and isinstance(values[0], (bytes, str)):
        return tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[v.encode() if isinstance(v, str) else v for v in values]))
    if values and isinstance(values[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


@pytest.mark.parametrize(("context", "lists"), [
    ({"clip/data_path": "a.mp4", "clip/start/timestamp": 0, "image/frame_rate": 2.5,
      "clip/label/string": ["run", "jump"]},
     {"image/encoded": [b"\xff\xd8one", b"\xff\xd8two"], "image/timestamp": [0, 400000],
      "region/bbox/ymin": [[0.1, 0.2], [0.5]]}),
    ({"clip/data_path": "only context"}, {}),
    ({}, {"image/timestamp": [1, 2, 3]}),
])
def test_sequence_examples_parse_as_tensorflow_builds_them(context, lists):
    ours = encode_sequence_example(context, lists)
    expected = tf.train.SequenceExample()
    for name, value in context.items():
        expected.context.feature[name].CopyFrom(tf_feature(value))
    for name, steps in lists.items():
        for step in steps:
            expected.feature_lists.feature_list[name].feature.add().CopyFrom(tf_feature(step))
    assert tf.train.SequenceExample.FromString(ours) == expected
    assert ours == encode_sequence_example(dict(reversed(context.items())), lists)


def test_an_empty_step_is_written_with_its_dtype_or_refused():
    found = tf.train.SequenceExample.FromString(encode_sequence_example(
        {}, {"region/label/string": [[b"car"], []]}, {"region/label/string": "string"}))
    steps = found.feature_lists.feature_list["region/label/string"].feature
    assert steps[1].WhichOneof("kind") == "bytes_list" and not steps[1].bytes_list.value
    with pytest.raises(EmptyListError, match="region/label/string"):
        encode_sequence_example({}, {"region/label/string": [[]]})


def jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def test_a_clip_reads_back_by_the_documented_keys():
    rng = np.random.default_rng(0)
    frames = [np.full((24, 32, 3), 40 * k, np.uint8) for k in range(3)]
    times = [1_000_000, 1_500_000, 2_000_000]  # on the source's timeline
    waveform = rng.uniform(-1, 1, (1600, 2)).astype(np.float32)
    record = ms.sequence_record(
        ms.Clip("videos/a.mp4", 1_000_000, 2_500_000, (3,), ("run",), example_id="a-0"),
        ms.Frames([jpeg(f) for f in frames], times, 24, 32, frame_rate=2.0),
        ms.Audio(waveform, 16_000, start_us=1_000_000, packet=800),
        ms.Segments([1_200_000, 2_000_000], [1_400_000, 2_000_000], [3, 5], ["run", "kick"]),
        ms.Regions([1_000_000, 2_000_000], [[[0.1, 0.2, 0.5, 0.6]], np.zeros((0, 4))],
                   [[3], []], [["run"], []], [[7], []]))
    context_spec = {
        ms.CLIP_DATA_PATH: tf.io.FixedLenFeature([], tf.string),
        ms.CLIP_START: tf.io.FixedLenFeature([], tf.int64),
        ms.CLIP_END: tf.io.FixedLenFeature([], tf.int64),
        ms.CLIP_LABEL_INDEX: tf.io.VarLenFeature(tf.int64),
        ms.CLIP_LABEL_STRING: tf.io.VarLenFeature(tf.string),
        ms.EXAMPLE_ID: tf.io.FixedLenFeature([], tf.string),
        ms.IMAGE_FORMAT: tf.io.FixedLenFeature([], tf.string),
        ms.IMAGE_HEIGHT: tf.io.FixedLenFeature([], tf.int64),
        ms.IMAGE_WIDTH: tf.io.FixedLenFeature([], tf.int64),
        ms.IMAGE_FRAME_RATE: tf.io.FixedLenFeature([], tf.float32),
        ms.AUDIO_SAMPLE_RATE: tf.io.FixedLenFeature([], tf.float32),
        ms.AUDIO_NUM_CHANNELS: tf.io.FixedLenFeature([], tf.int64),
        ms.AUDIO_NUM_SAMPLES: tf.io.FixedLenFeature([], tf.int64),
        ms.SEGMENT_START: tf.io.VarLenFeature(tf.int64),
        ms.SEGMENT_END: tf.io.VarLenFeature(tf.int64),
        ms.SEGMENT_LABEL_STRING: tf.io.VarLenFeature(tf.string),
    }
    sequence_spec = {
        ms.IMAGE_ENCODED: tf.io.FixedLenSequenceFeature([], tf.string),
        ms.IMAGE_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64),
        ms.AUDIO_FLOATS: tf.io.FixedLenSequenceFeature([1600], tf.float32),
        ms.AUDIO_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64),
        ms.REGION_TIMESTAMP: tf.io.FixedLenSequenceFeature([], tf.int64),
        ms.REGION_NUM_REGIONS: tf.io.FixedLenSequenceFeature([], tf.int64),
        **{key: tf.io.VarLenFeature(tf.float32) for key in ms.REGION_BOX},
        ms.REGION_TRACK_INDEX: tf.io.VarLenFeature(tf.int64),
    }
    context, steps = tf.io.parse_single_sequence_example(record, context_spec, sequence_spec)
    assert context[ms.CLIP_DATA_PATH] == b"videos/a.mp4"
    assert (int(context[ms.CLIP_START]), int(context[ms.CLIP_END])) == (1_000_000, 2_500_000)
    assert tf.sparse.to_dense(context[ms.CLIP_LABEL_INDEX]).numpy().tolist() == [3]
    assert tf.sparse.to_dense(context[ms.CLIP_LABEL_STRING]).numpy().tolist() == [b"run"]
    assert (int(context[ms.IMAGE_HEIGHT]), int(context[ms.IMAGE_WIDTH])) == (24, 32)
    assert float(context[ms.IMAGE_FRAME_RATE]) == 2.0 and context[ms.IMAGE_FORMAT] == b"JPEG"
    assert steps[ms.IMAGE_TIMESTAMP].numpy().tolist() == times
    for encoded, pixels in zip(steps[ms.IMAGE_ENCODED].numpy(), frames):
        decoded = tf.io.decode_jpeg(encoded).numpy().astype(int)
        assert np.abs(decoded - pixels).max() <= 2  # JPEG's error on flat frames
    audio = steps[ms.AUDIO_FLOATS].numpy().reshape(-1, 800, 2).reshape(-1, 2)
    assert np.array_equal(audio, waveform)  # float32, exactly
    assert float(context[ms.AUDIO_SAMPLE_RATE]) == 16_000
    assert (int(context[ms.AUDIO_NUM_CHANNELS]), int(context[ms.AUDIO_NUM_SAMPLES])) == (2, 800)
    assert steps[ms.AUDIO_TIMESTAMP].numpy().tolist() == [1_000_000, 1_050_000]
    assert tf.sparse.to_dense(context[ms.SEGMENT_END]).numpy().tolist() == [1_400_000,
                                                                           2_000_000]
    assert steps[ms.REGION_NUM_REGIONS].numpy().tolist() == [1, 0]
    boxes = [tf.sparse.to_dense(steps[key]).numpy() for key in ms.REGION_BOX]
    assert np.allclose(np.stack(boxes, -1)[0, 0], [0.1, 0.2, 0.5, 0.6])
    assert tf.sparse.to_dense(steps[ms.REGION_TRACK_INDEX]).numpy()[0].tolist() == [7]


def test_the_original_media_can_be_kept_instead_of_frames():
    record = ms.sequence_record(ms.Clip("a.mp4", 0, 10_000_000), encoded_media=b"\x00mp4")
    found = tf.train.SequenceExample.FromString(record).context.feature
    assert found[ms.CLIP_ENCODED_MEDIA].bytes_list.value == [b"\x00mp4"]
    assert found[ms.CLIP_ENCODED_MEDIA_START].int64_list.value == [0]


def test_mediapipe_builds_the_same_record_and_reads_ours():
    """MediaPipe's own setters, given the same clip, build the record we write (every
    key with its type), and its getters read ours back."""
    from mediapipe_sequence import media_sequence

    mp = media_sequence()
    frames = [jpeg(np.full((8, 10, 3), 60 * k, np.uint8)) for k in range(2)]
    waveform = np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2)
    ours = ms.sequence_record(
        ms.Clip("a.mp4", 0, 1_000_000, (2,), ("wave",)),
        ms.Frames(frames, [0, 500_000], 8, 10, frame_rate=2.0),
        ms.Audio(waveform, 8000.0, packet=3),
        ms.Segments([100_000], [300_000], [2], ["wave"]),
        ms.Regions([0], [[[0.1, 0.2, 0.3, 0.4]]], [[2]], [["wave"]], [[5]]))
    theirs = tf.train.SequenceExample()
    mp.set_clip_data_path(b"a.mp4", theirs)
    mp.set_clip_start_timestamp(0, theirs)
    mp.set_clip_end_timestamp(1_000_000, theirs)
    mp.set_clip_label_index((2,), theirs)
    mp.set_clip_label_string((b"wave",), theirs)
    mp.set_image_format(b"JPEG", theirs)
    mp.set_image_height(8, theirs)
    mp.set_image_width(10, theirs)
    mp.set_image_channels(3, theirs)
    mp.set_image_frame_rate(2.0, theirs)
    for frame, timestamp in zip(frames, [0, 500_000]):
        mp.add_image_encoded(frame, theirs)
        mp.add_image_timestamp(timestamp, theirs)
    mp.set_feature_sample_rate(8000.0, theirs, prefix="WAVEFORM")
    mp.set_feature_num_channels(2, theirs, prefix="WAVEFORM")
    mp.set_feature_num_samples(3, theirs, prefix="WAVEFORM")
    for start in (0, 3):
        mp.add_feature_floats(waveform[start:start + 3].reshape(-1), theirs, prefix="WAVEFORM")
        mp.add_feature_timestamp(start * 1_000_000 // 8000, theirs, prefix="WAVEFORM")
    mp.set_segment_start_timestamp((100_000,), theirs)
    mp.set_segment_end_timestamp((300_000,), theirs)
    mp.set_segment_label_index((2,), theirs)
    mp.set_segment_label_string((b"wave",), theirs)
    mp.add_bbox(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32), theirs)
    mp.add_bbox_timestamp(0, theirs)
    mp.add_bbox_num_regions(1, theirs)
    mp.add_bbox_is_annotated(1, theirs)
    mp.add_bbox_label_index((2,), theirs)
    mp.add_bbox_label_string((b"wave",), theirs)
    mp.add_bbox_track_index((5,), theirs)
    found = tf.train.SequenceExample.FromString(ours)
    assert found == theirs
    assert mp.get_clip_data_path(found) == b"a.mp4"
    assert mp.get_image_encoded_at(1, found) == frames[1]
    assert np.allclose(mp.get_bbox_at(0, found), [[0.1, 0.2, 0.3, 0.4]])
    assert np.array_equal(np.asarray(mp.get_feature_floats_at(1, found, prefix="WAVEFORM")),
                          waveform[3:].reshape(-1))


def test_records_decode_without_tensorflow_as_tensorflow_reads_them():
    """`decode_sequence_example` (for readers that must not import TensorFlow) gives
    every context value and every step's values as protobuf reads them."""
    from tfrecorder.format.example_decoding import decode_sequence_example

    record = ms.sequence_record(
        ms.Clip("a.mp4", 0, 1_000_000, (2,), ("wave",)),
        ms.Frames([jpeg(np.zeros((4, 6, 3), np.uint8))] * 2, [0, 500_000], 4, 6, 2.0),
        ms.Audio(np.linspace(-1, 1, 8, dtype=np.float32), 8000.0, packet=4),
        ms.Regions([0, 1], [[[0.1, 0.2, 0.3, 0.4]], np.zeros((0, 4))], [[2], []],
                   [["wave"], []], [[5], []]))
    context, lists = decode_sequence_example(record)
    parsed = tf.train.SequenceExample.FromString(record)

    def values(feature):
        kind = feature.WhichOneof("kind")
        return list(getattr(feature, kind).value) if kind else []

    assert context == {k: values(f) for k, f in parsed.context.feature.items()}
    assert lists == {k: [values(f) for f in fl.feature]
                     for k, fl in parsed.feature_lists.feature_list.items()}
    assert lists[ms.REGION_LABEL_STRING] == [[b"wave"], []]
    with pytest.raises(ValueError, match="not a serialized tf.train.SequenceExample"):
        decode_sequence_example(record[:-3])

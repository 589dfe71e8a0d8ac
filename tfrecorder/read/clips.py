"""Video and audio clips on the read side: which frames (or samples) of a clip a model
gets, and their decoding, with TensorFlow for `load()` and with NumPy for `open_split()`.

A clip's record is a SequenceExample under MediaSequence's keys (`format/media_sequence`):
one JPEG a frame, or a waveform in packets. Reading one takes what DeepMind's DMVR takes
(`processors.sample_sequence`):

- a window of `num_frames` frames, `frame_stride` apart: at a random offset for the train
  split (uniform in [0, max(n - (num_frames - 1) * stride, 1)), seeded per record from
  `load`'s seed, new every epoch), and the centre one otherwise (offset
  max(0, (n - num_frames * stride) // 2), as DMVR's eval does);
- a clip shorter than the window loops: frame indices are taken modulo the clip's length,
  as DMVR's `sample_or_pad_sequence_indices(repeat_sequence=True)` tiles the sequence, so
  every sampled frame is a real one (a still-image pad would teach a model that motion
  stops); `timestamps` say which frames came, and repeat where the clip looped;
- only the sampled frames are decoded (`tf.io.decode_jpeg`, the accurate IDCT that
  simplejpeg's defaults equal, so both readers give the same pixels);
- audio: `num_samples` samples at a random offset for train, the centre otherwise;
  a shorter clip is padded with zeros at its end (silence, as DMVR's crop-or-pad pads).

One home for both readers so that a sampling rule is stated once: the window's
arithmetic is `window_offset` / `window_indices` (NumPy) and their TensorFlow twins here.

What an element holds (`load()` and `open_split()` alike):

- video: `video` uint8 [T, H, W, 3]; `timestamps` int64 [T] (microseconds on the
  source's timeline); `label` (int64, -1 for a clip without one; a multi-label dataset's
  [n] ids, or with `multi_hot` a float32 [num_classes] vector); `data_path` (bytes);
- object tracking adds, for each sampled frame, the boxes annotated at its time (within
  half a frame's interval): `objects/bbox` float32 [T, B, 4] (ymin, xmin, ymax, xmax
  relative), `objects/label` and `objects/track` int64 [T, B], padded with -1 to the
  clip's most boxes on one frame (or to `max_boxes`, cut there), `objects/num` int64 [T]
  real boxes a frame, `objects/is_annotated` bool [T] (a frame no one annotated is not
  a frame without objects). Dense, not ragged: Keras and most tracking losses take
  padded boxes, and a batch pads to its largest frame (`padded_batch`);
- action recognition adds the clip's segments: `segments/start`, `segments/end` int64
  [S] (microseconds, on the timeline `timestamps` use) and `segments/label` int64 [S];
- audio: `audio` float32 [N, C], channels kept as stored (never mixed down: take
  `audio[:, 0]` or the mean over the last axis for mono), `sample_rate` float32,
  `label`, `data_path`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tfrecorder._tensorflow import tensorflow
from tfrecorder.errors import OptionError
from tfrecorder.format import media_sequence as ms
from tfrecorder.format.layouts import BBOX, OBJECT_LABEL
from tfrecorder.format.manifest import LABEL, Manifest

VIDEO, AUDIO = "video", "audio"
TIMESTAMPS = "timestamps"
SAMPLE_RATE = "sample_rate"
DATA_PATH = "data_path"
TRACK = "objects/track"
NUM_OBJECTS = "objects/num"
IS_ANNOTATED = "objects/is_annotated"
SEGMENT_START, SEGMENT_END, SEGMENT_LABEL = "segments/start", "segments/end", "segments/label"
TRACKING, ACTIONS = "object_tracking", "action_recognition"
# What padding fills: -1 for boxes, classes, tracks and segments (as `load` pads a
# detection record's objects), 0 (False) for counts and flags.
PADDED_WITH_MINUS_ONE = (BBOX, OBJECT_LABEL, TRACK, SEGMENT_START, SEGMENT_END,
                         SEGMENT_LABEL, LABEL)
_FAR = 1 << 62  # a region time no frame is near


@dataclass(frozen=True)
class ClipOptions:
    """How `load` and `open_split` read a clip: `num_frames` (None: every frame) at
    `frame_stride`, frames resized to `image_size`, `num_samples` of audio (None: the
    whole clip), tracking boxes padded to `max_boxes`, multi-label ids as multi-hot."""

    num_frames: int | None = None
    frame_stride: int = 1
    num_samples: int | None = None
    image_size: tuple[int, int] | None = None
    max_boxes: int | None = None
    num_classes: int | None = None  # multi_hot: the vector's length


def kind_of(manifest: Manifest) -> str:
    """"video" or "audio"; refuses a dataset that keeps its files' bytes instead."""
    media = manifest.media
    if media.stored == "encoded_media":
        raise OptionError(
            "this dataset stores each clip's original file bytes (written with "
            "keep_media=True), not decoded frames or samples, so load() and open_split() "
            "have nothing to sample. Write it again without keep_media to train from it.",
            option="keep_media")
    return AUDIO if media.stored == "waveform" else VIDEO


# --- the window: which steps a clip gives ----------------------------------------------------

def window_offset(length: int, steps: int, stride: int, random: bool,
                  rng: np.random.Generator | None = None) -> int:
    """The first step of the window (DMVR's offsets; see the module doc)."""
    if random:
        return int(rng.integers(0, max(length - (steps - 1) * stride, 1)))
    return max(0, (length - steps * stride) // 2)


def window_indices(length: int, steps: int, stride: int, offset: int) -> np.ndarray:
    """The window's steps, looping over a clip shorter than it."""
    return (offset + np.arange(steps) * stride) % max(length, 1)


def _tf_window(length, steps: int, stride: int, seed):
    """`window_indices` at `window_offset`'s offset, in TensorFlow: random from `seed`
    (int64 [2], stateless), or the centre for seed=None."""
    tf = tensorflow()

    length = tf.cast(length, tf.int32)
    if seed is None:
        offset = tf.maximum(0, (length - steps * stride) // 2)
    else:
        offset = tf.random.stateless_uniform(
            [], seed, minval=0, maxval=tf.maximum(length - (steps - 1) * stride, 1),
            dtype=tf.int32)
    return tf.math.floormod(offset + tf.range(steps) * stride, tf.maximum(length, 1))


def _tf_crop_offset(length, size: int, seed):
    tf = tensorflow()

    room = tf.maximum(tf.cast(length, tf.int32) - size, 0)
    if seed is None:
        return room // 2
    return tf.random.stateless_uniform([], seed, minval=0, maxval=room + 1, dtype=tf.int32)


# --- TensorFlow: load() ------------------------------------------------------------------

def _specs(manifest: Manifest) -> tuple[dict, dict]:
    """The context and sequence specs of what an element is made of."""
    tf = tensorflow()

    context = {ms.CLIP_DATA_PATH: tf.io.FixedLenFeature([], tf.string, default_value=""),
               ms.CLIP_LABEL_INDEX: tf.io.RaggedFeature(tf.int64)}
    context.update({name: f.parse_spec(name) for name, f in manifest.features.items()
                    if f.role == "input"})
    sequence = {}
    if kind_of(manifest) == AUDIO:
        context[ms.AUDIO_SAMPLE_RATE] = tf.io.FixedLenFeature([], tf.float32, 0.0)
        context[ms.AUDIO_NUM_CHANNELS] = tf.io.FixedLenFeature([], tf.int64, 1)
        sequence[ms.AUDIO_FLOATS] = tf.io.RaggedFeature(tf.float32)
        return context, sequence
    steps = tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True)
    sequence[ms.IMAGE_ENCODED] = tf.io.FixedLenSequenceFeature([], tf.string,
                                                               allow_missing=True)
    sequence[ms.IMAGE_TIMESTAMP] = steps
    if manifest.task == TRACKING:
        context[ms.IMAGE_FRAME_RATE] = tf.io.FixedLenFeature([], tf.float32, 0.0)
        sequence[ms.REGION_TIMESTAMP] = steps
        for key in (*ms.REGION_BOX, ms.REGION_LABEL_INDEX, ms.REGION_TRACK_INDEX):
            sequence[key] = tf.io.RaggedFeature(
                tf.int64 if key in (ms.REGION_LABEL_INDEX, ms.REGION_TRACK_INDEX)
                else tf.float32)
    if manifest.task == ACTIONS:
        for key in (ms.SEGMENT_START, ms.SEGMENT_END, ms.SEGMENT_LABEL_INDEX):
            context[key] = tf.io.RaggedFeature(tf.int64)
    return context, sequence


def clip_decoder(manifest: Manifest, options: ClipOptions, random: bool) -> Callable:
    """A function (serialized record[, seed]) -> the element's dict, for `load`'s
    parallel map: `seed` (int64 [2]) is given for a random window, and left out for the
    centre one."""
    tf = tensorflow()

    context_spec, sequence_spec = _specs(manifest)
    kind = kind_of(manifest)
    multi_label = bool(manifest.labels and manifest.labels.multi_label)
    inputs = [name for name, f in manifest.features.items() if f.role == "input"]

    def element(serialized, seed=None):
        context, steps = tf.io.parse_single_sequence_example(
            serialized, context_spec, sequence_spec)
        found = {DATA_PATH: context[ms.CLIP_DATA_PATH],
                 LABEL: _tf_label(context[ms.CLIP_LABEL_INDEX], multi_label, options)}
        for name in inputs:
            value = context[name]
            found[name] = value.to_tensor() if isinstance(value, tf.RaggedTensor) else value
        if kind == AUDIO:
            found.update(_tf_audio(context, steps, options, seed))
        else:
            found.update(_tf_frames(context, steps, manifest.task, options, seed))
        return found

    if random:
        return element
    return lambda serialized: element(serialized)


def _tf_label(ids, multi_label: bool, options: ClipOptions):
    tf = tensorflow()

    if not multi_label:
        return tf.cond(tf.size(ids) > 0, lambda: ids[0], lambda: tf.constant(-1, tf.int64))
    if options.num_classes is None:
        return ids
    return tf.ensure_shape(tf.math.bincount(
        ids, minlength=options.num_classes, maxlength=options.num_classes,
        binary_output=True, dtype=tf.float32), [options.num_classes])


def _tf_frames(context, steps, task: str, options: ClipOptions, seed) -> dict:
    tf = tensorflow()

    encoded, times = steps[ms.IMAGE_ENCODED], steps[ms.IMAGE_TIMESTAMP]
    length = tf.shape(encoded)[0]
    if options.num_frames is None:
        indices = tf.range(length)
    else:
        indices = _tf_window(length, options.num_frames, options.frame_stride, seed)
    frames = tf.map_fn(
        lambda data: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
        tf.gather(encoded, indices), fn_output_signature=tf.TensorSpec([None, None, 3],
                                                                       tf.uint8))
    if options.image_size is not None:
        # Bilinear, +0.5 and a cast rounding, as `load` resizes images (`decoding`).
        frames = tf.cast(tf.image.resize(frames, options.image_size) + 0.5, tf.uint8)
    found = {VIDEO: tf.ensure_shape(frames, [options.num_frames,
                                             *(options.image_size or (None, None)), 3]),
             TIMESTAMPS: tf.gather(times, indices)}
    if task == TRACKING:
        found.update(_tf_regions(context, steps, found[TIMESTAMPS], options))
    if task == ACTIONS:
        found.update({SEGMENT_START: context[ms.SEGMENT_START],
                      SEGMENT_END: context[ms.SEGMENT_END],
                      SEGMENT_LABEL: context[ms.SEGMENT_LABEL_INDEX]})
    return found


def _tf_regions(context, steps, frame_times, options: ClipOptions) -> dict:
    """Each sampled frame's boxes: those of the region step nearest its time, when
    within half a frame's interval (exactly at it for a clip without a frame rate);
    none, and not annotated, otherwise."""
    tf = tensorflow()

    rate = context[ms.IMAGE_FRAME_RATE]
    tolerance = tf.where(rate > 0, tf.cast(5e5 / tf.maximum(rate, 1e-6), tf.int64),
                         tf.constant(0, tf.int64))
    # A last region of no boxes, far from every frame: what an unmatched frame takes.
    region_times = tf.concat([steps[ms.REGION_TIMESTAMP], [_FAR]], 0)
    gaps = tf.abs(frame_times[:, None] - region_times[None, :])
    nearest = tf.argmin(gaps, axis=1, output_type=tf.int32)
    annotated = tf.reduce_min(gaps, axis=1) <= tolerance
    nearest = tf.where(annotated, nearest, tf.shape(region_times)[0] - 1)
    limit = options.max_boxes

    def per_frame(key, dtype, fill):
        rows = steps[key]
        rows = tf.concat([rows, tf.RaggedTensor.from_row_lengths(
            tf.zeros([0], dtype), tf.zeros([1], rows.row_splits.dtype))], 0)
        taken = tf.gather(rows, nearest)
        return taken.to_tensor(default_value=tf.constant(fill, dtype),
                               shape=[None, limit]), taken.row_lengths()

    corners = [per_frame(key, tf.float32, -1.0)[0] for key in ms.REGION_BOX]
    labels, counts = per_frame(ms.REGION_LABEL_INDEX, tf.int64, -1)
    tracks, _ = per_frame(ms.REGION_TRACK_INDEX, tf.int64, -1)
    if limit is not None:
        counts = tf.minimum(counts, limit)
    return {BBOX: tf.stack(corners, axis=-1), OBJECT_LABEL: labels, TRACK: tracks,
            NUM_OBJECTS: counts, IS_ANNOTATED: annotated}


def _tf_audio(context, steps, options: ClipOptions, seed) -> dict:
    tf = tensorflow()

    channels = context[ms.AUDIO_NUM_CHANNELS]
    samples = tf.reshape(steps[ms.AUDIO_FLOATS].flat_values,
                         tf.stack([-1, tf.cast(channels, tf.int32)]))
    size = options.num_samples
    if size is not None:
        offset = _tf_crop_offset(tf.shape(samples)[0], size, seed)
        samples = samples[offset:offset + size]
        samples = tf.pad(samples, [[0, size - tf.shape(samples)[0]], [0, 0]])
    return {AUDIO: tf.ensure_shape(samples, [size, None]),
            SAMPLE_RATE: context[ms.AUDIO_SAMPLE_RATE]}


def clip_batched(ds, batch_size: int, drop_remainder: bool):
    """Batches clip elements: frames and audio stack (fixed by num_frames, num_samples
    and image_size); boxes, segments and multi-label ids pad to the batch's longest
    (-1; counts and flags 0), so any batch stacks densely."""
    tf = tensorflow()

    def fill(name, spec):
        if spec.dtype == tf.string:
            return tf.constant(b"", tf.string)
        if spec.dtype == tf.bool:
            return tf.constant(False)
        return tf.constant(-1 if name in PADDED_WITH_MINUS_ONE else 0, spec.dtype)

    padding = {name: fill(name, spec) for name, spec in ds.element_spec.items()}
    return ds.padded_batch(batch_size, padding_values=padding,
                           drop_remainder=drop_remainder)


def clip_supervised(manifest: Manifest) -> Callable:
    """The (input, target) pair `as_supervised` makes of a clip element: (video, label)
    or (audio, label); tracking (video, {"boxes", "classes"}) as detection pairs them;
    action recognition (video, {"start", "end", "label"}) of its segments."""
    key = AUDIO if kind_of(manifest) == AUDIO else VIDEO
    if manifest.task == TRACKING:
        return lambda f: (f[key], {"boxes": f[BBOX], "classes": f[OBJECT_LABEL]})
    if manifest.task == ACTIONS:
        return lambda f: (f[key], {"start": f[SEGMENT_START], "end": f[SEGMENT_END],
                                   "label": f[SEGMENT_LABEL]})
    return lambda f: (f[key], f[LABEL])


# --- NumPy: open_split() ---------------------------------------------------------------

def clip_values(context: Mapping[str, list], lists: Mapping[str, list], manifest: Manifest,
                options: ClipOptions, rng: np.random.Generator | None,
                decode_frame: Callable[[bytes], np.ndarray] | None) -> dict:
    """A clip's element as NumPy, from its decoded SequenceExample: what `clip_decoder`
    gives, with a random window drawn from `rng` (None: the centre one), each sampled
    frame decoded by `decode_frame` (None: left as its JPEG bytes, in a list)."""
    multi_label = bool(manifest.labels and manifest.labels.multi_label)
    ids = np.asarray(context.get(ms.CLIP_LABEL_INDEX, []), np.int64)
    if multi_label:
        label = ids
        if options.num_classes is not None:
            label = np.zeros(options.num_classes, np.float32)
            label[ids[(ids >= 0) & (ids < options.num_classes)]] = 1
    else:
        label = ids[0] if len(ids) else np.int64(-1)
    found = {DATA_PATH: (context.get(ms.CLIP_DATA_PATH) or [b""])[0], LABEL: label}
    for name, feature in manifest.features.items():
        if feature.role == "input":
            values = context.get(name, [])
            found[name] = (values[0] if values and feature.shape == () else
                           np.asarray(values, dtype=_NUMPY[feature.dtype]))
    if kind_of(manifest) == AUDIO:
        found.update(_np_audio(context, lists, options, rng))
    else:
        found.update(_np_frames(context, lists, manifest.task, options, rng, decode_frame))
    return found


_NUMPY = {"int64": np.int64, "float32": np.float32, "string": object}


def _np_frames(context, lists, task: str, options: ClipOptions, rng,
               decode_frame: Callable | None) -> dict:
    encoded = [step[0] for step in lists.get(ms.IMAGE_ENCODED, [])]
    times = np.asarray([step[0] for step in lists.get(ms.IMAGE_TIMESTAMP, [])], np.int64)
    if options.num_frames is None:
        indices = np.arange(len(encoded))
    else:
        offset = window_offset(len(encoded), options.num_frames, options.frame_stride,
                               rng is not None, rng)
        indices = window_indices(len(encoded), options.num_frames, options.frame_stride,
                                 offset)
    chosen = [encoded[i] for i in indices.tolist()]
    if decode_frame is not None:
        frames = [decode_frame(data) for data in chosen]
        height = context.get(ms.IMAGE_HEIGHT, [0])[0]
        width = context.get(ms.IMAGE_WIDTH, [0])[0]
        video = np.stack(frames) if frames else np.zeros((0, height, width, 3), np.uint8)
    else:
        video = chosen
    found = {VIDEO: video, TIMESTAMPS: times[indices]}
    if task == TRACKING:
        found.update(_np_regions(context, lists, found[TIMESTAMPS], options))
    if task == ACTIONS:
        found.update({
            SEGMENT_START: np.asarray(context.get(ms.SEGMENT_START, []), np.int64),
            SEGMENT_END: np.asarray(context.get(ms.SEGMENT_END, []), np.int64),
            SEGMENT_LABEL: np.asarray(context.get(ms.SEGMENT_LABEL_INDEX, []), np.int64)})
    return found


def _np_regions(context, lists, frame_times: np.ndarray, options: ClipOptions) -> dict:
    rate = (context.get(ms.IMAGE_FRAME_RATE) or [0.0])[0]
    tolerance = int(5e5 / rate) if rate > 0 else 0
    region_times = np.asarray([s[0] for s in lists.get(ms.REGION_TIMESTAMP, [])] + [_FAR],
                              np.int64)
    gaps = np.abs(frame_times[:, None] - region_times[None, :])
    nearest = gaps.argmin(axis=1)
    annotated = gaps.min(axis=1) <= tolerance
    nearest = np.where(annotated, nearest, len(region_times) - 1)

    def rows(key):
        return [*lists.get(key, []), []]

    counts = np.asarray([len(rows(ms.REGION_BOX[0])[j]) for j in nearest], np.int64)
    width = options.max_boxes if options.max_boxes is not None else int(
        counts.max(initial=0))
    frames = len(nearest)
    boxes = np.full((frames, width, 4), -1, np.float32)
    labels = np.full((frames, width), -1, np.int64)
    tracks = np.full((frames, width), -1, np.int64)
    corners = [rows(key) for key in ms.REGION_BOX]
    label_rows, track_rows = rows(ms.REGION_LABEL_INDEX), rows(ms.REGION_TRACK_INDEX)
    for t, j in enumerate(nearest.tolist()):
        n = min(len(corners[0][j]), width)
        for k in range(4):
            boxes[t, :n, k] = corners[k][j][:n]
        labels[t, :n] = label_rows[j][:n]
        tracks[t, :n] = track_rows[j][:n]
    return {BBOX: boxes, OBJECT_LABEL: labels, TRACK: tracks,
            NUM_OBJECTS: np.minimum(counts, width), IS_ANNOTATED: annotated}


def _np_audio(context, lists, options: ClipOptions, rng) -> dict:
    channels = int((context.get(ms.AUDIO_NUM_CHANNELS) or [1])[0])
    flat = [value for step in lists.get(ms.AUDIO_FLOATS, []) for value in step]
    samples = np.asarray(flat, np.float32).reshape(-1, channels)
    size = options.num_samples
    if size is not None:
        room = max(len(samples) - size, 0)
        offset = int(rng.integers(0, room + 1)) if rng is not None else room // 2
        samples = samples[offset:offset + size]
        if len(samples) < size:
            samples = np.concatenate([samples, np.zeros((size - len(samples), channels),
                                                        np.float32)])
    return {AUDIO: samples,
            SAMPLE_RATE: np.float32((context.get(ms.AUDIO_SAMPLE_RATE) or [0.0])[0])}

"""Video and audio records: `tf.train.SequenceExample`s under MediaPipe's MediaSequence
keys (mediapipe/util/sequence/media_sequence.py), which DeepMind's DMVR and MediaPipe's
own pipelines read.

A modality's keys are declared here once, as MediaSequence declares them in one table:
the writer builds records from them and readers parse them by them. What lies in the
context is static over the clip (its path, its times, its labels, the frames' format and
size); what lies in the feature lists changes a step at a time (a frame, its timestamp,
the boxes drawn on it). Times are microseconds on the source's own timeline, as
MediaSequence keeps them. Serialized without TensorFlow (`example.encode_sequence_example`),
so workers never import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tfrecorder.format.example import encode_sequence_example

# --- the clip (context) -----------------------------------------------------------------
CLIP_DATA_PATH = "clip/data_path"
CLIP_START = "clip/start/timestamp"
CLIP_END = "clip/end/timestamp"
CLIP_LABEL_INDEX = "clip/label/index"
CLIP_LABEL_STRING = "clip/label/string"
CLIP_ENCODED_MEDIA = "clip/encoded_media_bytes"
CLIP_ENCODED_MEDIA_START = "clip/encoded_media_start_timestamp"
EXAMPLE_ID = "example/id"

# --- frames (format, size and rate in the context; one frame a step) ----------------------
IMAGE_FORMAT = "image/format"
IMAGE_HEIGHT = "image/height"
IMAGE_WIDTH = "image/width"
IMAGE_CHANNELS = "image/channels"
IMAGE_FRAME_RATE = "image/frame_rate"
IMAGE_ENCODED = "image/encoded"
IMAGE_TIMESTAMP = "image/timestamp"

# --- time segments (action recognition: context lists, one entry a segment) ---------------
SEGMENT_START = "segment/start/timestamp"
SEGMENT_END = "segment/end/timestamp"
SEGMENT_LABEL_INDEX = "segment/label/index"
SEGMENT_LABEL_STRING = "segment/label/string"

# --- regions (tracking: a step per annotated time, its boxes' lists) ----------------------
REGION_TIMESTAMP = "region/timestamp"
REGION_BOX = ("region/bbox/ymin", "region/bbox/xmin", "region/bbox/ymax", "region/bbox/xmax")
REGION_LABEL_INDEX = "region/label/index"
REGION_LABEL_STRING = "region/label/string"
REGION_TRACK_INDEX = "region/track/index"
REGION_NUM_REGIONS = "region/num_regions"
REGION_IS_ANNOTATED = "region/is_annotated"

# --- audio (MediaSequence's feature group under the WAVEFORM prefix, as DMVR reads it) -----
AUDIO_PREFIX = "WAVEFORM"
AUDIO_FLOATS = f"{AUDIO_PREFIX}/feature/floats"
AUDIO_SAMPLE_RATE = f"{AUDIO_PREFIX}/feature/sample_rate"
AUDIO_NUM_CHANNELS = f"{AUDIO_PREFIX}/feature/num_channels"
AUDIO_NUM_SAMPLES = f"{AUDIO_PREFIX}/feature/num_samples"
AUDIO_TIMESTAMP = f"{AUDIO_PREFIX}/feature/timestamp"

# Empty lists are written with their dtype (`encode_sequence_example`'s `list_dtypes`).
_DTYPES = {CLIP_LABEL_INDEX: "int64", CLIP_LABEL_STRING: "string",
           SEGMENT_START: "int64", SEGMENT_END: "int64", SEGMENT_LABEL_INDEX: "int64",
           SEGMENT_LABEL_STRING: "string", REGION_LABEL_INDEX: "int64",
           REGION_LABEL_STRING: "string", REGION_TRACK_INDEX: "int64",
           **dict.fromkeys(REGION_BOX, "float32"), AUDIO_FLOATS: "float32"}


@dataclass(frozen=True)
class Clip:
    """What one record says of a clip, whatever its source: the time span of the media
    it covers and its labels (indexes into the dataset's vocabulary, and their names)."""

    data_path: str
    start_us: int
    end_us: int
    label_index: tuple[int, ...] = ()
    label_string: tuple[str, ...] = ()
    example_id: str | None = None

    def context(self) -> dict:
        found = {CLIP_DATA_PATH: self.data_path, CLIP_START: int(self.start_us),
                 CLIP_END: int(self.end_us), CLIP_LABEL_INDEX: list(self.label_index),
                 CLIP_LABEL_STRING: list(self.label_string)}
        if self.example_id is not None:
            found[EXAMPLE_ID] = self.example_id
        return found


@dataclass(frozen=True)
class Segments:
    """Labelled time spans within a clip (action recognition); a key frame is a span
    whose start is its end."""

    start_us: Sequence[int] = ()
    end_us: Sequence[int] = ()
    label_index: Sequence[int] = ()
    label_string: Sequence[str] = ()

    def context(self) -> dict:
        return {SEGMENT_START: [int(t) for t in self.start_us],
                SEGMENT_END: [int(t) for t in self.end_us],
                SEGMENT_LABEL_INDEX: [int(i) for i in self.label_index],
                SEGMENT_LABEL_STRING: list(self.label_string)}


@dataclass(frozen=True)
class Regions:
    """Boxes at annotated times (object tracking): per step, its time and each box as
    [ymin, xmin, ymax, xmax], fractions of the frame, with its class and track."""

    timestamps_us: Sequence[int] = ()
    boxes: Sequence[np.ndarray] = ()  # per step, (n, 4)
    label_index: Sequence[Sequence[int]] = ()
    label_string: Sequence[Sequence[str]] = ()
    track_index: Sequence[Sequence[int]] = ()

    def feature_lists(self) -> dict:
        steps = [np.asarray(b, dtype=np.float32).reshape(-1, 4) for b in self.boxes]
        found = {REGION_TIMESTAMP: [int(t) for t in self.timestamps_us],
                 REGION_NUM_REGIONS: [len(b) for b in steps],
                 REGION_IS_ANNOTATED: [1] * len(steps),
                 REGION_LABEL_INDEX: [[int(i) for i in s] for s in self.label_index],
                 REGION_LABEL_STRING: [list(s) for s in self.label_string],
                 REGION_TRACK_INDEX: [[int(i) for i in s] for s in self.track_index]}
        for k, key in enumerate(REGION_BOX):
            found[key] = [b[:, k].tolist() for b in steps]
        return found


@dataclass(frozen=True)
class Frames:
    """A clip's frames, each encoded (JPEG), with its time; all of one size."""

    encoded: Sequence[bytes]
    timestamps_us: Sequence[int]
    height: int
    width: int
    frame_rate: float
    image_format: str = "JPEG"
    channels: int = 3

    def context(self) -> dict:
        return {IMAGE_FORMAT: self.image_format, IMAGE_HEIGHT: int(self.height),
                IMAGE_WIDTH: int(self.width), IMAGE_CHANNELS: int(self.channels),
                IMAGE_FRAME_RATE: float(self.frame_rate)}

    def feature_lists(self) -> dict:
        return {IMAGE_ENCODED: list(self.encoded),
                IMAGE_TIMESTAMP: [int(t) for t in self.timestamps_us]}


@dataclass(frozen=True)
class Audio:
    """A clip's waveform as float32 samples in [-1, 1], (samples, channels), stored in
    packets of `packet` samples a step (each step interleaved by channel, as MediaPipe's
    audio decoder writes them), with the first sample's time of each packet."""

    samples: np.ndarray
    sample_rate: float
    start_us: int = 0
    packet: int = field(default=0)  # samples a step; 0: the whole clip in one step

    def _samples(self) -> np.ndarray:
        found = np.asarray(self.samples, dtype=np.float32)
        return found.reshape(-1, 1) if found.ndim == 1 else found

    def context(self) -> dict:
        samples = self._samples()
        packet = self.packet or len(samples)
        return {AUDIO_SAMPLE_RATE: float(self.sample_rate),
                AUDIO_NUM_CHANNELS: int(samples.shape[1]), AUDIO_NUM_SAMPLES: int(packet)}

    def feature_lists(self) -> dict:
        samples = self._samples()
        packet = self.packet or max(len(samples), 1)
        starts = range(0, len(samples), packet)
        return {AUDIO_FLOATS: [samples[s:s + packet].reshape(-1).tolist() for s in starts],
                AUDIO_TIMESTAMP: [int(self.start_us + s * 1_000_000 / self.sample_rate)
                                  for s in starts]}


def sequence_record(clip: Clip, *parts: Frames | Audio | Segments | Regions,
                    encoded_media: bytes | None = None) -> bytes:
    """One clip's record: its context and feature lists from each part it has, and
    the original container's bytes where they are kept instead of (or beside) frames."""
    context, lists = clip.context(), {}
    for part in parts:
        if hasattr(part, "context"):
            context.update(part.context())
        if hasattr(part, "feature_lists"):
            lists.update(part.feature_lists())
    if encoded_media is not None:
        context[CLIP_ENCODED_MEDIA] = encoded_media
        context[CLIP_ENCODED_MEDIA_START] = int(clip.start_us)
    return encode_sequence_example(context, lists, _DTYPES)


# What a media dataset's records hold: decoded frames, a waveform, or the source file's
# own bytes (`MediaOptions.keep_media`).
STORED = ("frames", "waveform", "encoded_media")


@dataclass(frozen=True)
class Media:
    """What `dataset.json` says of a video or audio dataset (its `media`): the kind of
    file its records came from, what they store, and per split how many clips, stored
    frames (0 for audio) and seconds they hold. Readers parse its records as
    SequenceExamples under this module's keys."""

    kind: str  # "video" or "audio"
    stored: str  # one of STORED
    # Per split: {"clips": n, "frames": n, "seconds": s}; {} in a header.
    counts: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # What cutting files into clips of `clip_seconds` did: {"clip_seconds", "rows",
    # "clips", "tails_dropped", "seconds_dropped"}; None: files were not cut.
    cut: Mapping[str, float] | None = None

    def to_json(self) -> dict:
        found = {"kind": self.kind, "stored": self.stored,
                 "counts": {str(k): dict(v) for k, v in self.counts.items()}}
        if self.cut is not None:
            found["cut"] = dict(self.cut)
        return found

    @classmethod
    def from_json(cls, data: Mapping) -> Media:
        return cls(kind=data["kind"], stored=data["stored"],
                   counts={k: dict(v) for k, v in (data.get("counts") or {}).items()},
                   cut=dict(data["cut"]) if data.get("cut") else None)

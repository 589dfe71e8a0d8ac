"""Small video and audio datasets for the read side's tests, written as the writer will
write them (issue 49): real SequenceExample records (`media_sequence.sequence_record`),
framed into shards by `ShardWriter`, with a finished `dataset.json`, `rejected.csv` and
the TFDS files `finish` writes.

Until `convert()` writes clips, `write_clip_dataset` stands in for it: one function, so
that the tests can later call `convert()` instead.

Frames are JPEGs whose pixels say which frame they are: a flat colour of red
`4 + 8 * frame` and green `4 + 8 * clip`, so a test reads back which frames were sampled
(`frame_index`), within JPEG's error. Audio is a sine of a known frequency.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from tfrecorder.format import media_sequence as ms
from tfrecorder.format.manifest import (
    REJECTED,
    Labels,
    Manifest,
    Rejected,
    ShardInfo,
    Split,
    SplitInfo,
    index_filename,
    shard_filename,
)
from tfrecorder.format.manifest_statistics import SplitStatistics
from tfrecorder.format.tfds_metadata import tfds_files
from tfrecorder.format.tfrecord import ShardWriter

HEIGHT, WIDTH = 24, 32
FRAME_RATE = 10.0
SAMPLE_RATE = 8000


def frame_pixels(frame: int, clip: int = 0, height: int = HEIGHT,
                 width: int = WIDTH) -> np.ndarray:
    """Frame `frame` of clip `clip`: flat red 4 + 8 * frame, green 4 + 8 * clip."""
    pixels = np.empty((height, width, 3), np.uint8)
    pixels[..., 0] = 4 + 8 * (frame % 31)
    pixels[..., 1] = 4 + 8 * (clip % 31)
    pixels[..., 2] = 128
    return pixels


def frame_index(pixels: np.ndarray) -> int:
    """Which frame `frame_pixels` drew (pixels of one frame, [H, W, 3])."""
    return int(round((float(np.asarray(pixels)[..., 0].mean()) - 4) / 8))


def clip_index(pixels: np.ndarray) -> int:
    return int(round((float(np.asarray(pixels)[..., 1].mean()) - 4) / 8))


def jpeg(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def sine(num_samples: int, frequency: float = 440.0, channels: int = 1,
         sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """(num_samples, channels) float32: channel c is the sine at (c + 1) * frequency."""
    t = np.arange(num_samples) / sample_rate
    return np.stack([0.5 * np.sin(2 * np.pi * (c + 1) * frequency * t)
                     for c in range(channels)], axis=1).astype(np.float32)


def _record(number: int, clip: Mapping, kind: str, vocabulary: Sequence[str]) -> tuple[
        bytes, dict]:
    """A clip's record and what it adds to its split's counts."""
    labels = clip.get("label")
    labels = [] if labels is None else [labels] if isinstance(labels, str) else list(labels)
    start = int(clip.get("start_us", 0))
    if kind == "audio":
        rate = clip.get("sample_rate", SAMPLE_RATE)
        samples = clip.get("samples")
        if samples is None:
            samples = sine(clip.get("num_samples", rate // 2), clip.get("frequency", 440.0),
                           clip.get("channels", 1), rate)
        end = start + round(len(samples) * 1e6 / rate)
        parts = [ms.Audio(samples, rate, start, packet=clip.get("packet", 1024))]
        counts = {"clips": 1, "frames": 0, "seconds": len(samples) / rate}
    else:
        rate = clip.get("frame_rate", FRAME_RATE)
        count = clip.get("num_frames", 8)
        height, width = clip.get("size", (HEIGHT, WIDTH))
        frames = clip.get("encoded") or [jpeg(frame_pixels(k, number, height, width))
                                         for k in range(count)]
        times = [start + round(k * 1e6 / rate) for k in range(count)]
        end = start + round(count * 1e6 / rate)
        parts = [ms.Frames(frames, times, height, width, rate)]
        # [(frame, boxes, labels, tracks)]: the region at that frame's time (a fraction
        # of a frame: between two, as an annotation's own time may fall)
        regions = clip.get("regions")
        if regions is not None:
            parts.append(ms.Regions(
                [start + round(frame * 1e6 / rate) for frame, *_ in regions],
                [np.asarray(boxes, np.float32).reshape(-1, 4) for _, boxes, _, _ in regions],
                [[vocabulary.index(name) for name in names] for _, _, names, _ in regions],
                [list(names) for _, _, names, _ in regions],
                [list(tracks) for *_, tracks in regions]))
        segments = clip.get("segments")  # [(start_us, end_us, label)]
        if segments is not None:
            parts.append(ms.Segments([s for s, _, _ in segments], [e for _, e, _ in segments],
                                     [vocabulary.index(n) for *_, n in segments],
                                     [n for *_, n in segments]))
        counts = {"clips": 1, "frames": count, "seconds": count / rate}
    record = ms.sequence_record(
        ms.Clip(clip.get("path", f"clips/{number}.{'wav' if kind == 'audio' else 'mp4'}"),
                start, end, tuple(vocabulary.index(n) for n in labels), tuple(labels)),
        *parts)
    return record, counts


def write_clip_dataset(folder: str | os.PathLike, clips: Sequence[Mapping], *,
                       kind: str = "video", task: str = "classification",
                       records_per_shard: int = 4) -> str:
    """Writes `clips` (dicts: `split` (default "train"), `label` (a name, a list of
    them, or None), and for video `num_frames`, `frame_rate`, `size`, `start_us`,
    `regions` [(frame, boxes, labels, tracks)], `segments` [(start_us, end_us, label)];
    for audio `num_samples`, `channels`, `sample_rate`, `frequency` or `samples`) as a
    finished dataset in `folder`, and returns its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names: set[str] = set()
    for clip in clips:
        label = clip.get("label")
        names.update([] if label is None else [label] if isinstance(label, str) else label)
        names.update(n for _, _, labels, _ in clip.get("regions") or () for n in labels)
        names.update(n for *_, n in clip.get("segments") or ())
    vocabulary = tuple(sorted(names))
    by_split: dict[str, list[tuple[int, Mapping]]] = {}
    for number, clip in enumerate(clips):
        by_split.setdefault(str(Split(clip.get("split", "train"))), []).append((number, clip))
    splits, counts, statistics = {}, {}, {}
    for split in [s for s in ("train", "validation", "test") if s in by_split]:
        members = by_split[split]
        num_shards = max(1, -(-len(members) // records_per_shard))
        shards, totals = [], {"clips": 0, "frames": 0, "seconds": 0.0}
        class_counts = [0] * len(vocabulary)
        for index in range(num_shards):
            name = shard_filename(split, index, num_shards, None)
            with ShardWriter(str(folder / name), ".tmp-test") as writer:
                for number, clip in members[index::num_shards]:
                    record, found = _record(number, clip, kind, vocabulary)
                    writer.write(record)
                    for key, value in found.items():
                        totals[key] += value
                    for label in _counted_labels(clip, task):
                        class_counts[vocabulary.index(label)] += 1
            shards.append(ShardInfo(name, writer.num_records, writer.num_bytes,
                                    writer.sha256, index_filename(name) or ""))
        splits[Split(split)] = SplitInfo.of(tuple(shards), 0)
        counts[split] = totals
        statistics[Split(split)] = SplitStatistics(tuple(class_counts))
    manifest = Manifest(
        compression=None, features={}, num_source_rows=len(clips),
        options={"frame_rate": None, "short_side": None}, created_by="tests/clip_datasets",
        labels=Labels("text", vocabulary, any(
            not isinstance(c.get("label"), (str, type(None))) for c in clips),
            len(vocabulary)) if vocabulary else None,
        splits=splits, rejected=Rejected(REJECTED, 0), statistics=statistics,
        duplicates=(), task=task,
        media=ms.Media(kind, "waveform" if kind == "audio" else "frames", counts))
    (folder / REJECTED).write_text("row,video_uri,reason\n")
    for name, content in tfds_files(manifest).items():
        (folder / name).write_bytes(content)
    (folder / "dataset.json").write_bytes(manifest.to_bytes())
    return str(folder)


def _counted_labels(clip: Mapping, task: str) -> list[str]:
    """What the writer's class counts count: a clip's labels (classification), its
    segments' (action recognition) or its boxes' (tracking)."""
    if task == "object_tracking":
        return [n for _, _, labels, _ in clip.get("regions") or () for n in labels]
    if task == "action_recognition":
        return [n for *_, n in clip.get("segments") or ()]
    label = clip.get("label")
    return [] if label is None else [label] if isinstance(label, str) else list(label)

"""One planned video or audio row in, one clip's `tf.train.SequenceExample` (or the reason
it failed) out: `records.encode_row` hands a media row's bytes here, so both engines
write clips unchanged.

The record is `format/media_sequence`'s: the clip (its file, span and labels), what the
file decodes to (`media`: JPEG frames, or a waveform; or with `keep_media` the file's own
bytes), and the row's timed annotations: action segments, or tracked boxes grouped into
one step per annotated time. A row's input columns go in the context under their own
names. Imports neither TensorFlow nor the decoders (`media` imports them when called).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xxhash

from tfrecorder.format.image_checks import describe_error
from tfrecorder.format.media_sequence import (
    Clip,
    Regions,
    Segments,
    sequence_record,
)
from tfrecorder.options import MediaOptions, RecordOptions
from tfrecorder.write import media
from tfrecorder.write.rows import Record, Rejection, Row, StoredClip

ACTION_RECOGNITION = "action_recognition"
OBJECT_TRACKING = "object_tracking"


def encode_clip(row: Row, data: bytes, options: RecordOptions) -> Record | Rejection:
    """The `Record` of a video or audio row's clip (its `StoredClip` for the statistics),
    or the Rejection that says why there is none."""
    media_options = options.media_options or MediaOptions()
    try:
        if media_options.keep_media:
            start_us, end_us = media.header_span(data, options.media, row.clip_start_us,
                                                 row.clip_end_us)
            part, payload, (frames, height, width) = None, [data], (0, 0, 0)
        elif options.media == "video":
            part, start_us, end_us = media.video_clip(
                data, row.clip_start_us, row.clip_end_us, media_options,
                options.jpeg_quality, options.max_image_pixels)
            payload, frames = part.encoded, len(part.encoded)
            height, width = part.height, part.width
        else:
            part = media.audio_waveform(data, row.clip_start_us, row.clip_end_us,
                                        media_options)
            start_us = part.start_us
            end_us = start_us + round(len(part.samples) * 1e6 / part.sample_rate)
            payload, (frames, height, width) = [part.samples.tobytes()], (0, 0, 0)
    except media.MediaRejected as e:
        return Rejection(row.position, e.reason)
    except ImportError:
        raise  # a missing extra is the run's problem, not this row's
    except Exception as e:  # what a decoder raises on data nobody foresaw: this row's
        return Rejection(row.position, f"{media.CORRUPT} {options.media}: "
                                       f"{describe_error(e)}")
    label_index, label_string = _clip_labels(row, options)
    clip = Clip(row.image_uri or row.uri or "", int(start_us), int(end_us),
                label_index, label_string)
    parts = [_Inputs(row.inputs), *([part] if part is not None else []),
             *_timed(row, options)]
    record = sequence_record(clip, *parts,
                             encoded_media=data if media_options.keep_media else None)
    digest = xxhash.xxh3_128()
    for piece in payload:
        digest.update(piece)
    return Record(record, clip=StoredClip(frames, int(end_us - start_us), height, width,
                                          sum(map(len, payload)), digest.digest()))


class _Inputs:
    """A row's input columns as the clip's context (None and empty values left out: a
    missing feature reads as an empty one)."""

    def __init__(self, inputs: Mapping):
        self._inputs = inputs

    def context(self) -> dict:
        return {name: value for name, value in self._inputs.items()
                if value is not None and not (isinstance(value, (list, tuple))
                                              and not value)}


def _clip_labels(row: Row, options: RecordOptions) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The clip's own classes. A row with timed annotations labels its segments or
    boxes, not the whole clip: its clip labels are empty."""
    if row.label is None or row.timed is not None:
        return (), ()
    index = tuple(int(i) for i in (row.label if isinstance(row.label, (list, tuple))
                                   else [row.label]))
    names = options.class_names or ()
    return index, tuple(names[i] for i in index) if names else ()


def _timed(row: Row, options: RecordOptions) -> list[Segments | Regions]:
    """The row's timed annotations, paired with its labels by position."""
    if row.timed is None:
        return []
    labels = [int(i) for i in (row.label or [])]
    names = options.class_names or ()

    def named(ids):
        return [names[i] for i in ids] if names else []

    if options.task == OBJECT_TRACKING:
        steps: dict[int, list] = {}
        for (time_us, *box, track), label in zip(row.timed, labels, strict=True):
            steps.setdefault(int(time_us), []).append((box, label, int(track)))
        times = sorted(steps)
        return [Regions(times,
                        [np.array([b for b, _, _ in steps[t]], np.float32).reshape(-1, 4)
                         for t in times],
                        [[label for _, label, _ in steps[t]] for t in times],
                        [named([label for _, label, _ in steps[t]]) for t in times],
                        [[track for _, _, track in steps[t]] for t in times])]
    starts, ends = zip(*row.timed, strict=True) if row.timed else ((), ())
    return [Segments(starts, ends, labels, named(labels))]

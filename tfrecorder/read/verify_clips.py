"""The record checks of `verify()` for a video or audio dataset: every clip parses as a
SequenceExample, every stored frame decodes (strictly: the writer's own JPEG checks,
`image_checks.stored_image_problem`) to the size its clip records, frame and audio times
increase, audio packets hold the samples the clip says, label ids (the clip's, its
segments', its boxes') are in the vocabulary, and the manifest's counts of clips and
frames are the records'.

Apart from `verify_records` because a clip is another kind of record (a SequenceExample
of frames, their times and audio: `media_sequence`) with checks of its own; the two
share how records are read and checked on threads (`shards.checked_records`) and the
writer's image checks. Records are parsed by `example_decoding` and frames checked by
libjpeg-turbo (simplejpeg), so `verify` never imports TensorFlow. Problems are handed
back as `Found` (a check's name, where, what), which `verify` makes `Problem`s of: this
module imports nothing of `verify`, which imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import NamedTuple

from tqdm.auto import tqdm

from tfrecorder.format import media_sequence as ms
from tfrecorder.format.example_decoding import decode_sequence_example
from tfrecorder.format.image_checks import jpeg_header, stored_image_problem
from tfrecorder.format.manifest import MANIFEST, Manifest
from tfrecorder.read.shards import checked_records

_SHOWN = 5  # frames or ids quoted in one problem


class Found(NamedTuple):
    """One problem: `verify.Check`'s value, the file (and record), the sentence."""

    check: str
    file: str
    record: int | None
    detail: str


def _problem(*, check: str, file: str, detail: str, record: int | None = None) -> Found:
    return Found(check, file, record, detail)


class Check:
    """The names of `verify.Check`'s values these checks find."""

    PARSE, DECODE, SHAPE, IDS, MANIFEST = "parse", "decode", "shape", "ids", "manifest"
    TIMESTAMPS, SAMPLES = "timestamps", "samples"


def check_clips(manifest: Manifest, shards: Sequence, progress: bool
                ) -> tuple[int, int, list[Found]]:
    """Checks every clip of `shards` (`verify.ReadableShard`s: their framing is sound),
    on a thread per core (`shards.checked_records`: decoding frames releases the GIL).
    Returns how many records parsed, how many frames decoded, and the problems: each
    record's, then the manifest's counts against what the records hold (of the splits
    whose every shard was read)."""
    num_classes = manifest.labels.num_classes if manifest.labels else None
    problems: list[Found] = []
    parsed = decoded = 0
    found = {shard.split: {"clips": 0, "frames": 0} for shard in shards}
    total = sum(shard.num_records for shard in shards)
    with tqdm(total=total, unit="clip", desc="Checking clips", disable=not progress) as bar:
        for shard, clip in checked_records(shards, manifest.compression,
                                           partial(_check_clip, num_classes)):
            bar.update(1)
            counts = found[shard.split]
            counts["clips"] += 1
            counts["frames"] += clip.frames
            parsed += clip.parsed
            decoded += clip.decoded
            problems += clip.problems
    readable = {shard.name for shard in shards}
    whole = {str(split) for split, info in manifest.splits.items()
             if all(shard.file in readable for shard in info.shards)}
    return parsed, decoded, problems + _counts(
        manifest, {split: n for split, n in found.items() if split in whole})


class _Clip(NamedTuple):
    """What checking one clip found."""

    parsed: bool  # it parses as a SequenceExample
    frames: int  # the frames it stores
    decoded: int  # of which decode at the clip's size
    problems: list[Found]


def _check_clip(num_classes: int | None, shard, number: int, record: bytes) -> _Clip:
    """Parses one clip of `shard` and checks its frames, audio and ids."""
    try:
        context, lists = decode_sequence_example(record)
    except ValueError as error:
        return _Clip(False, 0, 0, [_problem(file=shard.name, record=number,
                                            check=Check.PARSE, detail=str(error))])
    where = {"file": shard.name, "record": number}
    frame_problems, frames_decoded = _frames(context, lists, where)
    return _Clip(True, len(lists.get(ms.IMAGE_ENCODED, ())), frames_decoded,
                 frame_problems + _audio(context, lists, where)
                 + _ids(context, lists, num_classes, where))


def _frames(context: Mapping, lists: Mapping, where: dict) -> tuple[list[Found], int]:
    """Every frame decodes, at the clip's size; one time a frame, increasing."""
    frames = [step[0] if step else b"" for step in lists.get(ms.IMAGE_ENCODED, ())]
    times = [step[0] if step else None for step in lists.get(ms.IMAGE_TIMESTAMP, ())]
    problems = []
    size = (_one(context, ms.IMAGE_HEIGHT), _one(context, ms.IMAGE_WIDTH))
    bad, wrong_size = [], []
    for k, data in enumerate(frames):
        problem = stored_image_problem(data, "jpeg")
        if problem is not None:
            bad.append(f"frame {k}: {problem}")
            continue
        header = jpeg_header(data)
        if None not in size and (header.height, header.width) != size:
            wrong_size.append(f"frame {k} is {header.height}x{header.width}")
    if bad:
        problems.append(_problem(**where, check=Check.DECODE, detail=(
            f"{len(bad)} of its {len(frames)} frames do not decode: " + "; ".join(bad[:_SHOWN])
            + ("; ..." if len(bad) > _SHOWN else ""))))
    if wrong_size:
        problems.append(_problem(**where, check=Check.SHAPE, detail=(
            f"the clip's frames are {size[0]}x{size[1]} (image/height x image/width), but "
            + ", ".join(wrong_size[:_SHOWN]) + (", ..." if len(wrong_size) > _SHOWN else ""))))
    if frames and len(times) != len(frames):
        problems.append(_problem(**where, check=Check.TIMESTAMPS, detail=(
            f"{len(frames)} frames but {len(times)} image/timestamp steps")))
    problems += _increasing(times, ms.IMAGE_TIMESTAMP, where)
    return problems, len(frames) - len(bad)


def _audio(context: Mapping, lists: Mapping, where: dict) -> list[Found]:
    """Each packet of the waveform holds num_samples samples of every channel (the last
    may hold fewer), and packets' times increase."""
    packets = lists.get(ms.AUDIO_FLOATS)
    if packets is None:
        return []
    channels = _one(context, ms.AUDIO_NUM_CHANNELS) or 1
    each = _one(context, ms.AUDIO_NUM_SAMPLES)
    problems = []
    sizes = [len(packet) for packet in packets]
    uneven = [k for k, n in enumerate(sizes) if n % channels]
    short = [k for k, n in enumerate(sizes[:-1]) if each is not None and n != each * channels]
    if sizes and each is not None and sizes[-1] > each * channels:
        short.append(len(sizes) - 1)
    if uneven or short:
        k = (uneven or short)[0]
        problems.append(_problem(**where, check=Check.SAMPLES, detail=(
            f"audio packet {k} holds {sizes[k]} values, not {each} samples of {channels} "
            f"channel{'s' if channels != 1 else ''} ({ms.AUDIO_NUM_SAMPLES}, "
            f"{ms.AUDIO_NUM_CHANNELS})")))
    times = [step[0] if step else None for step in lists.get(ms.AUDIO_TIMESTAMP, ())]
    return problems + _increasing(times, ms.AUDIO_TIMESTAMP, where)


def _increasing(times: list, key: str, where: dict) -> list[Found]:
    back = next((k for k in range(1, len(times))
                 if times[k] is None or times[k - 1] is None or times[k] <= times[k - 1]),
                None)
    if back is None:
        return []
    return [_problem(**where, check=Check.TIMESTAMPS, detail=(
        f"{key} does not increase: step {back} is at {times[back]} us, after "
        f"{times[back - 1]} us"))]


def _ids(context: Mapping, lists: Mapping, num_classes: int | None,
         where: dict) -> list[Found]:
    """The clip's, its segments' and its boxes' class ids are in the vocabulary."""
    if num_classes is None:
        return []
    found = []
    for key, values in ((ms.CLIP_LABEL_INDEX, context.get(ms.CLIP_LABEL_INDEX, [])),
                        (ms.SEGMENT_LABEL_INDEX, context.get(ms.SEGMENT_LABEL_INDEX, [])),
                        (ms.REGION_LABEL_INDEX, [i for step in lists.get(
                            ms.REGION_LABEL_INDEX, ()) for i in step])):
        bad = [i for i in values if not 0 <= i < num_classes]
        if bad:
            found.append(_problem(**where, check=Check.IDS, detail=(
                f"{key} id{'s' if len(bad) > 1 else ''} "
                + ", ".join(map(str, bad[:_SHOWN])) + (", ..." if len(bad) > _SHOWN else "")
                + f" outside the {num_classes} classes of the manifest's labels")))
    return found


def _counts(manifest: Manifest, found: Mapping[str, Mapping[str, float]]) -> list[Found]:
    """The manifest's media counts of each split against the records read."""
    problems = []
    for split, counted in manifest.media.counts.items():
        read = found.get(str(split))
        if read is None:
            continue
        for key in ("clips", "frames"):
            if key in counted and int(counted[key]) != read[key]:
                problems.append(_problem(file=MANIFEST, check=Check.MANIFEST, detail=(
                    f"its media counts say the {split} split holds {int(counted[key]):,} "
                    f"{key}, and its records hold {int(read[key]):,}")))
    return problems


def _one(values: Mapping, key: str):
    found = values.get(key)
    return found[0] if found else None

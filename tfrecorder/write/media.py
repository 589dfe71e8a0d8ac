"""A video or audio file's clip decoded into what its record stores: JPEG frames with
their times (`Frames`), or a waveform (`Audio`); and a file's duration, to cut it into clips.

Decoding is PyAV's (FFmpeg, in its wheels) and soundfile's (libsndfile), imported inside
the functions that need them: image users never load either, and a missing extra is an
ImportError that says which one to install. Files are decoded from their bytes in memory,
as `records.encode_row` read them, so a bucket's file is decoded as a local one is.

Times are integer microseconds on the file's own timeline (a frame's pts * time_base), as
MediaSequence keeps them. Everything wrong with a file (not a media file, truncated,
corrupt, no stream of the kind asked for, a clip outside it, a codec FFmpeg lacks) is a
`MediaRejected` with a reason, which the encoder turns into the row's rejection; a
clip's numbers are quoted in it, so that `rows.rejection_reasons` counts one reason for
many rows. Why each choice below was made, with its measurement: docs/performance.md,
"Video and audio".
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

import numpy as np

from tfrecorder.errors import MissingExtraError
from tfrecorder.format.media_sequence import Audio, Frames
from tfrecorder.options import MediaOptions

CORRUPT = "corrupt or truncated"
NO_STREAM = "no {kind} stream"
UNSUPPORTED_CODEC = "unsupported codec"
TOO_LARGE = "video too large"

# The frames may stop this much before the end their file's header states before the
# file counts as truncated (encoders round a track's length; a last frame is long).
_TRUNCATION_SLACK_US = 500_000
# How far before a clip's start audio is decoded from (seeks land on a packet; a decoder
# needs a few packets before it gives the exact samples).
_AUDIO_PREROLL_US = 1_000_000
# Colour spaces whose Y'CbCr is JPEG's (BT.601; "unspecified", which FFmpeg reads as
# BT.601 too; RGB sources, converted with BT.601): their frames go straight to JPEG's
# Y'CbCr planes. Others (BT.709, BT.2020) go through RGB, so that JPEG readers, which
# assume BT.601, see the right colours. Numbers are FFmpeg's AVColorSpace.
_JPEG_YCBCR = {0, 2, 5, 6}


class MediaRejected(Exception):
    """Why a clip cannot be written from a file."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def video_frames(data: bytes, start_us: int | None, end_us: int | None,
                 options: MediaOptions, jpeg_quality: int,
                 max_pixels: int | None = None) -> Frames:
    """The frames of a video's clip `start_us`..`end_us` (None: the video's start, end),
    each a JPEG, upright, with its time on the video's timeline.

    Sampled on the timeline, not by index, so variable frame rates come out right: at
    `options.frame_rate`, the frame shown at each start + k / frame_rate (the last one
    whose time is at or before it; a frame shown at two such times is stored twice, so
    a clip holds frame_rate frames a second whatever its source's rate); without a frame
    rate, every frame in the span, and the stream's average rate is stored. The
    decoder starts at the key frame before `start_us` and drops the frames before it.

    Frames are turned upright by the rotation their container states (a phone's display
    matrix, or an old `rotate` tag), as players show them, and resized (FFmpeg's swscale,
    bilinear, which widens its filter when it shrinks, so it does not alias) so that
    their shorter side is `options.short_side`. BT.601 frames are scaled in Y'CbCr and
    handed to libjpeg-turbo as planes, skipping two colour conversions (half the cost of
    RGB); others through RGB. Raises MediaRejected.
    """
    return video_clip(data, start_us, end_us, options, jpeg_quality, max_pixels)[0]


def video_clip(data: bytes, start_us: int | None, end_us: int | None,
               options: MediaOptions, jpeg_quality: int, max_pixels: int | None = None
               ) -> tuple[Frames, int, int]:
    """`video_frames`, with the clip's span as its record states it: from `start_us` (None:
    the first frame's time) to `end_us`, cut at the video's end (None: the video's end)."""
    av = _module("av", "video")
    with _opened(av, data, "video") as (container, stream):
        if max_pixels is not None and stream.width * stream.height > max_pixels:
            raise MediaRejected(
                f"{TOO_LARGE}: {stream.width}x{stream.height} is "
                f"{stream.width * stream.height:,} pixels, more than the limit of "
                f"{max_pixels:,}")
        if start_us:
            # To the key frame at or before the start; frames before it are dropped.
            container.seek(max(0, math.floor(start_us / 1e6 / stream.time_base)),
                           stream=stream)
        header_end = _header_end_us(container, stream)
        decoded = _TimedFrames(av, container, stream)
        picked = (_every_frame(decoded, start_us, end_us) if options.frame_rate is None
                  else _sampled(decoded, start_us, end_us, options.frame_rate, header_end))
        tags = {name.lower(): value for name, value in stream.metadata.items()}
        to_jpeg = _JpegFrames(options.short_side, jpeg_quality, tags.get("rotate"))
        encoded, times = [], []
        for frame, time_us in picked:
            encoded.append(to_jpeg(frame))
            times.append(time_us)
        if not encoded:
            raise MediaRejected(_empty_span(start_us, end_us, "video", decoded.last_us,
                                            header_end))
        _check_not_truncated(decoded, end_us, header_end)
        rate = options.frame_rate or _average_rate(stream, times)
        height, width = to_jpeg.size
        clip_end = end_us
        if decoded.exhausted:  # the video ended before the clip did
            video_end = max(decoded.end_us, header_end or 0)
            clip_end = video_end if end_us is None else min(end_us, video_end)
        return (Frames(encoded, times, height, width, float(rate)),
                times[0] if start_us is None else start_us, clip_end)


def header_span(data: bytes, kind: str, start_us: int | None, end_us: int | None
                ) -> tuple[int, int]:
    """A clip's span in a file that is kept, not decoded: checked against its `kind` of
    stream's duration by its headers, and cut at its end. Raises MediaRejected."""
    duration = media_duration_us(data, kind)
    start = start_us or 0
    if start >= duration:
        raise MediaRejected(f"clip '{_span(start_us, end_us)}' starts after the {kind}'s "
                            f"end at '{_seconds(duration)}'")
    return start, duration if end_us is None else min(end_us, duration)


def audio_waveform(data: bytes, start_us: int | None, end_us: int | None,
                   options: MediaOptions) -> Audio:
    """The waveform of an audio file's clip `start_us`..`end_us` (None: the file's start,
    end), float32 in [-1, 1], (samples, channels), resampled to `options.sample_rate`
    and mixed to `options.audio_channels` (None: the file's own).

    WAV, FLAC, OGG and MP3 are read by soundfile (libsndfile, sample-exact seeks);
    what it cannot read (M4A/AAC, Opus in WebM, a video's sound track) by PyAV. Mono is
    the channels' mean and more channels from mono are copies (FFmpeg's mixer scales by
    1/sqrt(2), which leaves [-1, 1]); resampling is FFmpeg's swresample (measured: >90 dB
    SNR in the passband, aliases under -100 dB), so no other resampler is needed.
    A clip that ends after the audio is cut at its end. Raises MediaRejected.
    """
    samples, rate, first_us = _soundfile_read(data, start_us, end_us)
    if samples is None:
        samples, rate, first_us = _pyav_audio(data, start_us, end_us)
    samples = _mixed(samples, options.audio_channels)
    if options.sample_rate is not None and options.sample_rate != rate:
        samples, rate = _resampled(samples, rate, options.sample_rate), options.sample_rate
    return Audio(np.clip(samples, -1.0, 1.0, out=samples), float(rate), start_us=first_us)


def media_duration_us(source: bytes | BinaryIO, kind: str | None = None) -> int:
    """How long a media file is, in microseconds, from its headers where they say it
    (else by reading its packets, never decoding them): of its `kind` ("video",
    "audio") of stream, or of the whole file. `source` is the file's bytes or a seekable
    binary file (a local or bucket file open for reading: only what FFmpeg asks is read).
    Raises MediaRejected."""
    av = _module("av", kind or "video")
    with _opened(av, source, kind) as (container, stream):
        found = _header_end_us(container, stream)
        if found is None:
            last = 0
            for packet in container.demux(stream) if stream is not None else container.demux():
                if packet.pts is not None:
                    last = max(last, _us(packet.pts + (packet.duration or 0),
                                         packet.time_base))
            found = last
        return int(found)


# --- opening --------------------------------------------------------------------------

def check_installed(kind: str) -> None:
    """Raises, before any work starts, the MissingExtraError (an ImportError) a worker
    would meet at its first `kind` ("video" or "audio") of file: the decoders are
    extras."""
    for name in ("av",) if kind == "video" else ("soundfile", "av"):
        _module(name, kind)


def _module(name: str, extra: str):
    try:
        return __import__(name)
    except ModuleNotFoundError as e:
        if e.name != name:  # installed, and broken: its own error says more
            raise
        raise MissingExtraError(f"{extra} files are decoded with {name}, which is not "
                                f"installed: pip install 'tfrecorder[{extra}]'.", extra=extra,
                                package=name) from None


@contextmanager
def _opened(av, data: bytes | BinaryIO, kind: str | None):
    """The container and its first stream of `kind` (None: no stream chosen)."""
    try:
        container = av.open(io.BytesIO(data) if isinstance(data, bytes) else data, "r")
    except av.FFmpegError as e:
        raise MediaRejected(f"not a media file FFmpeg reads, or {CORRUPT}: "
                            f"{_ffmpeg_words(e)}") from None
    with container:
        stream = None
        if kind is not None:
            streams = getattr(container.streams, kind)
            if not streams:
                held = ", ".join(f"{s.type} ({_codec_name(s)})"
                                 for s in container.streams if s.type in ("video", "audio"))
                raise MediaRejected(NO_STREAM.format(kind=kind)
                                    + (f": the file holds {held}" if held else ""))
            stream = streams[0]
            if stream.codec_context is None or not stream.codec_context.codec.is_decoder:
                raise MediaRejected(f"{UNSUPPORTED_CODEC}: FFmpeg has no decoder for the "
                                    f"{kind} stream's codec '{_codec_name(stream)}'")
            stream.thread_type = "NONE"  # workers fill the cores; threads only add work
        yield container, stream


def _codec_name(stream) -> str:
    context = stream.codec_context
    return context.name if context is not None else "unknown"


def _ffmpeg_words(error: Exception) -> str:
    text = getattr(error, "strerror", None) or str(error)
    return text.strip().rstrip(".")


def _us(pts: int, time_base) -> int:
    return round(pts * time_base * 1_000_000)


def _seconds(us: int) -> str:
    return f"{us / 1e6:.1f} s"


def _header_end_us(container, stream) -> int | None:
    """Where a stream (or the file) ends by its headers; None: they do not say."""
    if stream is not None and stream.duration:
        return _us((stream.start_time or 0) + stream.duration, stream.time_base)
    if container.duration:
        return round(container.duration)  # in AV_TIME_BASE, microseconds
    return None


# --- video ----------------------------------------------------------------------------

class _TimedFrames:
    """A stream's decoded frames with their times (µs), in presentation order; it
    remembers the last one's time, and where the frames end (`end_us`)."""

    def __init__(self, av, container, stream):
        self._av, self._container, self._stream = av, container, stream
        self.last_us: int | None = None
        self.end_us: int | None = None
        self.exhausted = False

    def __iter__(self) -> Iterator[tuple[object, int]]:
        interval = _interval_us(self._stream)
        try:
            for frame in self._container.decode(self._stream):
                if frame.pts is None:
                    continue
                time_us = _us(frame.pts, frame.time_base)
                self.last_us = time_us
                self.end_us = time_us + (_us(frame.duration, frame.time_base)
                                         if frame.duration else interval)
                yield frame, time_us
        except self._av.FFmpegError as e:
            at = "" if self.last_us is None else f" after '{_seconds(self.last_us)}'"
            raise MediaRejected(f"{CORRUPT} video: decoding failed{at}: "
                                f"{_ffmpeg_words(e)}") from None
        self.exhausted = True


def _interval_us(stream) -> int:
    rate = stream.average_rate or stream.guessed_rate
    return round(1_000_000 / rate) if rate else 0


def _every_frame(decoded: _TimedFrames, start_us: int | None, end_us: int | None):
    for frame, time_us in decoded:
        if end_us is not None and time_us >= end_us:
            return
        if start_us is None or time_us >= start_us:
            yield frame, time_us


def _sampled(decoded: _TimedFrames, start_us: int | None, end_us: int | None,
             frame_rate: float, header_end_us: int | None):
    """(frame, time) at each time t = start + k / frame_rate before the clip's end: the
    frame shown at t (the last at or before it; before the first frame, the first), with
    t as its time. The times are the sampling's, as MediaPipe's PacketResamplerCalculator
    and FFmpeg's fps filter give them: evenly spaced, so a frame shown at two of them is
    stored twice under two times, and `image/timestamp` always increases."""
    step = 1_000_000 / frame_rate
    stop = math.inf if end_us is None else end_us
    origin, k, shown = start_us, 0, None
    for frame, time_us in decoded:
        if origin is None:
            origin = time_us
        while origin + k * step < min(time_us, stop):
            yield (shown or frame), round(origin + k * step)
            k += 1
        if origin + k * step >= stop:
            return
        shown = frame
    if shown is None:
        return
    # The stream ended: the last frame is shown until the video's end.
    video_end = max(decoded.end_us, header_end_us or 0)
    while origin + k * step < min(stop, video_end):
        yield shown, round(origin + k * step)
        k += 1


class _JpegFrames:
    """Frames as upright JPEGs of one size, each frame encoded once (a frame sampled
    twice is the same bytes)."""

    def __init__(self, short_side: int | None, quality: int, rotate_tag: str | None = None):
        self._short_side, self._quality, self._rotate_tag = short_side, quality, rotate_tag
        self._last: tuple[object, bytes] | None = None
        self.size: tuple[int, int] = (0, 0)  # (height, width) stored

    def __call__(self, frame) -> bytes:
        if self._last is not None and self._last[0] is frame:
            return self._last[1]
        import simplejpeg

        width, height = _scaled(frame.width, frame.height, self._short_side)
        quarters = _quarter_turns(frame.rotation, self._rotate_tag)
        ranges = {"src_color_range": frame.color_range or None}
        if frame.colorspace in _JPEG_YCBCR and width % 2 == 0 and height % 2 == 0:
            # (libjpeg-turbo's planes encoder reads past a 4:2:0 plane of an odd side:
            # such frames go through RGB, or their JPEGs would differ run to run.)
            scaled = frame.reformat(width, height, format="yuvj420p",
                                    interpolation="BILINEAR", threads=1, **ranges)
            planes = [_turned(_plane(p), quarters) for p in scaled.planes]
            encoded = simplejpeg.encode_jpeg_yuv_planes(*planes, quality=self._quality)
        else:
            pixels = frame.reformat(width, height, format="rgb24", interpolation="BILINEAR",
                                    threads=1, **ranges).to_ndarray()
            encoded = simplejpeg.encode_jpeg(_turned(pixels, quarters),
                                             quality=self._quality, colorsubsampling="420")
        self.size = (width, height) if quarters % 2 else (height, width)
        self._last = (frame, encoded)
        return encoded


def _scaled(width: int, height: int, short_side: int | None) -> tuple[int, int]:
    """The size a frame is stored at: its shorter side `short_side`, its longer one in
    proportion, rounded to an even number of pixels (as FFmpeg's `scale=-2` rounds, and
    as 4:2:0 JPEG planes want it)."""
    if short_side is None or min(width, height) == short_side:
        return width, height
    scale = short_side / min(width, height)

    def even(side: int) -> int:
        return max(2, 2 * round(side * scale / 2))

    return (short_side, even(height)) if width <= height else (even(width), short_side)


def _quarter_turns(rotation: float, rotate_tag: str | None) -> int:
    """Counter-clockwise quarter turns that show a frame upright: its display matrix's
    `rotation` (counter-clockwise degrees; FFmpeg attaches the stream's to each frame),
    else the stream's old `rotate` tag (clockwise degrees)."""
    if not rotation and rotate_tag:
        try:
            rotation = -float(rotate_tag)
        except ValueError:
            rotation = 0
    return round(rotation / 90) % 4


def _plane(plane) -> np.ndarray:
    """A plane's pixels without its line padding, contiguous: simplejpeg's planes
    encoder reads rows `width` apart whatever the array's strides, so a view with the
    padding (uninitialised bytes) gave different JPEGs each run."""
    return np.ascontiguousarray(np.frombuffer(plane, np.uint8).reshape(
        plane.height, plane.line_size)[:, :plane.width])


def _turned(pixels: np.ndarray, quarters: int) -> np.ndarray:
    return np.ascontiguousarray(np.rot90(pixels, quarters)) if quarters else pixels


def _average_rate(stream, times: list[int]) -> float:
    rate = stream.average_rate or stream.guessed_rate
    if rate:
        return float(rate)
    span = times[-1] - times[0]
    return (len(times) - 1) * 1e6 / span if span > 0 else 0.0


def _empty_span(start_us, end_us, kind: str, last_us: int | None,
                header_end_us: int | None) -> str:
    if last_us is None and (start_us or 0) == 0:
        return f"{CORRUPT} {kind}: no frame could be decoded"
    media_end = max(header_end_us or 0, last_us or 0)
    span = _span(start_us, end_us)
    if start_us is not None and start_us >= media_end:
        return f"clip '{span}' starts after the {kind}'s end at '{_seconds(media_end)}'"
    return f"no frame in the clip's span '{span}'"


def _span(start_us, end_us) -> str:
    start = 0.0 if start_us is None else start_us / 1e6
    end = "end" if end_us is None else f"{end_us / 1e6:.1f}"
    return f"{start:.1f}-{end} s"


def _check_not_truncated(decoded: _TimedFrames, end_us, header_end_us: int | None) -> None:
    """A stream whose frames stop well before its header's end, inside the clip, lost
    its tail: its clip would silently hold less than asked."""
    if not decoded.exhausted or header_end_us is None or decoded.end_us is None:
        return
    wanted = header_end_us if end_us is None else min(end_us, header_end_us)
    if decoded.end_us + _TRUNCATION_SLACK_US < wanted:
        raise MediaRejected(f"{CORRUPT} video: its frames stop at "
                            f"'{_seconds(decoded.end_us)}', but its header says it lasts "
                            f"'{_seconds(header_end_us)}'")


# --- audio ----------------------------------------------------------------------------

def _soundfile_read(data: bytes, start_us, end_us):
    """(samples, rate, first sample's time) by soundfile; (None, ...) for a file it does
    not read."""
    soundfile = _module("soundfile", "audio")
    try:
        opened = soundfile.SoundFile(io.BytesIO(data))
    except (soundfile.LibsndfileError, RuntimeError, TypeError):
        return None, None, None
    with opened:
        rate, length = opened.samplerate, opened.frames
        first = 0 if start_us is None else round(start_us * rate / 1e6)
        last = length if end_us is None else min(length, round(end_us * rate / 1e6))
        if first >= length:
            raise MediaRejected(f"clip '{_span(start_us, end_us)}' starts after the audio's "
                                f"end at '{_seconds(round(length * 1e6 / rate))}'")
        try:
            if opened.format == "MP3":
                # libsndfile 1.2's MP3 reader gives other samples after a seek or a first
                # read than in one read from the start (tested): one read, then the cut.
                samples = opened.read(max(0, last), dtype="float32", always_2d=True)[first:]
            else:
                opened.seek(first)
                samples = opened.read(max(0, last - first), dtype="float32",
                                      always_2d=True)
        except (soundfile.LibsndfileError, RuntimeError) as e:
            raise MediaRejected(f"{CORRUPT} audio: {e}") from None
    if not len(samples):
        raise MediaRejected(f"no sample in the clip's span '{_span(start_us, end_us)}'")
    return samples, rate, round(first * 1e6 / rate)


def _pyav_audio(data: bytes, start_us, end_us):
    av = _module("av", "audio")
    with _opened(av, data, "audio") as (container, stream):
        if start_us and start_us > _AUDIO_PREROLL_US:
            # Well before the start: the first frames decoded after a seek lack their
            # predecessor's overlap (AAC, Opus), so they are dropped with the rest.
            container.seek(math.floor((start_us - _AUDIO_PREROLL_US) / 1e6
                                      / stream.time_base), stream=stream)
        pieces, first_us, last_us = [], None, None
        try:
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                rate, last_us = frame.sample_rate, _us(frame.pts, frame.time_base)
                samples = _interleaved(frame)
                low, high = (_samples_until(start_us, last_us, rate, len(samples), 0),
                             _samples_until(end_us, last_us, rate, len(samples), len(samples)))
                if high > low:
                    first_us = first_us if pieces else last_us + round(low * 1e6 / rate)
                    pieces.append(samples[low:high])
                if high < len(samples):
                    break  # the clip's end
        except av.FFmpegError as e:
            raise MediaRejected(f"{CORRUPT} audio: decoding failed: "
                                f"{_ffmpeg_words(e)}") from None
        if not pieces:
            header_end = _header_end_us(container, stream)
            if last_us is None and not start_us:
                raise MediaRejected(f"{CORRUPT} audio: no sample could be decoded")
            end = max(header_end or 0, last_us or 0)
            if start_us is not None and start_us >= end:
                raise MediaRejected(f"clip '{_span(start_us, end_us)}' starts after the "
                                    f"audio's end at '{_seconds(end)}'")
            raise MediaRejected(f"no sample in the clip's span '{_span(start_us, end_us)}'")
        return np.concatenate(pieces), rate, first_us


def _samples_until(time_us: int | None, frame_us: int, rate: int, length: int,
                   default: int) -> int:
    """How many of a frame's samples come before `time_us` (None: `default`)."""
    if time_us is None:
        return default
    return min(length, max(0, round((time_us - frame_us) * rate / 1e6)))


def _interleaved(frame) -> np.ndarray:
    """An audio frame's samples as float32 (samples, channels), integers scaled to
    [-1, 1) as soundfile scales them."""
    samples = frame.to_ndarray()
    samples = samples.T if frame.format.is_planar else samples.reshape(
        -1, frame.layout.nb_channels)
    if samples.dtype == np.uint8:
        return (samples.astype(np.float32) - 128) / 128
    if samples.dtype.kind == "i":
        return samples.astype(np.float32) / -float(np.iinfo(samples.dtype).min)
    return samples.astype(np.float32, copy=False)


def _mixed(samples: np.ndarray, channels: int | None) -> np.ndarray:
    have = samples.shape[1]
    if channels is None or channels == have:
        return np.ascontiguousarray(samples, dtype=np.float32)
    if channels == 1:
        return samples.mean(axis=1, keepdims=True, dtype=np.float32)
    if have == 1:
        return np.repeat(samples, channels, axis=1)
    if channels < have:  # e.g. 5.1 to stereo: the first channels (front left, right)
        return np.ascontiguousarray(samples[:, :channels])
    raise MediaRejected(f"cannot mix {have} audio channels to {channels}: give "
                        f"audio_channels=1, {have} or fewer")


def _resampled(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """FFmpeg's swresample, a channel at a time as mono (so any channel count works,
    and no channel is mixed into another)."""
    av = _module("av", "audio")
    channels = []
    for column in samples.T:
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(column)[None, :],
                                           format="flt", layout="mono")
        frame.sample_rate = rate
        resampler = av.AudioResampler(format="flt", layout="mono", rate=target)
        out = resampler.resample(frame) + resampler.resample(None)
        channels.append(np.concatenate([f.to_ndarray()[0] for f in out]) if out
                        else np.zeros(0, np.float32))
    return np.stack(channels, axis=1).astype(np.float32, copy=False)

"""Tiny videos and sounds whose content is known, made with PyAV and soundfile for the
video and audio tests: H.264 in MP4, VP9 in WebM, a variable frame rate, a phone's
rotated clip, sound tracks and audio files, and damaged copies.

Frame k of a video is a horizontal gradient whose green level is 20 + 10 k, with a red
square in its top-left corner (so a turned frame shows where it went), `frame_pixels(k)`.
"""

from __future__ import annotations

import fractions
import os

import av
import numpy as np
import soundfile

WIDTH, HEIGHT = 64, 48
CORNER = 16  # the red square's side


def frame_pixels(k: int, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[..., 0] = np.linspace(30, 150, width, dtype=np.uint8)[None, :]
    pixels[..., 1] = min(20 + 10 * k, 250)
    pixels[..., 2] = 60
    pixels[:CORNER, :CORNER] = (250, 10, 10)
    return pixels


def video(path: str, codec: str = "libx264", fps: int = 10, seconds: float = 2.0,
          times_ms: list[int] | None = None, rotation: int | None = None,
          rotate_tag: str | None = None, sound: bool = False, pixel_format: str = "yuv420p",
          width: int = WIDTH, height: int = HEIGHT) -> str:
    """A video of `seconds` at `fps`, or of frames at `times_ms` (a variable frame rate);
    `rotation`: its display matrix's (counter-clockwise degrees, as a phone held upright
    writes -90); `rotate_tag`: an old `rotate` tag instead; `sound`: with an AAC track."""
    with av.open(path, "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pixel_format
        if times_ms is not None:
            stream.codec_context.time_base = fractions.Fraction(1, 1000)
        if rotation is not None:
            stream.set_display_rotation(rotation)
        if rotate_tag is not None:
            stream.metadata["rotate"] = rotate_tag
        audio = container.add_stream("aac", rate=16000, layout="mono") if sound else None
        for k, time_ms in enumerate(times_ms or range(round(fps * seconds))):
            frame = av.VideoFrame.from_ndarray(frame_pixels(k, width, height), format="rgb24")
            if times_ms is not None:
                frame.pts, frame.time_base = time_ms, fractions.Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
        if audio is not None:
            _encode_sound(container, audio, sine(seconds, 16000, 1))
    return path


def sine(seconds: float, rate: int, channels: int, hz: float = 440.0) -> np.ndarray:
    """(samples, channels) float32: a sine, each channel at a different level."""
    t = np.arange(round(seconds * rate)) / rate
    wave = np.sin(2 * np.pi * hz * t)
    return np.stack([wave * (0.8 - 0.3 * c) for c in range(channels)], 1).astype(np.float32)


def sound(path: str, seconds: float = 1.0, rate: int = 16000, channels: int = 2
          ) -> str:
    """An audio file by soundfile, its format from its extension (WAV, FLAC, OGG, MP3)."""
    soundfile.write(path, sine(seconds, rate, channels), rate)
    return path


def m4a(path: str, seconds: float = 1.0, rate: int = 16000, channels: int = 2) -> str:
    """AAC in an MP4 container (what soundfile cannot read)."""
    with av.open(path, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate,
                                      layout="mono" if channels == 1 else "stereo")
        _encode_sound(container, stream, sine(seconds, rate, channels))
    return path


def _encode_sound(container, stream, samples: np.ndarray) -> None:
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples.T), format="fltp",
                                       layout=stream.layout.name)
    frame.sample_rate, frame.pts = stream.rate, 0
    container.mux(stream.encode(frame))
    container.mux(stream.encode())


def cut(path: str, fraction: float, out: str) -> str:
    """A copy of the file's first `fraction` of bytes (a truncated download)."""
    with open(path, "rb") as f:
        data = f.read()
    with open(out, "wb") as f:
        f.write(data[:int(len(data) * fraction)])
    return out


def unknown_codec(path: str) -> str:
    """A Matroska video whose codec id no FFmpeg knows (H.264's, renamed in place)."""
    video(path)
    with open(path, "rb") as f:
        data = f.read()
    assert data.count(b"V_MPEG4/ISO/AVC") == 1
    with open(path, "wb") as f:
        f.write(data.replace(b"V_MPEG4/ISO/AVC", b"V_QUUX/NOT/KNWN"))
    return path


def garbage(path: str, size: int = 4000) -> str:
    with open(path, "wb") as f:
        f.write(np.random.default_rng(0).bytes(size))
    return path


def files(folder: str) -> dict[str, str]:
    """Every sample the tests use, by name, made once in `folder` (about 1 s)."""
    os.makedirs(folder, exist_ok=True)

    def at(name):
        return os.path.join(folder, name)

    made = {
        "h264": video(at("h264.mp4")),
        "vp9": video(at("vp9.webm"), codec="libvpx-vp9"),
        "vfr": video(at("vfr.mp4"), times_ms=[0, 40, 80, 200, 220, 500, 520, 540, 900,
                                              1000, 1300]),
        "phone": video(at("phone.mp4"), rotation=-90),
        "tagged": video(at("tagged.mkv"), rotate_tag="90"),
        "with_sound": video(at("with_sound.mp4"), sound=True),
        "unknown_codec": unknown_codec(at("unknown_codec.mkv")),
        "m4a": m4a(at("stereo.m4a")),
        "garbage": garbage(at("garbage.mp4")),
    }
    for kind in ("wav", "flac", "ogg", "mp3"):
        made[kind] = sound(at(f"stereo.{kind}"))
    made["wav44k"] = sound(at("stereo44k.wav"), rate=44100)
    made["cut_mp4"] = cut(made["h264"], 0.5, at("cut.mp4"))
    made["cut_webm"] = cut(made["vp9"], 0.5, at("cut.webm"))
    return made

"""`open_split()`: one split of a dataset as a random-access sequence of records, read
without TensorFlow, for PyTorch, Grain (JAX) and plain Python.

It is tfrecorder's one record reader without TensorFlow: `show`'s thumbnails and the
report read records through it too (`SplitDataset.in_order`, `split_dataset`).

`ds[i]` is one positioned read of record i's frame (`os.pread` locally, one ranged
request in a bucket), located by the shard's record index (`manifest.index_filename`),
both checksums checked, parsed by `example_decoding.decode_example` and shaped by the manifest: the
values `tfrecorder.load()` gives, as NumPy, with the same pixels (JPEGs by simplejpeg,
whose default islow IDCT and fancy upsampling are what `load()`'s
`dct_method="INTEGER_ACCURATE"` runs in libjpeg-turbo; PNGs by Pillow).

A dataset object is picklable and holds no open file: each process opens a shard on its
first read there, so PyTorch's DataLoader workers and Grain's worker processes (forked
or spawned) each read with their own descriptors. Nothing here imports TensorFlow,
PyTorch or Grain; `to_torch` imports torch when called.

Shards without an index (datasets written before indexes) are located by a scan of their
frame headers on first use, in each process that has not had the offsets handed down;
gzip shards cannot be read at an offset, so each is decompressed into memory, whole, on
its first read in a process: fine for small datasets, a reason to write large ones
uncompressed (the default).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import gzip
import io
import logging
import operator
import os
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from tfrecorder.errors import Option, VerificationError
from tfrecorder.format.example_decoding import decode_example, decode_sequence_example
from tfrecorder.format.layouts import MASK, SEGMENTATION_MASK, layout_of
from tfrecorder.format.manifest import (
    BASE64_ALTCHARS,
    LABEL,
    NO_LABEL,
    SPLITS,
    Feature,
    Manifest,
    read_manifest,
)
from tfrecorder.format.tfrecord import CorruptRecordError, frame_offsets, unframed
from tfrecorder.option_checks import checked_bool, checked_int, is_int, require
from tfrecorder.read.clips import ClipOptions, clip_values
from tfrecorder.read.shards import shard_records
from tfrecorder.storage import fs

logger = logging.getLogger(__name__)

CHANNELS = (0, 3)  # each image's own channels, or RGB (what load() gives by default)
_DTYPES = {"int64": np.int64, "float32": np.float32, "string": object}


def open_split(path: str | os.PathLike, split: str = "train", *, decode: bool = True,
               channels: int = 3, transform: Callable[[dict], object] | None = None,
               num_frames: int | None = None, frame_stride: int = 1,
               num_samples: int | None = None, max_boxes: int | None = None,
               multi_hot: bool = False, seed: int | None = None) -> SplitDataset:
    """One split of a dataset as a sequence of records with random access, without
    TensorFlow: `len(ds)`, `ds[i]`, `ds.shard(i, n)`, `ds.to_torch()`; Grain reads it as
    it is (`grain.MapDataset.source(ds)`).

    Named for what it opens, one split: a plain `open` would shadow Python's own in
    `from tfrecorder import *` and promise a file.

    Args:
        path: the dataset folder: local, or a gs://, s3:// (or other fsspec) URI.
        split: "train", "validation" or "test".
        decode: decode images (and masks) to uint8 arrays, as `load()` does; False
            leaves their stored bytes (JPEG, PNG or base64 raw pixels).
        channels: 3 (the default, as `load()`) converts every image to RGB; 0 keeps each
            image's own channels (grey, RGB, RGBA).
        transform: a function of each record's dict, applied last, in the process that
            reads the record (a DataLoader worker): augmentation, resizing, a tuple.
        num_frames, frame_stride, num_samples, max_boxes, multi_hot: for video and
            audio datasets, as `load()` takes them: the same elements (`clips`), frames
            decoded by simplejpeg to `load()`'s pixels. Resizing is left to `transform`.
        seed: the train split's random windows (and crops of audio): with a seed, record
            i's window is drawn from (seed, i, epoch), the same every run, and new after
            `ds.set_epoch(n)` (as a DistributedSampler's epochs); None draws a fresh one
            at every read. Other splits take the centre window.

    Returns:
        A `SplitDataset` whose records are dicts by tfrecorder's feature names (either
        layout), with the values `load()` gives, as NumPy: a scalar as a NumPy scalar
        (int64, float32) or bytes; a list as a 1-D array, rows of k values as an (n, k)
        array, empty ones of the same dtype with 0 rows; text as bytes, as `load()`
        gives it (the manifest does not tell text from binary: masks are PNG bytes), so
        `.decode()` it; `image` as a uint8 (height, width, channels) array. A record
        stored without a label has label -1, as in `load()`.
    """
    path = os.fspath(path)
    require("split", split, isinstance(split, str),
            f"the name of one split ({', '.join(map(repr, SPLITS))})")
    checked_bool("decode", decode)
    require("channels", channels, is_int(channels) and channels in CHANNELS,
            "3 (RGB) or 0 (each image's own channels)")
    require("transform", transform, transform is None or callable(transform),
            "a function of a record's dict, or None")
    checked_int("seed", seed, "an int or None", minimum=-(2**63), maximum=2**63 - 1)
    from tfrecorder.read.load_checks import check_options, checked_values

    checked_values(batch_size=None, image_size=None, channels=None, shuffle=None,
                   shuffle_buffer=1, seed=seed, repeat=False, augment=None, crop=None,
                   cache=False, as_supervised=False, multi_hot=multi_hot,
                   max_boxes=max_boxes, drop_remainder=False, with_info=False, host=None,
                   num_frames=num_frames, frame_stride=frame_stride, num_samples=num_samples)
    manifest = read_manifest(path)
    check_options(manifest, None, None, None, None, False, multi_hot, max_boxes,
                  num_frames, frame_stride, num_samples)
    clips = None if manifest.media is None else ClipOptions(
        num_frames, frame_stride, num_samples, None, max_boxes,
        manifest.labels.num_classes if multi_hot else None)
    return split_dataset(path, manifest, split, decode, channels, transform, clips, seed)


def split_dataset(path: str, manifest: Manifest, split: str, decode: bool = True,
                  channels: int = 3, transform: Callable[[dict], object] | None = None,
                  clips: ClipOptions | None = None, seed: int | None = None
                  ) -> SplitDataset:
    """`open_split` of a manifest read already, its options checked: how `show` and the
    report read records too. A video or audio dataset's records are clips read by
    `clips` (default: every frame, the whole waveform)."""
    info = manifest.split(split, path)
    shards = tuple(_Shard(fs.join(path, shard.file), shard.num_records,
                          fs.join(path, shard.index) if shard.index else "",
                          manifest.compression) for shard in info.shards)
    if manifest.media is not None and clips is None:
        clips = ClipOptions()
    return SplitDataset(path, str(split), manifest, shards, decode, channels, transform,
                        clips=clips, seed=seed)


class _Shard:
    """One shard as the reader reads it: its file, its records' frames (offset, size)
    once known, and, for a gzip shard, its records decompressed in this process."""

    def __init__(self, uri: str, num_records: int, index: str, compression: str | None):
        self.uri, self.num_records, self.compression = uri, num_records, compression
        self.index = index  # the record index the manifest lists ("": none)
        self.file = fs.PositionedFile(uri)
        self.frames: np.ndarray | None = None  # (num_records, 2): offset, size
        self.memory: bytes | None = None  # a gzip shard, decompressed
        self._lock = threading.Lock()

    def frame(self, position: int) -> tuple[bytes, int]:
        """The whole frame of the shard's record `position` and its offset."""
        if self.frames is None or (self.compression and self.memory is None):
            self._locate()
        offset, size = self.frames.item(position, 0), self.frames.item(position, 1)
        if self.memory is not None:
            return self.memory[offset:offset + size], offset
        return self.file.read(offset, size), offset

    def _locate(self) -> None:
        with self._lock:  # Grain reads on threads; one of them locates
            if self.frames is not None and (not self.compression or self.memory is not None):
                return
            try:
                if self.compression:
                    with fs.open_read(self.uri) as raw, gzip.GzipFile(fileobj=raw) as stream:
                        memory = stream.read()
                    logger.info("%s is gzip-compressed: decompressed into memory (%d bytes) "
                                "to read its records at their offsets", self.uri, len(memory))
                    frames = frame_offsets(io.BytesIO(memory))
                else:
                    memory, frames = None, self._indexed()
                frames = np.asarray(frames, dtype=np.int64).reshape(-1, 2)
            except (CorruptRecordError, ValueError, EOFError, zlib.error, gzip.BadGzipFile
                    ) as error:  # a damaged shard or index
                raise _damaged(f"{self.uri} cannot be read: {error}") from None
            if len(frames) != self.num_records:
                raise _damaged(
                    f"{self.uri} holds {len(frames)} records by its "
                    f"{'index' if self.index and not self.compression else 'frames'}, and "
                    f"the manifest says {self.num_records}")
            self.memory, self.frames = memory, frames

    def _indexed(self) -> list | np.ndarray:
        """The frames of an uncompressed shard, from its index; a shard without one
        (written before indexes, or its index lost) has its frame headers read once."""
        if self.index:
            try:
                return np.array(fs.read_bytes(self.index).split(), dtype=np.int64)
            except FileNotFoundError:
                logger.warning("%s is missing: the frame headers of %s are read instead",
                               self.index, self.uri)
        else:
            logger.info("%s has no record index (written before indexes): its frame "
                        "headers are read once to find its records", self.uri)
        self.index = ""
        with fs.open_read(self.uri) as stream:
            return frame_offsets(stream)

    def __getstate__(self) -> dict:
        # No descriptor and no decompressed bytes: a worker opens its own.
        return {"uri": self.uri, "num_records": self.num_records, "index": self.index,
                "compression": self.compression, "frames": self.frames}

    def __setstate__(self, state: dict) -> None:
        frames = state.pop("frames")
        self.__init__(**state)
        self.frames = frames


class SplitDataset:
    """The records of one split (or of a host's even part of it, `shard`), by position:
    a map-style dataset. See `open_split`.

    Attributes:
        path: the dataset folder.
        split: the split's name.
        manifest: the dataset's `Manifest` (labels' names: `manifest.labels`).
        features: the `Feature` of each name a record's dict has, before `transform`.
    """

    def __init__(self, path: str, split: str, manifest: Manifest, shards: tuple[_Shard, ...],
                 decode: bool, channels: int, transform: Callable | None,
                 start: int = 0, stop: int | None = None, *, clips: ClipOptions | None = None,
                 seed: int | None = None, epoch: int = 0):
        self.path, self.split, self.manifest = path, split, manifest
        self._shards = shards
        self._decode, self._channels, self._transform = decode, channels, transform
        self._clips, self._seed, self._epoch = clips, seed, epoch
        self._ends = list(np.cumsum([s.num_records for s in shards], dtype=np.int64).tolist())
        self._total = self._ends[-1] if self._ends else 0
        self._start, self._stop = start, self._total if stop is None else stop
        self._layout = layout_of(manifest)
        self.features: dict[str, Feature] = self._layout.read_features(manifest.features)
        # How each feature is shaped, worked out once: (name, dtype, shape after the
        # first dimension, or None for one value, and the value of a scalar a record
        # lacks: a label reads as NO_LABEL's (-1), as load() parses it).
        self._shapes = tuple(
            (name, _DTYPES[f.dtype], None if f.shape == () else tuple(f.shape[1:]),
             _scalar(NO_LABEL[f.dtype], _DTYPES[f.dtype]) if f.role == LABEL
             and f.shape == () else None)
            for name, f in self.features.items())

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, index: int) -> object:
        return self._values(self.record(index), index)

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:  # Grain's checkpoints name their source by it
        part = (f", records {self._start}-{self._stop}"
                if (self._start, self._stop) != (0, self._total)
                else "")
        return (f"SplitDataset({self.path!r}, {self.split!r}, {len(self)} records{part}, "
                f"decode={self._decode})")

    def shard(self, index: int, count: int) -> SplitDataset:
        """The `index`-th of `count` even parts (by position, sizes within one record
        a shard): one host's records. Of a whole split whose shards split evenly across
        `count` hosts (`convert(..., hosts=count)`), the host's block of shards, the
        records `load(..., host=(index, count))` reads; otherwise even by position."""
        require("count", count, is_int(count) and count >= 1, "a positive int")
        require("index", index, is_int(index) and 0 <= index < count,
                f"an int from 0 to count - 1 ({count - 1})")
        size, whole = len(self), (self._start, self._stop) == (0, self._total)
        mine = self.manifest.splits[self.split].host_shards(index, count) if whole else None
        if mine is not None:
            start = ([0, *self._ends])[index * len(mine)]  # a block of len(mine) shards
            stop = start + sum(shard.num_records for shard in mine)
        else:
            start = self._start + index * size // count
            stop = self._start + (index + 1) * size // count
        return SplitDataset(self.path, self.split, self.manifest, self._shards, self._decode,
                            self._channels, self._transform, start, stop, clips=self._clips,
                            seed=self._seed, epoch=self._epoch)

    def set_epoch(self, epoch: int) -> None:
        """Draws the train split's clip windows of epoch `epoch` (with a seed: the same
        windows for the same epoch, new ones for another); DataLoader workers started
        after this call (each epoch, unless persistent) see it."""
        require("epoch", epoch, is_int(epoch) and epoch >= 0, "an int of 0 or more")
        self._epoch = int(epoch)

    def close(self) -> None:
        """Closes the shards this process has open (a later read opens them again);
        otherwise up to 128 stay open for the life of the process (`fs.PositionedFile`)."""
        for shard in self._shards:
            shard.file.close()

    def to_torch(self):
        """This dataset as a `torch.utils.data.Dataset` (map-style), for DataLoader with
        any sampler and any `num_workers`; imports torch here, not before."""
        from tfrecorder.read._torch import TorchDataset

        return TorchDataset(self)

    def in_order(self) -> Iterator[tuple[str, int, object]]:
        """(shard file, index in the shard, record) of each record, as `ds[i]` gives it,
        shard by shard, each shard streamed from its start (`shards.shard_records`, every
        checksum checked) and opened only when the records before it were not enough. For
        a reader that stops early (`show`): a shard's bytes in one stream, not a request
        a record."""
        files = [shard.file for shard in self.manifest.splits[self.split].shards]
        index = 0  # of this dataset's records
        for file, shard, end in zip(files, self._shards, self._ends):
            start = end - shard.num_records  # the shard's first position in the split
            if end <= self._start or start >= self._stop:
                continue
            records = shard_records(shard.uri, shard.compression)
            with contextlib.closing(records):
                for in_shard, serialized in enumerate(records):
                    position = start + in_shard
                    if position >= self._stop:
                        break
                    if position >= self._start:
                        yield file, in_shard, self._values(serialized, index)
                        index += 1

    def record(self, index: int) -> bytes:
        """The serialized `tf.train.Example` at `index`, its checksums checked."""
        position = self._position(index)
        shard_number = bisect.bisect_right(self._ends, position)
        shard = self._shards[shard_number]
        in_shard = position - (self._ends[shard_number - 1] if shard_number else 0)
        frame, offset = shard.frame(in_shard)
        try:
            return unframed(frame)
        except CorruptRecordError as error:
            where = " of its decompressed stream" if shard.compression else ""
            raise _damaged(f"{shard.uri}: record {in_shard} (at byte {offset}{where}) is "
                           f"damaged: {error}") from None

    def _position(self, index: int) -> int:
        """The position in the split of this dataset's record `index` (negative: from
        the end)."""
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(f"records are indexed by an int, not {type(index).__name__}"
                            ) from None
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"record {index} of a dataset of {size} records "
                             f"({self.split} split of {self.path!r})")
        return self._start + (index if index >= 0 else index + size)

    def _values(self, serialized: bytes, index: int) -> object:
        """A record's dict, shaped by the manifest (and its images decoded), then
        `transform`ed."""
        if self._clips is not None:
            found = self._clip(serialized, index)
            return found if self._transform is None else self._transform(found)
        stored = self._layout.values(decode_example(serialized))
        found = {}
        for name, dtype, rows, default in self._shapes:
            values = stored.get(name)
            if rows is not None:  # a list: [n] or [n, k]
                found[name] = (np.array(values, dtype) if values else np.empty(0, dtype)
                               ).reshape(-1, *rows)
            elif values is not None and len(values) == 1:
                found[name] = _scalar(values[0], dtype)
            elif values is None and default is not None:
                found[name] = default
            else:
                raise VerificationError(
                    f"record {index} has {len(values or ())} values for {name!r}, which the "
                    "manifest says is one value. Is the manifest this dataset's? Check it "
                    "with tfrecorder.verify(path).")
        if self._decode and "image" in found:
            found["image"] = decode_image(found, self._channels)
            if SEGMENTATION_MASK in found:
                found[SEGMENTATION_MASK] = png_pixels(found[SEGMENTATION_MASK])[..., :1]
            if MASK in found:
                size = (int(found["image_height"]), int(found["image_width"]))
                found[MASK] = np.stack([png_pixels(m)[..., 0] for m in found[MASK]]) \
                    if len(found[MASK]) else np.zeros((0, *size), np.uint8)
        return found if self._transform is None else self._transform(found)


    def _clip(self, serialized: bytes, index: int) -> dict:
        """A video or audio record's element (`clips.clip_values`): the train split's
        window random (from (seed, position, epoch), or fresh without a seed), the
        others' the centre one."""
        rng = None
        if self.split == "train":
            position = self._position(index)
            rng = np.random.default_rng(None if self._seed is None else
                                        [self._seed % 2**63, position, self._epoch])
        context, lists = decode_sequence_example(serialized)
        return clip_values(context, lists, self.manifest, self._clips, rng,
                           (lambda data: _jpeg_pixels(data, 3)) if self._decode else None)


def _damaged(problem: str) -> VerificationError:
    return VerificationError(
        f"{problem}. Run tfrecorder.verify(path) to list every damaged shard, and restore "
        "them from a copy or write the dataset again with ", Option("overwrite", True), ".")


def _scalar(value, dtype):
    """One value as `load()` gives it: bytes, or a NumPy scalar of the feature's dtype."""
    return value if dtype is object else dtype(value)


# --- images --------------------------------------------------------------------------------

def decode_image(values: Mapping, channels: int = 3) -> np.ndarray:
    """A record's image as a uint8 (height, width, channels) array, exactly `load()`'s
    pixels: `values` holds the record's `image`, `image_format` and, for raw pixels,
    `image_height`, `image_width`, `image_channels`. channels=3 converts to RGB (grey
    repeated, alpha dropped), 0 keeps the image's own. The array is writable, as
    torch's tensors want."""
    data, image_format = values["image"], values["image_format"]
    if image_format == b"raw":
        shape = [int(values[n]) for n in ("image_height", "image_width", "image_channels")]
        pixels = np.frombuffer(bytearray(base64.b64decode(data, altchars=BASE64_ALTCHARS)),
                               np.uint8)  # a bytearray's: writable, as torch wants
        return _rgb(pixels.reshape(shape), channels)
    if image_format == b"jpeg":
        return _jpeg_pixels(data, channels)
    return _rgb(png_pixels(data), channels)


def _jpeg_pixels(data: bytes, channels: int) -> np.ndarray:
    """libjpeg-turbo's islow IDCT and fancy upsampling (simplejpeg's defaults) are
    TensorFlow's `dct_method="INTEGER_ACCURATE"`: the same pixels. A CMYK (Adobe) JPEG
    becomes RGB as TensorFlow makes it, whatever `channels`."""
    import simplejpeg  # here: importing tfrecorder stays fast

    colorspace = simplejpeg.decode_jpeg_header(data)[2]
    if colorspace == "Gray":
        pixels = simplejpeg.decode_jpeg(data, colorspace="GRAY")
        return _rgb(pixels.reshape(*pixels.shape[:2], 1), channels)
    if colorspace in ("CMYK", "YCCK"):
        cmyk = simplejpeg.decode_jpeg(data, colorspace="CMYK").astype(np.uint16)
        return (cmyk[..., :3] * cmyk[..., 3:] // 255).astype(np.uint8)
    return simplejpeg.decode_jpeg(data, colorspace="RGB")


def png_pixels(data: bytes) -> np.ndarray:
    """A PNG's (or any other stored format's) own pixels, (height, width, channels)
    uint8, as TensorFlow's uint8 decode gives them: palettes expanded, 16 bits as their
    high byte."""
    from PIL import Image  # here: importing tfrecorder stays fast

    image = Image.open(io.BytesIO(data))
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    elif image.mode == "1":
        image = image.convert("L")
    # asarray wraps Pillow's bytes (read-only: torch warns); copying that is far cheaper
    # than np.array(image) (docs/performance.md).
    pixels = np.asarray(image).copy()
    if pixels.dtype != np.uint8:  # 16-bit grey (I;16, I): TensorFlow gives value >> 8
        pixels = (pixels.astype(np.uint32) >> 8).astype(np.uint8)
    return pixels.reshape(*pixels.shape[:2], -1)


def _rgb(pixels: np.ndarray, channels: int) -> np.ndarray:
    """`pixels` with `channels` (0: as they are), as `load()` converts them."""
    if channels == 0 or pixels.shape[-1] == channels:
        return pixels
    if pixels.shape[-1] <= 2:  # grey, grey + alpha
        return np.repeat(pixels[..., :1], 3, axis=-1)
    return np.ascontiguousarray(pixels[..., :3])


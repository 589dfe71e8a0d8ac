"""Test helpers: build images with Pillow, read datasets back with TensorFlow."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from tfrecorder.format.example import encode_example
from tfrecorder.format.manifest import index_filename
from tfrecorder.format.tfrecord import ShardWriter

_SHAPES = {"L": (), "LA": (2,), "RGB": (3,), "RGBA": (4,)}
# What TensorFlow Datasets reads a dataset with a text label by (`tfds_metadata`), in a
# folder a run wrote.
TFDS_FILES = ["dataset_info.json", "features.json", "label.labels.txt"]


def make_image(size=(40, 30), mode="RGB", seed=0) -> Image.Image:
    """A smooth random image (width, height) in `mode`: photo-like, so JPEG behaves."""
    rng = np.random.default_rng(seed)
    width, height = size
    base = mode if mode in _SHAPES else "RGB"
    small = rng.integers(0, 256, (max(2, height // 8), max(2, width // 8)) + _SHAPES[base],
                         dtype=np.uint8)
    image = Image.fromarray(small, base).resize((width, height), Image.Resampling.BILINEAR)
    return image if base == mode else image.convert(mode)


def image_bytes(image: Image.Image, fmt: str, **save_args) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save_args)
    return buffer.getvalue()


def write_image(path, size=(40, 30), mode="RGB", fmt="JPEG", seed=0) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(image_bytes(make_image(size, mode, seed), fmt))
    return str(path)


def pixels(source) -> np.ndarray:
    """What TensorFlow should decode from a source file: [H, W, C] uint8."""
    image = Image.open(source)
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    elif image.mode in ("1", "I;16", "I"):
        image = image.convert("L")
    elif image.mode == "CMYK":
        image = image.convert("RGB")
    array = np.asarray(image)
    return array[..., None] if array.ndim == 2 else array


def shard_and_index_names(shards) -> list[str]:
    """What a dataset folder lists of these shards (paths): their names, and the folder
    of their record indexes, if they have any."""
    names = [os.path.basename(shard) for shard in shards]
    return names + (["index"] if any(n.endswith(".tfrecord") for n in names) else [])


def read_manifest(output_dir) -> dict:
    with open(os.path.join(output_dir, "dataset.json")) as f:
        return json.load(f)


def read_split(output_dir, split: str) -> list[dict]:
    """Every record of `split` of an image dataset with scalar features, parsed and decoded
    independently of tfrecorder's own reader."""
    import tensorflow as tf

    manifest = read_manifest(output_dir)
    spec = {
        name: tf.io.FixedLenFeature([], {"string": tf.string, "int64": tf.int64}[f["dtype"]])
        for name, f in manifest["features"].items()
    }
    compression = "GZIP" if manifest["compression"] == "gzip" else ""
    records = []
    for shard in manifest["splits"].get(split, {}).get("shards", []):
        path = os.path.join(output_dir, shard["file"])
        in_shard = 0
        for serialized in tf.data.TFRecordDataset(path, compression_type=compression):
            example = {k: v.numpy() for k, v in
                       tf.io.parse_single_example(serialized, spec).items()}
            example["pixels"] = decode(example)
            records.append(example)
            in_shard += 1
        assert in_shard == shard["num_records"], (shard, in_shard)
    return records


def decode(example: dict) -> np.ndarray:
    import tensorflow as tf

    if example["image_format"] == b"raw":
        flat = tf.io.decode_raw(tf.io.decode_base64(example["image"]), tf.uint8)
        shape = [example["image_height"], example["image_width"], example["image_channels"]]
        return tf.reshape(flat, shape).numpy()
    if example["image_format"] == b"jpeg":  # the accurate IDCT decodes exactly as Pillow
        return tf.io.decode_jpeg(example["image"], dct_method="INTEGER_ACCURATE").numpy()
    return tf.io.decode_image(example["image"], expand_animations=False).numpy()


def shard_bytes(output_dir) -> dict[str, bytes]:
    manifest = read_manifest(output_dir)
    return {
        shard["file"]: Path(output_dir, shard["file"]).read_bytes()
        for split in manifest["splits"].values() for shard in split["shards"]
    }


def dataset_folder_files(folder) -> list[str]:
    """Every file of a local dataset folder, by its path in it (`index/...` too)."""
    return sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*")
                  if p.is_file())


def download(prefix: str, local_dir) -> str:
    """Copies the objects directly under the gs:// `prefix`, and those of its index
    folder, into `local_dir`."""
    from apache_beam.io.filesystems import FileSystems

    from tfrecorder.format.manifest import folder_files
    from tfrecorder.storage import fs

    os.makedirs(local_dir, exist_ok=True)
    for name in folder_files(prefix):
        Path(local_dir, name).parent.mkdir(exist_ok=True)
        Path(local_dir, name).write_bytes(fs.read_bytes(f"{prefix.rstrip('/')}/{name}"))
    assert FileSystems.exists(f"{prefix.rstrip('/')}/dataset.json")
    return str(local_dir)


def features_of(record: dict, manifest: dict, **changes) -> dict:
    """A record read by `read_split`, as `encode_example` takes it, with `changes`."""
    features = {name: record[name] for name in manifest["features"]}
    features = {k: int(v) if not isinstance(v, bytes) else v for k, v in features.items()}
    return {**features, **changes}


def rewrite_split(output_dir, split: str, examples: list[dict]) -> None:
    """Replaces a split of a real dataset with one shard of `examples` (feature dicts),
    and fixes the manifest's counts and sizes to match, so only the records can be wrong."""
    manifest = read_manifest(output_dir)
    info = manifest["splits"][split]
    for shard in info["shards"]:
        for listed in (shard["file"], shard.get("index")):
            if listed:
                os.remove(os.path.join(output_dir, listed))
    suffix = ".tfrecord.gz" if manifest["compression"] == "gzip" else ".tfrecord"
    name = f"{split}-00000-of-00001{suffix}"
    dtypes = {name: feature["dtype"] for name, feature in manifest["features"].items()}
    with ShardWriter(os.path.join(output_dir, name), ".tmp-test", manifest["compression"]) as w:
        for example in examples:
            w.write(encode_example(example, dtypes))
    shard = {"file": name, "num_records": w.num_records, "num_bytes": w.num_bytes,
             "sha256": w.sha256}
    if index_filename(name):  # an uncompressed shard: the writer wrote its index
        shard["index"] = index_filename(name)
    info.update(num_records=w.num_records, num_bytes=w.num_bytes, shards=[shard])
    Path(output_dir, "dataset.json").write_text(json.dumps(manifest))


def run_cli(*args, timeout=300) -> subprocess.CompletedProcess:
    """`python -m tfrecorder ARGS`, with this process's environment (stores' endpoints)."""
    return subprocess.run([sys.executable, "-m", "tfrecorder", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def run_without_tensorflow(code: str, *args, timeout=120, installed: bool = True) -> str:
    """Runs `code` in a fresh interpreter (with `args` in sys.argv) and returns what it
    printed; fails if it errs or imports TensorFlow, whose import alone takes seconds.
    `installed=False`: where `import tensorflow` raises ImportError, as in an install
    without TensorFlow (a function that catches that and does without is tested too)."""
    if not installed:
        code = "import sys\nsys.modules['tensorflow'] = None\n" + code
    code += ("\nimport sys\nassert sys.modules.get('tensorflow') is None, "
             "'TensorFlow imported'\n")
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_one_error_line(process: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 1 and a single `tfrecorder: error:` line on stderr, naming every word."""
    assert process.returncode == 1, process.stderr
    assert "Traceback" not in process.stderr, process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfrecorder: error: "), process.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- runs in real subprocesses -----------------------------------------------------------

SLOW_RUN = """
import sys, pandas as pd, tfrecorder
rows, options = int(sys.argv[3]), eval(sys.argv[4])
df = pd.DataFrame({"image_uri": [sys.argv[1]] * rows, "label": ["a", "b"] * (rows // 2)})
tfrecorder.convert(df, sys.argv[2], num_workers=2, progress=False, **options)
"""


def start_slow_run(tmp_path, out, rows: int = 3000, **options) -> subprocess.Popen:
    """A conversion in a subprocess, well into writing when this returns: `rows` decodes
    of one large PNG (3000 take about a minute)."""
    image = Path(tmp_path, "big.png")
    if not image.exists():
        image.write_bytes(image_bytes(make_image((1600, 1600), seed=1), "PNG"))
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_RUN, str(image), str(out), str(rows), repr(options)],
        stderr=subprocess.PIPE, text=True)
    if "://" in str(out):
        _wait(process, lambda: children(process.pid), 60)
    else:
        wait_writing(process, out)
    time.sleep(0.5)  # well into writing
    return process


def wait_writing(process: subprocess.Popen, out, seconds: float = 60) -> None:
    """Waits until `process` has a temporary file in the local folder `out`."""
    _wait(process, lambda: os.path.isdir(out) and any(".tmp-" in n for n in os.listdir(out)),
          seconds)


def wait_until(process: subprocess.Popen, ready, seconds: float = 60) -> None:
    """Waits until `ready()` holds, failing with the process's errors if it ends first."""
    _wait(process, ready, seconds)


def _wait(process: subprocess.Popen, ready, seconds: float) -> None:
    deadline = time.time() + seconds
    while not ready():
        assert time.time() < deadline and process.poll() is None, process.stderr.read()
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    """The processes `pid` started (its workers)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(child) for child in f.read().split()]
    except FileNotFoundError:
        return []


def wait_gone(pid: int, seconds: float = 10) -> bool:
    """Whether process `pid` exits within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):  # a zombie has exited
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def partly_labelled_csv(folder) -> str:
    """An AutoML CSV of 8 tiny images, 3 of them unlabelled (a blank label cell), as
    AutoML imports them: rows 2 and 7 in train, row 4 in test."""
    rows = [("TRAIN", "cat"), ("TRAIN", ""), ("TRAIN", "dog"), ("TEST", ""), ("TEST", "cat"),
            ("VALIDATION", "dog"), ("TRAIN", " "), ("TRAIN", "dog")]
    for i in range(len(rows)):
        write_image(os.path.join(folder, "images", f"{i}.jpg"), size=(12, 10), seed=i)
    path = os.path.join(folder, "partly_labelled.csv")
    with open(path, "w") as f:
        f.writelines(f"{split},images/{i}.jpg,{label}\n"
                     for i, (split, label) in enumerate(rows))
    return path


def write_hive(table, folder, fmt: str, columns: list[str]) -> str:
    """The table's rows as `fmt` files (csv, jsonl) in hive partitions of `columns`
    (`colour=red/split=TRAIN/part-00000.csv`, as Spark's partitionBy writes them), with
    Spark's hidden `_SUCCESS` and `.crc` beside them; the folder."""
    for values, rows in table.groupby(columns, sort=False):
        where = Path(folder, *(f"{c}={v}" for c, v in zip(columns, values)))
        where.mkdir(parents=True, exist_ok=True)
        rows = rows.drop(columns=columns)
        if fmt == "csv":
            rows.to_csv(where / "part-00000.csv", index=False)
        else:
            rows.to_json(where / "part-00000.jsonl", orient="records", lines=True)
        (where / ".part-00000.crc").write_bytes(b"\x00")
    Path(folder, "_SUCCESS").touch()
    return str(folder)

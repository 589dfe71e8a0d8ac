"""The writer's JPEG check, a strict decode at 1/8 scale, against a full strict decode.

`image_checks.check_jpeg_data` validates a JPEG by decoding it strictly with libjpeg-turbo at
1/8 DCT scale, in grey: every coefficient is still entropy-decoded, which is where damage
shows, while most of the inverse DCT, upsampling and colour conversion is skipped. Over a
corpus of JPEGs of every process the writer reads, damaged in their scans (bytes flipped,
cut, spliced with another file, lost or zeroed, at positions drawn with fixed seeds), it
must reject exactly the files that a full strict decode rejects, with the same libjpeg
message, and accept the others.

No Python library writes arithmetic coding: tests/data/arithmetic*.jpg are `textured()`
saved by Pillow 12 (`image_bytes(textured(), "JPEG")`), recoded by libjpeg-turbo 2.1.5's
jpegtran (Debian package libjpeg-turbo-progs) with `jpegtran -arithmetic`, plus
`-progressive` or `-restart 4B`.
"""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import simplejpeg
from helpers import image_bytes, make_image
from PIL import Image
from test_hostile_images import lossless_jpeg, photo_jpeg, scan_start, with_sof, zeroed

from tfrecorder.format.image_checks import jpeg_header, stored_image_problem
from tfrecorder.options import ImageOptions
from tfrecorder.write.records import encode_row
from tfrecorder.write.rows import Row

DATA = Path(__file__).parent / "data"


def textured(size=(200, 150), mode="RGB", seed=0) -> Image.Image:
    """`make_image` with per-pixel noise: many non-zero AC coefficients, as in photos."""
    smooth = np.asarray(make_image(size, mode, seed), np.int16)
    noise = np.random.default_rng(seed).integers(-24, 25, smooth.shape)
    return Image.fromarray(np.clip(smooth + noise, 0, 255).astype(np.uint8), mode)


def sources() -> dict[str, bytes]:
    """Intact JPEGs of every process and layout the check reads."""
    photo = textured()
    return {
        "baseline": photo_jpeg(),
        "baseline 4:4:4": image_bytes(photo, "JPEG", quality=90, subsampling=0),
        "grey": image_bytes(textured(mode="L", seed=1), "JPEG"),
        "CMYK": image_bytes(photo.convert("CMYK"), "JPEG"),
        "progressive": photo_jpeg(progressive=True),
        "progressive, textured": image_bytes(photo, "JPEG", progressive=True),
        "restart markers": photo_jpeg(restart_marker_blocks=4),
        "restart markers, textured": image_bytes(photo, "JPEG", restart_marker_rows=1),
        "progressive, restart markers": image_bytes(photo, "JPEG", progressive=True,
                                                    restart_marker_blocks=2),
        "arithmetic (SOF9)": (DATA / "arithmetic.jpg").read_bytes(),
        "arithmetic progressive (SOF10)": (DATA / "arithmetic_progressive.jpg").read_bytes(),
        "arithmetic, restart markers": (DATA / "arithmetic_restart.jpg").read_bytes(),
        "lossless (SOF3)": lossless_jpeg(np.asarray(make_image((48, 36))), 1),
        "lossless grey (SOF3)": lossless_jpeg(np.asarray(textured((40, 30), "L")), 4),
    }


def damaged(name: str, corpus: dict[str, bytes]) -> list[tuple[str, bytes]]:
    """The source `name` intact, then damaged at 7 places in its scans (6 drawn, and its
    EOI), and at 3 of its restart markers if it has some: (what was done, bytes)."""
    names = list(corpus)
    index = names.index(name)
    data, other = corpus[name], corpus[names[(index + 1) % len(names)]]
    rng = np.random.default_rng(index)
    cases = [("intact", data)]
    for at in sorted({*rng.integers(scan_start(data), len(data) - 2, 6).tolist(),
                      len(data) - 2}):
        flipped = bytearray(data)
        flipped[at] ^= int(rng.integers(1, 256))
        joined = int(rng.integers(scan_start(other), len(other)))
        cases += [(f"flipped: byte {at}", bytes(flipped)),
                  (f"cut: at {at}", data[:at]),
                  (f"spliced: at {at} with the next source from {joined}",
                   data[:at] + other[joined:]),
                  (f"lost: 16 bytes at {at}", data[:at] + data[at + 16:]),
                  (f"zeroed: 64 bytes at {at}", zeroed(data, at, 64))]
    restarts = [at for at in range(scan_start(data), len(data) - 1)
                if data[at] == 0xFF and 0xD0 <= data[at + 1] <= 0xD7]
    for k in sorted(rng.choice(len(restarts) - 1, 3, replace=False)) if restarts else ():
        at, following = restarts[k], restarts[k + 1]
        renumbered = 0xD0 + (data[at + 1] + 1) % 8
        cases += [(f"restart: marker at {at} renumbered",
                   data[:at + 1] + bytes([renumbered]) + data[at + 2:]),
                  (f"restart: interval at {at} lost", data[:at] + data[following:])]
    return cases


# In a child process, so that a file that crashed libjpeg would fail the test, not kill
# the session: for each file, libjpeg's message from a full strict decode (colour, full
# scale, accurate IDCT: the reference), the writer's check and verify's (None: accepted).
CHECK_CORPUS = """
import json, pickle, sys
import simplejpeg
from tfrecorder.format import image_checks

def full_strict_decode(data, components):
    try:
        simplejpeg.decode_jpeg(data, colorspace={1: "GRAY", 4: "CMYK"}.get(components, "RGB"),
                               strict=True)
    except ValueError as error:
        return str(error).strip()

def writer_check(data, header):
    try:
        image_checks.check_jpeg_data(data, header)
    except image_checks.ImageRejected as error:
        return error.reason

results = []
for data in pickle.load(open(sys.argv[1], "rb")):
    header = image_checks.jpeg_header(data)
    results.append({"full": full_strict_decode(data, header.components),
                    "check": writer_check(data, header),
                    "verify": image_checks.stored_image_problem(data, "jpeg"),
                    "lossless": header.lossless})
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, list[tuple[str, dict]]]:
    """Every source's cases, each with what the full decode and the checks answered."""
    corpus = sources()
    cases = [(name, *case) for name in corpus for case in damaged(name, corpus)]
    path = tmp_path_factory.mktemp("jpeg-check") / "corpus.pickle"
    path.write_bytes(pickle.dumps([data for _, _, data in cases]))
    child = subprocess.run([sys.executable, "-c", CHECK_CORPUS, str(path)],
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
    results: dict[str, list[tuple[str, dict]]] = {name: [] for name in corpus}
    for (name, damage, _), result in zip(cases, json.loads(child.stdout), strict=True):
        results[name].append((damage, result))
    return results


@pytest.mark.parametrize("name", list(sources()))
def test_scaled_check_rejects_exactly_what_a_full_strict_decode_rejects(name, checked):
    cases = checked[name]
    differ = [f"{damage}: full decode {r['full']!r}, check {r['check']!r}"
              for damage, r in cases
              if (r["check"] is None) != (r["full"] is None)
              or r["full"] is not None and not r["check"].endswith(r["full"])]
    assert not differ, "\n".join(differ)
    for damage, result in cases:
        if not result["lossless"]:  # verify's answer for those is the JPEG process
            assert result["verify"] == result["check"], damage
    intact = cases[0][1]
    assert intact["full"] is None and intact["check"] is None
    rejected = {damage.split(":")[0] for damage, r in cases if r["full"] is not None}
    # The corpus is worth checking: every kind of damage is caught somewhere, and most
    # damaged files are (a flipped byte often is not: it may only change a coefficient,
    # which no decoder can tell).
    assert {"cut", "spliced", "lost", "zeroed"} <= rejected, rejected
    assert ("restart" in rejected) == ("restart" in name), rejected
    assert sum(r["full"] is not None for _, r in cases) >= len(cases) // 2


def test_the_corpus_has_the_processes_it_names():
    corpus = sources()
    sofs = {name: jpeg_header(data).sof for name, data in corpus.items()}
    assert sofs["arithmetic (SOF9)"] == sofs["arithmetic, restart markers"] == 0xC9
    assert sofs["arithmetic progressive (SOF10)"] == 0xCA
    assert sofs["progressive"] == sofs["progressive, restart markers"] == 0xC2
    assert sofs["lossless (SOF3)"] == sofs["lossless grey (SOF3)"] == 0xC3
    for name, data in corpus.items():
        assert (b"\xff\xdd" in data[:scan_start(data)]) == ("restart" in name), name


def test_only_dct_jpegs_are_decoded_at_a_reduced_scale(monkeypatch):
    # libjpeg-turbo ignores the scale of a lossless JPEG and overruns simplejpeg's buffer
    # (a segmentation fault): the spy records each decode's scale and refuses that one.
    decode, scaled = simplejpeg.decode_jpeg, []

    def spy(data, **options):
        scaled.append(options.get("min_height", 0) > 0 or options.get("min_width", 0) > 0
                      or options.get("min_factor", 1) > 1)
        if scaled[-1] and jpeg_header(data).lossless:
            raise AssertionError("a lossless JPEG decoded at a reduced scale")
        return decode(data, **options)

    monkeypatch.setattr(simplejpeg, "decode_jpeg", spy)
    corpus = sources()
    lossless = corpus["lossless (SOF3)"]
    inputs = {**corpus,
              "lossless, damaged": zeroed(lossless, scan_start(lossless) + 100, 64),
              "DCT data under a lossless frame": with_sof(photo_jpeg(), 0xC3),
              "arithmetic-coded lossless (SOF11)": with_sof(photo_jpeg(), 0xCB)}
    for name, data in inputs.items():
        is_lossless = jpeg_header(data).lossless
        scaled.clear()
        encode_row(Row(0, "x", "x", None, "train"), ImageOptions(), read=lambda data=data: data)
        assert scaled[:1] == [not is_lossless], name  # the check: its first decode
        scaled.clear()
        problem = stored_image_problem(data, "jpeg")
        if is_lossless:  # TensorFlow cannot decode it: verify need not decode it
            assert scaled == [] and "which TensorFlow cannot decode" in problem, name
        else:
            assert scaled == [True] and problem is None, name


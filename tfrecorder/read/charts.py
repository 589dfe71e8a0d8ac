"""The report's charts: SVG written by hand, of two simple kinds (bars with their numbers,
box plots of the manifest's quartiles), and the escaping every value of the user's data
goes through on its way into the page (`escaped`).

Written by hand, the text in a chart stays text: the numbers can be found, copied, read
by a screen reader and checked by the tests in the browser's DOM; nothing is installed
for them, and the page stays small (docs/performance.md compares the libraries). Apart
from `report`, which composes the page, because drawing a chart is a job of its own.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

from tfrecorder.format.manifest_statistics import Distribution

# One colour per split, from Tableau 10 (told apart by most colour-blind readers).
SPLIT_COLOURS = {"train": "#4e79a7", "validation": "#f28e2b", "test": "#59a14f"}
QUANTITIES = ("min", "q1", "median", "q3", "max", "mean")  # a box plot's, in the tables too
_BAR = 13  # pixels a bar takes, with its gap
_LABEL_CHARS = 28  # longer class names are shortened in charts (the table has them whole)
_PLOT_WIDTH = 560


def bar_chart(classes: Sequence[str], counts: Mapping[str, Mapping[str, int]],
              splits: Sequence[str], title: str = "Records per class and split") -> str:
    """Horizontal bars, a group per class and a bar per split, each with its number: the
    class names, often long, read as rows."""
    label_width = 7 * min(_LABEL_CHARS, max(map(len, classes), default=1)) + 12
    most = max((counts[split][name] for split in splits for name in classes), default=0)
    scale = _PLOT_WIDTH / (most or 1)
    group = _BAR * len(splits) + 8
    top = 28
    parts = [_legend(splits, label_width)]
    for row, name in enumerate(classes):
        y = top + row * group
        parts.append(f'<g class="bars"><title>{escaped(name)}</title>'
                     f'<text x="{label_width - 6}" y="{y + _BAR * len(splits) / 2:.1f}" '
                     f'text-anchor="end" dominant-baseline="middle">'
                     f"{escaped(shortened(name))}</text>")
        for index, split in enumerate(splits):
            count = counts[split][name]
            bar_y, width = y + index * _BAR, count * scale
            parts.append(
                f'<rect x="{label_width}" y="{bar_y}" width="{width:.1f}" '
                f'height="{_BAR - 2}" fill="{SPLIT_COLOURS.get(split, "#888")}">'
                f"<title>{escaped(split)}: {count:,}</title></rect>"
                f'<text class="value" x="{label_width + width + 4:.1f}" '
                f'y="{bar_y + (_BAR - 2) / 2:.1f}" dominant-baseline="middle">{count:,}</text>')
        parts.append("</g>")
    height = top + len(classes) * group
    width = label_width + _PLOT_WIDTH + 60
    return (f'<svg class="chart bar-chart" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><title>{escaped(title)}</title>'
            + "".join(parts) + "</svg>")


def _legend(splits: Sequence[str], x: float) -> str:
    parts = []
    for split in splits:
        parts.append(f'<rect x="{x}" y="4" width="12" height="12" '
                     f'fill="{SPLIT_COLOURS.get(split, "#888")}"/>'
                     f'<text x="{x + 16}" y="10" dominant-baseline="middle">'
                     f"{escaped(split)}</text>")
        x += 30 + 7 * len(split)
    return f'<g class="legend">{"".join(parts)}</g>'


def box_plot(by_split: Mapping[str, Distribution], in_bytes: bool) -> str:
    """A box per split from the manifest's quartiles: whiskers at min and max, the box from
    q1 to q3, a line at the median and a dot at the mean."""
    label_width, row, top = 90, 26, 6
    ticks = _axis(max(d.max for d in by_split.values()), in_bytes)
    scale = _PLOT_WIDTH / ticks[-1][0]
    axis_y = top + len(by_split) * row + 4
    parts = []  # the grid first, under the boxes
    for tick, label in ticks:
        x = label_width + tick * scale
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{axis_y}" '
                     f'stroke="#ddd"/><text x="{x:.1f}" y="{axis_y + 10}" '
                     f'text-anchor="middle">{label}</text>')
    for index, (split, d) in enumerate(by_split.items()):
        y = top + index * row + row / 2
        x = {q: label_width + getattr(d, q) * scale for q in QUANTITIES}
        numbers = ", ".join(f"{q} {rounded(getattr(d, q))}" for q in QUANTITIES)
        parts.append(
            f'<g class="box"><title>{escaped(split)}: {numbers}</title>'
            f'<text x="{label_width - 6}" y="{y}" text-anchor="end" '
            f'dominant-baseline="middle">{escaped(split)}</text>'
            f'<line x1="{x["min"]:.1f}" x2="{x["max"]:.1f}" y1="{y}" y2="{y}" stroke="#555"/>'
            + "".join(f'<line x1="{x[q]:.1f}" x2="{x[q]:.1f}" y1="{y - 6}" y2="{y + 6}" '
                      f'stroke="#555"/>' for q in ("min", "max"))
            + f'<rect x="{x["q1"]:.1f}" y="{y - 9}" width="{x["q3"] - x["q1"]:.1f}" '
            f'height="18" fill="{SPLIT_COLOURS.get(split, "#888")}" stroke="#333"/>'
            f'<line x1="{x["median"]:.1f}" x2="{x["median"]:.1f}" y1="{y - 9}" '
            f'y2="{y + 9}" stroke="#000" stroke-width="2"/>'
            f'<circle cx="{x["mean"]:.1f}" cy="{y}" r="3" fill="#fff" stroke="#000"/></g>')
    height, width = axis_y + 20, label_width + _PLOT_WIDTH + 40
    return (f'<svg class="chart box-plot" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(parts)}</svg>')


def _axis(maximum: float, in_bytes: bool) -> list[tuple[float, str]]:
    """Ticks (value, label) from 0 to at least `maximum` in round steps of one unit."""
    unit, name = 1, ""
    if in_bytes and maximum >= 1024:
        power = min(3, int(math.log(maximum, 1024)))
        unit, name = 1024 ** power, " " + "KMG"[power - 1] + "B"
    elif in_bytes:
        name = " bytes"
    return [(tick * unit, f"{rounded(tick) if tick >= 1 or not tick else tick:,}{name}")
            for tick in _ticks(maximum / unit)]


def _ticks(maximum: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2 or 5 times a power of ten) up to at least `maximum`."""
    maximum = maximum if maximum > 0 else 1
    rough = maximum / count
    power = 10 ** math.floor(math.log10(rough))
    step = next(power * m for m in (1, 2, 5, 10) if power * m >= rough)
    return [round(step * i, 12) for i in range(math.ceil(maximum / step - 1e-9) + 1)]


def escaped(value) -> str:
    """A value as HTML text: escaped, quotes too, so it is safe in attributes."""
    return html.escape(str(value), quote=True)


def shortened(name: str) -> str:
    return name if len(name) <= _LABEL_CHARS else name[:_LABEL_CHARS - 1] + "…"


def rounded(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 1)

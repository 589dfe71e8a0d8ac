"""`report()`: one HTML file that shows a person what a dataset holds.

The numbers come from the manifest (`info`); three things are read from the dataset
itself: thumbnails per class (`thumbnails`, as `show` lays them out), the image of each
duplicated record, and the first rejected rows (`rejected.csv`). A detection dataset's
boxes are SVG rectangles over its thumbnails, named with their classes; instance and
segmentation masks are drawn into the thumbnails, as `show` draws them. The file stands
alone (images are `data:` URIs, charts inline SVG, no scripts, fonts or links to fetch),
so it opens from a bucket, an e-mail or a machine without network. TensorFlow is never
imported (that alone takes seconds).

The charts are SVG written by hand (`tfrecorder.read.charts`, which says why). Every value
from the user's data (class and file names, URIs, reasons, options) reaches the page
through `charts.escaped` (`html.escape`, quotes too): tables escape each cell themselves,
so no value can open a tag or an attribute.
"""

from __future__ import annotations

import base64
import io
import itertools
import os
from collections.abc import Iterable, Mapping, Sequence

from tfrecorder.format.manifest_statistics import TINY_BOX_FRACTION, TINY_BOX_PIXELS, Duplicate
from tfrecorder.read.charts import (
    QUANTITIES,
    bar_chart,
    box_plot,
    escaped,
    rounded,
    shortened,
)
from tfrecorder.read.info import MIN_BOXES_PER_CLASS, DatasetInfo, box_areas, info
from tfrecorder.storage import fs
from tfrecorder.wording import byte_unit, count

# A chart of more classes is too long to read; the table below it holds them all.
CHART_CLASSES = 50
REJECTED_ROWS = 100
DUPLICATE_GROUPS = 50
_JPEG_QUALITY = 85  # a 96-pixel thumbnail: 4 KB as JPEG, 17 KB as PNG


def report(path: str | os.PathLike, output: str | os.PathLike = "report.html", *,
           per_class: int = 8, thumbnail_size: int = 96) -> str:
    """Writes one self-contained HTML file describing the dataset in `path` (a folder or
    a bucket URI) to `output` (a local path or a bucket URI), and returns `output`.

    The page shows the warnings first, then records per class and split (a chart and a
    table; objects, for detection), a detection dataset's boxes (per image, their sizes),
    image sizes, formats and channels, `per_class` thumbnails of each class of the train
    split (or the first split) with their boxes and masks drawn, the rejected rows with
    their reasons, the images stored more than once (leaks between splits marked), and
    the options the dataset was written with.
    """
    dataset = info(path)
    output = os.fspath(output)
    fs.write_bytes(output, render(dataset, per_class, thumbnail_size).encode())
    return output


def render(dataset: DatasetInfo, per_class: int = 8, thumbnail_size: int = 96) -> str:
    """The report's HTML."""
    sections = [
        ("class-counts", f"{dataset.counted.capitalize()} per class and split",
         _class_counts(dataset)),
        *([("objects", "Boxes", _objects(dataset))] if dataset.objects else []),
        ("image-statistics", "Image sizes, formats and channels", _image_statistics(dataset)),
        ("thumbnails", "Thumbnails", _thumbnails(dataset, per_class, thumbnail_size)),
        ("rejected", "Rejected rows", _rejected(dataset)),
        ("duplicates", "Duplicates and leaks", _duplicates(dataset, thumbnail_size)),
        ("options", "Options", _options(dataset)),
    ]
    nav = " · ".join(f'<a href="#{key}">{title}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{title}</h2>{content}</section>'
                   for key, title, content in sections)
    name = fs.basename(dataset.path.rstrip("/")) or dataset.path
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>tfrecorder report: {escaped(name)}</title><style>{_STYLE}</style></head>"
            f"<body>{_summary(dataset)}<nav>{nav}</nav>{body}</body></html>\n")


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;
color:#222}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.2em .6em;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}
div#warnings{background:#fff4e5;border-left:6px solid #e67e22;padding:.5em 1em;margin:1em 0}
div#warnings h2{border:0;margin:0;color:#a04000}
svg text{font-size:11px;fill:#222}
.grid{display:flex;flex-wrap:wrap;gap:8px}
figure{margin:0;display:grid;align-items:center;justify-items:start}
figure>img,figure>svg.objects{grid-area:1/1}
figcaption{font-size:11px;overflow-wrap:anywhere;align-self:start}
svg.objects{overflow:visible}
svg.objects text{font-size:9px;fill:#fff}
.duplicate{display:flex;gap:1em;align-items:flex-start;border-top:1px solid #eee;
padding:.5em 0}
.mark{background:#c0392b;color:#fff;border-radius:3px;padding:0 .4em;margin-right:.4em}
.note{color:#555}
.swatch{display:inline-block;width:12px;height:12px;border:1px solid;
vertical-align:middle;margin:0 4px 0 12px}
"""


# --- sections ------------------------------------------------------------------------------

def _summary(dataset: DatasetInfo) -> str:
    """What the dataset is, and the warnings first: they are what a person must act on."""
    splits = ", ".join(f"{name} {split.num_records:,} ({count(len(split.shards), 'shard')}, "
                       f"{_size(split.num_bytes)})" for name, split in dataset.splits.items())
    if dataset.labels is None:
        classes = "no labels"
    else:
        classes = f"{len(dataset.class_names):,}" + (" (multi-label)" * dataset.multi_label)
    rejected = dataset.rejected.num_rows if dataset.rejected else 0
    facts = [("dataset", dataset.path), ("records", f"{dataset.num_records:,}"),
             *([("task", dataset.task)] if dataset.task != "classification" else []),
             ("splits", splits or "none"), ("classes", classes),
             ("features", ", ".join(dataset.features)), ("rejected rows", f"{rejected:,}"),
             ("written by", dataset.manifest.created_by or "unknown")]
    described = "".join(f"<dt>{key}</dt><dd>{escaped(value)}</dd>" for key, value in facts)
    warnings = dataset.warnings
    if warnings:
        items = "".join(f"<li>{escaped(warning)}</li>" for warning in warnings)
        warned = (f'<div id="warnings"><h2>{count(len(warnings), "warning")}'
                  f"</h2><ul>{items}</ul></div>")
    else:
        warned = '<p id="warnings">No warnings.</p>'  # plain: the box is for warnings
    return f'<header id="summary"><h1>Dataset report</h1><dl>{described}</dl>{warned}</header>'


def _class_counts(dataset: DatasetInfo) -> str:
    if dataset.labels is None:
        return "<p>The dataset has no labels.</p>"
    counts = {split: {name: found.get(name, 0) for name in dataset.class_names}
              for split, found in dataset.class_counts.items()}
    splits = list(counts)
    if not splits:
        return "<p>The manifest holds no counts (written before tfrecorder kept them).</p>"
    totals = {name: sum(counts[split][name] for split in splits)
              for name in dataset.class_names}
    charted = _largest(totals, CHART_CLASSES)
    note = ""
    if len(charted) < len(totals):
        note = (f'<p class="note">The chart shows the {len(charted)} largest of '
                f"{len(totals):,} classes; the table holds them all.</p>")
    chart = bar_chart(charted, counts, splits, f"{dataset.counted.capitalize()} per "
                       "class and split")
    rows = [[name, *(counts[split][name] for split in splits), totals[name]]
            for name in dataset.class_names]
    objects = dataset.objects
    if objects:
        unlabeled = [objects[split].unlabeled_boxes if split in objects else 0
                     for split in splits]
        if any(unlabeled):
            rows.append(["(no class)", *unlabeled, sum(unlabeled)])
        boxes = [objects[split].num_boxes if split in objects else 0 for split in splits]
        rows.append(["all objects", *boxes, sum(boxes)])
    else:
        unlabeled = [dataset.statistics[split].unlabeled for split in splits]
        if any(unlabeled):
            rows.append(["(no label)", *unlabeled, sum(unlabeled)])
    rows.append([f"all {'images' if objects else 'records'}",
                 *(dataset.splits[split].num_records for split in splits),
                 sum(dataset.splits[split].num_records for split in splits)])
    if objects:
        note_multi = ('<p class="note">Objects are boxes: an image counts once for each of '
                      "its boxes.</p>")
    elif dataset.multi_label:
        note_multi = '<p class="note">A record counts once for each of its labels.</p>'
    else:
        note_multi = ""
    return (note + chart + note_multi
            + _table(["class", *splits, "all splits"], rows, key="class-table"))


def _largest(totals: Mapping[str, int], count: int) -> list[str]:
    """The `count` largest classes, in the vocabulary's order if that is all of them."""
    if len(totals) <= count:
        return list(totals)
    return sorted(totals, key=lambda name: -totals[name])[:count]


def _image_statistics(dataset: DatasetInfo) -> str:
    statistics = {split: s for split, s in dataset.statistics.items() if s.image_height}
    if not statistics:
        return "<p>The dataset stores no images (or the manifest holds no statistics).</p>"
    parts = []
    for title, name, unit in [("Height", "image_height", "pixels"),
                              ("Width", "image_width", "pixels"),
                              ("Stored size", "image_bytes", "bytes")]:
        by_split = {split: getattr(s, name) for split, s in statistics.items()}
        parts.append(f"<h3>{title} ({unit})</h3>" + box_plot(by_split, unit == "bytes"))
        rows = [[split, *(rounded(getattr(d, q)) for q in QUANTITIES)]
                for split, d in by_split.items()]
        parts.append(_table(["split", *QUANTITIES], rows, key=f"{name}-table"))
    formats = sorted({f for s in statistics.values() for f in s.image_formats})
    channels = sorted({c for s in statistics.values() for c in s.image_channels})
    rows = [[split, *(s.image_formats.get(f, 0) for f in formats),
             *(s.image_channels.get(c, 0) for c in channels)]
            for split, s in statistics.items()]
    parts.append("<h3>Formats and channels (records)</h3>" + _table(
        ["split", *formats, *(count(c, "channel") for c in channels)], rows,
        key="formats-table"))
    return "".join(parts)


def _objects(dataset: DatasetInfo) -> str:
    """A detection dataset's boxes: per image, their sizes (box plots and tables), by
    COCO's area classes, the images holding each class, and what a person should check
    (images without boxes, boxes without a class, tiny boxes)."""
    objects = dataset.objects
    parts = []
    per_image = {split: s.boxes_per_image for split, s in objects.items()}
    parts.append("<h3>Boxes per image</h3>" + box_plot(per_image, False))
    parts.append(_table(["split", *QUANTITIES],
                        [[split, *(rounded(getattr(d, q)) for q in QUANTITIES)]
                         for split, d in per_image.items()], key="boxes-per-image-table"))
    sizes = {split: s.box_size for split, s in objects.items() if s.box_size is not None}
    if sizes:
        parts.append(
            "<h3>Box size (fraction of the image's side)</h3>"
            '<p class="note">A box\'s size is the square root of its area over the '
            "image's: the side of a square as large, as a fraction of the image's "
            "side.</p>" + box_plot(sizes, False))
        parts.append(_table(["split", *QUANTITIES],
                            [[split, *(round(getattr(d, q), 4) for q in QUANTITIES)]
                             for split, d in sizes.items()], key="box-size-table"))
    areas = {split: box_areas(s) for split, s in objects.items()}
    names = list(next(iter(areas.values())))
    parts.append('<h3>Boxes by area (pixels of the stored image, COCO\'s classes)</h3>'
                 + _table(["split", *names], [[split, *found.values()]
                                              for split, found in areas.items()],
                          key="box-areas-table"))
    checks = [[split, s.without_boxes, s.unlabeled_boxes, s.all_unlabeled, s.tiny_boxes]
              for split, s in objects.items()]
    parts.append(
        "<h3>To check</h3>"
        f'<p class="note">Tiny: an edge under {TINY_BOX_FRACTION:.0%} of the image\'s '
        f"side or under {TINY_BOX_PIXELS} pixels, the least AutoML object detection "
        "trains on.</p>" + _table(["split", "images without boxes", "boxes without a class",
                                   "images whose boxes all lack a class", "tiny boxes"],
                                  checks, key="box-checks-table"))
    images = dataset.class_images
    splits = list(images)
    rows = [[name, *(images[split].get(name, 0) for split in splits)]
            for name in dataset.class_names]
    parts.append(f'<h3>Images holding each class</h3><p class="note">A class with fewer '
                 f"than {MIN_BOXES_PER_CLASS} boxes in train is warned of.</p>"
                 + _table(["class", *splits], rows, key="class-images-table"))
    return "".join(parts)


def _thumbnails(dataset: DatasetInfo, per_class: int, size: int) -> str:
    if not dataset.manifest.has_images and dataset.manifest.media is None:
        return "<p>The dataset stores no images.</p>"
    if not dataset.num_records:
        return "<p>The dataset holds no records.</p>"
    from tfrecorder.read.thumbnails import thumbnails

    split = "train" if "train" in dataset.splits else next(iter(dataset.splits))
    # The chart's classes, so that a thousand classes are not all read (by default all).
    # A clip's boxes' or segments' classes are not rows of clips (`thumbnails.sample`).
    rows_by_class = dataset.manifest.media is None or dataset.counted == "clips"
    counts = dataset.class_counts.get(split, {}) if rows_by_class else {}
    chosen = [name for name in _largest(counts, CHART_CLASSES) if counts[name]] or None
    by_class: dict[str | None, list] = {}
    found = thumbnails(dataset.path, split, per_class, size, classes=chosen)
    for thumbnail in found:
        by_class.setdefault(thumbnail.class_name, []).append(thumbnail)
    note = f"Records of the {escaped(split)} split, in the order the shards hold them"
    if len(dataset.class_names) > CHART_CLASSES:
        note += f"; the {CHART_CLASSES} largest of {len(dataset.class_names):,} classes"
    parts = [f'<p class="note">{note}.</p>']
    for name, found in list(by_class.items())[:CHART_CLASSES]:
        figures = "".join(_figure(thumbnail, size) for thumbnail in found)
        heading = "(no labels)" if name is None else escaped(name)
        parts.append(f'<div class="class-thumbnails"><h3>{heading}</h3>'
                     f'<div class="grid">{figures}</div></div>')
    parts.append(_mask_legend(sorted({class_id for thumbnail in found
                                      for class_id in thumbnail.mask_classes})))
    return "".join(parts)


def _mask_legend(class_ids: list[int]) -> str:
    """A segmentation dataset's mask class ids in the thumbnails, each beside a swatch
    filled and outlined as its masks are drawn (`drawing.draw_masks`); "" for none."""
    if not class_ids:
        return ""
    from tfrecorder.read.drawing import LEGEND_TITLE, edge_colour, mask_colour

    entries = "".join(
        f'<span class="mask-class" data-class-id="{class_id}"><i class="swatch" '
        f'style="background:{mask_colour(class_id)};'
        f'border-color:rgb{edge_colour(mask_colour(class_id))}"></i>{class_id}</span>'
        for class_id in class_ids)
    return f'<p class="note" id="mask-legend">{LEGEND_TITLE.capitalize()} {entries}</p>'


def _figure(thumbnail, size: int) -> str:
    """A thumbnail captioned with its file name (and why it cannot be shown, if not), in
    a column wide enough for a name to wrap in a few lines; a detection record's boxes
    over it. The image is centred in a row `size` pixels high, so that the captions of
    images of any height line up."""
    caption = thumbnail.image_name + (f": {thumbnail.problem}" if thumbnail.problem else "")
    image = thumbnail.image
    boxed = ' class="boxed"' if thumbnail.objects else ""
    return (f'<figure{boxed} style="width:{max(size, 96)}px;grid-template-rows:{size}px '
            f'auto"><img src="{_image_uri(image)}" '
            f'width="{image.width}" height="{image.height}" '
            f'alt="{escaped(thumbnail.image_name)}">'
            + _boxes_svg(thumbnail.objects, image.width, image.height)
            + f"<figcaption>{escaped(caption)}</figcaption></figure>")


def _boxes_svg(objects, width: int, height: int) -> str:
    """An SVG the size of a thumbnail, over it: each box a rectangle in its class's
    colour (`drawing.class_colour`), at its relative corners times the thumbnail's size,
    with the class's name on a tag of that colour at its top left corner."""
    if not objects:
        return ""
    boxes, tags = [], []
    for box in objects:
        x, y = box.xmin * width, box.ymin * height
        w, h = (box.xmax - box.xmin) * width, (box.ymax - box.ymin) * height
        name = "" if box.class_name is None else escaped(box.class_name)
        boxes.append(f'<rect class="box" x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" '
                     f'height="{h:.2f}" fill="none" stroke="{box.colour}" '
                     f'stroke-width="1.5" data-class="{name}"><title>{name or "no class"}'
                     "</title></rect>")
        if name:
            top = y - 11 if y >= 11 else y
            shown = shortened(box.class_name)
            tags.append(f'<g class="tag"><rect x="{x:.2f}" y="{top:.2f}" '
                        f'width="{5.5 * len(shown) + 4:.1f}" height="11" '
                        f'fill="{box.colour}"/><text x="{x + 2:.2f}" y="{top + 8.5:.2f}">'
                        f"{escaped(shown)}</text></g>")
    return (f'<svg class="objects" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(boxes)}{"".join(tags)}</svg>')


def _rejected(dataset: DatasetInfo) -> str:
    rejected = dataset.rejected
    if rejected is None or not rejected.num_rows:
        return "<p>No rows were rejected.</p>"
    reasons = _table(["reason", "rows"], list(rejected.reasons.items()), key="reasons-table")
    head, *rows = _rejected_rows(fs.join(dataset.path, rejected.file), REJECTED_ROWS)
    listed = _table(head, rows, key="rejected-table")
    if rejected.num_rows > len(rows):
        listed += (f'<p class="note">and {count(rejected.num_rows - len(rows), "more row")}'
                   f": see {escaped(rejected.file)}</p>")
    return (f"<p>{count(rejected.num_rows, 'row')} of the table were not written; "
            f"{escaped(rejected.file)} holds them as given, with the reason.</p>"
            + reasons + listed)


def _rejected_rows(uri: str, limit: int) -> list[list[str]]:
    """The header and first `limit` rows of rejected.csv: the row, the image and label as
    given (if the table named them so) and the reason (the last column), as text."""
    import pandas as pd

    with fs.open_read(uri) as file:
        rows = pd.read_csv(file, dtype=str, keep_default_na=False, nrows=limit)
    columns = list(rows.columns)
    shown = [columns[0], *(c for c in ("image_uri", "split", "label") if c in columns[1:-1]),
             columns[-1]]
    return [shown, *rows[shown].values.tolist()]


def _duplicates(dataset: DatasetInfo, size: int) -> str:
    if not dataset.duplicates_checked:
        return "<p>The dataset was written before tfrecorder sought duplicates.</p>"
    duplicates = dataset.duplicates
    if not duplicates:
        return "<p>No image is stored more than once.</p>"
    shown = duplicates[:DUPLICATE_GROUPS]
    images = _stored_images(dataset, shown, size)
    parts = [f"<p>{count(len(duplicates), 'image')} stored more than once: "
             f"{len(dataset.leaks):,} in more than one split (leaks), "
             f"{len(dataset.label_conflicts):,} under different labels.</p>"]
    for duplicate in shown:
        marks = ""
        if duplicate.is_leak:
            splits = " and ".join(map(str, duplicate.splits))
            marks += f'<span class="mark leak">leak: in {splits}</span>'
        if duplicate.has_conflicting_labels:
            marks += '<span class="mark conflict">conflicting labels</span>'
        rows = [[str(copy.row), copy.image_uri, str(copy.split), _label(copy.label),
                 "kept" if copy.kept else "dropped"] for copy in duplicate.copies]
        image = images.get(duplicate.digest)
        digest = escaped(duplicate.digest)
        picture = f'<img src="{image}" alt="image {digest}">' if image else ""
        parts.append(
            f'<div class="duplicate" data-digest="{digest}">{picture}<div>'
            f"{marks}" + _table([duplicate.copies[0].row_word, "image_uri", "split", "label",
                                 "stored"], rows)
            + "</div></div>")
    if len(duplicates) > len(shown):
        parts.append(f'<p class="note">and {len(duplicates) - len(shown):,} more; '
                     "`tfrecorder info --json` lists them all.</p>")
    return "".join(parts)


def _label(label) -> str:
    if label is None:
        return ""
    return ", ".join(label) if isinstance(label, list) else str(label)


def _stored_images(dataset: DatasetInfo, duplicates: Sequence[Duplicate],
                   size: int) -> dict[str, str]:
    """Digest -> thumbnail (a data URI) of each duplicated image, from the record of its
    first copy, read at its position (`reader.SplitDataset`)."""
    if not dataset.manifest.has_images:
        return {}
    # `show`'s thumbnails decode records' images (JPEG at a reduced scale, raw pixels, PNG
    # on white, either layout): one function for both pages.
    from tfrecorder.read.reader import split_dataset
    from tfrecorder.read.thumbnails import record_thumbnail, record_values

    manifest = dataset.manifest
    where = {}  # shard file -> its split, and the position of its first record there
    for split, split_info in manifest.splits.items():
        starts = itertools.accumulate((s.num_records for s in split_info.shards), initial=0)
        where.update({shard.file: (split, start)
                      for shard, start in zip(split_info.shards, starts)})
    class_names = manifest.labels.class_names if manifest.labels is not None else ()
    opened, found = {}, {}
    for duplicate in duplicates:
        split, start = where[duplicate.shard]
        if split not in opened:
            opened[split] = split_dataset(dataset.path, manifest, split, decode=False)
        values = record_values(opened[split][start + duplicate.record], class_names,
                               manifest.task == "detection")
        image, _ = record_thumbnail(values, size)  # or a placeholder
        found[duplicate.digest] = _image_uri(image)
    for records in opened.values():
        records.close()
    return found


def _options(dataset: DatasetInfo) -> str:
    if not dataset.options:
        return "<p>The manifest records no options.</p>"
    # As convert()'s keywords are spelled (None, True, 'auto'), not as JSON stores them.
    rows = [[name, repr(value)] for name, value in dataset.options.items()]
    return _table(["option", "value"], rows, key="options-table")


# --- text and images -----------------------------------------------------------------------

def _table(head: Iterable, rows: Iterable[Iterable], key: str = "") -> str:
    """A table of text and numbers, every cell escaped (numbers right-aligned)."""
    names = "".join(f"<th>{escaped(name)}</th>" for name in head)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{value:,}</td>' if isinstance(value, int | float)
                         else f"<td>{escaped(value)}</td>" for value in row) + "</tr>"
        for row in rows)
    named = f' id="{key}"' if key else ""
    return f"<table{named}><thead><tr>{names}</tr></thead><tbody>{body}</tbody></table>"


def _size(num_bytes: float) -> str:
    unit, name = byte_unit(num_bytes)
    return f"{num_bytes:,.0f} bytes" if unit == 1 else f"{num_bytes / unit:,.1f} {name}"


def _image_uri(image) -> str:
    """A thumbnail as a data URI: JPEG (a quarter of PNG's size), or PNG for an image
    with transparency."""
    if image.mode not in ("RGB", "L"):
        from tfrecorder.read.drawing import png_data_uri

        return png_data_uri(image)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=_JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

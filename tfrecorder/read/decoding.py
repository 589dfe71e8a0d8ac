"""Decoding a parsed record's image, and the annotations drawn on its pixels, with
TensorFlow: to the image size asked for, as cheaply as the manifest allows.

Knowing every image's size makes decoding cheaper: when images are resized on load,
JPEGs are decoded at a reduced DCT scale (1/2, 1/4 or 1/8) whenever the result is still
at least as large as the target, which does the bulk of the downscaling as an average
over pixels and skips part of the IDCT; not the entropy decoding, which every scale pays
and which is most of a decode's work on photos (docs/performance.md has the numbers). The
manifest's statistics also say which image formats a split holds, and the decoders of the
others are left out.

A detection or segmentation record's annotations are decoded with its image: resized
with it (masks by nearest neighbour; relative boxes need nothing).

Apart from `load()`, which assembles the pipeline around it, because `inspect` and
`verify` decode images with the same `decode_image`, and what happens to a record's
pixels on their way to the model (resizing, and crops) grows here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tfrecorder._tensorflow import tensorflow
from tfrecorder.format.layouts import AREA, BBOX, MASK, SEGMENTATION_MASK
from tfrecorder.read.crops import objects_in_window, stored_size


def decode_image(features: dict, channels: int = 0, formats: frozenset[str] | None = None):
    """The record's image as a uint8 [H, W, C] tensor: exactly the source's pixels.

    JPEGs are decoded with the accurate IDCT, which matches Pillow (TensorFlow's default
    fast IDCT is off by a few levels). channels=0 keeps each image's own channels; 1, 3
    or 4 converts. `formats`, the formats the records may hold ("jpeg", "png", "raw";
    None: any), leaves out the others' decoders and the conds that choose among them.
    """
    tf = tensorflow()

    image_format = features["image_format"]

    def jpeg():
        image = tf.io.decode_jpeg(features["image"], channels=channels if channels != 4 else 3,
                                  dct_method="INTEGER_ACCURATE")
        return _convert_channels(image, channels) if channels == 4 else image

    def png():
        return tf.io.decode_png(features["image"], channels=channels)

    def raw():
        pixels = tf.io.decode_raw(tf.io.decode_base64(features["image"]), tf.uint8)
        shape = tf.stack([features["image_height"], features["image_width"],
                          features["image_channels"]])
        return _convert_channels(tf.reshape(pixels, tf.cast(shape, tf.int32)), channels)

    def chosen(decoders: list) -> Callable:
        (name, decode), rest = decoders[0], decoders[1:]
        if not rest:
            return decode
        return lambda: tf.cond(tf.equal(image_format, name), decode, chosen(rest))

    decoders = [(name, decode) for name, decode in [("jpeg", jpeg), ("raw", raw), ("png", png)]
                if not formats or name in formats]
    return chosen(decoders or [("png", png)])()


def decoded_record(features: dict, image_size: Sequence[int] | None, channels: int,
                   formats: frozenset[str] | None = None, window=None,
                   min_visible: float = 0.0, largest_scale: int = 3) -> dict:
    """Decodes (and resizes) one parsed record's image and the annotations drawn on its
    pixels: instance masks to uint8 [n, height, width] and a segmentation mask to uint8
    [height, width, 1], resized by nearest neighbour (so they stay 0/1 and class ids),
    and objects' areas and `image_height` / `image_width` changed to the image as loaded.
    Boxes are relative, so they need nothing.

    With a `window` (`crops`: y, x, height, width of the stored image), only the window
    is decoded and resized to `image_size`; masks are cut to it, and objects to it as
    `crops.objects_in_window` says (those with less than `min_visible` of their box
    inside it are left out). `largest_scale` (`largest_dct_scale`) bounds the DCT
    scales a JPEG may be decoded at."""
    tf = tensorflow()

    features["image"] = _decoded(features, image_size, channels, formats, window,
                                 largest_scale)
    stored = stored_size(features)
    if image_size is not None:  # the sizes describe the pixels handed over
        features["image_height"], features["image_width"] = (
            tf.constant(side, features["image_height"].dtype) for side in image_size)
    if not {MASK, SEGMENTATION_MASK, AREA} & features.keys() and (
            window is None or BBOX not in features):
        return features
    kept = None
    if window is not None:
        window = _window_shown(features, window, image_size, formats, largest_scale)
    if window is not None and BBOX in features:
        features, kept = objects_in_window(features, window, min_visible, stored)
    seen = stored if window is None else window[2:]  # the pixels resized to image_size

    def cut(pixels):  # annotation pixels [..., height, width, channels] to the window
        if window is None:
            return pixels
        return pixels[..., window[0]:window[0] + window[2], window[1]:window[1] + window[3], :]

    if MASK in features:
        masks = _object_masks(features[MASK], stored)
        if kept is not None:
            masks = tf.boolean_mask(masks, kept)
        masks = cut(masks[..., None])[..., 0]
        if image_size is not None:
            masks = _resized_nearest(masks[..., None], image_size)[..., 0]
        features[MASK] = masks
    if SEGMENTATION_MASK in features:
        mask = cut(tf.reshape(tf.io.decode_png(features[SEGMENTATION_MASK], channels=1),
                              tf.concat([stored, [1]], 0)))
        if image_size is not None:
            mask = _resized_nearest(mask, image_size)
        features[SEGMENTATION_MASK] = tf.ensure_shape(mask, [*(image_size or (None, None)), 1])
    if AREA in features and image_size is not None:
        scale = image_size[0] * image_size[1] / tf.cast(tf.reduce_prod(seen), tf.float32)
        features[AREA] = features[AREA] * scale
    return features


def _window_shown(features: dict, window, image_size: Sequence[int],
                  formats: frozenset[str] | None, largest_scale: int = 3):
    """The window of stored pixels that `_decoded` shows for `window`, which boxes and
    masks are cut to, so that they stay on their pixels: a JPEG decoded at a DCT ratio r
    shows whole r x r blocks, from (y // r, x // r), (height // r, width // r) of them,
    which start up to r - 1 pixels and end up to 2r - 2 before the window asked for
    (about a pixel of the image as loaded at r = 8)."""
    tf = tensorflow()

    if image_size is None or (formats and "jpeg" not in formats) or largest_scale == 0:
        return window
    ratio = tf.bitwise.left_shift(1, _dct_scale(window[2], window[3], image_size,
                                                largest_scale))
    return tf.where(tf.equal(features["image_format"], "jpeg"),
                    _scaled_window(window, ratio) * ratio, window)


def _scaled_window(window, ratio):
    """`window` (y, x, height, width) in the pixels of the image decoded at `ratio`:
    whole r x r blocks, at least one."""
    tf = tensorflow()

    return tf.concat([window[:2] // ratio, tf.maximum(window[2:] // ratio, 1)], 0)


def largest_dct_scale(height: float | None, width: float | None,
                      image_size: Sequence[int] | None) -> int:
    """The largest DCT scale (0 to 3) any image of a split can be decoded at for
    `image_size`, from its largest stored `height` and `width` (the manifest's
    statistics; None: not known, any). A window is never larger than its image, so
    where no image is twice the target (photos of ImageNet's size, for 224x224) the
    decode needs no choice of scale, and `_decoded` leaves the choosing out of the graph
    (a function call per image)."""
    if image_size is None or height is None or width is None:
        return 3
    return sum(height >= r * image_size[0] and width >= r * image_size[1] for r in (2, 4, 8))


def _dct_scale(height, width, image_size: Sequence[int], largest_scale: int = 3):
    """The largest DCT scale (int32 0 to `largest_scale`: a ratio of 1/2**scale) whose
    decode of `height` x `width` stored pixels still covers `image_size`."""
    tf = tensorflow()

    short = tf.minimum(tf.cast(height, tf.int64) * image_size[1],
                       tf.cast(width, tf.int64) * image_size[0])
    target = tf.cast(image_size[0] * image_size[1], tf.int64)
    return tf.minimum(tf.reduce_sum(tf.cast(
        tf.stack([short >= 2 * target, short >= 4 * target, short >= 8 * target]), tf.int32)),
        largest_scale)


def _object_masks(pngs, stored):
    """A record's instance masks (one PNG each, drawn at the stored image's size) as uint8
    [n, height, width]; [0, height, width] for a record without objects."""
    tf = tensorflow()

    count = tf.shape(pngs)[0]

    def decoded():
        return tf.map_fn(lambda png: tf.io.decode_png(png, channels=1)[..., 0], pngs,
                         fn_output_signature=tf.TensorSpec([None, None], tf.uint8))

    # map_fn over no element cannot give the shape of one.
    masks = tf.cond(count > 0, decoded, lambda: tf.zeros(tf.concat([[0], stored], 0),
                                                         tf.uint8))
    return tf.ensure_shape(tf.reshape(masks, tf.concat([[count], stored], 0)),
                           [None, None, None])


def _resized_nearest(pixels, image_size: Sequence[int]):
    """Annotation pixels ([..., height, width, channels]) at `image_size`, by nearest
    neighbour: their values stay those of the source (0/1, class ids)."""
    tf = tensorflow()

    return tf.image.resize(pixels, image_size, method="nearest")


def _decoded(features: dict, image_size: Sequence[int] | None, channels: int,
             formats: frozenset[str] | None = None, window=None, largest_scale: int = 3):
    """Decodes (and resizes) one record's image, or its `window` (y, x, height, width in
    stored pixels), cheaply where the manifest allows.

    `formats`, the image formats the records may hold (None: any), leaves the decoders
    of the others out of the graph. With `image_size`, one `switch_case` picks what an
    image takes (a nest of conds costs a function call per level and image):

    - an image at the target size already (image_size= on convert): its exact decode;
    - a PNG or raw image: its exact decode, cut to the window, resized;
    - a JPEG: decoded at the largest DCT scale (1/1, 1/2, 1/4 or 1/8) whose output still
      covers the target (which skips part of the IDCT, and does the bulk of a large
      reduction as an average over pixels), with TensorFlow's default IDCT, then
      resized; a window is cut in the decode (`decode_and_crop_jpeg`: the rows below it
      are not decoded, nor the IDCT outside it done).
    """
    tf = tensorflow()

    formats = formats or None  # none known: any
    if image_size is None:
        image = decode_image(features, channels, formats)
        return tf.ensure_shape(image, [None, None, channels or None])
    height, width = image_size
    if window is not None:
        y, x, window_height, window_width = tf.unstack(window)
    else:
        window_height, window_width = features["image_height"], features["image_width"]

    def exact():
        image = decode_image(features, channels, formats)
        return image if window is None else image[y:y + window_height, x:x + window_width]

    def jpeg(ratio: int):
        jpeg_channels = channels if channels != 4 else 3
        if window is None:
            image = tf.io.decode_jpeg(features["image"], ratio=ratio, channels=jpeg_channels)
        else:
            image = tf.io.decode_and_crop_jpeg(features["image"],
                                               _scaled_window(window, ratio), ratio=ratio,
                                               channels=jpeg_channels)
        return _convert_channels(image, channels) if channels == 4 else image

    def resized(decode: Callable) -> Callable:
        # Bilinear, like Keras: a scaled JPEG decode has already averaged away most of
        # any reduction. Bilinear output of uint8 stays in [0, 255]: +0.5 and a cast round.
        return lambda: tf.cast(tf.image.resize(decode(), image_size) + 0.5, tf.uint8)

    others = formats is None or bool(formats - {"jpeg"})
    ratios = (1, 2, 4, 8)[:largest_scale + 1]
    if window is not None and not others:
        # Only JPEGs and a window (never decoded exactly): the scale chooses the decode
        # alone, and one resize follows (a resize in each branch cost ~30 us an image);
        # with one scale possible, nothing is chosen.
        image = jpeg(1) if len(ratios) == 1 else tf.switch_case(
            _dct_scale(window_height, window_width, image_size, largest_scale),
            [lambda r=r: jpeg(r) for r in ratios])
        return tf.ensure_shape(resized(lambda: image)(), [height, width, channels or None])
    same_size = tf.constant(False) if window is not None else tf.logical_and(
        tf.equal(features["image_height"], height), tf.equal(features["image_width"], width))
    branches = [exact] + ([resized(exact)] if others else [])
    index = tf.where(same_size, 0, 1)
    if formats is None or "jpeg" in formats:
        at_scale = len(branches) + _dct_scale(window_height, window_width, image_size,
                                              largest_scale)
        if others:
            at_scale = tf.where(tf.equal(features["image_format"], "jpeg"), at_scale, 1)
        index = tf.where(same_size, 0, at_scale)
        branches += [resized(lambda r=r: jpeg(r)) for r in ratios]
    image = tf.switch_case(index, branches)
    return tf.ensure_shape(image, [height, width, channels or None])


def _convert_channels(image, channels: int):
    """Converts an image of 1 (L), 2 (LA), 3 (RGB) or 4 (RGBA) channels to `channels`."""
    tf = tensorflow()

    if channels == 0:
        return image
    have = tf.shape(image)[-1]
    grey = have <= 2
    rgb = tf.cond(grey, lambda: tf.image.grayscale_to_rgb(image[..., :1]),
                  lambda: image[..., :3])
    if channels == 3:
        return rgb
    if channels == 1:
        return tf.cond(grey, lambda: image[..., :1], lambda: tf.image.rgb_to_grayscale(rgb))
    opaque = tf.fill(tf.concat([tf.shape(image)[:2], [1]], 0), tf.constant(255, tf.uint8))
    alpha = tf.cond(tf.equal(have % 2, 0), lambda: image[..., -1:], lambda: opaque)
    return tf.concat([rgb, alpha], -1)

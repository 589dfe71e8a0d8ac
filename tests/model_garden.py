"""TensorFlow Model Garden's own record decoders, loaded on their own, for interop tests.

`decode_detection`, `decode_classification` and `decode_segmentation` run Model Garden's
decoders (tf-models-official, pinned in tests/interop.py) on one serialized tf.train.Example
and return numpy values; `detection_eval_groundtruths`, `classification_eval_input` and the
`label` of `decode_segmentation` go one step further, through the parsers that turn decoded
records into a model's inputs, because some of a record's constraints only show there. All
run in graph mode, as in Model Garden's `tf.data` input pipeline: each is a `tf.function`
traced once per configuration.

Loading: the package's `__init__` files import gin, scipy, OpenCV, pycocotools and the training
stack. Three of them stand in the way (`official.core`, `official.vision` and
`official.modeling.optimization`, which imports gin): those packages are registered as empty
modules (their `__init__` is not run); every other file, the decoders' included, is the
package's own, imported unmodified. What the modules import beyond themselves:
`tensorflow`, `tf_keras` (imported by every module, used by none of these: it comes from its
own pinned folder too), `numpy`, `six`, `yaml`, `absl` and `PIL`, from the project's
environment. The segmentation decoder needs the most: `segmentation_input.py` imports its
config module (`official.vision.configs.semantic_segmentation`, for the default
`DenseFeatureConfig` argument), which imports the config dataclasses of `official.core`,
`official.modeling` and `official.vision.configs`. Once loaded, every `official.*` and
`tf_keras.*` entry is taken out of `sys.modules` again and `sys.path` is restored: the loaded
modules keep working through their own references, and the rest of the session's
`import keras`, `tf.keras` (Keras 3) and any other `official` are untouched.

What Model Garden 2.20.0 asks of a record (read from its sources and checked by
tests/test_model_garden.py):

Detection, `official/vision/dataloaders/tf_example_decoder.py` `TfExampleDecoder`:
  Required (`FixedLenFeature` without a default: parsing fails without it):
    image/encoded      bytes: JPEG, PNG or BMP, decoded by `tf.io.decode_image(channels=3)`
                       (gray and RGBA become RGB). NOT WebP or GIF: in the graph the decoder
                       runs in, decode_image gives those a 4-D [1, H, W, 3] array, which the
                       decoder's set_shape([None, None, 3]) does not catch and the parsers
                       then misread (TIFF fails outright).
    image/source_id    bytes; must be present, unless the decoder is built with
                       regenerate_source_id=True (then it is not read). Empty -> replaced by
                       a hash of the encoded image (a decimal string below 2**22).
                       Must be a DECIMAL INTEGER STRING for evaluation: the RetinaNet and
                       Mask R-CNN eval parsers call `utils.process_source_id`, which does
                       `tf.strings.to_number(source_id, tf.int64)` and fails on anything
                       else ("abc", "img_1.jpg", a sha256 hex); the COCO evaluator then uses
                       it as the image id. Keep it unique per image; Model Garden's own
                       fallback stays below 2**22 "since float32 has only 23 mantissa bits".
  Optional, with what happens when absent:
    image/height, image/width   int64, default -1 -> taken from the decoded image. But
                       the area fallback below is computed BEFORE that replacement, so
                       without area AND without height/width the areas come out as
                       (normalized box area) * (-1) * (-1): a fraction, not pixels.
    image/object/bbox/{xmin,ymin,xmax,ymax}   float, normalized to [0, 1] (the parsers
                       call `box_ops.denormalize_boxes` with the image's shape); empty ->
                       no objects. All four lists must have one entry per object.
    image/object/class/label    int64 per object; empty -> no classes. The decoder takes
                       the values as they are, but 0 means background downstream (e.g. the
                       Mask R-CNN mask sampler takes `classes > 0` as foreground and the
                       parsers pad with -1), hence 1-based ids.
    image/object/area  float per object, in pixels; empty -> box area * height * width.
    image/object/is_crowd       int64 per object, cast to bool; empty -> all False.
    image/object/mask  (read only with include_mask=True) bytes per object: a PNG,
                       decoded with `tf.io.decode_png(channels=1, dtype=uint8)` and cast to
                       float32 WITHOUT scaling or thresholding (unless the decoder is built
                       with mask_binarize_threshold, which no config sets). So masks must be
                       8-bit single-channel ("L") PNGs with values 0 and 1, as Model
                       Garden's COCO converter writes (pycocotools' 0/1 arrays through
                       `PIL.Image.fromarray`): a 0/255 mask decodes as 0./255. and feeds 255
                       to the mask loss (a binary cross-entropy on the raw targets); a 1-bit
                       PNG (PIL mode "1") decodes as 0/255 too (libpng widens 1-bit gray to
                       8-bit); palette PNGs are expanded to their colors and then to gray
                       luminance, so palette indices are lost; RGB masks become luminance.
                       Each mask must have the image's height and width (they are stacked).
                       No masks -> an empty [0, height, width] array.
  Not read at all: image/format, image/filename, image/key/sha256,
                       image/object/class/text (only `tf_example_label_map_decoder`, which
                       maps text to ids through a label map, reads it).
  Output (our numpy dict; dtype, shape):
    source_id bytes (scalar), image uint8 [H, W, 3], height int64, width int64,
    groundtruth_classes int64 [N], groundtruth_is_crowd bool [N], groundtruth_area
    float32 [N], groundtruth_boxes float32 [N, 4] as [ymin, xmin, ymax, xmax] (normalized,
    as stored), groundtruth_instance_masks float32 [N, H, W], groundtruth_instance_masks_png
    bytes [N] (object array).

Classification, `classification_input.py` `Decoder`: image/encoded (bytes, default b"") and
  image/class/label (int64 scalar, default -1; a VarLen list when is_multilabel=True).
  Nothing else is read. Output: {"image/encoded": bytes, "image/class/label": int64}. Its
  Parser's defaults (decode_jpeg_only=True with aug_crop=True, the ImageNet configs') read the
  image with `tf.image.extract_jpeg_shape` and `decode_and_crop_jpeg`: a PNG then fails, so
  classification images must be JPEG for a default config (decode_jpeg_only=False reads any).

Semantic segmentation, `segmentation_input.py` `Decoder`: reads image/encoded,
  image/height, image/width (int64, default 0) and image/segmentation/class/encoded (bytes,
  default b""), all with defaults (so the decoder never fails), and returns them undecoded;
  nothing else is read (no image/segmentation/class/format). Its Parser
  (`_prepare_image_and_label`) then decodes the label with `tf.io.decode_image(channels=1)`
  and RESHAPES it to [1, height, width] and the image to [height, width, 3] using the
  height/width features: so both are required in practice and must match the images. The
  label holds class ids per pixel as they are (uint8, ignore_label 255 by default), so an
  8-bit single-channel PNG of ids; a palette PNG would again be turned into gray luminance.
  Output here: the decoder's dict plus "image" (uint8 [H, W, 3]) and "label" (uint8 [H, W]),
  both as that parser decodes them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import tensorflow as tf
from interop import interop_path

# Packages whose __init__ imports what the decoders don't need (gin, the trainers, all of
# the vision tasks); they are registered empty.
_EMPTY_PACKAGES = ("official.core", "official.modeling.optimization", "official.vision")
_MODULES = {
    "decoder": "official.vision.dataloaders.decoder",
    "tf_example_decoder": "official.vision.dataloaders.tf_example_decoder",
    "segmentation_input": "official.vision.dataloaders.segmentation_input",
    "classification_input": "official.vision.dataloaders.classification_input",
    "maskrcnn_input": "official.vision.dataloaders.maskrcnn_input",
    "utils": "official.vision.dataloaders.utils",
    "semantic_segmentation_config": "official.vision.configs.semantic_segmentation",
}
_OURS = ("official", "tf_keras", "orbit", "tensorflow_models")  # top-level names we bring


# Model Garden's COCO tools: its converter (`create_tf_example`) and its evaluator, which
# also import pycocotools (its own pinned folder). `coco_utils` imports `mask_ops`, which
# imports OpenCV (`cv2`) to paste predicted masks into images: no wheel here brings it,
# and box evaluation never calls it, so `cv2` is an empty module while they load.
_COCO_MODULES = {
    "create_coco_tf_record": "official.vision.data.create_coco_tf_record",
    "coco_evaluator": "official.vision.evaluation.coco_evaluator",
}


@functools.cache
def model_garden() -> types.SimpleNamespace:
    """Model Garden's data-loader modules (`_MODULES`' keys), loaded once per session."""
    return _loaded(_MODULES, [interop_path("tf-models-official"), interop_path("tf-keras")])


@functools.cache
def coco_tools() -> types.SimpleNamespace:
    """Model Garden's COCO converter and evaluator (`_COCO_MODULES`' keys), loaded once."""
    return _loaded(_COCO_MODULES, [interop_path("tf-models-official"),
                                   interop_path("tf-keras"), interop_path("pycocotools")],
                   empty=("cv2",))


def _loaded(modules: dict, folders: list, empty: tuple = ()) -> types.SimpleNamespace:
    """`modules` imported from `folders` (module doc), with the top-level modules `empty`
    registered empty while they load."""
    saved_path = list(sys.path)
    shadowed = {n: m for n, m in sys.modules.items() if _is_ours(n, m, folders)}
    for name in shadowed:  # an installed `official` or tf_keras must not be the one used
        del sys.modules[name]
    sys.path[:0] = [str(f) for f in folders]
    stand_ins = {name: types.ModuleType(name) for name in empty if name not in sys.modules}
    sys.modules.update(stand_ins)
    try:
        for name in _EMPTY_PACKAGES:
            _empty_package(name, folders[0])
        loaded = {key: importlib.import_module(name) for key, name in modules.items()}
    finally:
        for name in stand_ins:
            del sys.modules[name]
        sys.path[:] = saved_path
        for name in [n for n, m in sys.modules.items() if _is_ours(n, m, folders)]:
            del sys.modules[name]
        sys.modules.update(shadowed)
        importlib.invalidate_caches()
    return types.SimpleNamespace(**loaded, folders=folders)


def _is_ours(name: str, module, folders) -> bool:
    if name.partition(".")[0] in _OURS:
        return True
    file = getattr(module, "__file__", None) or ""
    return any(file.startswith(str(f)) for f in folders)


def _empty_package(name: str, site: Path) -> None:
    """Registers package `name` (its parent imported normally) without running its __init__."""
    parent, _, child = name.rpartition(".")
    folder = site.joinpath(*name.split("."))
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)  # not executed: an empty package
    sys.modules[name] = module
    setattr(importlib.import_module(parent), child, module)


_RECORD = tf.TensorSpec([], tf.string)


def _graph(fn):
    """`fn` of one serialized record as a graph function, as in Model Garden's `tf.data` map
    (traced once; the callers cache it per configuration)."""
    return tf.function(fn, input_signature=[_RECORD], autograph=False)


def _run(fn, serialized: bytes):
    return tf.nest.map_structure(lambda t: t.numpy(), fn(tf.constant(serialized, tf.string)))


@functools.cache
def _detection_decoder(**decoder_kwargs):
    return _graph(model_garden().tf_example_decoder.TfExampleDecoder(**decoder_kwargs).decode)


def decode_detection(serialized: bytes, **decoder_kwargs) -> dict:
    """`TfExampleDecoder(include_mask=True, **decoder_kwargs).decode`, as numpy (module doc)."""
    return _run(_detection_decoder(**{"include_mask": True, **decoder_kwargs}), serialized)


@functools.cache
def _detection_eval_parser(output_size):
    mg = model_garden()
    decoder = mg.tf_example_decoder.TfExampleDecoder(include_mask=True)
    parser = mg.maskrcnn_input.Parser(
        output_size=list(output_size), min_level=2, max_level=2, num_scales=1,
        aspect_ratios=[1.0], anchor_size=2.0, include_mask=True, mask_crop_size=28)
    parse = parser.parse_fn(is_training=False)
    return _graph(lambda s: parse(decoder.decode(s))[1]["groundtruths"])


def detection_eval_groundtruths(serialized: bytes, *, output_size=(32, 32)) -> dict:
    """The groundtruths Model Garden's Mask R-CNN eval parser makes of the decoded record.

    The decoded record goes through `maskrcnn_input.Parser._parse_eval_data` (what RetinaNet's
    eval does with the boxes and source_id too): source_id becomes an int64 through
    `process_source_id`, boxes are denormalized to pixels of the original image, every
    per-object tensor is padded to 100 objects with -1, masks are cropped to their boxes and
    resized to 28x28. Returns the `groundtruths` dict as numpy.
    """
    return _run(_detection_eval_parser(tuple(output_size)), serialized)


def process_source_id(source_id: bytes) -> int:
    """Model Garden's `utils.process_source_id` (raises for a non-numeric source id)."""
    return int(model_garden().utils.process_source_id(tf.constant(source_id)).numpy())


@functools.cache
def _classification_decoder(**decoder_kwargs):
    return _graph(model_garden().classification_input.Decoder(**decoder_kwargs).decode)


def decode_classification(serialized: bytes, **decoder_kwargs) -> dict:
    """`classification_input.Decoder(**decoder_kwargs).decode`, as numpy, plus "image"
    (uint8 [H, W, 3], `tf.io.decode_image(channels=3)` of image/encoded)."""
    out = _run(_classification_decoder(**decoder_kwargs), serialized)
    out["image"] = tf.io.decode_image(out["image/encoded"], channels=3).numpy()
    return out


@functools.cache
def _classification_eval_parser(output_size, decode_jpeg_only):
    mg = model_garden()
    decoder = mg.classification_input.Decoder()
    parser = mg.classification_input.Parser(
        output_size=list(output_size), num_classes=1001, decode_jpeg_only=decode_jpeg_only)
    parse = parser.parse_fn(is_training=False)
    return _graph(lambda s: parse(decoder.decode(s)))


def classification_eval_input(serialized: bytes, *, output_size=(32, 32),
                              decode_jpeg_only: bool = True) -> tuple[np.ndarray, int]:
    """(image, label) from the classification Parser's eval path, defaults as in the
    ImageNet configs (decode_jpeg_only=True: center crop of the JPEG, resize, normalize)."""
    image, label = _run(_classification_eval_parser(tuple(output_size), decode_jpeg_only),
                        serialized)
    return image, int(label)


@functools.cache
def _segmentation_decoder():
    mg = model_garden()
    decoder = mg.segmentation_input.Decoder()
    # mean 0 and stddev 1 make the parser's normalization the identity: pixel values back.
    feature = mg.semantic_segmentation_config.DenseFeatureConfig(
        mean=[0.0, 0.0, 0.0], stddev=[1.0, 1.0, 1.0])
    parser = mg.segmentation_input.Parser(output_size=[8, 8], image_feature=feature)

    def decode(s):
        decoded = decoder.decode(s)
        image, label = parser._prepare_image_and_label(decoded)
        return decoded, image, label

    return _graph(decode)


def decode_segmentation(serialized: bytes) -> dict:
    """`segmentation_input.Decoder().decode`, as numpy, plus "image" and "label" as its
    Parser's `_prepare_image_and_label` decodes them (module doc)."""
    decoded, image, label = _run(_segmentation_decoder(), serialized)
    decoded["image"] = np.round(image).astype(np.uint8)
    decoded["label"] = label[0].astype(np.uint8)
    return decoded

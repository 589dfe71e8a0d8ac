"""MediaPipe's MediaSequence module (`mediapipe/util/sequence/media_sequence.py`), loaded on
its own, for interop tests of video and audio records.

MediaSequence defines the keys and types of the records (what `tfrecorder.format.
media_sequence` writes): its getters read them, its setters build them. It is pure Python
over TensorFlow (`media_sequence_util` imports `tensorflow.compat.v1`), but the `mediapipe`
package's `__init__` imports MediaPipe's whole C++ framework and its solutions (OpenCV,
matplotlib, sounddevice, ...). So the two files are loaded from the pinned wheel's folder
(tests/interop.py) under their own names, with `mediapipe`, `mediapipe.util` and
`mediapipe.util.sequence` registered as empty packages while they load (their `__init__` is
not run); the files themselves run unmodified. Afterwards those entries leave `sys.modules`
again: the loaded module keeps working through its own references.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import types

from interop import interop_path

_PACKAGES = ("mediapipe", "mediapipe.util", "mediapipe.util.sequence")
_MODULES = ("media_sequence_util", "media_sequence")


@functools.cache
def media_sequence() -> types.ModuleType:
    """MediaPipe's `media_sequence` module, with its getters and setters."""
    folder = interop_path("mediapipe") / "mediapipe" / "util" / "sequence"
    saved = {name: sys.modules.get(name)
             for name in (*_PACKAGES, *(f"mediapipe.util.sequence.{m}" for m in _MODULES))}
    try:
        for name, path in zip(_PACKAGES, (folder.parents[1], folder.parents[0], folder)):
            package = types.ModuleType(name)
            package.__path__ = [str(path)]
            sys.modules[name] = package
        loaded = None
        for module in _MODULES:
            name = f"mediapipe.util.sequence.{module}"
            spec = importlib.util.spec_from_file_location(name, folder / f"{module}.py")
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[name] = loaded
            setattr(sys.modules["mediapipe.util.sequence"], module, loaded)
            spec.loader.exec_module(loaded)
        return loaded
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

"""`tfrecorder.manifest`, where docs/reading.md's recipes (tf.data without tfrecorder's
loader) import `read_manifest` and `Manifest` from: public names, kept at this path
while the manifest itself lives in `format/manifest.py`."""

from tfrecorder.format.manifest import Manifest, read_manifest

__all__ = ["Manifest", "read_manifest"]

"""The on-disk format, the contract both sides share: the manifest and its statistics
sections, record layouts, the Example wire format, TFRecord framing, TFDS's metadata,
split names, label maps, keypoint names and what a valid stored image is. It imports
nothing of `sources/`, `write/`, `read/` or `legacy/`, so either side can change
without touching the other (tests/test_imports.py)."""

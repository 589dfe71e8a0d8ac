"""The read side: `load()` (tf.data), `open_split()` (without TensorFlow, for PyTorch and
Grain), `verify`, `inspect`, `info`, `show` and `report`. It reads what `format/`
defines, and imports nothing of `sources/` or `write/`: reading a dataset needs no
Pillow-heavy planning, and the two sides change independently."""

"""The write side: `convert()`, the plan, encoding a row into a record, the two engines
that run the same plan, and the finish step that commits a dataset. It reads tables
from `sources/` and writes what `format/` defines; `read/` never imports it."""

"""Parquet files, or folders of them (`part-*.parquet`, as pandas and Spark write, or in
hive partitions such as `split=TRAIN/`), with their column types: ints stay ints, a list
column holds an array per cell, a dictionary column is a pandas Categorical.

pandas reads Parquet with pyarrow, imported here only where a file is read: `import
tfrecorder` stays fast.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pandas as pd

from tfrecorder.errors import Option, OptionError, SchemaError
from tfrecorder.options import TableOptions
from tfrecorder.sources import chunked
from tfrecorder.sources.table import Table
from tfrecorder.storage import fs


def claims(path: str, folder: bool) -> bool:
    """A file or folder named `.parquet` or `.pq`, or a folder of Parquet files."""
    return has_parquet_name(path) or (folder and is_parquet_folder(path))


def read(path: str, base_dir: str, options: TableOptions) -> Table:
    """The file's or folder's table."""
    return chunked.read_whole_or_in_chunks(
        path, base_dir, options, text_numbers=False,
        whole=lambda: read_parquet(path, options.header),
        chunks=lambda rows: chunks(path, options.header, rows))


# pandas reads Parquet with pyarrow, imported here only: `import tfrecorder` stays fast.

_PARQUET_EXTENSIONS = (".parquet", ".pq")
_HIVE_PART = re.compile(r"^[^=/]+=[^/]*/?$")  # a partition folder: `column=value`


def has_parquet_name(path: str) -> bool:
    """`.parquet` or `.pq` in any case: a file, or a folder as Spark names its output."""
    return path.rstrip("/").lower().endswith(_PARQUET_EXTENSIONS)


def _hidden(parts: list[str]) -> bool:
    """Names pyarrow skips in a dataset folder: `.crc` files, Spark's `_SUCCESS`."""
    return any(part.startswith((".", "_")) for part in parts)


def is_partition(name: str) -> bool:
    """A hive partition folder's name: `column=value`."""
    return bool(_HIVE_PART.match(name))


def partition_folders(root: str) -> bool:
    """Whether a folder holds hive partition folders (`split=TRAIN/`, as
    df.to_parquet(partition_cols=) and Spark's partitionBy write them) and, beside hidden
    names, nothing else directly inside."""
    folders = [name for name in fs.list_dir(root, folders=True) if not _hidden([name])]
    return bool(folders) and all(map(is_partition, folders))


def visible_files(root: str) -> Iterator[str]:
    """Every file below a dataset folder that pyarrow reads: none in a hidden folder, or
    hidden itself."""
    remote = fs.is_remote(root)
    prefix = root.rstrip("/") if remote else root
    for uri in fs.list_files(root):
        if not _hidden(uri[len(prefix):].strip("/").split("/" if remote else os.sep)):
            yield uri


def is_parquet_folder(root: str) -> bool:
    """Whether a folder is a Parquet dataset: named so, or holding Parquet files directly
    inside (one listing; an image folder holds label folders there).

    Raises:
        SchemaError: for Parquet files beside other files: neither a dataset nor an
            image folder.
    """
    if has_parquet_name(root):
        return True
    found = [name for name in fs.list_dir(root)
             if not _hidden([name]) and has_parquet_name(name)]
    if not found and partition_folders(root):
        # Hive partitions: a dataset if Parquet files are all there is below.
        found = [uri for uri in fs.list_files(root) if has_parquet_name(uri)][:1]
    if not found:
        return False
    for uri in visible_files(root):
        if not has_parquet_name(uri):
            raise SchemaError(
                f"the folder {root!r} holds Parquet files (e.g. {found[0]!r}) beside other "
                f"files (e.g. {uri!r}), so it is neither a Parquet dataset nor an image "
                "folder. Pass the Parquet file's own path, or move the other files out.")
    return True


@dataclass(frozen=True)
class ParquetFolder:
    """A folder of table files read as one table, listed so that a Beam job's workers
    read it a file each as the local engine reads it whole: its files in the whole
    read's order, and its hive partitioning (each partition field's values over the whole
    folder, as pyarrow discovers them), without which a file read alone would lack the
    partition columns, or their categories. Small: no row.

    A Parquet dataset (`is_parquet_folder`), or CSV or JSONL files in hive partitions
    (`table_files.hive_format`): `format` says which. (The Beam engine knows the class
    by this name.)"""

    root: str
    files: tuple[str, ...]
    fields: tuple[str, ...] = ()  # the partition fields, outermost first
    field_types: tuple[str, ...] = ()  # their Arrow types ("int32", "string")
    dictionaries: tuple[tuple, ...] = ()  # each field's values, in pyarrow's order
    format: str = "Parquet"  # the files' format: "Parquet", "CSV" or "JSONL"

    def _partitioning(self):
        import pyarrow as pa
        import pyarrow.dataset as ds

        if not self.fields:
            return None
        types = [pa.type_for_alias(kind) for kind in self.field_types]
        return ds.HivePartitioning(
            pa.schema([pa.field(name, pa.dictionary(pa.int32(), kind))
                       for name, kind in zip(self.fields, types)]),
            dictionaries={name: pa.array(list(values), kind) for name, values, kind
                          in zip(self.fields, self.dictionaries, types)})

    def partition_columns(self, path: str, num_rows: int) -> pd.DataFrame:
        """The partition columns of a file's `num_rows` rows, typed as pyarrow's hive
        discovery types them for the whole read (Categoricals of every value the folder
        has, of int32 or text values): its folders' `field=value` parsed by pyarrow."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        if not self.fields:
            return pd.DataFrame(index=pd.RangeIndex(num_rows))
        partitioning = self._partitioning()
        below = fs.relative_to(path, self.root.rstrip("/"))
        keys = ds.get_partition_keys(partitioning.parse(below))  # (its last part: the file)
        columns = {}
        for name, values, dictionary in zip(self.fields, self.dictionaries,
                                            partitioning.dictionaries):
            at = values.index(keys[name]) if keys.get(name) is not None else None
            columns[name] = pa.DictionaryArray.from_arrays(
                pa.array([at] * num_rows, pa.int32()), dictionary)
        return pa.table(columns).to_pandas()


def parquet_folder(root: str, format: str = "Parquet") -> ParquetFolder:
    """The files and partitioning of a folder of `format` files read as one table, by
    pyarrow's own discovery (`pq.read_table`'s: hive partitions, their values as
    dictionaries; hidden files skipped): a listing, no file is opened."""
    import pyarrow.dataset as ds
    from pyarrow.fs import FileSelector, LocalFileSystem

    where, filesystem = _parquet_where(root, None)
    filesystem = filesystem or LocalFileSystem()
    where = filesystem.normalize_path(where)
    # Only the paths are inspected (`fragments=0`): the schema found is the partition
    # fields', each with its dictionary. pyarrow never reads these files (CSV and JSONL
    # files are read by `table_files`), so the format told is only what lists them.
    factory = ds.FileSystemDatasetFactory(
        filesystem, FileSelector(where, recursive=True),
        ds.ParquetFileFormat() if format == "Parquet" else ds.CsvFileFormat(),
        ds.FileSystemFactoryOptions(
            partitioning=ds.HivePartitioning.discover(infer_dictionary=True),
            partition_base_dir=where, selector_ignore_prefixes=[".", "_"]))
    dataset = _reading_parquet(root, lambda: factory.finish(factory.inspect(fragments=0)))
    files = tuple(_uri_of(root, path) for path in dataset.files)
    partitioning = dataset.partitioning
    found = [] if partitioning is None else [
        (field, values) for field, values in zip(partitioning.schema,
                                                 partitioning.dictionaries)
        if values is not None]
    return ParquetFolder(
        root, files, tuple(field.name for field, _ in found),
        tuple(str(getattr(field.type, "value_type", field.type)) for field, _ in found),
        tuple(tuple(values.to_pylist()) for _, values in found), format)


def read_folder_file(folder: ParquetFolder, path: str) -> pd.DataFrame:
    """One file of a Parquet folder as the whole read (`read_parquet` of the folder) gives
    its rows: its columns, then the partition fields' columns (Categoricals of every
    value the folder has), with the same types."""
    import pyarrow.dataset as ds

    where, filesystem = _parquet_where(path, None)
    base, _ = _parquet_where(folder.root, None)
    dataset = _reading_parquet(path, lambda: ds.dataset(
        [where], format="parquet", filesystem=filesystem,
        partitioning=folder._partitioning(), partition_base_dir=base))
    return _reading_parquet(path, lambda: dataset.to_table().to_pandas())


def read_file_of_folder(folder: ParquetFolder, path: str, options: TableOptions) -> Table:
    """`read` of one file of `folder`: its rows as the folder's whole read gives them."""
    frame = read_folder_file(folder, path)
    if options.header is not None:
        _parquet_where(path, options.header)  # refused, as for the folder
    return chunked.read_whole_or_in_chunks(
        path, folder.root.rstrip("/"), options, text_numbers=False, whole=lambda: frame,
        chunks=lambda rows: (frame.iloc[start:start + rows]
                             for start in range(0, max(len(frame), 1), rows)))


def _uri_of(root: str, path: str) -> str:
    """A path pyarrow listed under `root` as the store names it (its protocol back)."""
    if not fs.is_remote(root):
        return path
    return f"{fs.protocol(root)}://{path}"


def read_parquet(path: str, header: bool | None) -> pd.DataFrame:
    """A Parquet file, or a folder of them (read in path order), with its column types:
    ints stay ints, a list column holds an array per cell, a dictionary column is a
    pandas Categorical. Remote paths go through `fs`'s file system, as every file does.

    Raises:
        OptionError: for `header`, which only a CSV file takes.
        SchemaError: for a file pyarrow cannot read (not Parquet, cut short), with what
            pyarrow said.
    """
    where, filesystem = _parquet_where(path, header)
    return _reading_parquet(path, lambda: pd.read_parquet(where, engine="pyarrow",
                                                          filesystem=filesystem))


def column_names(path: str) -> list[str]:
    """The columns of a Parquet file or folder, from its schema (no rows are read)."""
    import pyarrow.dataset as ds

    where, filesystem = _parquet_where(path, None)
    return _reading_parquet(path, lambda: ds.dataset(
        where, format="parquet", filesystem=filesystem, partitioning="hive",
        ignore_prefixes=[".", "_"]).schema.names)


def chunks(path: str, header: bool | None, chunk_rows: int
                   ) -> Iterator[pd.DataFrame]:
    """`read_parquet`'s table in frames of about `chunk_rows` rows, read as a stream,
    in the same order and with the same types (a chunk's categoricals have the
    categories found in it)."""
    import pyarrow as pa
    import pyarrow.dataset as ds  # what pandas reads Parquet folders with

    where, filesystem = _parquet_where(path, header)
    dataset = _reading_parquet(path, lambda: ds.dataset(
        where, format="parquet", filesystem=filesystem, partitioning="hive",
        ignore_prefixes=[".", "_"]))
    # One batch read ahead, not pyarrow's 16 (and 4 files), and no pre-buffering of
    # whole row groups: those held 1.4 GB for bench_chunked's 250k-row chunks, against
    # 0.4 GB so.
    batches = iter(_reading_parquet(path, lambda: dataset.to_batches(
        batch_size=chunk_rows, use_threads=False, batch_readahead=1, fragment_readahead=1,
        fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))))
    pending, count, offset = [], 0, 0
    while True:
        batch = _reading_parquet(path, lambda: next(batches, None))
        if batch is not None and batch.num_rows:
            pending.append(batch)
            count += batch.num_rows
        if pending and (batch is None or count >= chunk_rows):
            frame = pa.Table.from_batches(pending, schema=dataset.schema).to_pandas()
            if isinstance(frame.index, pd.RangeIndex):  # row numbers, from the file's start
                frame.index = frame.index + offset
            yield frame
            pending, count, offset = [], 0, offset + count
        if batch is None:
            return


def _parquet_where(path: str, header: bool | None) -> tuple:
    """pyarrow's path and file system for `path`; a `header` is refused."""
    if header is not None:
        raise OptionError(
            f"the source {path!r} is Parquet, which names its own columns: ",
            Option("header", header), " is for CSV files. Leave ", Option("header"),
            " unset.", option="header")
    if fs.is_remote(path):
        return fs.filesystem(path)._strip_protocol(path), _arrow_filesystem(path)
    return path, None


def _reading_parquet(path: str, read: Callable):
    """`read()`, with pyarrow's errors about the data as a SchemaError saying what to do
    (and a store's errors as `fs` reports them)."""
    import pyarrow  # pandas' Parquet engine

    failure = None
    with fs.storage_errors(path):  # a store's errors; pyarrow's are about the data
        try:
            return read()
        except pyarrow.ArrowException as error:
            failure = error  # raised below: inside, it would become a StorageError
    message = " ".join(str(failure).split()) or type(failure).__name__
    raise SchemaError(
        f"the Parquet source {path!r} cannot be read: pyarrow says {message!r}. Check that "
        "each file is a whole Parquet file (a copy cut short, or a file still being "
        "written, lacks its footer), or write it again, e.g. with df.to_parquet(path).")


def _arrow_filesystem(uri: str):
    """pyarrow's view of `fs.filesystem(uri)` that reads each file whole, in one request
    (as `fs.read_bytes` does): the file objects gcsfs opens for pyarrow otherwise leave
    read-ahead tasks behind, and the command line ended with "Task was destroyed but it
    is pending!"."""
    from pyarrow import BufferReader
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    class WholeFiles(FSSpecHandler):
        def open_input_file(self, path: str) -> BufferReader:
            return BufferReader(self.fs.cat_file(path))

    return PyFileSystem(WholeFiles(fs.filesystem(uri)))

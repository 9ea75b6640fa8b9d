"""One cell of a Hugging Face dataset file as a source path: an image's bytes inside a Parquet
or Arrow file, read where it is used.

A sample of a Hub dataset names its image as a path relative to the source root, like any
image file's: `data/train-00000-of-00001.parquet#row=17&column=image`, which the converter's
workers read themselves (no pixels over pipes). Each process keeps the files it opened and the
row groups it read last (up to `KEPT_BYTES` in all), since a Parquet file is read a row group at
a time; `row_groups` tells the pack's plan which rows share one, from the footer, so that it
orders them together. The state of a cell is its file's (size, modification time): the cell
changes only when its file does. Storage's `read_bytes`, `read_with_stat`, `read_head_tail`,
`stat`, `stat_many` and `sha256_file` hand a cell's path here, so header probes, freshness
checks and `verify --sources` treat a cell as a file. Files are read with pyarrow; a file at
a URL by parts (`ranges`): its footer, then each row group's column when a cell of it is read,
fetched once per machine into the local cache whichever worker asks first. A remote file's
state is asked at most once per `STATE_EVERY` seconds per process (a request per row would
cost more than the row); `stat` always asks.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from . import local, ranges, remote
from .url import is_url

_MARK = "#row="  # in every cell's path: paths without it are files, without a regex match
_CELL = re.compile(r"^(?P<file>.+\.(?:parquet|arrow))#row=(?P<row>\d+)&column=(?P<column>[^&#]+)$")
KEPT_BYTES = 512 << 20  # decoded row groups each process keeps, all files together
STATE_EVERY = 10.0  # seconds a remote file's (size, time) is taken as known by a process
_states: dict[str, tuple[float, tuple[int, int] | None]] = {}
_asking = threading.Lock()


def cell_key(file: str, row: int, column: str) -> str:
    """The path of a cell: its file (relative to the source root), row and column."""
    return f"{file}#row={row}&column={column}"


def parse(path: str | os.PathLike) -> tuple[str, int, str] | None:
    """(file, row, column) of a cell's path; None for the path of a plain file."""
    text = os.fspath(path)
    match = _CELL.match(text) if _MARK in text else None
    return None if match is None else (match["file"], int(match["row"]), match["column"])


def is_cell(path: str | os.PathLike) -> bool:
    """Whether a path names a cell of a dataset file rather than a file."""
    return parse(path) is not None


def file_of(path: str) -> str:
    """The file that holds a cell (the path itself for a plain file): what `stat` and
    `stat_many` answer for."""
    cell = parse(path)
    return path if cell is None else cell[0]


def read_with_stat(path: str | os.PathLike) -> tuple[bytes, int, int]:
    """A cell's bytes with its file's size and modification time (taken before the read, as
    for a file)."""
    file, row, column = _parsed(path)
    found = _state(file)
    return _opened(file, *found).value(row, column), *found


def read_bytes(path: str | os.PathLike) -> bytes:
    """A cell's bytes."""
    return read_with_stat(path)[0]


def read_head_tail(path: str | os.PathLike, head: int, tail: int) -> tuple[bytes, bytes]:
    """The first `head` and last `tail` bytes of a cell (read whole: a cell is one value)."""
    data = read_bytes(path)
    return (data, b"") if len(data) <= head + tail else (data[:head], data[-tail:] if tail else b"")


def stat(path: str | os.PathLike) -> tuple[int, int] | None:
    """(size, modification time in ns) of a cell's file: the cell changes only when it does."""
    return _file_stat(_parsed(path)[0])


def sha256(path: str | os.PathLike) -> tuple[int, str]:
    """(length, SHA-256) of a cell's bytes."""
    data = read_bytes(path)
    return len(data), hashlib.sha256(data).hexdigest()


def row_groups(
    root: str | os.PathLike, files: Sequence[str], rows: Sequence[int]
) -> tuple[np.ndarray, list[int]]:
    """Which row group (record batch of an Arrow file) holds each cell, from its file's footer,
    no value read: the pack's plan keeps a row group's rows together. Cells by file (relative
    to `root`) and row, as `parse` gives them. Returns each cell's block, an index into the
    second list: each block's bytes decoded, the blocks in the order the cells first reach
    them."""
    ids: dict[str, int] = {}
    file_ids = np.fromiter((ids.setdefault(f, len(ids)) for f in files), np.int64, len(files))
    opened = [_opened(p, *_state(p)) for p in (os.path.join(root, f) for f in ids)]
    counts = np.array([o.rows for o in opened], np.int64)
    at = np.asarray(rows, np.int64)
    past = at >= counts[file_ids]
    if past.any():
        first = int(np.argmax(past))
        raise OSError(f"row {at[first]} is past the file's {counts[file_ids[first]]} rows")
    # the files' rows end to end: row groups numbered across files, found by one search
    base = np.concatenate([[0], np.cumsum(counts)[:-1]])
    starts = np.concatenate(
        [b + np.asarray(o.starts, np.int64) for b, o in zip(base, opened, strict=True)]
    )
    sizes = [size for o in opened for size in o.sizes]
    groups = np.searchsorted(starts, base[file_ids] + at, "right") - 1
    # blocks numbered in the order of the cells that first reach them
    found, first, block = np.unique(groups, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[block], [sizes[g] for g in found[order].tolist()]


def _file_stat(file: str) -> tuple[int, int] | None:
    """(size, modification time) of a dataset file, asked now; a remote file's is noted."""
    if not is_url(file):
        return local.stat(file)
    found = remote.stat(file)
    _states[file] = (time.monotonic(), found)
    return found


def _state(file: str) -> tuple[int, int]:
    """(size, modification time) of a cell's file, FileNotFoundError when it is missing; a
    remote file's as asked in the last STATE_EVERY seconds, by one thread while the others
    wait (a local one's is never noted: always asked)."""
    if not is_url(file):
        found = local.stat(file)  # a str: a Path built for each cell read costs as much
    else:
        with _asking:
            asked, found = _states.get(file, (-STATE_EVERY, None))
            if time.monotonic() - asked >= STATE_EVERY:
                found = _file_stat(file)
    if found is None:
        raise FileNotFoundError(2, "No such file or directory", file)
    return found


def _parsed(path: str | os.PathLike) -> tuple[str, int, str]:
    cell = parse(path)
    if cell is None:
        raise ValueError(f"{os.fspath(path)} is not the path of a cell")
    return cell


def parquet_reader(
    source: object, kept: bool = False, extensions: bool = False, **options
) -> object:
    """pyarrow's ParquetReader open on `source` (a path or a file object; `options` those of
    its `open`), taken from its own module: `pyarrow.parquet` imports pyarrow's file systems
    too (11 ms of a small pack's planning), which exports it too: taken there if it moves.
    `kept`: its row groups read into the C allocator's memory, not Arrow's default pool
    (mimalloc hands each row group fresh huge pages, which the kernel zeroes: a fifth of a
    worker's time for a file of PNGs; malloc reuses the pages of row groups let go).
    `extensions`: its schema with Arrow's extension types, as `pq.ParquetFile` gives it from
    pyarrow 21 on."""
    import pyarrow as pa

    pool = {"memory_pool": pa.system_memory_pool()} if kept else {}
    try:
        from pyarrow._parquet import ParquetReader
    except ImportError:  # pyarrow's internals moved: where pyarrow.parquet exports it
        from pyarrow.parquet import ParquetReader
    reader = ParquetReader(**pool)
    if not extensions:
        reader.open(source, **options)
        return reader
    try:
        reader.open(source, arrow_extensions_enabled=True, **options)
    except TypeError:  # pyarrow before 19 has no such keyword (nor extension types to read)
        reader.open(source, **options)
    return reader


class _Parquet:
    """An open Parquet file: row groups found by row, read whole into the process's `_Kept`."""

    def __init__(self, path: str, state: tuple[int, int]) -> None:
        self.key = (path, *state)  # what its kept row groups are filed under
        self.file = parquet_reader(path, kept=True)
        self._index(self.file.metadata)

    def _index(self, metadata) -> None:
        """Each row group's first row and decoded bytes, from the footer."""
        groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
        self.starts, self.rows = _starts([g.num_rows for g in groups])
        self.sizes = [g.total_byte_size for g in groups]  # decoded, every column
        self.names = metadata.schema.to_arrow_schema().names

    def _group(self, row: int) -> int:
        if not 0 <= row < self.rows:
            raise OSError(f"row {row} is past the file's {self.rows} rows")
        return bisect.bisect_right(self.starts, row) - 1

    def value(self, row: int, column: str) -> bytes:
        group = self._group(row)
        kept = _KEPT.get((*self.key, group, column), lambda: self._read(group, column))
        return kept.value(row - self.starts[group], column, row)

    def _read(self, group: int, column: str):
        _check_column(self.names, column)
        # one thread: a pack runs a worker per core already, and Arrow's pool is restarted in
        # each forked worker on its first read (measured 3-8x slower per row group)
        leaves = ranges.leaves(self.file.metadata, column)  # a struct has two
        return _Column(self.file.read_row_group(group, leaves, use_threads=False).column(column))


class _RemoteParquet(_Parquet):
    """A Parquet file at a URL: its footer read once per process, a row group's column fetched
    once per machine (`ranges.cached`) when a cell of it is first read, then kept as a local
    file's is."""

    def __init__(self, url: str, state: tuple[int, int]) -> None:
        self.key, self.url, self.state = (url, *state), url, state
        self.metadata = ranges.footer(url, *state)
        self._index(self.metadata)
        self.parts: dict[tuple[int, str], tuple[list[int], tuple[int, int]]] = {}

    def value(self, row: int, column: str) -> bytes:
        group = self._group(row)
        leaves, span = self._part(group, column)
        key = (*self.key, group, column)
        if key not in _KEPT.arrays:  # a miss (a racy look: at worst a fetch in vain): fetched
            ranges.cached(self.url, self.state, *span)  # outside the kept row groups' lock
        kept = _KEPT.get(key, lambda: self._decode(span, group, leaves, column))
        return kept.value(row - self.starts[group], column, row)

    def _part(self, group: int, column: str) -> tuple[list[int], tuple[int, int]]:
        """The leaf columns of `column` and the bytes that hold them in a row group."""
        found = self.parts.get((group, column))
        if found is None:
            _check_column(self.names, column)
            leaves = ranges.leaves(self.metadata, column)
            found = self.parts[group, column] = leaves, ranges.span(self.metadata, group, leaves)
        return found

    def _decode(self, span: tuple[int, int], group: int, leaves: list[int], column: str):
        part = ranges.cached(self.url, self.state, *span).read_bytes()  # fresh from eviction
        source = ranges.Spans(self.state[0], {span[0]: part})
        reader = parquet_reader(source, kept=True, metadata=self.metadata, pre_buffer=False)
        return _Column(reader.read_row_group(group, leaves, use_threads=False).column(column))


class _Column:
    """A row group's column as kept: a cell's bytes taken from the binary values themselves
    (an image struct's `bytes` field), not from a dict built per cell (0.5 us a cell against
    3.4); any other column, and an empty cell's message, by `_bytes_of`."""

    def __init__(self, array) -> None:
        import pyarrow as pa

        self.array, self.nbytes, self.binary = array, array.nbytes, None
        if array.num_chunks == 1:
            chunk = array.chunk(0)
            if pa.types.is_struct(chunk.type) and chunk.type.get_field_index("bytes") >= 0:
                chunk = chunk.flatten()[chunk.type.get_field_index("bytes")]  # struct's nulls too
            if pa.types.is_binary(chunk.type) or pa.types.is_large_binary(chunk.type):
                self.binary = chunk

    def value(self, index: int, column: str, row: int) -> bytes:
        found = None if self.binary is None else self.binary[index].as_py()
        return found if found is not None else _bytes_of(self.array[index], column, row)


class _Kept:
    """Row groups read last, whatever their file, up to `KEPT_BYTES` (at least one): a pack
    shuffles a row group's rows within a window of a few row groups, which a worker's chunks
    may share with the other workers' and take in any order, so a row group read once is kept
    for the rows of it that come later rather than read again for each."""

    def __init__(self) -> None:
        self.arrays: OrderedDict[tuple, object] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: tuple, read):
        with self.lock:
            array = self.arrays.pop(key, None)
            if array is None:
                array = read()
                self.bytes += array.nbytes
            self.arrays[key] = array
            while len(self.arrays) > 1 and self.bytes > KEPT_BYTES:
                self.bytes -= self.arrays.popitem(last=False)[1].nbytes
            return array


_KEPT = _Kept()


class _Arrow:
    """A `datasets.save_to_disk` Arrow file (the IPC stream format), memory-mapped; a column
    asked for held as a `_Column` a chunk (no copy)."""

    def __init__(self, path: str) -> None:
        import pyarrow as pa

        self.table = pa.ipc.open_stream(pa.memory_map(path)).read_all()  # zero-copy
        batches = self.table.to_batches()
        self.starts, self.rows = _starts([b.num_rows for b in batches])
        self.sizes = [b.nbytes for b in batches]
        self.columns: dict[str, tuple[list[int], list[_Column]]] = {}

    def value(self, row: int, column: str) -> bytes:
        if not 0 <= row < self.rows:
            raise OSError(f"row {row} is past the file's {self.rows} rows")
        found = self.columns.get(column)
        if found is None:
            import pyarrow as pa

            _check_column(self.table.column_names, column)
            chunks = self.table.column(column).chunks
            starts = _starts([len(c) for c in chunks])[0]
            found = self.columns[column] = starts, [_Column(pa.chunked_array([c])) for c in chunks]
        starts, chunks = found
        at = bisect.bisect_right(starts, row) - 1
        return chunks[at].value(row - starts[at], column, row)


def _starts(rows: list[int]) -> tuple[list[int], int]:
    """The first row of each row group (or record batch), and the rows of all."""
    starts, start = [], 0
    for count in rows:
        starts.append(start)
        start += count
    return starts, start


def _check_column(names: list[str], column: str) -> None:
    """One line when the file has no such column."""
    if column not in names:
        raise OSError(f"no column {column!r} (the file holds {', '.join(names)})")


def _bytes_of(scalar, column: str, row: int) -> bytes:
    """The bytes of one image cell: a {bytes, path} struct, or a binary value."""
    value = scalar.as_py()
    if isinstance(value, dict):
        data = value.get("bytes")
        if data is None:
            shown = f" (path {value['path']!r} only)" if value.get("path") else ""
            raise OSError(f"row {row} of column {column!r} holds no image bytes{shown}")
        return data
    if value is None:
        raise OSError(f"row {row} of column {column!r} is empty")
    return value


_opening = threading.Lock()


def _opened(path: str, size: int, mtime_ns: int) -> _Parquet | _Arrow:
    """The file opened once per process (again when its size or time changes), by one thread
    while the others wait: the threads that fetch a worker's next cells ahead ask together."""
    with _opening:
        return _open(path, size, mtime_ns)


@lru_cache(maxsize=128)
def _open(path: str, size: int, mtime_ns: int) -> _Parquet | _Arrow:
    """A dataset file opened; a remote Arrow file is fetched whole into the local cache first
    (an IPC stream has no index of its record batches to fetch one by)."""
    state = (size, mtime_ns)
    try:
        if not path.endswith(".arrow"):
            return (_RemoteParquet if is_url(path) else _Parquet)(path, state)
        return _Arrow(str(ranges.cached(path, state, 0, size)) if is_url(path) else path)
    except ValueError as exc:  # pyarrow's ArrowInvalid: not a Parquet or Arrow file
        raise OSError(f"cannot open {os.path.basename(path)}: {exc}") from None

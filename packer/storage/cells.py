"""One cell of a Hugging Face dataset file as a source path: an image's bytes inside a Parquet
or Arrow file, read where it is used.

A sample of a Hub dataset names its image as a path relative to the source root, like any
image file's: `data/train-00000-of-00001.parquet#row=17&column=image`, which the converter's
workers read themselves (no pixels over pipes). Each process keeps the files it opened and the
row groups it read last (up to `KEPT_BYTES` in all), since a Parquet file is read a row group at
a time. The state of a cell is its file's (size, modification time): the cell changes only when
its file does. Storage's `read_bytes`, `read_with_stat`, `read_head_tail`, `stat`, `stat_many`
and `sha256_file` hand a cell's path here, so header probes, freshness checks and
`verify --sources` treat a cell as a file. Local files only, read with pyarrow.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

from . import local

_MARK = "#row="  # in every cell's path: paths without it are files, without a regex match
_CELL = re.compile(r"^(?P<file>.+\.(?:parquet|arrow))#row=(?P<row>\d+)&column=(?P<column>[^&#]+)$")
KEPT_BYTES = 512 << 20  # decoded row groups each process keeps, all files together


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
    found = local.stat(Path(file))
    if found is None:
        raise FileNotFoundError(2, "No such file or directory", file)
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
    return local.stat(Path(_parsed(path)[0]))


def sha256(path: str | os.PathLike) -> tuple[int, str]:
    """(length, SHA-256) of a cell's bytes."""
    data = read_bytes(path)
    return len(data), hashlib.sha256(data).hexdigest()


def _parsed(path: str | os.PathLike) -> tuple[str, int, str]:
    cell = parse(path)
    if cell is None:
        raise ValueError(f"{os.fspath(path)} is not the path of a cell")
    return cell


class _Parquet:
    """An open Parquet file: row groups found by row, read whole into the process's `_Kept`."""

    def __init__(self, path: str, state: tuple[int, int]) -> None:
        import pyarrow.parquet as pq

        self.key = (path, *state)  # what its kept row groups are filed under
        self.file = pq.ParquetFile(path)
        starts, start = [], 0
        for i in range(self.file.num_row_groups):
            starts.append(start)
            start += self.file.metadata.row_group(i).num_rows
        self.starts, self.rows = starts, start

    def value(self, row: int, column: str) -> bytes:
        if not 0 <= row < self.rows:
            raise OSError(f"row {row} is past the file's {self.rows} rows")
        group = bisect.bisect_right(self.starts, row) - 1
        array = _KEPT.get((*self.key, group, column), lambda: self._read(group, column))
        return _bytes_of(array[row - self.starts[group]], column, row)

    def _read(self, group: int, column: str):
        _check_column(self.file.schema_arrow.names, column)
        # one thread: a pack runs a worker per core already, and Arrow's pool is restarted in
        # each forked worker on its first read (measured 3-8x slower per row group)
        return self.file.read_row_group(group, [column], use_threads=False).column(column)


class _Kept:
    """Row groups read last, whatever their file, up to `KEPT_BYTES` (at least one): a pack's
    shuffle sends each worker rows from all over a dataset, so a row group read once is kept
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
    """A `datasets.save_to_disk` Arrow file (the IPC stream format), memory-mapped."""

    def __init__(self, path: str) -> None:
        import pyarrow as pa

        self.table = pa.ipc.open_stream(pa.memory_map(path)).read_all()  # zero-copy

    def value(self, row: int, column: str) -> bytes:
        if not 0 <= row < self.table.num_rows:
            raise OSError(f"row {row} is past the file's {self.table.num_rows} rows")
        _check_column(self.table.column_names, column)
        return _bytes_of(self.table.column(column)[row], column, row)


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


@lru_cache(maxsize=128)
def _opened(path: str, size: int, mtime_ns: int) -> _Parquet | _Arrow:
    """The file opened once per process (again when its size or time changes)."""
    try:
        return _Arrow(path) if path.endswith(".arrow") else _Parquet(path, (size, mtime_ns))
    except ValueError as exc:  # pyarrow's ArrowInvalid: not a Parquet or Arrow file
        raise OSError(f"cannot open {os.path.basename(path)}: {exc}") from None

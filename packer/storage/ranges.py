"""Parts of a remote Parquet or Arrow file, read by ranged requests where a part will do: a
Parquet file's footer, the column chunks a scan reads (all of them at once), the row group of a
cell. pyarrow reads them through `Spans`, a file object that holds only the parts fetched.

The parts a pack's workers share (a footer, a row group's image column, a `save_to_disk` Arrow
file whole, which has no footer to find a part by) are kept on local disk under `<cache>/sources/`,
so that a machine fetches each once, whichever process asks first, while the others wait for
it: the workers of a pack all read rows of the same few row groups at a time. A part is filed
under its file's URL and state (size, modification time), so a changed file is fetched anew;
the least recently used parts go once the folder passes the cache's bound (`PACKER_CACHE_DIR`
and `PACKER_CACHE_BYTES`, read by `storage.cache`, whose bound, locks and eviction these are).
"""

from __future__ import annotations

import bisect
import hashlib
import io
import time
from functools import lru_cache
from pathlib import Path

from . import cache, remote

TAIL = 64 << 10  # what pyarrow reads of a footer first: one request holds most footers


class Spans(io.RawIOBase):
    """A read-only file of `size` bytes of which only some spans are known (start -> bytes):
    what pyarrow reads a remote Parquet file through. A read outside them is an OSError."""

    def __init__(self, size: int, spans: dict[int, bytes]) -> None:
        super().__init__()
        self.size, self.position = size, 0
        self.starts = sorted(spans)
        self.spans = spans

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = base + offset
        return self.position

    def readinto(self, buffer) -> int:
        wanted = max(0, min(len(buffer), self.size - self.position))
        if not wanted:
            return 0
        at = bisect.bisect_right(self.starts, self.position) - 1
        start = self.starts[at] if at >= 0 else 0
        data = self.spans.get(start, b"")
        offset = self.position - start
        if offset + wanted > len(data):
            raise OSError(f"bytes {self.position}-{self.position + wanted} were not fetched")
        buffer[:wanted] = data[offset : offset + wanted]
        self.position += wanted
        return wanted


@remote.clear_errors
def fetch(url: str, spans: list[tuple[int, int]]) -> list[bytes]:
    """The bytes of each (start, end) span of a remote file, asked for together (concurrently
    where the file system is asynchronous, as S3's is)."""
    if not spans:
        return []
    starts, ends = zip(*spans, strict=True)
    found = remote.filesystem(url).cat_ranges(
        [url] * len(spans), list(starts), list(ends), on_error="raise"
    )
    for (start, end), data in zip(spans, found, strict=True):
        if len(data) != end - start:
            raise OSError(f"{url}: asked for bytes {start}-{end}, got {len(data)} bytes")
    return found


@lru_cache(maxsize=256)
def footer(url: str, size: int, mtime_ns: int):
    """A remote Parquet file's metadata (`pyarrow.parquet.FileMetaData`), from its last bytes
    alone: read once per process and state, fetched once per machine (each of a pack's workers
    opens every file)."""
    import pyarrow.parquet as pq

    state, start = (size, mtime_ns), max(0, size - TAIL)
    tail = cached(url, state, start, size).read_bytes()
    length = int.from_bytes(tail[-8:-4], "little") + 8 if len(tail) >= 8 else 0
    if len(tail) < length <= size:  # a footer longer than the first read
        tail = cached(url, state, size - length, start).read_bytes() + tail
    return pq.read_metadata(Spans(size, {size - len(tail): tail}))  # not Parquet: ValueError


def leaves(metadata, column: str) -> list[int]:
    """The leaf columns of `column` in a Parquet file (a `{bytes, path}` struct has two)."""
    schema = metadata.schema
    paths = (schema.column(i).path for i in range(len(schema)))
    return [i for i, p in enumerate(paths) if p == column or p.startswith(f"{column}.")]


def span(metadata, group: int, columns: list[int]) -> tuple[int, int]:
    """The bytes (start, end) that hold the given leaf columns of one row group: adjacent in
    the file, so one request fetches them."""
    chunks = [metadata.row_group(group).column(i) for i in columns]
    starts = [
        min(c.dictionary_page_offset or c.data_page_offset, c.data_page_offset)
        if c.has_dictionary_page
        else c.data_page_offset
        for c in chunks
    ]
    ends = [s + c.total_compressed_size for s, c in zip(starts, chunks, strict=True)]
    return min(starts), max(ends)


def read_columns(url: str, state: tuple[int, int], names: list[str]):
    """Whole columns of a remote Parquet file as a `pyarrow.Table`: every row group's chunks
    of them fetched together, none of the other columns' bytes."""
    import pyarrow.parquet as pq

    metadata = footer(url, *state)
    columns = sorted(i for name in names for i in leaves(metadata, name))
    spans = [span(metadata, g, columns) for g in range(metadata.num_row_groups)]
    parts = dict(zip((s for s, _ in spans), fetch(url, spans), strict=True))
    # pre_buffer would join chunks a few KB apart into one read, of bytes not fetched
    table = pq.ParquetFile(Spans(state[0], parts), metadata=metadata, pre_buffer=False)
    return table.read(columns=names, use_threads=False)


def cached(url: str, state: tuple[int, int], start: int, end: int) -> Path:
    """A local file holding bytes start..end of the remote file as it is at `state` (its size
    and modification time), fetched by one process of this machine while the others wait; an
    OSError when the file changes meanwhile (its part is then left out)."""
    key = hashlib.sha256(f"{url}\0{state[0]}\0{state[1]}".encode()).hexdigest()[:24]
    top = cache.default_dir()
    local = top / "sources" / key / f"{start}-{end}"
    age = _age(local, end - start)
    if age is None:
        with cache.file_lock(top, f"source-{key}-{start}-{end}"):
            if _age(local, end - start) is None:  # another process may have fetched it
                _fetch_to(local, url, state, start, end)
    elif age > cache.GRACE / 2:  # used again: spared by eviction for GRACE seconds from now
        cache.touch(local)
    return local


def _fetch_to(local: Path, url: str, state: tuple[int, int], start: int, end: int) -> None:
    """Fetch a part under a temporary name, room made for it first (the least recently used
    parts evicted), renamed when complete and when the file is still at `state`."""
    top = cache.default_dir()
    room = cache.Bounded(
        top / "sources", cache.default_max_bytes(), top / ".locks" / "evict-sources", tally=True
    )
    with room.claimed(local, end - start) as tmp:
        if (start, end) == (0, state[0]):
            size, _ = remote.download(url, tmp)
            if size != end - start:
                raise OSError(f"{url}: got {size:,} bytes, expected {end - start:,}")
        else:
            with open(tmp, "r+b") as out:
                out.write(fetch(url, [(start, end)])[0])
        if remote.stat(url) != tuple(state):
            raise OSError(f"{url} changed while it was read; pack again")


def _age(local: Path, size: int) -> float | None:
    """Seconds since a part was fetched or last used; None when it is not there whole."""
    try:
        info = local.stat()
    except OSError:
        return None
    return time.time() - info.st_mtime if info.st_size == size else None

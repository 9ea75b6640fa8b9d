"""The local storage backend: plain files, atomic writes (temporary name, fsync, rename), locks.

Also the Linux fast paths the formats use on local files (positional writes, writeback and
read-ahead hints).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import functools
import hashlib
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import LockHeldError

COPY_BLOCK = 4 << 20
TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class FileInfo:
    """A finished file of a shard, as the manifest lists it."""

    path: str  # relative to the dataset root, POSIX separators
    bytes: int
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "bytes": self.bytes, "sha256": self.sha256}


def tmp_path(path: Path) -> Path:
    """The temporary name a file is written under before its rename."""
    return path.with_name(TMP_PREFIX + path.name)


def write_atomic(path: Path, root: Path, head: bytes, parts: Iterable[Path | bytes]) -> FileInfo:
    """Write `head`, then each part (a file or bytes), to `path` atomically; return its hash."""
    tmp = tmp_path(path)
    with open(tmp, "wb") as out:
        size, sha256 = write_hashed(out, head, parts)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return FileInfo(path.relative_to(root).as_posix(), size, sha256)


class HashingWriter:
    """Writes blocks to an open file, counting and hashing (SHA-256) them as they pass."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, block: bytes) -> None:
        self.out.write(block)
        self.digest.update(block)
        self.size += len(block)

    def result(self) -> tuple[int, str]:
        """(bytes written, SHA-256 hex)."""
        return self.size, self.digest.hexdigest()


def write_hashed(out: BinaryIO, head: bytes, parts: Iterable[Path | bytes]) -> tuple[int, str]:
    """Write `head`, then each part, into the open file `out`; return (bytes, SHA-256 hex)."""
    writer = HashingWriter(out)
    for piece in (head, *parts):
        for block in blocks(piece):
            writer.write(block)
    return writer.result()


def blocks(piece: Path | bytes) -> Iterable[bytes]:
    """The bytes of `piece` (bytes, or a local file read in COPY_BLOCK pieces), block by block."""
    if isinstance(piece, bytes | bytearray | memoryview):
        if piece:
            yield bytes(piece)
        return
    with open(piece, "rb") as src:
        while block := src.read(COPY_BLOCK):
            yield block


def sha256_file(path: Path) -> tuple[int, str]:
    """Size and SHA-256 of a file, read in large blocks into one reused buffer.

    (Not mmap: a file truncated while it is hashed, during `packer verify` say, would kill the
    process with SIGBUS instead of giving a wrong hash.)
    """
    digest = hashlib.sha256()
    size = 0
    buffer = bytearray(COPY_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while count := f.readinto(buffer):
            digest.update(view[:count])
            size += count
    return size, digest.hexdigest()


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of `data` at `offset` (os.pwrite may write less than asked)."""
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Linux: start writing a range to disk now, without waiting, so a later fsync is short."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the fsync does it all
        libc().sync_file_range(fd, ctypes.c_int64(offset), ctypes.c_int64(length), 2)


def advise_willneed(path: Path, offset: int, length: int) -> None:
    """Start reading a byte range of a file into the page cache in the background."""
    if not hasattr(os, "posix_fadvise") or length <= 0:
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, for the few Linux calls Python's os module lacks."""
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def fsync_dir(path: Path) -> None:
    """Make renames inside `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def read_with_stat(path: Path) -> tuple[bytes, int, int]:
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        return f.read(), info.st_size, info.st_mtime_ns


def read_head_tail(path: Path, head: int, tail: int) -> tuple[bytes, bytes]:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= head + tail:
            return f.read(), b""
        start = f.read(head)
        f.seek(size - tail)
        return start, f.read(tail)


def stat(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info.st_size, info.st_mtime_ns


def stat_many(root: Path, rels: Iterable[str]) -> dict[str, tuple[int, int] | None]:
    found: dict[str, tuple[int, int] | None] = {}
    top = os.fspath(root) + os.sep
    for rel in rels:
        try:
            info = os.stat(top + rel)
        except (FileNotFoundError, NotADirectoryError):
            found[rel] = None
            continue
        found[rel] = (info.st_size, info.st_mtime_ns)
    return found


def free_space(path: Path) -> int | None:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def exists(path: Path) -> bool:
    return path.exists()


def is_file(path: Path) -> bool:
    return path.is_file()


def is_dir(path: Path) -> bool:
    return path.is_dir()


def file_size(path: Path) -> int:
    return path.stat().st_size


def list_dir(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def make_dirs(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def walk_files(path: Path, prefix: str) -> Iterator[str]:
    for found in path.rglob(prefix + "*"):
        yield str(found)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = tmp_path(path)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def lock(path: Path, holder: str, remove: bool = False) -> Iterator[None]:
    """A POSIX record lock on `path`: it belongs to this process alone (forked workers do not
    inherit it) and vanishes with the process, however it dies. The file holds `holder` while
    locked, so a refused process can say who has it (LockHeldError.holder).

    With `remove`, the file (and its folder, if then empty) is deleted before the lock is let
    go; a process that opened the old file meanwhile sees that its lock is on a deleted file
    and tries again on a new one.
    """
    f = _locked_file(path)
    try:
        f.seek(0)
        f.truncate()
        f.write(holder)
        f.flush()
        yield
    finally:
        if remove:
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        f.close()


def _locked_file(path: Path):
    """Open and lock `path`, retrying while its previous holder deletes it under us."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            f = open(path, "a+")  # noqa: SIM115 (held open for the lock's lifetime)
        except FileNotFoundError:  # the folder was removed between mkdir and open
            continue
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            text = f.read().strip()
            f.close()
            raise LockHeldError(str(path), text or "another process") from None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(f.fileno()).st_ino:
            return f
        f.close()


def scan_dir(path: Path) -> list[tuple[str, bool]]:
    with os.scandir(path) as entries:
        return [(e.name, e.is_dir()) for e in entries]


def upload(local: Path, path: Path) -> None:
    os.replace(local, path)


def download(path: Path, local: Path) -> tuple[int, str]:
    with open_in_place(local) as out:
        found = write_hashed(out, b"", [path])
        out.truncate()
    return found


def open_in_place(path: Path) -> BinaryIO:
    """`path` opened for writing from its start, not emptied first: the shard cache claims a
    download's room with a file of that size, and others count it until the bytes arrive.
    Truncate at the end of what was written."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644), "wb")

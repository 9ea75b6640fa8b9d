"""The storage seam: every read, listing, atomic write and lock of pack and source paths.

Callers name a path or a URL; the backend for its scheme does the I/O. `local`: plain files,
written under a temporary name and renamed, so a file is either complete or absent. `remote`:
fsspec file systems (s3://, gs://, hf://, memory://), each object sent in one upload. A new backend
is one module with the functions below plus its schemes in BACKENDS. `as_path` turns a path or
URL into a joinable path object (`URLPath` keeps the `//` of a URL). A source path may name a
cell of a Parquet or Arrow file (`data/train.parquet#row=17&column=image`): the reads, stats and
hashes of files take it to `cells`, which reads the value as a file's bytes.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType

from ..errors import StorageError
from . import cells
from .local import FileInfo
from .url import URLPath, as_path, is_url

_REMOTE = "packer.storage.remote"
BACKENDS = {  # URL scheme -> backend module
    "file": "packer.storage.local",
    **dict.fromkeys(("s3", "s3a", "gs", "gcs", "az", "abfs", "memory"), _REMOTE),
    "hf": _REMOTE,  # hf://datasets/<owner>/<name>: huggingface_hub's HfFileSystem
}
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]+)://")

__all__ = [
    "FileInfo",
    "URLPath",
    "as_path",
    "backend",
    "download",
    "exists",
    "file_size",
    "free_space",
    "is_dir",
    "is_file",
    "is_url",
    "list_dir",
    "lock",
    "make_dirs",
    "read_bytes",
    "read_head_tail",
    "read_text",
    "read_with_stat",
    "remove",
    "remove_tree",
    "scan_dir",
    "scheme",
    "sha256_file",
    "stat",
    "stat_many",
    "upload",
    "walk_files",
    "write_atomic",
    "write_text_atomic",
]


def scheme(path: str | os.PathLike) -> str:
    """The URL scheme of `path` ("file" for plain paths)."""
    match = _SCHEME.match(os.fspath(path))
    return match[1].lower() if match else "file"


def backend(path: str | os.PathLike) -> ModuleType:
    """The backend module that handles `path`; a clear error for a scheme nobody handles."""
    name = scheme(path)
    if name not in BACKENDS:
        supported = ", ".join(f"{s}://" for s in BACKENDS if s != "file")
        raise StorageError(
            f"{os.fspath(path)}: {name}:// paths are not supported (plain paths and "
            f"{supported} are)"
        )
    return importlib.import_module(BACKENDS[name])


def _local(path: str | os.PathLike) -> Path | str:
    """A plain path for the local backend (`file://` stripped); the URL for a remote one."""
    text = os.fspath(path)
    if scheme(text) != "file":
        return text
    return Path(text[len("file://") :] if text.startswith("file://") else text)


def read_bytes(path: str | os.PathLike) -> bytes:
    """A whole file's bytes (or a cell's)."""
    if cells.is_cell(path):
        return cells.read_bytes(_local(path))
    return backend(path).read_bytes(_local(path))


def read_text(path: str | os.PathLike) -> str:
    """A whole UTF-8 text file."""
    return backend(path).read_text(_local(path))


def read_with_stat(path: str | os.PathLike) -> tuple[bytes, int, int]:
    """A file's bytes with its size and modification time (ns), taken before the read, so a
    later change always shows as a newer time. A cell: its bytes, its file's size and time."""
    if cells.is_cell(path):
        return cells.read_with_stat(_local(path))
    return backend(path).read_with_stat(_local(path))


def read_head_tail(path: str | os.PathLike, head: int, tail: int) -> tuple[bytes, bytes]:
    """The first `head` and last `tail` bytes of a file (the whole file once when it is that
    small: then the tail is empty); of a cell's bytes for a cell."""
    if cells.is_cell(path):
        return cells.read_head_tail(_local(path), head, tail)
    return backend(path).read_head_tail(_local(path), head, tail)


def stat(path: str | os.PathLike) -> tuple[int, int] | None:
    """(size, modification time in ns) of a file (a cell's file for a cell); None when there
    is no such file."""
    if cells.is_cell(path):
        return cells.stat(_local(path))
    return backend(path).stat(_local(path))


def stat_many(root: str | os.PathLike, rels: Iterable[str]) -> dict[str, tuple[int, int] | None]:
    """`stat` of many files under one root, by path relative to it, in one call (a pack's
    no-op check stats every source: per-call dispatch would cost more than the stats); a
    cell's is its file's, each file stat once."""
    files = {rel: cells.file_of(rel) for rel in rels}
    found = backend(root).stat_many(_local(root), dict.fromkeys(files.values()))
    return {rel: found[file] for rel, file in files.items()}


def free_space(path: str | os.PathLike) -> int | None:
    """Bytes free for writing at `path` (or its nearest existing parent); None if unknown."""
    return backend(path).free_space(_local(path))


def exists(path: str | os.PathLike) -> bool:
    """Whether a file or folder is there."""
    return backend(path).exists(_local(path))


def is_file(path: str | os.PathLike) -> bool:
    """Whether `path` is a file."""
    return backend(path).is_file(_local(path))


def is_dir(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder."""
    return backend(path).is_dir(_local(path))


def file_size(path: str | os.PathLike) -> int:
    """A file's size in bytes."""
    return backend(path).file_size(_local(path))


def list_dir(path: str | os.PathLike) -> list[str]:
    """Names in a folder (not recursive), sorted."""
    return backend(path).list_dir(_local(path))


def make_dirs(path: str | os.PathLike) -> None:
    """Create a folder and its parents; an existing one is fine."""
    backend(path).make_dirs(_local(path))


def remove(path: str | os.PathLike) -> None:
    """Delete a file; a missing one is fine."""
    backend(path).remove(_local(path))


def remove_tree(path: str | os.PathLike) -> None:
    """Delete a folder and everything in it; a missing one is fine."""
    backend(path).remove_tree(_local(path))


def sha256_file(path: str | os.PathLike) -> tuple[int, str]:
    """Size and SHA-256 of a file (of a cell's bytes for a cell)."""
    if cells.is_cell(path):
        return cells.sha256(_local(path))
    return backend(path).sha256_file(_local(path))


def write_atomic(
    path: str | os.PathLike, root: str | os.PathLike, head: bytes, parts: Iterable[Path | bytes]
) -> FileInfo:
    """Write `head` then each part (a local file or bytes) to `path`, complete or not at all."""
    return backend(path).write_atomic(_local(path), _local(root), head, parts)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Replace a small text file atomically (and durably: the folder is synced too)."""
    backend(path).write_text_atomic(_local(path), text)


def lock(
    path: str | os.PathLike, holder: str, remove: bool = False, force: bool = False
) -> AbstractContextManager[None]:
    """Hold an exclusive lock file while the context runs; StorageError names the holder
    when another process has it. `remove`: delete the lock file, and its folder if that is
    then empty, before letting go. `force` breaks a stale lock (where locks can go stale)."""
    if force and is_url(path):  # a local lock vanishes with its process: never stale
        return backend(path).lock(_local(path), holder, remove, force=True)
    return backend(path).lock(_local(path), holder, remove)


def walk_files(path: str | os.PathLike, prefix: str) -> Iterator[str]:
    """Paths of files under `path` (recursive) whose name starts with `prefix`."""
    return backend(path).walk_files(_local(path), prefix)


def scan_dir(path: str | os.PathLike) -> list[tuple[str, bool]]:
    """(name, is_folder) of each entry of a folder, not recursive, unsorted."""
    return backend(path).scan_dir(_local(path))


def upload(local: str | os.PathLike, path: str | os.PathLike) -> None:
    """Publish a finished local file at `path`, whole (one rename, or one upload)."""
    backend(path).upload(Path(local), _local(path))


def download(path: str | os.PathLike, local: str | os.PathLike) -> tuple[int, str]:
    """Copy the file at `path` to the local file `local`; the size and SHA-256 of the bytes
    written, hashed as they pass (no second read)."""
    return backend(path).download(_local(path), Path(local))

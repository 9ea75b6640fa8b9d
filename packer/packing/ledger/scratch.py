"""Packing to a URL: workers write into a local scratch copy of OUT, then publish each file.

The formats write shards to local files (positional writes, memmaps, renames), so for an OUT
that is a URL the converter gives them a scratch folder on the worker's own disk, laid out as
OUT is, and uploads each shard file once it is final (one upload per file: the object appears
only complete), then deletes the local copy. Workers on one machine share the scratch folder
of a pack (chunk tasks of one shard write into the same files), so its name derives from OUT.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from ... import storage
from ...errors import PackError
from ...storage import FileInfo


def local_out(out: str | os.PathLike) -> Path:
    """Where the formats write the files of OUT: OUT itself, or a local scratch folder."""
    if not storage.is_url(out):
        return Path(storage.as_path(out))
    key = hashlib.sha256(os.fspath(out).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "packer-scratch" / key


def publish(local_root: Path, target: str | os.PathLike, files: list[FileInfo]) -> None:
    """Upload the finished files of a shard from the scratch folder to OUT, then drop them."""
    if not storage.is_url(target):
        return  # a local OUT: the formats wrote in place
    target = storage.as_path(target)
    for f in files:
        local = local_root / f.path
        storage.upload(local, target / f.path)
        local.unlink(missing_ok=True)


def clear(out: str | os.PathLike) -> None:
    """Remove this machine's scratch folder of OUT (what a killed run left there)."""
    if storage.is_url(out):
        storage.remove_tree(local_out(out))


def check_paths(src: str | os.PathLike, out: str | os.PathLike, engine_name: str) -> None:
    """Refuse a SRC or OUT that the engine's worker processes could not see."""
    for path in (src, out):
        if storage.scheme(path) == "memory":
            raise PackError(
                f"{path}: memory:// lives inside one process, and the {engine_name} engine "
                "reads and writes from worker processes; pack from and to a folder or an "
                "object store (memory:// packs can be read: packer.open)"
            )

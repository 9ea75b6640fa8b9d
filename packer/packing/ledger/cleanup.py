"""Removing what a pack no longer needs from OUT: temporaries of a stopped run, a pack being
replaced, and the files a new manifest does not list."""

from __future__ import annotations

from pathlib import Path

from ... import manifest, storage
from ...storage.local import TMP_PREFIX
from . import scratch, workdir

SHARD_NAME_MARK = "-of-"  # in the name of every file a pack writes beside its shards


def remove_temporaries(out: Path) -> None:
    """Delete chunk parts and half-written files (a killed run leaves them; they are redone)."""
    storage.remove_tree(workdir.parts_dir(out))
    scratch.clear(out)  # OUT at a URL: this machine's local copies of unfinished shards
    for path in storage.walk_files(out, TMP_PREFIX):
        storage.remove(path)


def remove_pack(out: Path) -> None:
    """Delete what a pack wrote in OUT (manifest first, so nothing claims a finished dataset),
    keeping the lock that this process holds."""
    storage.remove(out / manifest.MANIFEST_NAME)
    partial = workdir.partial_dir(out)
    if storage.is_dir(partial):
        for name in storage.list_dir(partial):
            path = partial / name
            if path == workdir.lock_path(out):
                continue
            storage.remove_tree(path) if storage.is_dir(path) else storage.remove(path)
    remove_unlisted(out, None)


def remove_unlisted(out: Path, data: dict | None) -> None:
    """Delete the shard files, receipts and provenance in OUT's split folders that the
    manifest `data` does not list (all of them when None), and split folders left empty."""
    listed = set()
    for split in (data or {}).get("splits", {}).values():
        for shard in split["shards"]:
            listed.update(f["path"] for f in shard["files"])
            if "receipt" in shard:
                listed.add(shard["receipt"]["path"])
    for split in storage.list_dir(out):
        split_dir = out / split
        if split == workdir.PARTIAL_DIR or not storage.is_dir(split_dir):
            continue
        for name in storage.list_dir(split_dir):
            ours = SHARD_NAME_MARK in name or name.startswith(TMP_PREFIX)
            if ours and f"{split}/{name}" not in listed and storage.is_file(split_dir / name):
                storage.remove(split_dir / name)
        if not storage.list_dir(split_dir):
            storage.remove_tree(split_dir)

"""`packer verify`: re-hash every file the manifest lists and report what differs; with
`sources`, re-hash the source files too against the states the shard receipts recorded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .. import formats, manifest, storage
from ..packing.ledger import Ledger
from ..schema import Field, fixed


def verify(root: str | os.PathLike, progress: bool = False, sources: bool = False) -> list[str]:
    """Problems found (missing, wrong size, wrong hash), each naming the file; empty if intact.

    `sources`: also whether every source file is still the one packed (same SHA-256).
    """
    root = storage.as_path(root)
    data = manifest.read(root)
    shards = [(name, s) for name, split in data["splits"].items() for s in split["shards"]]
    files = [
        (f, name, s)
        for name, s in shards
        for f in (*s["files"], *([s["receipt"]] if "receipt" in s else []))
    ]
    problems = []
    for f, split, shard in tqdm(files, desc="verifying", unit="file", disable=not progress):
        path = root / f["path"]
        if not storage.is_file(path):
            problems.append(f"{path}: missing")
            continue
        size, digest = storage.sha256_file(path)
        if size != f["bytes"]:
            problems.append(f"{path}: {size} bytes, the manifest says {f['bytes']}")
        elif digest != f["sha256"]:
            problems.append(
                f"{path}: sha256 {digest[:16]}..., the manifest says {f['sha256'][:16]}..."
                + _damaged_record(root, data, split, shard)
            )
    if sources and not problems:
        problems += _check_sources(root, data)
    return problems


def _damaged_record(root: Path, data: dict, split: str, shard: dict) -> str:
    """`; <the first record of a local shard that does not read back: why>`, or nothing (a
    changed byte the readers cannot notice, or a remote pack)."""
    if storage.is_url(root):
        return ""
    fields = tuple(fixed(tuple(Field.from_json(f) for f in data["fields"])))
    fmt = formats.get(data["format"])
    options = {k: data["options"].get(k, v) for k, v in fmt.OPTIONS.items()}
    try:
        reader = fmt.open_shard(root, split, shard, fields, options)
    except (OSError, ValueError):
        return ""
    out = {f.name: np.empty((1, *f.shape), np.dtype(f.dtype)) for f in fields}
    try:
        for i in range(shard["count"]):
            reader.read_into(np.array([i]), out)
    except (OSError, ValueError) as exc:
        return f"; {exc}"
    finally:
        reader.close()
    return ""


def _check_sources(root: Path, data: dict) -> list[str]:
    """Sources that changed or vanished since they were packed, by their recorded hashes."""
    changes = Ledger(root).source_changes(data)
    source_root = storage.as_path(data["source"]["root"])
    return [
        f"{source_root / rel}: "
        + ("missing now" if storage.stat(source_root / rel) is None else "changed since packed")
        for rel in changes.changed
    ]

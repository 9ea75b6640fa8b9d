"""Shard receipts: read them back, and find the finished shards a plan can keep.

A receipt (`<split>/<shard>.receipt.json`, written last for each shard) lists the shard's
files, statistics, rejections and the states of the sources it read. A finished shard is one
whose receipt names the plan's fingerprint for it and whose files have the sizes it records;
whether its sources are unchanged is `freshness`'s question.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ... import storage
from . import workdir


def load(out: Path, split: str, shard: str) -> dict | None:
    """A shard's receipt with `receipt_file` (its own path, size and hash), or None when it
    is missing or unreadable."""
    path = workdir.receipt_path(out, split, shard)
    try:
        data = storage.read_bytes(path)
        receipt = json.loads(data)
    except (OSError, ValueError):
        return None
    if not isinstance(receipt, dict) or "files" not in receipt:
        return None
    relative = path.relative_to(out).as_posix()
    digest = hashlib.sha256(data).hexdigest()
    return {**receipt, "receipt_file": {"path": relative, "bytes": len(data), "sha256": digest}}


def write(out: Path, receipt: dict) -> dict:
    """Rewrite a receipt (e.g. with refreshed source times); returns it with `receipt_file`."""
    body = {k: v for k, v in receipt.items() if k != "receipt_file"}
    path = workdir.receipt_path(out, receipt["split"], receipt["name"])
    text = json.dumps(body, ensure_ascii=False).encode()
    info = storage.write_atomic(path, out, b"", [text])
    return {**body, "receipt_file": info.to_json()}


def finished(
    out: Path, shards: dict[str, tuple[str, str]], loaded: dict[str, dict | None] | None = None
) -> dict[str, dict]:
    """Receipts of the shards (name -> (split, fingerprint)) that are finished on disk;
    `loaded`: receipts already read, by shard name (the others are read here)."""
    found = {}
    for name, (split, fingerprint) in shards.items():
        receipt = (loaded or {}).get(name) or load(out, split, name)
        if receipt is None or receipt.get("fingerprint") != fingerprint:
            continue
        if all(_has_size(out / f["path"], f["bytes"]) for f in receipt["files"]):
            found[name] = receipt
    return found


def _has_size(path: Path, size: int) -> bool:
    found = storage.stat(path)
    return found is not None and found[0] == size


def recorded_sources(receipts: list[dict]) -> dict[str, list | None] | None:
    """Every source state the receipts record; None when one of them records none (a pack
    from before source states were kept)."""
    states: dict[str, list | None] = {}
    for receipt in receipts:
        if "sources" not in receipt:
            return None
        states.update(receipt["sources"])
    return states

"""`packer verify`: re-hash every file the manifest lists and report what differs."""

from __future__ import annotations

import os

from tqdm import tqdm

from . import manifest, storage


def verify(root: str | os.PathLike, progress: bool = False) -> list[str]:
    """Problems found (missing, wrong size, wrong hash), each naming the file; empty if intact."""
    root = storage.as_path(root)
    data = manifest.read(root)
    files = [f for split in data["splits"].values() for s in split["shards"] for f in s["files"]]
    problems = []
    for f in tqdm(files, desc="verifying", unit="file", disable=not progress):
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
            )
    return problems

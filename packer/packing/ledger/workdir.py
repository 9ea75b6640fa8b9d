"""Where a pack keeps its state: the `.partial/` work folder inside OUT and the shard receipts,
defined once.

.partial/lock                 held by the packing process (pid inside) while it runs
.partial/plan.json            the pack being written: fingerprints, options, source root, shards,
                              and the command that started it (so a refusal can quote it)
.partial/parts/               chunk part files, joined into shards and removed
<split>/<shard>.receipt.json  written last for each finished shard and kept with it: its files,
                              statistics, rejections and the size, time and SHA-256 of every
                              source it read. A re-run resumes or updates from receipts.
"""

from __future__ import annotations

from pathlib import Path

PARTIAL_DIR = ".partial"
RECEIPT_SUFFIX = ".receipt.json"


def partial_dir(out: Path) -> Path:
    """The work folder of an unfinished pack."""
    return out / PARTIAL_DIR


def lock_path(out: Path) -> Path:
    """The lock file the packing process holds."""
    return out / PARTIAL_DIR / "lock"


def plan_marker(out: Path) -> Path:
    """The file naming the fingerprint (and command) of the pack being written."""
    return out / PARTIAL_DIR / "plan.json"


def parts_dir(out: Path) -> Path:
    """Where chunk part files wait to be joined into shards."""
    return out / PARTIAL_DIR / "parts"


def receipt_path(out: Path, split: str, shard: str) -> Path:
    """The receipt of shard `shard` of `split`, beside the shard's files."""
    return out / split / f"{shard}{RECEIPT_SUFFIX}"

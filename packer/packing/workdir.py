"""Where an unfinished pack keeps its state: the `.partial/` folder inside OUT, defined once.

.partial/lock            held by the packing process (pid inside)
.partial/plan.json       the fingerprint of the pack being written
.partial/parts/          chunk part files, joined into shards and removed
.partial/shards/*.json   one receipt per finished shard, so a re-run resumes from them
"""

from __future__ import annotations

from pathlib import Path

PARTIAL_DIR = ".partial"


def partial_dir(out: Path) -> Path:
    return out / PARTIAL_DIR


def lock_path(out: Path) -> Path:
    return out / PARTIAL_DIR / "lock"


def plan_marker(out: Path) -> Path:
    return out / PARTIAL_DIR / "plan.json"


def parts_dir(out: Path) -> Path:
    return out / PARTIAL_DIR / "parts"


def receipts_dir(out: Path) -> Path:
    return out / PARTIAL_DIR / "shards"

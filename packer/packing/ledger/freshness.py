"""Whether sources are still the files a pack was made from: sizes and times first, hashes after.

Each shard's receipt records, per source file it read, `[size, mtime_ns, sha256]` (sha256 None
when the file could not be read, the whole entry None when it was missing). A check stats
every recorded file and hashes only those whose size matches but whose time differs, so an
unchanged pack of 10,000 sources is confirmed in a fraction of a second.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ... import storage

HASH_THREADS = 4  # hashing releases the GIL; a few files at once keep the disk busy
SHOWN = 3  # file names named per kind of change


@dataclass
class SourceChanges:
    """How the sources differ from those a pack recorded."""

    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # files whose time moved but whose bytes did not: their fresh states, to record
    touched: dict[str, list] = field(default_factory=dict)
    unrecorded: bool = False  # the pack predates source records: nothing could be compared
    annotations: list[str] = field(default_factory=list)  # images whose annotations changed
    values: list[str] = field(default_factory=list)  # Python samples whose values changed

    def __bool__(self) -> bool:
        changed = self.changed or self.added or self.removed or self.annotations or self.values
        return bool(changed or self.unrecorded)

    def describe(self) -> str:
        """`2 changed (a.png, b.png), 1 added (c.png)`, or why nothing could be compared."""
        if self.unrecorded:
            return "the pack records no source states (made by an older packer)"
        parts = []
        for kind, paths in (("changed", self.changed), ("added", self.added)):
            if paths:
                parts.append(f"{len(paths)} {kind} ({_few(paths)})")
        if self.removed:
            parts.append(f"{len(self.removed)} removed ({_few(self.removed)})")
        if self.annotations:
            images = "image's" if len(self.annotations) == 1 else "images'"
            parts.append(
                f"{len(self.annotations)} {images} annotations changed ({_few(self.annotations)})"
            )
        if self.values:
            parts.append(f"{len(self.values)} samples' values changed ({_few(self.values)})")
        return ", ".join(parts) or "no source changed"

    def to_json(self) -> dict:
        return {
            "changed": self.changed,
            "added": self.added,
            "removed": self.removed,
            "annotations": self.annotations,
            "unrecorded": self.unrecorded,
            **({"values": self.values} if self.values else {}),
        }


def _few(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(paths[:SHOWN]) + more


def check(
    root: str | os.PathLike, recorded: dict[str, list | None], rehash: bool = False
) -> SourceChanges:
    """Compare recorded source states with the files under `root` now; `rehash` hashes every
    file of the recorded size, whatever its time (what `packer verify --sources` does)."""
    changes = SourceChanges()
    to_hash: list[tuple[str, list, tuple[int, int]]] = []
    current = storage.stat_many(root, recorded)
    for rel, old in recorded.items():
        now = current[rel]
        if old is None or now is None:
            if (old is None) != (now is None):
                changes.changed.append(rel)
        elif rehash or now != (old[0], old[1]):
            if now[0] != old[0] or old[2] is None:
                changes.changed.append(rel)
            else:
                to_hash.append((rel, old, now))
    if to_hash:

        def digest(item: tuple[str, list, tuple[int, int]]) -> str | None:
            try:
                return storage.sha256_file(os.path.join(root, item[0]))[1]
            except OSError:
                return None

        with ThreadPoolExecutor(HASH_THREADS) as pool:
            for (rel, old, now), found in zip(to_hash, pool.map(digest, to_hash), strict=True):
                if found == old[2]:
                    if now[1] != old[1]:
                        changes.touched[rel] = [now[0], now[1], found]
                else:
                    changes.changed.append(rel)
    changes.changed.sort()
    return changes

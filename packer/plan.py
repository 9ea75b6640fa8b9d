"""Seeded sample order and shard boundaries: the one plan every format and worker count shares.

The plan depends only on the samples, the seed, the record size and the shard size, never on
`--workers`, which is what makes shards byte-identical however many processes write them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .sources import Sample

CHUNK_BYTES = 8 << 20  # one worker task writes about this much; small enough to balance 2 cores
MAX_CHUNK_SAMPLES = 256


@dataclass(frozen=True)
class ShardPlan:
    """One shard: its split, position and the samples it will hold, in order."""

    split: str
    index: int
    total: int
    samples: tuple[Sample, ...]

    @property
    def name(self) -> str:
        return f"{self.split}-{self.index:05d}-of-{self.total:05d}"


@dataclass(frozen=True)
class ChunkTask:
    """A run of consecutive samples of one shard: the unit of work a worker process takes."""

    shard: str
    split: str
    chunk: int
    start: int
    samples: tuple[Sample, ...]


def shuffled(samples: Sequence[Sample], seed: int, split: str) -> list[Sample]:
    """Samples of one split in a seeded order, so each shard mixes classes and folders."""
    ordered = sorted(samples, key=lambda s: s.image)
    digest = hashlib.sha256(f"{seed}/{split}".encode()).digest()
    random.Random(int.from_bytes(digest[:8], "little")).shuffle(ordered)
    return ordered


def plan_shards(
    samples: Iterable[Sample], seed: int, record_bytes: int, shard_bytes: int
) -> dict[str, list[ShardPlan]]:
    """Split samples by split, order each split, and cut it into shards of at most `shard_bytes`."""
    by_split: dict[str, list[Sample]] = {}
    for sample in samples:
        by_split.setdefault(sample.split, []).append(sample)
    per_shard = max(1, shard_bytes // max(1, record_bytes))
    plans: dict[str, list[ShardPlan]] = {}
    for split in sorted(by_split):
        ordered = shuffled(by_split[split], seed, split)
        total = -(-len(ordered) // per_shard)
        plans[split] = [
            ShardPlan(split, i, total, tuple(ordered[i * per_shard : (i + 1) * per_shard]))
            for i in range(total)
        ]
    return plans


def chunk_tasks(shard: ShardPlan, record_bytes: int) -> list[ChunkTask]:
    """Cut a shard into worker tasks; chunk boundaries never change the bytes written."""
    size = max(1, min(MAX_CHUNK_SAMPLES, CHUNK_BYTES // max(1, record_bytes)))
    return [
        ChunkTask(shard.name, shard.split, n, start, shard.samples[start : start + size])
        for n, start in enumerate(range(0, len(shard.samples), size))
    ]

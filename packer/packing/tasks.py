"""The messages between the packing process and its workers: small tasks out, summaries back.

A `ShardTask` is one shard as workers see it (its chunks of consecutive samples); a worker
turns a `ChunkTask` into part files and a `ChunkResult`, and a shard whose chunks are all
done is finalised from the task and those results. No message ever carries pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..sources import Sample
from .stats import ChunkStats


@dataclass(frozen=True)
class ChunkTask:
    """A run of consecutive samples of one shard: the unit of work a worker takes."""

    shard: str
    split: str
    chunk: int
    start: int
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class ShardTask:
    """One shard to write: its name, split, the pack's fingerprint and its chunks in order."""

    shard: str
    split: str
    fingerprint: str
    chunks: tuple[ChunkTask, ...]

    @property
    def count(self) -> int:
        return sum(len(c.samples) for c in self.chunks)

    def without_samples(self) -> ShardTask:
        """The shard as finalising it needs it: its chunks' samples (and their annotations)
        stay behind rather than travel to the worker again."""
        return replace(self, chunks=())


@dataclass
class ChunkResult:
    """What a worker reports for a chunk: kept sources, rejections and stats, never pixels."""

    shard: str
    chunk: int
    kept: list[list[str | None]] = field(default_factory=list)  # [image, mask] per record
    rejected: list[dict] = field(default_factory=list)
    unknown: list[dict] = field(default_factory=list)
    stats: ChunkStats = field(default_factory=ChunkStats)
    # source path -> [size, mtime_ns, sha256] as read (sha256 None: unreadable; None: missing)
    sources: dict[str, list | None] = field(default_factory=dict)
    # image -> digest of its annotations, for masks drawn from annotations (COCO)
    annotations: dict[str, str] = field(default_factory=dict)
    # provenance -> digest of its values, for samples given in Python
    values: dict[str, str] = field(default_factory=dict)
    # detection: objects left out, {"path": where, "reason": why} each
    dropped: list[dict] = field(default_factory=list)

"""Epoch orders for the NumPy readers: a uniform shuffle, or shuffled windows of whole shards.

A uniform shuffle reads records all over the disk: fine while the pack sits in the page
cache, slow from a cold disk. The windowed order visits shards in a shuffled order and
shuffles only inside consecutive windows of records, so each window is one long sequential
read (which the reader asks the kernel to prefetch) and batches still mix many samples.
"""

from __future__ import annotations

import os

import numpy as np

WINDOW_BYTES = 256 * 1000 * 1000  # records per window: about this many bytes
RAM_SHARE = 0.5  # a split larger than this share of RAM is read in windows by default


def window_length(record_bytes: int, batch_size: int) -> int:
    """Records per window: about WINDOW_BYTES, and at least a few batches."""
    return max(4 * batch_size, WINDOW_BYTES // max(1, record_bytes))


def larger_than_ram(total_bytes: int) -> bool:
    """Whether a split would not stay in the page cache (Linux; False where RAM is unknown)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return False
    return total_bytes > RAM_SHARE * ram


def uniform(count: int, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(count)


def windowed(shard_counts: list[int], window: int, rng: np.random.Generator) -> np.ndarray:
    """Shards in a random order, records shuffled within consecutive windows of `window`."""
    offsets = np.cumsum([0, *shard_counts])
    order = np.concatenate(
        [np.arange(offsets[s], offsets[s + 1]) for s in rng.permutation(len(shard_counts))]
        or [np.zeros(0, np.int64)]
    )
    for start in range(0, len(order), window):
        rng.shuffle(order[start : start + window])
    return order


def prefetch_window(reader, epoch_order: np.ndarray, window: int, w: int) -> None:
    """Ask `reader` (a BatchReader) to read window `w` of `epoch_order` ahead, run by run."""
    members = np.sort(epoch_order[w * window : (w + 1) * window])
    if not len(members):
        return
    cuts = np.flatnonzero(np.diff(members) != 1) + 1
    for run in np.split(members, cuts):
        reader.prefetch(int(run[0]), int(run[-1]) + 1)

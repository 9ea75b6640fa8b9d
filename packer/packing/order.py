"""The order of a split's samples before sharding: a seeded shuffle, so each shard mixes
classes and folders; a Hugging Face dataset's rows by blocks of row groups, so each worker
decodes few of them."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Sequence

from .. import storage
from ..sources import Sample

# Cells' samples are shuffled within windows of this many row groups, at most a quarter of
# what each worker keeps decoded (`in_blocks`): a shard's rows come from row groups drawn from
# the whole split, a window's from a few.
WINDOW_BLOCKS = 8
WINDOW_BYTES = storage.cells.KEPT_BYTES // 4


def shuffled(
    samples: Sequence[Sample], seed: int, split: str, root: str | os.PathLike | None = None
) -> list[Sample]:
    """Samples of one split in a seeded order, so each shard mixes classes and folders.

    A split whose images are cells of dataset files (under `root`) is shuffled in blocks
    (`in_blocks`), so that each chunk reads few row groups; any other keeps this order."""
    ordered = sorted(samples, key=lambda s: s.image)
    digest = hashlib.sha256(f"{seed}/{split}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "little"))
    if root is not None and ordered and all(_is_cell(s) for s in ordered):
        return in_blocks(ordered, rng, root)
    rng.shuffle(ordered)
    return ordered


def in_blocks(
    ordered: Sequence[Sample], rng: random.Random, root: str | os.PathLike
) -> list[Sample]:
    """Cells' samples with each row group's rows together as a block, the blocks in a seeded
    order, rows shuffled within windows of up to `WINDOW_BLOCKS` blocks (`WINDOW_BYTES` of row
    groups, at least one block): a worker keeps a window's row groups while its chunks read
    them, where a shuffle of rows would read a row group for most rows of a large dataset."""
    places = storage.cells.row_group_of(os.path.join(root, s.image) for s in ordered)
    blocks: dict[tuple[str, int], tuple[int, list[Sample]]] = {}
    for sample, (file, group, size) in zip(ordered, places, strict=True):
        blocks.setdefault((file, group), (size, []))[1].append(sample)
    order = list(blocks.values())
    rng.shuffle(order)
    result: list[Sample] = []
    window: list[Sample] = []
    count = held = 0
    for size, rows in order:
        if window and (count == WINDOW_BLOCKS or held + size > WINDOW_BYTES):
            rng.shuffle(window)
            result.extend(window)
            window, count, held = [], 0, 0
        window.extend(rows)
        count, held = count + 1, held + size
    rng.shuffle(window)
    return result + window


def _is_cell(sample: Sample) -> bool:
    return sample.values is None and storage.cells.is_cell(sample.image)

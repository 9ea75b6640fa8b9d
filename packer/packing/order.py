"""The order of a split's samples before sharding: a seeded shuffle, so each shard mixes
classes and folders; a Hugging Face dataset's rows by blocks of row groups, so each worker
decodes few of them."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Sequence

import numpy as np

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
    cells = _cells(ordered) if root is not None and ordered else None
    if cells is not None:
        return in_blocks(ordered, cells, rng, root)
    rng.shuffle(ordered)
    return ordered


def in_blocks(
    ordered: Sequence[Sample],
    cells: tuple[list[str], list[int]],
    rng: random.Random,
    root: str | os.PathLike,
) -> list[Sample]:
    """Cells' samples with each row group's rows together as a block, the blocks in a seeded
    order, rows shuffled within windows of up to `WINDOW_BLOCKS` blocks (`WINDOW_BYTES` of row
    groups, at least one block): a worker keeps a window's row groups while its chunks read
    them, where a shuffle of rows would read a row group for most rows of a large dataset.
    `cells`: each sample's file and row; a block's rows keep their order in `ordered`."""
    block, sizes = storage.cells.row_groups(root, *cells)
    members = np.argsort(block, kind="stable").tolist()  # sample positions, block by block
    ends = np.cumsum(np.bincount(block, minlength=len(sizes))).tolist()
    starts = [0, *ends[:-1]]
    order = list(range(len(sizes)))
    rng.shuffle(order)
    result: list[Sample] = []
    window: list[Sample] = []
    count = held = 0
    for b in order:
        if window and (count == WINDOW_BLOCKS or held + sizes[b] > WINDOW_BYTES):
            rng.shuffle(window)
            result.extend(window)
            window, count, held = [], 0, 0
        window.extend(ordered[i] for i in members[starts[b] : ends[b]])
        count, held = count + 1, held + sizes[b]
    rng.shuffle(window)
    return result + window


def _cells(ordered: Sequence[Sample]) -> tuple[list[str], list[int]] | None:
    """The file and row of each sample's image when every image is a cell of a dataset file
    (and no sample holds its own values), else None."""
    files, rows = [], []
    for sample in ordered:
        cell = storage.cells.parse(sample.image) if sample.values is None else None
        if cell is None:
            return None
        files.append(cell[0])
        rows.append(cell[1])
    return files, rows

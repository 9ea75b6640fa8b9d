"""`PackedSequence`: a Keras `PyDataset` over a pack, a thin adapter over `reading.Loader`.

Each batch is one read per shard touched (sorted indices, through the format's shard reader:
a memmap for npy), then an optional vectorised normalisation and one-hot expansion; raw and
npy packs need no decoding. The object pickles without its open files, so Keras `workers`
and `use_multiprocessing` each reopen the shards in their own process.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import keras
import numpy as np

from .reading.loader import Loader

if TYPE_CHECKING:
    from .augment import Augment


class PackedSequence(keras.utils.PyDataset):
    """Batches `(images, targets)` of one split; shuffled in a new seeded order every epoch.

    `shuffle="global"` draws batches from the whole split; `"windows"` visits shards in a
    shuffled order and shuffles within windows of `shuffle_window` records, each read ahead
    as one sequential run (for packs larger than RAM). `True` picks "windows" when the split
    exceeds half the machine's RAM, else "global". `rank`/`world_size` give this process its
    disjoint part of every epoch (multi-worker training), with as many batches as every other
    rank: `uneven="pad"` repeats a few samples, `"drop"` leaves a few out. `augment` (a
    `packer.Augment`) warps images and masks per (seed, epoch, sample index). A pack at a URL
    is read through a local shard cache in `cache_dir` (default: the user's cache folder).
    Other keyword arguments go to Keras' PyDataset (`workers`, `use_multiprocessing`,
    `max_queue_size`).

    `state_dict(batches=k)` after k batches of the current pass, and `load_state_dict(state)`
    on a fresh sequence with the same options, resume exactly: its pass then holds the batches
    the uninterrupted run had left in that epoch (`len` shrinks to match), the next
    `on_epoch_end` starts the next epoch whole.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        split: str = "train",
        batch_size: int = 32,
        shuffle: bool | str = True,
        one_hot: bool = False,
        normalize: str | None = None,
        drop_remainder: bool = False,
        seed: int | None = None,
        shuffle_window: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        uneven: str = "pad",
        augment: Augment | None = None,
        cache_dir: str | os.PathLike | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.loader = Loader(
            path,
            split,
            batch_size,
            shuffle,
            one_hot,
            normalize,
            drop_remainder,
            seed,
            shuffle_window,
            rank,
            world_size,
            uneven,
            augment,
            cache_dir=cache_dir,
        )

    def __len__(self) -> int:
        return len(self.loader) - self.loader.start

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} out of range ({len(self)} batches)")
        return self.loader.batch(self.loader.start + index)

    def on_epoch_end(self) -> None:
        """Next epoch, next seeded order (the same seed gives the same sequence of orders)."""
        self.loader.set_epoch(self.loader.epoch + 1)

    def state_dict(self, batches: int = 0) -> dict:
        """The reading position after `batches` batches of the current pass (the training
        loop knows how many it consumed; Keras workers read ahead). JSON-ready."""
        return self.loader.state_dict(batches)

    def load_state_dict(self, state: dict) -> None:
        """Resume from `state` (saved with the same options; its seed is taken)."""
        self.loader.load_state_dict(state)

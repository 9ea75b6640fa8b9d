"""`PackedSequence`: a Keras `PyDataset` over a pack, a thin adapter over `reading.Loader`.

Each batch is one read per shard touched (sorted indices, through the format's shard reader:
a memmap for npy), then an optional vectorised normalisation and one-hot expansion; raw and
npy packs need no decoding. The object pickles without its open files, so Keras `workers`
and `use_multiprocessing` each reopen the shards in their own process.
"""

from __future__ import annotations

import os

import keras
import numpy as np

from .reading.loader import Loader


class PackedSequence(keras.utils.PyDataset):
    """Batches `(images, targets)` of one split; shuffled in a new seeded order every epoch.

    `shuffle="global"` draws batches from the whole split; `"windows"` visits shards in a
    shuffled order and shuffles within windows of `shuffle_window` records, each read ahead
    as one sequential run (for packs larger than RAM). `True` picks "windows" when the split
    exceeds half the machine's RAM, else "global". A pack at a URL is read through a local
    shard cache in `cache_dir` (default: the user's cache folder). Other keyword arguments go
    to Keras' PyDataset (`workers`, `use_multiprocessing`, `max_queue_size`).
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
            cache_dir=cache_dir,
        )

    def __len__(self) -> int:
        return len(self.loader)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.loader.batch(index)

    def on_epoch_end(self) -> None:
        """Next epoch, next seeded order (the same seed gives the same sequence of orders)."""
        self.loader.set_epoch(self.loader.epoch + 1)

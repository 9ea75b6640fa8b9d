"""`PackedSequence`: a Keras `PyDataset` over a pack, batches straight from the shard files.

Each batch is one vectorised read per shard touched (sorted indices into a memmap), then an
optional vectorised normalisation and one-hot expansion; there is no decoding and no
per-sample Python. The object pickles without its open files, so Keras `workers` and
`use_multiprocessing` each reopen the memmaps in their own process.
"""

from __future__ import annotations

import os

import keras
import numpy as np

from .dataset import PackedDataset, Split
from .targets import Normalizer, one_hot_table


class PackedSequence(keras.utils.PyDataset):
    """Batches `(images, targets)` of one split; shuffled in a new seeded order every epoch."""

    def __init__(
        self,
        path: str | os.PathLike,
        split: str = "train",
        batch_size: int = 32,
        shuffle: bool = True,
        one_hot: bool = False,
        normalize: str | None = None,
        drop_remainder: bool = False,
        seed: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.path = os.fspath(path)
        self.split_name = split
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_remainder = drop_remainder
        self.seed = 0 if seed is None else seed
        self.epoch = 0
        self._split: Split | None = None
        dataset = self.split.dataset
        self.target_field = "masks" if dataset.task == "segmentation" else "labels"
        self.normalizer = Normalizer(normalize, dataset.manifest["stats"])
        self.one_hot = (
            one_hot_table(len(dataset.classes), dataset.manifest.get("ignore_index"), dataset.task)
            if one_hot
            else None
        )
        self._order = self._epoch_order()

    @property
    def split(self) -> Split:
        """The split, opened lazily so that each worker process opens its own files."""
        if self._split is None:
            self._split = PackedDataset(self.path)[self.split_name]
        return self._split

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_split"] = None
        return state

    def __len__(self) -> int:
        count = self.split.count
        return count // self.batch_size if self.drop_remainder else -(-count // self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} out of range ({len(self)} batches)")
        indices = self._order[index * self.batch_size : (index + 1) * self.batch_size]
        arrays = self.split.reader.read(indices)
        images = self.normalizer(arrays["images"])
        targets = arrays[self.target_field]
        if self.one_hot is not None:
            targets = self.one_hot[targets]
        return images, targets

    def on_epoch_end(self) -> None:
        """Next epoch, next seeded order (the same seed gives the same sequence of orders)."""
        self.epoch += 1
        self._order = self._epoch_order()

    def _epoch_order(self) -> np.ndarray:
        count = self.split.count
        if not self.shuffle:
            return np.arange(count)
        return np.random.default_rng([self.seed, self.epoch]).permutation(count)

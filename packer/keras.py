"""`PackedSequence`: a Keras `PyDataset` over a pack, batches straight from the shard files.

Each batch is one read per shard touched (sorted indices, through the format's shard reader:
a memmap for npy), then an optional vectorised normalisation and one-hot expansion; raw and
npy packs need no decoding. The object pickles without its open files, so Keras `workers`
and `use_multiprocessing` each reopen the shards in their own process.
"""

from __future__ import annotations

import os

import keras
import numpy as np

from . import order
from .dataset import PackedDataset, Split
from .schema import record_bytes
from .targets import Normalizer, one_hot_table


class PackedSequence(keras.utils.PyDataset):
    """Batches `(images, targets)` of one split; shuffled in a new seeded order every epoch.

    `shuffle="global"` draws batches from the whole split; `"windows"` visits shards in a
    shuffled order and shuffles within windows of `shuffle_window` records, each read ahead
    as one sequential run (for packs larger than RAM). `True` picks "windows" when the split
    exceeds half the machine's RAM, else "global".
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
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if shuffle not in (True, False, "global", "windows"):
            raise ValueError(f"shuffle must be True, False, 'global' or 'windows', not {shuffle!r}")
        self.path = os.fspath(path)
        self.split_name = split
        self.batch_size = batch_size
        self.drop_remainder = drop_remainder
        self.seed = 0 if seed is None else seed
        self.epoch = 0
        self._split: Split | None = None
        dataset = self.split.dataset
        self.target_field = "masks" if dataset.task == "segmentation" else "labels"
        record = record_bytes(dataset.fields)
        if shuffle is True:
            shuffle = "windows" if order.larger_than_ram(record * self.split.count) else "global"
        self.shuffle = shuffle
        self.window = shuffle_window or order.window_length(record, batch_size)
        self._prefetched: set[int] = set()
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
        if self.shuffle == "windows":
            self._prefetch_windows(index * self.batch_size // self.window)
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
        self._prefetched.clear()

    def _epoch_order(self) -> np.ndarray:
        count = self.split.count
        rng = np.random.default_rng([self.seed, self.epoch])
        if not self.shuffle:
            return np.arange(count)
        if self.shuffle == "windows":
            return order.windowed([s["count"] for s in self.split.shards], self.window, rng)
        return order.uniform(count, rng)

    def _prefetch_windows(self, window: int) -> None:
        """Have this window and the next read ahead, each as sequential runs of its shards."""
        for w in (window, window + 1):
            if w in self._prefetched or w * self.window >= len(self._order):
                continue
            self._prefetched.add(w)
            order.prefetch_window(self.split.reader, self._order, self.window, w)

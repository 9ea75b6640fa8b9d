"""`PackedSequence`: a Keras `PyDataset` over a pack, a thin adapter over `reading.Loader`.

Each batch is one read per shard touched (sorted indices, through the format's shard reader:
a memmap for npy), then an optional vectorised normalisation and one-hot expansion; raw and
npy packs need no decoding. With `workers=N`, N packer-owned processes read (and augment)
batches into a ring of shared-memory slots and the sequence hands them out in order; the
object pickles without its open files, so every worker maps the shards itself.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import keras
import numpy as np

from ..augment import Augment
from ..options import option
from ..reading.loader import Loader
from ..reading.options import BATCH_SIZE, SPLIT, LoaderOptions, takes
from ..reading.pipeline import Pipeline, asking_threads


@dataclass(frozen=True)
class SequenceOptions(LoaderOptions):
    """PackedSequence's own options, besides the readers' (`reading.options`)."""

    workers: int = option(
        1,
        "N > 1: N packer-owned processes read (and augment) batches into shared memory "
        "(no pixels through pipes), and Keras sees as many threads, which only ask for "
        "batches, so that model.fit's shuffled batch order is made ahead too.",
    )
    max_queue_size: int | None = option(
        None,
        "Batches the workers make ahead.",
        shown="twice workers for packer's workers, else Keras' default",
    )
    use_multiprocessing: bool = option(
        False,
        "Keras' own worker processes instead of packer's (batches pickled through pipes: slower).",
    )


@takes(SequenceOptions)
class PackedSequence(keras.utils.PyDataset):
    """Batches `(images, targets)` of one split; shuffled in a new seeded order every epoch.

    The options (below) are the readers' (`packer.reading.options`) and Keras' own:
    `workers`, `max_queue_size`, `use_multiprocessing`. A pack at a URL is read through a
    local shard cache.

    `state_dict(batches=k)` after k batches of the current pass names a place in the epoch's
    global order; `load_state_dict(state)` on a fresh sequence (any world size, batch size or
    workers; a state of any packer reader of this split with this shuffle mode) resumes
    exactly: its pass then holds the samples that epoch had left (`len` shrinks to match), the
    next `on_epoch_end` starts the next epoch whole. `BackupAndRestore` does this inside
    `model.fit`.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        split: str = SPLIT,
        batch_size: int = BATCH_SIZE,
        *,
        shuffle: bool | str = True,
        one_hot: bool = False,
        normalize: str | None = None,
        drop_remainder: bool = False,
        seed: int | None = None,
        rank: int | None = 0,
        world_size: int | None = 1,
        uneven: str | None = "pad",
        augment: Augment | None = None,
        max_boxes: int = 100,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
        shuffle_window: int | None = None,
        workers: int = 1,
        max_queue_size: int | None = None,
        use_multiprocessing: bool = False,
    ) -> None:
        o = SequenceOptions.of(locals())
        ours = workers > 1 and not use_multiprocessing
        if ours:
            max_queue_size = max_queue_size or 2 * workers
            keras_options = asking_threads(max_queue_size)
        else:
            keras_options = {"workers": workers, "use_multiprocessing": use_multiprocessing}
            if max_queue_size is not None:
                keras_options["max_queue_size"] = max_queue_size
        super().__init__(**keras_options)
        self.pipeline_workers = workers if ours else 0
        self.max_ahead = max_queue_size
        self._pipeline: Pipeline | None = None
        self._starting = threading.Lock()
        self.loader = Loader.with_options(path, split, batch_size, o)
        self.request_order = None

    def __len__(self) -> int:
        return len(self.loader)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} out of range ({len(self)} batches)")
        if self.request_order is not None:  # BackupAndRestore(reader=) watches fit's order
            self.request_order.saw(index)
        if self.pipeline_workers:
            return self._started_pipeline()[index]
        return self._produce(index)

    @property
    def _produce(self):
        """What makes a batch: a detection pack's targets padded to max_boxes (KerasHub's)."""
        return self.loader.padded_batch if self.loader.objects else self.loader.batch

    def __getstate__(self) -> dict:
        state = {**self.__dict__, "_pipeline": None}  # workers stay with their parent
        del state["_starting"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _starting=threading.Lock())

    def on_epoch_end(self) -> None:
        """Next epoch, next seeded order (the same seed gives the same sequence of orders)."""
        self.loader.set_epoch(self.loader.epoch + 1)
        self._tell_workers("set_epoch", self.loader.epoch)

    def close(self) -> None:
        """Stop packer's worker processes now (they also stop with the sequence or process)."""
        if self._pipeline is not None:
            self._pipeline.close()
            self._pipeline = None

    def _started_pipeline(self) -> Pipeline:
        """The worker processes, started on the first batch asked for (by any thread)."""
        with self._starting:
            if self._pipeline is None:
                self._pipeline = Pipeline(
                    self._produce, len(self), self.pipeline_workers, self.max_ahead
                )
            return self._pipeline

    def _tell_workers(self, method: str, *args) -> None:
        """Do to every worker's loader what was done to ours, and start the pass over."""
        if self._pipeline is not None:
            self._pipeline.broadcast(method, *args)
            self._pipeline.length = len(self)
            self._pipeline.seek(0)

    def state_dict(self, batches: int = 0) -> dict:
        """The reading position after `batches` batches of the current pass (the training
        loop knows how many it consumed; Keras workers read ahead). JSON-ready."""
        return self.loader.state_dict(batches)

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Resume from `state` (or every rank's, which must agree); its seed is taken."""
        self.loader.load_state_dict(state)
        self._tell_workers("load_state_dict", state)

"""`packer.parallel`: any Keras `Sequence`/`PyDataset`, its batches made in packer's worker
processes and handed over through shared memory instead of pickled through pipes.

Keras is imported inside `parallel`, so `import packer` stays free of TensorFlow. Users reach
the function as `packer.parallel` (or `from packer import parallel`): the package exports it.
"""

from __future__ import annotations

import functools
from typing import Any

from ..reading.pipeline import Pipeline, asking_threads

_HOOKS = ("on_epoch_begin", "on_epoch_end")


def parallel(sequence: Any, workers: int = 4, max_queue_size: int | None = None) -> Any:
    """A `keras.utils.PyDataset` giving `sequence`'s batches, in order, made by `workers`
    processes that each hold a copy of `sequence` (so it must pickle).

    Use it wherever the sequence went: `model.fit(packer.parallel(seq, workers=4), epochs=...)`.
    `on_epoch_begin`/`on_epoch_end` reach the sequence itself and every worker's copy.
    At most `max_queue_size` batches (default: twice `workers`) are made ahead; each takes
    shared memory the size of a batch. Keras sees as many threads, which only ask for
    batches (so that `model.fit`'s shuffled batch order is made ahead too): the work is ours.
    Call `.close()` to stop the workers early; they also stop when the dataset is collected
    and die with the process. A worker's exception is raised here as `WorkerError`, with the
    worker's traceback in its message.
    """
    return _dataset_class()(sequence, workers, max_queue_size)


@functools.cache
def _dataset_class() -> type:
    """The PyDataset subclass, made on first use so that Keras loads only when asked for."""
    import keras

    class ParallelDataset(keras.utils.PyDataset):
        """`sequence`'s batches from packer's shared-memory worker processes."""

        def __init__(self, sequence: Any, workers: int, max_queue_size: int | None) -> None:
            self.pipeline = Pipeline(
                sequence.__getitem__, _length(sequence), workers, max_queue_size
            )
            super().__init__(**asking_threads(self.pipeline.ahead))
            self.sequence = sequence
            self.hooks = [name for name in _HOOKS if _overrides(sequence, name, keras)]
            self.offset = 0  # batches of this epoch done before a resume
            self.request_order = None  # BackupAndRestore(reader=) watches fit's order

        def __len__(self) -> int:
            return len(self.pipeline) - self.offset

        def __getitem__(self, index: int) -> Any:
            if not 0 <= index < len(self):
                raise IndexError(f"batch {index} out of range ({len(self)} batches)")
            if self.request_order is not None:
                self.request_order.saw(index)
            return self.pipeline[self.offset + index]

        def on_epoch_begin(self) -> None:
            self._forward("on_epoch_begin")

        def on_epoch_end(self) -> None:
            self.offset = 0
            self._forward("on_epoch_end")

        def state_dict(self, batches: int = 0) -> dict:
            """The position after `batches` batches of this epoch: the sequence's own state
            when it has one (a PackedSequence's place in the epoch's order), else the count."""
            if hasattr(self.sequence, "state_dict"):
                return self.sequence.state_dict(batches)
            return {"batches": self.offset + batches}

        def load_state_dict(self, state: dict) -> None:
            """Go on from `state`: in the sequence and every worker's copy, or by skipping
            the batches it counts."""
            if hasattr(self.sequence, "load_state_dict"):
                self.sequence.load_state_dict(state)
                self.pipeline.broadcast("load_state_dict", state)
                self.pipeline.length = _length(self.sequence)
            else:
                self.offset = int(state["batches"])
            self.pipeline.seek(self.offset)

        def close(self) -> None:
            """Stop the worker processes now."""
            self.pipeline.close()

        def _forward(self, hook: str) -> None:
            if hook not in self.hooks:
                return
            getattr(self.sequence, hook)()
            self.pipeline.broadcast(hook)
            self.pipeline.length = _length(self.sequence)
            self.pipeline.seek(0)

    return ParallelDataset


def _overrides(sequence: Any, hook: str, keras: Any) -> bool:
    """Whether `sequence` does something in `hook` (Keras' own is a no-op not worth a call)."""
    method = getattr(type(sequence), hook, None)
    return method is not None and method is not getattr(keras.utils.PyDataset, hook, None)


def _length(sequence: Any) -> int:
    """The number of batches; Keras 3 datasets may say it through `num_batches`."""
    if hasattr(sequence, "__len__"):
        return len(sequence)
    count = getattr(sequence, "num_batches", None)
    if count is None:
        raise ValueError("packer.parallel needs a sequence of known length")
    return count

"""`packer.keras.BackupAndRestore`: Keras' callback, plus the reader's place in the epoch.

Keras' own `BackupAndRestore(save_freq=N)` saves weights mid-epoch but restarts the epoch on
restore, so a `model.fit` killed at batch k trains batches 0..k-1 twice. This one is told the
packer reader `fit` trains from (`reader=`: a `PackedSequence` with or without workers,
`packer.parallel(...)`, `packer.tf.dataset(...)`), saves its position too and restores it, so
the restarted `fit` continues with batch k: with deterministic ops its final weights equal an
uninterrupted run's.

`fit` counts an epoch's steps before any callback runs, and Keras has no public way to change
that count: the shorter resumed epoch (and the whole ones after it) is set through
`keras_compat`, the one module that touches Keras internals. (Letting the resumed pass run out
instead ends the epoch publicly, but the TensorFlow backend then counts one more optimizer
step, so Adam's next updates differ.) Keras' `shuffle=True` reorders whole batches with
Python's `random`, which a new process cannot replay: the reader notes the order Keras asks
for batches in, and the callback refuses a reordering in one line.
Each backup is a folder written whole and then renamed, so a SIGKILL at any moment leaves the
previous backup or the new one, never weights from one step with the position of another.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import keras

from ..errors import ReorderError
from . import compat as keras_compat

_WEIGHTS, _METADATA = "model.weights.h5", "training_metadata.json"


class RequestOrder:
    """The batch indices Keras asks a reader for: more than `slack` (Keras' threads asking at
    once) ahead of the requests so far means `fit` reordered them (`shuffle=True`). Counted
    from `fit`'s start and never reset: `shuffle` holds for every epoch, so the first tells,
    and the next epoch's first requests may race the last ones of the epoch before."""

    def __init__(self, slack: int) -> None:
        self.slack = max(int(slack), 1) - 1
        self.asked = 0
        self.reordered: int | None = None  # the first index asked too early, if any

    def saw(self, index: int) -> None:
        if self.reordered is None and index > self.asked + self.slack:
            self.reordered = index
        self.asked += 1


@functools.cache  # once per process
def _warn_once_without_reader() -> None:
    """Say that mid-epoch backups without `reader=` restart the epoch: with Keras' callback
    alone a killed `fit` trains the batches before the backup twice."""
    warnings.warn(
        "packer.keras.BackupAndRestore(save_freq=N) without reader=: a restart repeats the "
        "interrupted epoch from its start; give reader= the PackedSequence, "
        "packer.parallel(...) or packer.tf.dataset(...) that fit trains from to resume "
        "mid-epoch",
        UserWarning,
        stacklevel=4,
    )


class BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Back up weights, epoch and `reader`'s position every `save_freq` batches (or every
    epoch), and continue from the last backup when `fit` starts again with the same command.

    `reader` is what `fit` trains from: a `PackedSequence`, `packer.parallel(...)` or
    `packer.tf.dataset(..., repeat=False)` (with `repeat=True` save its iterator with
    `tf.train.Checkpoint` instead). Give `fit` `shuffle=False` with a `PyDataset` reader: it
    shuffles its samples itself, and a Keras reordering is refused (Keras' own worker
    processes, `use_multiprocessing=True`, hide the order asked in). Without `reader` this is
    Keras' own callback: a restart repeats the interrupted epoch from its start. The other
    arguments are Keras' own.
    """

    def __init__(
        self,
        backup_dir: str | os.PathLike,
        save_freq: str | int = "epoch",
        double_checkpoint: bool = False,
        delete_checkpoint: bool = True,
        *,
        reader: Any = None,
    ) -> None:
        super().__init__(os.fspath(backup_dir), save_freq, delete_checkpoint=delete_checkpoint)
        if reader is None and save_freq != "epoch":
            _warn_once_without_reader()
        self.double_checkpoint = double_checkpoint  # ours to honour (older Keras lacks it)
        self._reader = _position_of(reader)  # what saves and restores the position
        self._iterator: Any = None  # fit's epoch iterator
        self._saves = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self._reader is not None:
            self._iterator = keras_compat.fit_epoch_iterator()
            if hasattr(self._reader, "request_order"):  # a PyDataset: Keras may reorder it
                self._reader.request_order = RequestOrder(self._reader.workers)
        self._load_model()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._iterator is not None:  # a resumed epoch was shorter: whole ones from now on
            keras_compat.set_epoch_steps(self._iterator)
        super().on_epoch_end(epoch, logs)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._refuse_reordering()
        if self._should_save_on_batch(batch):
            self._save_model(batch + 1)

    def _refuse_reordering(self) -> None:
        order = getattr(self._reader, "request_order", None)
        if order is not None and order.reordered is not None:
            raise ReorderError(
                f"model.fit reordered {type(self._reader).__name__}'s batches (asked for batch "
                f"{order.reordered} first): give fit(..., shuffle=False); the reader shuffles "
                f"its samples itself, in an order a restart can replay"
            )

    def _save_model(self, batches: int | None = None) -> None:
        """Write weights, epoch and reader position into a new folder, then rename it into
        place (the last `double_checkpoint + 1` backups are kept)."""
        epoch, position = self._current_epoch, None
        if self._reader is not None:
            position = self._reader.state_dict(batches or 0)
            if batches is not None and batches == keras_compat.epoch_steps(self._iterator):
                epoch += 1  # the epoch's last batch: the reader names the next epoch already
        root = Path(self.backup_dir)
        root.mkdir(parents=True, exist_ok=True)
        self._saves = max(self._saves, *_backups(root), 0) + 1
        work = root / f".tmp-{self._saves}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        self.model.save_weights(work / _WEIGHTS)
        metadata = {"epoch": epoch, "batch": self._last_batch_seen, "reader": position}
        (work / _METADATA).write_text(json.dumps(metadata))
        for path in (work / _WEIGHTS, work / _METADATA, work):
            _fsync(path)
        os.replace(work, root / str(self._saves))
        _fsync(root)
        for old in sorted(_backups(root))[: -1 - bool(self.double_checkpoint)]:
            shutil.rmtree(root / str(old), ignore_errors=True)

    def _load_model(self) -> None:
        """Restore the newest complete backup, if any: weights, epoch, reader position."""
        root = Path(self.backup_dir)
        saves = sorted(_backups(root)) if root.is_dir() else []
        if not saves:
            return
        if not self.model.built:
            raise ValueError(
                "BackupAndRestore needs a built model: call it on a batch, or give its first "
                "layer an Input, before fit()"
            )
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        newest = root / str(saves[-1])
        self.model.load_weights(newest / _WEIGHTS)
        metadata = json.loads((newest / _METADATA).read_text())
        self.model._initial_epoch = self._current_epoch = metadata["epoch"]
        self._saves = saves[-1]
        if self._reader is not None and metadata.get("reader") is not None:
            self._reader.load_state_dict(metadata["reader"])
            keras_compat.set_epoch_steps(self._iterator, len(self._reader))


def _position_of(reader: Any) -> Any:
    """What saves and restores `reader`'s position: the reader itself, or a packer.tf.dataset's
    `packer_position`; a one-line error for anything else."""
    if reader is None:
        return None
    position = getattr(reader, "packer_position", reader)
    if not (hasattr(position, "state_dict") and hasattr(position, "load_state_dict")):
        raise TypeError(
            f"BackupAndRestore(reader=...) takes a packer reader (PackedSequence, "
            f"packer.parallel(...), packer.tf.dataset(..., repeat=False)), not "
            f"{type(reader).__name__}"
        )
    return position


def _backups(root: Path) -> list[int]:
    """The numbers of the complete backups under `root`."""
    return [int(p.name) for p in root.iterdir() if p.name.isdigit()]


def _fsync(path: Path) -> None:
    """Flush a file or folder to disk (a backup must survive a crash, not only a kill)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""`packer.keras.BackupAndRestore`: Keras' callback, plus the reader's place in the epoch.

Keras' own `BackupAndRestore(save_freq=N)` saves weights mid-epoch but restarts the epoch on
restore, so a `model.fit` killed at batch k trains batches 0..k-1 twice. This one also saves
the position of the packer reader `fit` is training from (`PackedSequence` with or without
workers, `packer.parallel`, `packer.tf.dataset`) and restores it, so the restarted `fit`
continues with batch k: with deterministic ops its final weights equal an uninterrupted run's.

A callback is not told what `fit` trains from, so `on_train_begin` finds it in `fit`'s own
frame (its `epoch_iterator`, in every Keras 3 backend), and sets that iterator's batch count
to the shorter resumed epoch (Keras read it before callbacks run). Keras' `shuffle=True`
reorders whole batches with Python's `random`, which a new process cannot replay, so the
callback asks for a packer reader's batches in order: its own seeded order already shuffles.
Each backup is a folder written whole and then renamed, so a SIGKILL at any moment leaves the
previous backup or the new one, never weights from one step with the position of another.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import keras

_WEIGHTS, _METADATA = "model.weights.h5", "training_metadata.json"


class BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Back up weights, epoch and the reader's position every `save_freq` batches (or every
    epoch), and continue from the last backup when `fit` starts again with the same command.

    The arguments are Keras' own. The reader is found in `fit`; a `packer.tf.dataset` must be
    built with `repeat=False` (each epoch one pass; with `repeat=True` save its iterator with
    `tf.train.Checkpoint` instead). Other data (NumPy arrays, other datasets) is backed up and
    restored as Keras' own callback does: from the start of the interrupted epoch.
    """

    def __init__(
        self,
        backup_dir: str | os.PathLike,
        save_freq: str | int = "epoch",
        double_checkpoint: bool = False,
        delete_checkpoint: bool = True,
    ) -> None:
        super().__init__(os.fspath(backup_dir), save_freq, double_checkpoint, delete_checkpoint)
        self._iterator: Any = None  # fit's epoch iterator
        self._reader: Any = None  # what saves and restores the position, when packer's
        self._saves = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._iterator = _fit_epoch_iterator()
        self._reader = _reader_of(self._iterator)
        if self._reader is not None and hasattr(self._iterator.data_adapter, "shuffle"):
            _in_order(self._iterator.data_adapter)
        self._load_model()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._iterator is not None:  # a resumed epoch was shorter: whole ones from now on
            self._iterator._num_batches = self._iterator.data_adapter.num_batches
        super().on_epoch_end(epoch, logs)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self._should_save_on_batch(batch):
            self._save_model(batch + 1)

    def _save_model(self, batches: int | None = None) -> None:
        """Write weights, epoch and reader position into a new folder, then rename it into
        place (the last `double_checkpoint + 1` backups are kept)."""
        epoch, position = self._current_epoch, None
        if self._reader is not None:
            position = self._reader.state_dict(batches or 0)
            if batches is not None and batches == self._iterator.num_batches:
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
            self._iterator._num_batches = len(self._reader)


def _fit_epoch_iterator() -> Any:
    """The `epoch_iterator` of the `fit` call running this callback (None outside fit)."""
    frame = sys._getframe(2)
    while frame is not None:
        candidate = frame.f_locals.get("epoch_iterator")
        if hasattr(candidate, "data_adapter") and hasattr(candidate, "_num_batches"):
            return candidate
        frame = frame.f_back
    return None


def _reader_of(iterator: Any) -> Any:
    """The object that saves and restores the position of fit's packer reader, or None."""
    if iterator is None:
        return None
    adapter = iterator.data_adapter
    data = getattr(adapter, "py_dataset", None)
    if data is None:  # a tf.data dataset: packer.tf.dataset carries its passes
        return getattr(getattr(adapter, "_dataset", None), "packer_position", None)
    return data if hasattr(data, "state_dict") and hasattr(data, "load_state_dict") else None


def _in_order(adapter: Any) -> None:
    """Have Keras ask for the batches in order (a packer reader shuffles its samples itself)."""
    adapter.shuffle = False
    if getattr(adapter, "enqueuer", None) is not None:
        adapter.enqueuer.shuffle = False


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

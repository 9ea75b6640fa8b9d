"""A Keras training the backup tests run in other processes (and kill): a tiny segmenter fit
for two epochs from one packer reader, backed up every batch. Light imports at the top: the
reader's worker processes may import this module."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

READERS = ("sequence", "sequence-workers", "parallel", "tf", "plain")


def data(path: str, reader: str):
    """The reader `fit` trains from: the same seeded batches of 3 whatever runs them; "plain",
    a keras.utils.PyDataset of the pack's batches in pack order that is no packer reader (Keras
    shuffles its batches)."""
    if reader == "tf":
        import packer.tf

        return packer.tf.dataset(path, batch_size=3, seed=4)
    import packer
    from packer.keras import PackedSequence

    if reader == "parallel":
        return packer.parallel(PackedSequence(path, batch_size=3, seed=4), workers=2)
    if reader == "plain":
        import keras

        class Plain(keras.utils.PyDataset):
            def __init__(self) -> None:
                super().__init__()
                self.packed = PackedSequence(path, batch_size=3, shuffle=False)

            def __len__(self) -> int:
                return len(self.packed)

            def __getitem__(self, index: int):
                return self.packed[index]

        return Plain()
    workers = 2 if reader == "sequence-workers" else 1
    return PackedSequence(path, batch_size=3, seed=4, workers=workers)


def train(
    path: str,
    reader: str,
    out: Path,
    kill_at: int = 0,
    keras_own: bool = False,
    save_freq: str | int = 1,
    shuffled: bool = False,
) -> None:
    """Fit with deterministic ops, backing up every `save_freq` batches or every epoch (with
    Keras' own callback when `keras_own`); SIGKILL itself right after step `kill_at`. The final
    weights go to out/final.npz, each step's batch number to out/steps.log. `shuffled`: fit's
    shuffle=True for a packer reader too (which BackupAndRestore refuses)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from packer.keras import BackupAndRestore

    keras.utils.set_random_seed(0)
    tf.config.experimental.enable_op_determinism()
    model = keras.Sequential(
        [
            keras.Input((24, 32, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(4, 1),
        ]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)

    class Kill(keras.callbacks.Callback):
        steps = 0

        def on_train_batch_end(self, batch, logs=None):
            Kill.steps += 1
            with open(out / "steps.log", "a") as log:
                log.write(f"{batch}\n")
            if Kill.steps == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # no chance to save anything more

    reading = data(path, reader)
    if keras_own:
        backup = keras.callbacks.BackupAndRestore(out / "backup", save_freq=save_freq)
    else:
        told = None if reader == "plain" else reading  # plain: Keras' own behaviour
        backup = BackupAndRestore(out / "backup", save_freq=save_freq, reader=told)
    shuffle = reader == "plain" or shuffled  # Keras reorders only readers it is not told of
    model.fit(reading, epochs=2, verbose=0, shuffle=shuffle, callbacks=[backup, Kill()])
    np.savez(out / "final.npz", *model.get_weights())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("reader", choices=READERS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--keras-own", action="store_true")
    parser.add_argument("--save-freq", default="1", help="batches, or 'epoch'")
    parser.add_argument("--shuffled", action="store_true")
    args = parser.parse_args()
    freq = args.save_freq if args.save_freq == "epoch" else int(args.save_freq)
    train(args.path, args.reader, args.out, args.kill_at, args.keras_own, freq, args.shuffled)

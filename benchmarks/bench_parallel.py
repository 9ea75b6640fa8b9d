"""`packer.parallel` against Keras' own ways of running a user's PyDataset, in one run.

The dataset is the issue's case: a `keras.utils.PyDataset` whose `__getitem__` does per-batch
Python/NumPy work (32 random 224x224 crops of an in-memory uint8 array, random flips, float32
normalisation) and returns `(x, y)`, x float32 (32, 224, 224, 3) (19 MB). Rows:

  keras workers=1            the PyDataset as it is
  keras workers=2 threads    workers=2 (Keras' thread pool)
  keras workers=2 processes  workers=2, use_multiprocessing=True (batches pickled through pipes)
  packer.parallel(2)         packer.parallel(ds, workers=2): shared-memory worker processes

Each row is iterated the way `model.fit` iterates it: Keras' PyDatasetAdapter, epoch by epoch
(on_epoch_begin, its numpy iterator, on_epoch_end), the batch dropped once received (no model,
so the rows measure what the input side delivers). The first epoch starts the workers and is
timed apart; img/s counts the epochs after it, per-epoch costs (Keras restarts its pool
every epoch) included. `--fit` instead times a real `model.fit` of a one-layer model.

    python benchmarks/bench_parallel.py [--batches 64] [--epochs 3] [--fit]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np
from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

from packer.parallel import parallel

BATCH, CROP, SOURCE, POOL = 32, 224, 256, 96
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


class CropDataset(keras.utils.PyDataset):
    """Random crops + flips + normalisation of a uint8 array held in memory: per-batch NumPy."""

    def __init__(self, batches: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.batches = batches
        self.epoch = 0
        rng = np.random.default_rng(0)
        self.images = rng.integers(0, 256, (POOL, SOURCE, SOURCE, 3), np.uint8)
        self.labels = rng.integers(0, 10, POOL)

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng((self.epoch, index))
        picks = rng.integers(0, POOL, BATCH)
        corners = rng.integers(0, SOURCE - CROP + 1, (BATCH, 2))
        flips = rng.random(BATCH) < 0.5
        crops = np.empty((BATCH, CROP, CROP, 3), np.uint8)
        for j, (pick, (top, left), flip) in enumerate(zip(picks, corners, flips, strict=True)):
            crop = self.images[pick, top : top + CROP, left : left + CROP]
            crops[j] = crop[:, ::-1] if flip else crop
        x = crops.astype(np.float32)
        x *= 1 / 255
        x -= MEAN
        x /= STD
        return x, self.labels[picks]

    def on_epoch_end(self) -> None:
        self.epoch += 1


def iterate(dataset: keras.utils.PyDataset, epochs: int) -> list[float]:
    """Seconds per epoch, going through the dataset as model.fit does (minus the model)."""
    adapter = PyDatasetAdapter(dataset, shuffle=False)
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        adapter.on_epoch_begin()
        for batch in adapter.get_numpy_iterator():
            del batch
        adapter.on_epoch_end()
        times.append(time.perf_counter() - start)
    return times


def fit(dataset: keras.utils.PyDataset, epochs: int) -> list[float]:
    """Seconds per epoch of a real model.fit of a global-average-pool + dense model."""

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.start)

    times: list[float] = []
    model = keras.Sequential(
        [
            keras.Input((CROP, CROP, 3)),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(dataset, epochs=epochs, verbose=0, callbacks=[Timer()])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=64, help="batches per epoch")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs after the first")
    parser.add_argument("--fit", action="store_true", help="time a real model.fit instead")
    args = parser.parse_args()
    run = fit if args.fit else iterate
    images = args.batches * BATCH
    rows = {
        "keras workers=1": lambda: CropDataset(args.batches),
        "keras workers=2 threads": lambda: CropDataset(args.batches, workers=2),
        "keras workers=2 processes": lambda: CropDataset(
            args.batches, workers=2, use_multiprocessing=True
        ),
        "packer.parallel(2)": lambda: parallel(CropDataset(args.batches), workers=2),
    }
    print(f"{os.cpu_count()} cores; {args.batches} batches of {BATCH} per epoch; ", end="")
    print("model.fit" if args.fit else "PyDatasetAdapter numpy iterator, no model")
    print(f"{'':28} {'first epoch s':>13} {'img/s':>8}")
    rates = {}
    for name, make in rows.items():
        dataset = make()
        first, *rest = run(dataset, 1 + args.epochs)
        rates[name] = images * len(rest) / sum(rest)
        print(f"{name:28} {first:13.2f} {rates[name]:8.0f}", flush=True)
        if hasattr(dataset, "close"):
            dataset.close()
    ours = rates["packer.parallel(2)"]
    print(f"packer.parallel(2) / keras workers=1:           {ours / rates['keras workers=1']:.2f}x")
    threads = rates["keras workers=2 threads"]
    print(f"packer.parallel(2) / keras workers=2 threads:   {ours / threads:.2f}x")
    processes = rates["keras workers=2 processes"]
    print(f"packer.parallel(2) / keras workers=2 processes: {ours / processes:.2f}x")


if __name__ == "__main__":
    main()

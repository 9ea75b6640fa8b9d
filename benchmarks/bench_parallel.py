"""`packer.parallel` against Keras' own ways of running a user's PyDataset, in one run.

The dataset is the issue's case: a `keras.utils.PyDataset` whose `__getitem__` does per-batch
Python/NumPy work (32 random 224x224 crops of an in-memory uint8 array, random flips, float32
normalisation) and returns `(x, y)`, x float32 (32, 224, 224, 3) (19 MB). Rows:

  keras workers=1            the PyDataset as it is
  keras workers=2 threads    workers=2 (Keras' thread pool)
  keras workers=2 processes  workers=2, use_multiprocessing=True (batches pickled through pipes)
  packer.parallel(2)         packer.parallel(ds, workers=2): shared-memory worker processes

and two ceilings outside Keras, in the same turns: the epoch's batches split between 2 forked
processes that only call `__getitem__` (what any 2-process design could reach), and that also
copy its arrays into a buffer of their own (what a design reaches that moves the user's
freshly allocated arrays into shared memory: one copy of each batch, as packer.parallel does).

Each row is iterated the way `model.fit` iterates it: Keras' PyDatasetAdapter, epoch by epoch
(on_epoch_begin, its numpy iterator, on_epoch_end), each batch dropped once received (no
model, so the rows measure what the input side delivers). The first epoch starts the workers
and is timed apart; then the rows take turns, one epoch each, for `--rounds` rounds. img/s is
from each row's median epoch, per-epoch costs (Keras restarts its pool every epoch) included;
ratios are given of medians and of each row's best epoch (the least disturbed). CPU ms/batch
adds up every process of the row (parent, threads, workers): on a machine shared with other
work wall-clock ratios drift, and this shows what each way costs.

    python benchmarks/bench_parallel.py [--batches 64] [--rounds 7]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import harness
import keras
import numpy as np
from harness import cpu_seconds, forked_together
from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

from packer import parallel

BATCH, CROP, SOURCE, POOL = 32, 224, 256, 96
CEILING = "2 bare processes"
CEILING_COPY = "2 bare processes + copy"
# per-channel mean and 1/std, repeated along a row: NumPy broadcasts a length-3 axis slowly
MEAN = np.tile(np.array([0.485, 0.456, 0.406], np.float32) * 255, CROP)
SCALE = np.tile(1 / (np.array([0.229, 0.224, 0.225], np.float32) * 255), CROP)


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
        rows = x.reshape(BATCH, CROP, CROP * 3)
        rows -= MEAN
        rows *= SCALE
        return x, self.labels[picks]

    def on_epoch_end(self) -> None:
        self.epoch += 1


def epoch(adapter: PyDatasetAdapter) -> tuple[float, float]:
    """Wall and CPU seconds (all processes) for one epoch, going through the dataset as
    model.fit does (minus the model)."""
    start, cpu = time.perf_counter(), cpu_seconds()
    adapter.on_epoch_begin()
    for batch in adapter.get_numpy_iterator():
        del batch
    adapter.on_epoch_end()
    return time.perf_counter() - start, cpu_seconds() - cpu


def _bare_worker(batches: int, indices: range, copy: bool, barrier, queue) -> None:
    """One process of a ceiling row: `__getitem__` for `indices` (and a copy of each batch's
    arrays into buffers allocated once); reports (start, end, CPU seconds)."""
    dataset = CropDataset(batches)
    buffers = [np.empty_like(a) for a in dataset[0]]
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for index in indices:
        arrays = dataset[index]
        if copy:
            for buffer, array in zip(buffers, arrays, strict=True):
                np.copyto(buffer, array)
    queue.put((start, time.perf_counter(), time.process_time() - cpu))


def bare_epoch(batches: int, copy: bool, processes: int = 2) -> tuple[float, float]:
    """Wall and CPU seconds for one epoch's batches split between `processes` forked processes
    (from all being ready to the last one done), without Keras or any hand-over."""
    reports = forked_together(
        _bare_worker, [(batches, range(k, batches, processes), copy) for k in range(processes)]
    )
    return max(r[1] for r in reports) - min(r[0] for r in reports), sum(r[2] for r in reports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=64, help="batches per epoch")
    parser.add_argument("--rounds", type=int, default=7, help="timed epochs per row")
    args = parser.parse_args()
    make = {
        "keras workers=1": lambda: CropDataset(args.batches),
        "keras workers=2 threads": lambda: CropDataset(args.batches, workers=2),
        "keras workers=2 processes": lambda: CropDataset(
            args.batches, workers=2, use_multiprocessing=True
        ),
        "packer.parallel(2)": lambda: parallel(CropDataset(args.batches), workers=2),
    }
    datasets = {name: build() for name, build in make.items()}
    adapters = {name: PyDatasetAdapter(d, shuffle=False) for name, d in datasets.items()}
    rows = {name: functools.partial(epoch, adapter) for name, adapter in adapters.items()}
    rows[CEILING] = functools.partial(bare_epoch, args.batches, False)
    rows[CEILING_COPY] = functools.partial(bare_epoch, args.batches, True)
    first = {name: run()[0] for name, run in rows.items()}
    # rows take turns, one epoch each, so a busy moment hits them all alike
    runs = harness.side_by_side(rows, 0, args.rounds, measure=lambda run, _: run())
    datasets["packer.parallel(2)"].close()
    images = args.batches * BATCH
    walls = {name: [wall for wall, _ in r] for name, r in runs.items()}
    rates = {name: images / statistics.median(w) for name, w in walls.items()}
    best = {name: images / min(w) for name, w in walls.items()}
    cpu = {name: statistics.median(c for _, c in r) / args.batches for name, r in runs.items()}
    notes = (
        f"load average {os.getloadavg()[0]:.1f} at the end (shared machine, compare within a "
        f"run); {args.batches} batches of {BATCH} per epoch, {args.rounds} epochs per row in "
        "turns; iterated by PyDatasetAdapter's numpy iterator (as model.fit), no model"
    )
    rows_out = [
        [name, f"{first[name]:.2f}", rate,
         f"{images / max(walls[name]):.0f}..{images / min(walls[name]):.0f}",
         f"{cpu[name] * 1e3:.1f}"]
        for name, rate in rates.items()
    ]  # fmt: skip
    headers = ["row", "first epoch s", "img/s", "min..max", "CPU ms/batch"]
    harness.report("packer.parallel vs Keras' workers", headers, rows_out, notes)
    ratio = [
        [f"packer.parallel(2) / {name}",
         f"{rates['packer.parallel(2)'] / rates[name]:.2f}x",
         f"{best['packer.parallel(2)'] / best[name]:.2f}x"]
        for name in list(rates)[:3]
    ] + [
        [f"{name} / keras workers=1 (no Keras, no hand-over, no per-epoch cost)",
         f"{rates[name] / rates['keras workers=1']:.2f}x",
         f"{best[name] / best['keras workers=1']:.2f}x"]
        for name in (CEILING, CEILING_COPY)
    ]  # fmt: skip
    print(harness.table(["ratio", "medians", "best epochs"], ratio))
    bound = 2 * cpu["keras workers=1"] / cpu["packer.parallel(2)"]
    print(f"\ntwo idle cores would allow packer.parallel(2) at most {bound:.2f}x keras workers=1")


if __name__ == "__main__":
    main()

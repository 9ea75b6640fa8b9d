"""What a batch costs when images are small: every reader against a plain NumPy gather of the
same memmapped arrays, a mixture against one pack, side by side in one run.

Small images make a batch a few hundred KB, so the Python work around the copy (which
samples, which buffers, which shards, the adapter's wrapping) is most of its time. Contenders,
each timed over whole epochs of shuffled uint8 batches, warm page cache (the shard files are
read right before every timed run), in interleaved rounds:

  32x32 classification (CIFAR-sized), batch 32, one pack of N samples and a mixture of three
  packs (a half, a third and a sixth of N, each once per epoch: the same samples per epoch):

    NumPy gather            per batch, sorted indices of a seeded permutation, `images[idx]`
                            and `labels[idx]` of the pack's memmaps: the goal's base
    NumPy gather, 3 packs   the same over the three packs' memmaps, each batch's indices
                            split by pack: the least a mixture's read can do
    PackedSequence          the Keras reader (one pack, and the mixture)
    packer.torch            `PackedDataset` in a `DataLoader(batch_size=None, num_workers=0)`
    packer.tf.dataset       a new iterator every epoch, as Keras' fit makes one
    DataLoader floor        the same DataLoader over a dataset that returns two ready tensors
    tf.data floor           `Dataset.range(batches).map(numpy_function)` handing back two
                            ready arrays, prefetched: the fixed cost of packer.tf.dataset's shape
    tf.data, no function    `Dataset.from_tensors(ready arrays).repeat(batches)`: what any
                            tf.data iterator costs per element in an eager loop

  240x176 segmentation, batch 16: PackedSequence and packer.torch (int64 targets, its default,
  and uint8), the torch dataset's items taken without a DataLoader, the DataLoader floor,
  and the uint8 -> int64 cast of a batch's masks alone (the default targets' own work).

Ratios are taken per round (each contender over its base in the same round) and reported as
the median and range over rounds. Then where a batch's time goes: the reader's steps timed
one by one over the same epochs (the sampler's indices, the shard reads, the transform) and
the rest of each adapter's batch time beside them, in microseconds per batch.

    python benchmarks/bench_small_batches.py [--samples 6000] [--rounds 5] [--seconds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import harness
import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf
import torch
from torch.utils.data import DataLoader, Dataset

import packer
import packer.tf
from packer.keras import PackedSequence
from packer.synthetic import make_classification, make_segmentation
from packer.torch import PackedDataset

SMALL, LARGE = (32, 32), (240, 176)  # W x H
SHARES = (3, 2, 1)  # the mixture's packs, in sixths of the samples
GOAL = 0.9

Epoch = Callable[[], int]  # reads one epoch, returns the samples read


def make_packs(root: Path, samples: int, segmentation: int) -> dict:
    """The 32x32 pack, the mixture of three 32x32 packs, the 240x176 segmentation pack."""

    def small(name: str, count: int, seed: int) -> Path:
        per_class = {f"c{k}": count // 10 + (k < count % 10) for k in range(10)}
        src = make_classification(root / f"src-{name}", per_class, SMALL, seed)
        return Path(packer.pack(src, out=root / name, size=SMALL, workers=2, progress=False).root)

    counts = [samples * s // sum(SHARES) for s in SHARES]
    counts[0] += samples - sum(counts)
    parts = [small(f"part{k}", c, k + 1) for k, c in enumerate(counts)]
    src = make_segmentation(root / "src-seg", {"train": segmentation}, LARGE, 0, ".jpg")
    seg = packer.pack(src, out=root / "seg", size=LARGE, workers=2, progress=False).root
    return {
        "one": small("one", samples, 0),
        "mixture": packer.Mixture([packer.Stream(p) for p in parts]),
        "parts": parts,
        "seg": Path(seg),
    }


def shard_arrays(pack: Path) -> list[np.ndarray]:
    """A one-shard pack's images and labels, as read-only memmaps."""
    train = pack / "train"
    return [np.load(next(train.glob(f"*.{f}.npy")), mmap_mode="r") for f in ("images", "labels")]


def numpy_epoch(packs: list[list[np.ndarray]], batch: int) -> Epoch:
    """Fancy-index gathers of seeded shuffled batches over `packs`' memmaps (the samples of all
    packs numbered one after another; a batch's indices split by pack, sorted)."""
    starts = np.cumsum([0] + [len(p[0]) for p in packs])
    rng = np.random.default_rng(0)

    def epoch() -> int:
        order = rng.permutation(int(starts[-1]))
        for first in range(0, len(order), batch):
            indices = np.sort(order[first : first + batch])
            cuts = np.searchsorted(indices, starts)
            for k, arrays in enumerate(packs):
                local = indices[cuts[k] : cuts[k + 1]] - starts[k]
                if len(packs) == 1 or len(local):
                    for array in arrays:
                        array[local]
        return len(order)

    return epoch


def sequence_epoch(source, batch: int) -> Epoch:
    seq = PackedSequence(source, "train", batch, shuffle="global", seed=0)
    return lambda: harness.sequence_epoch(seq)


def torch_epoch(source, batch: int, target_dtype: str | None = None) -> Epoch:
    ds = PackedDataset(source, "train", batch, shuffle="global", seed=0, target_dtype=target_dtype)
    loader = DataLoader(ds, batch_size=None, num_workers=0)
    epochs = iter(range(1, 1 << 30))

    def epoch() -> int:
        ds.set_epoch(next(epochs))
        return sum(len(images) for images, _ in loader)

    return epoch


def torch_items_epoch(source, batch: int, target_dtype: str | None = None) -> Epoch:
    """The same dataset's items taken one by one, without a DataLoader."""
    ds = PackedDataset(source, "train", batch, shuffle="global", seed=0, target_dtype=target_dtype)
    epochs = iter(range(1, 1 << 30))

    def epoch() -> int:
        ds.set_epoch(next(epochs))
        return sum(len(ds[i][0]) for i in range(len(ds)))

    return epoch


def cast_epoch(masks: np.ndarray, batches: int) -> Epoch:
    """A batch's uint8 masks cast to int64 (what packer.torch's default targets need), alone."""

    def epoch() -> int:
        for _ in range(batches):
            masks.astype(np.int64)
        return batches * len(masks)

    return epoch


def tf_epoch(source, batch: int) -> Epoch:
    data = packer.tf.dataset(source, "train", batch, seed=0)
    return lambda: sum(len(images) for images, _ in data)


class _Ready(Dataset):
    """`batches` items, each the same two tensors: a DataLoader's own cost per batch."""

    def __init__(self, arrays: list[np.ndarray], batches: int) -> None:
        self.tensors, self.batches = tuple(torch.from_numpy(a) for a in arrays), batches

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tensors


def dataloader_floor(arrays: list[np.ndarray], batches: int) -> Epoch:
    loader = DataLoader(_Ready(arrays, batches), batch_size=None, num_workers=0)
    return lambda: sum(len(images) for images, _ in loader)


def tf_bare(arrays: list[np.ndarray], batches: int) -> Epoch:
    data = tf.data.Dataset.from_tensors(tuple(arrays)).repeat(batches)
    return lambda: sum(len(images) for images, _ in data)


def tf_floor(arrays: list[np.ndarray], batches: int) -> Epoch:
    dtypes = [tf.as_dtype(a.dtype) for a in arrays]
    data = (
        tf.data.Dataset.range(batches)
        .map(lambda i: tuple(tf.numpy_function(lambda _: arrays, [i], dtypes, stateful=True)))
        .prefetch(tf.data.AUTOTUNE)
    )
    return lambda: sum(len(images) for images, _ in data)


def breakdown(source, batch: int, adapters: dict[str, Epoch], seconds: float) -> dict:
    """Microseconds per batch of the reader's steps, each timed alone over whole epochs (the
    sampler's indices, the shard reads into pooled arrays, the transform), and of each
    adapter's whole batch: the rest is the adapter's own work."""
    from packer.reading.loader import Loader

    loader = Loader(source, "train", batch, shuffle="global", seed=0)
    reader, batches = loader.split.reader, len(loader)
    arrays = reader.read(loader.indices(0))

    def per_batch(step: Callable[[int], object]) -> float:
        def epoch() -> int:
            for i in range(batches):
                step(i)
            return batches

        return 1e6 / harness.run_for(epoch, seconds)

    costs = {
        "indices (sampler)": per_batch(loader.indices),
        "read (buffers, shard runs, copies)": per_batch(lambda i: reader.read(loader.indices(i))),
        "transform": per_batch(lambda i: loader.transform(arrays)),
    }
    costs["read"] = costs.pop("read (buffers, shard runs, copies)") - costs["indices (sampler)"]
    samples = loader.sampler.count / batches
    return costs | {
        name: 1e6 * samples / harness.run_for(epoch, seconds) for name, epoch in adapters.items()
    }


def measure(args: argparse.Namespace, root: Path) -> tuple[dict, dict, list]:
    packs = make_packs(root, args.samples, args.segmentation)
    one = shard_arrays(packs["one"])
    batches = -(-args.samples // args.batch_size)
    ready = [one[0][: args.batch_size].copy(), one[1][: args.batch_size].copy()]
    small = {
        "NumPy gather": numpy_epoch([one], args.batch_size),
        "NumPy gather, 3 packs": numpy_epoch(
            [shard_arrays(p) for p in packs["parts"]], args.batch_size
        ),
        "PackedSequence": sequence_epoch(packs["one"], args.batch_size),
        "PackedSequence, mixture": sequence_epoch(packs["mixture"], args.batch_size),
        "packer.torch, 0 workers": torch_epoch(packs["one"], args.batch_size),
        "packer.tf.dataset": tf_epoch(packs["one"], args.batch_size),
        "DataLoader floor": dataloader_floor(ready, batches),
        "tf.data floor": tf_floor(ready, batches),
        "tf.data, no function": tf_bare(ready, batches),
    }
    files = [root / "one", *packs["parts"]]
    for epoch in small.values():
        epoch()  # start-up: graphs, first maps
    rates = harness.side_by_side(
        small, args.seconds, args.rounds, before_each=lambda: harness.warm(files)
    )
    seg = [np.load(f, mmap_mode="r")[:16].copy() for f in sorted(packs["seg"].rglob("*.npy"))[:2]]
    large = {
        "PackedSequence": sequence_epoch(packs["seg"], 16),
        "packer.torch, 0 workers": torch_epoch(packs["seg"], 16),
        "packer.torch, 0 workers, uint8 targets": torch_epoch(packs["seg"], 16, "uint8"),
        "packer.torch items, no DataLoader, uint8 targets": torch_items_epoch(
            packs["seg"], 16, "uint8"
        ),
        "DataLoader floor": dataloader_floor(seg, -(-args.segmentation // 16)),
        "the masks' cast to int64 alone": cast_epoch(seg[1], -(-args.segmentation // 16)),
    }
    for epoch in large.values():
        epoch()
    large_rates = harness.side_by_side(
        large, args.seconds, args.rounds, before_each=lambda: harness.warm(packs["seg"])
    )
    harness.warm(files)
    costs = [
        ("one pack", breakdown(packs["one"], args.batch_size, {
            "PackedSequence": small["PackedSequence"],
            "packer.torch": small["packer.torch, 0 workers"],
            "packer.tf.dataset": small["packer.tf.dataset"],
        }, args.seconds)),
        ("mixture", breakdown(packs["mixture"], args.batch_size, {
            "PackedSequence": small["PackedSequence, mixture"],
        }, args.seconds)),
    ]  # fmt: skip
    return rates, large_rates, costs


GOALS = {  # row: (its base, the goal's words)
    "PackedSequence": ("NumPy gather", f">= {GOAL} x NumPy gather"),
    "packer.torch, 0 workers": ("NumPy gather", f">= {GOAL} x NumPy gather"),
    "packer.tf.dataset": ("NumPy gather", f">= {GOAL} x NumPy gather"),
    "PackedSequence, mixture": ("PackedSequence", f">= {GOAL} x PackedSequence"),
    "NumPy gather, 3 packs": ("NumPy gather", "the mixture's floor"),
}


def rows(rates: dict, samples: int, goals: dict) -> list[list]:
    """Per contender: img/s, us per batch, x the first contender and x its goal's base."""
    first = next(iter(rates))
    against = harness.ratios(rates, first)
    table = []
    for name, values in rates.items():
        base, goal = goals.get(name, (first, ""))
        mine = harness.ratios(rates, base)[name]
        met = "" if not goal.startswith(">=") else (" met" if statistics.median(mine) >= GOAL
                                                    else " NOT met")  # fmt: skip
        rate = statistics.median(values)
        table.append([name, rate, 1e6 * samples / rate, harness.spread(against[name]),
                      f"{harness.spread(mine)}{' x ' + base if goal else ''}",
                      goal + met])  # fmt: skip
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6000, help="32x32 samples per epoch")
    parser.add_argument("--segmentation", type=int, default=480, help="240x176 samples")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="per contender per round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="packer-small-") as tmp:
        rates, large, costs = measure(args, Path(tmp))
    headers = ["reader", "img/s", "us/batch", "x first row", "x goal's base", "goal"]
    harness.report(
        f"32x32, batch {args.batch_size}: {args.samples} samples per epoch, warm page cache",
        headers, rows(rates, args.batch_size, GOALS),
        f"{args.rounds} interleaved rounds of {args.seconds:g} s per reader; ratios per round, "
        "median (range).",
    )  # fmt: skip
    harness.report(
        "240x176 segmentation, batch 16, warm page cache",
        headers, rows(large, 16, {"packer.torch, 0 workers": (
            "PackedSequence", f">= {GOAL} x PackedSequence")}),
    )  # fmt: skip
    names = list(dict.fromkeys(name for _, c in costs for name in c))
    harness.report(
        f"Where a 32x32 batch's time goes (us per batch, batch {args.batch_size})",
        ["step", *(label for label, _ in costs)],
        [[name, *(c.get(name, "") for _, c in costs)] for name in names],
        "The reader's steps timed alone; each adapter's row is its whole batch (read included), "
        "so the adapter's own work is its row minus indices + read + transform.",
    )  # fmt: skip
    print(f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")


if __name__ == "__main__":
    main()

"""A mixture of three packs against one pack of the same total size, in every reader, side by
side in one run (synthetic 480x352 segmentation npy packs, shuffled uint8 batches of 16):

  PackedSequence          the Keras reader, one thread
  packer.tf.dataset       a new iterator every epoch, as Keras' fit makes one
  packer.torch, workers N DataLoader(batch_size=None), N = 0, 2

The mixture takes each of its packs (half, a third and a sixth of the samples) once per epoch,
so both read the same number of samples of the same size per epoch. Rounds alternate the two
sources reader by reader; the cost ratio (one pack's rate / the mixture's) is paired within
each round and its median and range reported. Then what a mixture's resume costs: a fresh
reader's construction and first batch against a reader of another layout loading a mid-epoch
state (saved by 2 ranks with batches of 8) before its first batch; and how long the plan of a
large mixture's epoch takes to make (every fresh or resumed reader makes it once per epoch).
Shard files are read right before each measurement (warm page cache).

    python benchmarks/bench_mixture.py [--samples 300] [--seconds 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import torch
from torch.utils.data import DataLoader

import packer
import packer.tf
from packer.keras import PackedSequence
from packer.reading.mixture_plan import Plan, draws
from packer.synthetic import make_segmentation
from packer.torch import PackedDataset

SIZE = (480, 352)  # W x H
SHARES = (3, 2, 1)  # the three packs' sizes, in sixths of the total


def make_packs(root: Path, total: int) -> tuple[Path, packer.Mixture]:
    """One pack of `total` samples, and a mixture of three packs of as many in all."""

    def one(name: str, count: int, seed: int) -> Path:
        src = make_segmentation(root / f"src-{name}", {"train": count}, SIZE, seed, ".jpg")
        return packer.pack(src, out=root / name, size=SIZE, workers=2).root

    single = one("single", total, 0)
    counts = [total * s // sum(SHARES) for s in SHARES]
    counts[0] += total - sum(counts)
    parts = [one(f"part{k}", c, k + 1) for k, c in enumerate(counts)]
    return Path(single), packer.Mixture([packer.Stream(p) for p in parts])


def files(source) -> list[Path]:
    paths = [source] if not isinstance(source, packer.Mixture) else [s.path for s in source.streams]
    return [f for p in paths for f in (Path(p) / "train").iterdir()]


def warm(source) -> None:
    """Read every shard file once, so that the timed reads find them in the page cache."""
    for path in files(source):
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


def endless(epoch: Callable[[int], Iterator]) -> Iterator[int]:
    """Batch sizes of epoch after epoch (the epoch number goes to `epoch`)."""
    number = 0
    while True:
        for images, _ in epoch(number):
            yield len(images)
        number += 1


def readers(source, batch: int) -> dict[str, Iterator[int]]:
    """Every reader over `source` (a pack's path or a Mixture), as endless batch streams."""
    seq = PackedSequence(source, "train", batch, shuffle="global", seed=0)

    def sequence(epoch: int) -> Iterator:
        seq.on_epoch_end()
        return (seq[i] for i in range(len(seq)))

    per_epoch = packer.tf.dataset(source, "train", batch, seed=0)

    def torch_reader(workers: int) -> Iterator[int]:
        ds = PackedDataset(source, "train", batch, shuffle="global", seed=0, target_dtype="uint8")
        loader = DataLoader(ds, batch_size=None, num_workers=workers,
                            persistent_workers=workers > 0)  # fmt: skip

        def epoch(number: int) -> Iterator:
            ds.set_epoch(number)
            return iter(loader)

        return endless(epoch)

    return {
        "PackedSequence": endless(sequence),
        "packer.tf.dataset": endless(lambda _: iter(per_epoch)),
        "packer.torch, workers 0": torch_reader(0),
        "packer.torch, workers 2": torch_reader(2),
    }


def rate(batches: Iterator[int], seconds: float) -> float:
    """Images per second over `seconds`, after two warm-up batches."""
    next(batches), next(batches)
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        done += next(batches)
    return done / elapsed


def first_batch_ms(source, batch: int, state: dict | None, repeats: int = 15) -> float:
    """Median ms from constructing a PackedSequence (loading `state` if given) to holding its
    first batch."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        seq = PackedSequence(source, "train", batch, shuffle="global", seed=0)
        if state is not None:
            seq.load_state_dict(state)
        seq[0]
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def resume_costs(single: Path, mix: packer.Mixture, batch: int) -> dict[str, float]:
    """First-batch ms: a fresh one-pack reader, a fresh mixture reader, a resumed mixture."""
    saver = PackedSequence(mix, "train", 8, shuffle="global", seed=0, rank=1, world_size=2)
    state = saver.state_dict(batches=len(saver) // 2)
    warm(single), warm(mix)
    costs: dict[str, list[float]] = {
        "pack, fresh": [],
        "mixture, fresh": [],
        "mixture, resumed": [],
    }
    for _ in range(3):
        costs["pack, fresh"].append(first_batch_ms(single, batch, None))
        costs["mixture, fresh"].append(first_batch_ms(mix, batch, None))
        costs["mixture, resumed"].append(first_batch_ms(mix, batch, state))
    return {name: statistics.median(values) for name, values in costs.items()}


def plan_ms(sizes: list[int], shares: list[float]) -> float:
    """Median ms to make one epoch's order of a mixture of packs of `sizes` in `shares`."""
    plan = Plan(sizes, draws(sizes, [("proportion", s) for s in shares], None))
    times = []
    for epoch in range(3):
        start = time.perf_counter()
        plan.order(0, epoch)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="train samples in all")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2.0, help="per reader per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        single, mix = make_packs(Path(tmp), args.samples)
        sources = {"pack": single, "mixture": mix}
        streams = {name: readers(source, args.batch_size) for name, source in sources.items()}
        ratios: dict[str, list[float]] = {reader: [] for reader in streams["pack"]}
        rates: dict[str, dict[str, list[float]]] = {n: {r: [] for r in ratios} for n in sources}
        for _ in range(args.rounds):
            for reader in ratios:
                measured = {}
                for name, source in sources.items():
                    warm(source)
                    measured[name] = rate(streams[name][reader], args.seconds)
                    rates[name][reader].append(measured[name])
                ratios[reader].append(measured["pack"] / measured["mixture"])
        costs = resume_costs(single, mix, args.batch_size)
    sizes = [1_000_000, 300_000, 50_000]
    report(args, rates, ratios, costs, sizes, plan_ms(sizes, [0.6, 0.3, 0.1]))


def report(args, rates, ratios, costs, sizes, plan) -> None:
    print(f"\n{os.cpu_count()} CPUs, torch {torch.__version__}; {args.samples} train samples "
          f"{SIZE[0]}x{SIZE[1]} in one pack or three ({'+'.join(map(str, SHARES))} sixths), "
          f"batch {args.batch_size}, median of {args.rounds} rounds x {args.seconds:g} s, warm "
          "page cache\n")  # fmt: skip
    print("| reader | one pack img/s | mixture img/s | mixture cost / one pack (range) | target |")
    print("|---|---:|---:|---:|---:|")
    for reader, values in ratios.items():
        pack, mixed = (statistics.median(rates[n][reader]) for n in ("pack", "mixture"))
        print(f"| {reader} | {pack:,.0f} | {mixed:,.0f} | {statistics.median(values):.3f} "
              f"({min(values):.2f}-{max(values):.2f}) | <= 1.05 |")  # fmt: skip
    print("\n| first batch | ms | / mixture, fresh |\n|---|---:|---:|")
    for name, value in costs.items():
        print(f"| {name} | {value:.1f} | {value / costs['mixture, fresh']:.2f} |")
    print(f"\nplan of one epoch of {sum(sizes):,} draws ({' + '.join(f'{s:,}' for s in sizes)} "
          f"samples at 0.6/0.3/0.1): {plan:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()

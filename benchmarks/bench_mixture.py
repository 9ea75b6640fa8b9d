"""A mixture of three packs against one pack of the same total size, in every reader, side by
side in one run (synthetic 480x352 segmentation npy packs, shuffled uint8 batches of 16):

  PackedSequence          the Keras reader, one thread
  packer.tf.dataset       a new iterator every epoch, as Keras' fit makes one
  packer.torch, workers N DataLoader(batch_size=None), N = 0, 2

The mixture takes each of its packs (half, a third and a sixth of the samples) once per epoch,
so both read the same number of samples of the same size per epoch, from as many shards of
the same size. Reader by reader, the two
sources read an epoch each in turn; the cost ratio (the mixture's time per sample / the
pack's) is paired within each turn and its median and quartiles reported. Then what a
mixture's resume costs: a fresh reader's construction and first batch against a reader of
another layout loading a mid-epoch state (saved by 2 ranks with batches of 8) before its first
batch; and how long the plan of a large mixture's epoch takes to make (every fresh or resumed
reader makes it once per epoch). Shard files are read once before each reader's turns (warm
page cache).

    python benchmarks/bench_mixture.py [--samples 300] [--batch-size 16] [--pairs 30]
                                      [--shard-records 25]
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


def make_packs(root: Path, total: int, shard_records: int) -> tuple[Path, packer.Mixture]:
    """One pack of `total` samples, and a mixture of three packs of as many in all, all in
    shards of `shard_records` samples (so both have as many shards, as large)."""
    shard_size = shard_records * SIZE[0] * SIZE[1] * 4  # image + uint8 mask

    def one(name: str, count: int, seed: int) -> Path:
        src = make_segmentation(root / f"src-{name}", {"train": count}, SIZE, seed, ".jpg")
        return packer.pack(src, out=root / name, size=SIZE, workers=2, shard_size=shard_size).root

    single = one("single", total, 0)
    counts = [total * s // sum(SHARES) for s in SHARES]
    counts[0] += total - sum(counts)
    parts = [one(f"part{k}", c, k + 1) for k, c in enumerate(counts)]
    return Path(single), packer.Mixture([packer.Stream(p) for p in parts])


def files(source) -> list[Path]:
    paths = [source] if not isinstance(source, packer.Mixture) else [s.path for s in source.streams]
    return [f for p in paths for f in (Path(p) / "train").iterdir()]


def epochs(source, batch: int) -> dict[str, Callable[[], int]]:
    """Every reader over `source` (a pack's path or a Mixture): a call reads its next epoch
    whole and returns the samples read."""
    seq = PackedSequence(source, "train", batch, shuffle="global", seed=0)

    def sequence() -> int:
        seq.on_epoch_end()
        return sum(len(seq[i][0]) for i in range(len(seq)))

    per_epoch = packer.tf.dataset(source, "train", batch, seed=0)

    def tf_epoch() -> int:
        return sum(len(images) for images, _ in per_epoch)

    def torch_reader(workers: int) -> Callable[[], int]:
        ds = PackedDataset(source, "train", batch, shuffle="global", seed=0, target_dtype="uint8")
        loader = DataLoader(ds, batch_size=None, num_workers=workers,
                            persistent_workers=workers > 0)  # fmt: skip
        state = {"epoch": 0}

        def epoch() -> int:
            ds.set_epoch(state["epoch"])
            state["epoch"] += 1
            return sum(len(images) for images, _ in loader)

        return epoch

    return {
        "PackedSequence": sequence,
        "packer.tf.dataset": tf_epoch,
        "packer.torch, workers 0": torch_reader(0),
        "packer.torch, workers 2": torch_reader(2),
    }


def first_batch_s(source, batch: int, state: dict | None) -> tuple[float, float]:
    """Seconds from constructing a PackedSequence to holding its first batch, and of those
    the seconds `load_state_dict(state)` took (0 without a state)."""
    start = time.perf_counter()
    seq = PackedSequence(source, "train", batch, shuffle="global", seed=0)
    loading = time.perf_counter()
    if state is not None:
        seq.load_state_dict(state)
    loaded = time.perf_counter()
    seq[0]
    return time.perf_counter() - start, loaded - loading


def resume_costs(single: Path, mix: packer.Mixture, batch: int, pairs: int) -> dict:
    """Medians over `pairs` turns: first-batch seconds of a fresh one-pack reader, a fresh
    mixture reader and a mixture resumed in another layout, and the resume itself
    (`load_state_dict`) as a share of the fresh mixture reader's first batch."""
    saver = PackedSequence(mix, "train", 8, shuffle="global", seed=0, rank=1, world_size=2)
    state = saver.state_dict(batches=len(saver) // 2)
    harness.warm(files(single), files(mix))
    names = ("pack, fresh", "mixture, fresh", "mixture, resumed", "resume alone")
    costs: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(pairs):
        costs["pack, fresh"].append(first_batch_s(single, batch, None)[0])
        costs["mixture, fresh"].append(first_batch_s(mix, batch, None)[0])
        whole, resume = first_batch_s(mix, batch, state)
        costs["mixture, resumed"].append(whole)
        costs["resume alone"].append(resume)
    shares = [r / f for r, f in zip(costs["resume alone"], costs["mixture, fresh"], strict=True)]
    medians = {name: statistics.median(v) for name, v in costs.items()}
    return medians | {"share": statistics.median(shares)}


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
    parser.add_argument("--pairs", type=int, default=30, help="epochs of each, in turn")
    parser.add_argument(
        "--shard-records", type=int, default=25, help="samples per shard (a large pack's batch "
        "touches as many shards as samples: 25 makes a batch of 16 touch about 9 of 12)"
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        single, mix = make_packs(Path(tmp), args.samples, args.shard_records)
        sources = {"pack": single, "mixture": mix}
        readers = {name: epochs(source, args.batch_size) for name, source in sources.items()}
        rates = {}  # reader -> {"pack": img/s per epoch, "mixture": ...}, epochs in turn
        for reader in readers["pack"]:
            harness.warm(files(single), files(mix))
            for name in sources:
                readers[name][reader]()  # one epoch first: start-up, workers, graphs
            turns = {name: readers[name][reader] for name in sources}
            rates[reader] = harness.side_by_side(turns, 0, args.pairs)  # one epoch a turn
        first = resume_costs(single, mix, args.batch_size, args.pairs)
    sizes = [1_000_000, 300_000, 50_000]
    report(args, rates, first, sizes, plan_ms(sizes, [0.6, 0.3, 0.1]))


def report(args, rates, first, sizes, plan) -> None:
    rows = []
    for reader, measured in rates.items():
        cost = sorted(harness.ratios(measured, "mixture")["pack"])  # mixture s/img over pack's
        q1, q2, q3 = statistics.quantiles(cost, n=4)
        pack, mixed = (statistics.median(measured[n]) for n in ("pack", "mixture"))
        rows.append([reader, pack, mixed, f"{q2:.3f} ({q1:.2f}-{q3:.2f})", "<= 1.05"])
    notes = (
        f"torch {torch.__version__}; {args.samples} train samples {SIZE[0]}x{SIZE[1]} in one "
        f"pack or three ({'+'.join(map(str, SHARES))} sixths), shards of {args.shard_records}, "
        f"batch {args.batch_size}, {args.pairs} epochs each in turn, warm page cache; shared "
        "machine, compare within a run."
    )
    headers = ["reader", "one pack img/s", "mixture img/s", "mixture cost / one pack (quartiles)"]
    harness.report("A mixture of three packs vs one pack", [*headers, "target"], rows, notes)
    names = ("pack, fresh", "mixture, fresh", "mixture, resumed", "resume alone")
    firsts = [[n, f"{1000 * first[n]:.2f}", first[n] / first["mixture, fresh"]] for n in names]
    print(harness.table(["first batch", "ms", "/ mixture, fresh"], firsts))
    print(f"\nthe resume (load_state_dict) / a fresh mixture reader's first batch, paired: "
          f"{first['share']:.2f} (target <= 1)")  # fmt: skip
    print(f"plan of one epoch of {sum(sizes):,} draws ({' + '.join(f'{s:,}' for s in sizes)} "
          f"samples at 0.6/0.3/0.1): {plan:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()

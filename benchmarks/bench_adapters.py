"""The framework adapters against PackedSequence, side by side in one run, on one npy pack of
480x352 segmentation samples (synthetic, or --pack DIR), shuffled uint8 batches of 16:

  PackedSequence                the Keras reader, one thread: the reference
  packer.tf.dataset             a new iterator every epoch, as Keras' fit makes one
  packer.tf.dataset, repeat     one endless iterator
  packer.torch uint8, workers N target_dtype="uint8", DataLoader(batch_size=None), N = 0, 2
  packer.torch int64, workers N the default int64 masks (8 bytes a pixel), for comparison

then what an elastic resume costs: a fresh reader's construction and first batch, against a
reader of another layout loading a mid-epoch state (saved by 2 ranks with batches of 8)
before its first batch. Rounds alternate the readers; medians are reported, and ratios are
within this run (absolute rates drift on a shared machine). Shard files are read once right
before each measurement (warm page cache).

    python benchmarks/bench_adapters.py [--pack DIR] [--samples 300] [--seconds 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import harness

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import torch
from torch.utils.data import DataLoader

import packer
import packer.tf
from packer.keras import PackedSequence
from packer.synthetic import make_segmentation
from packer.torch import PackedDataset

SIZE = (480, 352)  # W x H
TARGETS = {"packer.tf.dataset": 0.5, "packer.torch uint8": 0.85}


def readers(pack: Path, batch: int) -> dict[str, Iterator[int]]:
    seq = PackedSequence(pack, batch_size=batch, shuffle="global", seed=0)

    def sequence(epoch: int) -> Iterator:
        seq.on_epoch_end()
        return (seq[i] for i in range(len(seq)))

    per_epoch = packer.tf.dataset(pack, batch_size=batch, seed=0)
    endless_tf = iter(packer.tf.dataset(pack, batch_size=batch, seed=0, repeat=True))

    def torch_reader(workers: int, target_dtype: str) -> Iterator[int]:
        ds = PackedDataset(pack, batch_size=batch, shuffle="global", seed=0,
                           target_dtype=target_dtype)  # fmt: skip
        loader = DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
        )  # fmt: skip

        def epoch(number: int) -> Iterator:
            ds.set_epoch(number)
            return iter(loader)

        return harness.endless(epoch)

    streams = {
        "PackedSequence": harness.endless(sequence),
        "packer.tf.dataset": harness.endless(lambda _: iter(per_epoch)),
        "packer.tf.dataset, repeat": (len(images) for images, _ in endless_tf),
    }
    for workers in (0, 2):
        for dtype in ("uint8", "int64"):
            streams[f"packer.torch {dtype}, workers {workers}"] = torch_reader(workers, dtype)
    return streams


def first_batch_ms(pack: Path, batch: int, state: dict | None, repeats: int = 20) -> float:
    """Median milliseconds from constructing a PackedSequence (loading `state` if given, in
    another layout than the one that saved it) to holding its first batch."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        seq = PackedSequence(pack, batch_size=batch, shuffle="global", seed=0)
        if state is not None:
            seq.load_state_dict(state)
        seq[0]
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def resume_costs(pack: Path, batch: int) -> tuple[float, float]:
    """(fresh reader's first batch, elastic resume's first batch) in ms."""
    saver = PackedSequence(pack, batch_size=8, shuffle="global", seed=0, rank=1, world_size=2)
    state = saver.state_dict(batches=len(saver) // 2)
    harness.warm(pack / "train")
    fresh, resumed = [], []
    for _ in range(3):
        fresh.append(first_batch_ms(pack, batch, None))
        resumed.append(first_batch_ms(pack, batch, state))
    return statistics.median(fresh), statistics.median(resumed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", type=Path, help="an npy pack to read (default: synthetic)")
    parser.add_argument("--samples", type=int, default=300, help="synthetic train samples")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="per reader per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pack = args.pack
        if pack is None:
            src = make_segmentation(
                Path(tmp) / "src", {"train": args.samples}, SIZE, image_ext=".jpg"
            )
            pack = packer.pack(src, out=Path(tmp) / "pack", size=SIZE, workers=2).root
        count = packer.open(pack)["train"].count
        steps = {name: stream.__next__ for name, stream in readers(pack, args.batch_size).items()}
        rates = harness.side_by_side(
            steps, args.seconds, args.rounds, lambda: harness.warm(pack / "train"), warmup=2
        )
        fresh, resumed = resume_costs(pack, args.batch_size)
    report(rates, args, count, fresh, resumed)


def report(rates: dict, args: argparse.Namespace, count: int, fresh: float, resumed: float) -> None:
    ratios = harness.median_ratios(rates, "PackedSequence")
    rows = [
        [name, statistics.median(values), ratios[name],
         next((f">= {t}" for k, t in TARGETS.items() if name.startswith(k)), "")]
        for name, values in rates.items()
    ]  # fmt: skip
    notes = (
        f"torch {torch.__version__}; {count} train samples, {SIZE[0]}x{SIZE[1]}, batch "
        f"{args.batch_size}, median of {args.rounds} interleaved rounds x {args.seconds:g} s, "
        f"warm page cache; shared machine, compare within a run.\n\nfirst batch: fresh reader "
        f"{fresh:.1f} ms, elastic resume {resumed:.1f} ms ({resumed / fresh:.2f} x)"
    )
    harness.report(
        "Framework adapters vs PackedSequence",
        ["reader", "img/s", "/ PackedSequence", "target"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()

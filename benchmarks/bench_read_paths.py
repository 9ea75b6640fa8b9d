"""Ways to fill a shuffled batch from an npy pack, against the memcpy limits, in one run.

Issue #7 asks the reader for 0.8 x a single-core `np.copyto` of batch-sized chunks. That
baseline copies into one buffer, which stays in the CPU cache; a training loop that holds
batch i while asking for batch i+1 makes any reader write a second buffer. This script times,
in alternating rounds over the same pack (CamVid at 480x352, batches of 16):

  - `PackedSequence`, the loop holding each batch (as Keras does) / dropping it first
  - `np.take` from the memmaps into two buffers in turn (the reader's copy, without Keras)
  - `os.preadv` of each record into the same two buffers (the kernel's copy)
  - NumPy fancy indexing, `images[sorted_indices]` (a new array, faulted in, per batch)
  - `np.copyto` of the same bytes into one buffer and into two in turn

    python benchmarks/bench_read_paths.py [--synthetic] [--rounds 5] [--seconds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import harness
import numpy as np
from harness import SIZE, copyto_epoch, open_sequence

import packer
from packer.reading.buffers import aligned_empty

BATCH = 16


def dropping_epoch(seq) -> int:
    """One epoch of `PackedSequence` batches, each released before the next is read."""
    samples = 0
    for i in range(len(seq)):
        images, targets = seq[i]
        samples += len(images)
        del images, targets
    seq.on_epoch_end()
    return samples


class Shards:
    """The train split's single-shard memmaps and file descriptors, and two batch buffers
    (64-byte aligned like the reader's: one relative alignment copies 3.5x slower)."""

    def __init__(self, ds: packer.PackedDataset) -> None:
        shard = ds["train"].reader.shards[0]
        self.maps = shard.maps()
        self.fds = {name: os.open(path, os.O_RDONLY) for name, path in shard.paths.items()}
        self.count = ds["train"].count
        self.buffers = [
            {name: aligned_empty((BATCH, *m.shape[1:]), m.dtype) for name, m in self.maps.items()}
            for _ in range(2)
        ]
        self.rng = np.random.default_rng(0)

    def batches(self) -> list[np.ndarray]:
        order = self.rng.permutation(self.count)
        return [np.sort(order[k : k + BATCH]) for k in range(0, self.count - BATCH + 1, BATCH)]

    def take_epoch(self) -> int:
        batches = self.batches()
        for k, indices in enumerate(batches):
            for name, out in self.buffers[k % 2].items():
                np.take(self.maps[name], indices, axis=0, out=out, mode="clip")
        return len(batches) * BATCH

    def pread_epoch(self) -> int:
        batches = self.batches()
        for k, indices in enumerate(batches):
            for name, out in self.buffers[k % 2].items():
                record, start = self.maps[name].strides[0], self.maps[name].offset
                for j, i in enumerate(indices.tolist()):
                    os.preadv(self.fds[name], [out[j]], start + i * record)
        return len(batches) * BATCH

    def fancy_epoch(self) -> int:
        batches = self.batches()
        for indices in batches:
            held = {name: m[indices] for name, m in self.maps.items()}
        del held
        return len(batches) * BATCH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", action="store_true", help="use a synthetic CamVid-like set")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="per contender and round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="packer-bench-") as tmp:
        src = harness.segmentation_source(Path(tmp) / "s", synthetic=args.synthetic)
        ds = packer.pack(src, out=Path(tmp) / "pack", size=SIZE, shard_size=1 << 40)
        files = harness.shard_files(ds)
        sample = sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize for f in ds.fields)
        shards = Shards(ds)
        seq_held, seq_dropped = open_sequence(ds.root, BATCH), open_sequence(ds.root, BATCH)
        source = np.random.default_rng(1).integers(0, 256, shards.count * sample, dtype=np.uint8)
        buffers = [np.empty(BATCH * sample, np.uint8) for _ in range(2)]
        contenders: dict[str, Callable[[], int]] = {
            "PackedSequence, loop holds each batch": lambda: harness.sequence_epoch(seq_held),
            "PackedSequence, loop drops each batch first": lambda: dropping_epoch(seq_dropped),
            "np.take from the memmaps, two buffers in turn": shards.take_epoch,
            "os.preadv per record, two buffers in turn": shards.pread_epoch,
            "fancy indexing, a new array per batch": shards.fancy_epoch,
            "np.copyto, one buffer (issue #7's limit)": lambda: (
                copyto_epoch(source, buffers[:1], BATCH * sample) // sample
            ),
            "np.copyto, two buffers in turn": lambda: (
                copyto_epoch(source, buffers, BATCH * sample) // sample
            ),
        }
        for epoch in contenders.values():
            epoch()  # untimed: opens memmaps, maps pages
        rates = harness.side_by_side(
            contenders, args.seconds, args.rounds, lambda: harness.warm(files)
        )
    ratios = harness.median_ratios(rates, "np.copyto, one buffer (issue #7's limit)")
    notes = (
        f"{src.name}: {shards.count} train samples of {sample:,} bytes, batches of {BATCH}, "
        f"medians of {args.rounds} interleaved rounds x {args.seconds:g} s, warm page cache; "
        "shared machine, compare within a run."
    )
    rows = [[name, statistics.median(r), ratios[name]] for name, r in rates.items()]
    headers = ["way to fill a batch", "img/s", "/ np.copyto one buffer"]
    harness.report("Ways to fill a batch from an npy pack", headers, rows, notes)


if __name__ == "__main__":
    main()

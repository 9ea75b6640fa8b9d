"""From what batch size on do threads pay? `gather.read` by one thread and by every core, batch
sizes side by side in alternating rounds, over one npy shard in the page cache.

Each row reads shuffled batches of `n` records of one record size through the npy shard reader:
one thread (`share_cores` as many as the cores) against one thread per core (the default),
the same index sets both ways; medians over rounds, ratio = every core / one thread.
`gather.MIN_BYTES_PER_THREAD` is set to 1 for the run, so both sides always split or never.

    python benchmarks/bench_gather.py [--seconds 0.3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from packer.formats.npy import NpyShardReader
from packer.reading import gather

RECORD = (128, 128, 3)  # 48 KB: batches from one record to a few hundred
SIZES_KB = (48, 256, 512, 1024, 2048, 4096, 8192, 16384)
COUNT = 4096  # records in the shard: 200 MB


def rate(reader: NpyShardReader, batch: int, seconds: float, rng: np.random.Generator) -> float:
    """Bytes/s of shuffled batches of `batch` records read into one reused array."""
    out = {"images": np.empty((batch, *RECORD), np.uint8)}
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        local = np.sort(rng.choice(COUNT, batch, replace=False))
        gather.read([(reader, local, out)])
        done += out["images"].nbytes
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="per row and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cores = gather.usable_cores()
    gather.MIN_BYTES_PER_THREAD = 1
    record_bytes = int(np.prod(RECORD))
    with tempfile.TemporaryDirectory(prefix="packer-gather-") as tmp:
        path = Path(tmp) / "images.npy"
        shard = np.lib.format.open_memmap(path, "w+", np.uint8, (COUNT, *RECORD))
        shard[:] = np.random.default_rng(0).integers(0, 256, shard.shape, np.uint8)
        shard.flush()
        reader = NpyShardReader({"images": path}, COUNT, None)
        reader.open()
        print(f"{cores} cores; record {record_bytes / 1024:.0f} KB; rounds {args.rounds}\n")
        print("| batch | one thread GB/s | every core GB/s | every core / one thread |")
        print("|---:|---:|---:|---:|")
        for kb in SIZES_KB:
            batch = max(1, kb * 1024 // record_bytes)
            rates: dict[int, list[float]] = {1: [], cores: []}
            for _ in range(args.rounds):
                for sharing in (cores, 1):
                    gather.share_cores(sharing)
                    rng = np.random.default_rng(1)
                    rates[gather.thread_count()].append(rate(reader, batch, args.seconds, rng))
            one, every = (statistics.median(rates[k]) for k in (1, cores))
            size = batch * record_bytes / 2**10
            print(f"| {size:,.0f} KB | {one / 1e9:.1f} | {every / 1e9:.1f} | {every / one:.2f} |")


if __name__ == "__main__":
    main()

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
from pathlib import Path

import harness
import numpy as np

from packer.formats.npy import NpyShardReader
from packer.reading import gather

RECORD = (128, 128, 3)  # 48 KB: batches from one record to a few hundred
SIZES_KB = (48, 256, 512, 1024, 2048, 4096, 8192, 16384)
COUNT = 4096  # records in the shard: 200 MB


def reads(reader: NpyShardReader, batch: int, processes: int) -> harness.Step:
    """A step reading one shuffled batch of `batch` records into one reused array, as one of
    `processes` reading processes (so with all the cores' threads or one); its bytes."""
    out = {"images": np.empty((batch, *RECORD), np.uint8)}
    rng = np.random.default_rng(1)

    def step() -> int:
        gather.share_cores(processes)
        gather.read([(reader, np.sort(rng.choice(COUNT, batch, replace=False)), out)])
        return out["images"].nbytes

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="per row and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cores = gather.usable_cores()
    gather.MIN_BYTES_PER_THREAD = 1
    record_bytes = int(np.prod(RECORD))
    rows = []
    with tempfile.TemporaryDirectory(prefix="packer-gather-") as tmp:
        path = Path(tmp) / "images.npy"
        shard = np.lib.format.open_memmap(path, "w+", np.uint8, (COUNT, *RECORD))
        shard[:] = np.random.default_rng(0).integers(0, 256, shard.shape, np.uint8)
        shard.flush()
        reader = NpyShardReader({"images": path}, COUNT, None)
        for kb in SIZES_KB:
            batch = max(1, kb * 1024 // record_bytes)
            rates = harness.side_by_side(
                {"one": reads(reader, batch, cores), "every": reads(reader, batch, 1)},
                args.seconds,
                args.rounds,
            )
            ratio = harness.ratios(rates, "one")["every"]
            one, every = (statistics.median(rates[k]) / 1e9 for k in ("one", "every"))
            rows.append(
                [f"{batch * record_bytes / 1024:,.0f} KB", one, every, harness.spread(ratio)]
            )
    harness.report(
        "Threads per batch: from what size they pay",
        ["batch", "one thread GB/s", f"{cores} threads GB/s", f"{cores} threads / one"],
        rows,
        notes=f"Records of {record_bytes / 1024:.0f} KB, {args.rounds} interleaved rounds.",
    )


if __name__ == "__main__":
    main()

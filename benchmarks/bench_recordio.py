"""RecordIO read throughput beside the npy pack of the same images, measured in one run.

  (a) npy              `PackedSequence` over the npy pack: the reference
  (b) recordio raw     `PackedSequence` over the recordio pack, `--encoding raw`
  (c) RecordIOReader   `reader[i]` + `decode_payload` per record, stacked into a batch
  (d) recordio jpeg    `PackedSequence` over a `--encoding jpeg` pack (decodes every image)

All read shuffled batches of the train split, files warmed right before each timing. The
target: (b) at least half of (a).

    python benchmarks/bench_recordio.py [--synthetic] [--seconds 3] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import harness
import numpy as np
from harness import SIZE

import packer
from packer.reading.dataset import PackedDataset
from packer.recordio import RecordIOReader, decode_payload
from packer.schema import record_bytes

TARGET = 0.5  # recordio raw / npy, both through PackedSequence


def reader_epoch(readers: list[RecordIOReader], batch: int, rng: np.random.Generator) -> int:
    """One shuffled epoch through `RecordIOReader` and `decode_payload`; returns the samples."""
    samples = [(s, i) for s, reader in enumerate(readers) for i in range(len(reader))]
    order = rng.permutation(len(samples))
    done = 0
    for start in range(0, len(order), batch):
        picked = [samples[k] for k in order[start : start + batch]]
        decoded = [decode_payload(readers[s][i][1]) for s, i in picked]
        images, _masks = (np.stack(column) for column in zip(*decoded, strict=True))
        done += len(images)
    return done


def recordio_epoch(ds: PackedDataset, batch: int):
    """(c) An epoch step of `RecordIOReader` over the train shards, and its readers to close."""
    recs = [ds.root / "train" / f"{s['name']}.rec" for s in ds["train"].shards]
    readers = [RecordIOReader(rec) for rec in recs]
    rng = np.random.default_rng(0)
    return (lambda: reader_epoch(readers, batch, rng)), readers


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=harness.CAMVID, help="CamVid-layout source")
    parser.add_argument("--synthetic", action="store_true", help="use a synthetic CamVid-like set")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="per reader and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians")
    parser.add_argument("--json", type=Path, help="also write the table to this JSON file")
    return parser.parse_args()


def main() -> None:
    """Pack the images three ways, time the four readers side by side, print the table."""
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="packer-bench-recordio-") as tmp:
        src = harness.segmentation_source(Path(tmp) / "src", args.data, args.synthetic)
        packs = {
            name: packer.pack(src, out=Path(tmp) / name, size=SIZE, progress=False, **options)
            for name, options in {
                "npy": {"format": "npy"},
                "raw": {"format": "recordio", "encoding": "raw"},
                "jpeg": {"format": "recordio", "encoding": "jpeg"},
            }.items()
        }
        size = record_bytes(packs["npy"].fields)
        batch = args.batch_size
        seqs = {name: harness.open_sequence(ds.root, batch) for name, ds in packs.items()}
        direct, readers = recordio_epoch(packs["raw"], batch)
        contenders = {
            "(a) PackedSequence, npy": lambda: harness.sequence_epoch(seqs["npy"]),
            "(b) PackedSequence, recordio raw": lambda: harness.sequence_epoch(seqs["raw"]),
            "(c) RecordIOReader + decode_payload, recordio raw": direct,
            "(d) PackedSequence, recordio jpeg (decodes)": lambda: harness.sequence_epoch(
                seqs["jpeg"]
            ),
        }
        for epoch in contenders.values():
            epoch()  # untimed: opens the memmaps and files
        files = [f for ds in packs.values() for f in harness.shard_files(ds)]
        rates = harness.side_by_side(
            contenders, args.seconds, args.rounds, lambda: harness.warm(files)
        )
        for reader in readers:
            reader.close()
        count = packs["npy"]["train"].count
    ratios = harness.median_ratios(rates, "(a) PackedSequence, npy")
    rows = [
        [name, statistics.median(r), statistics.median(r) * size / 1e6, ratios[name]]
        for name, r in rates.items()
    ]
    raw = ratios["(b) PackedSequence, recordio raw"]
    verdict = "PASS" if raw >= TARGET else "MISS"
    notes = (
        f"{src.name}: {count} train samples at {SIZE[0]}x{SIZE[1]}, batch {batch}, medians of "
        f"{args.rounds} interleaved rounds x {args.seconds:g} s, warm page cache (files read "
        "right before each timing); shared machine, compare within a run.\n\n"
        f"recordio raw / npy: {raw:.2f} (target >= {TARGET}) {verdict}"
    )
    harness.report(
        "RecordIO beside npy",
        ["name", "img/s", "MB/s", "ratio (vs npy)"],
        rows,
        notes,
        args.json,
    )


if __name__ == "__main__":
    main()

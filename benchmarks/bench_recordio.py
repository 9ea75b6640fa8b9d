"""RecordIO read throughput beside the npy pack of the same images, measured in one run.

  (a) npy              `PackedSequence` over the npy pack: the reference
  (b) recordio raw     `PackedSequence` over the recordio pack, `--encoding raw`
  (c) RecordIOReader   `reader[i]` + `decode_payload` per record, stacked into a batch
  (d) recordio jpeg    `PackedSequence` over a `--encoding jpeg` pack (decodes every image)

All read shuffled batches of the train split, files warmed right before each timing. The
target: (b) at least half of (a).

    python benchmarks/bench_recordio.py [--synthetic] [--seconds 3] [--json out.json]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import packer
from packer.reading.dataset import PackedDataset
from packer.recordio import RecordIOReader, decode_payload
from packer.schema import record_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ is not a package
from bench_read import (
    SIZE,
    machine,
    make_synthetic,
    packed_rate,
    parse_args,
    row,
    run_for,
    table,
    warm,
)

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


def reader_rate(ds: PackedDataset, batch: int, seconds: float) -> float:
    """(c) Images/s of `RecordIOReader` over the train shards, files warmed just before."""
    recs = [ds.root / "train" / f"{s['name']}.rec" for s in ds["train"].shards]
    readers = [RecordIOReader(rec) for rec in recs]
    rng = np.random.default_rng(0)
    warm(recs)
    n, t = run_for(lambda: reader_epoch(readers, batch, rng), seconds)
    for reader in readers:
        reader.close()
    return n / t


def main() -> None:
    """Pack the images three ways, time the four readers, print the table and the verdict."""
    args = parse_args(__doc__, rounds=False)
    with tempfile.TemporaryDirectory(prefix="packer-bench-recordio-") as tmp:
        synthetic = args.synthetic or not args.data.is_dir()
        src = make_synthetic(Path(tmp) / "src") if synthetic else args.data
        packs = {
            name: packer.pack(src, out=Path(tmp) / name, size=SIZE, progress=False, **options)
            for name, options in {
                "npy": {"format": "npy"},
                "raw": {"format": "recordio", "encoding": "raw"},
                "jpeg": {"format": "recordio", "encoding": "jpeg"},
            }.items()
        }
        size = record_bytes(packs["npy"].fields)
        batch, seconds = args.batch_size, args.seconds
        npy = packed_rate(packs["npy"], batch, seconds)
        raw = packed_rate(packs["raw"], batch, seconds)
        direct = reader_rate(packs["raw"], batch, seconds)
        jpeg = packed_rate(packs["jpeg"], batch, seconds)
        count = packs["npy"]["train"].count
    label = "synthetic CamVid-like" if synthetic else f"{src.name} (real)"
    print(f"machine: {machine()}")
    print(f"dataset: {label}, {count} train samples at {SIZE[0]}x{SIZE[1]}, batch {batch}")
    print("cache: warm (files read once right before each timing)\n")
    rows = [
        row("(a) PackedSequence, npy", npy, size, npy),
        row("(b) PackedSequence, recordio raw", raw, size, npy),
        row("(c) RecordIOReader + decode_payload, recordio raw", direct, size, npy),
        row("(d) PackedSequence, recordio jpeg (decodes)", jpeg, size, npy),
    ]
    print(table(rows, "npy"))
    verdict = "PASS" if raw / npy >= TARGET else "MISS"
    print(f"\nrecordio raw / npy: {raw / npy:.2f} (target >= {TARGET}) {verdict}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "recordio_raw_over_npy": raw / npy}))


if __name__ == "__main__":
    main()

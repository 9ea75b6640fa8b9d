"""PyTorch reading throughput, side by side in one run, on one pack of real JPEGs:

  PackedSequence          the Keras reader, one thread: the reference
  torch map, workers 0    packer.torch.PackedDataset + DataLoader(batch_size=None), in-process
  torch map, workers 2    the same with 2 persistent worker processes
  torch iter, workers 2   packer.torch.PackedIterable (shard windows) with 2 workers
  JPEG folder, workers 2  an ImageFolder-style Dataset as torchvision users write it: PIL
                          decode of the original JPEG, resize (shorter side) + centre crop to
                          the packed size, uint8 CHW tensor; DataLoader(batch_size, shuffle,
                          2 workers). torchvision has no CPU build here, so this is that
                          pipeline in plain torch + PIL (the same work torchvision does).

All readers yield shuffled uint8 batches of the same size. The pack is read from the page
cache (its files are read once right before each round); rounds alternate the readers and
the median of each is reported. Ratios are within this run; absolute numbers drift.

    python benchmarks/bench_torch.py [--data DIR] [--samples 2000] [--seconds 3] [--work DIR]
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
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

import packer
from packer.synthetic import make_classification
from packer.torch import PackedDataset, PackedIterable

REPO = Path(__file__).resolve().parents[1]
HYMENOPTERA = REPO.parent / "shared" / "data" / "hymenoptera" / "train"
TARGET = 0.85  # packer.torch / PackedSequence


def source(data: Path, samples: int, root: Path) -> Path:
    """Class folders of `samples` JPEGs: the originals linked again and again (or synthetic)."""
    if not data.is_dir():
        print(f"{data} absent: synthetic JPEGs instead")
        data = make_classification(root / "synthetic", {"ants": 60, "bees": 60}, (500, 375))
    files = sorted(data.glob("*/*.jpg"))
    out = root / "src"
    for i in range(samples):
        original = files[i % len(files)]
        target = out / original.parent.name / f"{i:06d}_{original.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(original.resolve(), target)
    return out


class JpegFolder(Dataset):
    """torchvision's ImageFolder + Resize(size) + CenterCrop(size) + PILToTensor, by hand."""

    def __init__(self, root: Path, size: int) -> None:
        classes = sorted(p.name for p in root.iterdir())
        self.items = [(f, k) for k, c in enumerate(classes) for f in sorted((root / c).iterdir())]
        self.size = size

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.items[index]
        with Image.open(path) as image:
            image = image.convert("RGB")
            w, h = image.size
            scale = self.size / min(w, h)
            size = (max(self.size, round(w * scale)), max(self.size, round(h * scale)))
            image = image.resize(size, Image.BILINEAR)
            left, top = (image.width - self.size) // 2, (image.height - self.size) // 2
            image = image.crop((left, top, left + self.size, top + self.size))
            return torch.from_numpy(np.array(image)).permute(2, 0, 1), label


def readers(pack: Path, src: Path, batch: int, size: int) -> dict[str, Iterator[int]]:
    seq_module = __import__("packer.keras", fromlist=["PackedSequence"])
    seq = seq_module.PackedSequence(pack, batch_size=batch, shuffle="global", seed=0)

    def sequence(epoch: int) -> Iterator:
        seq.on_epoch_end()
        return (seq[i] for i in range(len(seq)))

    def torch_reader(cls, workers: int, **options) -> Iterator[int]:
        ds = cls(pack, batch_size=batch, seed=0, **options)
        loader = DataLoader(
            ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0,
            pin_memory=torch.cuda.is_available(),
        )  # fmt: skip

        def epoch(e: int) -> Iterator:
            ds.set_epoch(e)
            return iter(loader)

        return harness.endless(epoch)

    jpegs = DataLoader(
        JpegFolder(src, size), batch_size=batch, shuffle=True, num_workers=2,
        persistent_workers=True, drop_last=True,
    )  # fmt: skip
    return {
        "PackedSequence": harness.endless(sequence),
        "torch map, workers 0": torch_reader(PackedDataset, 0, shuffle="global"),
        "torch map, workers 2": torch_reader(PackedDataset, 2, shuffle="global"),
        "torch iter, workers 2": torch_reader(PackedIterable, 2),
        "JPEG folder, workers 2": harness.endless(lambda e: iter(jpegs)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HYMENOPTERA, help="class folders of JPEGs")
    parser.add_argument("--samples", type=int, default=2000, help="JPEGs packed (repeated)")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0, help="per reader per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, help="keep source links and pack here, reuse them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        src = work / "src" if (work / "src").is_dir() else source(args.data, args.samples, work)
        start = time.perf_counter()
        ds = packer.pack(src, out=work / "pack", size=args.size)  # an existing pack is reused
        print(f"pack of {ds['train'].count} samples ready in {time.perf_counter() - start:.1f} s")
        pack = ds.root
        streams = readers(pack, src, args.batch_size, args.size)
        steps = {name: stream.__next__ for name, stream in streams.items()}
        rates = harness.side_by_side(
            steps, args.seconds, args.rounds, lambda: harness.warm(pack / "train"), warmup=2
        )
        report(rates, args)


def report(rates: dict[str, list[float]], args: argparse.Namespace) -> None:
    by_sequence = harness.median_ratios(rates, "PackedSequence")
    by_jpeg = harness.median_ratios(rates, "JPEG folder, workers 2")
    rows = [
        [name, statistics.median(values), by_sequence[name], by_jpeg[name]]
        for name, values in rates.items()
    ]
    worst = min(by_sequence[n] for n in rates if n.startswith("torch"))
    verdict = "meets" if worst >= TARGET else "misses"
    notes = (
        f"torch {torch.__version__}; batch {args.batch_size}, {args.size}x{args.size} uint8, "
        f"median of {args.rounds} interleaved rounds x {args.seconds:g} s, warm page cache; "
        f"shared machine, compare within a run.\n\nlowest packer.torch / PackedSequence: "
        f"{worst:.2f} ({verdict} the {TARGET} target)"
    )
    harness.report(
        "PyTorch readers", ["reader", "img/s", "/ PackedSequence", "/ JPEG folder"], rows, notes
    )


if __name__ == "__main__":
    main()

"""Jobs the torch tests run in other processes (DDP ranks, training killed mid-epoch), and
helpers they share. Light imports only: spawned processes import this module."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

import packer
from packer.torch import PackedDataset, PackedIterable

KINDS = {"map": PackedDataset, "iterable": PackedIterable}


def everything(path: Path, split: str = "train") -> dict[str, np.ndarray]:
    part = packer.open(path)[split]
    return {k: v.copy() for k, v in part.reader.read(np.arange(part.count)).items()}


def sample_ids(path: Path) -> dict[bytes, int]:
    """Image bytes -> sample index (the synthetic images are all different)."""
    images = everything(path)["images"]
    ids = {x.tobytes(): i for i, x in enumerate(images)}
    assert len(ids) == len(images)
    return ids


def ids_of(batch_images, ids: dict[bytes, int]) -> list[int]:
    return [ids[np.ascontiguousarray(x).tobytes()] for x in np.asarray(batch_images)]


def epochs(ds, loader, count: int, ids: dict[bytes, int]) -> list[list[int]]:
    """Sample ids of `count` epochs, set_epoch before each (as with DistributedSampler)."""
    seen = []
    for epoch in range(count):
        ds.set_epoch(epoch)
        seen.append([i for images, _ in loader for i in ids_of(images, ids)])
    return seen


# DDP: real torch.distributed (gloo), one process per rank, spawned on this machine.
DDP_CASES = [  # kind, shuffle, uneven
    ("map", "global", "pad"),
    ("map", "windows", "pad"),
    ("iterable", "windows", "drop"),
    ("map", False, "drop"),
]


def ddp_rank(rank: int, world: int, port: int, path: str, out: str) -> None:
    """One rank: read two epochs of every case with rank/world_size from torch.distributed."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    ids = sample_ids(Path(path))
    results = []
    for kind, shuffle, uneven in DDP_CASES:
        ds = KINDS[kind](path, batch_size=2, shuffle=shuffle, uneven=uneven, seed=9,
                         shuffle_window=3)  # fmt: skip
        workers = 1 if kind == "iterable" else 0  # fork: spawned ranks would spawn workers
        loader = DataLoader(ds, batch_size=None, num_workers=workers,
                            multiprocessing_context="fork" if workers else None)  # fmt: skip
        seen = epochs(ds, loader, 2, ids)
        counts = [None] * world
        torch.distributed.all_gather_object(counts, len(seen[0]))
        results.append({"rank": ds.loader.sampler.rank, "epochs": seen, "counts": counts})
    Path(out, f"{rank}.json").write_text(json.dumps(results))
    torch.distributed.destroy_process_group()


def train(path: str, kind: str, workers: int, out: str, stop_after: int = 0) -> None:
    """Train a tiny segmenter for two epochs, checkpointing model and reading state after
    every step and logging each batch; resume from the checkpoint when there is one. With
    `stop_after`, announce READY after that many steps and wait to be killed. Plain SGD by
    hand: torch.optim imports torch._dynamo, seconds per process."""
    import hashlib
    import os
    import sys
    import time

    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = Path(out)
    ds = KINDS[kind](path, batch_size=2, seed=11, normalize="unit", layout="NCHW")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 4, 1))
    checkpoint = out / "checkpoint.pt"
    if checkpoint.exists():
        saved = torch.load(checkpoint)
        model.load_state_dict(saved["model"])
        ds.load_state_dict(saved["data"])
    loader = DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=255)
    steps = 0
    with open(out / "batches.log", "a") as log:
        for epoch in range(ds.state_dict()["epoch"], 2):
            ds.set_epoch(epoch)
            for step, (images, masks) in enumerate(loader):
                model.zero_grad()
                loss_fn(model(images), masks).backward()
                with torch.no_grad():
                    for parameter in model.parameters():
                        parameter -= 0.1 * parameter.grad
                digest = hashlib.sha1(images.numpy().tobytes()).hexdigest()
                log.write(f"{epoch} {digest}\n")
                log.flush()
                state = {"model": model.state_dict(), "data": ds.state_dict(batches=step + 1)}
                torch.save(state, out / "tmp.pt")
                os.replace(out / "tmp.pt", checkpoint)
                steps += 1
                if steps == stop_after:
                    print("READY", flush=True)
                    time.sleep(600)
    torch.save(model.state_dict(), out / "final.pt")
    sys.stdout.flush()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("job", choices=["train"])
    parser.add_argument("path")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("workers", type=int)
    parser.add_argument("out")
    parser.add_argument("--stop-after", type=int, default=0)
    args = parser.parse_args()
    train(args.path, args.kind, args.workers, args.out, args.stop_after)

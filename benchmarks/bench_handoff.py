"""Every field through the hand-off: detection and instances batches against an images-only
pack of the same images, side by side in one run (issue 37, part 4).

Per scene (image size x objects per image), the same synthetic PNGs are packed three ways
(npy): images only (one class folder: a class id per image), detection (a YOLO-seg folder of
rectangles packed with `task="detection"`: their boxes) and instances (the same folder: boxes
and per-object masks). Each pack is read as shuffled batches of `--batch` by

  torch, 0 workers   `packer.torch.PackedDataset` in `DataLoader(batch_size=None)`
  torch, 2 workers   the same with `num_workers=2, persistent_workers=True`: every field of a
                     batch (images, boxes, labels, masks, ...) crosses in packer's
                     shared-memory slots, split per image in this process
  Keras, 2 workers   `PackedSequence(workers=2)`: packer's own worker processes

in interleaved rounds (the order rotating), the pack's files read once before each run. The
table gives img/s and each reading's ratio to the images-only pack read the same way in the
same round (median and range over rounds; target >= 0.9) and, for torch with 2 workers, to
the same pack read with 0 workers (what the hand-off itself costs). Instances batches carry
one uint8 H x W mask per object, unpacked from bits: at 57 objects an image that is 19 times
the image's own bytes, so their ratio measures the masks' bytes, not the hand-off.

A second table gives, per scene, what one batch's stages cost in this process, in
microseconds of CPU time (best of 7 runs of 100; CPU time, so that other jobs on a shared
machine do not count; a large batch's copy split over threads counts every thread's time):
the images-only batch (torch, 0 workers), the detection batch, its ragged fields' read, its
per-image dicts (torchvision's input: one tensor per field per image, made in whichever
process yields the batch, the parent with workers) and the Keras reader's padding; and the
ceiling that the dicts alone put on detection / images only,
`images / (images + dicts)`, whatever the reading costs. A third (with `--cpu-seconds`
above 0) gives, with 2 workers, each pack's CPU a batch in the parent and in all processes
(parent + workers, from /proc), read for that long alone: on a machine whose cores are all
busy, throughput goes as the inverse of that total, so images / detection of it is the ratio
such a machine can reach, however loaded it is by others.

    python benchmarks/bench_handoff.py [--images 256] [--batch 32] [--rounds 3] [--seconds 0.5]
        [--scenes 128x128:4,128x128:57,320x240:4,320x240:57] [--readers torch0,torch2,keras2]
        [--no-costs | --only-costs] [--cpu-seconds 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator
from pathlib import Path

import harness
import numpy as np
from PIL import Image

KINDS = ("images", "detection", "instances")
READERS = {"torch0": "torch, 0 workers", "torch2": "torch, 2 workers", "keras2": "Keras, 2 workers"}
SCENES = "128x128:4,128x128:57,320x240:4,320x240:57"


def make_sources(root: Path, size: tuple[int, int], objects: int, count: int) -> dict[str, Path]:
    """A YOLO-seg folder (rectangles as 4-point polygons) and a class folder of the same PNGs
    (links): the sources of the three packs of one scene."""
    rng = np.random.default_rng(objects)
    width, height = size
    yolo, plain = root / "yolo", root / "plain" / "scenes"
    for folder in (yolo / "images/train", yolo / "labels/train", plain):
        folder.mkdir(parents=True)
    (yolo / "data.yaml").write_text("train: images/train\nnames:\n  - a\n  - b\n  - c\n")
    for i in range(count):
        small = rng.integers(0, 255, (height // 8, width // 8, 3), np.uint8)
        picture = Image.fromarray(small).resize(size, Image.Resampling.BILINEAR)
        picture.save(yolo / f"images/train/{i:05d}.png", compress_level=1)
        os.link(yolo / f"images/train/{i:05d}.png", plain / f"{i:05d}.png")
        lo = rng.uniform(0, 0.8, (objects, 2))
        hi = np.minimum(lo + rng.uniform(0.03, 0.2, (objects, 2)), 1)
        lines = [
            f"{k % 3} {x0:.5f} {y0:.5f} {x1:.5f} {y0:.5f} {x1:.5f} {y1:.5f} {x0:.5f} {y1:.5f}"
            for k, ((x0, y0), (x1, y1)) in enumerate(zip(lo, hi, strict=True))
        ]
        (yolo / f"labels/train/{i:05d}.txt").write_text("\n".join(lines) + "\n")
    return {"images": plain.parent, "detection": yolo, "instances": yolo}


def make_packs(root: Path, size: tuple[int, int], objects: int, count: int) -> dict[str, Path]:
    """The images-only, detection and instances packs of one scene."""
    import packer

    sources = make_sources(root / "src", size, objects, count)
    packs = {}
    for kind, src in sources.items():
        task = {} if kind == "images" else {"task": kind}
        out = root / kind
        packer.pack(src, out=out, size=size, workers=2, progress=False, **task)
        packs[kind] = out
    return packs


def torch_stream(pack: Path, batch: int, workers: int) -> Iterator[int]:
    """Images of each batch of `packer.torch` in a DataLoader, epoch after epoch."""
    import torch

    from packer.torch import PackedDataset

    ds = PackedDataset(pack, batch_size=batch, seed=0)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0
    )

    def epoch(e: int) -> Iterator:
        ds.set_epoch(e)
        return iter(loader)

    return harness.endless(epoch)


def keras_stream(pack: Path, batch: int, workers: int) -> tuple[Iterator[int], Callable]:
    """Images of each batch of `PackedSequence(workers=...)`, epoch after epoch; its closer."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from packer.keras import PackedSequence

    seq = PackedSequence(pack, batch_size=batch, seed=0, workers=workers)

    def epoch(e: int) -> Iterator:
        seq.on_epoch_end()
        return (seq[i] for i in range(len(seq)))

    return harness.endless(epoch), seq.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256, help="per scene")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5, help="per reading per round")
    parser.add_argument("--scenes", default=SCENES, help="WxH:OBJECTS, comma-separated")
    parser.add_argument("--readers", default=",".join(READERS), help="of torch0,torch2,keras2")
    parser.add_argument("--no-costs", action="store_true", help="skip the stage costs' table")
    parser.add_argument("--only-costs", action="store_true", help="only the stage costs' table")
    parser.add_argument("--cpu-seconds", type=float, default=0, help="per pack and reader")
    args = parser.parse_args()
    readers = [READERS[r.strip()] for r in args.readers.split(",")]
    began = time.perf_counter()
    rows, costs, cpu = [], [], []
    with tempfile.TemporaryDirectory(prefix="packer-handoff-") as tmp:
        for number, scene in enumerate(args.scenes.split(",")):
            dims, objects = scene.split(":")
            size = tuple(int(v) for v in dims.split("x"))
            start = time.perf_counter()
            packs = make_packs(Path(tmp) / f"scene{number}", size, int(objects), args.images)
            packed = time.perf_counter()
            name = f"{dims}, {objects} objects"
            if not args.only_costs:
                rows += measure_scene(name, packs, readers, args)
            if not args.no_costs:
                costs.append(stage_costs(name, packs, args.batch))
            if args.cpu_seconds > 0:
                cpu += cpu_per_batch(name, packs, readers, args)
            print(
                f"{scene}: packed in {packed - start:.0f} s, read in "
                f"{time.perf_counter() - packed:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    notes = (
        f"Batches of {args.batch}, {args.images} images a scene, shuffled, uint8, npy packs "
        f"warmed before each run; {args.rounds} interleaved rounds x {args.seconds:g} s; ratios "
        "per round to the images-only pack read the same way (median, range). Shared machine: "
        f"compare within this run. Whole run: {time.perf_counter() - began:.0f} s."
    )
    headers = ["scene", "pack", "reader", "img/s", "/ images only", "/ 0 workers"]
    if rows:
        harness.report("Every field through the hand-off", headers, rows, notes)
    if costs:
        headers = [
            "scene",
            "images-only batch",
            "detection batch",
            "ragged read",
            "per-image dicts",
            "Keras padding",
            "ceiling: images / (images + dicts)",
        ]
        notes = (
            f"Microseconds of CPU a batch of {args.batch} in one process (best of 7 runs of 100), "
            "torch with 0 workers; the dicts: `packer.torch.device.detection_tensors` on a "
            "batch already read (4 fields: boxes, labels, iscrowd, difficult)."
        )
        harness.report("Where a detection batch's time goes", headers, costs, notes)
    if cpu:
        headers = ["scene", "pack", "reader", "parent", "all processes", "images only / this"]
        notes = (
            f"Microseconds of CPU a batch of {args.batch}, each pack read alone for "
            f"{args.cpu_seconds:g} s after 20 batches' warm-up (CPU times from /proc, in clock "
            "ticks)."
        )
        harness.report("CPU a batch with 2 workers", headers, cpu, notes)


def stage_costs(name: str, packs: dict[str, Path], batch: int) -> list:
    """One scene's row of stage costs (microseconds a batch; see the module's docstring)."""
    from packer.torch import PackedDataset, device

    images = PackedDataset(packs["images"], batch_size=batch, seed=0)
    detection = PackedDataset(packs["detection"], batch_size=batch, seed=0)
    loader = detection.loader
    pixels, fixed, fields, counts = loader.sample_batch(0)
    padded = loader.ragged_targets(0, names=loader.padder.names)

    def us(step: Callable[[], object]) -> float:
        return min(timeit.repeat(step, number=100, repeat=7, timer=time.process_time)) * 1e4

    plain = us(lambda: images[0])
    dicts = us(lambda: device.detection_tensors(pixels, fields, counts, "NHWC", fixed))
    return [
        name,
        plain,
        us(lambda: detection[0]),
        us(lambda: loader.ragged_targets(0)),
        dicts,
        us(lambda: loader.padder(*padded)),
        f"{plain / (plain + dicts):.2f}",
    ]


def cpu_per_batch(name: str, packs: dict[str, Path], readers: list[str], args) -> list[list]:
    """One scene's rows of CPU a batch with 2 workers (see the module's docstring)."""
    rows = []
    for reader in [r for r in readers if "2 workers" in r]:
        totals = {}
        for kind in KINDS:
            close = None
            if reader.startswith("torch"):
                stream = torch_stream(packs[kind], args.batch, 2)
            else:
                stream, close = keras_stream(packs[kind], args.batch, 2)
            for _ in range(20):
                next(stream)
            batches, start = 0, time.perf_counter()
            parent, every = time.process_time(), harness.cpu_seconds()
            while time.perf_counter() - start < args.cpu_seconds:
                next(stream)
                batches += 1
            parent = (time.process_time() - parent) / batches * 1e6
            every = totals[kind] = (harness.cpu_seconds() - every) / batches * 1e6
            stream.close()  # its DataLoader's workers end with it
            if close is not None:
                close()
            ratio = "" if kind == "images" else f"{totals['images'] / every:.2f}"
            rows.append([name, kind, reader, parent, every, ratio])
    return rows


def measure_scene(name: str, packs: dict[str, Path], readers: list[str], args) -> list[list]:
    """The rows of one scene: every pack read by every reader, in interleaved rounds."""
    steps, files, closers = {}, {}, []
    for kind in KINDS:
        for reader in readers:
            workers = 0 if "0 workers" in reader else 2
            if reader.startswith("torch"):
                stream = torch_stream(packs[kind], args.batch, workers)
            else:
                stream, close = keras_stream(packs[kind], args.batch, workers)
                closers.append(close)
            step = steps[f"{kind}|{reader}"] = stream.__next__
            files[step] = packs[kind] / "train"

    def measure(step, seconds: float) -> float:  # the pack read, warmed again first
        harness.warm(files[step])
        return harness.run_for(step, seconds)

    try:
        rates = harness.side_by_side(steps, args.seconds, args.rounds, measure=measure, warmup=2)
    finally:
        for close in closers:
            close()
    rows = []
    for kind in KINDS:
        for reader in readers:
            mine = rates[f"{kind}|{reader}"]
            base = rates[f"images|{reader}"]
            over = [a / b for a, b in zip(mine, base, strict=True)]
            zero = rates.get(f"{kind}|torch, 0 workers") if reader == READERS["torch2"] else None
            by_zero = (
                ""
                if zero is None
                else harness.spread([a / b for a, b in zip(mine, zero, strict=True)])
            )
            cell = "" if kind == "images" else harness.spread(over)
            rows.append([name, kind, reader, statistics.median(mine), cell, by_zero])
    return rows


if __name__ == "__main__":
    main()

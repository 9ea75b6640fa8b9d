"""Detection packs against images-only packs of the same images, in one run (issue 28).

Part 1, packing: `--images` synthetic 480x360 JPEG scenes with a few objects each (discs,
boxes, bars as COCO polygons with their boxes) are packed by `pack SRC --workers 2 --size
480x352` in fresh processes, alternating, for `--rounds`; medians of img/s compared:

    detection pack / the same images packed without annotations (class folders), target >= 0.9
    instances pack / the COCO semantic pack of the same annotations,             target >= 0.8

Part 2, reading (warm page cache, files re-read just before): batches of 16 (480x352) for
`--seconds` each, alternating, for `--rounds`:

    packer.torch detection batches (0 workers) / PackedSequence on the images-only pack,
    target >= 0.8

    packer.torch detection batches / a per-step COCO loader in a DataLoader with 2 workers,
    target >= 10

The per-step loader is torchvision's `CocoDetection` + `transforms.v2.Resize` where torchvision
imports; with the CPU-only torch wheel here it does not (`operator torchvision::nms does not
exist`), and a stand-in doing the same work runs instead: PIL decode, RGB, resize to 480x352,
boxes scaled, tensors, per image (the table says which ran).

    python benchmarks/bench_detection.py [--images 400] [--rounds 3] [--seconds 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
from PIL import Image

SIZE = (480, 360)
PACK = str(Path(sys.executable).parent / "pack")
CATEGORIES = [{"id": 1, "name": "disc"}, {"id": 3, "name": "box"}, {"id": 7, "name": "bar"}]


def polygon(rng: np.random.Generator, kind: int) -> list[float]:
    """A disc (24-gon), a box or a bar somewhere in the frame, as a COCO polygon."""
    width, height = SIZE
    cx, cy = rng.uniform(0, width), rng.uniform(0, height)
    r = rng.uniform(min(SIZE) / 12, min(SIZE) / 5)
    if kind == 0:
        angles = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        points = np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], 1)
    else:
        w, h = (r, 0.7 * r) if kind == 1 else (2 * r, max(2.0, r / 4))
        points = np.array([[cx - w, cy - h], [cx + w, cy - h], [cx + w, cy + h], [cx - w, cy + h]])
    points = points.clip([0, 0], [width - 1, height - 1])
    return [round(float(v), 2) for v in points.ravel()]


def make_sources(tmp: Path, count: int) -> tuple[Path, Path]:
    """A COCO layout (train/ + annotations/instances_train.json) and the same JPEGs in a
    class folder (images only)."""
    rng = np.random.default_rng(0)
    coco, plain = tmp / "coco", tmp / "plain" / "scenes"
    (coco / "train").mkdir(parents=True)
    (coco / "annotations").mkdir()
    plain.mkdir(parents=True)
    images, annotations = [], []
    for i in range(count):
        name = f"{i:06d}.jpg"
        base = rng.integers(0, 255, (SIZE[1] // 8, SIZE[0] // 8, 3), np.uint8)
        picture = Image.fromarray(base).resize(SIZE, Image.Resampling.BICUBIC)
        picture.save(coco / "train" / name, quality=90)
        os.link(coco / "train" / name, plain / name)
        images.append({"id": i, "file_name": name, "width": SIZE[0], "height": SIZE[1]})
        for _ in range(int(rng.integers(2, 8))):
            kind = int(rng.integers(0, 3))
            poly = polygon(rng, kind)
            xs, ys = poly[0::2], poly[1::2]
            annotations.append({
                "id": len(annotations) + 1, "image_id": i, "category_id": CATEGORIES[kind]["id"],
                "iscrowd": 0, "area": 1.0, "segmentation": [poly],
                "bbox": [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)],
            })  # fmt: skip
    data = {"images": images, "annotations": annotations, "categories": CATEGORIES}
    (coco / "annotations" / "instances_train.json").write_text(json.dumps(data))
    return coco, plain.parent


def pack_rate(src: Path, out: Path, extra: list[str]) -> float:
    """img/s of one `pack` run in a fresh process (its own timing, from the manifest)."""
    subprocess.run(
        [PACK, str(src), "--out", str(out), "--size", "480x352", "--workers", "2",
         "--overwrite", *extra],
        check=True, capture_output=True,
    )  # fmt: skip
    run = json.loads((out / "dataset.json").read_text())["run"]
    return run["packed_samples"] / run["seconds"]


def read_rate(make_batch, batches: int, seconds: float) -> float:
    """img/s over `seconds` of batches made by `make_batch(index)`."""
    done, images, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        images += len(make_batch(done % batches)[0])
        done += 1
    return images / (time.perf_counter() - start)


class PerStepCoco:
    """What a per-step COCO loader does for each image: decode, resize, move the boxes."""

    def __init__(self, root: Path) -> None:
        data = json.loads((root / "annotations" / "instances_train.json").read_text())
        self.root = root / "train"
        self.images = data["images"]
        self.boxes: dict[int, list] = {}
        for a in data["annotations"]:
            self.boxes.setdefault(a["image_id"], []).append(a)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int):
        import torch

        entry = self.images[index]
        image = Image.open(self.root / entry["file_name"]).convert("RGB").resize((480, 352))
        scale = np.array([480 / entry["width"], 352 / entry["height"]] * 2, np.float32)
        anns = self.boxes.get(entry["id"], [])
        boxes = np.array([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in anns)])
        target = {
            "boxes": torch.from_numpy((boxes.reshape(-1, 4) * scale).astype(np.float32)),
            "labels": torch.tensor([a["category_id"] for a in anns], dtype=torch.int64),
        }
        return torch.from_numpy(np.array(image)), target


def per_step_loader(root: Path):
    """torchvision's CocoDetection + transforms.v2 when it imports, else the stand-in; and
    its name for the table."""
    import torch

    try:
        from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
        from torchvision.transforms import v2

        dataset = wrap_dataset_for_transforms_v2(
            CocoDetection(
                str(root / "train"),
                str(root / "annotations" / "instances_train.json"),
                transforms=v2.Compose([v2.ToImage(), v2.Resize((352, 480))]),
            )
        )
        name = "torchvision CocoDetection + transforms.v2, DataLoader 2 workers"
    except Exception:
        dataset = PerStepCoco(root)
        name = "per-step stand-in (PIL decode + resize + boxes), DataLoader 2 workers"
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=16, shuffle=True, num_workers=2, collate_fn=pairs
    )
    return name, loader


def pairs(batch: list) -> tuple:
    """(images, targets) of a batch of (image, target) items, as detection loaders collate."""
    return tuple(zip(*batch, strict=True))


def loader_rate(loader, seconds: float) -> float:
    images, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for batch, _ in loader:
            images += len(batch)
            if time.perf_counter() - start >= seconds:
                break
    return images / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    import packer.keras
    import packer.torch

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        coco, plain = make_sources(tmp, args.images)
        kinds = {
            "images only (class folders)": (plain, []),
            "detection": (coco, ["--task", "detection"]),
            "instances": (coco, ["--task", "instances"]),
            "COCO semantic masks": (coco, []),
        }
        packs = {
            name: functools.partial(pack_rate, src, tmp / name.split()[0], extra)
            for name, (src, extra) in kinds.items()
        }
        rates = harness.side_by_side(packs, 0, args.rounds, measure=lambda run, _: run())
        by_images = harness.median_ratios(rates, "images only (class folders)")
        by_semantic = harness.median_ratios(rates, "COCO semantic masks")
        notes = (
            f"{args.images} images 480x360 -> 480x352, 2 workers, medians of {args.rounds} "
            "interleaved rounds (shared machine, compare within a run)"
        )
        rows = [[name, statistics.median(r)] for name, r in rates.items()]
        harness.report("Detection packs: pack", ["pack", "img/s"], rows, notes)
        print(f"detection / images only: {by_images['detection']:.2f} (target >= 0.9)")
        print(f"instances / COCO semantic: {by_semantic['instances']:.2f} (target >= 0.8)\n")

        torch_ds = packer.torch.PackedDataset(tmp / "detection", "train", batch_size=16, seed=0)
        seq = packer.keras.PackedSequence(tmp / "images", "train", batch_size=16, seed=0)
        name, loader = per_step_loader(coco)
        readers = {
            "packer.torch detection batches": functools.partial(
                read_rate, torch_ds.__getitem__, len(torch_ds)
            ),
            "PackedSequence, images only": functools.partial(read_rate, seq.__getitem__, len(seq)),
            name: functools.partial(loader_rate, loader),
        }
        reads = harness.side_by_side(
            readers,
            args.seconds,
            args.rounds,
            lambda: harness.warm(tmp / "detection", tmp / "images"),
            measure=lambda run, seconds: run(seconds),
        )
        det = "packer.torch detection batches"
        over_seq = harness.median_ratios(reads, "PackedSequence, images only")[det]
        over_loader = harness.median_ratios(reads, name)[det]
        notes = (
            f"batches of 16 480x352, warm page cache, medians of {args.rounds} interleaved "
            f"rounds x {args.seconds:g} s (shared machine, compare within a run)"
        )
        rows = [[reader, statistics.median(r)] for reader, r in reads.items()]
        harness.report("Detection packs: read", ["reader", "img/s"], rows, notes)
        print(f"{det} / PackedSequence images only: {over_seq:.2f} (target >= 0.8)")
        print(f"{det} / {name}: {over_loader:.1f} (target >= 10)")


if __name__ == "__main__":
    main()

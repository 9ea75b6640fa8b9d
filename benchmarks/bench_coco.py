"""COCO annotations against PNG masks of the same images, and a large COCO JSON, in one run.

Part 1, the ratio (issue 21): `--images` synthetic 480x360 JPEG scenes, each with a few
instance polygons (discs, boxes, bars) in a COCO instances JSON, and the same images with
the semantic masks those annotations give (drawn once with pycocotools and torchvision's
rule) as grey PNGs in `train/` + `trainannot/`. Both are packed by `pack SRC --workers 2
--size 480x352` in a fresh process, alternating, for `--rounds`; medians compared:

    ratio = COCO img/s / PNG-mask img/s, target >= 0.8

Part 2, a large JSON: `--annotations` (100,000) polygon annotations over one tenth as many
small images. Reported: the JSON's size and load time, `make_plan`'s time and the planning
process's peak memory, and the pack's workers' peak private memory (USS, sampled from
/proc while it runs), beside the same pack with a JSON of one annotation per image: a worker
holds its tasks' annotations, never the index.

    python benchmarks/bench_coco.py [--images 2000] [--rounds 3] [--annotations 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
import numpy as np
from PIL import Image
from pycocotools import mask as coco_mask

from packer.packing import make_plan

SIZE = (480, 360)
PACK = str(Path(sys.executable).parent / "pack")  # the command, from this environment
CATEGORIES = [{"id": 1, "name": "disc"}, {"id": 3, "name": "box"}, {"id": 7, "name": "bar"}]


def shape_polygon(rng: np.random.Generator, kind: int, width: int, height: int) -> list[float]:
    """One instance outline: a disc (24-gon), a box or a bar, somewhere in the frame."""
    cx, cy = rng.uniform(0, width), rng.uniform(0, height)
    r = rng.uniform(min(width, height) / 12, min(width, height) / 5)
    if kind == 0:
        angles = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        points = np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], 1)
    else:
        w, h = (r, 0.7 * r) if kind == 1 else (2 * r, max(2.0, r / 4))
        points = np.array([[cx - w, cy - h], [cx + w, cy - h], [cx + w, cy + h], [cx - w, cy + h]])
    points = points.clip([0, 0], [width - 1, height - 1])
    return [round(float(v), 2) for v in points.ravel()]


def semantic(annotations: list[dict], width: int, height: int) -> np.ndarray:
    """torchvision's rule: the category's class (1..K) where one instance lies, 255 where two."""
    classes = {c["id"]: i + 1 for i, c in enumerate(CATEGORIES)}
    target = np.zeros((height, width), np.uint8)
    count = np.zeros((height, width), np.uint8)
    for a in annotations:
        rles = coco_mask.frPyObjects(a["segmentation"], height, width)
        m = coco_mask.decode(coco_mask.merge(rles)).astype(bool)
        target = np.maximum(target, (m * classes[a["category_id"]]).astype(np.uint8))
        count += m
    target[count > 1] = 255
    return target


def make_sources(
    tmp: Path,
    images: int,
    per_image: tuple[int, int],
    pixels: tuple[int, int],
    masks: bool,
    seed: int = 0,
) -> Path:
    """A COCO layout (`annotations/instances_train.json` + `train/`); with `masks`, also the
    PNG-mask twin (`<root>-png/train/` hard links + `trainannot/`). Returns the COCO root."""
    rng = np.random.default_rng(seed)
    root = tmp / f"coco-{images}"
    (root / "train").mkdir(parents=True)
    (root / "annotations").mkdir()
    twin = tmp / f"coco-{images}-png"
    if masks:
        (twin / "train").mkdir(parents=True)
        (twin / "trainannot").mkdir()
    width, height = pixels
    records, annotations = [], []
    base = None
    for i in range(images):
        name = f"img_{i:06d}.jpg"
        anns = []
        for _ in range(int(rng.integers(*per_image))):
            kind = int(rng.integers(0, 3))
            anns.append(
                {
                    "id": len(annotations) + len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": CATEGORIES[kind]["id"],
                    "segmentation": [shape_polygon(rng, kind, width, height)],
                    "iscrowd": 0,
                    "area": 0.0,
                    "bbox": [0, 0, 1, 1],
                }
            )
        annotations += anns
        records.append({"id": i + 1, "file_name": name, "width": width, "height": height})
        if masks or base is None:
            picture = rng.integers(40, 200, (height, width, 3), np.uint8)
            Image.fromarray(picture).save(root / "train" / name, quality=90)
            base = root / "train" / name
        else:
            os.link(base, root / "train" / name)  # the large JSON's images: one file, linked
        if masks:
            os.link(root / "train" / name, twin / "train" / name)
            mask = semantic(anns, width, height)
            Image.fromarray(mask).save(twin / "trainannot" / f"img_{i:06d}.png")
    coco = {"images": records, "annotations": annotations, "categories": CATEGORIES}
    (root / "annotations" / "instances_train.json").write_text(json.dumps(coco))
    return root


def pack_rate(src: Path, out: Path, count: int) -> float:
    """img/s of `pack SRC --workers 2 --size 480x352` in a fresh process, fresh output."""
    harness.warm(src)
    started = time.perf_counter()
    subprocess.run(
        [PACK, str(src), "--out", str(out), "--workers", "2", "--size", "480x352", "--no-progress"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rate = count / (time.perf_counter() - started)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return rate


def uss_kib(pid: int) -> int:
    """A process's private memory (Private_Clean + Private_Dirty), KiB; 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("Private_"))


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def workers_peak_uss(src: Path, out: Path) -> tuple[float, float]:
    """(seconds, peak private MiB of any one worker) of `pack SRC --workers 2`, sampled."""
    proc = subprocess.Popen(
        [PACK, str(src), "--out", str(out), "--workers", "2", "--size", "64x48", "--no-progress"],
        stdout=subprocess.DEVNULL,
    )
    peak = 0
    started = time.perf_counter()

    def sample() -> None:
        nonlocal peak
        while proc.poll() is None:
            for child in children(proc.pid):
                peak = max(peak, uss_kib(child))
            time.sleep(0.05)

    watcher = threading.Thread(target=sample)
    watcher.start()
    proc.wait()
    watcher.join()
    seconds = time.perf_counter() - started
    subprocess.run(["rm", "-rf", str(out)], check=True)
    if proc.returncode:
        raise SystemExit(f"pack of {src} failed ({proc.returncode})")
    return seconds, peak / 1024


def large_json(tmp: Path, annotations: int) -> list[tuple[str, str]]:
    """Part 2's rows: the large JSON, and one annotation per image beside it."""
    images = max(1, annotations // 10)
    rows = []
    for per_image, label in (((10, 11), f"{annotations:,} annotations"), ((1, 2), "1 per image")):
        root = make_sources(
            tmp / label.split()[0].replace(",", ""), images, per_image, (64, 48), masks=False
        )
        path = root / "annotations" / "instances_train.json"
        t0 = time.perf_counter()
        json.loads(path.read_text())
        load = time.perf_counter() - t0
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        plan = make_plan(root, tmp / "plan-out", size=(64, 48))
        planning = time.perf_counter() - t0
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        del plan
        seconds, worker = workers_peak_uss(root, tmp / "out-large")
        rows.append(
            (
                label,
                f"{images:,} images, JSON {path.stat().st_size / 1e6:.1f} MB: "
                f"json.loads {load:.2f} s, "
                f"make_plan {planning:.2f} s (+{grown:.0f} MiB peak), pack {seconds:.1f} s, "
                f"worker peak private {worker:.0f} MiB",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--annotations", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        coco = make_sources(tmp, args.images, (3, 9), SIZE, masks=True)
        png = Path(f"{coco}-png")
        packs = {
            "PNG masks (train/ + trainannot/)": lambda: pack_rate(png, tmp / "out", args.images),
            "COCO polygons (instances JSON)": lambda: pack_rate(coco, tmp / "out", args.images),
        }
        rates = harness.side_by_side(packs, 0, args.rounds, measure=lambda run, _: run())
        ratios = harness.median_ratios(rates, "PNG masks (train/ + trainannot/)")
        rows = [[name, statistics.median(r), f"{ratios[name]:.2f}x"] for name, r in rates.items()]
        notes = (
            f"pack --workers 2 --size 480x352, {args.images} images, medians of {args.rounds} "
            "interleaved rounds, warm page cache (shared machine, compare within a run)"
        )
        harness.report("COCO polygons vs PNG masks", ["source", "img/s", "ratio"], rows, notes)
        for label, text in large_json(tmp, args.annotations):
            print(f"{label}: {text}")


if __name__ == "__main__":
    main()

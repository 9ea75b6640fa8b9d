"""Pack speed against this machine's decode limit, side by side in one run.

For each dataset, the same images are (a) decoded, cropped/resized and label-mapped in one
process with OpenCV (the per-image work that cannot be avoided: the decode limit) and (b)
packed by `packer.pack` with 1 and 2 workers. Parallel efficiency = pack img/s divided by
N x the single-core limit. The sources are repeated through hard links (same files, new
names) so each pack runs for seconds and start-up does not dominate; each contender runs in
several alternating rounds and the medians are compared.

    python benchmarks/bench_pack.py [--repeat 5] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

import packer
from packer.imaging import Geometry, load_image, load_mask, resample_mask
from packer.sources import scan

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATASETS = {"camvid": (480, 352), "hymenoptera": (224, 224)}


def linked_copy(src: Path, dest: Path, repeat: int) -> Path:
    """`src`'s tree with every file hard-linked `repeat` times under new names."""
    for path in src.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(src)
        (dest / rel.parent).mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() in {".csv", ".txt", ".json"}:
            os.link(path, dest / rel)
            continue
        for k in range(repeat):
            os.link(path, dest / rel.parent / f"r{k}_{rel.name}")
    return dest


def warm(src: Path) -> None:
    """Read every source file so that each contender finds them in the page cache."""
    for path in src.rglob("*"):
        if path.is_file():
            path.read_bytes()


def decode_limit(src: Path, size: tuple[int, int]) -> float:
    """Images/s of one process doing only the unavoidable work on every sample: decode,
    crop/resize, and the mask's nearest-neighbour resample (CamVid's index masks need no map)."""
    samples = scan(src).samples
    geometry = Geometry(size)
    start = time.perf_counter()
    for sample in samples:
        placement = load_image(src / sample.image, geometry).placement
        if sample.mask is not None:
            resample_mask(load_mask(src / sample.mask).values, placement)
    return len(samples) / (time.perf_counter() - start)


def pack_rate(src: Path, out: Path, size: tuple[int, int], workers: int) -> float:
    """Images/s of a whole pack (scan, plan, workers, finalise, manifest)."""
    start = time.perf_counter()
    ds = packer.pack(src, out=out, size=size, workers=workers, overwrite=True)
    return sum(s.count for s in ds.splits.values()) / (time.perf_counter() - start)


def measure(name: str, size: tuple[int, int], repeat: int, rounds: int, tmp: Path) -> dict:
    src = linked_copy(SHARED / name, tmp / name, repeat)
    runs: dict[str, list[float]] = {"limit": [], "pack_1": [], "pack_2": []}
    for _ in range(rounds):  # alternate the contenders so that drift hits them alike
        warm(src)  # idle file pages are evicted within about 30 s on these machines
        runs["limit"].append(decode_limit(src, size))
        for w in (1, 2):
            warm(src)
            runs[f"pack_{w}"].append(pack_rate(src, tmp / f"{name}-out{w}", size, w))
            shutil.rmtree(tmp / f"{name}-out{w}")
    limit = statistics.median(runs["limit"])
    rates = {w: statistics.median(runs[f"pack_{w}"]) for w in (1, 2)}
    return {
        "dataset": name,
        "images": len(scan(src).samples),
        "decode_limit_1": limit,
        "pack_1": rates[1],
        "pack_2": rates[2],
        "efficiency_1": rates[1] / limit,
        "efficiency_2": rates[2] / (2 * limit),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="hard links per source file")
    parser.add_argument("--rounds", type=int, default=3, help="medians over this many rounds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, size in DATASETS.items():
            if (SHARED / name).is_dir():
                rows.append(measure(name, size, args.repeat, args.rounds, Path(tmp)))
    print(f"cores: {os.cpu_count()}, numpy {np.__version__}, opencv {cv2.__version__}\n")
    print("| dataset | images | decode limit, 1 core | pack w1 | pack w2 | eff. w1 | eff. w2 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['dataset']} | {r['images']} | {r['decode_limit_1']:.0f} | {r['pack_1']:.0f} "
            f"| {r['pack_2']:.0f} | {r['efficiency_1']:.2f} | {r['efficiency_2']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""Lists with columns and Python samples against class folders of the same images, in one run.

`--images` synthetic 320x240 JPEGs in class folders (`train/<class>/img_<i>.jpg`) are packed
three ways, each by `packer.pack(..., size=(160, 120), workers=2)` into a fresh folder,
alternating for `--rounds`, and the per-round ratios' medians compared (issue 38):

    class folders    packer.pack("train/")
    list w/ columns  packer.pack("list.csv", root="train/"): id (no extension), label, tags
                     (space-separated: multi-hot), age (fractions: float32)
    Python samples   packer.pack([{"images": path, "labels": name}, ...])

    ratio = list img/s / class-folders img/s, target >= 0.9
    ratio = Python samples img/s / class-folders img/s, target >= 0.9

    python benchmarks/bench_lists.py [--images 600] [--rounds 3] [--json results.json]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import harness
import numpy as np

import packer

CLASSES = ("cat", "dog", "owl")
TAGS = ("clear", "cloudy", "road", "water")
SIZE = (160, 120)


def make_source(top: Path, count: int) -> tuple[Path, Path, list[dict]]:
    """Class folders of `count` JPEGs, the list naming them, and the Python samples."""
    rng = np.random.default_rng(0)
    folders = top / "train"
    lines = ["id,label,tags,age"]
    samples = []
    for i in range(count):
        label = CLASSES[i % len(CLASSES)]
        (folders / label).mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, (24, 32, 3), np.uint8)
        image = cv2.resize(base, (320, 240), interpolation=cv2.INTER_CUBIC)
        path = folders / label / f"img_{i}.jpg"
        cv2.imwrite(str(path), image, [cv2.IMWRITE_JPEG_QUALITY, 90])
        tags = " ".join(sorted({TAGS[i % 4], TAGS[(3 * i + 1) % 4]}))
        lines.append(f"{label}/img_{i},{label},{tags},{20 + i * 0.37:.2f}")
        samples.append({"images": str(path), "labels": label})
    listed = top / "list.csv"
    listed.write_text("\n".join(lines) + "\n")
    return folders, listed, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        folders, listed, samples = make_source(top, args.images)
        harness.warm(harness.files_of(folders.rglob("*.jpg")))
        options = {"size": SIZE, "workers": 2, "progress": False}
        contenders = {
            "class folders": lambda out: packer.pack(folders, out=out, **options),
            "list with columns": lambda out: packer.pack(listed, out=out, root=folders, **options),
            "Python samples": lambda out: packer.pack(samples, out=out, **options),
        }

        def measure(pack, seconds: float) -> float:
            out = top / "out"
            shutil.rmtree(out, ignore_errors=True)
            start = time.perf_counter()
            ds = pack(out)
            rate = ds["train"].count / (time.perf_counter() - start)
            assert ds["train"].count == args.images
            return rate

        for pack in contenders.values():  # untimed: imports, the first pool, the caches
            measure(pack, 0)
        rates = harness.side_by_side(contenders, 0, args.rounds, measure=measure)
    ratios = harness.ratios(rates, "class folders")
    rows = [
        [
            name,
            harness.spread(values, 0),
            harness.spread(ratios[name]),
            "" if name == "class folders" else ">= 0.9",
        ]
        for name, values in rates.items()
    ]
    harness.report(
        f"Lists with columns and Python samples vs class folders ({args.images} JPEGs "
        f"320x240 -> {SIZE[0]}x{SIZE[1]}, workers=2, {args.rounds} rounds)",
        ["pack of the same images", "img/s", "/ class folders", "target"],
        rows,
        "Each pack into a fresh folder; median (min-max) of the rounds; ratios paired by round. "
        f"Medians: {', '.join(f'{n} {statistics.median(r):.2f}' for n, r in ratios.items())}.",
        args.json,
    )


if __name__ == "__main__":
    main()

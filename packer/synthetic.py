"""Synthetic datasets: the sample `make sample` packs, and the fixtures the tests build.

`python -m packer.synthetic DIR` writes a small segmentation set (`train/` + `train_labels/`,
`val/` + `val_labels/`, colour-coded masks, `class_dict.csv`) of shapes on textured ground.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image

SHAPE_CLASSES = (
    ("background", (0, 0, 0)),
    ("disc", (220, 20, 60)),
    ("box", (70, 130, 180)),
    ("bar", (250, 170, 30)),
)


def shapes_scene(
    rng: np.random.Generator, width: int, height: int
) -> tuple[np.ndarray, np.ndarray]:
    """An RGB picture of discs, boxes and bars, and its class-index mask."""
    yy, xx = np.mgrid[0:height, 0:width]
    base = rng.integers(40, 120, 3)
    image = (
        base
        + 25 * np.sin(xx / rng.uniform(5, 20))[..., None]
        + rng.normal(0, 6, (height, width, 3))
    ).clip(0, 255)
    mask = np.zeros((height, width), np.uint8)
    for _ in range(rng.integers(2, 6)):
        cls = int(rng.integers(1, len(SHAPE_CLASSES)))
        cx, cy = rng.integers(0, width), rng.integers(0, height)
        r = rng.integers(min(width, height) // 10, min(width, height) // 4)
        if cls == 1:
            region = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        elif cls == 2:
            region = (abs(xx - cx) < r) & (abs(yy - cy) < r * 0.7)
        else:
            region = (abs(xx - cx) < r * 2) & (abs(yy - cy) < max(2, r // 4))
        mask[region] = cls
        image[region] = np.asarray(SHAPE_CLASSES[cls][1]) * rng.uniform(0.7, 1.0)
    return image.astype(np.uint8), mask


def color_mask(mask: np.ndarray) -> np.ndarray:
    """Class indices -> the class colours of SHAPE_CLASSES (what colour-coded datasets ship)."""
    palette = np.asarray([c for _, c in SHAPE_CLASSES], np.uint8)
    return palette[mask]


def write_class_dict(path: Path) -> None:
    lines = ["name,r,g,b"] + [f"{n},{r},{g},{b}" for n, (r, g, b) in SHAPE_CLASSES]
    path.write_text("\n".join(lines) + "\n")


def make_segmentation(
    root: Path,
    counts: dict[str, int],
    size: tuple[int, int] = (320, 240),
    seed: int = 0,
    image_ext: str = ".png",
) -> Path:
    """`<split>/` images + `<split>_labels/` colour masks + class_dict.csv under `root`."""
    rng = np.random.default_rng(seed)
    for split, count in counts.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        (root / f"{split}_labels").mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image, mask = shapes_scene(rng, *size)
            Image.fromarray(image).save(root / split / f"scene_{i:04d}{image_ext}", quality=92)
            Image.fromarray(color_mask(mask)).save(root / f"{split}_labels" / f"scene_{i:04d}.png")
    write_class_dict(root / "class_dict.csv")
    return root


def make_classification(
    root: Path, per_class: dict[str, int], size: tuple[int, int] = (96, 72), seed: int = 0
) -> Path:
    """`<class>/*.jpg` folders whose mean colour tells the class (a model can learn it)."""
    rng = np.random.default_rng(seed)
    for k, (name, count) in enumerate(sorted(per_class.items())):
        (root / name).mkdir(parents=True, exist_ok=True)
        tint = np.asarray(SHAPE_CLASSES[1 + k % 3][1], np.float64)
        for i in range(count):
            noise = rng.normal(0, 20, (size[1], size[0], 3))
            image = (0.6 * tint + noise).clip(0, 255).astype(np.uint8)
            Image.fromarray(image).save(root / name / f"{name}_{i:04d}.jpg", quality=90)
    return root


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m packer.synthetic DIR", file=sys.stderr)
        return 2
    root = make_segmentation(Path(argv[0]), {"train": 48, "val": 16})
    print(f"sample dataset written to {root} (48 train + 16 val scenes, 4 classes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

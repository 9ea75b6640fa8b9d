"""`packer preview DIR --out grid.png`: a picture of packed samples, to check a pack by eye.

Segmentation masks are drawn over their images in the class colours (the ignore index stays
clear) with a legend of the classes shown; classification samples carry their class name.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .labels import preview_colors
from .reading.dataset import PackedDataset

TILE_WIDTH = 240
CAPTION = 16
MARGIN = 6
ALPHA = 0.5


def class_colors(dataset: PackedDataset) -> np.ndarray:
    """(C, 3) uint8 display colours: the dataset's own, or distinct ones where it has none."""
    fallback = preview_colors(len(dataset.classes))
    return np.asarray(
        [c["color"] or fallback[i] for i, c in enumerate(dataset.classes)], np.uint8
    ).reshape(-1, 3)


def overlay(image: np.ndarray, mask: np.ndarray, colors: np.ndarray) -> np.ndarray:
    """Blend class colours over the image where the mask holds a class id."""
    known = mask < len(colors)
    out = image.astype(np.float32)
    out[known] = (1 - ALPHA) * out[known] + ALPHA * colors[mask[known]]
    return out.astype(np.uint8)


def render(
    path: str | os.PathLike, split: str | None = None, count: int = 16, seed: int = 0
) -> Image.Image:
    """A grid of `count` seeded random samples of `split` (the first split by default)."""
    dataset = PackedDataset(path)
    part = dataset[split or next(iter(dataset.splits))]
    chosen = np.sort(np.random.default_rng(seed).permutation(part.count)[:count])
    batch = part.reader.read(chosen)
    colors = class_colors(dataset)
    height, width = dataset.image_shape[:2]
    tile = (TILE_WIDTH, max(1, round(TILE_WIDTH * height / width)))
    columns = math.ceil(math.sqrt(len(chosen)))
    rows = math.ceil(len(chosen) / columns)
    font = ImageFont.load_default()
    tiles = []
    for k, index in enumerate(chosen):
        if "masks" in batch:
            pixels = overlay(batch["images"][k], batch["masks"][k], colors)
            caption = f"#{index}"
        else:
            pixels = batch["images"][k]
            caption = f"#{index} {dataset.class_names[int(batch['labels'][k])]}"
        tiles.append((Image.fromarray(pixels).resize(tile, Image.Resampling.BILINEAR), caption))
    shown = _classes_shown(batch, len(colors))
    legend_rows = math.ceil(len(shown) / columns) if shown else 0
    cell = (tile[0] + MARGIN, tile[1] + CAPTION + MARGIN)
    canvas = Image.new(
        "RGB",
        (columns * cell[0] + MARGIN, rows * cell[1] + MARGIN + legend_rows * CAPTION + MARGIN),
        "white",
    )
    draw = ImageDraw.Draw(canvas)
    for k, (picture, caption) in enumerate(tiles):
        x, y = MARGIN + (k % columns) * cell[0], MARGIN + (k // columns) * cell[1]
        canvas.paste(picture, (x, y))
        draw.text((x, y + tile[1] + 2), caption, fill="black", font=font)
    top = rows * cell[1] + MARGIN
    _legend(draw, shown, dataset.class_names, colors, top, cell[0], columns, font)
    return canvas


def _classes_shown(batch: dict[str, np.ndarray], num_classes: int) -> list[int]:
    """Class ids present in the masks shown (segmentation only)."""
    if "masks" not in batch:
        return []
    present = np.flatnonzero(np.bincount(batch["masks"].ravel(), minlength=num_classes))
    return [int(c) for c in present if c < num_classes]


def _legend(draw, shown, names, colors, top: int, column: int, per_row: int, font) -> None:
    """Colour swatches with class names, one per grid column, below the grid."""
    for k, cls in enumerate(shown):
        x, y = MARGIN + (k % per_row) * column, top + (k // per_row) * CAPTION
        draw.rectangle(
            (x, y + 2, x + 12, y + 12), fill=tuple(int(v) for v in colors[cls]), outline="black"
        )
        draw.text((x + 18, y + 1), f"{cls} {names[cls]}", fill="black", font=font)


def save(path: str | os.PathLike, out: str | os.PathLike, **options) -> Path:
    """Render and write the grid as PNG; returns where."""
    out = Path(out)
    render(path, **options).save(out)
    return out

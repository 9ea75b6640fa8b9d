"""Small packs the mixture tests mix, and helpers that tell which pack and sample a row came
from (every synthetic image differs, within a pack and across packs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import packer
from packer.synthetic import make_classification, make_segmentation

SIZE = (32, 24)  # (W, H) of the segmentation packs


def seg_pack(root: Path, count: int, seed: int, **options) -> Path:
    """A segmentation pack of `count` train scenes (and 3 val), shards of 5 samples."""
    src = make_segmentation(root / f"src{seed}", {"train": count, "val": 3}, (64, 48), seed=seed)
    out = root / f"seg{seed}-{'-'.join(options) or 'plain'}"
    packer.pack(src, out=out, size=SIZE, shard_size=5 * 32 * 24 * 4, **options)
    return out


def cls_pack(root: Path, per_class: dict[str, int], seed: int) -> Path:
    """A classification pack of 16x16 images, one class folder each."""
    src = make_classification(root / f"cls{seed}", per_class, (24, 20), seed=seed)
    out = root / f"cls{seed}-npy"
    packer.pack(src, out=out, size=(16, 16))
    return out


def image_ids(*packs: Path) -> dict[bytes, tuple[int, int]]:
    """Image bytes -> (pack number, sample index) over every train sample of `packs`."""
    ids = {}
    for k, path in enumerate(packs):
        part = packer.open(path)["train"]
        images = part.reader.read(np.arange(part.count))["images"]
        ids.update({image.tobytes(): (k, i) for i, image in enumerate(images)})
    return ids

"""Byte-identical packs across refactors: shard hashes of fixed inputs and options, pinned,
and the manifest's classes and statistics with them.

The sources are computed by integer arithmetic (no random streams, lossless PNG), and the
options avoid arithmetic that could differ between library versions (no resampling but exact
2x area averaging and packer's own nearest-neighbour mask resampling; no gzip or PNG/JPEG
re-encoding). The hashes in GOLDEN were written by the packer of commit ee1492b, before the
layout was reorganised; a change to them is a change of the on-disk bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import packer

from .conftest import manifest_hashes

CLASSES = ("background", (0, 0, 0)), ("disc", (220, 20, 60)), ("bar", (250, 170, 30))


def scene(i: int, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """An image whose pixels are a fixed function of position and index, and its class mask."""
    yy, xx = np.mgrid[0:height, 0:width]
    image = np.stack([(xx * 7 + yy * 3 + i * 31 + c * 50) % 256 for c in range(3)], axis=-1)
    mask = np.zeros((height, width), np.uint8)
    mask[(xx - (i * 5) % width) ** 2 + (yy - height // 2) ** 2 < (height // 3) ** 2] = 1
    mask[(yy // 4) % 5 == i % 5] = 2
    return image.astype(np.uint8), mask


def make_sources(root: Path) -> Path:
    """train/ + train_labels/ (10 scenes), val/ + val_labels/ (3), colour masks, class_dict.csv."""
    palette = np.asarray([c for _, c in CLASSES], np.uint8)
    for split, count in (("train", 10), ("val", 3)):
        (root / split).mkdir(parents=True)
        (root / f"{split}_labels").mkdir()
        for i in range(count):
            image, mask = scene(i + (100 if split == "val" else 0), 64, 48)
            Image.fromarray(image).save(root / split / f"s{i:02d}.png")
            Image.fromarray(palette[mask]).save(root / f"{split}_labels" / f"s{i:02d}.png")
    lines = ["name,r,g,b"] + [f"{n},{r},{g},{b}" for n, (r, g, b) in CLASSES]
    (root / "class_dict.csv").write_text("\n".join(lines) + "\n")
    return root


def make_class_folders(root: Path) -> Path:
    """Two class folders of computed PNGs."""
    for k, name in enumerate(("ants", "bees")):
        (root / name).mkdir(parents=True)
        for i in range(7):
            image, _ = scene(10 * k + i, 40, 30)
            Image.fromarray(image).save(root / name / f"{name}{i}.png")
    return root


CASES = {
    "seg-npy-same-size": ("seg", dict(format="npy", size=(64, 48), shard_size=40_000)),
    "seg-npy-halved": ("seg", dict(format="npy", size=(32, 24), shard_size=10_000)),
    "seg-npy-padded": ("seg", dict(format="npy", size=(80, 60), resize="none", pad_value=7)),
    "seg-tfrecord": ("seg", dict(format="tfrecord", size=(32, 24), shard_size=10_000)),
    "seg-tfrecord-index": ("seg", dict(format="tfrecord", size=(64, 48), index=True)),
    "seg-recordio": ("seg", dict(format="recordio", size=(32, 24), shard_size=10_000)),
    "cls-npy": ("cls", dict(format="npy", size=(40, 30), shard_size=12_000)),
    "cls-tfrecord": ("cls", dict(format="tfrecord", size=(20, 15))),
    "cls-recordio-split": (
        "cls",
        dict(format="recordio", size=(40, 30), split={"train": 0.7, "val": 0.3}, seed=3),
    ),
}

# One digest per case: SHA-256 over the sorted "path sha256" lines of the manifest's files.
GOLDEN: dict[str, str] = {
    "cls-npy": "a9af218fec4aa24a35e735f86fd1cbd87615170d4941d66c17334996c50246cb",
    "cls-recordio-split": "8b71aa0da38cbeb9e9c4df4ea9198added53644827a35b9933885bc59ba0a53f",
    "cls-tfrecord": "8d68cbaa04b1691dcdd97fa990c226b0516a687539315c11785e51c8006283e7",
    "seg-npy-halved": "2ded1f2b60e7a5b960e3dd346814ecfba73eefadb33ecbd9f6e7dae2296e2ccb",
    "seg-npy-padded": "71bcd8138c8c01bc16e0d4c2eb95969c18d0f6a933cacec73838703275af9f72",
    "seg-npy-same-size": "bb4350bc113fbcd9e6d47cdf59cb467e73fbf1f300dd1b935e948cbe8b23e2d1",
    "seg-recordio": "38c952ec0b960295786de797563aca9348e5b48e4761ee360ab955e382121561",
    "seg-tfrecord": "45e3bc1aacd6b7301cdf7cff36d1fde8d2cc86ec750ddfa329b945be802dfc90",
    "seg-tfrecord-index": "cc02cf78cc1a97031349f9f2c766ee1899b7ecebaf31aa360a431b22e6e32805",
}


# One digest per case of what dataset.json says about the data besides its files (task,
# fields, classes, ignore index, per-channel and class statistics): SHA-256 of those entries
# as sorted JSON. Written by the packer of commit e7d1b7a.
GOLDEN_MANIFEST: dict[str, str] = {
    "cls-npy": "01515ceee8d9882824a6d2dc1371573778603f8d5cf35abe0d53bde38871f21f",
    "cls-recordio-split": "f44aa3a3710db1dde684b678585cc65e4c90d6cb3f4f388d0009913775654784",
    "cls-tfrecord": "b118b75ec3233b31d20e81f5232b720f5ea36db897e159a06b302f65bced3c17",
    "seg-npy-halved": "d9adb07fe78e3b38715c91621553ba660b0bb7508779f65879d3924e52120f88",
    "seg-npy-padded": "f46fab7243bca3e34a2b46d592292bf51b5116bd890f780fdc3b34dbb6168732",
    "seg-npy-same-size": "266e9eaa7816204449929318c5691873eab2f0cc91e502739b9c9a74c8ea108b",
    "seg-recordio": "d9adb07fe78e3b38715c91621553ba660b0bb7508779f65879d3924e52120f88",
    "seg-tfrecord": "d9adb07fe78e3b38715c91621553ba660b0bb7508779f65879d3924e52120f88",
    "seg-tfrecord-index": "266e9eaa7816204449929318c5691873eab2f0cc91e502739b9c9a74c8ea108b",
}
DESCRIBED = ("task", "fields", "classes", "ignore_index", "stats")


def digest(root: Path) -> str:
    lines = "".join(f"{p} {h}\n" for p, h in sorted(manifest_hashes(root).items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def manifest_digest(root: Path) -> str:
    """SHA-256 of the manifest's description of the data (DESCRIBED), as sorted JSON."""
    data = json.loads((root / "dataset.json").read_text())
    described = json.dumps({k: data[k] for k in DESCRIBED}, sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("golden")
    return {"seg": make_sources(base / "seg"), "cls": make_class_folders(base / "cls")}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("workers", [1, 2])
def test_pack_bytes_match_golden_hashes(sources, tmp_path, case, workers):
    kind, options = CASES[case]
    out = tmp_path / case
    packer.pack(sources[kind], out=out, workers=workers, **options)
    assert digest(out) == GOLDEN[case], json.dumps(manifest_hashes(out), indent=1)
    assert manifest_digest(out) == GOLDEN_MANIFEST[case], (out / "dataset.json").read_text()

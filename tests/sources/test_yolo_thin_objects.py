"""Thin objects stay: a dense YOLO-seg export whose polygons are 1 px wide or high (up to its
label file's 6 decimals) keeps every object at identity geometry, as torchvision's detection
reference, Detectron2 and Ultralytics keep them; `min_box_size` still drops small objects on
request, counted, and reads a 1 px object as 1 px despite float32 pixels (0.99997)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import packer
from tests.fixtures.yolo import polygon2mask

W, H = 300, 240  # k / 300 and k / 240 written with 6 decimals: float32 pixels miss whole ones


def strips(i: int) -> list[tuple[int, list[float]]]:
    """An image's objects: (class, polygon in pixels), 1 px wide columns and 1 px high rows."""
    found = []
    for k in range(12):
        x = 7 + 23 * k + i
        found.append((k % 3, [x, 10, x + 1, 10, x + 1, 50 + k, x, 50 + k]))
        y = 60 + 15 * k + i
        found.append(((k + 1) % 3, [20, y, 90 + k, y, 90 + k, y + 1, 20, y + 1]))
    return found


def yolo_seg(root) -> dict[str, list[tuple[int, list[float]]]]:
    """A YOLO-seg folder of 3 train images, as an export writes it; the objects by image."""
    (root / "images/train").mkdir(parents=True)
    (root / "labels/train").mkdir(parents=True)
    (root / "data.yaml").write_text("train: images/train\nnames:\n  - a\n  - b\n  - c\n")
    objects = {}
    for i in range(3):
        Image.new("RGB", (W, H), (40 * i, 90, 30)).save(root / f"images/train/{i}.png")
        objects[f"{i}.png"] = strips(i)
        lines = [
            f"{c} " + " ".join(f"{v / (W, H)[j % 2]:.6f}" for j, v in enumerate(points))
            for c, points in objects[f"{i}.png"]
        ]
        (root / f"labels/train/{i}.txt").write_text("\n".join(lines) + "\n")
    return objects


def float32_sides(root) -> np.ndarray:
    """The smaller side of every object as Ultralytics' float32 arithmetic makes it."""
    sides = []
    for path in sorted((root / "labels/train").glob("*.txt")):
        for line in path.read_text().splitlines():
            points = np.array(line.split()[1:], np.float32).reshape(-1, 2)
            points *= np.array([W, H], np.float32)
            lo, hi = points.min(0).astype(np.float64), points.max(0).astype(np.float64)
            sides.append(min(hi - lo))
    return np.array(sides)


def targets(ds) -> dict[str, dict]:
    part = ds["train"]
    return {part.source(i).split("/")[-1]: part[i][1] for i in range(part.count)}


@pytest.mark.parametrize("task", ["instances", "detection"])
def test_one_pixel_objects_are_all_kept_at_identity(tmp_path, task):
    objects = yolo_seg(tmp_path / "src")
    assert (float32_sides(tmp_path / "src") < 1).sum() > 10  # what once dropped them
    ds = packer.pack(tmp_path / "src", out=tmp_path / "out", size=(W, H), task=task, workers=1)
    assert not ds.manifest.get("dropped_objects")
    for name, target in targets(ds).items():
        expected = objects[name]
        assert target["labels"].tolist() == [c for c, _ in expected]
        sides = np.minimum(*(target["boxes"][:, 2:] - target["boxes"][:, :2]).T)
        np.testing.assert_allclose(sides, 1.0, atol=1e-3)
        if task == "instances":  # each mask Ultralytics' polygon2mask of the label line
            lines = (tmp_path / f"src/labels/train/{name[:-4]}.txt").read_text().splitlines()
            for mask, line in zip(target["masks"], lines, strict=True):
                segment = np.array(line.split()[1:], np.float32).reshape(-1, 2)
                segment *= np.array([W, H], np.float32)
                assert mask.any()
                np.testing.assert_array_equal(mask, polygon2mask((H, W), [segment]))


def test_min_box_size_drops_smaller_objects_and_counts_them(tmp_path):
    yolo_seg(tmp_path / "src")
    one = packer.pack(
        tmp_path / "src", out=tmp_path / "one", size=(W, H), task="detection", min_box_size=1
    )
    assert not one.manifest.get("dropped_objects")  # 0.99997 px is 1 px
    two = packer.pack(
        tmp_path / "src", out=tmp_path / "two", size=(W, H), task="detection", min_box_size=2.5
    )
    dropped = two.manifest["dropped_objects"]
    assert len(dropped) == 3 * 24 and {d["reason"] for d in dropped} == {"under 2.5 px"}
    assert all(t["boxes"].shape == (0, 4) for t in targets(two).values())


def test_min_box_size_is_checked(tmp_path):
    yolo_seg(tmp_path / "src")
    with pytest.raises(ValueError, match=r"min_box_size.*expected a number"):
        packer.pack(tmp_path / "src", out=tmp_path / "o", task="detection", min_box_size=-1)

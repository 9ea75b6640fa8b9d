"""Boxes land on the pixels they annotate whatever the pack's geometry: EXIF rotation, fill's
crop, fit's padding, stretch (annotations are in the image as displayed, as its JSON's width
and height say)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import packer
from packer.imaging import Placement
from packer.packing.objects import place_boxes

DISPLAYED = (40, 30)  # W, H as the image is shown
RECT = (5, 8, 15, 20)  # x1, y1, x2, y2 of a white rectangle in it


def rotated_source(root: Path) -> Path:
    """A JPEG stored rotated, EXIF orientation 6 (turn 90 degrees clockwise to display),
    whose displayed image has a white rectangle at RECT, and a COCO JSON boxing it."""
    shown = np.zeros((DISPLAYED[1], DISPLAYED[0], 3), np.uint8)
    x1, y1, x2, y2 = RECT
    shown[y1:y2, x1:x2] = 255
    stored = np.ascontiguousarray(np.rot90(shown, k=1))  # counter-clockwise: 30 wide, 40 high
    exif = Image.Exif()
    exif[0x0112] = 6
    (root / "train").mkdir(parents=True)
    Image.fromarray(stored).save(root / "train" / "a.jpg", quality=100, exif=exif)
    data = {
        "images": [{"id": 1, "file_name": "a.jpg", "width": DISPLAYED[0], "height": DISPLAYED[1]}],
        "annotations": [
            {
                "id": 1,
                "image_id": 1,
                "category_id": 1,
                "iscrowd": 0,
                "area": 120.0,
                "bbox": [x1, y1, x2 - x1, y2 - y1],
                "segmentation": [[x1, y1, x2, y1, x2, y2, x1, y2]],
            }
        ],
        "categories": [{"id": 1, "name": "rect"}],
    }
    (root / "annotations").mkdir()
    (root / "annotations" / "instances_train.json").write_text(json.dumps(data))
    return root


def white_box(image: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(image.min(axis=2) > 128)
    return xs.min(), ys.min(), xs.max() + 1, ys.max() + 1


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.parametrize(
    "size, resize",
    [((40, 30), "none"), ((20, 15), "stretch"), ((32, 32), "fit"), ((20, 30), "fill")],
)
def test_boxes_and_masks_land_on_their_pixels(tmp_path, size, resize):
    src = rotated_source(tmp_path / "src")
    ds = packer.pack(src, out=tmp_path / "p", size=size, resize=resize, task="instances")
    image, target = ds["train"][0]
    assert image.shape[:2] == (size[1], size[0])
    found = white_box(image)
    np.testing.assert_allclose(target["boxes"][0], found, atol=1.0)
    ys, xs = np.nonzero(target["masks"][0])
    np.testing.assert_allclose((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1), found, atol=1.0)


def test_a_box_is_its_corners_hull_clipped_to_the_pasted_area():
    # a 100x50 source, crop x 20..80, scaled to 30x25, pasted at (5, 10) of a 40x45 canvas
    placement = Placement((20, 0, 80, 50), (30, 25), (5, 10), (40, 45))
    boxes = np.array([[20, 0, 80, 50], [0, 10, 30, 20], [90, 0, 99, 5], [40, 10, 50, 30]])
    placed = place_boxes(boxes, placement)
    np.testing.assert_allclose(placed[0], [5, 10, 35, 35])
    np.testing.assert_allclose(placed[1], [5, 15, 10, 20])  # clipped at the crop's left edge
    assert placed[2, 2] - placed[2, 0] == 0  # wholly outside: no width left
    np.testing.assert_allclose(placed[3], [15, 15, 20, 25])

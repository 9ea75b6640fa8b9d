"""Small COCO detection datasets made by the tests: real boxes (pycocotools' `toBbox` of each
instance, as COCO's own), polygons, RLEs, overlapping objects, a crowd, an empty image; and the
same annotations as CVAT and Roboflow export them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pycocotools import mask as coco_mask

from tests.coco_fixtures import CATEGORIES, SIZE, box, disc, instances_json, rle_of, write_images

W, H = SIZE


def bbox_of(segmentation, height: int = H, width: int = W) -> list[float]:
    """COCO's bbox [x, y, w, h] of a segmentation (polygons or RLE), as pycocotools makes it."""
    if isinstance(segmentation, list):
        rle = coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation["counts"], list):
        rle = coco_mask.frPyObjects(segmentation, height, width)
    else:
        rle = {"size": segmentation["size"], "counts": segmentation["counts"].encode()}
    return [float(v) for v in coco_mask.toBbox(rle)]


def detection_annotations() -> list[list[tuple[int, object, int]]]:
    """Per image, (category id, segmentation, iscrowd): overlapping objects (a box under a
    disc), an RLE, a two-polygon object, a crowd on odd images, and an empty last image."""
    images = []
    for i in range(5):
        x, y = 2.0 + 2 * i, 3.0 + i
        anns = [
            (1, [box(x, y, x + 14, y + 12)], 0),
            (3, [disc(x + 12, y + 9, 6)], 0),  # overlaps the box
            (18, rle_of(box(25, 2, 38, 10), H, W, compressed=True), 0),
            (1, [box(2, 20, 8, 28), box(30, 20, 36, 28)], 0),
        ]
        if i % 2:
            anns.append((3, rle_of(disc(20, 22, 5), H, W, compressed=False), 1))
        images.append(anns)
    images.append([])
    return images


def detection_json(names: list[str], per_image: list, categories=CATEGORIES) -> dict:
    """`coco_fixtures.instances_json` with each annotation's real bbox, as pycocotools makes it."""
    data = instances_json(names, per_image, categories=categories)
    for annotation in data["annotations"]:
        annotation["bbox"] = bbox_of(annotation["segmentation"])
    return data


def make_detection_coco(root: Path, boxes_only: bool = False) -> Path:
    """`annotations/instances_{train,val}.json` + `train/`, `val/` (6 and 2 images)."""
    per_image = detection_annotations()
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for k, (split, chosen) in enumerate((("train", per_image), ("val", per_image[1:3]))):
        names = write_images(root / split, len(chosen), seed=k)
        data = detection_json(names, chosen)
        if boxes_only:
            for a in data["annotations"]:
                a["segmentation"] = []
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(data))
    return root


def make_cvat(root: Path) -> Path:
    """CVAT's COCO export: `images/` + `annotations/instances_default.json`."""
    names = write_images(root / "images", 6)
    (root / "annotations").mkdir(parents=True)
    data = detection_json(names, detection_annotations())
    (root / "annotations" / "instances_default.json").write_text(json.dumps(data))
    return root


def make_roboflow(root: Path) -> Path:
    """Roboflow's COCO export: `<split>/_annotations.coco.json` beside the images, `valid/`
    for val, and a placeholder category 0 that no annotation uses."""
    placeholder = {"id": 0, "name": "shapes", "supercategory": "none"}
    categories = [placeholder, *({**c, "supercategory": "shapes"} for c in CATEGORIES)]
    per_image = detection_annotations()
    for k, (split, chosen) in enumerate((("train", per_image), ("valid", per_image[1:3]))):
        names = write_images(root / split, len(chosen), seed=k)
        data = detection_json(names, chosen, categories)
        (root / split / "_annotations.coco.json").write_text(json.dumps(data))
    return root


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst

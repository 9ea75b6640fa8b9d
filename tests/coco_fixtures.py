"""Small COCO instances and panoptic datasets made by the tests: synthetic shapes as polygons,
compressed and uncompressed RLE, overlaps of two classes and of one, crowds, an image without
annotations; categories in id order or (SHUFFLED) listed out of it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as coco_mask

CATEGORIES = [
    {"id": 1, "name": "person", "supercategory": "x"},
    {"id": 3, "name": "car", "supercategory": "x"},
    {"id": 18, "name": "dog", "supercategory": "x"},
]
# listed out of id order, ids with gaps, one (bicycle) never annotated: classes go by id
SHUFFLED = [
    {"id": 18, "name": "dog", "supercategory": "x"},
    {"id": 1, "name": "person", "supercategory": "x"},
    {"id": 7, "name": "bicycle", "supercategory": "x"},
    {"id": 3, "name": "car", "supercategory": "x"},
]
SIZE = (40, 30)  # width, height of every image


def box(x0: float, y0: float, x1: float, y1: float) -> list[float]:
    return [x0, y0, x1, y0, x1, y1, x0, y1]


def disc(cx: float, cy: float, r: float, n: int = 16) -> list[float]:
    angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return [round(float(v), 2) for a in angles for v in (cx + r * np.cos(a), cy + r * np.sin(a))]


def rle_of(polygon: list[float], height: int, width: int, compressed: bool) -> dict:
    """A polygon as an RLE: compressed (counts a string) or uncompressed (a list of runs)."""
    rle = coco_mask.merge(coco_mask.frPyObjects([polygon], height, width))
    if compressed:
        return {"size": [height, width], "counts": rle["counts"].decode()}
    flat = coco_mask.decode(rle).flatten(order="F")
    runs, value, count = [], 0, 0
    for pixel in flat:
        if pixel == value:
            count += 1
        else:
            runs.append(count)
            value, count = pixel, 1
    runs.append(count)
    return {"size": [height, width], "counts": runs}


def instance_annotations(seed: int = 0) -> list[list[tuple[int, object, int]]]:
    """Per image, (category id, segmentation, iscrowd): polygons, both RLEs, overlaps, a crowd,
    a two-polygon instance, two persons overlapping (x 4..8, y 24..28: no other class
    there), and (last image) nothing."""
    w, h = SIZE
    rng = np.random.default_rng(seed)
    images = []
    for i in range(6):
        x, y = float(rng.integers(2, 12)), float(rng.integers(2, 8))
        anns = [
            (1, [box(x, y, x + 14, y + 12)], 0),
            (3, [disc(x + 16, y + 10, 7)], 0),  # overlaps the box
            (18, rle_of(box(25, 2, 38, 10), h, w, compressed=True), 0),
            (1, [box(2, 20, 8, 28), box(30, 20, 36, 28)], 0),  # one instance, two polygons
            (1, [box(4, 24, 12, 29)], 0),  # overlaps that person: the same class
        ]
        if i % 2:
            anns.append((3, rle_of(disc(20, 22, 5), h, w, compressed=False), 1))  # a crowd
        images.append(anns)
    images.append([])  # an image without annotations: all background
    return images


def write_images(folder: Path, count: int, seed: int = 0) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = []
    for i in range(count):
        name = f"{i:012d}.jpg"
        picture = rng.integers(0, 255, (SIZE[1], SIZE[0], 3), np.uint8)
        Image.fromarray(picture).save(folder / name, quality=95)
        names.append(name)
    return names


def class_ids(categories: list[dict], background: bool = True) -> dict[int, int]:
    """category id -> class id: the rank of the id (after background 0 when asked), as
    torchvision's references map a sorted category list."""
    ranked = sorted(c["id"] for c in categories)
    return {cid: k + background for k, cid in enumerate(ranked)}


def instances_json(
    names: list[str], per_image: list, first_id: int = 1, categories: list[dict] = CATEGORIES
) -> dict:
    w, h = SIZE
    images = [{"id": 100 + i, "file_name": n, "width": w, "height": h} for i, n in enumerate(names)]
    annotations, aid = [], first_id
    for i, anns in enumerate(per_image):
        for category, segmentation, crowd in anns:
            annotations.append(
                {
                    "id": aid,
                    "image_id": 100 + i,
                    "category_id": category,
                    "segmentation": segmentation,
                    "iscrowd": crowd,
                    "area": 1.0,
                    "bbox": [0, 0, 1, 1],
                }
            )
            aid += 1
    return {"images": images, "annotations": annotations, "categories": categories}


def make_coco(
    root: Path, splits: dict[str, int] | None = None, categories: list[dict] = CATEGORIES
) -> Path:
    """`annotations/instances_<split>2017.json` + `<split>2017/` images under root."""
    per_image = instance_annotations()
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for k, (split, count) in enumerate((splits or {"train": 7, "val": 3}).items()):
        names = write_images(root / f"{split}2017", count, seed=k)
        mine = per_image[:count] if split == "train" else per_image[-count:]
        data = instances_json(names, mine, categories=categories)
        (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(data))
    return root


def torchvision_target(
    anns: list[dict],
    height: int,
    width: int,
    ignore: int = 255,
    categories: list[dict] = CATEGORIES,
) -> np.ndarray:
    """torchvision's references/segmentation ConvertCocoPolysToMask, on annToMask masks,
    categories mapped to 1..K by id; crowd regions made `ignore` afterwards."""
    from pycocotools.coco import COCO

    coco = COCO()
    coco.dataset = {
        "images": [{"id": 0, "height": height, "width": width}],
        "annotations": [],
        "categories": categories,
    }
    coco.createIndex()
    classes = class_ids(categories)
    target = np.zeros((height, width), np.uint8 if ignore <= 255 else np.uint16)
    if not anns:
        return target
    plain = [a for a in anns if not a["iscrowd"]]
    masks = np.stack([coco.annToMask({**a, "image_id": 0}) for a in plain])
    cats = np.array([classes[a["category_id"]] for a in plain], np.uint8)
    target = (masks * cats[:, None, None]).max(axis=0).astype(target.dtype)
    target[masks.sum(0) > 1] = ignore
    for a in anns:
        if a["iscrowd"]:
            target[coco.annToMask({**a, "image_id": 0}) > 0] = ignore
    return target


def make_panoptic(
    root: Path, count: int = 5, categories: list[dict] = CATEGORIES
) -> tuple[Path, dict[str, np.ndarray]]:
    """`annotations/panoptic_train2017.json` + PNGs + `train2017/`; returns root and, per
    image file name, the expected class ids (categories by id -> 0..K-1, 255 ignore)."""
    w, h = SIZE
    names = write_images(root / "train2017", count)
    pngs = root / "annotations" / "panoptic_train2017"
    pngs.mkdir(parents=True)
    classes = class_ids(categories, background=False)
    rng = np.random.default_rng(5)
    entries, expected = [], {}
    for i, name in enumerate(names):
        ids = np.zeros((h, w), np.int64)  # 0: VOID
        segments = []
        for k, category in enumerate((1, 3, 18, 3)):
            segment_id = int(rng.integers(1, 1 << 24))
            x0 = 10 * k
            ids[5 : 25 - k, x0 : x0 + 8] = segment_id
            segments.append(
                {"id": segment_id, "category_id": category, "iscrowd": int(k == 3), "area": 1}
            )
        ids[0, 0] = 4242  # segment ids the JSON does not list: one among the listed ones,
        ids[0, 1] = (1 << 24) - 1  # and white, above them all
        rgb = np.stack([ids % 256, ids // 256 % 256, ids // 65536], -1).astype(np.uint8)
        png = name.replace(".jpg", ".png")
        Image.fromarray(rgb).save(pngs / png)
        entries.append({"image_id": 100 + i, "file_name": png, "segments_info": segments})
        want = np.full((h, w), 255, np.uint8)
        for s in segments[:3]:
            want[ids == s["id"]] = classes[s["category_id"]]
        expected[name] = want
    images = [{"id": 100 + i, "file_name": n, "width": w, "height": h} for i, n in enumerate(names)]
    data = {"images": images, "annotations": entries, "categories": categories}
    (root / "annotations" / "panoptic_train2017.json").write_text(json.dumps(data))
    return root, expected

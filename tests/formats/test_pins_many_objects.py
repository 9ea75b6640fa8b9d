"""A sample of more than 8 objects, packed at its own size in every format and read back by
every path: each object's mask is pycocotools' `annToMask` of its polygon (the planes after the
eighth, and their bytes past the first, in their place), its box COCO's, and crowd and
difficult flags as given."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pycocotools import mask as coco_mask

import packer
from tests.fixtures.coco import CATEGORIES, SIZE, box, instances_json, write_images
from tests.fixtures.detection import bbox_of

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
W, H = SIZE
COUNT = 11  # objects in the first image: more than 8
CROWDS = {1, 9}  # kept with crowd="class", flagged: one before the eighth object, one after


def polygons() -> list[list[float]]:
    """COUNT small boxes on a grid, each at its own place: no two masks alike."""
    return [box(2 + 6 * (k % 6), 2 + 12 * (k // 6), 5 + 6 * (k % 6), 9 + 12 * (k // 6))
            for k in range(COUNT)]  # fmt: skip


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("many")
    src = root / "coco"
    names = write_images(src / "train", 2)
    ids = [c["id"] for c in CATEGORIES]
    per_image = [[(ids[k % len(ids)], [p], k in CROWDS) for k, p in enumerate(polygons())], []]
    data = instances_json(names, per_image)
    for a in data["annotations"]:
        a["bbox"] = bbox_of(a["segmentation"])
    (src / "annotations").mkdir()
    (src / "annotations/instances_train.json").write_text(json.dumps(data))
    options = dict(size=SIZE, resize="none", task="instances", crowd="class", workers=1)
    return {f: packer.pack(src, out=root / f, format=f, **options).root
            for f in ("npy", "tfrecord", "recordio")}  # fmt: skip


@pytest.mark.parametrize("fmt", ["npy", "tfrecord", "recordio"])
def test_every_object_of_a_crowded_sample_comes_back_in_its_place(packs, fmt):
    part = packer.open(packs[fmt])["train"]
    targets = [part[i][1] for i in range(part.count)]
    (target,) = [t for t in targets if len(t["labels"])]
    assert len(target["labels"]) == COUNT
    order = np.argsort(target["boxes"][:, 0] + 100 * target["boxes"][:, 1], kind="stable")
    want = [coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects([p], H, W)))
            for p in polygons()]  # fmt: skip
    assert target["masks"].shape == (COUNT, H, W)
    for k, row in enumerate(order):
        np.testing.assert_array_equal(target["masks"][row], want[k], err_msg=f"object {k}")
        x, y, w, h = bbox_of([polygons()[k]])
        np.testing.assert_allclose(target["boxes"][row], [x, y, x + w, y + h], atol=1e-4)
    assert target["iscrowd"][order].tolist() == [int(k in CROWDS) for k in range(COUNT)]
    assert target["difficult"].tolist() == [0] * COUNT  # COCO has no difficult flag
    ids = sorted(c["id"] for c in CATEGORIES)  # labels: categories ranked by id
    ranked = [ids.index([c["id"] for c in CATEGORIES][k % len(CATEGORIES)]) for k in range(COUNT)]
    assert target["labels"][order].tolist() == ranked


def test_the_formats_agree_on_the_crowded_sample(packs):
    """One reference (npy) against TFRecord and RecordIO, field by field, in object order."""
    reference = [packer.open(packs["npy"])["train"][i][1] for i in range(2)]
    for fmt in ("tfrecord", "recordio"):
        part = packer.open(packs[fmt])["train"]
        for want, got in zip(reference, [part[i][1] for i in range(2)], strict=True):
            for key in ("labels", "iscrowd", "difficult", "masks"):
                np.testing.assert_array_equal(got[key], want[key], err_msg=f"{fmt} {key}")
            np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-4)

"""COCO files as exporters write them, drawn as pycocotools and torchvision's rule draw them:
categories listed out of id order with gaps, optional keys left out, and an ignore index
past a byte (instances and panoptic)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import packer
from tests.fixtures.coco import (
    EXACT,
    SHUFFLED,
    H,
    W,
    annotations_of,
    make_coco,
    make_panoptic,
    masks_by_image,
    painted,
    torchvision_target,
)

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


def test_categories_out_of_id_order_become_classes_by_id(tmp_path):
    """Categories listed out of id order, with gaps and one never used: class k is the k-th
    smallest id, as torchvision's references number them, in every overlap mode."""
    src = make_coco(tmp_path / "src", {"train": 7}, categories=SHUFFLED)
    anns = annotations_of(src / "annotations" / "instances_train2017.json")
    for overlap in ("ignore", "last"):
        ds = packer.pack(src, tmp_path / overlap, overlap=overlap, **EXACT)
        for name, mask in masks_by_image(ds, "train").items():
            want = (
                torchvision_target(anns[name], H, W, categories=SHUFFLED)
                if overlap == "ignore"
                else painted(anns[name], overlap, "ignore", SHUFFLED)
            )
            np.testing.assert_array_equal(mask, want, name)
        assert ds.class_names == ["background", "person", "car", "bicycle", "dog"]


def test_panoptic_categories_out_of_id_order_become_classes_by_id(tmp_path):
    root, expected = make_panoptic(tmp_path / "pan", categories=SHUFFLED)
    ds = packer.pack(root, tmp_path / "out", **EXACT)
    for name, mask in masks_by_image(ds, "train").items():
        np.testing.assert_array_equal(mask, expected[name], name)
    assert ds.class_names == ["person", "car", "bicycle", "dog"]


def test_an_ignore_index_past_a_byte_is_drawn_in_wider_masks(tmp_path):
    """256, the first ignore index a byte cannot hold: overlaps, crowds and unlisted panoptic
    segments hold it."""
    src = make_coco(tmp_path / "src", {"train": 7})
    ds = packer.pack(src, tmp_path / "out", ignore_index=256, **EXACT)
    anns = annotations_of(src / "annotations" / "instances_train2017.json")
    for name, mask in masks_by_image(ds, "train").items():
        np.testing.assert_array_equal(mask, torchvision_target(anns[name], H, W, 256), name)
        assert mask.dtype == np.uint16 and (256 in mask) == bool(anns[name])
    root, expected = make_panoptic(tmp_path / "pan")
    ds = packer.pack(root, tmp_path / "panoptic", ignore_index=256, **EXACT)
    for name, mask in masks_by_image(ds, "train").items():
        want = expected[name].astype(np.uint16)
        want[want == 255] = 256
        np.testing.assert_array_equal(mask, want, name)


def test_annotations_without_the_optional_iscrowd_and_id_are_plain_instances(tmp_path):
    """Some exports leave out `iscrowd` (and even `id`): such an annotation is an instance,
    drawn as the same annotation with `iscrowd: 0`."""
    src = make_coco(tmp_path / "src", {"train": 4})
    path = src / "annotations" / "instances_train2017.json"
    data = json.loads(path.read_text())
    for a in data["annotations"]:
        del a["id"]
        if not a["iscrowd"]:
            del a["iscrowd"]
    full = packer.pack(src, tmp_path / "full", **EXACT)
    path.write_text(json.dumps(data))
    bare = packer.pack(src, tmp_path / "bare", **EXACT)
    assert bare.manifest["rejected"] == []
    want = masks_by_image(full, "train")
    for name, mask in masks_by_image(bare, "train").items():
        np.testing.assert_array_equal(mask, want[name], name)

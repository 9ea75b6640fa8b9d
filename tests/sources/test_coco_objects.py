"""COCO as objects (`--task detection|instances`): boxes as COCO defines them, moved by the
pack's geometry; per-object masks pixel for pixel as pycocotools' annToMask draws them; crowds
as torchvision's detection reference treats them; problems named, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from pycocotools.coco import COCO

import packer
from packer.cli import pack_command
from tests.fixtures.coco import CATEGORIES, box
from tests.fixtures.detection import H, W, detection_json, make_detection_coco, write_images

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
LABEL = {c["id"]: i for i, c in enumerate(sorted(CATEGORIES, key=lambda c: c["id"]))}


@pytest.fixture(scope="module")
def coco_src(tmp_path_factory) -> Path:
    return make_detection_coco(tmp_path_factory.mktemp("det") / "coco")


def reference(src: Path, split: str = "train") -> tuple[COCO, dict[str, int]]:
    coco = COCO(str(src / "annotations" / f"instances_{split}.json"))
    return coco, {i["file_name"]: i["id"] for i in coco.dataset["images"]}


def by_file(ds, split: str = "train") -> dict[str, tuple]:
    part = ds[split]
    return {Path(part.source(i)).name: part[i] for i in range(part.count)}


def expected_objects(coco: COCO, image_id: int, crowd: bool = False) -> list[dict]:
    anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
    return [a for a in anns if crowd or not a["iscrowd"]]


def test_boxes_are_cocos_own_at_the_native_size(coco_src, tmp_path):
    ds = packer.pack(coco_src, out=tmp_path / "p", size=(W, H), resize="none", task="detection")
    assert ds.task == "detection" and ds.class_names == ["person", "car", "dog"]
    coco, ids = reference(coco_src)
    samples = by_file(ds)
    assert len(samples) == 6
    for name, (_image, target) in samples.items():
        anns = expected_objects(coco, ids[name])
        want = np.array([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in anns)])
        assert target["boxes"].dtype == np.float32 and target["labels"].dtype == np.int32
        np.testing.assert_allclose(target["boxes"], want.reshape(-1, 4), atol=1e-4)
        assert target["labels"].tolist() == [LABEL[a["category_id"]] for a in anns]
        assert not target["iscrowd"].any()


@pytest.mark.parametrize("resize", ["fill", "fit", "stretch"])
def test_boxes_follow_resize_crop_and_pad(coco_src, tmp_path, resize):
    size = (32, 32)
    ds = packer.pack(coco_src, out=tmp_path / "p", size=size, resize=resize, task="detection")
    coco, ids = reference(coco_src)
    for name, (image, target) in by_file(ds).items():
        corners = np.array(
            [[x, y, x + w, y + h] for x, y, w, h in
             (a["bbox"] for a in expected_objects(coco, ids[name]))]
        ).reshape(-1, 4)  # fmt: skip
        if resize == "stretch":
            scale, shift, area = np.array([32 / W, 32 / H] * 2), 0, (0, 0, 32, 32)
        elif resize == "fit":  # 40x30 -> 32x24 pasted at y 4
            scale, shift, area = 32 / W, np.array([0, 4, 0, 4]), (0, 4, 32, 28)
        else:  # fill: the centred 30x30 crop from x 5, scaled 32/30
            scale, shift, area = 32 / 30, 0, (0, 0, 32, 32)
            corners = corners - np.array([5, 0, 5, 0])
        want = np.clip(corners * scale + shift, area[:2] * 2, area[2:] * 2)
        keep = np.minimum(want[:, 2] - want[:, 0], want[:, 3] - want[:, 1]) >= 1
        np.testing.assert_allclose(target["boxes"], want[keep], atol=1e-4)
        assert image.shape == (32, 32, 3)


def test_masks_are_anntomask_pixel_for_pixel_overlaps_included(coco_src, tmp_path):
    ds = packer.pack(coco_src, out=tmp_path / "p", size=(W, H), resize="none", task="instances")
    coco, ids = reference(coco_src)
    overlapping = 0
    for name, (_, target) in by_file(ds).items():
        anns = expected_objects(coco, ids[name])
        masks = target["masks"]
        assert masks.dtype == np.uint8 and masks.shape == (len(anns), H, W)
        for plane, a in zip(masks, anns, strict=True):
            np.testing.assert_array_equal(plane, coco.annToMask(a))
        overlapping += int((masks.sum(0) > 1).any())
    assert overlapping  # the fixture's box and disc overlap, and both keep their pixels


def test_masks_take_the_pack_geometry_nearest(coco_src, tmp_path):
    ds = packer.pack(coco_src, out=tmp_path / "p", size=(20, 20), resize="fill", task="instances")
    coco, ids = reference(coco_src)
    rows = 0 + ((2 * np.arange(20) + 1) * 30) // 40  # crop 30x30 from x 5 -> 20x20
    cols = 5 + ((2 * np.arange(20) + 1) * 30) // 40
    for name, (_, target) in by_file(ds).items():
        anns = expected_objects(coco, ids[name])
        want = [coco.annToMask(a)[rows][:, cols] for a in anns]
        got = target["masks"]
        kept = np.minimum(
            target["boxes"][:, 2] - target["boxes"][:, 0],
            target["boxes"][:, 3] - target["boxes"][:, 1],
        )
        assert len(got) == len(kept)
        np.testing.assert_array_equal(got, np.array(want)[: len(got)].reshape(got.shape))


def test_crowds_left_out_unless_kept_flagged(coco_src, tmp_path):
    left = packer.pack(coco_src, out=tmp_path / "a", size=(W, H), resize="none", task="detection")
    kept = packer.pack(
        coco_src, out=tmp_path / "b", size=(W, H), resize="none", task="detection", crowd="class"
    )
    coco, ids = reference(coco_src)
    crowds = 0
    for name, (_, target) in by_file(kept).items():
        anns = expected_objects(coco, ids[name], crowd=True)
        assert target["iscrowd"].tolist() == [a["iscrowd"] for a in anns]
        crowds += sum(a["iscrowd"] for a in anns)
        assert len(by_file(left)[name][1]["labels"]) == len(anns) - target["iscrowd"].sum()
    assert crowds == 2


def test_objects_outside_the_crop_are_dropped_and_counted(coco_src, tmp_path):
    ds = packer.pack(coco_src, out=tmp_path / "p", size=(10, 30), resize="fill", task="detection")
    manifest = ds.manifest
    dropped = manifest["dropped_objects"]
    assert dropped and all(d["reason"] == "outside the frame" and "object" in d for d in dropped)
    stats = manifest["stats"]["objects"]
    assert stats["dropped"]["outside the frame"] == sum(
        1 for d in dropped if d["path"].startswith("train/")
    )
    assert sum(manifest["stats"]["class_objects"].values()) == sum(
        len(t["labels"]) for _, t in by_file(ds).values()
    )


def bad_coco(root: Path) -> Path:
    names = write_images(root / "train", 3)
    data = detection_json(names, [[(1, [box(2, 2, 20, 20)], 0)], [], []])
    good = data["annotations"][0]
    data["annotations"] += [
        {**good, "id": 2, "image_id": 101, "bbox": [3, 3, -4, 5]},  # negative size
        {**good, "id": 3, "image_id": 101, "category_id": 99},  # unknown category
        {**good, "id": 4, "image_id": 101, "segmentation": [[1.0, 1.0, 5.0, 5.0]]},  # 2 points
        {**good, "id": 5, "image_id": 102},
    ]
    (root / "annotations").mkdir()
    (root / "annotations" / "instances_train.json").write_text(json.dumps(data))
    return root


def test_bad_annotations_are_named_and_the_rest_kept(tmp_path):
    src = bad_coco(tmp_path / "bad")
    dry = CliRunner().invoke(pack_command, [str(src), "--dry-run", "--task", "instances"])
    assert "3 annotations will be left out of their images" in dry.output
    assert "#annotation 2: a box of negative size (-4x5)" in dry.output
    args = [str(src), "--out", str(tmp_path / "p"), "--task", "instances", "--size", "40x30"]
    result = CliRunner().invoke(pack_command, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "p" / "dataset.json").read_text())
    reasons = {d["path"]: d["reason"] for d in manifest["dropped_objects"]}
    where = "annotations/instances_train.json#annotation"
    assert reasons[f"{where} 2"] == "a box of negative size (-4x5)"
    assert reasons[f"{where} 3"] == "category 99 is not in categories"
    assert reasons[f"{where} 4"] == "a polygon of 2 points (3 or more)"
    assert f"{where} 5" not in reasons and manifest["splits"]["train"]["count"] == 3
    strict = CliRunner().invoke(
        pack_command, [*args[:2], str(tmp_path / "q"), *args[3:], "--strict"]
    )
    assert strict.exit_code != 0


def test_boxes_only_export_asked_for_masks_says_so(tmp_path):
    src = make_detection_coco(tmp_path / "boxes", boxes_only=True)
    semantic = CliRunner().invoke(pack_command, [str(src), "--dry-run"])
    assert semantic.exit_code == 0, semantic.output
    assert "boxes only (no segmentation)" in semantic.output
    assert "--task detection packs their boxes" in semantic.output
    instances = CliRunner().invoke(pack_command, [str(src), "--dry-run", "--task", "instances"])
    assert "have boxes but no segmentation" in instances.output
    assert "--task detection packs their boxes" in instances.output


def test_workers_give_the_same_bytes(coco_src, tmp_path):
    from tests.fixtures.packs import manifest_hashes

    one = packer.pack(coco_src, out=tmp_path / "a", size=(24, 24), task="instances", workers=1)
    two = packer.pack(coco_src, out=tmp_path / "b", size=(24, 24), task="instances", workers=2,
                      shard_size=2000)  # fmt: skip
    three = packer.pack(coco_src, out=tmp_path / "c", size=(24, 24), task="instances", workers=2)
    assert manifest_hashes(one.root) == manifest_hashes(three.root)
    assert two["train"].count == one["train"].count


def test_panoptic_json_asked_for_objects_says_where_they_are(tmp_path):
    from tests.fixtures.coco import make_panoptic

    src, _ = make_panoptic(tmp_path / "pan")
    result = CliRunner().invoke(pack_command, [str(src), "--dry-run", "--task", "detection"])
    assert result.exit_code == 1
    assert "COCO panoptic PNGs give segmentation" in result.output


def test_class_mapping_is_refused_for_objects(coco_src, tmp_path):
    args = [str(coco_src), "--dry-run", "--task", "detection", "--ignore-class", "dog"]
    result = CliRunner().invoke(pack_command, args)
    assert result.exit_code == 1
    assert "do not apply to detection packs yet" in result.output

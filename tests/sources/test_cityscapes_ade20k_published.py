"""Cityscapes and ADE20K as published: detection, the official tables applied pixel for pixel,
names and colours, splits, rejections, and class mapping on top of the layout's table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import pack_command
from tests.fixtures.cityscapes import to_train_ids
from tests.fixtures.packs import manifest_hashes

W, H = 32, 24
USED_IDS = (0, 1, 4, 7, 8, 9, 11, 17, 21, 23, 24, 26, 29, 33)


def label_image(rng: np.random.Generator, values: tuple[int, ...]) -> np.ndarray:
    """Vertical bands of the given values, shuffled, one per few columns."""
    columns = rng.choice(values, W)
    return np.repeat(columns[None, :], H, axis=0).astype(np.uint8)


@pytest.fixture(scope="module")
def cityscapes(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("cs") / "cityscapes"
    rng = np.random.default_rng(1)
    ids = {}
    for split, cities in (("train", ("aachen", "bremen")), ("val", ("lindau",))):
        for city in cities:
            images = root / "leftImg8bit" / split / city
            masks = root / "gtFine" / split / city
            images.mkdir(parents=True)
            masks.mkdir(parents=True)
            for frame in range(2):
                base = f"{city}_000000_{frame:06d}"
                picture = rng.integers(0, 255, (H, W, 3), np.uint8)
                Image.fromarray(picture).save(images / f"{base}_leftImg8bit.png")
                labels = label_image(rng, USED_IDS)
                Image.fromarray(labels).save(masks / f"{base}_gtFine_labelIds.png")
                ids[f"{base}_leftImg8bit.png"] = labels
                # what is never the mask: colours, instance ids, polygons
                Image.fromarray(picture).save(masks / f"{base}_gtFine_color.png")
                Image.fromarray(labels.astype(np.int32) * 1000, "I").save(
                    masks / f"{base}_gtFine_instanceIds.png"
                )
                (masks / f"{base}_gtFine_polygons.json").write_text(json.dumps({"objects": []}))
    return root, ids


def by_name(ds, split: str) -> dict[str, np.ndarray]:
    part = ds[split]
    return {Path(part.source(i)).name: part[i][1] for i in range(part.count)}


def test_cityscapes_label_ids_become_the_19_train_ids(cityscapes, tmp_path):
    root, ids = cityscapes
    dry = CliRunner().invoke(pack_command, [str(root), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "found:   Cityscapes: leftImg8bit/ + gtFine/ (labelIds), 4 train + 2 val" in dry.output
    ds = packer.pack(root, tmp_path / "out", size=(W, H), resize="none")
    assert ds.manifest["source"]["layout"] == "cityscapes"
    assert len(ds.classes) == 19
    assert ds.classes[0] == {"index": 0, "name": "road", "color": [128, 64, 128]}
    assert ds.classes[18] == {"index": 18, "name": "bicycle", "color": [119, 11, 32]}
    assert {n: s.count for n, s in ds.splits.items()} == {"train": 4, "val": 2}
    assert ds.manifest["rejected"] == [] and ds.manifest["unknown_labels"] == []
    for split in ("train", "val"):
        for name, mask in by_name(ds, split).items():
            np.testing.assert_array_equal(mask, to_train_ids(ids[name]), name)
    assert ds.manifest["class_mapping"]["values"]["7"] == 0
    assert ds.manifest["class_mapping"]["values"]["9"] == -1  # parking: ignored


def test_cityscapes_image_without_mask_is_rejected(cityscapes, tmp_path):
    root, _ = cityscapes
    extra = root.parent / "extra"
    import shutil

    shutil.copytree(root, extra)
    orphan = extra / "leftImg8bit" / "val" / "lindau" / "lindau_000000_000099_leftImg8bit.png"
    Image.new("RGB", (W, H)).save(orphan)
    ds = packer.pack(extra, tmp_path / "out", size=(W, H), resize="none")
    reasons = {Path(r["path"]).name: r["reason"] for r in ds.manifest["rejected"]}
    assert "no mask" in reasons[orphan.name]


def test_ignoring_sky_renumbers_the_classes_after_it(cityscapes, tmp_path):
    root, ids = cityscapes
    ds = packer.pack(root, tmp_path / "out", size=(W, H), resize="none", ignore_class="sky")
    names = [c["name"] for c in ds.classes]
    assert len(names) == 18 and "sky" not in names and names[10] == "person"
    for name, mask in by_name(ds, "train").items():
        want = to_train_ids(ids[name]).astype(np.int32)
        want = np.where(want == 10, 255, np.where((want > 10) & (want < 255), want - 1, want))
        np.testing.assert_array_equal(mask, want.astype(np.uint8), name)


def test_cityscapes_workers_give_the_same_bytes(cityscapes, tmp_path):
    root, _ = cityscapes
    for n in (1, 2):
        packer.pack(root, tmp_path / str(n), size=(W, H), workers=n, shard_size=3 * W * H * 4)
    assert manifest_hashes(tmp_path / "1") == manifest_hashes(tmp_path / "2")


@pytest.fixture(scope="module")
def ade(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("ade") / "ADEChallengeData2016"
    rng = np.random.default_rng(2)
    values = {}
    for folder, prefix in (("training", "ADE_train"), ("validation", "ADE_val")):
        (root / "images" / folder).mkdir(parents=True)
        (root / "annotations" / folder).mkdir(parents=True)
        for i in range(3):
            name = f"{prefix}_{i + 1:08d}"
            Image.fromarray(rng.integers(0, 255, (H, W, 3), np.uint8)).save(
                root / "images" / folder / f"{name}.jpg", quality=95
            )
            mask = label_image(rng, (0, 1, 2, 13, 100, 150))
            Image.fromarray(mask).save(root / "annotations" / folder / f"{name}.png")
            values[f"{name}.jpg"] = mask
    return root, values


def test_ade20k_zero_is_ignored_and_k_becomes_k_minus_1(ade, tmp_path):
    root, values = ade
    dry = CliRunner().invoke(pack_command, [str(root.parent), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "found:   ADE20K SceneParsing:" in dry.output and "3 train" in dry.output
    ds = packer.pack(root, tmp_path / "out", size=(W, H), resize="none")
    assert ds.manifest["source"]["layout"] == "ade20k"
    names = [c["name"] for c in ds.classes]
    assert len(names) == 150 and names[0] == "wall" and names[149] == "flag"
    assert {n: s.count for n, s in ds.splits.items()} == {"train": 3, "val": 3}
    for split in ("train", "val"):
        for name, mask in by_name(ds, split).items():
            raw = values[name].astype(np.int32)
            np.testing.assert_array_equal(mask, np.where(raw == 0, 255, raw - 1), name)


def test_ade20k_names_come_from_object_info_when_present(ade, tmp_path):
    root, _ = ade
    rows = ["Idx,Ratio,Train,Val,Name"] + [f'{k},0.1,1,1,"thing{k};other"' for k in range(1, 151)]
    copy = tmp_path / "ADEChallengeData2016"
    import shutil

    shutil.copytree(root, copy)
    (copy / "objectInfo150.csv").write_text("\n".join(rows) + "\n")
    ds = packer.pack(copy, tmp_path / "out", size=(W, H))
    assert [c["name"] for c in ds.classes][:2] == ["thing1", "thing2"]


def test_these_layouts_are_never_packed_as_classification(cityscapes, ade, tmp_path):
    for root in (cityscapes[0], ade[0]):
        ds = packer.open(packer.pack(root, tmp_path / root.name, size=(W, H)).root)
        assert ds.manifest["task"] == "segmentation"

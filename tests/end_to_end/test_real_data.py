"""Integration over the real datasets in ../shared/data (skipped when that folder is absent)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import packer
from packer.imaging import Geometry, pillow_header, place, read_header
from tests.fixtures.packs import shared_dataset

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def camvid(tmp_path_factory):
    src = shared_dataset("camvid")
    return src, packer.pack(src, out=tmp_path_factory.mktemp("camvid") / "p", size=(480, 352))


def test_camvid_index_masks_and_crop(camvid):
    _, ds = camvid
    assert {n: s.count for n, s in ds.splits.items()} == {"train": 150, "val": 50}
    assert len(ds.classes) == 12 and ds.classes[11]["name"] == "Unlabelled"
    assert ds.manifest["rejected"] == [] and ds.manifest["unknown_labels"] == []
    split = ds["val"]
    batch = split.reader.read(np.arange(split.count))
    for i in (0, 17, 49):  # 480x360 -> 480x352 is a pure centre crop of rows 4..356
        mask = np.asarray(Image.open(split.mask_source(i)))
        image = np.asarray(Image.open(split.source(i)).convert("RGB"))
        assert Path(split.mask_source(i)).parent.name == "valannot"
        assert np.array_equal(batch["masks"][i], mask[4:356])
        assert np.array_equal(batch["images"][i], image[4:356])
    assert batch["masks"].max() <= 11


def test_camvid_unlabelled_ignored_by_name(camvid, tmp_path):
    """--ignore-class Unlabelled: 11 classes, class 11's pixels become the ignore index, and
    every other pixel is the packed pack's own (the same crop, no second pass)."""
    src, plain = camvid
    ds = packer.pack(src, out=tmp_path / "p", size=(480, 352), ignore_class="Unlabelled")
    assert [c["name"] for c in ds.classes] == [c["name"] for c in plain.classes[:11]]
    before = plain["val"].reader.read(np.arange(plain["val"].count))["masks"]
    after = ds["val"].reader.read(np.arange(ds["val"].count))["masks"]
    assert (before == 11).any()
    np.testing.assert_array_equal(after, np.where(before == 11, 255, before))


def test_aerial_colour_and_palette_masks(tmp_path):
    src = shared_dataset("aerial_dubai")
    ds = packer.pack(src, out=tmp_path / "p", size=(256, 256), resize="none")
    assert ds["train"].count == 72 and ds.manifest["class_source"] == "class_dict.csv"
    with open(src / "class_dict.csv") as f:
        table = {
            (int(r["r"]), int(r["g"]), int(r["b"])): i for i, r in enumerate(csv.DictReader(f))
        }
    unknown = {u["path"]: u["values"] for u in ds.manifest["unknown_labels"]}
    assert len(unknown) == 9 and all("colour (0,0,0)" in v for v in unknown.values())
    split = ds["train"]
    masks = split.reader.read(np.arange(split.count))["masks"]
    palette_checked = 0
    for i in range(split.count):
        mask_file = Image.open(split.mask_source(i))
        rgb = np.asarray(mask_file.convert("RGB"))
        p = place((rgb.shape[1], rgb.shape[0]), Geometry((256, 256), "none"))
        crop = rgb[p.crop[1] : p.crop[3], p.crop[0] : p.crop[2]]
        expected = np.full(crop.shape[:2], 255, np.uint8)
        for color, cls in table.items():
            expected[(crop == color).all(-1)] = cls
        assert np.array_equal(masks[i], expected), split.mask_source(i)
        palette_checked += mask_file.mode == "P"
    assert palette_checked >= 10  # tiles 2 and 4


def test_hymenoptera_classes_and_odd_files(tmp_path):
    src = shared_dataset("hymenoptera")
    ds = packer.pack(src, out=tmp_path / "p", size=224)
    files = {s: [p for p in (src / s).rglob("*") if p.is_file()] for s in ("train", "val")}
    assert {n: s.count for n, s in ds.splits.items()} == {s: len(f) for s, f in files.items()}
    assert ds.class_names == ["ants", "bees"] and ds.manifest["rejected"] == []
    split = ds["train"]
    labels = split.reader.read(np.arange(split.count))["labels"]
    sources = [split.source(i) for i in range(split.count)]
    assert all(
        ds.class_names[lab] == Path(s).parent.name for lab, s in zip(labels, sources, strict=True)
    )
    assert any(s.endswith("imageNotFound.gif") for s in sources)
    assert any("reduced" in k for k in ds.manifest["run"]["backends"])


def test_voc_palette_indices_survive(tmp_path):
    src = shared_dataset("voc_sample")
    ds = packer.pack(src, out=tmp_path / "p", size=(320, 240), resize="stretch")
    assert len(ds.classes) == 21 and ds.classes[15]["name"] == "person"
    masks = ds["train"].reader.read(np.arange(3))["masks"]
    values = set(np.unique(masks).tolist())
    assert 255 in values and values - {255} <= set(range(21))
    assert 15 in values and 147 not in values


@pytest.mark.parametrize("name", ["camvid", "hymenoptera", "aerial_dubai", "voc_sample"])
def test_fast_headers_agree_with_pillow(name):
    files = [
        p for p in shared_dataset(name).rglob("*") if p.suffix.lower() in {".jpg", ".jpeg", ".png"}
    ]
    assert files
    answered = 0
    for path in files:
        data = path.read_bytes()
        header = read_header(data)
        if header is None:
            continue
        answered += 1
        pillow = pillow_header(data, 1 << 40)[0]
        assert header.size == pillow.size and header.orientation == pillow.orientation, path
        assert pillow.format in ({"JPEG", "MPO"} if header.format == "JPEG" else {"PNG"}), path
    assert answered >= 0.9 * len(files)

"""End-to-end packing into npy: pixels, labels, provenance, manifest, determinism, resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import packer
from packer.errors import PackError, UnknownLabelError
from packer.packing import plan
from packer.synthetic import SHAPE_CLASSES, make_segmentation
from tests.fixtures.packs import manifest_hashes

COLOR_TO_CLASS = {color: i for i, (_, color) in enumerate(SHAPE_CLASSES)}


def reference_mask(path: str) -> np.ndarray:
    """Class ids of a colour mask, computed without packer."""
    rgb = np.asarray(Image.open(path).convert("RGB"))
    ids = np.full(rgb.shape[:2], 255, np.uint8)
    for color, cls in COLOR_TO_CLASS.items():
        ids[(rgb == color).all(axis=-1)] = cls
    return ids


def test_segmentation_pixels_masks_and_provenance(seg_src, tmp_path):
    ds = packer.pack(seg_src, out=tmp_path / "p", size=(64, 48), workers=2)
    assert ds.task == "segmentation"
    assert {n: s.count for n, s in ds.splits.items()} == {"train": 14, "val": 5}
    assert ds.class_names == [n for n, _ in SHAPE_CLASSES]
    for name, split in ds.splits.items():
        images = np.concatenate(
            [
                np.load(tmp_path / "p" / name / f"{s['name']}.images.npy", mmap_mode="r")
                for s in split.shards
            ]
        )
        masks = np.concatenate(
            [
                np.load(tmp_path / "p" / name / f"{s['name']}.masks.npy", mmap_mode="r")
                for s in split.shards
            ]
        )
        assert images.shape == (split.count, 48, 64, 3) and images.dtype == np.uint8
        assert masks.shape == (split.count, 48, 64) and masks.dtype == np.uint8
        for i in range(split.count):
            source = split.source(i)
            assert np.array_equal(images[i], np.asarray(Image.open(source).convert("RGB")))
            assert np.array_equal(masks[i], reference_mask(split.mask_source(i)))


def test_resized_masks_stay_aligned_with_images(seg_src, tmp_path):
    ds = packer.pack(seg_src, out=tmp_path / "p", size=(40, 40), workers=1)
    batch = ds["train"].reader.read(np.arange(ds["train"].count))
    images, masks = batch["images"].astype(int), batch["masks"]
    disc = masks == 1  # discs are drawn red-dominant (220, 20, 60)
    assert disc.sum() > 50
    assert np.mean(images[disc][:, 0] > images[disc][:, 1] + 40) > 0.9


def test_classification_labels_follow_folders(cls_src, tmp_path):
    ds = packer.pack(cls_src, out=tmp_path / "p", size=(24, 24), workers=2)
    split = ds["train"]
    assert ds.task == "classification" and ds.class_names == ["cats", "dogs", "owls"]
    labels = split.reader.read(np.arange(split.count))["labels"]
    assert labels.dtype == np.int32 and split.count == 22
    for i in range(split.count):
        assert ds.class_names[labels[i]] == Path(split.source(i)).parent.name
    counts = ds.manifest["stats"]["class_images"]
    assert counts == {"cats": 9, "dogs": 7, "owls": 6}


def test_manifest_holds_what_the_design_lists(seg_src, tmp_path):
    packer.pack(seg_src, out=tmp_path / "p", size=(32, 24), workers=1)
    data = json.loads((tmp_path / "p" / "dataset.json").read_text())
    for key in (
        "format_version",
        "format",
        "task",
        "fields",
        "classes",
        "splits",
        "options",
        "rejected",
        "stats",
        "source",
        "run",
    ):
        assert key in data
    assert data["fields"][0] == {
        "name": "images",
        "kind": "image",
        "shape": [24, 32, 3],
        "dtype": "|u1",
    }
    assert data["classes"][1] == {"index": 1, "name": "disc", "color": [220, 20, 60]}
    stats = data["stats"]
    assert len(stats["mean"]) == 3 and all(0 < m < 255 for m in stats["mean"])
    assert sum(stats["class_pixels"].values()) == 14 * 24 * 32 and stats["computed_on"] == "train"
    assert sum(stats["splits"]["val"]["class_pixels"].values()) == 5 * 24 * 32
    assert data["run"]["backends"] and data["run"]["libraries"]["pillow_flavour"]
    for split in data["splits"].values():
        for shard in split["shards"]:
            assert shard["bytes"] == sum(f["bytes"] for f in shard["files"])
    assert not (tmp_path / "p" / ".partial").exists()


def test_shards_identical_whatever_the_worker_count(seg_src, tmp_path):
    options = dict(size=(32, 24), shard_size=6 * (32 * 24 * 4))  # 6 samples per shard
    packer.pack(seg_src, out=tmp_path / "w1", workers=1, **options)
    packer.pack(seg_src, out=tmp_path / "w2", workers=2, **options)
    one, two = manifest_hashes(tmp_path / "w1"), manifest_hashes(tmp_path / "w2")
    assert len(one) == 3 * 3 + 1 * 3  # train: 3 shards, val: 1 shard; 3 files each
    assert one == two


def test_seed_decides_the_order(seg_src, tmp_path):
    a = packer.pack(seg_src, out=tmp_path / "a", size=(16, 16), seed=1)
    b = packer.pack(seg_src, out=tmp_path / "b", size=(16, 16), seed=2)
    order = lambda ds: [ds["train"].source(i) for i in range(ds["train"].count)]  # noqa: E731
    assert order(a) != order(b) and sorted(order(a)) == sorted(order(b))


def test_identical_rerun_is_a_no_op_and_different_pack_is_refused(seg_src, tmp_path):
    out = tmp_path / "p"
    packer.pack(seg_src, out=out, size=(16, 16))
    stamp = (out / "dataset.json").stat().st_mtime_ns
    packer.pack(seg_src, out=out, size=(16, 16))
    assert (out / "dataset.json").stat().st_mtime_ns == stamp
    with pytest.raises(PackError, match="different pack"):
        packer.pack(seg_src, out=out, size=(20, 20))
    ds = packer.pack(seg_src, out=out, size=(20, 20), overwrite=True)
    assert ds.image_shape == (20, 20, 3)
    assert sorted(p.name for p in (out / "train").iterdir()) == sorted(
        p.name for p in (out / "train").iterdir() if "00000-of-00001" in p.name
    )


def test_a_pack_from_another_converter_revision_is_not_taken_as_this_one(
    seg_src, tmp_path, monkeypatch
):
    out = tmp_path / "p"
    packer.pack(seg_src, out=out, size=(16, 16))
    monkeypatch.setattr(plan, "CONVERTER_REVISION", plan.CONVERTER_REVISION + 1)
    with pytest.raises(PackError, match="different pack"):
        packer.pack(seg_src, out=out, size=(16, 16))


def test_refuses_a_folder_that_is_not_a_pack(seg_src, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(PackError, match="not a packer dataset"):
        packer.pack(seg_src, out=tmp_path, size=(16, 16))
    assert (tmp_path / "notes.txt").read_text() == "mine"


def _recolor_one_mask(src: Path, color: tuple[int, int, int]) -> str:
    path = sorted((src / "train_labels").iterdir())[0]
    rgb = np.asarray(Image.open(path).convert("RGB")).copy()
    rgb[:4, :4] = color
    Image.fromarray(rgb).save(path)
    return path.relative_to(src).as_posix()


def test_unknown_colours_become_ignore_and_are_reported(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 4}, (32, 32))
    bad = _recolor_one_mask(src, (1, 2, 3))
    ds = packer.pack(src, out=tmp_path / "p", size=(32, 32))
    assert ds.manifest["unknown_labels"] == [{"path": bad, "values": {"colour (1,2,3)": 16}}]
    split = ds["train"]
    i = next(i for i in range(split.count) if split.mask_source(i).endswith(bad))
    assert (split.reader.read(np.arange(4))["masks"][i][:4, :4] == 255).all()
    with pytest.raises(UnknownLabelError, match=r"colour \(1,2,3\) x 16 px"):
        packer.pack(src, out=tmp_path / "q", size=(32, 32), unknown_colors="error")


def test_palette_masks_map_through_each_files_own_palette(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 3}, (32, 24))
    expected = {}
    rng = np.random.default_rng(3)
    for k, path in enumerate(sorted((src / "train_labels").iterdir())):
        ids = reference_mask(str(path))
        order = rng.permutation(len(SHAPE_CLASSES))  # palette index order differs per file
        palette = np.asarray([SHAPE_CLASSES[c][1] for c in order], np.uint8)
        inverse = np.argsort(order)
        img = Image.fromarray(inverse[ids].astype(np.uint8), mode="P")
        img.putpalette(palette.ravel().tolist())
        img.save(path)
        expected[path.relative_to(src).as_posix()] = ids
        assert k < 3
    ds = packer.pack(src, out=tmp_path / "p", size=(32, 24))
    split = ds["train"]
    masks = split.reader.read(np.arange(split.count))["masks"]
    for i in range(split.count):
        rel = Path(split.mask_source(i)).relative_to(src).as_posix()
        assert np.array_equal(masks[i], expected[rel])


def test_palette_masks_without_colours_are_indices_voc_style(tmp_path):
    src = tmp_path / "voc"
    (src / "JPEGImages").mkdir(parents=True)
    (src / "SegmentationClass").mkdir()
    (src / "class_names.txt").write_text("\n".join(f"c{i}" for i in range(21)) + "\n")
    ids = np.zeros((24, 32), np.uint8)
    ids[4:12, 4:20] = 15
    ids[12:14, :] = 255  # void border
    Image.fromarray(np.full((24, 32, 3), 128, np.uint8)).save(src / "JPEGImages" / "a.jpg")
    mask = Image.fromarray(ids, mode="P")
    mask.putpalette([v for i in range(256) for v in (i, 255 - i, (7 * i) % 256)])
    mask.save(src / "SegmentationClass" / "a.png")
    ds = packer.pack(src, out=tmp_path / "p", size=(32, 24))
    assert np.array_equal(ds["train"].reader.read(np.arange(1))["masks"][0], ids)
    assert len(ds.classes) == 21


def test_mask_of_the_wrong_size_is_rejected_with_a_reason(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 3}, (32, 24))
    bad = sorted((src / "train_labels").iterdir())[1]
    Image.open(bad).resize((30, 20)).save(bad)
    ds = packer.pack(src, out=tmp_path / "p", size=(32, 24))
    assert ds["train"].count == 2
    [rejection] = ds.manifest["rejected"]
    assert rejection["path"] == bad.relative_to(src).as_posix()
    assert "30x20" in rejection["reason"] and "32x24" in rejection["reason"]


def test_default_output_goes_beside_the_source(tmp_path):
    src = make_segmentation(tmp_path / "images", {"train": 2}, (16, 16))
    ds = packer.pack(src, size=(16, 16))
    assert ds.root == tmp_path / "images-npy"
    shutil.rmtree(ds.root)


def test_more_than_255_classes_store_uint16_masks(tmp_path):
    src = tmp_path / "many"
    for folder in ("images", "masks"):
        (src / folder).mkdir(parents=True)
    (src / "class_names.txt").write_text("\n".join(f"c{i}" for i in range(300)) + "\n")
    ids = (np.arange(24 * 32, dtype=np.uint16) % 300).reshape(24, 32)
    Image.fromarray(np.zeros((24, 32, 3), np.uint8)).save(src / "images" / "a.png")
    Image.fromarray(ids).save(src / "masks" / "a.png")  # 16-bit grayscale index mask
    ds = packer.pack(src, out=tmp_path / "p", size=(32, 24))
    assert ds.field("masks").dtype == "<u2" and ds.manifest["ignore_index"] == 65535
    assert np.array_equal(ds["train"].reader.read(np.arange(1))["masks"][0], ids)


def test_rejections_inside_multi_chunk_shards_leave_no_gaps(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 20}, (640, 480))  # 6 samples a chunk
    bad = sorted((src / "train").iterdir())[::7]
    for path in bad:
        path.write_bytes(path.read_bytes()[:500])  # truncated PNGs, rejected by the workers
    ds = packer.pack(src, out=tmp_path / "p", size=(640, 480), workers=2)
    split = ds["train"]
    assert split.count == 20 - len(bad) and len(split.shards) == 1
    assert {r["path"] for r in ds.manifest["rejected"]} == {
        p.relative_to(src).as_posix() for p in bad
    }
    batch = split.reader.read(np.arange(split.count))
    for i in range(split.count):
        image = np.asarray(Image.open(split.source(i)).convert("RGB"))
        assert np.array_equal(batch["images"][i], image)
        assert np.array_equal(batch["masks"][i], reference_mask(split.mask_source(i)))

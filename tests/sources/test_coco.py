"""COCO instances and panoptic: masks drawn pixel for pixel as pycocotools' annToMask with
torchvision's rule, the options, rejections, detection, workers, SIGKILL and update."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import packer
from packer.cli import pack_command
from tests.fixtures.coco import (
    EXACT,
    SIZE,
    annotations_of,
    box,
    disc,
    instances_json,
    make_coco,
    make_panoptic,
    masks_by_image,
    painted,
    torchvision_target,
    write_images,
)
from tests.fixtures.packs import manifest_hashes
from tests.fixtures.processes import finished_shards, pack_cmd, wait_for_receipts

W, H = SIZE
# pycocotools' decode under NumPy 2 (the reference masks drawn here) warns of a copy
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def coco_src(tmp_path_factory) -> Path:
    return make_coco(tmp_path_factory.mktemp("coco") / "coco")


def test_instances_are_drawn_as_torchvision_draws_them(coco_src, tmp_path):
    ds = packer.pack(coco_src, tmp_path / "out", **EXACT)
    assert ds.manifest["source"]["layout"] == "coco"
    assert ds.class_names == ["background", "person", "car", "dog"]
    assert {n: s.count for n, s in ds.splits.items()} == {"train": 7, "val": 3}
    assert ds.manifest["rejected"] == []
    for split in ("train", "val"):
        anns = annotations_of(coco_src / "annotations" / f"instances_{split}2017.json")
        got = masks_by_image(ds, split)
        assert got.keys() == anns.keys()
        for name, mask in got.items():
            np.testing.assert_array_equal(mask, torchvision_target(anns[name], H, W), name)
    train = masks_by_image(ds, "train")
    assert not train["000000000006.jpg"].any()  # no annotations
    for name, mask in train.items():  # two persons overlap alone there: ignored, as any overlap
        assert (mask[25:28, 5:8] == (0 if name == "000000000006.jpg" else 255)).all(), name
    assert (
        ds["train"]
        .mask_source(0)
        .endswith(
            f"annotations/instances_train2017.json#{100 + int(Path(ds['train'].source(0)).stem)}"
        )
    )


def test_masks_follow_the_image_geometry_as_png_masks_do(coco_src, tmp_path):
    """A resize and crop give the same ids as the same masks stored as PNG files."""
    from PIL import Image

    ds = packer.pack(coco_src, tmp_path / "coco", size=(24, 20), resize="fill")
    twin = tmp_path / "twin"
    (twin / "train").mkdir(parents=True)
    (twin / "trainannot").mkdir()
    anns = annotations_of(coco_src / "annotations" / "instances_train2017.json")
    for name, mine in anns.items():
        shutil.copy(coco_src / "train2017" / name, twin / "train" / name)
        target = torchvision_target(mine, H, W)
        Image.fromarray(target).save(twin / "trainannot" / name.replace(".jpg", ".png"))
    png = packer.pack(twin, tmp_path / "png", size=(24, 20), resize="fill")
    a, b = masks_by_image(ds, "train"), masks_by_image(png, "train")
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.parametrize(
    "overlap, crowd", [("last", "ignore"), ("ignore", "class"), ("last", "class")]
)
def test_overlap_and_crowd_options(coco_src, tmp_path, overlap, crowd):
    ds = packer.pack(coco_src, tmp_path / "out", overlap=overlap, crowd=crowd, **EXACT)
    anns = annotations_of(coco_src / "annotations" / "instances_train2017.json")
    for name, mask in masks_by_image(ds, "train").items():
        np.testing.assert_array_equal(mask, painted(anns[name], overlap, crowd), name)
    assert ds.manifest["options"]["overlap" if overlap != "ignore" else "crowd"] in (
        "last",
        "class",
    )


def test_coco_flag_names_the_json_for_a_folder_of_images(coco_src, tmp_path):
    images = coco_src / "val2017"
    single = CliRunner().invoke(
        pack_command,
        [
            str(images),
            "--coco",
            str(coco_src / "annotations/instances_val2017.json"),
            "--out",
            str(tmp_path / "one"),
            "--size",
            "40x30",
            "--resize",
            "none",
        ],
    )
    assert single.exit_code == 0, single.output
    assert packer.open(tmp_path / "one").splits.keys() == {"val"}  # the split from its name
    both = tmp_path / "both"
    (both).mkdir()
    for split in ("train", "val"):
        for f in (coco_src / f"{split}2017").iterdir():
            shutil.copy(f, both / f.name)  # one folder of images, two JSON files
    result = CliRunner().invoke(
        pack_command,
        [
            str(both),
            "--coco",
            f"train={coco_src}/annotations/instances_train2017.json",
            "--coco",
            f"val={coco_src}/annotations/instances_val2017.json",
            "--out",
            str(tmp_path / "two"),
            "--size",
            "40x30",
            "--resize",
            "none",
        ],
    )
    assert result.exit_code == 0, result.output
    two = packer.open(tmp_path / "two")
    assert {n: s.count for n, s in two.splits.items()} == {"train": 7, "val": 3}


def test_coco_json_by_url_or_relative_to_the_working_folder(coco_src, tmp_path, monkeypatch):
    import fsspec

    data = (coco_src / "annotations" / "instances_val2017.json").read_bytes()
    fsspec.filesystem("memory").pipe("/coco-test/instances_val2017.json", data)
    (tmp_path / "val.json").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    anns = annotations_of(coco_src / "annotations" / "instances_val2017.json")
    for given, out in (("memory://coco-test/instances_val2017.json", "url"), ("val.json", "rel")):
        ds = packer.pack(coco_src / "val2017", tmp_path / out, coco={"val": given}, **EXACT)
        assert ds.manifest["rejected"] == []
        for name, mask in masks_by_image(ds, "val").items():
            np.testing.assert_array_equal(mask, torchvision_target(anns[name], H, W), name)


def test_detection_dry_run_and_never_classification(coco_src, tmp_path):
    result = CliRunner().invoke(pack_command, [str(coco_src), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert (
        "found:   COCO instances: annotations/instances_train2017.json, 7 images, 33 "
        "annotations; annotations/instances_val2017.json, 3 images"
    ) in result.output
    lost = tmp_path / "lost"
    shutil.copytree(coco_src, lost)
    shutil.rmtree(lost / "val2017")
    half = CliRunner().invoke(pack_command, [str(lost), "--dry-run"]).output
    assert "annotations/instances_val2017.json: no val2017/ image folder" in half
    (lost / "annotations" / "instances_train2017.json").rename(lost / "annotations" / "x.json")
    refused = CliRunner().invoke(pack_command, [str(lost), "--dry-run"])
    assert refused.exit_code == 1 and "holds annotations/ but matches no" in refused.output


TRIANGLE = [24.0, 2.0, 34.0, 2.0, 29.0, 10.0]


def broken_coco(root: Path) -> Path:
    """Two good images and one per way an annotation can fail; an image file missing; an
    image whose images entry gives another size than its file."""
    names = write_images(root / "train2017", 9)
    per_image = [
        [(1, [box(2, 2, 20, 20)], 0)],
        [(1, [[1.0, 1.0, 5.0, 5.0]], 0)],  # a polygon of 2 points
        [(3, {"size": [H + 1, W], "counts": [5, 5]}, 1)],  # an RLE of the wrong size
        [(99, [disc(10, 10, 4)], 0)],  # a category missing from categories
        [(1, {"counts": "x"}, 0)],  # no size: no segmentation
        [],
        [(1, [box(2, 2, 9, 9)], 0)],
        [(1, [], 0), (3, [TRIANGLE], 0)],  # an empty segmentation (a box-only export)
        # draws nothing; a triangle, the fewest points a polygon may have, draws
        [(1, [box(2, 2, 9, 9), 12], 0)],  # a polygon that is no list of coordinates
    ]
    data = instances_json(names, per_image)
    data["images"][6]["width"] = W + 1
    data["annotations"].append({**data["annotations"][0], "id": 77, "image_id": 999})
    (root / "train2017" / names[5]).unlink()
    (root / "annotations").mkdir()
    (root / "annotations" / "instances_train2017.json").write_text(json.dumps(data))
    return root


def test_annotations_that_cannot_be_drawn_are_reported_never_a_crash(tmp_path):
    src = broken_coco(tmp_path / "src")
    dry = CliRunner().invoke(pack_command, [str(src), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "annotation: a polygon of N points" in dry.output  # grouped by what is wrong
    ds = packer.pack(src, tmp_path / "out", **EXACT)
    assert ds["train"].count == 2
    triangle = {"segmentation": [TRIANGLE], "category_id": 3, "iscrowd": 0}
    want = torchvision_target([triangle], H, W)
    assert want.any()
    np.testing.assert_array_equal(masks_by_image(ds, "train")["000000000007.jpg"], want)
    reasons = {r["path"]: r["reason"] for r in ds.manifest["rejected"]}
    assert reasons == {
        "train2017/000000000001.jpg": "annotation 2: a polygon of 2 points (3 or more)",
        "train2017/000000000002.jpg": "annotation 3: an RLE of 40x31 pixels, its image is 40x30",
        "train2017/000000000003.jpg": "annotation 4: category 99 is not in categories",
        "train2017/000000000004.jpg": "annotation 5: no polygon or RLE segmentation",
        "train2017/000000000005.jpg": (
            "no such image file (listed in annotations/instances_train2017.json)"
        ),
        "train2017/000000000008.jpg": "annotation 9: a polygon of 0 points (3 or more)",
        "annotations/instances_train2017.json#annotation 77": "image_id 999 is not in images",
        "annotations/instances_train2017.json#106": (
            "its images entry says 41x30 pixels, the image file is 40x30"
        ),
    }
    for path in reasons:
        if "#106" not in path:  # found only when drawn
            assert path in dry.output


def test_splits_must_agree_on_categories(tmp_path):
    src = make_coco(tmp_path / "src")
    path = src / "annotations" / "instances_val2017.json"
    data = json.loads(path.read_text())
    data["categories"][0]["name"] = "human"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(pack_command, [str(src), "--dry-run"])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "list different categories" in result.output


def test_one_coco_file_names_its_split_or_is_train(coco_src, tmp_path):
    plain = tmp_path / "labels.json"
    shutil.copy(coco_src / "annotations" / "instances_val2017.json", plain)
    images = str(coco_src / "val2017")
    dry = CliRunner().invoke(pack_command, [images, "--coco", str(plain), "--dry-run"])
    assert dry.exit_code == 0 and "split train: 3 samples" in dry.output, dry.output
    twice = CliRunner().invoke(
        pack_command, [images, "--coco", str(plain), "--coco", str(plain), "--dry-run"]
    )
    assert twice.exit_code == 1 and "two --coco files for split 'train'" in twice.output


def test_panoptic_segments_become_their_categories(tmp_path):
    root, expected = make_panoptic(tmp_path / "pan")
    ds = packer.pack(root, tmp_path / "out", **EXACT)
    assert ds.manifest["source"]["layout"] == "coco-panoptic"
    assert ds.class_names == ["person", "car", "dog"]  # no background class
    got = masks_by_image(ds, "train")
    for name, want in expected.items():
        np.testing.assert_array_equal(got[name], want, name)
    both = make_coco(root)  # instances beside panoptic: instances win, and say so
    dry = CliRunner().invoke(pack_command, [str(both), "--dry-run"]).output
    assert "COCO instances" in dry and "--layout coco-panoptic packs those" in dry
    forced = packer.pack(both, tmp_path / "forced", layout="coco-panoptic", **EXACT)
    assert forced.manifest["source"]["layout"] == "coco-panoptic"
    assert manifest_hashes(tmp_path / "forced") == manifest_hashes(tmp_path / "out")


def test_panoptic_crowds_as_class_and_what_it_rejects(tmp_path):
    root, expected = make_panoptic(tmp_path / "pan")
    ds = packer.pack(root, tmp_path / "crowd", crowd="class", **EXACT)
    png = np.asarray(Image.open(root / "annotations/panoptic_train2017/000000000000.png"))
    ids = png.astype(np.int64) @ np.array([1, 256, 65536])
    data = json.loads((root / "annotations/panoptic_train2017.json").read_text())
    crowd = next(s for s in data["annotations"][0]["segments_info"] if s["iscrowd"])
    want = expected["000000000000.jpg"].copy()
    want[ids == crowd["id"]] = 1  # car, the crowd's category
    np.testing.assert_array_equal(masks_by_image(ds, "train")["000000000000.jpg"], want)
    entries = data["annotations"]
    entries[1]["segments_info"][0]["category_id"] = 99
    unknown = entries[1]["segments_info"][0]["id"]
    (root / "annotations/panoptic_train2017" / entries[2]["file_name"]).unlink()
    entries[3]["image_id"] = 999  # its image is then listed without segments
    data["annotations"] = entries[:4]  # image 104 is listed without segments too
    (root / "annotations/panoptic_train2017.json").write_text(json.dumps(data))
    ds = packer.pack(root, tmp_path / "bad", **EXACT)
    assert ds["train"].count == 1
    reasons = {r["path"]: r["reason"] for r in ds.manifest["rejected"]}
    shown = "annotations/panoptic_train2017.json"
    assert reasons == {
        "train2017/000000000001.jpg": f"segment {unknown}: category 99 is not in categories",
        "train2017/000000000002.jpg": (
            "no panoptic PNG annotations/panoptic_train2017/000000000002.png"
        ),
        "train2017/000000000003.jpg": f"no segments for it in {shown}",
        "train2017/000000000004.jpg": f"no segments for it in {shown}",
        f"{shown}#image 999": "image_id is not in images",
    }


def test_workers_give_the_same_bytes(coco_src, tmp_path):
    one = packer.pack(coco_src, tmp_path / "one", workers=1, shard_size=20_000, **EXACT)
    packer.pack(coco_src, tmp_path / "two", workers=2, shard_size=20_000, **EXACT)
    assert len(one["train"].shards) > 1
    assert manifest_hashes(tmp_path / "one") == manifest_hashes(tmp_path / "two")


def test_sigkill_then_rerun_gives_identical_output(tmp_path):
    src = make_coco(tmp_path / "src", {"train": 7})
    args = ["--size", "40x30", "--resize", "none", "--shard-size", str(W * H * 4)]
    subprocess.run(pack_cmd(src, tmp_path / "ref", *args), check=True, capture_output=True)
    out = tmp_path / "out"
    proc = subprocess.Popen(pack_cmd(src, out, *args, "--workers", "1"))
    wait_for_receipts(out, 2, proc)
    proc.kill()
    proc.wait()
    assert not (out / "dataset.json").exists() and finished_shards(out)
    subprocess.run(pack_cmd(src, out, *args), check=True, capture_output=True, timeout=120)
    assert manifest_hashes(out) == manifest_hashes(tmp_path / "ref")


def test_editing_one_images_annotations_repacks_only_its_shard(tmp_path):
    src = make_coco(tmp_path / "src", {"train": 7})
    args = ["--size", "40x30", "--resize", "none", "--shard-size", str(W * H * 4)]
    subprocess.run(pack_cmd(src, tmp_path / "out", *args), check=True, capture_output=True)
    before = manifest_hashes(tmp_path / "out")
    path = src / "annotations" / "instances_train2017.json"
    data = json.loads(path.read_text())
    data["annotations"][0]["segmentation"] = [box(1, 1, 9, 9)]  # image 100's first instance
    path.write_text(json.dumps(data))
    done = subprocess.run(pack_cmd(src, tmp_path / "out", *args), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 image's annotations changed (train2017/000000000000.jpg)" in done.stdout
    assert "packed 1 shard again, kept 6" in done.stdout and "packed 1 of 7 samples" in done.stdout
    after = manifest_hashes(tmp_path / "out")
    changed = {Path(p).name.split(".")[0] for p in after if after[p] != before.get(p)}
    assert len(changed) == 1
    ds = packer.open(tmp_path / "out")
    assert ds.manifest["run"]["update"]["annotations"] == ["train2017/000000000000.jpg"]
    anns = annotations_of(path)
    for name, mask in masks_by_image(ds, "train").items():
        np.testing.assert_array_equal(mask, torchvision_target(anns[name], H, W))

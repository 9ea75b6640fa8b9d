"""COCO person keypoints and YOLO pose pack as keypoints (auto picks them): each object's box,
class and K points (x, y, visibility) `[N, K, 3]` float32, against each format's own reading
of a point after a non-uniform resize and a crop, and after a flip drawn by `packer.Augment`
(left and right swapped); the manifest names the points, their skeleton and flip order; bad
points are named with their file and line (or annotation), the rest kept; a flip_idx that is
no permutation stops the pack."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import packer
from packer.cli import main, pack_command
from packer.reading.batches import BatchReader
from tests.fixtures.keypoints import (
    BAD_COCO,
    BAD_YOLO,
    COCO_ANNOTATIONS,
    COCO_FLIP,
    COCO_NAMES,
    COCO_SIZE,
    POSE,
    YOLO_SIZE,
    coco_points,
    make_coco_keypoints,
    make_pose,
    placed,
    yolo_points,
)
from tests.fixtures.yolo import xywhn2xyxy


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return make_coco_keypoints(tmp_path_factory.mktemp("coco"))


@pytest.fixture(scope="module")
def pose(tmp_path_factory):
    return make_pose(tmp_path_factory.mktemp("pose"))


def read_objects(out) -> dict[str, dict]:
    """Every packed sample's objects (ragged rows), by its image's folder and name."""
    split = packer.open(out)["train"]
    indices = np.arange(split.count)
    objects = BatchReader(split).objects(indices)
    return {"/".join(Path(split.source(i)).parts[-2:]): objects[i] for i in indices.tolist()}


def _kept_boxes(boxes: np.ndarray, crop, scaled) -> np.ndarray:
    """Which source boxes keep an area once cropped and resized (the others leave)."""
    x0, y0, x1, y1 = crop
    w, h = scaled
    sx, sy = w / (x1 - x0), h / (y1 - y0)
    moved = (boxes - [x0, y0, x0, y0]) * [sx, sy, sx, sy]
    clipped = np.clip(moved, 0, [w, h, w, h])
    return (clipped[:, 2] > clipped[:, 0]) & (clipped[:, 3] > clipped[:, 1])


# (size, resize mode) -> (crop, scaled) of every COCO image (64 x 48) and YOLO image (100 x 60)
GEOMETRIES = {
    "stretch": {"size": (32, 36), "resize": "stretch"},  # x / 2, y * 3 / 4
    "crop": {"size": (40, 30), "resize": "none"},  # the centre 40 x 30, not resized
}


def _placement(source: tuple[int, int], geometry: str):
    sw, sh = source
    w, h = GEOMETRIES[geometry]["size"]
    if geometry == "stretch":
        return (0, 0, sw, sh), (w, h)
    x0, y0 = (sw - w) // 2, (sh - h) // 2
    return (x0, y0, x0 + w, y0 + h), (w, h)


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_coco_keypoints_are_coco_s_pixel_indices_moved_as_the_pixels(coco, tmp_path, geometry):
    ds = packer.pack(coco, out=tmp_path / "out", progress=False, **GEOMETRIES[geometry])
    manifest = ds.manifest
    assert manifest["task"] == "keypoints"
    assert manifest["fields"][-1] == {
        "name": "keypoints",
        "kind": "keypoints",
        "shape": [5, 3],
        "dtype": "<f4",
        "ragged": True,
        "flip_order": list(COCO_FLIP),
    }
    assert manifest["keypoints"] == {
        "names": COCO_NAMES,
        "skeleton": [[0, 1], [0, 2], [1, 3], [2, 4]],
        "flip_idx": list(COCO_FLIP),
    }
    crop, scaled = _placement(COCO_SIZE, geometry)
    found = read_objects(tmp_path / "out")
    checked = 0
    for i, anns in enumerate(COCO_ANNOTATIONS):
        got = found[f"train2017/{i:012d}.png"]
        good = [k for k, a in enumerate(anns) if not a[3] and a[0] not in (5, 7)]
        boxes = np.array([[x, y, x + w, y + h] for _, (x, y, w, h), _, _ in anns], np.float64)
        kept = [k for k in good if _kept_boxes(boxes[[k]], crop, scaled)[0]]
        assert got["keypoints"].shape == (len(kept), 5, 3) and got["keypoints"].dtype == np.float32
        for row, k in zip(got["keypoints"], kept, strict=True):
            np.testing.assert_allclose(row, placed(coco_points(i, k), crop, scaled), atol=1e-5)
            checked += 1
    assert checked == 4
    if geometry == "crop":  # points the crop leaves out are (0, 0, 0)
        outside = found["train2017/000000000001.png"]["keypoints"][0, 3]
        assert outside.tolist() == [0, 0, 0]
    dropped = {d["path"]: d["reason"] for d in manifest["dropped_objects"] if "object" not in d}
    assert dropped == BAD_COCO


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_yolo_pose_points_are_ultralytics_fractions_moved_as_the_pixels(pose, tmp_path, geometry):
    ds = packer.pack(pose, out=tmp_path / "out", progress=False, **GEOMETRIES[geometry])
    manifest = ds.manifest
    assert manifest["task"] == "keypoints" and "left_out" not in manifest
    assert manifest["keypoints"] == {
        "names": ["head", "left_hand", "right_hand"],
        "skeleton": [],
        "flip_idx": [0, 2, 1],
    }
    crop, scaled = _placement(YOLO_SIZE, geometry)
    found = read_objects(tmp_path / "out")
    for image, label in (("a", "labels/train/a.txt"), ("b", "labels/train/b.txt")):
        lines = POSE[label].splitlines()
        good = [line for n, line in enumerate(lines, 1) if f"{label} line {n}" not in BAD_YOLO]
        boxes = xywhn2xyxy(np.array([line.split()[1:5] for line in good], np.float32), *YOLO_SIZE)
        good = [line for line, k in zip(good, _kept_boxes(boxes, crop, scaled), strict=True) if k]
        got = found[f"train/{image}.jpg"]["keypoints"]
        assert len(got) == len(good)
        for row, line in zip(got, good, strict=True):
            np.testing.assert_allclose(row, placed(yolo_points(line), crop, scaled), atol=1e-5)
    dropped = {d["path"]: d["reason"] for d in manifest["dropped_objects"] if "object" not in d}
    assert dropped == BAD_YOLO


def test_yolo_pose_with_two_values_a_point_reads_0_0_as_not_labelled(tmp_path):
    lines = "0 0.5 0.5 0.6 0.6 0.3 0.4 0 0 0.7 0.6\n"
    files = {
        **POSE,
        "data.yaml": POSE["data.yaml"].replace("[3, 3]", "[3, 2]"),
        "labels/train/a.txt": lines,
        "labels/train/b.txt": "",
    }
    ds = packer.pack(make_pose(tmp_path / "src", files), out=tmp_path / "out", progress=False)
    got = read_objects(tmp_path / "out")["train/a.jpg"]["keypoints"]
    want = yolo_points(lines, values=2)
    assert want[:, 2].tolist() == [2, 0, 2]
    np.testing.assert_array_equal(got[0], want.astype(np.float32))
    assert ds.manifest["stats"]["keypoints"] == {"labelled": [1, 0, 1], "visible": [1, 0, 1]}


def test_a_flip_drawn_by_augment_swaps_left_and_right(coco, tmp_path):
    """Read with `Augment(horizontal_flip=True)`: a flipped sample's point k is its source
    point COCO_FLIP[k] mirrored (x -> W - x), so a left eye stays a left eye."""
    packer.pack(coco, out=tmp_path / "out", progress=False, size=COCO_SIZE, resize="none")
    plain = packer.keras.PackedSequence(tmp_path / "out", batch_size=4, shuffle=False)
    aug = packer.Augment(horizontal_flip=True, seed=3)
    flipped = packer.keras.PackedSequence(
        tmp_path / "out", batch_size=4, shuffle=False, augment=aug
    )
    images, targets = plain[0]
    moved_images, moved = flipped[0]
    width = COCO_SIZE[0]
    mirrored = 0
    for b in range(len(images)):
        points, after = targets["keypoints"][b], moved["keypoints"][b]
        real = points[:, 0, 2] >= 0  # not the -1 padding
        if np.array_equal(moved_images[b], images[b, :, ::-1]):
            mirrored += 1
            want = points[real][:, COCO_FLIP].copy()
            labelled = want[..., 2] > 0
            want[..., 0] = width - want[..., 0]
            np.testing.assert_allclose(after[real][labelled], want[labelled], atol=1e-4)
            assert (after[real][~labelled][:, 2] == 0).all()
        else:
            np.testing.assert_array_equal(after, points)
    assert 0 < mirrored < 4


def test_the_three_formats_round_trip_keypoints(coco, tmp_path):
    packs = {}
    for fmt in ("npy", "tfrecord", "recordio"):
        packer.pack(coco, out=tmp_path / fmt, format=fmt, progress=False, size=(48, 40))
        packs[fmt] = read_objects(tmp_path / fmt)
    for fmt, found in packs.items():
        assert found.keys() == packs["npy"].keys()
        for image, objects in found.items():
            np.testing.assert_array_equal(
                objects["keypoints"], packs["npy"][image]["keypoints"], err_msg=fmt
            )


def test_detection_still_leaves_the_keypoints_out_and_says_so(pose, tmp_path):
    ds = packer.pack(pose, out=tmp_path / "out", task="detection", progress=False)
    assert ds.manifest["task"] == "detection" and "keypoints" not in ds.manifest
    assert ds.manifest["left_out"][0].startswith("keypoints: [3, 3] per object")


def test_bad_points_are_named_and_strict_stops_at_them(pose, tmp_path):
    runner = CliRunner()
    result = runner.invoke(pack_command, [str(pose), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "visibility 7, not 0, 1 or 2" in result.output
    strict = runner.invoke(pack_command, [str(pose), "--out", str(tmp_path / "s"), "--strict"])
    assert strict.exit_code != 0
    assert "labels/train/b.txt line 2" in strict.output or "line 3" in strict.output


def test_a_flip_idx_that_is_no_permutation_refuses_the_pack(tmp_path):
    files = {**POSE, "data.yaml": POSE["data.yaml"].replace("[0, 2, 1]", "[0, 1, 1]")}
    result = CliRunner().invoke(pack_command, [str(make_pose(tmp_path / "src", files))])
    assert result.exit_code != 0
    assert (
        "data.yaml: flip_idx [0, 1, 1] is not a permutation of the 3 points (0..2, each once)"
        in result.output
    )


def test_info_counts_visible_points_by_name_and_preview_draws_them(coco, tmp_path):
    packer.pack(coco, out=tmp_path / "out", progress=False, size=COCO_SIZE, resize="none")
    stats = json.loads((tmp_path / "out" / "dataset.json").read_text())["stats"]["keypoints"]
    assert stats == {"labelled": [4, 4, 3, 4, 4], "visible": [4, 4, 2, 4, 3]}
    runner = CliRunner()
    info = runner.invoke(main, ["info", str(tmp_path / "out")])
    assert info.exit_code == 0, info.output
    assert (
        "points:   visible/labelled per keypoint: nose 4/4, left_eye 4/4, right_eye 2/3, "
        "left_wrist 4/4, right_wrist 3/4" in info.output
    )
    grid = tmp_path / "grid.png"
    preview = runner.invoke(main, ["preview", str(tmp_path / "out"), "--out", str(grid)])
    assert preview.exit_code == 0, preview.output
    assert grid.stat().st_size > 0

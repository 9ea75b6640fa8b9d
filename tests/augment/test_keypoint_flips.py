"""Keypoints (the built-in kind, with a flip order) through the three executors: a mirror
reorders each object's points by the field's flip order (left and right keep their names), two
mirrors (a half turn) do not; an affine warp moves them as box corners; the executors agree."""

from __future__ import annotations

import numpy as np
import pytest

from packer.augment import Augment
from packer.augment.boxes import move_point
from packer.augment.idg import from_idg
from packer.augment.moves import Move, moves
from packer.schema import Field
from tests.augment.test_kinds import EXECUTORS, HW, H, W, _batch_of, batch, split

ORDER = (0, 2, 1)  # point 0 in the middle, 1 and 2 a left/right pair
FIELDS = (
    Field("images", (H, W, 3), "|u1", kind="image"),
    Field("boxes", (4,), "<f4", ragged=True, kind="boxes"),
    Field("labels", (), "<i4", ragged=True, kind="object_class"),
    Field("keypoints", (3, 3), "<f4", ragged=True, kind="keypoints", flip_order=ORDER),
)


def keypoint_batch(n: int = 4, seed: int = 0, objects: tuple[int, int] = (1, 4)):
    """`test_kinds.batch`'s images, boxes and labels, its spots as the keypoints field."""
    fixed, rows, counts = batch(n, seed, objects)
    rows["keypoints"] = rows.pop("spots")
    return {"images": fixed["images"]}, rows, counts


def test_the_flip_order_reaches_the_moves_and_only_points_with_k_a_row_take_one():
    assert moves(FIELDS)["keypoints"] == Move("points", "linear", True, ORDER)
    with pytest.raises(ValueError, match=r"flip_order \[0, 0, 1\] is not an order of the 3"):
        Field("keypoints", (3, 3), "<f4", ragged=True, kind="keypoints", flip_order=(0, 0, 1))
    with pytest.raises(ValueError, match="not an order of the 0 points"):
        Field("spots", (2,), "<f4", ragged=True, kind="keypoints", flip_order=(0,))


@pytest.mark.parametrize("name", sorted(EXECUTORS))
@pytest.mark.parametrize("flip", ["flip_horizontal", "flip_vertical"])
def test_a_mirror_moves_each_point_and_swaps_left_and_right(name, flip):
    """Point k of a mirrored object is where point ORDER[k] went: x -> W - x (or y -> H - y),
    the pair's visibilities swapped with them."""
    fixed, rows, counts = keypoint_batch(seed=3)
    rows["keypoints"][:, 2, 2] = 1  # the right point hidden: its visibility moves with it
    params = _batch_of(from_idg({flip: True}, HW), len(counts))
    _, moved = EXECUTORS[name](fixed, rows, counts, params, FIELDS)
    axis, size = (0, W) if flip == "flip_horizontal" else (1, H)
    for before, after in zip(split(rows, counts), moved, strict=True):
        want = before["keypoints"].copy()
        want[..., axis] = size - want[..., axis]
        np.testing.assert_allclose(after["keypoints"], want[:, ORDER], atol=1e-4)
        assert (after["keypoints"][:, 1, 2] == 1).all()


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_two_mirrors_are_a_half_turn_and_keep_the_order(name):
    fixed, rows, counts = keypoint_batch(seed=4)
    both = from_idg({"flip_horizontal": True, "flip_vertical": True}, HW)
    _, moved = EXECUTORS[name](fixed, rows, counts, _batch_of(both, len(counts)), FIELDS)
    for before, after in zip(split(rows, counts), moved, strict=True):
        want = before["keypoints"].copy()
        want[..., 0], want[..., 1] = W - want[..., 0], H - want[..., 1]
        np.testing.assert_allclose(after["keypoints"], want, atol=1e-4)


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_an_affine_warp_moves_keypoints_as_box_corners_reordered_where_it_mirrors(name):
    """Random rotations, zooms, shifts and flips: each kept object's points are its points
    moved by the sample's forward map (the box rule's corner move), in the flip order where
    the map mirrors; a point leaving the frame keeps its coordinates with visibility 0."""
    fixed, rows, counts = keypoint_batch(8, seed=6)
    aug = Augment(
        rotation_range=25, zoom_range=0.2, width_shift_range=0.3, horizontal_flip=True, seed=2
    )
    params = aug.draw(0, np.arange(8), HW)
    _, moved = EXECUTORS[name](fixed, rows, counts, params, FIELDS)
    forward = params.box_matrix.reshape(-1, 6)
    mirrored = 0
    for i, (before, after) in enumerate(zip(split(rows, counts), moved, strict=True)):
        a = forward[i]
        flips = a[0] * a[4] - a[1] * a[3] < 0
        mirrored += flips
        kept = [k for k, box in enumerate(before["boxes"]) if _box_in(box, after["boxes"], a)]
        assert len(kept) == len(after["keypoints"])
        for points, out in zip(before["keypoints"][kept], after["keypoints"], strict=True):
            x, y = move_point(points[:, 0].astype(np.float64), points[:, 1].astype(np.float64), a)
            inside = (x >= 0) & (x <= W) & (y >= 0) & (y <= H)
            want = np.stack([x, y, np.where(inside, points[:, 2], 0)], axis=1)
            np.testing.assert_allclose(out, want[list(ORDER)] if flips else want, atol=1e-3)
    assert 0 < mirrored < 8


def _box_in(box, kept_boxes, forward) -> bool:
    """Whether `box`, moved and clipped, is among the kept boxes (objects keep their order)."""
    xs, ys = move_point(box[[0, 2, 0, 2]].astype(np.float64), box[[1, 1, 3, 3]], forward)
    moved = np.clip([xs.min(), ys.min(), xs.max(), ys.max()], 0, [W, H, W, H])
    return bool(np.any(np.all(np.abs(kept_boxes - moved) < 1e-3, axis=1)))


@pytest.mark.parametrize("config", ["affine", "flip"])
def test_the_executors_agree_on_keypoints(config):
    if len(EXECUTORS) < 2:
        pytest.skip("only the NumPy executor is importable here")
    settings = (
        dict(rotation_range=30, zoom_range=0.2, width_shift_range=0.4, horizontal_flip=True)
        if config == "affine"
        else dict(horizontal_flip=True, vertical_flip=True)
    )
    fixed, rows, counts = keypoint_batch(6, seed=7, objects=(0, 5))
    params = Augment(**settings, seed=1).draw(3, np.arange(6), HW)
    results = {name: run(fixed, rows, counts, params, FIELDS) for name, run in EXECUTORS.items()}
    want = results["numpy"][1]
    for name, (_, got_rows) in results.items():
        for got, expected in zip(got_rows, want, strict=True):
            np.testing.assert_array_equal(got["labels"], expected["labels"], err_msg=name)
            np.testing.assert_allclose(
                got["keypoints"], expected["keypoints"], atol=1e-3, err_msg=name
            )

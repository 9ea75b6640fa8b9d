"""The box rule of augmentation at its boundaries, against albumentations' definitions: a box
is kept when its clipped area over its moved (unclipped) area is at least `min_visibility`
(`visibility < min_visibility` drops, so exactly the threshold keeps) and its clipped width and
height are at least `min_box_size` given explicitly (equal keeps); the moved box is the hull of
the four moved corners, clipped to the frame (W, H) of `out_hw` = (H, W)."""

from __future__ import annotations

import numpy as np
import pytest

from packer.augment.boxes import move_boxes

IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
OUT_HW = (10, 20)  # H=10, W=20: a wide frame, so width and height cannot be swapped unseen


def run(boxes, forward=IDENTITY, out_hw=OUT_HW, min_visibility=0.0, min_box_size=0.0):
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    corners = tuple(boxes[:, k] for k in range(4))
    forward = tuple(np.float64(v) for v in forward)
    moved, keep = move_boxes(np, corners, forward, out_hw, min_visibility, min_box_size)
    return np.stack(moved, axis=1), np.asarray(keep)


def oracle(boxes, matrix, out_hw, min_visibility, min_box_size):
    """The rule written out plainly: corners through the 2x3 map, their hull, clipped; then
    albumentations' filters (visibility below the threshold drops; width or height below the
    minimum drops; nothing of zero area is kept)."""
    h, w = out_hw
    moved, keep = [], []
    for x1, y1, x2, y2 in boxes:
        points = np.array([[x1, y1, 1], [x2, y1, 1], [x1, y2, 1], [x2, y2, 1]]) @ matrix.T
        lo, hi = points.min(axis=0), points.max(axis=0)
        clipped = np.clip([lo[0], lo[1], hi[0], hi[1]], 0, [w, h, w, h])
        cw, ch = clipped[2] - clipped[0], clipped[3] - clipped[1]
        area = (hi[0] - lo[0]) * (hi[1] - lo[1])
        ok = cw > 0 and ch > 0 and cw >= min_box_size and ch >= min_box_size
        moved.append(clipped)
        keep.append(bool(ok and not cw * ch < min_visibility * area))
    return np.array(moved), np.array(keep)


def test_a_non_square_box_half_out_of_the_frame_is_kept_at_exactly_min_visibility():
    # 8 wide, 3 high, half of it left of x=0: clipped area 12 of 24
    box = [-4.0, 2.0, 4.0, 5.0]
    moved, keep = run([box], min_visibility=0.5)
    np.testing.assert_array_equal(moved, [[0.0, 2.0, 4.0, 5.0]])
    assert keep.tolist() == [True]
    assert run([box], min_visibility=0.5 + 1e-9)[1].tolist() == [False]
    # the same at the wide frame's bottom-right corner: a quarter visible (4 x 2 of 8 x 4)
    corner = [16.0, 8.0, 24.0, 12.0]
    moved, keep = run([corner], min_visibility=0.25)
    np.testing.assert_array_equal(moved, [[16.0, 8.0, 20.0, 10.0]])
    assert keep.tolist() == [True]
    assert run([corner], min_visibility=0.25 + 1e-9)[1].tolist() == [False]


@pytest.mark.parametrize("box", [[3.0, 1.0, 5.0, 8.0], [3.0, 1.0, 10.0, 3.0]], ids=["w", "h"])
def test_a_box_exactly_min_box_size_wide_or_high_is_kept(box):
    """min_box_size given explicitly: a side of exactly 2.0 keeps, and so does one within the
    float32 slack of it (SIZE_SLACK of the box's largest coordinate, as packing judges);
    a side clearly shorter drops."""
    assert run([box], min_box_size=2.0)[1].tolist() == [True]
    assert run([box], min_box_size=2.0 + 1e-6)[1].tolist() == [True]
    assert run([box], min_box_size=2.0 + 1e-3)[1].tolist() == [False]


def test_a_box_outside_the_frame_has_no_area_and_is_dropped_whatever_the_thresholds():
    boxes = [
        [21.0, 2.0, 25.0, 5.0],  # right of a 20-wide frame: only visible were W and H swapped
        [2.0, 11.0, 5.0, 15.0],  # below a 10-high frame
        [-5.0, -5.0, -1.0, -1.0],  # above and left
        [12.0, 2.0, 18.0, 5.0],  # inside the 20-wide frame, outside a 10-wide one
    ]
    moved, keep = run(boxes)
    assert keep.tolist() == [False, False, False, True]
    np.testing.assert_array_equal(moved[0], [20.0, 2.0, 20.0, 5.0])
    np.testing.assert_array_equal(moved[1], [2.0, 10.0, 5.0, 10.0])
    np.testing.assert_array_equal(moved[2], [0.0, 0.0, 0.0, 0.0])
    assert not np.signbit(moved).any()  # +0.0 on the clipped edges, never -0.0


def test_a_zero_height_box_inside_the_frame_is_dropped():
    assert run([[1.0, 4.0, 6.0, 4.0], [1.0, 4.0, 1.0, 6.0]])[1].tolist() == [False, False]


def test_moved_boxes_are_the_clipped_hull_of_the_four_corners_under_any_map():
    rng = np.random.default_rng(3)
    for _ in range(20):
        matrix = np.array([[*rng.uniform(-1.5, 1.5, 2), rng.uniform(-5, 25)],
                           [*rng.uniform(-1.5, 1.5, 2), rng.uniform(-5, 15)]])  # fmt: skip
        xy = rng.uniform(-4, 22, (12, 2))
        wh = rng.uniform(0.5, 9, (12, 2))
        boxes = np.concatenate([xy, xy + wh], axis=1)
        visibility, size = rng.uniform(0, 0.9), rng.uniform(0, 3)
        want_moved, want_keep = oracle(boxes, matrix, OUT_HW, visibility, size)
        moved, keep = run(boxes, tuple(matrix.ravel()), OUT_HW, visibility, size)
        np.testing.assert_allclose(moved, want_moved, rtol=1e-12, atol=1e-12)
        assert keep.tolist() == want_keep.tolist()


def test_a_rotation_by_a_quarter_turn_moves_a_box_onto_its_hull():
    """(x, y) -> (10 - y, x): box (1, 2, 3, 7) has corners at x 8, 8, 3, 3 and y 1, 3, 1, 3."""
    moved, keep = run([[1.0, 2.0, 3.0, 7.0]], (0.0, -1.0, 10.0, 1.0, 0.0, 0.0))
    np.testing.assert_array_equal(moved, [[3.0, 1.0, 8.0, 3.0]])
    assert keep.tolist() == [True]


def test_torch_computes_the_same_numbers():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    xy = rng.uniform(-4, 22, (16, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(0.5, 9, (16, 2))], axis=1)
    forward = (0.9, 0.2, 1.0, -0.1, 1.1, -2.0)
    moved, keep = run(boxes, forward, OUT_HW, 0.3, 1.0)
    corners = tuple(torch.from_numpy(boxes[:, k].copy()) for k in range(4))
    maps = tuple(torch.tensor(v, dtype=torch.float64) for v in forward)
    t_moved, t_keep = move_boxes(torch, corners, maps, OUT_HW, 0.3, 1.0)
    np.testing.assert_array_equal(np.stack([v.numpy() for v in t_moved], axis=1), moved)
    assert t_keep.numpy().tolist() == keep.tolist()

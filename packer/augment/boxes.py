"""The box rule every executor applies, written once over NumPy, torch and tf.math alike.

A box (x1, y1, x2, y2, continuous pixels: pixel i spans [i, i + 1]) moves as its four
corners through the sample's forward map (`AugmentParams.box_matrix`); the moved box is
their hull, clipped to the output frame. The object stays when the clipped box has a
positive width and height, both at least ``min_box_size`` (within ``SIZE_SLACK`` of the box's
largest coordinate, as packing judges it: a 1 px object stored in float32 as 0.99997 px is
1 px), and keeps at least
``min_visibility`` of the hull's area (albumentations' ``min_visibility``: clipped area over
the moved, unclipped area). Only operators and ``xp.minimum`` / ``xp.maximum`` are used, so
``xp`` may be ``numpy``, ``torch`` or ``tf.math`` and all three compute the same float64 numbers.

Points (keypoints: x, y in pixels) move exactly as a box's corners do (`move_point`); one
leaving the frame keeps its moved coordinates (`inside` says which stay in). A map that
mirrors (`mirrored`: a horizontal or a vertical flip, not both) reorders each row's points by
its field's flip order, so a left wrist stays a left wrist.
"""

from __future__ import annotations

from typing import Any

from ..imaging.geometry import SIZE_SLACK


def move_point(x: Any, y: Any, forward: tuple[Any, ...]) -> tuple[Any, Any]:
    """Point(s) (x, y) through the forward map: what a box's corner and a keypoint go
    through alike (the same float64 operations, so a point equals a box made of it)."""
    a00, a01, a02, a10, a11, a12 = forward
    return a00 * x + a01 * y + a02, a10 * x + a11 * y + a12


def mirrored(forward: tuple[Any, ...]) -> Any:
    """Whether each forward map mirrors the image (its linear part has a negative
    determinant): left and right swap under one flip, not under two (a half turn)."""
    a00, a01, _, a10, a11, _ = forward
    return a00 * a11 - a01 * a10 < 0.0


def inside(x: Any, y: Any, out_hw: tuple[int, int]) -> Any:
    """Whether moved points lie in the output frame, edges included ([0, W] x [0, H], the
    range a clipped box spans, so a point on an edge stays in under a flip)."""
    return (x >= 0.0) & (x <= float(out_hw[1])) & (y >= 0.0) & (y <= float(out_hw[0]))


def move_boxes(
    xp: Any,
    corners: tuple[Any, Any, Any, Any],
    forward: tuple[Any, Any, Any, Any, Any, Any],
    out_hw: tuple[int, int],
    min_visibility: float,
    min_box_size: float,
) -> tuple[tuple[Any, Any, Any, Any], Any]:
    """((x1, y1, x2, y2) moved and clipped, keep) for boxes given as four arrays.

    ``forward`` is the map's (a00, a01, a02, a10, a11, a12), each broadcastable to the box
    arrays (one map per box, or per sample broadcast over its boxes); all float64.
    """
    x1, y1, x2, y2 = corners
    moved = [move_point(x, y, forward) for x, y in ((x1, y1), (x2, y1), (x1, y2), (x2, y2))]
    xs, ys = [x for x, _ in moved], [y for _, y in moved]
    lo_x = xp.minimum(xp.minimum(xs[0], xs[1]), xp.minimum(xs[2], xs[3]))
    hi_x = xp.maximum(xp.maximum(xs[0], xs[1]), xp.maximum(xs[2], xs[3]))
    lo_y = xp.minimum(xp.minimum(ys[0], ys[1]), xp.minimum(ys[2], ys[3]))
    hi_y = xp.maximum(xp.maximum(ys[0], ys[1]), xp.maximum(ys[2], ys[3]))
    zero = lo_x * 0.0 + 0.0  # edges as arrays (torch.minimum takes no numbers); +0.0, not -0.0
    w, h = zero + float(out_hw[1]), zero + float(out_hw[0])
    cx1, cx2 = xp.maximum(xp.minimum(lo_x, w), zero), xp.maximum(xp.minimum(hi_x, w), zero)
    cy1, cy2 = xp.maximum(xp.minimum(lo_y, h), zero), xp.maximum(xp.minimum(hi_y, h), zero)
    width, height = cx2 - cx1, cy2 - cy1
    reach = xp.maximum(xp.maximum(cx2, cy2), zero + 1.0)  # coordinates are >= 0 once clipped
    least = min_box_size - SIZE_SLACK * reach if min_box_size > 0 else zero
    keep = (
        (width > 0.0)
        & (height > 0.0)
        & (width >= least)
        & (height >= least)
        & (width * height >= min_visibility * ((hi_x - lo_x) * (hi_y - lo_y)))
    )
    return (cx1, cy1, cx2, cy2), keep

"""Per-object targets moved in-graph by the TensorFlow executor, on padded tensors.

Keras' and KerasHub's convention: ``{"boxes": float32 [B, M, 4], "labels": int [B, M]}``
padded with -1, optional ``"masks"`` uint8 [B, M, H, W] (padding slots all 0), keypoints
[B, M, ..., D] and any other [B, M, ...] per-object tensor (``"iscrowd"``). A slot holds an
object when a signed or float field's row there is not all -1. Every operation is a
TensorFlow op with static shapes where the inputs have them, so it runs inside tf.function
and tf.data. Kept objects move to the front of their row in their order; the freed slots
become padding again: -1 (0 for masks and unsigned fields).
"""

from __future__ import annotations

from typing import Any

from packer.augment.boxes import inside, mirrored, move_boxes, move_point
from packer.augment.moves import Move, by_convention


def _tf():
    import tensorflow as tf

    return tf


def warp_object_masks(masks, transforms, out_hw: tuple[int, int]) -> Any:
    """uint8 [B, M, Ho, Wo] 0/1: padded per-object masks sampled nearest, 0 out of frame.

    ``transforms`` are the nudged [B, 8] rows the class-id masks are warped with."""
    tf = _tf()
    channels_last = tf.transpose(tf.convert_to_tensor(masks), [0, 2, 3, 1])
    warped = tf.raw_ops.ImageProjectiveTransformV3(
        images=channels_last,
        transforms=transforms,
        output_shape=tf.constant(out_hw, tf.int32),
        fill_value=tf.constant(0, tf.float32),
        interpolation="NEAREST",
        fill_mode="CONSTANT",
    )
    return tf.cast(tf.not_equal(tf.transpose(warped, [0, 3, 1, 2]), 0), tf.uint8)


def _padding(dtype) -> Any:
    return 0 if dtype.is_unsigned or dtype.is_bool else -1


def move_points(points, forward, out_hw: tuple[int, int], flip_order: tuple[int, ...] = ()) -> Any:
    """Points [B, ..., D] (last axis x, y[, visibility, ...]) through [B, 2, 3] ``forward``,
    in their dtype: as box corners move; visibility 0 for a point that leaves the frame. With
    ``flip_order``, the points of rows [B, ..., P, D] whose map mirrors take that order."""
    tf = _tf()
    points = tf.convert_to_tensor(points)
    rank = points.shape.rank
    a = tf.reshape(tf.cast(forward, tf.float64), [-1, *[1] * (rank - 2), 6])
    x, y = move_point(
        tf.cast(points[..., 0], tf.float64),
        tf.cast(points[..., 1], tf.float64),
        tuple(tf.unstack(a, 6, axis=-1)),
    )
    columns = [tf.cast(x, points.dtype), tf.cast(y, points.dtype)]
    if points.shape[-1] >= 3:
        seen = points[..., 2]
        columns.append(tf.where(inside(x, y, out_hw), seen, tf.zeros_like(seen)))
    out = tf.concat([tf.stack(columns, axis=-1), points[..., len(columns) :]], axis=-1)
    if not flip_order:
        return out
    flips = mirrored(tuple(tf.unstack(tf.reshape(tf.cast(forward, tf.float64), [-1, 6]), 6, 1)))
    flips = tf.reshape(flips, [-1, *[1] * (rank - 1)])
    return tf.where(flips, tf.gather(out, list(flip_order), axis=rank - 2), out)


def _filled(targets: dict, found: dict[str, Move]) -> Any:
    """[B, M] bool: which slots hold an object (a row other than all -1 in a signed or float
    field), or None when no field can tell (then every slot counts)."""
    tf = _tf()
    filled = None
    for key, value in targets.items():
        if found[key].geometry == "planes" or value.dtype.is_unsigned or value.dtype.is_bool:
            continue
        row = tf.not_equal(value, tf.cast(-1, value.dtype))
        if value.shape.rank > 2:
            row = tf.reduce_any(row, axis=list(range(2, value.shape.rank)))
        filled = row if filled is None else filled | row
    return filled


def move_targets(
    targets: dict,
    forward,
    mask_transforms,
    *,
    out_hw: tuple[int, int],
    min_visibility: float = 0.0,
    min_box_size: float = 0.0,
    geometries: dict | None = None,
) -> dict:
    """The padded ``targets`` moved by [B, 2, 3] float64 ``forward`` maps (box_matrix).

    Keys move by ``geometries`` (name -> geometry) or, without it, by the convention of
    `moves` (boxes, masks per object, keypoints as points). ``mask_transforms``: [B, 8] rows
    for per-object masks. Returns a dict of the same keys, shapes and dtypes.
    """
    tf = _tf()
    targets = {key: tf.convert_to_tensor(value) for key, value in targets.items()}
    found = by_convention(targets, geometries)
    per_object = {k: v for k, v in targets.items() if v.shape.rank >= 2}
    if geometries is None and not any(found[k].geometry in ("boxes", "points") for k in per_object):
        raise ValueError("padded targets need 'boxes' [B, M, 4] and 'labels' [B, M] (-1 padding)")
    if not per_object:
        return targets
    keep = _filled(per_object, found)
    if keep is None:
        keep = tf.ones(tf.shape(next(iter(per_object.values())))[:2], tf.bool)
    a = tf.reshape(tf.cast(forward, tf.float64), [-1, 1, 6])
    moved = {}
    for key, value in per_object.items():
        geometry = found[key].geometry
        if geometry == "boxes":
            corners, kept = move_boxes(
                tf.math,
                tuple(tf.unstack(tf.cast(value, tf.float64), 4, axis=2)),
                tuple(tf.unstack(a, 6, axis=2)),
                out_hw,
                min_visibility,
                min_box_size,
            )
            keep = keep & kept
            moved[key] = tf.cast(tf.stack(corners, axis=2), value.dtype)
        elif geometry == "points":
            moved[key] = move_points(value, forward, out_hw, found[key].flip_order)
        elif geometry == "planes":
            moved[key] = warp_object_masks(value, mask_transforms, out_hw)
        else:
            moved[key] = value
    # Kept slots first, in their order (a stable sort of 0 = kept, 1 = dropped).
    order = tf.argsort(tf.cast(tf.logical_not(keep), tf.int32), axis=1, stable=True)
    filled = tf.range(tf.shape(keep)[1])[None, :] < tf.reduce_sum(
        tf.cast(keep, tf.int32), axis=1, keepdims=True
    )

    def compact(value, pad) -> Any:
        value = tf.gather(value, order, batch_dims=1)
        where = filled[(Ellipsis, *[None] * (value.shape.rank - 2))]  # [B, M, 1, ...]
        return tf.where(where, value, tf.cast(pad, value.dtype))

    out = {}
    for key, value in targets.items():
        if key not in per_object:  # per image ([B]) or a scalar
            out[key] = value
        elif found[key].geometry == "planes":
            out[key] = compact(moved[key], 0)
        else:
            out[key] = compact(moved[key], _padding(value.dtype))
    return out

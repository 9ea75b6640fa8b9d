"""Detection targets moved in-graph by the TensorFlow executor, on padded tensors.

Keras' and KerasHub's convention: ``{"boxes": float32 [B, M, 4], "labels": int [B, M]}``
padded with -1 (a slot is an object when its label is >= 0), optional ``"masks"`` uint8
[B, M, H, W] (padding slots all 0) and any other [B, M] per-object tensor (``"iscrowd"``).
Every operation is a TensorFlow op with static shapes where the inputs have them, so it runs
inside tf.function and tf.data. Kept objects move to the front of their row in their order;
the freed slots become padding again: -1 (0 for masks and unsigned fields).
"""

from __future__ import annotations

from typing import Any

from packer.augment.boxes import move_boxes


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


def move_targets(
    targets: dict,
    forward,
    mask_transforms,
    *,
    out_hw: tuple[int, int],
    min_visibility: float = 0.0,
    min_box_size: float = 0.0,
) -> dict:
    """The padded ``targets`` moved by [B, 2, 3] float64 ``forward`` maps (box_matrix).

    ``mask_transforms``: [B, 8] rows for the masks (used only when targets hold "masks").
    Returns a dict of the same keys, shapes and dtypes.
    """
    tf = _tf()
    if "boxes" not in targets or "labels" not in targets:
        raise ValueError("padded targets need 'boxes' [B, M, 4] and 'labels' [B, M] (-1 padding)")
    boxes = tf.convert_to_tensor(targets["boxes"])
    labels = tf.convert_to_tensor(targets["labels"])
    a = tf.reshape(tf.cast(forward, tf.float64), [-1, 1, 6])
    corners, keep = move_boxes(
        tf.math,
        tuple(tf.unstack(tf.cast(boxes, tf.float64), 4, axis=2)),
        tuple(tf.unstack(a, 6, axis=2)),
        out_hw,
        min_visibility,
        min_box_size,
    )
    keep = keep & (labels >= 0)
    # Kept slots first, in their order (a stable sort of 0 = kept, 1 = dropped).
    order = tf.argsort(tf.cast(tf.logical_not(keep), tf.int32), axis=1, stable=True)
    filled = tf.range(tf.shape(labels)[1])[None, :] < tf.reduce_sum(
        tf.cast(keep, tf.int32), axis=1, keepdims=True
    )

    def compact(value, pad) -> Any:
        value = tf.gather(value, order, batch_dims=1)
        where = filled[(Ellipsis, *[None] * (value.shape.rank - 2))]  # [B, M, 1, ...]
        return tf.where(where, value, tf.cast(pad, value.dtype))

    moved = {}
    for key, value in targets.items():
        if key == "boxes":
            moved[key] = compact(tf.cast(tf.stack(corners, axis=2), boxes.dtype), -1)
        elif key == "masks":
            moved[key] = compact(warp_object_masks(value, mask_transforms, out_hw), 0)
        elif tf.convert_to_tensor(value).shape.rank < 2:  # per image ([B]) or a scalar
            moved[key] = value
        else:
            value = tf.convert_to_tensor(value)
            moved[key] = compact(value, _padding(value.dtype))
    return moved

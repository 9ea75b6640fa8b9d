"""In-graph TensorFlow executor: ImageProjectiveTransformV3 per batch, same parameters.

Runs wherever the graph runs (tf.data map, a model's first layer). TensorFlow's transform
takes output pixel -> input pixel maps with pixel centres at integers, the convention of
`AugmentParams.matrix`, so the matrices pass through unchanged. TensorFlow is imported on
first use only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from packer.augment.dtypes import check_fill, check_ignore, check_images, value_range
from packer.augment.moves import Move, input_field, moves
from packer.augment.params import MASK_NUDGE, AugmentParams
from packer.augment.spec import Augment
from packer.augment.tf_targets import move_points, move_targets

_FILL = {"constant": "CONSTANT", "nearest": "NEAREST", "reflect": "REFLECT"}


def _tf():
    import tensorflow as tf

    return tf


def _transforms(matrix) -> Any:
    """[B, 2, 3] maps -> the [B, 8] float32 rows ImageProjectiveTransformV3 takes."""
    tf = _tf()
    matrix = tf.cast(tf.reshape(matrix, [-1, 6]), tf.float32)
    return tf.concat([matrix, tf.zeros([tf.shape(matrix)[0], 2], tf.float32)], axis=1)


def mask_transforms(matrix) -> Any:
    """The [B, 8] rows every mask is sampled with: the matrix nudged off exact .5 ties."""
    tf = _tf()
    nudge = tf.constant([0, 0, MASK_NUDGE, 0, 0, MASK_NUDGE, 0, 0], tf.float32)
    return _transforms(matrix) + nudge


def _wrap_bilinear(images, matrix, out_hw: tuple[int, int]) -> Any:
    """Periodic bilinear sampling by hand: TensorFlow's own WRAP mode blends the fill
    value into the seam between the last and the first pixel instead of wrapping."""
    tf = _tf()
    shape = tf.shape(images)
    b, h, w, c = shape[0], shape[1], shape[2], shape[3]
    ys, xs = tf.meshgrid(tf.range(out_hw[0]), tf.range(out_hw[1]), indexing="ij")
    base = tf.cast(tf.stack([xs, ys, tf.ones_like(xs)], axis=-1), tf.float32)
    points = tf.einsum("bij,hwj->bhwi", tf.cast(matrix, tf.float32), base)
    wf, hf = tf.cast(w, tf.float32), tf.cast(h, tf.float32)
    x, y = tf.math.floormod(points[..., 0], wf), tf.math.floormod(points[..., 1], hf)
    x0, y0 = tf.floor(x), tf.floor(y)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    x0, y0 = tf.cast(x0, tf.int32) % w, tf.cast(y0, tf.int32) % h
    x1, y1 = (x0 + 1) % w, (y0 + 1) % h
    flat = tf.reshape(images, [b, h * w, c])

    def at(yy, xx):
        return tf.gather(flat, yy * w + xx, batch_dims=1)

    top = at(y0, x0) * (1 - fx) + at(y0, x1) * fx
    bottom = at(y1, x0) * (1 - fx) + at(y1, x1) * fx
    return top * (1 - fy) + bottom * fy


def warp(
    images,
    masks,
    matrix,
    brightness,
    channel_shift,
    *,
    out_hw: tuple[int, int],
    fill_mode: str = "nearest",
    cval: float = 0.0,
    ignore_index: int = 255,
) -> tuple[Any, Any]:
    """Apply [B, 2, 3] ``matrix`` (tensors or arrays) to images [B,H,W,C] and masks.

    Images uint8, uint16 or float32 with any C, returned in their dtype (`dtypes`: integer
    images rounded and saturated after each step, float32 neither); ``masks`` uint8/uint16
    [B, H, W] (or None) are sampled nearest with out-of-frame pixels set to
    ``ignore_index``; ``brightness`` / ``channel_shift`` [B] (or None) colour the images.
    """
    fill = Fill(fill_mode, cval, ignore_index)
    out_images = warp_pixels(images, matrix, out_hw, fill, "linear", brightness, channel_shift)
    if masks is None:
        return out_images, None
    return out_images, warp_labels(masks, matrix, out_hw, ignore_index)


@dataclass(frozen=True)
class Fill:
    """What fills the frame where a warp samples outside its source."""

    fill_mode: str = "nearest"
    cval: float = 0.0
    ignore_index: int = 255


def warp_pixels(
    images,
    matrix,
    out_hw: tuple[int, int],
    fill: Fill,
    interpolation: str = "linear",
    brightness=None,
    channel_shift=None,
) -> Any:
    """[B,H,W,C] (or one band [B,H,W]) warped with ``interpolation`` ("linear" and "area"
    bilinear, "nearest" as masks are sampled), then coloured; in the input's dtype."""
    tf = _tf()
    images = tf.convert_to_tensor(images)
    plane = images.shape.rank == 3
    if plane:
        images = images[..., None]
    dtype = images.dtype
    check_images(dtype.name, images.shape)
    check_fill(fill.cval, dtype.name)
    if interpolation not in ("linear", "area", "nearest"):
        raise ValueError(
            f"the TensorFlow executor warps pixels linear, area or nearest, not {interpolation!r}"
        )
    bounds = value_range(dtype.name)

    def rounded(x):  # an integer image's values: whole and in range; float32 as it is
        return x if bounds is None else tf.clip_by_value(tf.round(x), *bounds)

    nearest = interpolation == "nearest"
    transforms = mask_transforms(matrix) if nearest else _transforms(matrix)
    if fill.fill_mode == "wrap" and not nearest:
        warped = _wrap_bilinear(tf.cast(images, tf.float32), matrix, out_hw)
    else:
        warped = tf.raw_ops.ImageProjectiveTransformV3(
            images=tf.cast(images, tf.float32),
            transforms=transforms,
            output_shape=tf.constant(out_hw, tf.int32),
            fill_value=tf.constant(fill.cval, tf.float32),
            interpolation="NEAREST" if nearest else "BILINEAR",
            fill_mode=_FILL.get(fill.fill_mode, "WRAP"),
        )
    warped = rounded(warped)
    if channel_shift is not None:  # the NumPy executor's formula (numpy_exec.colour)
        shift = tf.reshape(tf.cast(channel_shift, tf.float32), [-1, 1, 1, 1])
        shift = shift if bounds is None else tf.round(shift)
        lo = tf.reduce_min(warped, axis=[1, 2, 3], keepdims=True)
        hi = tf.reduce_max(warped, axis=[1, 2, 3], keepdims=True)
        warped = tf.clip_by_value(warped + shift, lo, hi)
    if brightness is not None:
        warped = rounded(warped * tf.reshape(tf.cast(brightness, tf.float32), [-1, 1, 1, 1]))
    out = tf.cast(warped, dtype)
    return out[..., 0] if plane else out


def warp_labels(masks, matrix, out_hw: tuple[int, int], ignore_index: int) -> Any:
    """Class-id planes [B, H, W] sampled nearest; out-of-frame pixels ``ignore_index``."""
    tf = _tf()
    masks = tf.convert_to_tensor(masks)
    check_ignore(ignore_index, masks.dtype.name)
    # The transform takes uint8 but no uint16: those go through int32 (exact).
    wide = masks.dtype != tf.uint8
    out_masks = tf.raw_ops.ImageProjectiveTransformV3(
        images=(tf.cast(masks, tf.int32) if wide else masks)[..., None],
        transforms=mask_transforms(matrix),
        output_shape=tf.constant(out_hw, tf.int32),
        fill_value=tf.constant(ignore_index, tf.float32),
        interpolation="NEAREST",
        fill_mode="CONSTANT",
    )[..., 0]
    return tf.cast(out_masks, masks.dtype) if wide else out_masks


def move_fields(
    arrays: dict,
    found: dict[str, Move],
    matrix,
    forward,
    colour: tuple[Any, Any],
    *,
    out_hw: tuple[int, int],
    settings: Any,
) -> dict:
    """``arrays`` (name -> tensor) moved by their `Move`: fixed fields [B, ...], ragged ones
    padded [B, M, ...] (`tf_targets`). ``colour`` is (brightness, channel_shift) of the
    image, the first "pixels" field; ``settings`` (an Augment or AugmentParams) gives the
    fill and the objects' limits."""
    unknown = [name for name in arrays if name not in found]
    if unknown:
        raise ValueError(f"no field named {unknown[0]!r} among {', '.join(found)}")
    fill = Fill(settings.fill_mode, settings.cval, settings.ignore_index)
    coloured = input_field(found)
    moved, padded = {}, {}
    for name, value in arrays.items():
        move = found[name]
        if move.ragged:
            padded[name] = value
        elif move.geometry == "pixels":
            paint = colour if name == coloured else (None, None)
            moved[name] = warp_pixels(value, matrix, out_hw, fill, move.interpolation, *paint)
        elif move.geometry == "labels":
            moved[name] = warp_labels(value, matrix, out_hw, fill.ignore_index)
        elif move.geometry == "points":
            moved[name] = move_points(value, forward, out_hw, move.flip_order)
        else:
            moved[name] = value
    if padded:
        moved |= move_targets(
            padded,
            forward,
            mask_transforms(matrix),
            out_hw=out_hw,
            min_visibility=settings.min_visibility,
            min_box_size=settings.min_box_size,
            geometries={name: found[name] for name in padded},
        )
    return {name: moved[name] for name in arrays}


def apply_fields(arrays: dict, params: AugmentParams, fields: Any) -> dict:
    """A batch's fields (name -> tensor or array) moved by their kinds' geometry with drawn
    ``params``: fixed fields [B, ...] as `numpy_exec.apply_fields` moves them, ragged fields
    padded [B, M, ...] with -1 (`tf_targets`). ``fields``: the pack's `schema.Field` objects
    or name -> geometry (`moves.moves`)."""
    return move_fields(
        arrays,
        moves(fields),
        params.matrix,
        params.box_matrix,
        (params.brightness, params.channel_shift),
        out_hw=params.out_hw,
        settings=params,
    )


def apply(
    images, masks, params: AugmentParams, *, targets: dict | None = None, geometries=None
) -> tuple[Any, ...]:
    """Apply drawn `AugmentParams` to images [B,H,W,C] and masks [B,H,W] or None (`warp`).

    Returns (images, masks); given padded ``targets`` (see `tf_targets`; keys moved by
    ``geometries`` or the convention of `moves`), (images, masks, moved targets)."""
    out = warp(
        images,
        masks,
        params.matrix,
        params.brightness,
        params.channel_shift,
        out_hw=params.out_hw,
        fill_mode=params.fill_mode,
        cval=params.cval,
        ignore_index=params.ignore_index,
    )
    if targets is None:
        return out
    moved = move_targets(
        targets,
        params.box_matrix,
        mask_transforms(params.matrix),
        out_hw=params.out_hw,
        min_visibility=params.min_visibility,
        min_box_size=params.min_box_size,
        geometries=geometries,
    )
    return (*out, moved)


def _draw(aug: Augment, epoch, indices, in_hw: tuple[int, int]) -> tuple[Any, ...]:
    """(matrix, brightness, channel_shift, forward) of a batch, drawn in-graph through
    tf.numpy_function (the same NumPy draw); colour entries None when not augmented."""
    tf = _tf()

    def numbers(epoch_value: np.ndarray, index_values: np.ndarray):
        p = aug.draw(int(epoch_value), index_values, in_hw)
        n = len(p)
        ones, zeros = np.ones(n, np.float32), np.zeros(n, np.float32)
        return (
            p.matrix.astype(np.float32),
            ones if p.brightness is None else p.brightness,
            zeros if p.channel_shift is None else p.channel_shift,
            p.box_matrix,
        )

    matrix, brightness, shift, forward = tf.numpy_function(
        numbers,
        [tf.cast(epoch, tf.int64), tf.cast(indices, tf.int64)],
        [tf.float32, tf.float32, tf.float32, tf.float64],
        stateful=False,
    )
    return (
        tf.ensure_shape(matrix, [None, 2, 3]),
        brightness if aug.brightness_range is not None else None,
        shift if aug.channel_shift_range else None,
        tf.ensure_shape(forward, [None, 2, 3]),
    )


def augment(
    aug: Augment, images, masks, epoch, indices, *, targets: dict | None = None, geometries=None
) -> tuple[Any, ...]:
    """Draw (through tf.numpy_function, the same NumPy draw) and apply, inside a graph.

    ``images`` need a static height and width; ``epoch`` is a scalar and ``indices`` the
    [B] sample indices, both tensors or numbers (in tf.data, map over them). Given padded
    ``targets`` (see `tf_targets`), returns (images, masks, moved targets).
    """
    tf = _tf()
    images = tf.convert_to_tensor(images)
    in_hw = (int(images.shape[1]), int(images.shape[2]))
    out_hw = aug.output_hw(in_hw)
    matrix, brightness, shift, forward = _draw(aug, epoch, indices, in_hw)
    out = warp(
        images,
        masks,
        matrix,
        brightness,
        shift,
        out_hw=out_hw,
        fill_mode=aug.fill_mode,
        cval=aug.cval,
        ignore_index=aug.ignore_index,
    )
    if targets is None:
        return out
    moved = move_targets(
        targets,
        forward,
        mask_transforms(matrix),
        out_hw=out_hw,
        min_visibility=aug.min_visibility,
        min_box_size=aug.min_box_size,
        geometries=geometries,
    )
    return (*out, moved)


def augment_fields(aug: Augment, arrays: dict, fields: Any, epoch, indices) -> dict:
    """`augment` for a batch's fields (name -> tensor), moved by their kinds' geometry as
    `apply_fields` moves them; the first "pixels" field (the image) needs a static height
    and width."""
    tf = _tf()
    found = moves(fields)
    image = tf.convert_to_tensor(arrays[input_field(found)])
    in_hw = (int(image.shape[1]), int(image.shape[2]))
    matrix, brightness, shift, forward = _draw(aug, epoch, indices, in_hw)
    return move_fields(
        arrays,
        found,
        matrix,
        forward,
        (brightness, shift),
        out_hw=aug.output_hw(in_hw),
        settings=aug,
    )

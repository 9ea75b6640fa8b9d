"""torch executor: one batched warp (grid_sample) for images, one gather for masks.

CPU or CUDA (``device=``); the grids come from `torch_grid` (pixel centres converted to
grid_sample's align_corners=False coordinates). torch is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packer.augment.dtypes import check_fill, check_images, check_masks, value_range
from packer.augment.moves import input_field, moves
from packer.augment.params import AugmentParams
from packer.augment.torch_grid import grid as sampling_grid
from packer.augment.torch_grid import mask_grid
from packer.augment.torch_targets import move_points, move_targets

MODES = {"linear": "bilinear", "area": "bilinear", "nearest": "nearest", "cubic": "bicubic"}
_PADDING = {"constant": "zeros", "nearest": "border", "reflect": "reflection", "wrap": "border"}


def _torch():
    import torch

    return torch


def _name(tensor) -> str:
    """A tensor's dtype as NumPy names it (torch.uint16 -> "uint16"), for `dtypes`' checks."""
    return str(tensor.dtype).removeprefix("torch.")


def _sample_images(images, params: AugmentParams, device, interpolation: str = "linear") -> Any:
    """Samples of NHWC ``images`` (bilinear; "nearest" as masks are sampled; "cubic"
    bicubic), float32 NCHW (rounded and in range for integer images, as `dtypes` says)."""
    torch = _torch()
    f = torch.nn.functional
    x = images.permute(0, 3, 1, 2).float()  # float32 images: a view, so no in-place edits
    mode = MODES[interpolation]
    matrix = params.mask_matrix if mode == "nearest" else params.matrix
    grid = sampling_grid(matrix, params, x.shape[1], device)
    if params.fill_mode == "wrap":  # periodic coordinates into a 1-pixel circular frame
        h, w = params.in_hw
        x = f.pad(x, (1, 1, 1, 1), mode="circular")
        size = torch.tensor([w, h], dtype=torch.float32, device=device)
        pixels = torch.remainder((grid + 1) * size / 2, size) + 0.5  # padded frame pixels
        grid = (2 * pixels + 1) / (size + 2) - 1
    bounds = value_range(_name(images))
    shifted = params.fill_mode == "constant" and bounds is not None
    if shifted:  # zeros padding around (x - cval) is a cval fill (exact for integer images)
        x = x - params.cval
    out = f.grid_sample(
        x, grid, mode=mode, padding_mode=_PADDING[params.fill_mode], align_corners=False
    )
    if shifted:
        out += params.cval
    elif params.fill_mode == "constant" and params.cval:
        # float32: x - cval would round x to cval's scale (-9999 nodata: ~1e-3), so blend
        # cval in by the weight of each sample that fell outside the frame instead. Four
        # float32 weights miss a sum of 1 by ~1e-7: gaps under OpenCV's own weight step
        # (1/32 px a side, 1/1024) count as none, so pixels inside stay exact.
        inside = torch.ones_like(x[:, :1])
        gap = 1 - f.grid_sample(inside, grid, mode=mode, align_corners=False)
        out += torch.where(gap < 1 / 1024, 0.0, gap) * params.cval
    return _rounded(out, bounds)


def _rounded(images, bounds: tuple[float, float] | None) -> Any:
    """Integer images' values whole and saturated to ``bounds``, in place; float32 as is."""
    return images if bounds is None else images.round_().clamp_(*bounds)


def _colour(images, params: AugmentParams, device, bounds: tuple[float, float] | None) -> Any:
    """Channel shift (clipped to each image's range) then brightness, in place on NCHW.

    The NumPy executor's formula (numpy_exec.colour), on rounded pixel values; for float32
    images (``bounds`` None) the shift is not rounded and nothing saturates."""
    torch = _torch()
    if params.channel_shift is not None:
        shift = torch.as_tensor(params.channel_shift, device=device).view(-1, 1, 1, 1)
        shift = shift if bounds is None else shift.round()
        lo = images.amin(dim=(1, 2, 3), keepdim=True)
        hi = images.amax(dim=(1, 2, 3), keepdim=True)
        images = torch.clamp(images.add_(shift), lo, hi)
    if params.brightness is not None:
        images *= torch.as_tensor(params.brightness, device=device).view(-1, 1, 1, 1)
        images = _rounded(images, bounds)
    return images


def _sample_masks(masks, params: AugmentParams, device) -> Any:
    """Nearest samples of [B, H, W] ``masks`` (`mask_grid`); out of frame: the ignore index.

    float32 holds every uint16 class id exactly."""
    torch = _torch()
    x = masks[:, None].float() - params.ignore_index  # zeros padding = the ignore index
    grid = mask_grid(params, device)
    out = torch.nn.functional.grid_sample(
        x, grid, mode="nearest", padding_mode="zeros", align_corners=False
    )
    return (out[:, 0] + params.ignore_index).round_().to(masks.dtype)


def apply(
    images,
    masks,
    params: AugmentParams,
    *,
    device=None,
    targets: Sequence[Mapping] | None = None,
    geometries: Mapping[str, Any] | None = None,
) -> tuple[Any, ...]:
    """Warp images [B,H,W,C] and masks [B,H,W] (or None) by ``params`` in one batch.

    Images uint8, uint16 or float32 with any C, returned in their dtype; masks uint8 or
    uint16 (`dtypes`). Inputs may be NumPy arrays or tensors; the work and the results are
    on ``device`` (default: the images' own device). Returns (images, masks) of
    ``params.out_hw``; given ``targets`` (one detection dict of tensors per sample, see
    `torch_targets`; keys moved by ``geometries`` or the convention of `moves`), (images,
    masks, moved targets), the targets on the same device.
    """
    torch = _torch()
    images = torch.as_tensor(images, device=device)
    device = images.device
    out_images = warp_pixels(images, params, device, coloured=True)
    out_masks = None if masks is None else warp_labels(masks, params, device, images.shape)
    if targets is None:
        return out_images, out_masks
    moved = move_targets(params, targets, device=device, geometries=geometries)
    return out_images, out_masks, moved


def apply_fields(
    arrays: Mapping[str, Any],
    params: AugmentParams,
    fields: Iterable[Any] | Mapping[str, Any],
    *,
    device=None,
    targets: Sequence[Mapping] | None = None,
) -> tuple[dict[str, Any], list[dict] | None]:
    """A batch's fields moved by their kinds' geometry, as `numpy_exec.apply_fields` moves
    them: fixed fields (name -> [B, ...] tensor or array) in ``arrays``, ragged ones as one
    dict per image in ``targets`` (torchvision's detection convention). ``fields``: the
    pack's `schema.Field` objects or name -> geometry (`moves.moves`). The work and results
    are on ``device`` (default: the image's). Returns (fields, moved targets or None)."""
    torch = _torch()
    found = moves(fields)
    unknown = [name for name in arrays if name not in found]
    if unknown:
        raise ValueError(f"no field named {unknown[0]!r} among {', '.join(found)}")
    coloured = input_field(found)
    tensors = {name: torch.as_tensor(value, device=device) for name, value in arrays.items()}
    if device is None:
        first = tensors.get(coloured, next(iter(tensors.values()), None))
        device = torch.device("cpu") if first is None else first.device
    moved = {
        name: _move_fixed(value.to(device), params, device, found[name], name == coloured, name)
        for name, value in tensors.items()
    }
    if targets is None:
        return moved, None
    # A fixed field in the per-image dicts (a heat map beside the boxes) moves as one batch.
    inside = [name for name in found if not found[name].ragged and targets and name in targets[0]]
    stacked = {name: torch.stack([torch.as_tensor(t[name]) for t in targets]) for name in inside}
    fixed = {
        name: _move_fixed(value.to(device), params, device, found[name], False, name)
        for name, value in stacked.items()
    }
    rest = [{k: v for k, v in t.items() if k not in fixed} for t in targets]
    ragged = {name: move for name, move in found.items() if move.ragged}
    per_image = move_targets(params, rest, device=device, geometries=ragged)
    for i, target in enumerate(per_image):
        target.update({name: value[i] for name, value in fixed.items()})
    return moved, per_image


def _move_fixed(value, params: AugmentParams, device, move, coloured: bool, name: str) -> Any:
    """One fixed field's batch ``[B, ...]`` moved by its geometry."""
    if move.geometry == "pixels":
        return warp_pixels(value, params, device, move.interpolation, coloured)
    if move.geometry == "labels":
        return warp_labels(value, params, device, value.shape, name)
    if move.geometry == "points":
        forward = _torch().as_tensor(params.box_matrix.reshape(-1, 6), device=device)
        return move_points(value, forward, params.out_hw, move.flip_order)
    return value


def warp_pixels(
    images, params: AugmentParams, device, interpolation: str = "linear", coloured: bool = False
) -> Any:
    """[B,H,W,C] (or one band [B,H,W]) warped with ``interpolation``, coloured when
    ``coloured``; in their dtype, on ``device``."""
    plane = images.ndim == 3
    bands = images[..., None] if plane else images
    check_images(_name(bands), bands.shape)
    if bands.shape[0] != len(params) or tuple(bands.shape[1:3]) != params.in_hw:
        raise ValueError(
            f"images {tuple(bands.shape)} do not match the parameters "
            f"({len(params)} samples of {params.in_hw})"
        )
    check_fill(params.cval, _name(bands))
    out = _sample_images(bands, params, device, interpolation)
    if coloured and params.has_colour:
        out = _colour(out, params, device, value_range(_name(bands)))
    out = out.to(bands.dtype).permute(0, 2, 3, 1).contiguous()
    return out[..., 0] if plane else out


def warp_labels(masks, params: AugmentParams, device, shape, name: str = "masks") -> Any:
    """Class-id planes [B, H, W] sampled nearest; out of frame the ignore index."""
    masks = _torch().as_tensor(masks, device=device)
    try:
        check_masks(_name(masks), masks.shape, shape, params.ignore_index)
    except ValueError as error:
        raise ValueError(f"{name}: {error}" if name != "masks" else str(error)) from None
    if tuple(masks.shape[1:]) != params.in_hw:
        raise ValueError(f"{name} {tuple(masks.shape)} do not match the parameters' {params.in_hw}")
    return _sample_masks(masks, params, device)

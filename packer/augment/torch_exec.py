"""torch executor: one batched warp (grid_sample) for images, one gather for masks.

CPU or CUDA (``device=``); the grids come from `torch_grid` (pixel centres converted to
grid_sample's align_corners=False coordinates). torch is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from packer.augment.dtypes import check_fill, check_images, check_masks, value_range
from packer.augment.params import AugmentParams
from packer.augment.torch_grid import grid as sampling_grid
from packer.augment.torch_grid import mask_grid
from packer.augment.torch_targets import move_targets

_PADDING = {"constant": "zeros", "nearest": "border", "reflect": "reflection", "wrap": "border"}


def _torch():
    import torch

    return torch


def _name(tensor) -> str:
    """A tensor's dtype as NumPy names it (torch.uint16 -> "uint16"), for `dtypes`' checks."""
    return str(tensor.dtype).removeprefix("torch.")


def _sample_images(images, params: AugmentParams, device) -> Any:
    """Bilinear samples of NHWC ``images``, float32 NCHW (rounded and in range for integer
    images, as `dtypes` says)."""
    torch = _torch()
    f = torch.nn.functional
    x = images.permute(0, 3, 1, 2).float()  # float32 images: a view, so no in-place edits
    grid = sampling_grid(params.matrix, params, x.shape[1], device)
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
        x, grid, mode="bilinear", padding_mode=_PADDING[params.fill_mode], align_corners=False
    )
    if shifted:
        out += params.cval
    elif params.fill_mode == "constant" and params.cval:
        # float32: x - cval would round x to cval's scale (-9999 nodata: ~1e-3), so blend
        # cval in by the weight of each sample that fell outside the frame instead. Four
        # float32 weights miss a sum of 1 by ~1e-7: gaps under OpenCV's own weight step
        # (1/32 px a side, 1/1024) count as none, so pixels inside stay exact.
        inside = torch.ones_like(x[:, :1])
        gap = 1 - f.grid_sample(inside, grid, mode="bilinear", align_corners=False)
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
    images, masks, params: AugmentParams, *, device=None, targets: Sequence[Mapping] | None = None
) -> tuple[Any, ...]:
    """Warp images [B,H,W,C] and masks [B,H,W] (or None) by ``params`` in one batch.

    Images uint8, uint16 or float32 with any C, returned in their dtype; masks uint8 or
    uint16 (`dtypes`). Inputs may be NumPy arrays or tensors; the work and the results are
    on ``device`` (default: the images' own device). Returns (images, masks) of
    ``params.out_hw``; given ``targets`` (one detection dict of tensors per sample, see
    `torch_targets`), (images, masks, moved targets), the targets on the same device.
    """
    torch = _torch()
    images = torch.as_tensor(images, device=device)
    device = images.device
    check_images(_name(images), images.shape)
    if images.shape[0] != len(params) or tuple(images.shape[1:3]) != params.in_hw:
        raise ValueError(
            f"images {tuple(images.shape)} do not match the parameters "
            f"({len(params)} samples of {params.in_hw})"
        )
    check_fill(params.cval, _name(images))
    if masks is not None:
        masks = torch.as_tensor(masks, device=device)
        check_masks(_name(masks), masks.shape, images.shape, params.ignore_index)
    out = _sample_images(images, params, device)
    if params.has_colour:
        out = _colour(out, params, device, value_range(_name(images)))
    out_images = out.to(images.dtype).permute(0, 2, 3, 1).contiguous()
    out_masks = None if masks is None else _sample_masks(masks, params, device)
    if targets is None:
        return out_images, out_masks
    return out_images, out_masks, move_targets(params, targets, device=device)

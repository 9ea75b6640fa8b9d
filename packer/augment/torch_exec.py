"""torch executor: one batched warp (grid_sample) for images, one gather for masks.

CPU or CUDA (``device=``); the grids come from `torch_grid` (pixel centres converted to
grid_sample's align_corners=False coordinates). torch is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from packer.augment.params import AugmentParams
from packer.augment.torch_grid import grid as sampling_grid
from packer.augment.torch_grid import mask_grid
from packer.augment.torch_targets import move_targets

_PADDING = {"constant": "zeros", "nearest": "border", "reflect": "reflection", "wrap": "border"}


def _torch():
    import torch

    return torch


def _sample_images(images, params: AugmentParams, device) -> Any:
    """Bilinear samples of uint8 NHWC ``images``, float32 NCHW."""
    torch = _torch()
    f = torch.nn.functional
    x = images.permute(0, 3, 1, 2).float()
    grid = sampling_grid(params.matrix, params, x.shape[1], device)
    if params.fill_mode == "wrap":  # periodic coordinates into a 1-pixel circular frame
        h, w = params.in_hw
        x = f.pad(x, (1, 1, 1, 1), mode="circular")
        size = torch.tensor([w, h], dtype=torch.float32, device=device)
        pixels = torch.remainder((grid + 1) * size / 2, size) + 0.5  # padded frame pixels
        grid = (2 * pixels + 1) / (size + 2) - 1
    if params.fill_mode == "constant":  # zeros padding around (x - cval) is a cval fill
        x -= params.cval
    out = f.grid_sample(
        x, grid, mode="bilinear", padding_mode=_PADDING[params.fill_mode], align_corners=False
    )
    if params.fill_mode == "constant":
        out += params.cval
    return out.round_().clamp_(0, 255)


def _colour(images, params: AugmentParams, device) -> Any:
    """Channel shift (clipped to each image's range) then brightness, in place on NCHW.

    The NumPy executor's formula (numpy_exec.colour), on rounded pixel values."""
    torch = _torch()
    if params.channel_shift is not None:
        shift = torch.as_tensor(params.channel_shift, device=device).round().view(-1, 1, 1, 1)
        lo = images.amin(dim=(1, 2, 3), keepdim=True)
        hi = images.amax(dim=(1, 2, 3), keepdim=True)
        images = torch.clamp(images.add_(shift), lo, hi)
    if params.brightness is not None:
        images *= torch.as_tensor(params.brightness, device=device).view(-1, 1, 1, 1)
        images = images.round_().clamp_(0, 255)
    return images


def _sample_masks(masks, params: AugmentParams, device) -> Any:
    """Nearest samples of [B, H, W] ``masks`` (`mask_grid`); out of frame: the ignore index."""
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
    """Warp uint8 images [B,H,W,C] and masks [B,H,W] (or None) by ``params`` in one batch.

    Inputs may be NumPy arrays or tensors; the work and the results are on ``device``
    (default: the images' own device). Returns uint8 (images, masks) of ``params.out_hw``;
    given ``targets`` (one detection dict of tensors per sample, see `torch_targets`),
    (images, masks, moved targets), the targets on the same device.
    """
    torch = _torch()
    images = torch.as_tensor(images, device=device)
    device = images.device
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(
            f"images must be uint8 [B, H, W, C], got {images.dtype} {tuple(images.shape)}"
        )
    if images.shape[0] != len(params) or tuple(images.shape[1:3]) != params.in_hw:
        raise ValueError(
            f"images {tuple(images.shape)} do not match the parameters "
            f"({len(params)} samples of {params.in_hw})"
        )
    out = _sample_images(images, params, device)
    if params.has_colour:
        out = _colour(out, params, device)
    out_images = out.to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    out_masks = None
    if masks is not None:
        masks = torch.as_tensor(masks, device=device)
        if masks.shape != images.shape[:3]:
            raise ValueError(f"masks {tuple(masks.shape)} must be [B, H, W] of the images")
        out_masks = _sample_masks(masks, params, device)
    if targets is None:
        return out_images, out_masks
    return out_images, out_masks, move_targets(params, targets, device=device)

"""Detection targets moved by the torch executor, on the images' device (CPU or CUDA).

Targets are one dict of tensors per sample, as torchvision's detection models take them
(``"boxes"`` float [N, 4] x1, y1, x2, y2, ``"labels"`` [N], optional ``"masks"`` uint8
[N, H, W], other per-object tensors of N rows; scalars and non-tensors pass through). The
boxes of the whole batch move in one set of tensor operations (`boxes.move_boxes`, float64);
the host learns which objects stay with one small copy per batch, and each sample's kept
masks take one nearest grid_sample with the grid the class-id masks use (0 out of frame).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from packer.augment.boxes import move_boxes
from packer.augment.params import AugmentParams
from packer.augment.torch_grid import mask_grid


def _torch():
    import torch

    return torch


def _boxes(target: Mapping, i: int, device) -> Any:
    torch = _torch()
    if "boxes" not in target:
        raise ValueError(f"target {i} has no 'boxes' (x1, y1, x2, y2 per object)")
    boxes = torch.as_tensor(target["boxes"], device=device)
    if boxes.numel() == 0:
        return boxes.reshape(0, 4).double()
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"target {i}: boxes must be [N, 4], got shape {tuple(boxes.shape)}")
    return boxes.double()


def _per_object(key: str, value: Any, n: int, i: int) -> bool:
    """Whether ``value`` is a tensor of one row per object (moved with them)."""
    torch = _torch()
    if not isinstance(value, torch.Tensor) or value.ndim == 0:
        return False
    if value.shape[0] != n:
        raise ValueError(
            f"target {i}: {key!r} has {value.shape[0]} rows for {n} boxes (per-object fields "
            "need one row per box; per-image values must be scalars)"
        )
    return True


def warp_object_masks(masks: Any, grid: Any) -> Any:
    """uint8 [K, Ho, Wo] 0/1: [K, H, W] masks sampled nearest on one sample's [Ho, Wo, 2] grid."""
    torch = _torch()
    if masks.shape[0] == 0:
        return torch.zeros((0, *grid.shape[:2]), dtype=torch.uint8, device=grid.device)
    out = torch.nn.functional.grid_sample(
        masks[None].float(), grid[None], mode="nearest", padding_mode="zeros", align_corners=False
    )
    return (out[0] != 0).to(torch.uint8)


def move_targets(params: AugmentParams, targets: Sequence[Mapping], *, device=None) -> list[dict]:
    """One moved dict of tensors per sample (see `numpy_targets.move_targets` for the rule).

    The work and the results are on ``device`` (default: the first target's boxes' device).
    """
    torch = _torch()
    if len(targets) != len(params):
        raise ValueError(f"{len(targets)} targets for a batch of {len(params)} samples")
    if device is None:
        first = targets[0]["boxes"] if targets and "boxes" in targets[0] else None
        device = first.device if isinstance(first, torch.Tensor) else torch.device("cpu")
    boxes = [_boxes(t, i, device) for i, t in enumerate(targets)]
    counts = [len(b) for b in boxes]
    owner = torch.as_tensor(np.repeat(np.arange(len(boxes)), counts), device=device)
    forward = torch.as_tensor(params.box_matrix.reshape(-1, 6), device=device)[owner]
    flat = torch.cat([*boxes, torch.empty((0, 4), dtype=torch.float64, device=device)])
    corners, keep = move_boxes(
        torch,
        tuple(flat.unbind(1)),
        tuple(forward.unbind(1)),
        params.out_hw,
        params.min_visibility,
        params.min_box_size,
    )
    moved = torch.stack(corners, dim=1).float()
    keep_host = keep.cpu()  # the one synchronisation: which rows each sample keeps
    grids = None
    results, start = [], 0
    for i, (target, n) in enumerate(zip(targets, counts, strict=True)):
        stop = start + n
        kept = torch.nonzero(keep_host[start:stop]).flatten().to(device)
        result = {}
        for key, value in target.items():
            if key == "boxes":
                result[key] = moved[start:stop].index_select(0, kept)
            elif key == "masks":
                if grids is None:
                    grids = mask_grid(params, device)
                masks = _masks(value, n, params.in_hw, i, device)
                result[key] = warp_object_masks(masks.index_select(0, kept), grids[i])
            elif _per_object(key, value, n, i):
                result[key] = value.to(device).index_select(0, kept)
            else:
                result[key] = value
        results.append(result)
        start = stop
    return results


def _masks(value: Any, n: int, in_hw: tuple[int, int], i: int, device) -> Any:
    torch = _torch()
    masks = torch.as_tensor(value, device=device)
    if tuple(masks.shape) != (n, *in_hw) or masks.dtype != torch.uint8:
        raise ValueError(
            f"target {i}: masks must be uint8 [{n}, {in_hw[0]}, {in_hw[1]}] (one per box, "
            f"the images' size), got {masks.dtype} {tuple(masks.shape)}"
        )
    return masks

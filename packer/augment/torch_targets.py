"""Per-object targets moved by the torch executor, each key by its geometry (`moves`), on
the images' device (CPU or CUDA).

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

from packer.augment.boxes import inside, mirrored, move_boxes, move_point
from packer.augment.moves import Move, by_convention
from packer.augment.params import AugmentParams
from packer.augment.torch_grid import mask_grid


def _torch():
    import torch

    return torch


def _boxes(target: Mapping, i: int, device, key: str = "boxes") -> Any:
    torch = _torch()
    boxes = torch.as_tensor(target[key], device=device)
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
            f"target {i}: {key!r} has {value.shape[0]} rows for {n} objects (per-object fields "
            "need one row per object; per-image values must be scalars)"
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


def move_points(
    points: Any, forward: Any, out_hw: tuple[int, int], flip_order: tuple[int, ...] = ()
) -> Any:
    """Points [K, ..., D] (last axis x, y[, visibility, ...]) through float64 ``forward``
    [K, 6] (one map per row), in their dtype: as box corners move; visibility 0 for a point
    that leaves the frame (its moved coordinates stay). With ``flip_order``, the points of a
    row [K, P, D] whose map mirrors take that order."""
    torch = _torch()
    out = points.clone()
    if out.numel() == 0:
        return out
    a = forward.reshape(len(forward), *[1] * (out.ndim - 2), 6)
    x, y = move_point(out[..., 0].double(), out[..., 1].double(), tuple(a.unbind(-1)))
    out[..., 0], out[..., 1] = x.to(out.dtype), y.to(out.dtype)
    if out.shape[-1] >= 3:
        seen = out[..., 2]
        out[..., 2] = torch.where(inside(x, y, out_hw), seen, torch.zeros_like(seen))
    if flip_order:
        flips = mirrored(tuple(forward.reshape(-1, 6).unbind(-1)))
        order = torch.as_tensor(flip_order, device=out.device)
        flips = flips.reshape(-1, *[1] * (out.ndim - 1))
        out = torch.where(flips, out.index_select(out.ndim - 2, order), out)
    return out


def move_targets(
    params: AugmentParams,
    targets: Sequence[Mapping],
    *,
    device=None,
    geometries: Mapping[str, Any] | None = None,
) -> list[dict]:
    """One moved dict of tensors per sample (see `numpy_targets.move_targets` for the rule;
    keys move by ``geometries`` or the convention of `moves`).

    The work and the results are on ``device`` (default: the first target's boxes' device).
    """
    torch = _torch()
    if len(targets) != len(params):
        raise ValueError(f"{len(targets)} targets for a batch of {len(params)} samples")
    keys = list(dict.fromkeys(k for t in targets for k in t))
    found = by_convention(keys, geometries)
    if device is None:
        boxes = next((k for k in keys if found[k].geometry == "boxes"), None)
        first = targets[0].get(boxes) if targets and boxes else None
        device = first.device if isinstance(first, torch.Tensor) else torch.device("cpu")
    counts = [_count(t, i, found, geometries is None, device) for i, t in enumerate(targets)]
    owner = torch.as_tensor(np.repeat(np.arange(len(targets)), counts), device=device)
    forward = torch.as_tensor(params.box_matrix.reshape(-1, 6), device=device)[owner]
    keep = torch.ones(len(owner), dtype=torch.bool, device=device)
    moved = {}
    for key in keys:
        geometry = found[key].geometry
        if geometry == "boxes":
            parts = [_boxes(t, i, device, key) for i, t in enumerate(targets)]
            flat = torch.cat([*parts, torch.empty((0, 4), dtype=torch.float64, device=device)])
            corners, kept = move_boxes(
                torch,
                tuple(flat.unbind(1)),
                tuple(forward.unbind(1)),
                params.out_hw,
                params.min_visibility,
                params.min_box_size,
            )
            moved[key] = torch.stack(corners, dim=1).float()
            keep &= kept
        elif geometry == "points":
            flat = torch.cat([torch.as_tensor(t[key], device=device) for t in targets])
            moved[key] = move_points(flat, forward, params.out_hw, found[key].flip_order)
    keep_host = keep.cpu()  # the one synchronisation: which rows each sample keeps
    grids = None
    results, start = [], 0
    for i, (target, n) in enumerate(zip(targets, counts, strict=True)):
        stop = start + n
        kept = torch.nonzero(keep_host[start:stop]).flatten().to(device)
        result = {}
        for key, value in target.items():
            geometry = found[key].geometry
            if key in moved:
                result[key] = moved[key][start:stop].index_select(0, kept)
            elif geometry == "planes":
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


def _count(target: Mapping, i: int, found: Mapping[str, Move], convention: bool, device) -> int:
    """Sample ``i``'s object count: its boxes' rows (keypoints' without boxes)."""
    boxes = next((k for k in target if found[k].geometry == "boxes"), None)
    if boxes is not None:
        return len(_boxes(target, i, device, boxes))
    points = next((k for k in target if found[k].geometry == "points"), None)
    if convention and points is None:
        raise ValueError(f"target {i} has no 'boxes' (x1, y1, x2, y2 per object)")
    first = points or next((k for k in target if np.ndim(target[k]) > 0), None)
    return 0 if first is None else len(target[first])


def _masks(value: Any, n: int, in_hw: tuple[int, int], i: int, device) -> Any:
    torch = _torch()
    masks = torch.as_tensor(value, device=device)
    if tuple(masks.shape) != (n, *in_hw) or masks.dtype != torch.uint8:
        raise ValueError(
            f"target {i}: masks must be uint8 [{n}, {in_hw[0]}, {in_hw[1]}] (one per box, "
            f"the images' size), got {masks.dtype} {tuple(masks.shape)}"
        )
    return masks

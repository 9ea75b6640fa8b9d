"""Sampling grids for torch's grid_sample, shared by the image, mask and object-mask warps.

`AugmentParams.matrix` puts pixel centres at integers; grid_sample with align_corners=False
puts pixel i's centre at (2i + 1) / W - 1, so the grid is built in pixels and normalised with
exactly that formula. Its own module so that `torch_exec` and `torch_targets` both import it
and neither imports the other. torch is imported on first use only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from packer.augment.params import AugmentParams


def _torch():
    import torch

    return torch


def normalised(matrix: np.ndarray, in_hw: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """[B, 2, 3] pixel maps -> affine_grid's thetas (align_corners=False coordinates).

    Pixel x of a W-wide image sits at (2x + 1) / W - 1, so theta = N_in @ M @ N_out^-1.
    """

    def to_unit(h: int, w: int) -> np.ndarray:
        return np.array([[2 / w, 0, 1 / w - 1], [0, 2 / h, 1 / h - 1], [0, 0, 1]])

    full = np.concatenate([matrix, np.broadcast_to([[[0.0, 0.0, 1.0]]], (len(matrix), 1, 3))], 1)
    theta = to_unit(*in_hw) @ full @ np.linalg.inv(to_unit(*out_hw))
    return theta[:, :2, :]


def grid(matrix: np.ndarray, params: AugmentParams, channels: int, device) -> Any:
    """float32 [B, Ho, Wo, 2] sampling grid for grid_sample."""
    torch = _torch()
    theta = torch.as_tensor(normalised(matrix, params.in_hw, params.out_hw), dtype=torch.float32)
    size = (len(matrix), channels, *params.out_hw)
    return torch.nn.functional.affine_grid(theta.to(device), size, align_corners=False)


def mask_grid(params: AugmentParams, device) -> Any:
    """float32 [B, Ho, Wo, 2]: where every mask (class ids or per object) samples, nearest.

    The nudged mask matrix keeps exact .5 ties away, so torch's rounding (half to even)
    picks the pixels OpenCV's (half up) does."""
    return grid(params.mask_matrix, params, 1, device)

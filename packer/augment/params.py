"""`AugmentParams`: the numbers of one batch's augmentation, all any executor needs.

Drawn by `drawing.draw` (seeded per sample), or built from an ImageDataGenerator dict by
`idg.from_idg`; applied by `numpy_exec`, `tf_exec` and `torch_exec`. A leaf module: it
imports nothing from packer, so every other module of the package may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Sub-pixel nudge of the mask's sampling point: an exact .5 (a scale of 2, a half-pixel
# shift) would otherwise round one way in OpenCV (half up), another in torch (half to even)
# and another in TensorFlow (half away from zero). 1/64 px is far above OpenCV's 1/1024 px
# fixed-point step and far below anything a mask boundary could show.
MASK_NUDGE = 1.0 / 64


@dataclass
class AugmentParams:
    """The parameters of one batch: what any executor needs to apply it.

    ``matrix[b]`` maps output pixel (x, y, 1) to input pixel coordinates (x = column,
    y = row, pixel centres at integers: OpenCV's and scipy's convention). ``brightness``
    and ``channel_shift`` are None when the augmentation has no such colour change.
    """

    matrix: np.ndarray  # float64 [B, 2, 3], output pixel -> input pixel
    in_hw: tuple[int, int]
    out_hw: tuple[int, int]
    brightness: np.ndarray | None  # float32 [B]: then multiply (ImageEnhance.Brightness)
    channel_shift: np.ndarray | None  # float32 [B]: first add, clip to image range (dtypes)
    fill_mode: str = "nearest"
    cval: float = 0.0
    ignore_index: int = 255
    min_visibility: float = 0.0  # an object stays if its clipped box keeps this area fraction
    min_box_size: float = 0.0  # and its clipped width and height are > 0 and >= this (pixels)
    seed: int | None = None
    epoch: int | None = None
    indices: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.matrix)

    @property
    def mask_matrix(self) -> np.ndarray:
        """The matrix for nearest-neighbour mask sampling (ties nudged one way for all)."""
        nudged = self.matrix.copy()
        nudged[:, :, 2] += MASK_NUDGE
        return nudged

    @property
    def box_matrix(self) -> np.ndarray:
        """float64 [B, 2, 3] input -> output maps of continuous coordinates (boxes).

        Boxes put pixel i on [i, i + 1], so pixel centres sit at i + 0.5: the forward map is
        T(+0.5) @ matrix^-1 @ T(-0.5), exact for every flip, shift, crop and zoom."""
        full = np.zeros((len(self.matrix), 3, 3))
        full[:, :2, :] = self.matrix
        full[:, 2, 2] = 1.0
        half = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
        back = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
        return np.ascontiguousarray((half @ np.linalg.inv(full) @ back)[:, :2, :])

    @property
    def has_colour(self) -> bool:
        """Whether the images get a colour change (masks never do)."""
        return self.brightness is not None or self.channel_shift is not None

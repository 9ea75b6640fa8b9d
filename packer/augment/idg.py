"""ImageDataGenerator's own parameter dicts as `AugmentParams`: the bridge its users cross.

`ImageDataGenerator.apply_transform(x, params)` takes a dict (theta, tx, ty, shear, zx, zy,
flips, channel_shift_intensity, brightness); `from_idg` gives the packer parameters that
warp the same way, so a tuned setting can be checked pixel against pixel.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from packer.augment.params import AugmentParams, affine, flips


def idg_matrix(transform_parameters: Mapping, image_hw: tuple[int, int]) -> np.ndarray:
    """The 3x3 output -> input pixel map ImageDataGenerator applies for this dict.

    Keras 3's apply_affine_transform swaps its matrix's axes before scipy sees it, so
    ``tx`` ends up moving columns (x) and ``ty`` rows (y), ``zx`` scaling x and ``zy`` y;
    flips come after the warp. For square images this is its matrix to the last bit; for
    others it rotates about the true centre where ImageDataGenerator's is off by
    (H - W) / 2.
    """
    p = transform_parameters

    def one(name: str, default: float) -> np.ndarray:
        value = p.get(name, default)
        return np.array([default if value is None else value], dtype=np.float64)

    m = affine(
        theta=one("theta", 0.0),
        shift_x=one("tx", 0.0),
        shift_y=one("ty", 0.0),
        shear=one("shear", 0.0),
        zoom_x=one("zx", 1.0),
        zoom_y=one("zy", 1.0),
        frame_hw=image_hw,
    )
    f = flips(
        np.array([bool(p.get("flip_horizontal", False))]),
        np.array([bool(p.get("flip_vertical", False))]),
        image_hw,
    )
    return (m @ f)[0]


def from_idg(
    transform_parameters: Mapping,
    image_hw: tuple[int, int],
    *,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    ignore_index: int = 255,
) -> AugmentParams:
    """One sample's `AugmentParams` from an ImageDataGenerator transform dict."""
    p = transform_parameters
    hw = (int(image_hw[0]), int(image_hw[1]))
    shift, bright = p.get("channel_shift_intensity"), p.get("brightness")
    return AugmentParams(
        matrix=idg_matrix(p, hw)[None, :2, :],
        in_hw=hw,
        out_hw=hw,
        brightness=None if bright is None else np.array([bright], np.float32),
        channel_shift=None if shift is None else np.array([shift], np.float32),
        fill_mode=fill_mode,
        cval=float(cval),
        ignore_index=ignore_index,
    )

"""What every executor takes and gives: image and mask dtypes, channel counts, value ranges.

One table for the NumPy/OpenCV, tf and torch executors, so that they accept, refuse, round
and clip alike. Packs keep images as their source has them (see docs/design.md, "Kept as
the source has it"), so augmentation works in the stored dtype and returns it:

- Images: uint8, uint16 or float32 ``[B, H, W, C]``, any ``C >= 1`` (grey, RGB, RGBA, RGBN,
  12-band...); the output has the input's dtype and channels. Integer images are rounded
  (half to even) and saturated to their dtype's range (0..255, 0..65535) after the warp and
  after each colour step, as uint8 images always were; float32 images are neither rounded
  nor clipped (a bilinear warp never leaves the input's own range anyway).
- Masks: uint8 or uint16 ``[B, H, W]`` of class indices, sampled nearest, never blended;
  ``ignore_index`` (what out-of-frame pixels become) must fit the masks' dtype.
- Colour and fill values are in the images' own units. ``channel_shift_range`` adds a value
  of the image's dtype: 10 is 10 counts of a uint8 image, 10 counts of a uint16 one (give
  2570 for the same share of its range) and 10.0 of a float32 one. Integer images get the
  shift rounded to a whole count; every dtype is then clipped to the image's own min..max
  (ImageDataGenerator's rule). ``brightness_range`` is a factor and has no unit. ``cval``
  is a pixel value of the image's dtype and must lie in its range.

Why the images' own units rather than uint8 units scaled by the dtype's maximum over 255:
ImageDataGenerator shifts and fills the numbers the array holds, whatever they are, and a
float32 image has no maximum to scale by (reflectance in 0..1, elevation in metres,
standardised values); own units mean one thing for every dtype and leave uint8 results
byte-identical (for uint8 the two readings coincide).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

IMAGE_DTYPES = ("uint8", "uint16", "float32")
MASK_DTYPES = ("uint8", "uint16")


def value_range(dtype: str | np.dtype) -> tuple[float, float] | None:
    """(low, high) integer images round and saturate to; None for float32 (no clipping)."""
    dt = np.dtype(dtype)
    if dt.kind == "u":
        return 0.0, float(np.iinfo(dt).max)
    return None


def check_images(dtype: str, shape: Sequence[int]) -> None:
    """Refuse images that are not uint8/uint16/float32 ``[B, H, W, C]`` with ``C >= 1``.

    ``shape`` may hold None for sizes a graph does not know yet (TensorFlow)."""
    shape = tuple(None if s is None else int(s) for s in shape)
    if dtype not in IMAGE_DTYPES or len(shape) != 4 or (shape[3] or 1) < 1:
        raise ValueError(
            f"images must be uint8, uint16 or float32 [B, H, W, C] with C >= 1, got {dtype} {shape}"
        )


def check_fill(cval: float, dtype: str) -> None:
    """Refuse a ``cval`` outside the range of images of ``dtype`` (it is in their units)."""
    bounds = value_range(dtype)
    if bounds is not None and not bounds[0] <= cval <= bounds[1]:
        raise ValueError(
            f"cval {cval:g} is outside the range of {dtype} images ({bounds[0]:g}..{bounds[1]:g}); "
            "cval is a pixel value in the images' own units"
        )


def check_masks(
    dtype: str, shape: Sequence[int], images_shape: Sequence[int], ignore_index: int
) -> None:
    """Refuse masks that are not uint8/uint16 ``[B, H, W]`` of the images, or whose dtype
    cannot hold ``ignore_index``."""
    shape, want = tuple(int(s) for s in shape), tuple(int(s) for s in images_shape[:3])
    if dtype not in MASK_DTYPES or shape != want:
        raise ValueError(
            f"masks must be uint8/uint16 [B, H, W] matching the images {want}, got {dtype} {shape}"
        )
    check_ignore(ignore_index, dtype)


def check_ignore(ignore_index: int, dtype: str) -> None:
    """Refuse masks of another dtype than uint8/uint16, or an ``ignore_index`` they cannot
    hold."""
    if dtype not in MASK_DTYPES:
        raise ValueError(f"masks must be uint8 or uint16 class indices, got {dtype}")
    top = int(np.iinfo(np.dtype(dtype)).max)
    if not 0 <= ignore_index <= top:
        raise ValueError(
            f"ignore_index {ignore_index} does not fit {dtype} masks (0..{top}): choose one "
            f"<= {top}, or pack the masks as uint16"
        )

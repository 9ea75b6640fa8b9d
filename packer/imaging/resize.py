"""Crop and resize decoded pixels: the filter choice, OpenCV's exact area average for integer
crop boxes, Pillow for the fractional boxes left by DCT-reduced JPEG decoding.

OpenCV's exact INTER_AREA for area (see
benchmarks/results/2026-11-26-decode-and-resize-backends.md).
Pillow's BOX counts each source pixel wholly in or out, so at fractional ratios it is no area
average (its pixels land off INTER_AREA's); exact area is worth its cost. Pillow does
nearest/linear/cubic/lanczos (antialiased when shrinking, unlike OpenCV's; one filter for every
format) and the fractional crop boxes left by DCT reduction (HAMMING for area).
"""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image

from .geometry import Geometry

_PILLOW_FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "linear": Image.Resampling.BILINEAR,
    "cubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    # "area" on a fractional box (after DCT reduction), where OpenCV's exact INTER_AREA
    # cannot go: Hamming is the Pillow filter measured closest to exact area, BOX the farthest.
    "hamming": Image.Resampling.HAMMING,
}
_FLOAT_AREA_MAX_PIXELS = 1 << 22  # area_resize's float32 route stays under 50 MB of copies
# Kept samples (16-bit, float, other band counts than grey and RGB) resize with OpenCV.
# "nearest" samples the source pixel under each output pixel's centre, as masks do.
_OPENCV_FILTERS = {
    "nearest": cv2.INTER_NEAREST_EXACT,
    "linear": cv2.INTER_LINEAR,
    "cubic": cv2.INTER_CUBIC,
    "lanczos": cv2.INTER_LANCZOS4,
    "area": cv2.INTER_AREA,
}
_OPENCV_BANDS = 4  # OpenCV's resize takes at most 4 channels for every filter


def interpolation_for(
    geometry: Geometry | None, crop: tuple[int, int, int, int], scaled: tuple[int, int]
) -> str:
    """The filter to use: auto is area unless a dimension enlarges, then cubic."""
    if geometry is not None and geometry.interpolation != "auto":
        return geometry.interpolation
    enlarges = scaled[0] > crop[2] - crop[0] or scaled[1] > crop[3] - crop[1]
    return "cubic" if enlarges else "area"


def crop_resize(
    pixels: np.ndarray,
    box: tuple[float, ...],
    scaled: tuple[int, int],
    interpolation: str,
) -> tuple[np.ndarray, str]:
    """Crop `box` (fractional after DCT reduction) and resize it to `scaled`, and how (the
    backend suffix: '' when no resize was needed). 8-bit grey and RGB as always; any other
    sample type or band count by OpenCV with the same filter, at most 4 bands at a time."""
    if not _picture(pixels):
        x0, y0, x1, y1 = (int(c) for c in box)
        region = pixels[y0:y1, x0:x1]
        if (x1 - x0, y1 - y0) == scaled:
            return region, ""
        return opencv_resize(region, scaled, interpolation), f"+opencv-{interpolation}"
    if all(float(c).is_integer() for c in box):
        x0, y0, x1, y1 = (int(c) for c in box)
        region = pixels[y0:y1, x0:x1]
        if (x1 - x0, y1 - y0) == scaled:
            return region, ""
        if interpolation == "area":
            return area_resize(region, scaled), "+opencv-area"
    name = "hamming" if interpolation == "area" else interpolation
    resized = Image.fromarray(pixels).resize(scaled, _PILLOW_FILTERS[name], box=box)
    return np.asarray(resized), f"+pillow-{name}"


def _picture(pixels: np.ndarray) -> bool:
    """8-bit grey or RGB: what Pillow and the uint8 area route take."""
    return pixels.dtype == np.uint8 and (pixels.ndim == 2 or pixels.shape[2] == 3)


def opencv_resize(pixels: np.ndarray, size: tuple[int, int], interpolation: str) -> np.ndarray:
    """`pixels` (`[H,W]` or `[H,W,C]`, any C, any sample type OpenCV resizes) resized to
    `size` (W, H) by `cv2.resize` with `interpolation`, bands in groups of at most 4; the
    result keeps the input's dimensions."""
    flag = _OPENCV_FILTERS[interpolation]
    if pixels.ndim == 2:
        return cv2.resize(pixels, size, interpolation=flag)
    groups = [
        cv2.resize(
            np.ascontiguousarray(pixels[..., i : i + _OPENCV_BANDS]), size, interpolation=flag
        )
        for i in range(0, pixels.shape[2], _OPENCV_BANDS)
    ]
    groups = [g[..., np.newaxis] if g.ndim == 2 else g for g in groups]
    return groups[0] if len(groups) == 1 else np.concatenate(groups, axis=2)


def area_resize(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8 `pixels` resized to `size` (W, H) by OpenCV's INTER_AREA, its pixels exactly.

    Shrinking by a fractional ratio, OpenCV's float32 INTER_AREA with both conversions gives
    the same pixels as its uint8 path, faster (identical on the hymenoptera crops to 224x224
    and on 800 random sizes; timings in benchmarks/results/). Integer ratios
    (a fast block average), enlargements (uint8 is fixed-point linear there, float32 is not)
    and crops over 4 MP (the float32 copy would cost 4x their memory) keep the uint8 path.
    """
    height, width = pixels.shape[:2]
    integer = width % size[0] == 0 and height % size[1] == 0
    shrinks = size[0] <= width and size[1] <= height
    if integer or not shrinks or width * height > _FLOAT_AREA_MAX_PIXELS:
        return cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    averaged = cv2.resize(pixels.astype(np.float32), size, interpolation=cv2.INTER_AREA)
    return cv2.convertScaleAbs(averaged)  # round half to even, saturate to 0..255

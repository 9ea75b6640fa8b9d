"""Where a source lands in the output: size and resize mode, the integer crop/scale/offset
they give, and the two steps that reuse it on pixels (mask resampling, padding to the canvas).

Pure arithmetic on sizes and arrays, no decoding, so that an image and its mask share one
`Placement` and stay pixel-aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESIZE_MODES = ("fill", "fit", "stretch", "none")
# A box side counts as at least `min_box_size` within this fraction of the box's largest
# coordinate: float32 coordinates carry 6e-8 of it, twice for a side; 80x that margin. Packing
# and the augmentation's box rule judge by it alike.
SIZE_SLACK = 1e-5
INTERPOLATIONS = ("auto", "area", "nearest", "linear", "cubic", "lanczos")


@dataclass(frozen=True)
class Geometry:
    """Output size (W, H), resize mode, image interpolation and image pad value."""

    size: tuple[int, int]
    mode: str = "fill"
    interpolation: str = "auto"
    pad_value: int = 0

    def __post_init__(self) -> None:
        """Validate once here so that the hot path never has to."""
        size = tuple(self.size)
        if len(size) != 2 or not all(isinstance(v, int | np.integer) and v > 0 for v in size):
            raise ValueError(f"size must be two positive integers (W, H), got {self.size!r}")
        object.__setattr__(self, "size", (int(size[0]), int(size[1])))
        if self.mode not in RESIZE_MODES:
            raise ValueError(f"resize mode must be one of {RESIZE_MODES}, got {self.mode!r}")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"interpolation must be one of {INTERPOLATIONS}, got {self.interpolation!r}"
            )
        if not 0 <= self.pad_value <= 255:
            raise ValueError(f"pad_value must be 0..255, got {self.pad_value!r}")


@dataclass(frozen=True)
class Placement:
    """Where a source of a given size lands in the output.

    The crop (x0, y0, x1, y1) of the full-resolution source, resized to `scaled` (w, h), is
    pasted at `offset` (x, y) in an output canvas of `size` (W, H).
    """

    crop: tuple[int, int, int, int]
    scaled: tuple[int, int]
    offset: tuple[int, int]
    size: tuple[int, int]


def place(source_size: tuple[int, int], geometry: Geometry) -> Placement:
    """Integer crop/scale/offset that maps a source of `source_size` onto the output canvas."""
    sw, sh = source_size
    if sw < 1 or sh < 1:
        raise ValueError(f"source size must be positive, got {source_size!r}")
    out_w, out_h = geometry.size
    full = (0, 0, sw, sh)
    if geometry.mode == "stretch":
        return Placement(full, geometry.size, (0, 0), geometry.size)
    if geometry.mode == "fill":
        return Placement(_fill_crop(sw, sh, out_w, out_h), geometry.size, (0, 0), geometry.size)
    if geometry.mode == "fit":
        scaled = _fit_size(sw, sh, out_w, out_h)
        return Placement(full, scaled, _centred(scaled, geometry.size), geometry.size)
    cw, ch = min(sw, out_w), min(sh, out_h)
    x0, y0 = (sw - cw) // 2, (sh - ch) // 2
    return Placement(
        (x0, y0, x0 + cw, y0 + ch), (cw, ch), _centred((cw, ch), geometry.size), geometry.size
    )


def identity(size: tuple[int, int]) -> Placement:
    """The placement that keeps a source of `size` exactly as it is."""
    return Placement((0, 0, *size), size, (0, 0), size)


def _rounded_ratio(a: int, b: int, c: int) -> int:
    """round(a * b / c), halves up, in exact integer arithmetic."""
    return (2 * a * b + c) // (2 * c)


def _fill_crop(sw: int, sh: int, out_w: int, out_h: int) -> tuple[int, int, int, int]:
    """The centred crop of the source that has the output's aspect ratio and is largest."""
    if out_w * sh >= out_h * sw:
        cw, ch = sw, max(1, min(sh, _rounded_ratio(sw, out_h, out_w)))
    else:
        cw, ch = max(1, min(sw, _rounded_ratio(sh, out_w, out_h))), sh
    x0, y0 = (sw - cw) // 2, (sh - ch) // 2
    return (x0, y0, x0 + cw, y0 + ch)


def _fit_size(sw: int, sh: int, out_w: int, out_h: int) -> tuple[int, int]:
    """The largest size with the source's aspect ratio that fits inside the output."""
    if out_w * sh <= out_h * sw:
        return (out_w, max(1, _rounded_ratio(sh, out_w, sw)))
    return (max(1, _rounded_ratio(sw, out_h, sh)), out_h)


def _centred(inner: tuple[int, int], outer: tuple[int, int]) -> tuple[int, int]:
    """Offset that centres `inner` in `outer` (floor when the margin is odd)."""
    return ((outer[0] - inner[0]) // 2, (outer[1] - inner[1]) // 2)


def resample_mask(values: np.ndarray, placement: Placement) -> np.ndarray:
    """Crop and nearest-neighbour resize to `placement.scaled`: never invents a value.

    Output pixel j samples the source pixel under its centre, x0 + floor((j + 0.5) * cw / w),
    the convention of Pillow's NEAREST and area filters, so masks stay aligned with images.
    Returns a view of `values` when no resampling is needed.
    """
    x0, y0, x1, y1 = placement.crop
    if values.shape[0] < y1 or values.shape[1] < x1:
        raise ValueError(
            f"mask is {values.shape[1]}x{values.shape[0]}, the crop {placement.crop} is outside it"
        )
    width, height = placement.scaled
    if (x1 - x0, y1 - y0) == (width, height):
        return values[y0:y1, x0:x1]
    rows = nearest_indices(y0, y1, height)
    cols = nearest_indices(x0, x1, width)
    return values.take(rows, axis=0).take(cols, axis=1)


def nearest_indices(start: int, stop: int, count: int) -> np.ndarray:
    """Source index under the centre of each of `count` output pixels spanning [start, stop)."""
    return start + ((2 * np.arange(count) + 1) * (stop - start)) // (2 * count)


def pad_to_canvas(array: np.ndarray, placement: Placement, value: int | float) -> np.ndarray:
    """Paste `array` (shape `scaled`) at `offset` on a `size` canvas of `value`; no copy if full."""
    width, height = placement.scaled
    if array.shape[:2] != (height, width):
        raise ValueError(f"array is {array.shape[1]}x{array.shape[0]}, expected {width}x{height}")
    if placement.scaled == placement.size:
        return array
    canvas_w, canvas_h = placement.size
    canvas = np.full((canvas_h, canvas_w, *array.shape[2:]), value, dtype=array.dtype)
    x, y = placement.offset
    canvas[y : y + height, x : x + width] = array
    return canvas

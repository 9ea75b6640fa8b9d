"""A field's value through the pack's geometry, by its kind's `geometry`: the generic work of
the packing hook (`FieldKind.place`), so that a kind nobody has seen is placed as the image is.

"pixels": a file's bytes decoded as images are (bit depth and bands kept), or an array
`[h, w]`/`[h, w, c]` of the image's source size, cropped, resized with the kind's
interpolation and padded as the image; "labels" and "planes": nearest neighbour, padded with
the ignore index (planes: 0); "boxes" and "points": coordinates moved as packed boxes are
(boxes clipped to the pasted area, points kept where they land); "none": the value as given.
Every value ends in its field's dtype without loss: one that does not fit is a ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ImageError
from ..imaging import Geometry, Placement, decode_image, decode_mask, pad_to_canvas
from ..imaging.geometry import identity, place, resample_mask
from ..imaging.resize import crop_resize

NO_PIXEL_LIMIT = 1 << 62


@dataclass(frozen=True)
class Frame:
    """Where a sample's values land: the image's source size (W, H) and placement (None
    when the sample has no image: a value is then placed by its own size), the pack's
    geometry (None: sizes kept), ignore index and pixel limit."""

    source_size: tuple[int, int] | None
    placement: Placement | None
    geometry: Geometry | None
    ignore_index: int = 255
    max_pixels: int = NO_PIXEL_LIMIT

    def placed(self, size: tuple[int, int]) -> Placement:
        """The placement of a value of source size `size` (W, H): the image's, whose size it
        must have, or its own."""
        if self.placement is not None:
            if size != self.source_size:
                w, h = self.source_size  # type: ignore[misc]
                raise ValueError(f"{size[0]}x{size[1]} pixels, the image is {w}x{h}")
            return self.placement
        return identity(size) if self.geometry is None else place(size, self.geometry)


def fitted(value, dtype: str) -> np.ndarray:
    """`value` as a C-ordered array of `dtype` without loss: integers in range (never
    wrapped), whole numbers for an integer dtype, finite numbers staying finite (a float
    dtype rounds to its precision); anything else is a ValueError."""
    array = np.asarray(value)
    target = np.dtype(dtype)
    if array.dtype == target:
        return np.asarray(array, order="C")
    if array.dtype.kind not in "biuf" or target.kind not in "biuf":
        raise ValueError(f"a {array.dtype} value, the field stores {target}")
    if target.kind in "biu" and array.size:
        if array.dtype.kind == "f" and not np.all(np.isfinite(array) & (array == np.round(array))):
            raise ValueError(f"values that are not whole numbers, the field stores {target}")
        low, high = (0, 1) if target.kind == "b" else (np.iinfo(target).min, np.iinfo(target).max)
        found_low, found_high = array.min().item(), array.max().item()
        if found_low < low or found_high > high:
            raise ValueError(f"values {found_low}..{found_high} do not fit {target}")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = array.astype(target)
    if target.kind == "f" and not np.array_equal(np.isfinite(cast), np.isfinite(array)):
        raise ValueError(f"values beyond the range of {target}")
    return np.asarray(cast, order="C")


def pixels(value, shape: tuple[int, ...], dtype: str, frame: Frame, interpolation: str):
    """A picture of `shape` (`[H, W]` or `[H, W, C]`): a file's bytes decoded as the image is
    (bands and bit depth kept), or an array of the image's source size; cropped, resized with
    `interpolation` and padded with the pack's pad value, as the image."""
    geometry = frame.geometry
    if isinstance(value, (bytes, bytearray, memoryview)):
        own = geometry and Geometry(geometry.size, geometry.mode, interpolation, geometry.pad_value)
        try:
            loaded = decode_image(bytes(value), own or None, frame.max_pixels)
        except ImageError as exc:
            raise ValueError(str(exc)) from None
        frame.placed(loaded.source_size)  # the image's size, or refused
        out = loaded.pixels
        if len(shape) == 2 and out.shape[2] == 1:
            out = out[..., 0]
        if out.dtype != np.dtype(dtype) or out.shape[2:] != tuple(shape[2:]):
            raise ValueError(
                f"{loaded.kind.describe()}, the field stores {np.dtype(dtype)} {list(shape)}"
            )
        return out
    array = fitted(value, dtype)
    if array.ndim not in (2, 3):
        raise ValueError(f"an array of shape {array.shape}, not [h, w] or [h, w, c]")
    placement = frame.placed((array.shape[1], array.shape[0]))
    out, _ = crop_resize(array, placement.crop, placement.scaled, interpolation)
    out = out.reshape(*out.shape[:2], *array.shape[2:])  # OpenCV drops a single band's axis
    pad = 0 if geometry is None else geometry.pad_value
    return np.ascontiguousarray(pad_to_canvas(out, placement, pad))


def labels(value, dtype: str, frame: Frame) -> np.ndarray:
    """A plane of class ids (an array, or a mask file's bytes read as indices): nearest
    neighbour, padded with the ignore index."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            mask = decode_mask(bytes(value), frame.max_pixels)
        except ImageError as exc:
            raise ValueError(str(exc)) from None
        if mask.kind != "index":
            raise ValueError(f"a {mask.kind} mask, a labels field takes class ids")
        value = mask.values
    array = fitted(value, dtype)
    if array.ndim != 2:
        raise ValueError(f"an array of shape {array.shape}, not [h, w]")
    placement = frame.placed((array.shape[1], array.shape[0]))
    placed = pad_to_canvas(resample_mask(array, placement), placement, frame.ignore_index)
    return np.ascontiguousarray(placed)


def planes(value, dtype: str, frame: Frame) -> np.ndarray:
    """Per object a plane, `[N, h, w]`: nearest neighbour, padded with 0."""
    array = fitted(value, dtype)
    if array.ndim != 3:
        raise ValueError(f"an array of shape {array.shape}, not [N, h, w]")
    placement = frame.placed((array.shape[2], array.shape[1]))
    stacked = np.moveaxis(array, 0, -1)
    placed = pad_to_canvas(resample_mask(stacked, placement), placement, 0)
    return np.ascontiguousarray(np.moveaxis(placed, -1, 0))


def coordinates(value, dtype: str, frame: Frame, boxes: bool) -> np.ndarray:
    """Rows `[N, ..., k]` whose last axis starts with x, y (boxes: x1, y1, x2, y2) in the
    image's continuous pixel coordinates, moved as its pixels are, in float64: (x - cx0) * w /
    cw + ox, as packed boxes are; boxes clipped to the pasted area. Other columns stay, but a
    point's third (its visibility) becomes 0 when it lands outside the pasted area."""
    array = np.asarray(value, np.float64)
    columns = 4 if boxes else 2
    if array.ndim < 2 or array.shape[-1] < columns:
        raise ValueError(f"rows of shape {array.shape[1:]}, need at least {columns} columns")
    placement = frame.placement
    if placement is None:
        raise ValueError("coordinates need a field of kind image whose pixels they are in")
    cx0, cy0, cx1, cy1 = placement.crop
    w, h = placement.scaled
    ox, oy = placement.offset
    pairs = columns // 2
    scale = np.array([w / (cx1 - cx0), h / (cy1 - cy0)] * pairs)
    shift = np.array([cx0, cy0] * pairs, np.float64)
    moved = array.copy()
    xy = (array[..., :columns] - shift) * scale + np.array([ox, oy] * pairs)
    if boxes:
        xy = np.clip(xy, np.array([ox, oy] * 2), np.array([ox + w, oy + h] * 2))
    moved[..., :columns] = xy
    if not boxes and array.shape[-1] >= 3:
        x, y = xy[..., 0], xy[..., 1]
        outside = (x < ox) | (x > ox + w) | (y < oy) | (y > oy + h)
        moved[..., 2] = np.where(outside, 0.0, moved[..., 2])
    target = np.dtype(dtype)
    return fitted(moved.astype(target) if target.kind == "f" else moved, dtype)

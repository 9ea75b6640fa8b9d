"""Mask bytes to exact label values: class ids, palette indices + palette, or RGB colours.

Masks are labels, not pictures: they are decoded as stored, never converted through grey and
never resized here (the converter resamples them with the image's `Placement`, nearest only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from ..errors import ImageError
from .decode import TO_RGB_MODES, UINT16_MODES, decode_spng, decoding, spng_format_of
from .orientation import orient
from .probe import DEFAULT_MAX_PIXELS, check_complete, open_lazy, probe


@dataclass(frozen=True)
class MaskPixels:
    """A decoded, oriented mask: class ids, palette indices (+ palette) or RGB colours."""

    values: np.ndarray
    kind: str
    palette: np.ndarray | None
    size: tuple[int, int]


def decode_mask(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> MaskPixels:
    """Decode one mask exactly from its file's bytes; bad or oversized data raises ImageError."""
    header, image = probe(data, max_pixels)
    check_complete(data, header.format)
    spng_format = spng_format_of(data) if header.format == "PNG" else None
    with decoding(header.format or "mask"):
        if spng_format:
            values = decode_spng(data, spng_format)
            kind, palette = ("index" if spng_format == "L" else "color"), None
        else:
            image = image or open_lazy(data, max_pixels)
            image.load()
            values, kind, palette = _mask_values(image)
    values = np.require(orient(values, header.orientation), requirements="CW")
    return MaskPixels(values, kind, palette, (values.shape[1], values.shape[0]))


def _mask_values(image: Image.Image) -> tuple[np.ndarray, str, np.ndarray | None]:
    """Pixel values of a loaded mask by mode, never converted through grey."""
    mode = image.mode
    if mode == "P":
        palette = np.array(image.getpalette("RGB"), np.uint8).reshape(-1, 3)
        return np.asarray(image), "palette", palette
    if mode == "L":
        return np.asarray(image), "index", None
    if mode == "LA":
        return np.asarray(image.getchannel(0)), "index", None
    if mode == "1":
        return np.asarray(image).astype(np.uint8), "index", None
    if mode in UINT16_MODES:
        return np.asarray(image).astype(np.uint16, copy=False), "index", None
    if mode == "I":
        return _int32_index(np.asarray(image)), "index", None
    if mode == "RGB":
        return np.asarray(image), "color", None
    if mode in TO_RGB_MODES:
        return np.asarray(image.convert("RGB")), "color", None
    raise ImageError(f"unsupported mask mode {mode!r} (not grey, palette or colour)")


def _int32_index(values: np.ndarray) -> np.ndarray:
    """32-bit integer class ids as uint16, refused when they do not fit."""
    low, high = int(values.min()), int(values.max())
    if low < 0 or high > 65535:
        raise ImageError(f"mask values {low}..{high} do not fit 16-bit class ids")
    return values.astype(np.uint16)

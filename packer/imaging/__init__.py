"""Decode, orient, crop and resize images and masks once: the converter's hot path.

Every input goes the same way, from its file's bytes (`decode_image`, `decode_mask`; imaging
opens no file: the caller reads the bytes through the storage seam): read format, size and
EXIF orientation from the header (`headers.py` for plain JPEG and PNG, else Pillow's lazy
open: `probe.py`); refuse it if it is over `max_pixels`; decode with the fastest correct
backend (`decode.py`); crop and resize in the stored orientation (`resize.py`), and
rotate/flip only the small result (`orientation.py`). Masks (`masks.py`) reuse the image's
`Placement` (`geometry.py`) with nearest-neighbour sampling, so image and mask stay
pixel-aligned.
"""

from __future__ import annotations

from ..errors import ImageError
from .backends import backend_versions
from .decode import LoadedImage, decode_image
from .geometry import (
    INTERPOLATIONS,
    RESIZE_MODES,
    Geometry,
    Placement,
    pad_to_canvas,
    place,
    resample_mask,
)
from .headers import Header, read_header
from .masks import MaskPixels, decode_mask
from .probe import DEFAULT_MAX_PIXELS, pillow_header
from .resize import area_resize

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "INTERPOLATIONS",
    "RESIZE_MODES",
    "Geometry",
    "Header",
    "ImageError",
    "LoadedImage",
    "MaskPixels",
    "Placement",
    "area_resize",
    "backend_versions",
    "decode_image",
    "decode_mask",
    "pad_to_canvas",
    "pillow_header",
    "place",
    "read_header",
    "resample_mask",
]

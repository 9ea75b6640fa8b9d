"""Decode an image or mask named by a local path: the one place imaging reads a file.

Everything else in `packer.imaging` works on bytes, so that a source can come from any
storage and the bytes decoded are the bytes hashed; these wrappers serve the callers that
still pass paths.
"""

from __future__ import annotations

import os

from ..errors import ImageError
from .decode import LoadedImage, decode_image
from .geometry import Geometry
from .masks import MaskPixels, decode_mask
from .probe import DEFAULT_MAX_PIXELS


def read_file(path: str | os.PathLike) -> bytes:
    """The whole file, read once; an unreadable file raises ImageError with the reason."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ImageError(f"cannot read file: {exc.strerror or exc}") from exc


def load_image(
    path: str | os.PathLike,
    geometry: Geometry | None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> LoadedImage:
    """`decode_image` of the file at `path`."""
    return decode_image(read_file(path), geometry, max_pixels)


def load_mask(path: str | os.PathLike, max_pixels: int = DEFAULT_MAX_PIXELS) -> MaskPixels:
    """`decode_mask` of the file at `path`."""
    return decode_mask(read_file(path), max_pixels)

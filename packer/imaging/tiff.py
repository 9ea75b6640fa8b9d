"""TIFF through tifffile: the header (size, sample type, bands, orientation) and the pixels as
stored, for what Pillow cannot keep: 16-bit and float samples, and more bands than RGB(A).

A TIFF of several full-size pages (a stack) is refused: packing its first page would drop the
others (reduced-resolution pages, a GeoTIFF's overviews, are not images of their own). Pillow
opens a 12-band TIFF as no image at all, reads RGB plus an unspecified extra sample
(near-infrared) as RGB, and truncates 16-bit colour; tifffile reads every sample type and band
count. Its messages go into the refusal's reason, never to the terminal (tifffile logs through
`logging`, which would print them on stderr). 8-bit photos (grey, palette, RGB, RGB + alpha,
CMYK) are still decoded by Pillow, as before, with libtiff's codecs.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..errors import ImageError
from .headers import Header

TIFF_MAGICS = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")  # classic and BigTIFF
_ORIENTATION_TAG = 274
_ALPHA = frozenset({1, 2})  # ExtraSamples: associated, unassociated alpha
_GREY, _RGB, _PALETTE, _CMYK, _YCBCR = (0, 1), 2, 3, 5, 6  # PhotometricInterpretation


@dataclass(frozen=True)
class TiffInfo:
    """What the first page of a TIFF holds, from its header alone."""

    header: Header
    dtype: np.dtype
    bands: int
    photo: bool  # an 8-bit picture Pillow converts to RGB as before (no band to lose)
    images: int  # full-size pages (reduced-resolution ones, overviews, are not counted)

    def check_single(self) -> None:
        """Refuse a stack: packing its first page would drop the others."""
        if self.images > 1:
            raise ImageError(
                f"the TIFF holds {self.images} full-size images (pages), packer packs one image "
                "a file: save an image's bands in one page (tifffile.imwrite(..., "
                "planarconfig='separate'), as GDAL writes them) or each page as its own file"
            )


def is_tiff(data: bytes) -> bool:
    return data[:4] in TIFF_MAGICS


@contextmanager
def _quiet(messages: list[str]) -> Iterator[None]:
    """tifffile's log messages collected into `messages` instead of printed."""

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger = logging.getLogger("tifffile")
    handler, propagate = Collect(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _reason(exc: BaseException, messages: list[str]) -> str:
    """tifffile's first logged complaint (the cause), else its exception's first line."""
    if messages:
        text = messages[0]
        return text.split("> ", 1)[1] if text.startswith("<") and "> " in text else text
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def tiff_info(data: bytes, max_pixels: int) -> TiffInfo:
    """The first page's header; ImageError with tifffile's reason when it cannot be read."""
    import tifffile

    messages: list[str] = []
    try:
        with _quiet(messages), tifffile.TiffFile(io.BytesIO(data)) as tif:
            page = tif.pages.first
            shape, axes = page.shape, page.axes
            dtype = np.dtype(page.dtype) if page.dtype is not None else None
            samples, photometric = int(page.samplesperpixel), int(page.photometric)
            extras = tuple(int(e) for e in page.extrasamples)
            tag = page.tags.get(_ORIENTATION_TAG)
            orientation = int(tag.value) if tag is not None else 1
            images = sum(not getattr(p, "is_reduced", False) for p in tif.pages)
    except Exception as exc:
        raise ImageError(f"unreadable TIFF: {_reason(exc, messages)}") from exc
    if dtype is None or "Y" not in axes or "X" not in axes:
        raise ImageError(f"unsupported TIFF layout: axes {axes!r}, sample type {dtype}")
    height, width = shape[axes.index("Y")], shape[axes.index("X")]
    if width * height > max_pixels:
        raise ImageError(
            f"image is {width}x{height} pixels, over the limit of {max_pixels:,} pixels"
        )
    photo = (dtype == np.uint8 or dtype == np.bool_) and _photo_layout(samples, photometric, extras)
    header = Header("TIFF", (int(width), int(height)), orientation if 1 <= orientation <= 8 else 1)
    return TiffInfo(header, dtype, samples, photo, images)


def _photo_layout(samples: int, photometric: int, extras: tuple[int, ...]) -> bool:
    """Grey, palette, RGB or YCbCr, CMYK, each with at most one alpha sample: a picture whose
    8-bit samples Pillow turns into RGB as before. Anything else holds bands to keep."""
    alpha = len(extras) == 1 and extras[0] in _ALPHA
    if photometric in _GREY or photometric == _PALETTE:
        return samples == 1 or (samples == 2 and alpha)
    if photometric in (_RGB, _YCBCR):
        return samples == 3 or (samples == 4 and alpha)
    return photometric == _CMYK and samples == 4 and extras == ()


def decode_tiff(data: bytes) -> np.ndarray:
    """The first page's samples as stored, `[H, W, bands]` (planar pages made interleaved)."""
    import tifffile

    messages: list[str] = []
    try:
        with _quiet(messages), tifffile.TiffFile(io.BytesIO(data)) as tif:
            page = tif.pages.first
            pixels, axes = page.asarray(), page.axes
    except Exception as exc:
        raise ImageError(f"cannot decode TIFF data: {_reason(exc, messages)}") from exc
    order = [axes.index(a) for a in "YX"] + [i for i, a in enumerate(axes) if a not in "YX"]
    pixels = pixels.transpose(order)
    pixels = pixels.reshape(*pixels.shape[:2], -1)
    return pixels.astype(pixels.dtype.newbyteorder("="), copy=False)

"""Image bytes to placed RGB pixels: the decode backends and the image entry point.

`decode_image` probes the header (`probe.py`), places the source (`geometry.py`), decodes with
the fastest correct backend, crops and resizes in the stored orientation (`resize.py`), and
rotates/flips only the small result (`orientation.py`). It never touches a file: callers hand
it the bytes, so that the same bytes can be read from any storage and hashed.

Backends, chosen by `benchmarks/bench_backends.py` (its tables:
benchmarks/results/2026-11-26-decode-and-resize-backends.md): libspng (pyspng) for 8-bit grey,
RGB and RGBA PNGs and 8-bit masks; OpenCV for JPEG (DCT-reduced while >= 2x is left, then
Pillow's HAMMING), BMP and WebP; Pillow for TIFF and GIF (their mode zoo and orientation) and
for the other masks (palette indices + palette, 1-bit, 16-bit). pyspng has libspng skip every
chunk CRC and zlib's Adler-32, so packer checks the chunk CRCs itself first: damaged pixel data
is refused, as libpng refuses it. For an APNG whose default image is not its first frame,
libspng (and Pillow) give the default image, OpenCV the first frame. OpenCV decodes straight to
RGB (IMREAD_COLOR_RGB: no BGR swap anywhere); 16-bit PNG keeps 16 bits (IMREAD_ANYDEPTH) for an
exact round(v / 257).

OpenCV 5 applies EXIF orientation inside `imdecode` (JPEG, PNG, WebP, TIFF; also in the
REDUCED modes, except for TIFF), so it is always called with IMREAD_IGNORE_ORIENTATION and the
orientation Pillow reads (EXIF, or XMP, as `ImageOps.exif_transpose` does) is applied here, once.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import cv2
import numpy as np
import pyspng
from PIL import Image

from ..errors import ImageError
from .geometry import Geometry, Placement, identity, pad_to_canvas, place
from .headers import Header
from .kinds import AUTO, PICTURE, Conversion, PixelKind
from .orientation import orient, oriented_size, stored_region
from .probe import DEFAULT_MAX_PIXELS, JPEG_FORMATS, check_complete, check_png_crcs, probe
from .resize import crop_resize, interpolation_for
from .tiff import decode_tiff, is_tiff, tiff_info

_OPENCV_FORMATS = JPEG_FORMATS | {"PNG", "BMP", "WEBP"}
_OPENCV_BASE = cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION
_OPENCV_REDUCED = {
    factor: _OPENCV_BASE | (getattr(cv2, f"IMREAD_REDUCED_COLOR_{factor}") & ~cv2.IMREAD_COLOR_BGR)
    for factor in (2, 4, 8)
}
_REDUCTIONS = (8, 4, 2)
_REDUCING_GAP = 2  # as Pillow's thumbnail(): DCT-reduce only while >= 2x is left to resize
# 8-bit PNG colour type -> libspng output (alpha dropped, as OpenCV's IMREAD_COLOR drops it).
# Palette, grey+alpha and 16-bit PNGs stay with OpenCV (images) and Pillow (masks).
_SPNG_FORMATS = {0: "L", 2: "RGB", 6: "RGB"}
_PNG_BIT_DEPTH, _PNG_COLOR_TYPE = 24, 25  # byte offsets when IHDR comes first, as it must
# Pillow modes that convert("RGB") / convert("L") turn into the colours as stored.
TO_RGB_MODES = frozenset({"P", "PA", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr"})
_TO_L_MODES = frozenset({"1", "LA"})
UINT16_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})
_KEPT_MODES = {**dict.fromkeys(UINT16_MODES, "uint16"), "F": "float32", "I": "int32"}
# PNG colour type -> bands as stored (grey, RGB, palette, grey + alpha, RGBA)
_PNG_BANDS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


@dataclass(frozen=True)
class LoadedImage:
    """A decoded, oriented, placed image, `[H, W, C]` as `Conversion` makes it (8-bit
    pictures: uint8 RGB), the kind of its source, and how it was made."""

    pixels: np.ndarray
    source_size: tuple[int, int]
    placement: Placement
    backend: str
    kind: PixelKind = PICTURE


def source_kind(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> PixelKind:
    """The kind of an image's samples from its header alone (nothing is decoded)."""
    return probe_kind(data, max_pixels)[2]


def probe_kind(data: bytes, max_pixels: int) -> tuple[Header, Image.Image | None, PixelKind]:
    """Header, Pillow's lazy image when Pillow was needed, and the kind of the samples."""
    if is_tiff(data):
        try:
            info = tiff_info(data, max_pixels)
        except ImageError as exc:
            header, image = _pillow_or(exc, data, max_pixels)  # a TIFF only Pillow reads
        else:
            info.check_single()
            if not info.photo:
                return info.header, None, PixelKind(info.dtype.name, info.bands)
            header, image = probe(data, max_pixels)
    else:
        header, image = probe(data, max_pixels)
    if header.format == "PNG" and data[12:16] == b"IHDR" and data[_PNG_BIT_DEPTH] == 16:
        return header, image, PixelKind("uint16", _PNG_BANDS[data[_PNG_COLOR_TYPE]])
    if image is not None and image.mode in _KEPT_MODES:
        return header, image, PixelKind(_KEPT_MODES[image.mode], 1)
    grey = header.format == "PNG" and spng_format_of(data) == "L"
    grey = grey or (image is not None and image.mode in ("L", "1", "LA"))
    return header, image, PixelKind("uint8", 1 if grey else 3, True)


def _pillow_or(
    error: ImageError, data: bytes, max_pixels: int
) -> tuple[Header, Image.Image | None]:
    """Pillow's header of a TIFF tifffile refused; tifffile's reason when Pillow fails too
    (Pillow's warnings about the damage are that reason's noise, not printed)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return probe(data, max_pixels)
    except ImageError:
        raise error from None


def decode_image(
    data: bytes,
    geometry: Geometry | None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    conversion: Conversion = AUTO,
) -> LoadedImage:
    """Decode, orient and place one image from its file's bytes, its bands and sample type
    as `conversion` asks; geometry None keeps the source size. Bad or oversized data, or a
    conversion the image cannot take, raises ImageError with the reason."""
    header, image, kind = probe_kind(data, max_pixels)
    conversion.output(kind)  # refuse before decoding what cannot be stored
    orientation = header.orientation
    source_size = oriented_size(header.size, orientation)
    placement = identity(source_size) if geometry is None else place(source_size, geometry)
    crop, scaled = stored_region(placement, source_size, orientation)
    interpolation = interpolation_for(geometry, crop, scaled)
    check_complete(data, header.format)
    reducible = header.format in JPEG_FORMATS and interpolation != "nearest"
    factor = _reduction(crop, scaled) if reducible else 1
    if kind.photo:
        decoded, backend = _decode(header.format, image, data, factor)
    else:
        decoded, backend = _decode_kept(header.format, image, data, kind.bands)
    box = tuple(c / factor for c in crop) if factor > 1 else crop
    pixels, resizer = crop_resize(decoded, box, scaled, interpolation)
    pixels = conversion.apply(pixels, kind)
    pixels = orient(pixels, orientation)
    if geometry is not None:
        pixels = pad_to_canvas(pixels, placement, geometry.pad_value)
    return LoadedImage(
        np.require(pixels, requirements="CW"), source_size, placement, backend + resizer, kind
    )


def _decode_kept(
    image_format: str | None, image: Image.Image | None, data: bytes, bands: int
) -> tuple[np.ndarray, str]:
    """Samples as stored, `[h, w]` or `[h, w, bands]`, of a source that is not an 8-bit
    picture: 16-bit PNG (libspng, RGB order, every band), TIFF (tifffile), Pillow's 16-bit,
    float and 32-bit integer modes. libspng gives 16-bit grey with an opaque alpha band (its
    GA16): only the `bands` the file holds are kept."""
    if image_format == "PNG":
        with decoding("PNG"):
            pixels = decode_spng(data, None)
        return (pixels[..., :bands] if pixels.ndim == 3 else pixels), "spng-decode"
    if image_format == "TIFF" and image is None:
        return decode_tiff(data), "tifffile-decode"
    with decoding(image_format or "image"):
        pillow = image or Image.open(io.BytesIO(data))
        pillow.load()
        pixels = np.asarray(pillow)
    return pixels.astype(pixels.dtype.newbyteorder("="), copy=False), "pillow-decode"


@contextmanager
def decoding(what: str) -> Iterator[None]:
    """Turn any decoder exception into ImageError: bad input must never crash the converter."""
    try:
        yield
    except ImageError:
        raise
    except Exception as exc:
        raise ImageError(f"cannot decode {what} data: {exc}") from exc


def _reduction(crop: tuple[int, int, int, int], scaled: tuple[int, int]) -> int:
    """Largest JPEG DCT scale-down (8, 4, 2) that still leaves at least a 2x resize to do.

    DCT scaling averages like a box; followed by a resize of under 2x it lands 2-3 grey
    levels (mean) from a full decode + exact area, with 2x left 0.4 (bench_backends.py).
    """
    for factor in _REDUCTIONS:
        limit = _REDUCING_GAP * factor
        if crop[2] - crop[0] >= limit * scaled[0] and crop[3] - crop[1] >= limit * scaled[1]:
            return factor
    return 1


def _decode(
    image_format: str | None, image: Image.Image | None, data: bytes, factor: int
) -> tuple[np.ndarray, str]:
    """Stored-orientation pixels, (h, w, 3) RGB or (h, w) grey uint8, and the decoder's name.

    `image`, Pillow's lazy image, is used only for the formats Pillow decodes; those never
    come through `read_header`, so it is there (opening it again would do no harm).
    """
    name = image_format or "image"
    with decoding(name):
        if name == "PNG" and (spng_format := spng_format_of(data)):
            pixels, backend = decode_spng(data, spng_format), "spng-decode"
        elif name in _OPENCV_FORMATS:
            pixels, backend = _decode_opencv(data, name, factor), "opencv-decode"
        else:
            pillow = image or Image.open(io.BytesIO(data))
            pixels, backend = _decode_pillow(pillow), "pillow-decode"
    if pixels is None:
        raise ImageError(f"cannot decode {name} data: corrupt or unsupported")
    return pixels, backend if factor == 1 else f"{backend}/{factor}x-reduced"


def spng_format_of(data: bytes) -> str | None:
    """libspng's output format for an 8-bit grey, RGB or RGBA PNG; None for the others."""
    if data[12:16] != b"IHDR" or data[_PNG_BIT_DEPTH] != 8:
        return None
    return _SPNG_FORMATS.get(data[_PNG_COLOR_TYPE])


def decode_spng(data: bytes, spng_format: str | None) -> np.ndarray:
    """libspng's pixels, once every chunk's CRC is known to match (pyspng skips the checks)."""
    check_png_crcs(data)
    return pyspng.load(data, spng_format)


def _decode_opencv(data: bytes, image_format: str, factor: int) -> np.ndarray | None:
    """OpenCV straight to RGB (no BGR swap), DCT-reduced by `factor`; 16-bit PNG scaled."""
    buffer = np.frombuffer(data, np.uint8)
    if image_format != "PNG":
        return cv2.imdecode(buffer, _OPENCV_REDUCED[factor] if factor > 1 else _OPENCV_BASE)
    pixels = cv2.imdecode(buffer, _OPENCV_BASE | cv2.IMREAD_ANYDEPTH)
    return _to_uint8(pixels) if pixels is not None and pixels.dtype == np.uint16 else pixels


def _decode_pillow(image: Image.Image) -> np.ndarray:
    """Pillow for every other format (GIF first frame, TIFF, ...), as RGB or grey."""
    image.load()
    return np.asarray(_rgb_or_grey(image))


def _rgb_or_grey(image: Image.Image) -> Image.Image:
    """An 8-bit 'RGB' or 'L' image with the colours as stored (alpha dropped, 16 bits scaled)."""
    mode = image.mode
    if mode in ("RGB", "L"):
        return image
    if mode in TO_RGB_MODES:
        return image.convert("RGB")
    if mode in _TO_L_MODES:
        return image.convert("L")
    if mode in UINT16_MODES:
        return Image.fromarray(_to_uint8(np.asarray(image)))
    raise ImageError(f"unsupported image mode {mode!r} (not 8/16-bit grey, palette or colour)")


def _to_uint8(values: np.ndarray) -> np.ndarray:
    """16-bit samples to 8-bit by round(v / 257), so that 65535 -> 255 exactly."""
    return ((values.astype(np.uint32) + 128) // 257).astype(np.uint8)

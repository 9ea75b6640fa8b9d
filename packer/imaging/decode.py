"""Decode, orient, crop and resize images and masks once: the converter's hot path.

Every input goes the same way: read the file's bytes once; read format, size and EXIF
orientation from the header (`headers.py` for plain JPEG and PNG, else Pillow's lazy
`Image.open`, which decodes nothing); refuse it if it is over `max_pixels`; decode with the
fastest correct backend; crop and resize in the stored orientation, and rotate/flip only the
small result. Masks reuse the image's `Placement` with nearest-neighbour sampling, so image
and mask stay pixel-aligned.

Backends, from `benchmarks/bench_backends.py` (ms per image on one core; OpenCV 5.0.0 against
Pillow-SIMD 12.1.1; CamVid 480x360 PNGs, hymenoptera JPEGs; a busy 2-core VM: read ratios):

    case                                  OpenCV  Pillow-SIMD  max|diff|  used
    PNG decode 480x360 RGB                 3.65      4.24         0      libspng (4)
    JPEG decode, full size                 1.83      2.65         0      OpenCV
    JPEG decode, DCT-reduced to 1/2        1.73      2.00         0      OpenCV
    BMP / WebP decode                 0.10 / 2.93  0.24 / 3.23    0      OpenCV
    TIFF / GIF decode                 0.28 / 5.68  0.41 / 1.68    0      Pillow (1)
    8-bit mask PNG decode                  0.42      0.51         0      libspng (2)
    area 480x352 -> 240x176 (2x)           0.11      0.20 BOX     1      OpenCV
    area 360x360 -> 224x224 (1.6x)         0.81      0.19 BOX    80      OpenCV (3)

    46 JPEGs, short side >= 448 -> 224x224 area      ms   mean|d|  max|d|  (d: vs full decode
    full decode + INTER_AREA                        4.67    0       0        + INTER_AREA)
    DCT-reduce while >= 1x is left, then BOX        2.85    3.08    140
    DCT-reduce while >= 2x is left, then HAMMING    3.01    0.40     23     used

(1) TIFF's mode zoo and OpenCV 5's own TIFF orientation handling; GIF is 3x faster in Pillow.
(2) libspng, as (4); other masks go to Pillow for its modes: palette indices + palette,
    1-bit, 16-bit.
(3) Pillow's BOX counts each source pixel wholly in or out, so at fractional ratios it is no
area average (mean 1.3-2.4 grey levels off INTER_AREA); exact area is worth 0.6 ms. Pillow
does nearest/linear/cubic/lanczos (antialiased when shrinking, unlike OpenCV's; one filter for
every format) and the fractional crop boxes left by DCT reduction (HAMMING for area).
(4) libspng (pyspng) decodes 8-bit grey, RGB and RGBA PNGs to the same pixels 1.4-1.7x faster
than OpenCV's libpng on CamVid (2.5-2.95 against 3.7-4.9 ms; its filters are vectorised);
palette, grey+alpha and 16-bit PNGs keep the paths above. pyspng has libspng skip every chunk
CRC and zlib's Adler-32, so packer checks the chunk CRCs itself first (0.09 ms per CamVid
image): damaged pixel data is refused, as libpng refuses it. For an APNG whose default image
is not its first frame, libspng (and Pillow) give the default image, OpenCV the first frame.
OpenCV decodes straight to RGB (IMREAD_COLOR_RGB: no BGR swap anywhere); 16-bit PNG keeps
16 bits (IMREAD_ANYDEPTH) for an exact round(v / 257).

OpenCV 5 applies EXIF orientation inside `imdecode` (JPEG, PNG, WebP, TIFF; also in the
REDUCED modes, except for TIFF), so it is always called with IMREAD_IGNORE_ORIENTATION and the
orientation Pillow reads (EXIF, or XMP, as `ImageOps.exif_transpose` does) is applied here, once.
"""

from __future__ import annotations

import importlib.metadata
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import cv2
import numpy as np
import PIL
import pyspng
from PIL import ExifTags, Image

from .errors import ImageError
from .headers import Header, png_chunks, png_crc_matches, read_header

RESIZE_MODES = ("fill", "fit", "stretch", "none")
INTERPOLATIONS = ("auto", "area", "nearest", "linear", "cubic", "lanczos")

# Pillow's own hard decompression-bomb limit (2 * Image.MAX_IMAGE_PIXELS, ~179 MP): Image.open
# refuses larger headers anyway unless the caller raises PIL.Image.MAX_IMAGE_PIXELS.
DEFAULT_MAX_PIXELS = 178_956_970

_PILLOW_FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "linear": Image.Resampling.BILINEAR,
    "cubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    # "area" on a fractional box (after DCT reduction), where OpenCV's exact INTER_AREA
    # cannot go: Hamming is the Pillow filter measured closest to exact area, BOX the farthest.
    "hamming": Image.Resampling.HAMMING,
}
_JPEG_FORMATS = frozenset({"JPEG", "MPO"})
_OPENCV_FORMATS = _JPEG_FORMATS | {"PNG", "BMP", "WEBP"}
_OPENCV_BASE = cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION
_OPENCV_REDUCED = {
    factor: _OPENCV_BASE | (getattr(cv2, f"IMREAD_REDUCED_COLOR_{factor}") & ~cv2.IMREAD_COLOR_BGR)
    for factor in (2, 4, 8)
}
_FLOAT_AREA_MAX_PIXELS = 1 << 22  # area_resize's float32 route stays under 50 MB of copies
_REDUCTIONS = (8, 4, 2)
_REDUCING_GAP = 2  # as Pillow's thumbnail(): DCT-reduce only while >= 2x is left to resize
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
# 8-bit PNG colour type -> libspng output (alpha dropped, as OpenCV's IMREAD_COLOR drops it).
# Palette, grey+alpha and 16-bit PNGs stay with OpenCV (images) and Pillow (masks).
_SPNG_FORMATS = {0: "L", 2: "RGB", 6: "RGB"}
_PNG_BIT_DEPTH, _PNG_COLOR_TYPE = 24, 25  # byte offsets when IHDR comes first, as it must
# EXIF orientation -> (transpose, flip left-right, flip top-bottom), applied in that order.
_ORIENTATIONS = {
    1: (False, False, False),
    2: (False, True, False),
    3: (False, True, True),
    4: (False, False, True),
    5: (True, False, False),
    6: (True, True, False),
    7: (True, True, True),
    8: (True, False, True),
}
# Pillow modes that convert("RGB") / convert("L") turn into the colours as stored.
_TO_RGB_MODES = frozenset({"P", "PA", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr"})
_TO_L_MODES = frozenset({"1", "LA"})
_UINT16_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})


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


@dataclass(frozen=True)
class LoadedImage:
    """A decoded, oriented, placed image: (H, W, 3) uint8 RGB and how it was made."""

    pixels: np.ndarray
    source_size: tuple[int, int]
    placement: Placement
    backend: str


@dataclass(frozen=True)
class MaskPixels:
    """A decoded, oriented mask: class ids, palette indices (+ palette) or RGB colours."""

    values: np.ndarray
    kind: str
    palette: np.ndarray | None
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


def _identity(size: tuple[int, int]) -> Placement:
    """The placement that keeps a source exactly as it is."""
    return Placement((0, 0, *size), size, (0, 0), size)


def load_image(
    path: str | os.PathLike,
    geometry: Geometry | None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> LoadedImage:
    """Decode, orient and place one image; geometry None keeps the source size."""
    data = _read(path)
    header, image = _header(data, max_pixels)
    orientation = header.orientation
    source_size = _oriented_size(header.size, orientation)
    placement = _identity(source_size) if geometry is None else place(source_size, geometry)
    crop, scaled = _stored_region(placement, source_size, orientation)
    interpolation = _interpolation(geometry, crop, scaled)
    _check_complete(data, header.format)
    reducible = header.format in _JPEG_FORMATS and interpolation != "nearest"
    factor = _reduction(crop, scaled) if reducible else 1
    decoded, backend = _decode(header.format, image, data, factor)
    box = tuple(c / factor for c in crop) if factor > 1 else crop
    pixels, resizer = _resize(decoded, box, scaled, interpolation)
    if pixels.ndim == 2:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_GRAY2RGB)
    pixels = _orient(pixels, orientation)
    if geometry is not None:
        pixels = pad_to_canvas(pixels, placement, geometry.pad_value)
    return LoadedImage(
        np.require(pixels, requirements="CW"), source_size, placement, backend + resizer
    )


def _read(path: str | os.PathLike) -> bytes:
    """The whole file: decoders and integrity checks all work on these bytes, read once."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ImageError(f"cannot read file: {exc.strerror or exc}") from exc
    if not data:
        raise ImageError("file is empty (0 bytes)")
    return data


def _header(data: bytes, max_pixels: int) -> tuple[Header, Image.Image | None]:
    """Format, stored size and orientation, and Pillow's lazy image when Pillow was needed.

    Plain JPEGs and PNGs are read by `headers.read_header` (0.04-0.12 ms less per image);
    everything else, and any image over a size limit (so that the refusal is worded as
    before), by Pillow.
    """
    header = read_header(data)
    if header is not None and header.size[0] * header.size[1] <= _pixel_limit(max_pixels):
        return header, None
    image = _open_header(data, max_pixels)
    return Header(image.format, image.size, _orientation(image)), image


def _pixel_limit(max_pixels: int) -> int:
    """The largest image the fast header read may pass: `max_pixels`, or Pillow's
    decompression-bomb warning threshold when that is lower (Pillow warns or refuses above)."""
    bomb = Image.MAX_IMAGE_PIXELS
    return max_pixels if bomb is None else min(max_pixels, bomb)


def _open_header(data: bytes, max_pixels: int) -> Image.Image:
    """Pillow's lazy image (header parsed, nothing decoded), refused if over `max_pixels`."""
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise ImageError(f"image is too large to decode safely: {exc}") from exc
    except Image.UnidentifiedImageError as exc:
        reason = f"not an image file, or its header is damaged (starts with {data[:16]!r})"
        raise ImageError(reason) from exc
    except Exception as exc:
        raise ImageError(f"unreadable image header: {exc}") from exc
    width, height = image.size
    if width * height > max_pixels:
        raise ImageError(
            f"image is {width}x{height} pixels, over the limit of {max_pixels:,} pixels"
        )
    return image


def _orientation(image: Image.Image) -> int:
    """EXIF orientation 1..8 from the header (1 when absent or unreadable); decodes nothing."""
    if image.format == "PNG" and "exif" not in image.info:
        return 1  # Pillow would decode the whole PNG looking for an eXIf chunk after the pixels
    try:
        value = image.getexif().get(ExifTags.Base.Orientation, 1)
    except Exception:  # a malformed EXIF block: show the pixels as stored, as viewers do
        return 1
    return value if value in _ORIENTATIONS else 1


def _oriented_size(stored: tuple[int, int], orientation: int) -> tuple[int, int]:
    """(W, H) as displayed: orientations 5..8 swap the stored width and height."""
    return (stored[1], stored[0]) if _ORIENTATIONS[orientation][0] else stored


def _stored_region(
    placement: Placement, oriented_size: tuple[int, int], orientation: int
) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """The placement's crop box and scaled size in stored (not yet oriented) coordinates."""
    transpose, flip_x, flip_y = _ORIENTATIONS[orientation]
    x0, y0, x1, y1 = placement.crop
    if flip_x:
        x0, x1 = oriented_size[0] - x1, oriented_size[0] - x0
    if flip_y:
        y0, y1 = oriented_size[1] - y1, oriented_size[1] - y0
    if transpose:
        return (y0, x0, y1, x1), (placement.scaled[1], placement.scaled[0])
    return (x0, y0, x1, y1), placement.scaled


def _orient(array: np.ndarray, orientation: int) -> np.ndarray:
    """Stored-orientation array as displayed (a view; callers make it contiguous)."""
    transpose, flip_x, flip_y = _ORIENTATIONS[orientation]
    if transpose:
        array = array.swapaxes(0, 1)
    if flip_x:
        array = array[:, ::-1]
    if flip_y:
        array = array[::-1]
    return array


def _interpolation(
    geometry: Geometry | None, crop: tuple[int, int, int, int], scaled: tuple[int, int]
) -> str:
    """The filter to use: auto is area unless a dimension enlarges, then cubic."""
    if geometry is not None and geometry.interpolation != "auto":
        return geometry.interpolation
    enlarges = scaled[0] > crop[2] - crop[0] or scaled[1] > crop[3] - crop[1]
    return "cubic" if enlarges else "area"


def _check_complete(data: bytes, image_format: str | None) -> None:
    """Refuse truncated JPEG/PNG data cheaply, before a decoder can half-fill an image."""
    if image_format in _JPEG_FORMATS and _jpeg_truncated(data):
        raise ImageError("truncated JPEG: the data ends before the end-of-image marker")
    if image_format == "PNG" and not data.endswith(_PNG_IEND) and data.rfind(b"IEND") < 0:
        raise ImageError("truncated PNG: the data ends before the IEND chunk")


def _jpeg_truncated(data: bytes) -> bool:
    """No EOI marker after the last start-of-scan (FFD9 cannot occur in entropy-coded data)."""
    return not data.endswith(b"\xff\xd9") and data.rfind(b"\xff\xd9") < data.rfind(b"\xff\xda")


@contextmanager
def _decoding(what: str) -> Iterator[None]:
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
    with _decoding(name):
        if name == "PNG" and (spng_format := _spng_format(data)):
            pixels, backend = _decode_spng(data, spng_format), "spng-decode"
        elif name in _OPENCV_FORMATS:
            pixels, backend = _decode_opencv(data, name, factor), "opencv-decode"
        else:
            pillow = image or Image.open(io.BytesIO(data))
            pixels, backend = _decode_pillow(pillow), "pillow-decode"
    if pixels is None:
        raise ImageError(f"cannot decode {name} data: corrupt or unsupported")
    return pixels, backend if factor == 1 else f"{backend}/{factor}x-reduced"


def _spng_format(data: bytes) -> str | None:
    """libspng's output format for an 8-bit grey, RGB or RGBA PNG; None for the others."""
    if data[12:16] != b"IHDR" or data[_PNG_BIT_DEPTH] != 8:
        return None
    return _SPNG_FORMATS.get(data[_PNG_COLOR_TYPE])


def _decode_spng(data: bytes, spng_format: str) -> np.ndarray:
    """libspng's pixels, once every chunk's CRC is known to match (pyspng skips the checks)."""
    _check_png_crcs(data)
    return pyspng.load(data, spng_format)


def _check_png_crcs(data: bytes) -> None:
    """Refuse a PNG any of whose chunks up to IEND fails its CRC-32."""
    for kind, offset, end in png_chunks(data):
        if not png_crc_matches(data, offset, end):
            name = kind.decode("latin-1")
            raise ImageError(f"corrupt PNG: the {name} chunk at byte {offset} fails its CRC check")
        if kind == b"IEND":
            return
    raise ImageError("truncated PNG: a chunk runs past the end of the data")


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


def _resize(
    pixels: np.ndarray,
    box: tuple[float, ...],
    scaled: tuple[int, int],
    interpolation: str,
) -> tuple[np.ndarray, str]:
    """Crop `box` (fractional after DCT reduction) and resize it to `scaled`, and how."""
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


def area_resize(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8 `pixels` resized to `size` (W, H) by OpenCV's INTER_AREA, its pixels exactly.

    Shrinking by a fractional ratio, OpenCV's float32 INTER_AREA with both conversions gives
    the same pixels as its uint8 path 1.2-1.5x faster (0.68-0.90 against 1.02-1.17 ms for the
    hymenoptera crops to 224x224; identical on those and on 800 random sizes). Integer ratios
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


def _rgb_or_grey(image: Image.Image) -> Image.Image:
    """An 8-bit 'RGB' or 'L' image with the colours as stored (alpha dropped, 16 bits scaled)."""
    mode = image.mode
    if mode in ("RGB", "L"):
        return image
    if mode in _TO_RGB_MODES:
        return image.convert("RGB")
    if mode in _TO_L_MODES:
        return image.convert("L")
    if mode in _UINT16_MODES:
        return Image.fromarray(_to_uint8(np.asarray(image)))
    raise ImageError(f"unsupported image mode {mode!r} (not 8/16-bit grey, palette or colour)")


def _to_uint8(values: np.ndarray) -> np.ndarray:
    """16-bit samples to 8-bit by round(v / 257), so that 65535 -> 255 exactly."""
    return ((values.astype(np.uint32) + 128) // 257).astype(np.uint8)


def load_mask(path: str | os.PathLike, max_pixels: int = DEFAULT_MAX_PIXELS) -> MaskPixels:
    """Decode one mask exactly: class ids, palette indices + palette, or RGB colours."""
    data = _read(path)
    header, image = _header(data, max_pixels)
    _check_complete(data, header.format)
    spng_format = _spng_format(data) if header.format == "PNG" else None
    with _decoding(header.format or "mask"):
        if spng_format:
            values = _decode_spng(data, spng_format)
            kind, palette = ("index" if spng_format == "L" else "color"), None
        else:
            image = image or _open_header(data, max_pixels)
            image.load()
            values, kind, palette = _mask_values(image)
    values = np.require(_orient(values, header.orientation), requirements="CW")
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
    if mode in _UINT16_MODES:
        return np.asarray(image).astype(np.uint16, copy=False), "index", None
    if mode == "I":
        return _int32_index(np.asarray(image)), "index", None
    if mode == "RGB":
        return np.asarray(image), "color", None
    if mode in _TO_RGB_MODES:
        return np.asarray(image.convert("RGB")), "color", None
    raise ImageError(f"unsupported mask mode {mode!r} (not grey, palette or colour)")


def _int32_index(values: np.ndarray) -> np.ndarray:
    """32-bit integer class ids as uint16, refused when they do not fit."""
    low, high = int(values.min()), int(values.max())
    if low < 0 or high > 65535:
        raise ImageError(f"mask values {low}..{high} do not fit 16-bit class ids")
    return values.astype(np.uint16)


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
    rows = _nearest_indices(y0, y1, height)
    cols = _nearest_indices(x0, x1, width)
    return values.take(rows, axis=0).take(cols, axis=1)


def _nearest_indices(start: int, stop: int, count: int) -> np.ndarray:
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


def backend_versions() -> dict[str, str]:
    """Versions of the decoders in use, and which distribution really provides PIL."""
    return {
        "opencv": cv2.__version__,
        "pillow": PIL.__version__,
        "pillow_flavour": _pillow_flavour(),
        "pyspng": pyspng.__version__,
    }


def _pillow_flavour() -> str:
    """'pillow-simd' or 'pillow': the installed distribution whose version is PIL's own."""
    for name in ("pillow-simd", "pillow"):
        try:
            if importlib.metadata.version(name) == PIL.__version__:
                return name
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"

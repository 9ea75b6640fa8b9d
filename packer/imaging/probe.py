"""What an image's bytes hold before any pixel is decoded, and whether they may be decoded.

Format, stored size and EXIF orientation come from `headers.read_header` for plain JPEG and
PNG, else from Pillow's lazy `Image.open`, which decodes nothing. Bytes that are empty, over
the pixel limit, truncated or (PNG) fail a chunk CRC are refused here, with the reason, before
a decoder can half-fill an image.
"""

from __future__ import annotations

import io

from PIL import ExifTags, Image

from ..errors import ImageError
from .headers import Header, png_chunks, png_crc_matches, read_header
from .orientation import ORIENTATIONS

# Pillow's own hard decompression-bomb limit (2 * Image.MAX_IMAGE_PIXELS, ~179 MP): Image.open
# refuses larger headers anyway unless the caller raises PIL.Image.MAX_IMAGE_PIXELS.
DEFAULT_MAX_PIXELS = 178_956_970

JPEG_FORMATS = frozenset({"JPEG", "MPO"})
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"


def probe(data: bytes, max_pixels: int) -> tuple[Header, Image.Image | None]:
    """Format, stored size and orientation, and Pillow's lazy image when Pillow was needed.

    Plain JPEGs and PNGs are read by `headers.read_header` (0.04-0.12 ms less per image);
    everything else, and any image over a size limit (so that the refusal is worded as
    before), by Pillow.
    """
    if not data:
        raise ImageError("file is empty (0 bytes)")
    header = read_header(data)
    if header is not None and header.size[0] * header.size[1] <= _pixel_limit(max_pixels):
        return header, None
    return pillow_header(data, max_pixels)


def pillow_header(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[Header, Image.Image]:
    """Pillow's answer for any format: the header, and the lazy image it was read from.

    Refused with ImageError when Pillow cannot identify the data or it is over `max_pixels`.
    """
    image = open_lazy(data, max_pixels)
    return Header(image.format, image.size, _orientation(image)), image


def _pixel_limit(max_pixels: int) -> int:
    """The largest image the fast header read may pass: `max_pixels`, or Pillow's
    decompression-bomb warning threshold when that is lower (Pillow warns or refuses above)."""
    bomb = Image.MAX_IMAGE_PIXELS
    return max_pixels if bomb is None else min(max_pixels, bomb)


def open_lazy(data: bytes, max_pixels: int) -> Image.Image:
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
    return value if value in ORIENTATIONS else 1


def check_complete(data: bytes, image_format: str | None) -> None:
    """Refuse truncated JPEG/PNG data cheaply, before a decoder can half-fill an image."""
    if image_format in JPEG_FORMATS and _jpeg_truncated(data):
        raise ImageError("truncated JPEG: the data ends before the end-of-image marker")
    if image_format == "PNG" and not data.endswith(_PNG_IEND) and data.rfind(b"IEND") < 0:
        raise ImageError("truncated PNG: the data ends before the IEND chunk")


def _jpeg_truncated(data: bytes) -> bool:
    """No EOI marker after the last start-of-scan (FFD9 cannot occur in entropy-coded data)."""
    return not data.endswith(b"\xff\xd9") and data.rfind(b"\xff\xd9") < data.rfind(b"\xff\xda")


def check_png_crcs(data: bytes) -> None:
    """Refuse a PNG any of whose chunks up to IEND fails its CRC-32 (for decoders that skip it)."""
    for kind, offset, end in png_chunks(data):
        if not png_crc_matches(data, offset, end):
            name = kind.decode("latin-1")
            raise ImageError(f"corrupt PNG: the {name} chunk at byte {offset} fails its CRC check")
        if kind == b"IEND":
            return
    raise ImageError("truncated PNG: a chunk runs past the end of the data")

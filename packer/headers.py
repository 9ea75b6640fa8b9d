"""Format, stored size and EXIF orientation of plain JPEG and PNG files, read from their bytes.

Pillow's lazy `Image.open` parses every marker (quantisation tables, every APP segment) and
builds an image object: 0.06 ms of the 2.1 ms a hymenoptera JPEG takes to load, 0.04 ms of a
CamVid image + mask pair; the converter needs three facts, which this reads in 0.004 ms.
Anything it does not fully understand (XMP, which Pillow also searches for an orientation; a
PNG eXIf chunk; an odd EXIF entry; a damaged header) returns None, and the caller asks Pillow
as before, so the answers are Pillow's whenever this gives one (all 946 JPEGs and PNGs of the
shared sample datasets it reads agree).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_JPEG_SOI = b"\xff\xd8\xff"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Start-of-frame markers (baseline, extended, progressive, lossless; Huffman and arithmetic).
_JPEG_SOF = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RST0-7: no length field
_JPEG_UNEXPECTED = frozenset({0xD8, 0xD9})  # SOI, EOI before the first scan
_JPEG_SOS, _JPEG_APP1 = 0xDA, 0xE1
_EXIF_PREFIX = b"Exif\x00\x00"
_XMP_PREFIX = b"http://ns.adobe.com/xap/1.0/\x00"
_ORIENTATION_TAG, _SHORT = 0x0112, 3
# Bit depths PNG allows per colour type (Pillow refuses the other pairs).
_PNG_DEPTHS = {0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}


@dataclass(frozen=True)
class Header:
    """What decoding needs to know before it starts."""

    format: str | None  # as Pillow names it; here "JPEG" (an MPO is read as its JPEG) or "PNG"
    size: tuple[int, int]  # (W, H) as stored, before EXIF orientation
    orientation: int  # EXIF orientation, 1 when absent


def read_header(data: bytes) -> Header | None:
    """The header of a plain JPEG or PNG; None for other formats and anything unusual."""
    try:
        if data.startswith(_JPEG_SOI):
            return _jpeg_header(data)
        if data.startswith(_PNG_SIGNATURE):
            return _png_header(data)
    except (struct.error, IndexError):  # a length field pointing past the data
        return None
    return None


def _jpeg_header(data: bytes) -> Header | None:
    """Walk the markers up to the start of scan, as Pillow does: SOF size, first EXIF."""
    pos, size, orientation = 2, None, 1
    seen_exif = False
    while True:
        if data[pos] != 0xFF:
            return None
        while data[pos] == 0xFF:  # fill bytes
            pos += 1
        marker = data[pos]
        pos += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in _JPEG_UNEXPECTED or marker < 0xC0:  # Pillow or libjpeg refuse these
            return None
        (length,) = struct.unpack_from(">H", data, pos)
        if length < 2 or pos + length > len(data):
            return None
        segment = data[pos + 2 : pos + length]
        pos += length
        if marker == _JPEG_SOS:
            break
        if marker in _JPEG_SOF:
            height, width = struct.unpack_from(">HH", segment, 1)
            size = (width, height)
        elif marker == _JPEG_APP1 and segment.startswith(_XMP_PREFIX):
            return None  # Pillow takes an orientation from XMP when EXIF has none
        elif marker == _JPEG_APP1 and segment.startswith(_EXIF_PREFIX) and not seen_exif:
            seen_exif = True
            orientation = _exif_orientation(segment[len(_EXIF_PREFIX) :])
            if orientation is None:
                return None
    if size is None or 0 in size:
        return None
    return Header("JPEG", size, orientation)


def _exif_orientation(tiff: bytes) -> int | None:
    """IFD0's orientation (1 when the tag is absent or out of 1..8); None if unusual."""
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or struct.unpack_from(order + "H", tiff, 2)[0] != 42:
        return None
    (ifd,) = struct.unpack_from(order + "I", tiff, 4)
    (count,) = struct.unpack_from(order + "H", tiff, ifd)
    if ifd + 2 + 12 * count > len(tiff):
        return None
    found = []
    for k in range(count):
        tag, kind, values = struct.unpack_from(order + "HHI", tiff, ifd + 2 + 12 * k)
        if tag == _ORIENTATION_TAG:
            found.append((kind, values, struct.unpack_from(order + "H", tiff, ifd + 10 + 12 * k)))
    if not found:
        return 1
    if len(found) > 1 or found[0][:2] != (_SHORT, 1):
        return None
    value = found[0][2][0]
    return value if 1 <= value <= 8 else 1


def _png_header(data: bytes) -> Header | None:
    """IHDR size; orientation 1 unless an eXIf chunk comes before the pixels (then None)."""
    length, kind = struct.unpack_from(">I4s", data, 8)
    if kind != b"IHDR" or length != 13:
        return None
    width, height, depth, colour = struct.unpack_from(">IIBB", data, 16)
    if width == 0 or height == 0 or depth not in _PNG_DEPTHS.get(colour, ()):
        return None
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind == b"IDAT":
            return Header("PNG", (width, height), 1)
        if kind == b"eXIf":
            return None
        pos += 12 + length
    return None

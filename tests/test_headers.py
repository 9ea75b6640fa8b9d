"""packer.headers: the fast JPEG/PNG header reader gives Pillow's answers, or none at all."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from PIL import Image

from packer.headers import Header, read_header
from packer.imaging import ImageError, _open_header, _orientation, load_image

from .corpus import encoded, png_chunk

ORIENTATION = 0x0112


def pillow_header(data: bytes) -> Header:
    """What the converter used before: Pillow's lazy open and its EXIF orientation."""
    image = _open_header(data, 1 << 40)
    fmt = "JPEG" if image.format == "MPO" else image.format
    return Header(fmt, image.size, _orientation(image))


def picture(width: int = 48, height: int = 32) -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def tiff_block(order: str, entries: list[tuple[int, int, int, int]]) -> bytes:
    """A minimal EXIF TIFF block: header and IFD0 with (tag, type, count, value) entries."""
    head = (b"II" if order == "<" else b"MM") + struct.pack(order + "HI", 42, 8)
    ifd = struct.pack(order + "H", len(entries))
    for tag, kind, count, value in entries:
        field = (
            struct.pack(order + "H", value) + b"\0\0"
            if kind == 3
            else struct.pack(order + "I", value)
        )
        ifd += struct.pack(order + "HHI", tag, kind, count) + field
    return head + ifd + struct.pack(order + "I", 0)


def jpeg_with_app1(payload: bytes) -> bytes:
    """A JPEG with one extra APP1 segment right after SOI."""
    data = encoded(picture(), "JPEG", quality=90)
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    return data[:2] + segment + data[2:]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("orientation", [0, *range(1, 9), 9])
def test_jpeg_exif_orientation_matches_pillow(order, orientation):
    tiff = tiff_block(order, [(0x010F, 3, 1, 7), (ORIENTATION, 3, 1, orientation)])
    data = jpeg_with_app1(b"Exif\x00\x00" + tiff)
    header = read_header(data)
    assert header == pillow_header(data)
    assert header.orientation == (orientation if 1 <= orientation <= 8 else 1)
    assert header.size == (48, 32)


def test_pillow_written_exif_and_progressive_jpegs_match_pillow():
    exif = Image.Exif()
    exif[ORIENTATION] = 6
    for data in (
        encoded(picture(50, 20), "JPEG", exif=exif),
        encoded(picture(50, 20), "JPEG", progressive=True),
        encoded(picture(50, 20).convert("L"), "JPEG"),
    ):
        assert read_header(data) == pillow_header(data)


def test_jpeg_without_exif_is_upright():
    data = encoded(picture(), "JPEG")
    assert read_header(data) == Header("JPEG", (48, 32), 1)


@pytest.mark.parametrize(
    "entries",
    [
        [(ORIENTATION, 4, 1, 6)],  # a LONG, not a SHORT
        [(ORIENTATION, 3, 2, 6)],  # two values
        [(ORIENTATION, 3, 1, 6), (ORIENTATION, 3, 1, 3)],  # the tag twice
    ],
)
def test_unusual_exif_entries_are_left_to_pillow(entries):
    assert read_header(jpeg_with_app1(b"Exif\x00\x00" + tiff_block("<", entries))) is None


def test_xmp_is_left_to_pillow():
    # Pillow reads an orientation from XMP when EXIF has none.
    xmp = b'http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta tiff:Orientation="6"/>'
    data = jpeg_with_app1(xmp)
    assert read_header(data) is None
    assert pillow_header(data).orientation == 6


def test_damaged_headers_give_no_answer():
    data = encoded(picture(), "JPEG")
    assert read_header(data[:40]) is None  # cut inside the segments
    assert read_header(data[:2] + b"\xff\xe1\xff\xff" + data[2:]) is None  # length past the end
    assert read_header(jpeg_with_app1(b"Exif\x00\x00XX*\x00")) is None  # bad byte order
    assert read_header(b"\xff\xd8\xff\xd9") is None  # no frame before the end
    reserved = data[:2] + b"\xff\x05\x00\x04ab" + data[2:]
    assert read_header(reserved) is None  # a reserved marker: Pillow refuses the file
    with pytest.raises(ImageError, match="header is damaged"):
        pillow_header(reserved)


def test_png_header_matches_pillow_for_every_mode():
    for image in (
        picture(),
        picture().convert("L"),
        picture().convert("P"),
        picture().convert("RGBA"),
    ):
        data = encoded(image, "PNG")
        assert read_header(data) == pillow_header(data) == Header("PNG", (48, 32), 1)
    grey16 = encoded(Image.fromarray(np.full((5, 7), 40000, np.uint16)), "PNG")
    assert read_header(grey16) == pillow_header(grey16) == Header("PNG", (7, 5), 1)


def test_png_exif_chunk_is_left_to_pillow():
    exif = Image.Exif()
    exif[ORIENTATION] = 8
    data = encoded(picture(), "PNG", exif=exif)
    assert read_header(data) is None
    assert pillow_header(data).orientation == 8


def test_png_with_an_invalid_bit_depth_is_left_to_pillow():
    data = bytearray(encoded(picture(), "PNG"))
    data[24] = 3  # RGB at 3 bits: Pillow refuses it with its own message
    assert read_header(bytes(data)) is None


def test_other_formats_are_left_to_pillow():
    for fmt in ("GIF", "BMP", "TIFF", "WEBP"):
        assert read_header(encoded(picture(), fmt)) is None
    assert read_header(b"") is None


def test_png_without_idat_gives_no_answer():
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    assert read_header(b"\x89PNG\r\n\x1a\n" + ihdr + png_chunk(b"IEND", b"")) is None


def test_pillow_still_reads_what_the_fast_reader_declines(tmp_path):
    """The converter falls back to Pillow: an over-limit JPEG is refused as before."""
    path = tmp_path / "big.jpg"
    path.write_bytes(encoded(picture(), "JPEG"))
    with pytest.raises(ImageError, match="over the limit of 1,000 pixels"):
        load_image(path, None, max_pixels=1000)


def test_what_pillow_refuses_in_a_header_gets_no_answer():
    data = encoded(picture(), "JPEG")
    dqt = data.index(b"\xff\xdb")
    short_table = data[:dqt] + b"\xff\xdb\x00\x12" + bytes(16) + data[dqt:]  # 16 of 64 values
    sof = data.index(b"\xff\xc0")
    twelve_bit = data[: sof + 4] + b"\x0c" + data[sof + 5 :]
    extension = data[:2] + b"\xff\xf0" + data[2:]  # JPG0, which Pillow reads without a length
    text = png_chunk(b"tEXt", b"k\x00v")
    png = encoded(picture(), "PNG")
    bad_crc = png[:33] + text[:-1] + bytes([text[-1] ^ 1]) + png[33:]  # after IHDR
    for damaged in (short_table, twelve_bit, bad_crc):
        assert read_header(damaged) is None
        with pytest.raises(ImageError):
            pillow_header(damaged)
    assert read_header(extension) is None  # left to Pillow, which skips it
    assert read_header(png[:33] + text + png[33:]) == Header("PNG", (48, 32), 1)


def test_answers_on_randomly_damaged_headers_are_pillows():
    """Bytes flipped, inserted or cut in the first 3 KB: any answer given is Pillow's answer."""
    exif = tiff_block(">", [(0x010F, 2, 12, 26), (ORIENTATION, 3, 1, 6)]) + b"Camera name\x00"
    seeds = [
        jpeg_with_app1(b"Exif\x00\x00" + exif),
        jpeg_with_app1(b"Exif\x00\x00" + tiff_block("<", [(ORIENTATION, 3, 1, 3)])),
        encoded(picture(), "JPEG", progressive=True),
        encoded(picture().convert("L"), "JPEG"),
        encoded(picture(), "PNG"),
        encoded(picture().convert("P"), "PNG"),
    ]
    rng = np.random.default_rng(0)
    answered = 0
    for _ in range(3000):
        data = bytearray(seeds[rng.integers(len(seeds))])
        at = int(rng.integers(2, min(len(data), 3000)))
        kind = rng.random()
        if kind < 0.7:
            data[at] = int(rng.integers(256))
        elif kind < 0.85:
            del data[at:]
        else:
            data[at:at] = rng.integers(0, 256, int(rng.integers(1, 8)), dtype=np.uint8).tobytes()
        header = read_header(bytes(data))
        if header is not None:
            answered += 1
            assert header == pillow_header(bytes(data)), bytes(data[:64]).hex()
    assert answered > 1000

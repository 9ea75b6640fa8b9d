"""packer.imaging.headers: the fast JPEG/PNG header read gives Pillow's answers, or none."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from packer.imaging import Header, ImageError, decode_image, pillow_header, read_header
from tests.fixtures.corpus import encoded, png_chunk

ORIENTATION = 0x0112


def pillow_answer(data: bytes) -> Header:
    """What the converter used before: Pillow's lazy open and its EXIF orientation."""
    return pillow_header(data, 1 << 40)[0]


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


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg_with(*segments: bytes) -> bytes:
    """A JPEG with extra segments right after SOI."""
    data = encoded(picture(), "JPEG", quality=90)
    return data[:2] + b"".join(segments) + data[2:]


def jpeg_before_scan(*segments: bytes) -> bytes:
    """A JPEG with extra segments right before its start of scan."""
    data = encoded(picture(), "JPEG", quality=90)
    scan = data.index(b"\xff\xda")
    return data[:scan] + b"".join(segments) + data[scan:]


def with_frame(frame: bytes) -> bytes:
    """A JPEG whose start-of-frame segment is replaced by `frame`."""
    data = encoded(picture(), "JPEG", quality=90)
    sof = data.index(b"\xff\xc0")
    end = sof + 2 + int.from_bytes(data[sof + 2 : sof + 4], "big")
    return data[:sof] + segment(0xC0, frame) + data[end:]


def jpeg_with_app1(payload: bytes) -> bytes:
    return jpeg_with(segment(0xE1, payload))


def png_with(*chunks: bytes, image: Image.Image | None = None) -> bytes:
    """A PNG with extra chunks right after IHDR."""
    data = encoded(image or picture(), "PNG")
    return data[:33] + b"".join(chunks) + data[33:]


def exif(*entries: tuple[int, int, int, int], order: str = "<") -> bytes:
    return b"Exif\x00\x00" + tiff_block(order, list(entries))


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("orientation", [0, *range(1, 9), 9])
def test_jpeg_exif_orientation_matches_pillow(order, orientation):
    tiff = tiff_block(order, [(0x010F, 3, 1, 7), (ORIENTATION, 3, 1, orientation)])
    data = jpeg_with_app1(b"Exif\x00\x00" + tiff)
    header = read_header(data)
    assert header == pillow_answer(data)
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
        assert read_header(data) == pillow_answer(data)


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
    assert pillow_answer(data).orientation == 6


def test_damaged_headers_give_no_answer():
    data = encoded(picture(), "JPEG")
    assert read_header(data[:40]) is None  # cut inside the segments
    assert read_header(data[:2] + b"\xff\xe1\xff\xff" + data[2:]) is None  # length past the end
    assert read_header(jpeg_with_app1(b"Exif\x00\x00XX*\x00")) is None  # bad byte order
    assert read_header(b"\xff\xd8\xff\xd9") is None  # no frame before the end
    reserved = data[:2] + b"\xff\x05\x00\x04ab" + data[2:]
    assert read_header(reserved) is None  # a reserved marker: Pillow refuses the file
    with pytest.raises(ImageError, match="header is damaged"):
        pillow_answer(reserved)


def test_png_header_matches_pillow_for_every_mode():
    for image in (
        picture(),
        picture().convert("L"),
        picture().convert("P"),
        picture().convert("RGBA"),
    ):
        data = encoded(image, "PNG")
        assert read_header(data) == pillow_answer(data) == Header("PNG", (48, 32), 1)
    grey16 = encoded(Image.fromarray(np.full((5, 7), 40000, np.uint16)), "PNG")
    assert read_header(grey16) == pillow_answer(grey16) == Header("PNG", (7, 5), 1)


def test_png_exif_chunk_is_left_to_pillow():
    exif = Image.Exif()
    exif[ORIENTATION] = 8
    data = encoded(picture(), "PNG", exif=exif)
    assert read_header(data) is None
    assert pillow_answer(data).orientation == 8


def test_png_with_an_invalid_bit_depth_is_left_to_pillow():
    data = encoded(picture(), "PNG")
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 48, 32, 3, 2, 0, 0, 0))  # RGB at 3 bits
    damaged = data[:8] + ihdr + data[33:]
    assert read_header(damaged) is None
    with pytest.raises(ImageError):
        pillow_answer(damaged)


MPO = io.BytesIO()
picture().save(MPO, "MPO", save_all=True, append_images=[picture(24, 16)])
SHORT_SOF = bytes([8, 0, 32, 0, 48, 3, 1, 0x22])  # three components, the first cut short
FRAME_20x10 = bytes([8, 0, 10, 0, 20, 1, 1, 0x11, 0])
ANSWERED_BY_PILLOW = {  # declined: Pillow's answer differs, or needs more than this reads
    "PNG tEXt keyed exif": png_with(png_chunk(b"tEXt", b"exif\x00" + exif((ORIENTATION, 3, 1, 6)))),
    "PNG second IHDR": png_with(png_chunk(b"IHDR", struct.pack(">IIBBBBB", 10, 20, 8, 2, 0, 0, 0))),
    "JPEG DHP before the scan": jpeg_before_scan(segment(0xDE, FRAME_20x10)),
    "JPEG second EXIF block": jpeg_with(
        segment(0xE1, exif()), segment(0xE1, exif((ORIENTATION, 3, 1, 6)))
    ),
    "JPEG second frame": jpeg_before_scan(segment(0xC0, FRAME_20x10)),
    "MPO": MPO.getvalue(),
    "CMYK JPEG": encoded(picture().convert("CMYK"), "JPEG"),
    "EXIF value past the end": jpeg_with_app1(exif((0x010F, 2, 40, 26), (ORIENTATION, 3, 1, 6))),
    "EXIF LONG orientation": jpeg_with_app1(exif((ORIENTATION, 4, 1, 6))),
    "chunk name with a digit": png_with(png_chunk(b"ab1c", b"")),
    "IEND before IDAT": png_with(png_chunk(b"IEND", b"")),
}
REFUSED_BY_PILLOW = {  # declined: Pillow's open raises, the file is refused as before
    "short JFIF": jpeg_with(segment(0xE0, b"JFIF\x00\x01")),
    "Adobe APP14": jpeg_with(segment(0xEE, b"Adobe")),
    "Photoshop APP13": jpeg_with(segment(0xED, b"Photoshop 3.0\x008BIM\x04\x04")),
    "short ICC fragment": jpeg_with(segment(0xE2, b"ICC_PROFILE\x00")),
    "frame cut short": with_frame(SHORT_SOF),
    "EXIF resolution as a byte": jpeg_with_app1(exif((0x0128, 3, 1, 2), (0x011A, 1, 1, 5))),
    "empty sRGB": png_with(png_chunk(b"sRGB", b"")),
    "short pHYs": png_with(png_chunk(b"pHYs", b"\x00" * 5)),
    "empty gAMA": png_with(png_chunk(b"gAMA", b"")),
    "cHRM of 3 bytes": png_with(png_chunk(b"cHRM", b"abc")),
    "IHDR filter method 1": encoded(picture(), "PNG")[:8]
    + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 48, 32, 8, 2, 0, 1, 0))
    + encoded(picture(), "PNG")[33:],
}


DECLINED = {**ANSWERED_BY_PILLOW, **REFUSED_BY_PILLOW}


@pytest.mark.parametrize("name", DECLINED)
def test_layouts_off_the_list_are_left_to_pillow(name):
    assert read_header(DECLINED[name]) is None


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow on the cut-off EXIF value
def test_declined_layouts_are_ones_pillow_reads_differently_or_refuses():
    """The cases above matter: each would be a wrong answer or a wrong acceptance."""
    assert pillow_answer(DECLINED["PNG tEXt keyed exif"]).orientation == 6
    assert pillow_answer(DECLINED["PNG second IHDR"]).size == (10, 20)
    assert pillow_answer(DECLINED["JPEG DHP before the scan"]).size == (20, 10)
    assert pillow_answer(DECLINED["JPEG second frame"]).size == (20, 10)
    assert pillow_answer(DECLINED["MPO"]).format == "MPO"
    assert pillow_answer(DECLINED["EXIF value past the end"]).orientation == 1
    for data in REFUSED_BY_PILLOW.values():
        with pytest.raises(ImageError):
            pillow_answer(data)


def test_plain_layouts_get_pillows_answer():
    exif_block = Image.Exif()
    exif_block[ORIENTATION] = 3
    exif_block[0x011A] = 72.0  # XResolution, a rational
    for data in (
        encoded(picture(), "JPEG", exif=exif_block, dpi=(300, 300), icc_profile=b"p" * 70_000),
        jpeg_with(segment(0xFE, b"a comment"), segment(0xDD, b"\x00\x10")),
        png_with(
            png_chunk(b"gAMA", bytes(4)), png_chunk(b"pHYs", bytes(9)), png_chunk(b"sRGB", b"\x00")
        ),
        png_with(png_chunk(b"cHRM", bytes(32)), png_chunk(b"bKGD", bytes(6))),
        encoded(picture().convert("P"), "PNG"),
    ):
        header = read_header(data)
        assert header is not None and header == pillow_answer(data)


def test_decode_image_reads_plain_headers_without_pillow(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Pillow's open was called")

    monkeypatch.setattr(Image, "open", refuse)
    for fmt in ("JPEG", "PNG"):
        assert decode_image(encoded(picture(), fmt), None).pixels.shape == (32, 48, 3)
    with pytest.raises(ImageError, match="Pillow's open was called"):
        decode_image(encoded(picture(), "GIF"), None)


def test_other_formats_are_left_to_pillow():
    for fmt in ("GIF", "BMP", "TIFF", "WEBP"):
        assert read_header(encoded(picture(), fmt)) is None
    assert read_header(b"") is None


def test_png_without_idat_gives_no_answer():
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    assert read_header(b"\x89PNG\r\n\x1a\n" + ihdr + png_chunk(b"IEND", b"")) is None


def test_pillow_still_reads_what_the_fast_reader_declines():
    """The converter falls back to Pillow: an over-limit JPEG is refused as before."""
    with pytest.raises(ImageError, match="over the limit of 1,000 pixels"):
        decode_image(encoded(picture(), "JPEG"), None, max_pixels=1000)


def test_what_pillow_refuses_in_a_header_gets_no_answer():
    data = encoded(picture(), "JPEG")
    dqt = data.index(b"\xff\xdb")
    short_table = data[:dqt] + b"\xff\xdb\x00\x12" + bytes(16) + data[dqt:]  # 16 of 64 values
    sof = data.index(b"\xff\xc0")
    twelve_bit = data[: sof + 4] + b"\x0c" + data[sof + 5 :]
    extension = data[:2] + b"\xff\xf0" + data[2:]  # JPG0, which Pillow reads without a length
    background = png_chunk(b"bKGD", b"\x00\x01\x00\x02\x00\x03")  # Pillow does not parse it
    png = encoded(picture(), "PNG")
    bad_crc = png[:33] + background[:-1] + bytes([background[-1] ^ 1]) + png[33:]
    for damaged in (short_table, twelve_bit, bad_crc):
        assert read_header(damaged) is None
        with pytest.raises(ImageError):
            pillow_answer(damaged)
    assert read_header(extension) is None  # left to Pillow, which skips it
    assert read_header(png[:33] + background + png[33:]) == Header("PNG", (48, 32), 1)


def refresh_crcs(data: bytearray) -> bytearray:
    """Rewrite the CRC of each PNG chunk before IDAT, so damage inside a chunk is not caught by
    its CRC alone (the case a writer with a bug produces)."""
    pos = 8
    while pos + 12 <= len(data) and data[pos + 4 : pos + 8] != b"IDAT":
        length = int.from_bytes(data[pos : pos + 4], "big")
        if pos + 12 + length > len(data):
            break
        crc = zlib.crc32(bytes(data[pos + 4 : pos + 8 + length]))
        data[pos + 8 + length : pos + 12 + length] = crc.to_bytes(4, "big")
        pos += 12 + length
    return data


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow on damaged EXIF
def test_answers_on_randomly_damaged_headers_are_pillows():
    """Bytes flipped, inserted or cut before the pixels: any answer given is Pillow's."""
    exif_block = Image.Exif()
    exif_block[ORIENTATION] = 6
    exif_block[0x011A] = 72.0
    seeds = [
        jpeg_with_app1(exif((0x010F, 2, 4, 0x61626300), (ORIENTATION, 3, 1, 6), order=">")),
        encoded(picture(), "JPEG", exif=exif_block, dpi=(300, 300), icc_profile=b"p" * 300),
        encoded(picture(), "JPEG", progressive=True),
        encoded(picture().convert("L"), "JPEG"),
        png_with(png_chunk(b"gAMA", bytes(4)), png_chunk(b"pHYs", bytes(9))),
        png_with(png_chunk(b"cHRM", bytes(32)), image=picture().convert("P")),
    ]
    rng = np.random.default_rng(0)
    answered = 0
    for _ in range(4000):
        seed = seeds[rng.integers(len(seeds))]
        data = bytearray(seed)
        end = seed.index(b"\xff\xda") + 4 if seed[:2] == b"\xff\xd8" else seed.index(b"IDAT")
        at = int(rng.integers(2, end))
        kind = rng.random()
        if kind < 0.7:
            data[at] = int(rng.integers(256))
        elif kind < 0.8:
            del data[at:]
        else:
            data[at:at] = rng.integers(0, 256, int(rng.integers(1, 8)), dtype=np.uint8).tobytes()
        if seed[:4] == b"\x89PNG":
            data = refresh_crcs(data)
        header = read_header(bytes(data))
        if header is None or bytes(data) == seed:
            continue
        if header.size[0] * header.size[1] <= Image.MAX_IMAGE_PIXELS:  # above: Pillow decides
            answered += 1
            assert header == pillow_answer(bytes(data)), bytes(data[:80]).hex()
    assert answered > 400

"""Builders of awkward real files: the bad-input corpus the reliability tests pack."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

RED, GREEN, BLUE = (200, 30, 40), (30, 180, 60), (20, 40, 210)


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    """One PNG chunk with a correct CRC."""
    crc = zlib.crc32(kind + payload)
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def bomb_png(width: int = 30000, height: int = 30000) -> bytes:
    """A valid-looking PNG whose header claims a huge RGB image (a decompression bomb)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(b"\0" * 1000))
        + png_chunk(b"IEND", b"")
    )


ADAM7 = (
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
)


def interlaced_png(pixels: np.ndarray) -> bytes:
    """An Adam7-interlaced 8-bit grey (H, W) or RGB (H, W, 3) PNG (Pillow cannot write one)."""
    height, width = pixels.shape[:2]
    color_type = 2 if pixels.ndim == 3 else 0
    rows = b""
    for x0, y0, dx, dy in ADAM7:
        sub = pixels[y0::dy, x0::dx]
        if sub.size:
            rows += b"".join(b"\0" + row.tobytes() for row in sub)
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 1)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(rows))
        + png_chunk(b"IEND", b"")
    )


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def asymmetric(width: int = 40, height: int = 30) -> np.ndarray:
    """Red left half, green top-right, blue bottom-right: any rotation or flip shows."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[:, : width // 2] = RED
    pixels[: height // 2, width // 2 :] = GREEN
    pixels[height // 2 :, width // 2 :] = BLUE
    return pixels


def exif_rotated_jpeg(orientation: int = 6) -> tuple[bytes, np.ndarray]:
    """A JPEG stored rotated, with the EXIF tag that undoes it; bytes and the upright pixels."""
    upright = asymmetric()
    stored = {6: np.rot90(upright, 1), 3: np.rot90(upright, 2), 8: np.rot90(upright, 3)}[
        orientation
    ]
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = encoded(Image.fromarray(np.ascontiguousarray(stored)), "JPEG", quality=95, exif=exif)
    return data, upright


def write_classification_corpus(root: Path) -> dict[str, str]:
    """Class folders full of trouble; returns relative path -> 'packed' or a rejection keyword."""
    good = Image.fromarray(np.full((30, 40, 3), RED, np.uint8))
    jpeg = encoded(good, "JPEG", quality=95)
    png = encoded(good, "PNG")
    rotated, _ = exif_rotated_jpeg()
    rgba = np.zeros((30, 40, 4), np.uint8)
    rgba[..., :3] = GREEN
    rgba[..., 3] = 7
    palette = Image.fromarray(np.zeros((30, 40), np.uint8), "P")
    palette.putpalette(list(BLUE) + [0] * 765)
    files = {
        "a/plain.jpg": (jpeg, "packed"),
        "a/with space (1).png": (png, "packed"),
        "a/naïve café.jpg": (jpeg, "packed"),
        "a/cmyk.jpg": (encoded(good.convert("CMYK"), "JPEG", quality=95), "packed"),
        "a/sixteen.png": (
            encoded(Image.fromarray(np.full((30, 40), 257 * 100, np.uint16)), "PNG"),
            "packed",
        ),
        "a/rgba.png": (encoded(Image.fromarray(rgba, "RGBA"), "PNG"), "packed"),
        "a/grey.jpg": (encoded(good.convert("L"), "JPEG", quality=95), "packed"),
        "b/palette.gif": (encoded(palette, "GIF"), "packed"),
        "b/one.png": (
            encoded(Image.fromarray(np.full((1, 1, 3), BLUE, np.uint8)), "PNG"),
            "packed",
        ),
        "b/rotated.jpg": (rotated, "packed"),
        "b/truncated.jpg": (jpeg[: len(jpeg) // 2], "truncated"),
        "b/truncated.png": (png[: len(png) // 2], "truncated"),
        "b/empty.jpg": (b"", "empty"),
        "b/notes.jpg": (b"shopping list: eggs, milk\n", "not an image"),
        "b/page.png": (b"<!DOCTYPE html><html><body>404</body></html>\n", "not an image"),
        "b/bomb.png": (bomb_png(), "pixels"),
        "b/readme.txt": (b"not a picture\n", "not an image file"),
    }
    for rel, (data, _) in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    os.symlink(root / "b", root / "b" / "loop")  # a symlink loop inside a class folder
    return {rel: expect for rel, (_, expect) in files.items()}

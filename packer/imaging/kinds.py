"""What an image's samples are (sample type, band count) and what the pack keeps of them.

Kept as the source has it: an 8-bit picture (JPEG, 8-bit PNG, GIF, BMP, WebP, an 8-bit grey,
palette, RGB(A) or CMYK TIFF) is RGB uint8, as packer has always stored it; anything else (16-bit
PNG, 16-bit or float TIFF, a TIFF with bands beyond RGB) keeps its sample type and every band.
`Conversion` changes that only when asked (`--channels`, `--dtype`), and says which of its
changes lose information, so that the pack's summary can say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import ImageError

KEPT_DTYPES = ("uint8", "uint16", "float32")
DTYPES = ("auto", *KEPT_DTYPES)
CHANNEL_WORDS = ("auto", "rgb", "grey")
_MAXIMA = {"uint8": 255, "uint16": 65535}


@dataclass(frozen=True)
class PixelKind:
    """Samples of one image: numpy sample type name, band count, and whether it is an 8-bit
    picture (stored as RGB unless asked otherwise)."""

    dtype: str
    bands: int
    photo: bool = False

    def describe(self) -> str:
        if self.photo:
            return "an 8-bit picture (RGB)" if self.bands != 1 else "an 8-bit grey picture"
        return f"{self.dtype} with {self.bands} band{'s' if self.bands != 1 else ''}"


PICTURE = PixelKind("uint8", 3, True)  # an 8-bit RGB picture: what packer always stored


def parse_channels(value: str | int) -> str | int:
    """`--channels` as 'auto', 'rgb', 'grey' or a positive band count; else ImageError."""
    text = str(value).strip().lower()
    if text in ("gray", "l"):
        text = "grey"
    if text in CHANNEL_WORDS:
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ImageError(f"channels must be auto, rgb, grey or a band count, got {value!r}")


@dataclass(frozen=True)
class Conversion:
    """The bands and sample type asked for: 'auto' keeps the source's (pictures: RGB)."""

    channels: str | int = "auto"
    dtype: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", parse_channels(self.channels))
        if self.dtype not in DTYPES:
            raise ImageError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    def output(self, source: PixelKind) -> PixelKind:
        """The kind stored for a source of kind `source`; ImageError when it cannot be made."""
        return PixelKind(self._dtype(source), self._bands(source))

    def _bands(self, source: PixelKind) -> int:
        wanted = self.channels
        if wanted == "auto":  # made 8-bit, a grey image is an 8-bit grey picture: RGB
            picture = source.photo or (self.dtype == "uint8" and source.bands == 1)
            return 3 if picture else source.bands
        if wanted == "grey":
            if source.bands not in (1, 3) and not source.photo:
                raise ImageError(
                    f"channels grey needs 1 or 3 bands, the image is {source.describe()}"
                )
            return 1
        count = 3 if wanted == "rgb" else int(wanted)
        if count > source.bands and source.bands != 1:
            raise ImageError(f"channels {wanted}: the image is {source.describe()}")
        return count

    def _dtype(self, source: PixelKind) -> str:
        if self.dtype != "auto":
            return self.dtype
        if source.dtype not in KEPT_DTYPES:
            raise ImageError(
                f"{source.dtype} samples are not kept as they are (kept: "
                f"{', '.join(KEPT_DTYPES)}): choose one with --dtype"
            )
        return source.dtype

    def losses(self, source: PixelKind) -> list[str]:
        """What converting a source of kind `source` loses, in words (empty: nothing)."""
        out = self.output(source)
        found = []
        if source.bands > out.bands and not (source.photo and self.channels == "auto"):
            found.append(
                f"{source.bands} bands to {out.bands}"
                + (" (grey from colour)" if self.channels == "grey" else " (bands dropped)")
            )
        narrower = {
            ("uint16", "uint8"): "16 to 8 bits (round(v / 257))",
            ("float32", "uint8"): "float32 to 8 bits (rounded, clipped to 0..255)",
            ("float32", "uint16"): "float32 to 16 bits (rounded, clipped to 0..65535)",
        }
        step = (source.dtype, out.dtype)
        if step in narrower:
            found.append(narrower[step])
        elif source.dtype not in KEPT_DTYPES and source.dtype != out.dtype:
            found.append(f"{source.dtype} to {out.dtype}")
        return found

    def apply(self, pixels: np.ndarray, source: PixelKind) -> np.ndarray:
        """`pixels` (`[H,W]` or `[H,W,C]` as decoded) as the kind `output` says, `[H,W,C]`."""
        out = self.output(source)
        if pixels.ndim == 2:
            pixels = pixels[..., np.newaxis]
        bands = pixels.shape[2]
        if out.bands != bands:
            if bands == 1 and out.bands == 3:
                pixels = cv2.cvtColor(pixels, cv2.COLOR_GRAY2RGB)  # as packer always made it
            elif bands == 1:
                pixels = np.repeat(pixels, out.bands, axis=2)
            elif self.channels == "grey":
                pixels = _grey(pixels)
            else:
                pixels = pixels[..., : out.bands]
        if pixels.ndim == 2:
            pixels = pixels[..., np.newaxis]
        return _as_dtype(pixels, out.dtype)


def _grey(rgb: np.ndarray) -> np.ndarray:
    """Luminance of RGB samples (OpenCV's weights), in their own sample type."""
    if rgb.dtype in (np.uint8, np.uint16, np.float32):
        return cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    grey = rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    return grey.astype(rgb.dtype) if rgb.dtype.kind == "f" else np.rint(grey).astype(rgb.dtype)


def _as_dtype(pixels: np.ndarray, dtype: str) -> np.ndarray:
    """Samples in `dtype`: 8 <-> 16 bits scaled by 257 (65535 <-> 255 exactly); floats and
    other integers keep their values, rounded and clipped to the range of an integer type."""
    source = pixels.dtype
    if source == dtype:
        return pixels
    if source == np.uint16 and dtype == "uint8":
        return ((pixels.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if source == np.uint8 and dtype == "uint16":
        return pixels.astype(np.uint16) * np.uint16(257)
    if dtype == "float32":
        return pixels.astype(np.float32)
    values = np.rint(pixels) if source.kind == "f" else pixels
    return np.clip(values, 0, _MAXIMA[dtype]).astype(dtype)


AUTO = Conversion()  # keep the source's kind (8-bit pictures: RGB)

"""A packed image field's payload both ways: pixels encoded as JPEG or PNG, and decoded
straight back into a batch row.

OpenCV encodes, and decodes PNG (16-bit too). JPEG is decoded by imagecodecs' libjpeg-turbo
(`jpeg8_decode`): the same pixels as `cv2.imdecode(payload, cv2.IMREAD_COLOR_RGB)` (both use
libjpeg-turbo's accurate IDCT). libjpeg-turbo writes pixels about 25% slower to an address that
is a multiple of 32 bytes, as every batch row is (TensorFlow needs them 64-byte aligned) and as
OpenCV's own images are; so each thread decodes into a scratch image 16 bytes off that and
copies it into the row, which costs less than the difference (measured in
benchmarks/results/2026-11-28-jpeg-decode.md). Both release the GIL, so the gather's threads
(`reading.gather`) decode a batch on every core the process may use. libjpeg-turbo decodes a
truncated JPEG with a warning, OpenCV refuses it: a JPEG payload must end with its
end-of-image marker, so a cut one is refused here too.
"""

from __future__ import annotations

import threading

import cv2
import imagecodecs
import numpy as np

ENCODINGS = ("raw", "jpeg", "png")
BACKEND = f"opencv {cv2.__version__}"  # what encodes (the manifest records it), decodes PNG
# zlib level 1 (OpenCV's default): 4x faster to write than level 6, for 10% more bytes
PNG_PARAMS = [cv2.IMWRITE_PNG_COMPRESSION, 1]
# What each encoding stores: sample types and band counts (JPEG is 8-bit; 1 or 3 bands).
STORES = {"jpeg": (("uint8",), (1, 3)), "png": (("uint8", "uint16"), (1, 3))}
JPEG_START, JPEG_END = b"\xff\xd8", b"\xff\xd9"  # a JPEG's first and last markers
PNG_START = b"\x89PNG\r\n\x1a\n"
PNG_COLOUR_TYPE = 25  # the IHDR byte: 0 grey, 2 RGB (what packer writes), 3, 4, 6 others
PNG_BANDS = {0: 1, 2: 3}
SCRATCH_OFFSET = 16  # bytes past a 64-byte boundary: libjpeg-turbo's faster stores (see above)
_scratch = threading.local()  # each decoding thread's scratch images, by shape


class CodecError(ValueError):
    """A payload that does not decode to the field's shape and type."""


def check(encoding: str, name: str, dtype: str, shape: tuple[int, ...]) -> None:
    """Raise ValueError, in one line naming the images' type, when `encoding` cannot store a
    field `name` of `dtype` and `shape` ([H, W] or [H, W, C]) exactly."""
    if encoding == "raw":
        return
    if encoding not in STORES:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {', '.join(ENCODINGS)}")
    types, bands = STORES[encoding]
    kind = np.dtype(dtype).name
    count = shape[2] if len(shape) == 3 else 1
    if kind not in types or count not in bands or len(shape) not in (2, 3):
        raise ValueError(
            f"--encoding {encoding} stores {' or '.join(types)} images of "
            f"{' or '.join(map(str, bands))} band(s); {name} are {kind} with {count} band(s): "
            "use --encoding raw"
            + (" or png" if encoding == "jpeg" and kind == "uint16" and count in bands else "")
        )


def encode(image: np.ndarray, encoding: str, quality: int) -> bytes:
    """One image ([H, W] or [H, W, C], RGB) as JPEG (of `quality`) or PNG bytes."""
    pixels = np.asarray(image, image.dtype.newbyteorder("="))
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels.reshape(pixels.shape[:2])
    if pixels.ndim == 3:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)  # OpenCV writes BGR arrays as RGB files
    if encoding == "jpeg":
        ok, buffer = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    elif encoding == "png":
        ok, buffer = cv2.imencode(".png", pixels, PNG_PARAMS)
    else:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {', '.join(ENCODINGS)}")
    if not ok:
        raise ValueError(f"OpenCV could not encode a {image.shape} {image.dtype} image")
    return buffer.tobytes()


def decoder(encoding: str) -> str:
    """What decodes `encoding`'s payloads in the readers (`packer bench` names it)."""
    return (
        f"libjpeg-turbo (imagecodecs {imagecodecs.__version__})" if encoding == "jpeg" else BACKEND
    )


def decode_into(payload, out: np.ndarray) -> None:
    """Decode one JPEG or PNG payload (any bytes-like) into `out` ([H, W] or [H, W, C] of the
    field's type); a CodecError when it does not decode to exactly that."""
    buffer = payload if isinstance(payload, np.ndarray) else np.frombuffer(payload, np.uint8)
    if buffer[:2].tobytes() == JPEG_START and out.dtype == np.uint8:
        _decode_jpeg(buffer, out)
        return
    bands = out.shape[2] if out.ndim == 3 else 1
    _check_png_bands(buffer, bands)  # OpenCV's flags below would make them fit, quietly
    flags = (cv2.IMREAD_COLOR_RGB if bands == 3 else cv2.IMREAD_GRAYSCALE) | cv2.IMREAD_ANYDEPTH
    try:
        pixels = cv2.imdecode(buffer, flags) if len(buffer) else None
    except cv2.error:
        pixels = None
    if pixels is None:
        raise CodecError(f"{len(buffer)} bytes that do not decode as JPEG or PNG")
    if pixels.dtype != out.dtype or pixels.size != out.size or pixels.shape[:2] != out.shape[:2]:
        raise CodecError(
            f"decodes to {pixels.dtype.name} {list(pixels.shape)}, the manifest says "
            f"{out.dtype.name} {list(out.shape)}"
        )
    np.copyto(out, pixels.reshape(out.shape))


def _check_png_bands(buffer: np.ndarray, bands: int) -> None:
    """A CodecError when a PNG payload's colour type (grey 0, RGB 2, as packer writes them)
    is not the field's band count; other payloads pass (OpenCV judges them)."""
    if buffer[:8].tobytes() != PNG_START or len(buffer) < 26:
        return
    colour = int(buffer[PNG_COLOUR_TYPE])
    if PNG_BANDS.get(colour) != bands:
        raise CodecError(f"a PNG of colour type {colour}, the manifest says {bands} band(s)")


def _decode_jpeg(buffer: np.ndarray, out: np.ndarray) -> None:
    """A JPEG payload decoded by libjpeg-turbo into `out` (uint8 [H, W], [H, W, 1] or
    [H, W, 3], a view of the row: copied in, never reshaped); a CodecError when it is cut short
    or of another shape or band count."""
    target = out[..., 0] if out.ndim == 3 and out.shape[2] == 1 else out
    if buffer[-2:].tobytes() != JPEG_END:
        raise CodecError(f"{len(buffer)} bytes of JPEG without its end (cut short)")
    try:
        np.copyto(target, imagecodecs.jpeg8_decode(buffer, out=_scratch_image(target.shape)))
    except imagecodecs.Jpeg8Error as exc:
        raise CodecError(f"{len(buffer)} bytes that do not decode as JPEG ({exc})") from None
    except ValueError:  # another size or band count than the field's
        shape = list(imagecodecs.jpeg8_decode(buffer).shape)
        raise CodecError(
            f"decodes to uint8 {shape}, the manifest says uint8 {list(out.shape)}"
        ) from None


def _scratch_image(shape: tuple[int, ...]) -> np.ndarray:
    """This thread's uint8 scratch image of `shape`, SCRATCH_OFFSET bytes past 64-byte
    alignment."""
    images = _scratch.__dict__.setdefault("images", {})
    image = images.get(shape)
    if image is None:
        nbytes = int(np.prod(shape))
        raw = np.empty(nbytes + 64 + SCRATCH_OFFSET, np.uint8)
        start = -raw.ctypes.data % 64 + SCRATCH_OFFSET
        image = images[shape] = raw[start : start + nbytes].reshape(shape)
    return image


def decode(payload, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """One payload as a new array of `shape` and `dtype`."""
    out = np.empty(shape, np.dtype(dtype).newbyteorder("="))
    decode_into(payload, out)
    return out

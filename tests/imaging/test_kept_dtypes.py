"""Images keep their sample type and bands: 16-bit PNG, uint16 4- and 12-band TIFF, float32
TIFF come back exactly at identity geometry and, resized, as OpenCV resizes the same array with
the same filter; 8-bit pictures stay RGB unless asked; conversions happen only when asked and
say what they lose; a TIFF that cannot be read is refused with tifffile's reason, quietly."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
import tifffile

from packer.errors import ImageError
from packer.imaging import Geometry, decode_image
from packer.imaging.kinds import Conversion, PixelKind
from packer.imaging.resize import opencv_resize

RNG = np.random.default_rng(37)
FILTERS = {
    "linear": cv2.INTER_LINEAR,
    "cubic": cv2.INTER_CUBIC,
    "area": cv2.INTER_AREA,
    "nearest": cv2.INTER_NEAREST_EXACT,
    "lanczos": cv2.INTER_LANCZOS4,
}


def png(array: np.ndarray) -> bytes:
    """PNG bytes of an RGB(A) or grey array (OpenCV writes BGR order)."""
    if array.ndim == 3 and array.shape[2] in (3, 4):
        array = array[..., [2, 1, 0, 3][: array.shape[2]]]
    ok, buffer = cv2.imencode(".png", array)
    assert ok
    return buffer.tobytes()


def tiff(array: np.ndarray, **options) -> bytes:
    """TIFF bytes of `array` `[H, W(, bands)]`, bands interleaved."""
    buffer = io.BytesIO()
    bands = array.shape[2] if array.ndim == 3 else 1
    options.setdefault("photometric", "minisblack")
    if bands > 1:
        options.setdefault("planarconfig", "contig")
    tifffile.imwrite(buffer, array, **options)
    return buffer.getvalue()


def sources() -> dict[str, tuple[bytes, np.ndarray]]:
    """Each kept source: its file's bytes and the `[H, W, C]` samples it holds."""
    grey16 = RNG.integers(500, 4120, (13, 17), dtype=np.uint16)
    rgb16 = RNG.integers(0, 65536, (13, 17, 3), dtype=np.uint16)
    rgbn = RNG.integers(0, 65536, (13, 17, 4), dtype=np.uint16)
    bands12 = RNG.integers(0, 65536, (13, 17, 12), dtype=np.uint16)
    floats = RNG.normal(0, 1000, (13, 17)).astype(np.float32)
    rgbn8 = RNG.integers(0, 256, (13, 17, 4), dtype=np.uint8)
    return {
        "grey16.png": (png(grey16), grey16[..., None]),
        "rgb16.png": (png(rgb16), rgb16),
        "rgbn16.tif": (tiff(rgbn), rgbn),
        "bands12.tif": (tiff(bands12), bands12),
        "float32.tif": (tiff(floats), floats[..., None]),
        "rgbn8.tif": (tiff(rgbn8, photometric="rgb", extrasamples=["unspecified"]), rgbn8),
        "planar12.tif": (tiff(np.moveaxis(bands12, 2, 0), planarconfig="separate"), bands12),
        # GeoTIFF exports (GDAL, QGIS, Earth Engine) compress: imagecodecs decodes them
        "lzw12.tif": (tiff(bands12, compression="lzw", predictor=True), bands12),
        "deflate-float.tif": (tiff(floats, compression="zlib"), floats[..., None]),
    }


@pytest.mark.parametrize("name", list(sources()))
def test_kept_exactly_at_identity_geometry(name):
    data, expected = sources()[name]
    for geometry in (None, Geometry((17, 13), "none")):
        loaded = decode_image(data, geometry)
        assert loaded.pixels.dtype == expected.dtype, name
        assert loaded.pixels.shape == expected.shape, name
        assert np.array_equal(loaded.pixels, expected), name
        assert not loaded.kind.photo


@pytest.mark.parametrize("name", list(sources()))
@pytest.mark.parametrize("interpolation", ["linear", "area", "cubic", "nearest", "lanczos"])
def test_resized_as_opencv_resizes_the_same_array(name, interpolation):
    """OpenCV resizes at most 4 bands at once: more go 4 at a time (its cubic filter does not
    round each band alone as it does in a group, so groups are the reference)."""
    data, stored = sources()[name]
    loaded = decode_image(data, Geometry((9, 7), "stretch", interpolation))
    assert loaded.pixels.shape == (7, 9, stored.shape[2])
    for start in range(0, stored.shape[2], 4):
        group = np.ascontiguousarray(stored[..., start : start + 4])
        expected = cv2.resize(group, (9, 7), interpolation=FILTERS[interpolation])
        got = loaded.pixels[..., start : start + 4]
        assert np.array_equal(got.reshape(expected.shape), expected), (name, start)


def test_crop_and_pad_keep_the_sample_type():
    data, stored = sources()["bands12.tif"]
    fill = decode_image(data, Geometry((11, 13), "fill", "linear"))  # a centred crop, no resize
    assert np.array_equal(fill.pixels, stored[:, 3:14])
    fit = decode_image(data, Geometry((17, 17), "none", pad_value=9))
    assert fit.pixels.dtype == np.uint16 and (fit.pixels[:2] == 9).all()
    assert np.array_equal(fit.pixels[2:15], stored)


def test_opencv_resize_goes_four_bands_at_a_time():
    stored = RNG.random((10, 12, 9)).astype(np.float32)
    resized = opencv_resize(stored, (5, 4), "area")
    assert resized.shape == (4, 5, 9)
    assert opencv_resize(stored[..., :1], (5, 4), "area").shape == (4, 5, 1)


def test_eight_bit_pictures_stay_rgb_unless_asked():
    grey = RNG.integers(0, 256, (13, 17), dtype=np.uint8)
    default = decode_image(png(grey), None)
    assert default.kind == PixelKind("uint8", 1, True)
    assert default.pixels.shape == (13, 17, 3) and (default.pixels == grey[..., None]).all()
    kept = decode_image(png(grey), None, conversion=Conversion(1))
    assert kept.pixels.shape == (13, 17, 1) and np.array_equal(kept.pixels[..., 0], grey)
    resized = decode_image(png(grey), Geometry((9, 7), "stretch"), conversion=Conversion(1))
    area = cv2.resize(grey, (9, 7), interpolation=cv2.INTER_AREA)
    assert np.array_equal(resized.pixels[..., 0], area)
    rgba = RNG.integers(0, 256, (13, 17, 4), dtype=np.uint8)
    assert np.array_equal(decode_image(png(rgba), None).pixels, rgba[..., :3])  # PNG alpha


def test_conversions_only_when_asked_and_what_they_lose():
    data, rgbn = sources()["rgbn16.tif"]
    source = decode_image(data, None).kind
    assert Conversion().losses(source) == []
    to_rgb8 = Conversion("rgb", "uint8")
    assert to_rgb8.losses(source) == [
        "4 bands to 3 (bands dropped)",
        "16 to 8 bits (round(v / 257))",
    ]
    pixels = decode_image(data, None, conversion=to_rgb8).pixels
    assert np.array_equal(pixels, ((rgbn[..., :3].astype(np.uint32) + 128) // 257))
    widened = decode_image(
        png(rgbn[..., :3].astype(np.uint8)), None, conversion=Conversion(dtype="uint16")
    )
    assert np.array_equal(widened.pixels, rgbn[..., :3].astype(np.uint8).astype(np.uint16) * 257)
    grey = decode_image(sources()["rgb16.png"][0], None, conversion=Conversion("grey")).pixels
    assert grey.shape == (13, 17, 1) and grey.dtype == np.uint16
    floats = decode_image(data, None, conversion=Conversion(dtype="float32")).pixels
    assert np.array_equal(floats, rgbn.astype(np.float32))
    with pytest.raises(ImageError, match="channels 5"):
        decode_image(data, None, conversion=Conversion(5))
    with pytest.raises(ImageError, match="channels must be"):
        Conversion("nir")


@pytest.mark.parametrize(
    "data",
    [
        b"II*\x00" + b"\x07" * 40,
        b"MM\x00*\x00\x00\x00\x08\x00\x05",
        tiff(np.zeros((4, 4), np.uint16))[:60],
    ],
)
def test_unreadable_tiff_names_the_reason_quietly(data, capfd):
    with pytest.raises(ImageError, match="TIFF") as caught:
        decode_image(data, None)
    assert "\n" not in str(caught.value)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_stack_of_pages_is_refused_and_overviews_are_not_pages():
    """tifffile.imwrite of a [3, H, W] array writes three pages: packing the first would
    drop two images, so the file is refused; a GeoTIFF's reduced-resolution overview is no
    image of its own and the full-size page packs."""
    stack = RNG.integers(0, 65536, (3, 8, 9), dtype=np.uint16)
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, stack, photometric="minisblack")
    with pytest.raises(ImageError, match=r"holds 3 full-size images \(pages\)"):
        decode_image(buffer.getvalue(), None)
    buffer = io.BytesIO()
    with tifffile.TiffWriter(buffer) as writer:
        writer.write(stack[0], photometric="minisblack")
        writer.write(stack[0, ::2, ::2], photometric="minisblack", subfiletype=1)
    loaded = decode_image(buffer.getvalue(), None)
    assert np.array_equal(loaded.pixels[..., 0], stack[0])

"""packer.imaging: placement arithmetic, decoding of every format and mode, EXIF orientation,
DCT-reduced JPEG decoding, refusal of bad input, exact masks that stay aligned with images."""

from __future__ import annotations

import importlib.metadata
import io
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, ImageOps

from packer.imaging import (
    DEFAULT_MAX_PIXELS,
    INTERPOLATIONS,
    RESIZE_MODES,
    Geometry,
    ImageError,
    Placement,
    area_resize,
    backend_versions,
    decode_image,
    decode_mask,
    pad_to_canvas,
    place,
    resample_mask,
)
from packer.imaging.kinds import AUTO, Conversion
from packer.packing.convert import read_source
from tests.fixtures.corpus import bomb_png, interlaced_png

COLOURS = np.array(
    [[230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48], [145, 30, 180]],
    np.uint8,
)


def load_image(
    path: Path,
    geometry: Geometry | None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    conversion: Conversion = AUTO,
):
    """What the converter does with a source image: read its bytes, decode them."""
    return decode_image(read_source(str(path)), geometry, max_pixels, conversion)


def load_mask(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS):
    """What the converter does with a mask file: read its bytes, decode them."""
    return decode_mask(read_source(str(path)), max_pixels)


def save(image: Image.Image, path: Path, **options) -> Path:
    """Write an image and return its path."""
    image.save(path, **options)
    return path


def gradient(width: int, height: int) -> np.ndarray:
    """A smooth, asymmetric RGB picture: every orientation and offset mistake shows."""
    yy, xx = np.mgrid[0:height, 0:width]
    return np.stack(
        [255 * xx // max(1, width - 1), 255 * yy // max(1, height - 1), (xx + 2 * yy) % 256], -1
    ).astype(np.uint8)


def blocks(width: int, height: int, block: tuple[int, int], seed: int = 0) -> np.ndarray:
    """A class-index mask of random rectangular blocks of `block` (w, h) pixels."""
    rng = np.random.default_rng(seed)
    rows, cols = -(-height // block[1]), -(-width // block[0])
    grid = rng.integers(0, len(COLOURS), (rows, cols), dtype=np.uint8)
    return np.repeat(np.repeat(grid, block[1], 0), block[0], 1)[:height, :width]


# -- place -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "geometry", "expected"),
    [
        (
            (480, 360),
            Geometry((480, 352)),
            Placement((0, 4, 480, 356), (480, 352), (0, 0), (480, 352)),
        ),
        (
            (480, 360),
            Geometry((240, 176)),
            Placement((0, 4, 480, 356), (240, 176), (0, 0), (240, 176)),
        ),
        (
            (500, 375),
            Geometry((224, 224)),
            Placement((62, 0, 437, 375), (224, 224), (0, 0), (224, 224)),
        ),
        (
            (375, 500),
            Geometry((224, 224)),
            Placement((0, 62, 375, 437), (224, 224), (0, 0), (224, 224)),
        ),
        (
            (100, 50),
            Geometry((300, 300)),
            Placement((25, 0, 75, 50), (300, 300), (0, 0), (300, 300)),
        ),
        (
            (500, 375),
            Geometry((224, 224), "fit"),
            Placement((0, 0, 500, 375), (224, 168), (0, 28), (224, 224)),
        ),
        (
            (375, 500),
            Geometry((224, 224), "fit"),
            Placement((0, 0, 375, 500), (168, 224), (28, 0), (224, 224)),
        ),
        (
            (50, 20),
            Geometry((200, 100), "fit"),
            Placement((0, 0, 50, 20), (200, 80), (0, 10), (200, 100)),
        ),
        (
            (500, 375),
            Geometry((224, 224), "stretch"),
            Placement((0, 0, 500, 375), (224, 224), (0, 0), (224, 224)),
        ),
        (
            (500, 375),
            Geometry((224, 224), "none"),
            Placement((138, 75, 362, 299), (224, 224), (0, 0), (224, 224)),
        ),
        (
            (100, 50),
            Geometry((224, 224), "none"),
            Placement((0, 0, 100, 50), (100, 50), (62, 87), (224, 224)),
        ),
        (
            (300, 100),
            Geometry((224, 224), "none"),
            Placement((38, 0, 262, 100), (224, 100), (0, 62), (224, 224)),
        ),
    ],
)
def test_place_exact_numbers(source, geometry, expected):
    assert place(source, geometry) == expected


@pytest.mark.parametrize("mode", RESIZE_MODES)
def test_place_stays_inside_source_and_canvas(mode):
    rng = np.random.default_rng(1)
    for _ in range(200):
        source = tuple(int(v) for v in rng.integers(1, 2000, 2))
        size = tuple(int(v) for v in rng.integers(1, 600, 2))
        p = place(source, Geometry(size, mode))
        x0, y0, x1, y1 = p.crop
        assert 0 <= x0 < x1 <= source[0] and 0 <= y0 < y1 <= source[1]
        assert p.offset[0] >= 0 and p.offset[0] + p.scaled[0] <= size[0]
        assert p.offset[1] >= 0 and p.offset[1] + p.scaled[1] <= size[1]
        if mode == "fill":  # the crop has the output's aspect ratio, to within a pixel
            assert abs((x1 - x0) * size[1] - (y1 - y0) * size[0]) <= max(size)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": (0, 10)},
        {"size": (10,)},
        {"size": (10, 10), "mode": "crop"},
        {"size": (10, 10), "interpolation": "bogus"},
        {"size": (10, 10), "pad_value": 300},
    ],
)
def test_geometry_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Geometry(**kwargs)


# -- decode_image / load_image: output contract, formats and modes ---------------------------


def test_pure_red_png_stays_red_rgb_uint8(tmp_path):
    path = save(Image.new("RGB", (64, 48), (255, 0, 0)), tmp_path / "red.png")
    loaded = load_image(path, Geometry((32, 24)))
    px = loaded.pixels
    assert px.shape == (24, 32, 3) and px.dtype == np.uint8
    assert px.flags.c_contiguous and px.flags.writeable
    assert (px == [255, 0, 0]).all()
    assert loaded.source_size == (64, 48) and loaded.backend == "spng-decode+opencv-area"


def test_no_geometry_keeps_the_source(tmp_path):
    picture = gradient(37, 23)
    loaded = load_image(save(Image.fromarray(picture), tmp_path / "g.png"), None)
    assert np.array_equal(loaded.pixels, picture)
    assert loaded.placement == Placement((0, 0, 37, 23), (37, 23), (0, 0), (37, 23))


@pytest.mark.parametrize(
    ("mode", "fmt", "options"),
    [
        ("RGBA", "png", {}),
        ("LA", "png", {}),
        ("L", "png", {}),
        ("1", "png", {}),
        ("P", "png", {}),
        ("RGB", "bmp", {}),
        ("P", "bmp", {}),
        ("RGBA", "webp", {"lossless": True, "exact": True}),
        ("RGB", "tiff", {}),
        ("CMYK", "tiff", {}),
        ("L", "tiff", {}),
        ("P", "gif", {}),
    ],
)
def test_lossless_modes_load_as_stored_rgb(tmp_path, mode, fmt, options):
    rng = np.random.default_rng(2)
    rgba = rng.integers(0, 256, (30, 40, 4), dtype=np.uint8)
    rgba[..., 3] = rng.choice([0, 128, 255], (30, 40))  # alpha must not change the colours
    image = Image.fromarray(rgba, "RGBA")
    image = image.convert(mode) if mode != "P" else image.convert("RGB").quantize(37)
    path = save(image, tmp_path / f"x.{fmt}", **options)
    expected = np.asarray(Image.open(path).convert("RGB"))
    loaded = load_image(path, None)
    assert loaded.pixels.shape == (30, 40, 3) and loaded.pixels.dtype == np.uint8
    assert np.array_equal(loaded.pixels, expected)


def test_cmyk_and_grey_jpeg_load_as_rgb(tmp_path):
    for mode in ("CMYK", "L"):
        image = Image.fromarray(gradient(64, 48)).convert(mode)
        path = save(image, tmp_path / f"{mode}.jpg", quality=95)
        expected = np.asarray(Image.open(path).convert("RGB")).astype(int)
        pixels = load_image(path, None).pixels
        assert pixels.shape == (48, 64, 3)
        assert np.abs(pixels - expected).max() <= 2  # OpenCV's CMYK->RGB rounds differently


def test_gif_first_frame(tmp_path):
    frames = [Image.new("RGB", (20, 10), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    path = save(frames[0], tmp_path / "a.gif", save_all=True, append_images=frames[1:])
    assert (load_image(path, None).pixels == [255, 0, 0]).all()


def test_png_decoders_agree_with_opencv(tmp_path):
    """libspng takes 8-bit grey/RGB/RGBA PNGs (also interlaced); its pixels are OpenCV's."""
    picture = np.random.default_rng(3).integers(0, 256, (37, 53, 4), dtype=np.uint8)
    files = {
        "rgb.png": (encoded(Image.fromarray(picture[..., :3])), "spng"),
        "rgba.png": (encoded(Image.fromarray(picture, "RGBA")), "spng"),
        "grey.png": (encoded(Image.fromarray(picture[..., 0])), "spng"),
        "stored.png": (encoded(Image.fromarray(picture[..., :3]), compress_level=0), "spng"),
        "adam7.png": (interlaced_png(picture[..., :3]), "spng"),
        "adam7-grey.png": (interlaced_png(picture[..., 0]), "spng"),
        "grey-alpha.png": (encoded(Image.fromarray(picture[..., :2], "LA")), "opencv"),
        "palette.png": (encoded(Image.fromarray(picture[..., :3]).convert("P")), "opencv"),
    }
    for name, (data, backend) in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        expected = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)
        loaded = load_image(path, None)
        assert loaded.backend == f"{backend}-decode", name
        assert np.array_equal(loaded.pixels, expected), name


def encoded(image: Image.Image, **options) -> bytes:
    """PNG bytes of `image`."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG", **options)
    return buffer.getvalue()


def test_sixteen_bit_png_scales_by_257_when_asked(tmp_path):
    """16-bit images are kept (tests/imaging/test_kept_dtypes.py); asked for 8 bits, each
    sample is round(v / 257), and a grey one asked for RGB is three identical bands."""
    to_8_bits = Conversion("rgb", "uint8")
    rng = np.random.default_rng(3)
    rgb16 = rng.integers(0, 65536, (20, 30, 3), dtype=np.uint16)
    rgb16[0, :4] = [[0, 128, 129], [65535, 385, 386], [32767, 32768, 257], [1, 2, 3]]
    path = tmp_path / "rgb16.png"
    assert cv2.imwrite(str(path), rgb16[..., ::-1])
    expected = np.round(rgb16 / 257).astype(np.uint8)
    assert np.array_equal(load_image(path, None, conversion=to_8_bits).pixels, expected)
    grey16 = rgb16[..., 0]
    grey_path = save(Image.fromarray(grey16), tmp_path / "grey16.png")
    expected = np.repeat(np.round(grey16 / 257).astype(np.uint8)[..., None], 3, -1)
    assert np.array_equal(load_image(grey_path, None, conversion=to_8_bits).pixels, expected)


def test_sixteen_bit_tiff_grey_scales_by_257_when_asked(tmp_path):
    grey16 = np.array([[0, 128, 129, 65535], [257, 32767, 32768, 1000]], np.uint16)
    path = save(Image.fromarray(grey16), tmp_path / "g16.tiff")
    expected = np.repeat(np.round(grey16 / 257).astype(np.uint8)[..., None], 3, -1)
    loaded = load_image(path, None, conversion=Conversion("rgb", "uint8"))
    assert np.array_equal(loaded.pixels, expected)


def test_fit_and_none_pad_with_pad_value(tmp_path):
    path = save(Image.new("RGB", (100, 50), (10, 20, 30)), tmp_path / "wide.png")
    fit = load_image(path, Geometry((60, 60), "fit", pad_value=7))
    assert fit.placement.scaled == (60, 30) and fit.placement.offset == (0, 15)
    assert (fit.pixels[:15] == 7).all() and (fit.pixels[45:] == 7).all()
    assert (fit.pixels[15:45] == [10, 20, 30]).all()
    none = load_image(path, Geometry((120, 40), "none", pad_value=255))
    assert (none.pixels[:, :10] == 255).all() and (none.pixels[:, 110:] == 255).all()
    assert (none.pixels[:, 10:110] == [10, 20, 30]).all()


def test_interpolation_choice(tmp_path):
    path = save(Image.fromarray(gradient(90, 60)), tmp_path / "g.png")
    assert load_image(path, Geometry((30, 20))).backend == "spng-decode+opencv-area"
    assert load_image(path, Geometry((45, 45))).backend == "spng-decode+opencv-area"
    assert load_image(path, Geometry((180, 120))).backend == "spng-decode+pillow-cubic"
    for name in set(INTERPOLATIONS) - {"auto", "area"}:
        loaded = load_image(path, Geometry((40, 25), interpolation=name))
        assert loaded.backend == f"spng-decode+pillow-{name}"


def test_area_is_exact_pixel_area(tmp_path):
    picture = np.random.default_rng(4).integers(0, 256, (60, 90, 3), dtype=np.uint8)
    path = save(Image.fromarray(picture), tmp_path / "noise.png")
    loaded = load_image(path, Geometry((56, 40), "stretch"))  # 1.6x and 1.5x, not integers
    expected = cv2.resize(picture, (56, 40), interpolation=cv2.INTER_AREA)
    assert np.array_equal(loaded.pixels, expected)


def test_area_resize_matches_opencv_uint8_area():
    """The float32 route is only faster: its pixels are OpenCV's uint8 INTER_AREA's."""
    rng = np.random.default_rng(5)
    for (width, height), size in [
        ((375, 375), (224, 224)),
        ((500, 333), (224, 149)),
        ((97, 61), (40, 33)),
        ((480, 352), (240, 176)),  # integer ratio: the uint8 path itself
        ((40, 30), (64, 48)),  # enlarging and mixed: uint8 is fixed-point linear there
        ((40, 30), (20, 48)),
    ]:
        for channels in ((height, width, 3), (height, width)):
            picture = rng.integers(0, 256, channels, dtype=np.uint8)
            expected = cv2.resize(picture, size, interpolation=cv2.INTER_AREA)
            assert np.array_equal(area_resize(picture, size), expected), (width, height, size)


# -- JPEG: DCT-reduced decoding --------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "factor"), [((1000, 700), 1), ((1792, 1344), 2), ((1800, 1800), 4)]
)
def test_jpeg_reduced_decode_when_shrinking_at_least_4x(tmp_path, source, factor):
    picture = gradient(*source)
    path = save(Image.fromarray(picture), tmp_path / "big.jpg", quality=92)
    loaded = load_image(path, Geometry((224, 224)))
    assert ("reduced" in loaded.backend) == (factor > 1)
    if factor > 1:
        assert loaded.backend.startswith(f"opencv-decode/{factor}x-reduced+")
    full = cv2.imread(str(path), cv2.IMREAD_COLOR_RGB)
    x0, y0, x1, y1 = loaded.placement.crop
    expected = cv2.resize(full[y0:y1, x0:x1], (224, 224), interpolation=cv2.INTER_AREA)
    assert np.abs(loaded.pixels.astype(int) - expected).mean() < 1.0


def test_jpeg_nearest_is_never_dct_reduced(tmp_path):
    path = save(Image.fromarray(gradient(1800, 1800)), tmp_path / "big.jpg", quality=92)
    loaded = load_image(path, Geometry((224, 224), interpolation="nearest"))
    assert loaded.backend == "opencv-decode+pillow-nearest"


def test_jpeg_reduced_with_fractional_crop_box(tmp_path):
    path = save(Image.fromarray(gradient(1602, 1203)), tmp_path / "odd.jpg", quality=92)
    loaded = load_image(path, Geometry((150, 150)))
    assert loaded.placement.crop == (199, 0, 1402, 1203)  # 199 / 4 is fractional
    assert loaded.backend == "opencv-decode/4x-reduced+pillow-hamming"
    full = cv2.imread(str(path), cv2.IMREAD_COLOR_RGB)[:, 199:1402]
    expected = cv2.resize(full, (150, 150), interpolation=cv2.INTER_AREA)
    assert np.abs(loaded.pixels.astype(int) - expected).mean() < 1.0


# -- EXIF orientation ------------------------------------------------------------------------


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_jpeg(tmp_path, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = save(Image.fromarray(gradient(64, 40)), tmp_path / "o.jpg", exif=exif, quality=95)
    expected = np.asarray(ImageOps.exif_transpose(Image.open(path)))
    loaded = load_image(path, None)
    assert loaded.source_size == (expected.shape[1], expected.shape[0])
    assert np.abs(loaded.pixels.astype(int) - expected).max() <= 1


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_exif_orientation_png_with_crop_and_resize(tmp_path, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    picture = gradient(90, 50)
    path = save(Image.fromarray(picture), tmp_path / "o.png", exif=exif)
    oriented = np.asarray(ImageOps.exif_transpose(Image.open(path)))
    geometry = Geometry((30, 20))
    loaded = load_image(path, geometry)
    p = place((oriented.shape[1], oriented.shape[0]), geometry)
    x0, y0, x1, y1 = p.crop
    expected = cv2.resize(oriented[y0:y1, x0:x1], p.scaled, interpolation=cv2.INTER_AREA)
    assert loaded.placement == p
    assert np.array_equal(loaded.pixels, expected)


def test_exif_orientation_on_reduced_jpeg(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6
    path = save(Image.fromarray(gradient(1600, 1000)), tmp_path / "r.jpg", exif=exif, quality=92)
    oriented = np.asarray(ImageOps.exif_transpose(Image.open(path)))
    loaded = load_image(path, Geometry((120, 160)))
    assert loaded.source_size == (1000, 1600) and "reduced" in loaded.backend
    x0, y0, x1, y1 = loaded.placement.crop
    expected = cv2.resize(oriented[y0:y1, x0:x1], (120, 160), interpolation=cv2.INTER_AREA)
    assert np.abs(loaded.pixels.astype(int) - expected).mean() < 1.0


# -- bad input -------------------------------------------------------------------------------


def _decoder_calls(run) -> list[str]:
    """The pixel decoders `run()` calls (OpenCV's imdecode/imread, pyspng, Pillow's load),
    observed with a profile hook on the real libraries."""
    seen = []

    def hook(frame, event, arg):
        if event == "c_call":
            name = f"{getattr(arg, '__module__', None) or ''}.{arg.__name__}"
            decoder = arg.__name__ in ("imdecode", "imread") or name.startswith("pyspng")
        else:
            name = f"PIL {frame.f_code.co_filename.rsplit('/', 1)[-1]} load"
            pil = name in ("PIL ImageFile.py load", "PIL Image.py load")
            decoder = event == "call" and frame.f_code.co_name == "load" and pil
        if decoder:
            seen.append(name)

    sys.setprofile(hook)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seen


def test_bomb_header_refused_before_decoding(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb_png())
    for loader in (lambda: load_image(path, Geometry((64, 64))), lambda: load_mask(path)):

        def refused(loader=loader) -> None:
            with pytest.raises(ImageError, match="900000000 pixels"):
                loader()

        assert _decoder_calls(refused) == []
    small = save(Image.fromarray(gradient(64, 48)), tmp_path / "small.png")
    assert _decoder_calls(lambda: load_image(small, Geometry((32, 24))))  # the hook sees them


def test_max_pixels_names_the_size(tmp_path):
    path = save(Image.new("RGB", (200, 100)), tmp_path / "big.png")
    with pytest.raises(ImageError, match=r"image is 200x100 pixels, over the limit of 19,999"):
        load_image(path, None, max_pixels=19_999)
    with pytest.raises(ImageError, match="200x100"):
        load_mask(path, max_pixels=19_999)
    assert load_image(path, None, max_pixels=20_000).source_size == (200, 100)


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Broken inputs and the words their error must contain."""
    jpeg = io.BytesIO()
    Image.fromarray(gradient(200, 150)).save(jpeg, "JPEG", quality=90)
    png = io.BytesIO()
    Image.fromarray(gradient(200, 150)).save(png, "PNG")
    files = {
        "empty.jpg": (b"", "empty"),
        "page.jpg": (b"<!DOCTYPE html>\n<html><body>Not found</body></html>\n", "not an image"),
        "notes.png": (b"just some text\n" * 20, "not an image"),
        "half.jpg": (jpeg.getvalue()[: len(jpeg.getvalue()) // 2], "truncated JPEG"),
        "no_eoi.jpg": (jpeg.getvalue()[:-2], "truncated JPEG"),
        "half.png": (png.getvalue()[: len(png.getvalue()) // 2], "truncated PNG"),
        "garbage.jpg": (b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8, "not an image"),
        "scrambled.png": (_scrambled_idat(png.getvalue()), "cannot decode PNG"),
        "flipped.png": (_flipped_pixel_byte(), "IDAT chunk at byte 33 fails its CRC"),
    }
    for name, (data, _) in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: (tmp_path / name, words) for name, (_, words) in files.items()}


def _scrambled_idat(png: bytes) -> bytes:
    """A complete PNG whose compressed pixel data is noise, under a matching chunk CRC."""
    kind = png.index(b"IDAT")
    length = int.from_bytes(png[kind - 4 : kind], "big")
    start = kind + 4 + 20
    noise = np.random.default_rng(9).integers(0, 256, 200, dtype=np.uint8).tobytes()
    damaged = png[:start] + noise + png[start + len(noise) :]
    crc = zlib.crc32(damaged[kind : kind + 4 + length]).to_bytes(4, "big")
    return damaged[: kind + 4 + length] + crc + damaged[kind + 8 + length :]


def _flipped_pixel_byte() -> bytes:
    """An uncompressed PNG with one pixel byte changed on disk: only the chunk CRC can tell."""
    stored = io.BytesIO()
    Image.fromarray(gradient(40, 30)).save(stored, "PNG", compress_level=0)
    data = bytearray(stored.getvalue())
    data[data.index(b"IDAT") + 200] ^= 0x10
    return bytes(data)


def test_bad_files_raise_image_error_with_reason(tmp_path):
    loaders = (
        (
            lambda p: load_image(p, Geometry((32, 32))),
            lambda d: decode_image(d, Geometry((32, 32))),
        ),
        (load_mask, decode_mask),
    )
    for name, (path, words) in _bad_files(tmp_path).items():
        for from_path, from_bytes in loaders:
            with pytest.raises(ImageError, match=words) as caught:
                from_path(path)
            assert str(caught.value), name
            with pytest.raises(ImageError) as from_data:
                from_bytes(path.read_bytes())
            assert str(from_data.value) == str(caught.value), name
    with pytest.raises(ImageError, match="cannot read"):
        load_image(tmp_path / "missing.png", None)


def test_unsupported_mode_is_image_error(tmp_path):
    """Float images are kept (test_kept_dtypes.py); 32-bit integer images only when a sample
    type is asked for; float masks never."""
    path = save(Image.fromarray(np.ones((4, 5), np.float32)), tmp_path / "float.tiff")
    with pytest.raises(ImageError, match="unsupported mask mode 'F'"):
        load_mask(path)
    ints = save(Image.fromarray(np.ones((4, 5), np.int32)), tmp_path / "int.tiff")
    with pytest.raises(ImageError, match="int32 samples are not kept"):
        load_image(ints, None)
    assert load_image(ints, None, conversion=Conversion(dtype="uint16")).pixels.dtype == np.uint16


# -- masks -----------------------------------------------------------------------------------


def test_palette_mask_keeps_indices(tmp_path):
    indices = np.zeros((20, 30), np.uint8)
    indices[5:15, 10:20] = 15
    indices[0, 0] = 255
    image = Image.fromarray(indices, "P")
    palette = np.zeros((256, 3), np.uint8)
    palette[15] = (147, 147, 147)  # grey-ish: a grey conversion would give 147, not 15
    palette[255] = (224, 224, 192)
    image.putpalette(palette.ravel().tolist())
    mask = load_mask(save(image, tmp_path / "voc.png"))
    assert mask.kind == "palette" and mask.size == (30, 20)
    assert np.array_equal(mask.values, indices)
    assert mask.palette is not None and mask.palette.dtype == np.uint8
    assert tuple(mask.palette[15]) == (147, 147, 147) and tuple(mask.palette[255]) == (
        224,
        224,
        192,
    )


def test_low_bit_palette_mask(tmp_path):
    indices = blocks(30, 20, (7, 5)) % 4
    image = Image.fromarray(indices, "P")
    image.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
    mask = load_mask(save(image, tmp_path / "p2.png", bits=2))
    assert mask.kind == "palette" and np.array_equal(mask.values, indices)
    assert mask.palette is not None and len(mask.palette) >= 4
    assert tuple(mask.palette[1]) == (255, 0, 0)


def test_grey_index_masks(tmp_path):
    ids = blocks(30, 20, (7, 5))
    mask = load_mask(save(Image.fromarray(ids), tmp_path / "ids.png"))
    assert mask.kind == "index" and mask.palette is None and np.array_equal(mask.values, ids)
    ids16 = ids.astype(np.uint16) * 1000
    mask16 = load_mask(save(Image.fromarray(ids16), tmp_path / "ids16.png"))
    assert mask16.values.dtype == np.uint16 and np.array_equal(mask16.values, ids16)
    binary = load_mask(save(Image.fromarray(ids > 2), tmp_path / "bin.png"))
    assert binary.values.dtype == np.uint8 and np.array_equal(binary.values, (ids > 2) * 1)


def test_colour_masks_rgb_and_rgba(tmp_path):
    rgb = COLOURS[blocks(30, 20, (7, 5))]
    mask = load_mask(save(Image.fromarray(rgb), tmp_path / "rgb.png"))
    assert mask.kind == "color" and mask.values.shape == (20, 30, 3)
    assert np.array_equal(mask.values, rgb)
    rgba = np.dstack([rgb, np.full((20, 30), 0, np.uint8)])
    mask = load_mask(save(Image.fromarray(rgba, "RGBA"), tmp_path / "rgba.png"))
    assert mask.kind == "color" and np.array_equal(mask.values, rgb)


def test_interlaced_masks_decode_exactly(tmp_path):
    ids = blocks(30, 20, (7, 5))
    (tmp_path / "ids.png").write_bytes(interlaced_png(ids))
    (tmp_path / "rgb.png").write_bytes(interlaced_png(COLOURS[ids]))
    index = load_mask(tmp_path / "ids.png")
    assert index.kind == "index" and np.array_equal(index.values, ids)
    colour = load_mask(tmp_path / "rgb.png")
    assert colour.kind == "color" and np.array_equal(colour.values, COLOURS[ids])


def test_resample_mask_never_invents_values():
    rng = np.random.default_rng(5)
    values = rng.choice(np.array([3, 7, 11, 200, 40000], np.uint16), (57, 83))
    for size in [(20, 13), (200, 150), (83, 30), (31, 57)]:
        for mode in RESIZE_MODES:
            p = place((83, 57), Geometry(size, mode))
            out = resample_mask(values, p)
            assert out.shape == (p.scaled[1], p.scaled[0]) and out.dtype == values.dtype
            assert set(np.unique(out)) <= set(np.unique(values))
            if p.scaled[0] <= 83:
                x0, y0, x1, y1 = p.crop
                reference = Image.fromarray(values.astype(np.int32)).resize(
                    p.scaled, Image.Resampling.NEAREST, box=p.crop
                )
                assert np.array_equal(out, np.asarray(reference)), (size, mode, x0, y0, x1, y1)
    colour = COLOURS[blocks(83, 57, (5, 3))]
    out = resample_mask(colour, place((83, 57), Geometry((40, 70))))
    assert out.shape == (70, 40, 3)
    assert {tuple(c) for c in out.reshape(-1, 3)} <= {tuple(c) for c in COLOURS}


@pytest.mark.parametrize("mode", RESIZE_MODES)
def test_mask_and_image_stay_aligned_nearest(tmp_path, mode):
    ids = blocks(101, 67, (13, 11), seed=6)
    image_path = save(Image.fromarray(COLOURS[ids]), tmp_path / "img.png")
    mask_path = save(Image.fromarray(ids), tmp_path / "mask.png")
    geometry = Geometry((37, 29), mode, interpolation="nearest")
    image = load_image(image_path, geometry)
    mask = load_mask(mask_path)
    assert mask.size == image.source_size
    ids_out = pad_to_canvas(resample_mask(mask.values, image.placement), image.placement, 0)
    x, y = image.placement.offset
    w, h = image.placement.scaled
    inside = np.s_[y : y + h, x : x + w]
    assert np.array_equal(image.pixels[inside], COLOURS[ids_out[inside]])


def test_mask_and_image_stay_aligned_area(tmp_path):
    ids = blocks(101, 67, (13, 11), seed=7)
    image_path = save(Image.fromarray(COLOURS[ids]), tmp_path / "img.png")
    image = load_image(image_path, Geometry((37, 29)))
    assert image.backend == "spng-decode+opencv-area"
    _assert_interiors_match(image.pixels, resample_mask(ids, image.placement), tolerance=1)


def test_mask_and_reduced_jpeg_stay_aligned(tmp_path):
    ids = blocks(1602, 1203, (97, 89), seed=8)
    image_path = save(Image.fromarray(COLOURS[ids]), tmp_path / "big.jpg", quality=95)
    image = load_image(image_path, Geometry((150, 150)))
    assert image.backend == "opencv-decode/4x-reduced+pillow-hamming"
    _assert_interiors_match(image.pixels, resample_mask(ids, image.placement), tolerance=8)


def _assert_interiors_match(pixels: np.ndarray, ids: np.ndarray, tolerance: int) -> None:
    """Where a 3x3 neighbourhood of the resampled mask is one class, the image has its colour."""
    padded = np.pad(ids.astype(np.int32), 1, constant_values=-1)  # edges never count
    shifts = [
        padded[dy : dy + ids.shape[0], dx : dx + ids.shape[1]] for dy in range(3) for dx in range(3)
    ]
    uniform = np.all([s == ids for s in shifts], axis=0)
    assert uniform.mean() > 0.3
    diff = np.abs(pixels.astype(int) - COLOURS[ids])[uniform]
    assert diff.max() <= tolerance


def test_pad_to_canvas():
    p = place((100, 50), Geometry((60, 60), "fit"))
    ids = np.arange(60 * 30, dtype=np.int32).reshape(30, 60)
    out = pad_to_canvas(ids, p, 255)
    assert out.shape == (60, 60) and out.dtype == np.int32
    assert (out[:15] == 255).all() and (out[45:] == 255).all()
    assert np.array_equal(out[15:45], ids)
    rgb = np.ones((30, 60, 3), np.uint8)
    assert pad_to_canvas(rgb, p, 9)[0, 0].tolist() == [9, 9, 9]
    full = place((60, 60), Geometry((60, 60), "fit"))
    same = np.zeros((60, 60), np.uint8)
    assert pad_to_canvas(same, full, 1) is same
    with pytest.raises(ValueError):
        pad_to_canvas(np.zeros((10, 10)), p, 0)


def test_backend_versions_tell_the_pillow_distribution():
    versions = backend_versions()
    assert versions["opencv"] == cv2.__version__
    providers = {d.lower() for d in importlib.metadata.packages_distributions().get("PIL", [])}
    expected = "pillow-simd" if "pillow-simd" in providers else "pillow"
    assert versions["pillow_flavour"] == expected


def test_pillow_simd_is_the_pil_that_imports():
    """Anything that pulls in plain Pillow reinstalls it over Pillow-SIMD; the install must not."""
    providers = {d.lower() for d in importlib.metadata.packages_distributions().get("PIL", [])}
    assert providers == {"pillow-simd"}
    assert backend_versions()["pillow_flavour"] == "pillow-simd"

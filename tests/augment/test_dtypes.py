"""Images kept as their source has them: uint8, uint16 and float32, 1 to N bands, uint16 masks.

Every executor takes them, returns the input's dtype and bands, and agrees with the others
(geometry identical, pixels within interpolation error); colour is in the images' own units.
"""

from __future__ import annotations

import numpy as np
import pytest

from packer.augment import Augment, numpy_exec
from packer.augment.idg import from_idg
from tests.augment.test_images_and_masks import CONFIGS, FILL_MODES, PALETTE, executors, painted

HW = (56, 64)
SCALE = {"uint8": 255.0, "uint16": 65535.0, "float32": 1.0}  # one uint8 count = SCALE / 255
CASES = {  # name: (dtype, bands)
    "uint16 1-band": ("uint16", 1),
    "uint16 12-band": ("uint16", 12),
    "float32 4-band": ("float32", 4),
    "uint8 5-band": ("uint8", 5),
}
CLASS_STEP = 300  # uint16 class ids 0, 300, 600...: above 255, as a 16-bit index mask has them


def bands(n: int, c: int, dtype: str, hw: tuple[int, int] = HW, seed: int = 1) -> np.ndarray:
    """Smooth random images over the dtype's range (0..1 for float32), each band its own."""
    import cv2

    rng = np.random.default_rng(seed)
    noise = rng.random((n * hw[0], hw[1], c)).astype(np.float32)
    blurred = cv2.GaussianBlur(noise, (0, 0), 2.0).reshape(n, *hw, c)
    unit = np.clip((blurred - 0.5) * 3 + 0.5, 0, 1)
    if dtype == "float32":
        return unit.astype(np.float32)
    return np.rint(unit * SCALE[dtype]).astype(dtype)


def uint16_masks(n: int = 4, hw: tuple[int, int] = HW) -> np.ndarray:
    return painted(n, hw)[1].astype(np.uint16) * CLASS_STEP


def in_uint8_counts(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in counts of a uint8 image (1/255 of the dtype's range; of 0..1 for float32)."""
    return np.abs(a.astype(np.float64) - b.astype(np.float64)) / SCALE[a.dtype.name] * 255


@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("config", ["issue", "strong", "crop", "resized_crop"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_executors_agree_on_every_dtype_and_band_count(case, config, fill_mode):
    dtype, c = CASES[case]
    images, masks = bands(4, c, dtype), uint16_masks()
    count = SCALE[dtype] / 255
    settings = {**CONFIGS[config], "channel_shift_range": 10 * count}
    aug = Augment(**settings, fill_mode=fill_mode, cval=40 * count, seed=11, ignore_index=65535)
    params = aug.draw(3, np.arange(4), HW)
    results = {name: apply(images, masks, params) for name, apply in executors()}
    ref_images, ref_masks = results["numpy"]
    allowed = [*(np.arange(len(PALETTE)) * CLASS_STEP), 65535]
    for name, (got_images, got_masks) in results.items():
        assert got_images.dtype == images.dtype and got_masks.dtype == np.uint16, name
        assert got_images.shape == (4, *params.out_hw, c) == ref_images.shape, name
        assert np.isin(got_masks, allowed).all(), (name, np.unique(got_masks))
        assert (got_masks == ref_masks).mean() >= 0.9999, name
        diff = in_uint8_counts(got_images, ref_images)
        assert diff.mean() < 0.5 and np.percentile(diff, 99.9) <= 3, (name, diff.mean())


@pytest.mark.parametrize("case", sorted(CASES))
def test_flips_are_exact_in_every_dtype(case):
    dtype, c = CASES[case]
    images, masks = bands(2, c, dtype), uint16_masks(2)
    params = from_idg({"flip_horizontal": True}, HW, ignore_index=65535)
    params.matrix = np.repeat(params.matrix, 2, axis=0)
    # float32 has no rounding to hide torch's grid, whose float32 centres sit ~1e-7 px off
    tolerance = 1e-5 if dtype == "float32" else 0
    for name, apply in executors():
        got_images, got_masks = apply(images, masks, params)
        np.testing.assert_allclose(got_images, images[:, :, ::-1], atol=tolerance, err_msg=name)
        np.testing.assert_array_equal(got_masks, masks[:, :, ::-1], err_msg=name)


@pytest.mark.parametrize("c", [5, 7, 12, 13])
def test_each_band_warps_as_it_would_alone(c):
    """OpenCV takes 4 channels a call: wider images go in groups, with the same result."""
    images = bands(2, c, "uint16")
    for settings in (CONFIGS["strong"], CONFIGS["shrink"]):  # a plain warp; an area pre-shrink
        params = Augment(**settings, seed=3).draw(0, [0, 1], HW)
        whole, _ = numpy_exec.apply(images, None, params)
        for k in range(c):
            alone, _ = numpy_exec.apply(np.ascontiguousarray(images[..., k : k + 1]), None, params)
            np.testing.assert_array_equal(whole[..., k : k + 1], alone)


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_deeper_images_warp_as_uint8_ones_do(dtype):
    """The same picture in 8 bits, 16 bits and float warps to the same picture."""
    images8 = bands(3, 3, "uint8")
    deep = images8.astype(np.float32) / 255 * SCALE[dtype]
    deep = deep.astype(dtype) if dtype == "float32" else np.rint(deep).astype(dtype)
    aug = Augment(**CONFIGS["strong"], fill_mode="constant", seed=5)
    params = aug.draw(0, [0, 1, 2], HW)  # brightness only: a factor, the same for every dtype
    for name, apply in executors():
        want, _ = apply(images8, None, params)
        got, _ = apply(deep, None, params)
        diff = in_uint8_counts(got, want.astype(np.float64) / 255 * SCALE[dtype])
        assert diff.max() <= 1.0, (name, diff.max())  # the uint8 result's own rounding


def test_colour_is_in_the_images_own_units():
    """Integer images: the shift rounded to a whole count, then the image's own range, then
    round(v * brightness) saturated to the dtype; float32: neither rounded nor saturated."""
    rng = np.random.default_rng(0)
    hw = (8, 8)
    cases = {
        "uint16": rng.integers(1000, 60000, (1, *hw, 2)).astype(np.uint16),
        "float32": rng.uniform(0.2, 0.9, (1, *hw, 2)).astype(np.float32),
    }
    for dtype, image in cases.items():
        lo, hi = float(image.min()), float(image.max())
        for shift, bright in ((1000.4, None), (-0.25, None), (None, 1.5), (30000.6, 0.5)):
            params = from_idg(
                {"channel_shift_intensity": shift, "brightness": bright}, hw, ignore_index=65535
            )
            want = image.astype(np.float64)
            if shift is not None:
                step = shift if dtype == "float32" else np.rint(shift)
                want = np.clip(want + step, lo, hi)
            if bright is not None:
                want = want * np.float32(bright)
            if dtype == "uint16":
                want = np.clip(np.rint(want), 0, 65535)
            for name, apply in executors():
                got, _ = apply(image, None, params)
                assert got.dtype == image.dtype, name
                tolerance = 0 if dtype == "uint16" else 1e-6
                np.testing.assert_allclose(got, want, atol=tolerance, err_msg=f"{name} {shift}")
    # Saturation at the dtype's top, no clipping for float32 (values above 1 stay).
    bright = from_idg({"brightness": 2.0}, hw)
    for name, apply in executors():
        got, _ = apply(np.full((1, *hw, 1), 40000, np.uint16), None, bright)
        assert (got == 65535).all(), name
        got, _ = apply(np.full((1, *hw, 1), 0.75, np.float32), None, bright)
        assert np.allclose(got, 1.5), name


@pytest.mark.parametrize("fill_mode", FILL_MODES)
def test_out_of_frame_uint16_mask_pixels_are_the_ignore_index(fill_mode):
    images, masks = bands(1, 1, "uint16"), uint16_masks(1)
    params = from_idg(dict(theta=45, zx=1.5, zy=1.5), HW, fill_mode=fill_mode, ignore_index=65535)
    for name, apply in executors():
        _, out = apply(images, masks, params)
        assert out.dtype == np.uint16, name
        assert (out[0, :3, :3] == 65535).all() and (out[0, -3:, -3:] == 65535).all(), name
        assert np.isin(out[out != 65535], np.unique(masks)).all(), name


def test_float32_input_is_left_as_it_was():
    images = bands(2, 3, "float32")
    kept = images.copy()
    params = Augment(rotation_range=30, fill_mode="constant", cval=0.5, seed=0).draw(0, [0, 1], HW)
    for name, apply in executors():
        apply(images, None, params)
        np.testing.assert_array_equal(images, kept, err_msg=name)


def test_a_far_float32_fill_leaves_the_pixels_inside_the_frame_exact():
    """cval -9999 (a nodata value) must not cost the float32 pixels it never touches."""
    images = bands(2, 2, "float32")
    for name, apply in executors():
        got = {}
        for cval in (0.0, -9999.0):
            aug = Augment(rotation_range=30, fill_mode="constant", cval=cval, seed=1)
            got[cval], _ = apply(images, None, aug.draw(0, [0, 1], HW))
        inside = (got[-9999.0] > -1e-3).all(axis=-1)  # no fill blended in
        assert inside.mean() > 0.5, name
        np.testing.assert_allclose(got[-9999.0][inside], got[0.0][inside], atol=1e-6, err_msg=name)


def test_tf_graph_augments_uint16_images_and_masks():
    tf = pytest.importorskip("tensorflow")
    from packer.augment import tf_exec

    images, masks = bands(4, 12, "uint16"), uint16_masks()
    aug = Augment(**CONFIGS["strong"], channel_shift_range=2000, seed=4, ignore_index=65535)
    ds = tf.data.Dataset.from_tensor_slices((images, masks, np.arange(4))).batch(2)
    ds = ds.map(lambda i, m, idx: tf_exec.augment(aug, i, m, 1, idx))
    got = [(i.numpy(), m.numpy()) for i, m in ds]
    want = tf_exec.apply(images, masks, aug.draw(1, np.arange(4), HW))
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), want[0].numpy())
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), want[1].numpy())
    assert got[0][0].dtype == np.uint16 and got[0][1].dtype == np.uint16


@pytest.mark.parametrize(
    ("images", "masks", "settings", "message"),
    [
        (np.float64, None, {}, "uint8, uint16 or float32"),
        (np.int16, None, {}, "uint8, uint16 or float32"),
        (np.uint8, None, {"cval": 300}, "cval 300 is outside the range of uint8"),
        (np.uint16, None, {"cval": 70000}, "cval 70000 is outside the range of uint16"),
        (np.uint16, None, {"cval": -1}, "cval -1 is outside"),
        (np.uint8, np.uint8, {"ignore_index": 300}, "ignore_index 300 does not fit uint8"),
        (np.uint8, np.int32, {}, "masks must be uint8"),
    ],
)
def test_what_a_dtype_cannot_take_is_refused_in_one_line(images, masks, settings, message):
    aug = Augment(**settings, seed=0)
    params = aug.draw(0, [0], (8, 8))
    batch = np.zeros((1, 8, 8, 3), images)
    mask_batch = None if masks is None else np.zeros((1, 8, 8), masks)
    for name, apply in executors():
        with pytest.raises(ValueError, match=message) as refused:
            apply(batch, mask_batch, params)
        assert "\n" not in str(refused.value), name
    with pytest.raises(ValueError, match=message.split(" is ")[0].split(" does ")[0]):
        aug.check_dtypes(images, masks)


def test_what_fits_is_taken():
    Augment(cval=1000, ignore_index=65535, seed=0).check_dtypes("uint16", "uint16")
    Augment(cval=-3.5, seed=0).check_dtypes(np.float32, np.uint8)
    with pytest.raises(ValueError, match=r"0\.\.65535"):
        Augment(ignore_index=65536)
    with pytest.raises(ValueError, match="finite"):
        Augment(cval=float("nan"))

"""NumPy/OpenCV executor: one cv2.warpAffine per image and per mask, in-place colour.

Used by the NumPy readers (Keras `PackedSequence`, `packer.torch` on CPU). OpenCV's maps
take pixel centres at integers, the convention `AugmentParams.matrix` is written in.
Images of any dtype and channel count `dtypes` takes: OpenCV's warpAffine and INTER_AREA
resize serve at most 4 channels (OpenCV 5 warps more, by another path whose rounding
differs), so wider images go in groups of 4 bands and every band is warped exactly as it
would be alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from packer.augment.dtypes import check_fill, check_images, check_masks, value_range
from packer.augment.moves import input_field, moves
from packer.augment.numpy_targets import move_points, move_rows, move_targets
from packer.augment.params import AugmentParams

BORDERS = {
    "constant": cv2.BORDER_CONSTANT,
    "nearest": cv2.BORDER_REPLICATE,
    "reflect": cv2.BORDER_REFLECT,  # dcba|abcd|dcba, scipy's "reflect"
    "wrap": cv2.BORDER_WRAP,
}
# Shrinking by this factor or more first averages source pixels (INTER_AREA).
AREA_SHRINK = 2.0
GROUP = 4  # channels per OpenCV call


def _check(images: np.ndarray, masks: np.ndarray | None, params: AugmentParams) -> None:
    check_images(images.dtype.name, images.shape)
    _fits(images, params, "images")
    check_fill(params.cval, images.dtype.name)
    if masks is not None:
        check_masks(masks.dtype.name, masks.shape, images.shape, params.ignore_index)


def _output(given: np.ndarray | None, shape: tuple, dtype, name: str) -> np.ndarray:
    if given is None:
        return np.empty(shape, dtype)
    if given.shape != shape or given.dtype != dtype or not given.flags.c_contiguous:
        raise ValueError(
            f"out {name} must be a C-contiguous {np.dtype(dtype)} array of shape {shape}, "
            f"got {given.dtype} {given.shape}"
        )
    return given


def shrink_factors(matrix: np.ndarray) -> np.ndarray:
    """[B, 2] whole source pixels per output pixel along x and y (row norms of the map)."""
    return np.floor(np.hypot(matrix[:, :, 0], matrix[:, :, 1]))


def _area_preshrink(
    image: np.ndarray, matrix: np.ndarray, factors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Average the source down by ``factors`` (x, y); the matrix that maps into the result."""
    h, w = image.shape[:2]
    fx, fy = max(factors[0], 1.0), max(factors[1], 1.0)
    ws, hs = max(1, round(w / fx)), max(1, round(h / fy))
    if image.ndim == 3 and image.shape[2] > GROUP:
        small = np.concatenate(
            [
                cv2.resize(
                    np.ascontiguousarray(image[..., a : a + GROUP]),
                    (ws, hs),
                    interpolation=cv2.INTER_AREA,
                ).reshape(hs, ws, -1)
                for a in range(0, image.shape[2], GROUP)
            ],
            axis=2,
        )
    else:
        small = cv2.resize(image, (ws, hs), interpolation=cv2.INTER_AREA)
    sx, sy = ws / w, hs / h
    scaled = matrix * np.array([[sx], [sy]])
    scaled[:, 2] += np.array([0.5 * sx - 0.5, 0.5 * sy - 0.5])
    return small.reshape(hs, ws, *image.shape[2:]), scaled


FLAGS = {"linear": cv2.INTER_LINEAR, "area": cv2.INTER_LINEAR, "nearest": cv2.INTER_NEAREST,
         "cubic": cv2.INTER_CUBIC}  # fmt: skip


def apply(
    images: np.ndarray,
    masks: np.ndarray | None,
    params: AugmentParams,
    *,
    out: tuple[np.ndarray | None, np.ndarray | None] | None = None,
    targets: Sequence[Mapping] | None = None,
    geometries: Mapping[str, Any] | None = None,
) -> tuple[Any, ...]:
    """Warp ``images`` (bilinear) and ``masks`` (nearest) by ``params``; colour the images.

    images: uint8/uint16/float32 [B, H, W, C], any C (see `dtypes` for the rounding,
    clipping and colour units); masks: uint8/uint16 [B, H, W] or None. Out-of-frame mask
    pixels become ``params.ignore_index``; images fill per ``params.fill_mode``. ``out``
    is an optional (images, masks) pair of C-contiguous arrays to write into.
    Returns (images, masks) of ``params.out_hw``; given ``targets`` (one detection dict
    per sample, see `numpy_targets`; keys moved by ``geometries`` or the convention of
    `moves`), (images, masks, moved targets).
    """
    _check(images, masks, params)
    out_images, out_masks = out if out is not None else (None, None)
    out_images = warp_pixels(images, params, coloured=True, out=out_images)
    if masks is not None:
        out_masks = warp_labels(masks, params, out=out_masks)
    if targets is not None:
        return out_images, out_masks, move_targets(params, targets, geometries)
    return out_images, out_masks


def apply_fields(
    arrays: Mapping[str, np.ndarray],
    params: AugmentParams,
    fields: Iterable[Any] | Mapping[str, Any],
    *,
    counts: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """A batch's fields (name -> array) moved by their kinds' geometry: what the readers call.

    ``fields``: the pack's `schema.Field` objects, or name -> geometry (`moves.moves`). Fixed
    fields ``[B, ...]``: "pixels" warped with their interpolation (the first one, the image,
    coloured too), "labels" nearest with the ignore index outside, "points" moved, "none" as
    they are. Ragged fields hold every object's row, sample after sample, ``counts`` [B] per
    sample (`numpy_targets.move_rows`). Returns (moved arrays, the objects' new counts).
    """
    found = moves(fields)
    unknown = [name for name in arrays if name not in found]
    if unknown:
        raise ValueError(f"no field named {unknown[0]!r} among {', '.join(found)}")
    coloured = input_field(found)
    moved: dict[str, np.ndarray] = {}
    for name, array in arrays.items():
        move = found[name]
        if move.ragged:
            continue
        if len(array) != len(params):
            raise ValueError(f"{name}: {len(array)} rows for a batch of {len(params)} samples")
        if move.geometry == "pixels":
            moved[name] = warp_pixels(
                array, params, move.interpolation, name == coloured, name=name
            )
        elif move.geometry == "labels":
            moved[name] = warp_labels(array, params, name=name)
        elif move.geometry == "points":
            forward = params.box_matrix.reshape(-1, 6)
            moved[name] = move_points(array, forward, params.out_hw, move.flip_order)
        else:
            moved[name] = array
    rows = {name: array for name, array in arrays.items() if found[name].ragged}
    if rows:
        if counts is None:
            raise ValueError(f"ragged fields {', '.join(rows)} need the samples' object counts")
        rows, counts = move_rows(params, rows, counts, {name: found[name] for name in rows})
    return moved | rows, counts


def warp_pixels(
    array: np.ndarray,
    params: AugmentParams,
    interpolation: str = "linear",
    coloured: bool = False,
    *,
    out: np.ndarray | None = None,
    name: str = "images",
) -> np.ndarray:
    """``[B, H, W, C]`` (or one band ``[B, H, W]``) warped with ``interpolation``; with
    ``coloured``, the drawn colour changes too (`colour`). "linear" and "area" are the
    images' warp: bilinear, averaging the source first when shrinking by 2 or more
    (`AREA_SHRINK`); "nearest" samples as masks do (ties nudged alike in every executor)."""
    array = np.ascontiguousarray(array)
    bands = array if array.ndim == 4 else array[..., None]
    check_images(bands.dtype.name, bands.shape)
    _fits(bands, params, name)
    check_fill(params.cval, bands.dtype.name)
    b, _, _, c = bands.shape
    ho, wo = params.out_hw
    result = _output(out, (b, ho, wo, *array.shape[3:]), array.dtype, name)
    target = result if array.ndim == 4 else result[..., None]
    warp_image = _ImageWarp(params, c, bands.dtype, FLAGS[interpolation])
    nearest = interpolation == "nearest"
    matrices = params.mask_matrix if nearest else params.matrix
    factors = shrink_factors(params.matrix)
    shrink = (factors.max(axis=1) >= AREA_SHRINK) & (interpolation in ("linear", "area"))
    for i in range(b):
        src, matrix = bands[i], matrices[i]
        if shrink[i]:  # bilinear sampling alone would skip source pixels and alias
            src, matrix = _area_preshrink(src, matrix, factors[i])
        warp_image(src, matrix, target[i])
        if coloured and params.has_colour:  # while the image is still in cache
            colour(target[i].reshape(ho, wo * c), params, i)
    return result


def warp_labels(
    masks: np.ndarray, params: AugmentParams, *, out: np.ndarray | None = None, name="masks"
) -> np.ndarray:
    """Class-id planes ``[B, H, W]`` sampled nearest; out-of-frame pixels the ignore index."""
    masks = np.ascontiguousarray(masks)
    check_masks(masks.dtype.name, masks.shape, masks.shape, params.ignore_index)
    _fits(masks, params, name)
    ho, wo = params.out_hw
    result = _output(out, (len(masks), ho, wo), masks.dtype, name)
    matrix, fill = params.mask_matrix, (params.ignore_index,) * 4
    for i in range(len(masks)):
        dst = result[i]
        got = cv2.warpAffine(
            masks[i],
            matrix[i],
            (wo, ho),
            dst=dst,
            flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=fill,
        )
        if got is not dst:
            dst[...] = got
    return result


def _fits(array: np.ndarray, params: AugmentParams, name: str) -> None:
    if array.shape[0] != len(params) or tuple(array.shape[1:3]) != params.in_hw:
        raise ValueError(
            f"{name} {array.shape} do not match the parameters "
            f"({len(params)} samples of {params.in_hw})"
        )


class _ImageWarp:
    """Bilinear warps of one batch's images, groups of at most 4 bands at a time.

    OpenCV's vectorised warpAffine serves 1 and 4 channels; 3 take a path about twice as
    slow, more than the two cvtColor passes that add and drop a fourth channel cost, so a
    3-band group goes through reused 4-channel buffers. Images of more than 4 bands are cut
    into groups of 4 (the last may be narrower) through reused contiguous buffers; the
    destination must be C-contiguous (`apply` makes it so).
    """

    def __init__(
        self, params: AugmentParams, channels: int, dtype: np.dtype, flags: int = cv2.INTER_LINEAR
    ) -> None:
        self.size = (params.out_hw[1], params.out_hw[0])
        self.out_hw = params.out_hw
        self.border = BORDERS[params.fill_mode]
        self.fill = (params.cval,) * 4
        self.dtype = dtype
        self.flags = flags | cv2.WARP_INVERSE_MAP
        self.groups = [(a, min(a + GROUP, channels)) for a in range(0, channels, GROUP)]
        self.buffers: dict[tuple, np.ndarray] = {}

    def _buffer(self, name: str, shape: tuple) -> np.ndarray:
        """A reused C-contiguous scratch array of this batch's dtype."""
        key = (name, *shape)
        if key not in self.buffers:
            self.buffers[key] = np.empty(shape, self.dtype)
        return self.buffers[key]

    def __call__(self, src: np.ndarray, matrix: np.ndarray, dst: np.ndarray) -> None:
        if len(self.groups) == 1:
            self._warp(src, matrix, dst)
            return
        for a, b in self.groups:  # mixChannels: ~2x NumPy's strided copies of 4 bands
            n = b - a
            part = self._buffer("in", (*src.shape[:2], n))
            cv2.mixChannels([src], [part], _pairs(a, 0, n))
            warped = self._buffer("out", (*self.out_hw, n))
            self._warp(part, matrix, warped)
            cv2.mixChannels([warped], [dst], _pairs(0, a, n))

    def _warp(self, src: np.ndarray, matrix: np.ndarray, dst: np.ndarray) -> None:
        """One OpenCV warp of a C-contiguous source of at most 4 bands into ``dst``."""
        target = dst
        rgb = src.shape[2] == 3
        if rgb:
            four = cv2.cvtColor(
                src, cv2.COLOR_RGB2RGBA, dst=self._buffer("in4", (*src.shape[:2], 4))
            )
            src, target = four, self._buffer("out4", (*self.out_hw, 4))
        elif src.shape[2] == 1:  # OpenCV drops a single channel axis; warp the 2-D views
            src, target = src[..., 0], dst[..., 0]
        got = cv2.warpAffine(
            src,
            matrix,
            self.size,
            dst=target,
            flags=self.flags,
            borderMode=self.border,
            borderValue=self.fill,
        )
        if got is not target:
            target[...] = got.reshape(target.shape)
        if rgb:
            got = cv2.cvtColor(target, cv2.COLOR_RGBA2RGB, dst=dst)
            if got is not dst:
                dst[...] = got


def _pairs(source: int, target: int, n: int) -> list[int]:
    """cv2.mixChannels' fromTo list: bands source.. of one array to target.. of another."""
    return [k for i in range(n) for k in (source + i, target + i)]


def colour(flat: np.ndarray, params: AugmentParams, i: int) -> None:
    """Sample ``i``'s channel shift then brightness, in place on its [H, W*C] view.

    Integer images: z = clip(v + round(shift), lo, hi), lo/hi the image's own range
    (ImageDataGenerator clips there); then round(z * brightness), saturated to the dtype.
    Saturating SIMD arithmetic: a cv2.LUT is a scalar loop, several times slower here.
    float32 images: the same without rounding or saturation (`dtypes`).
    """
    bounds = value_range(flat.dtype)
    if bounds is None:
        _colour_float(flat, params, i)
        return
    top = bounds[1]
    if params.channel_shift is not None:
        shift = int(np.rint(params.channel_shift[i]))
        lo, hi, _, _ = cv2.minMaxLoc(flat)
        if shift > 0:
            cv2.add(flat, shift, dst=flat)  # saturates at the dtype's maximum itself
            if hi < top:
                cv2.min(flat, hi, dst=flat)
        elif shift < 0:
            cv2.subtract(flat, -shift, dst=flat)  # saturates at 0 itself
            if lo > 0:
                cv2.max(flat, lo, dst=flat)
    if params.brightness is not None:
        factor = float(params.brightness[i])
        if flat.dtype == np.uint8:
            cv2.convertScaleAbs(flat, dst=flat, alpha=factor)
        else:  # saturating, rounding half to even as convertScaleAbs does
            cv2.addWeighted(flat, factor, flat, 0.0, 0.0, dst=flat)


def _colour_float(flat: np.ndarray, params: AugmentParams, i: int) -> None:
    """`colour` for float32 images: the shift as drawn, clipped to the image's own range;
    brightness multiplies; float32 arithmetic, as the tf and torch executors do it."""
    if params.channel_shift is not None:
        lo, hi, _, _ = cv2.minMaxLoc(flat)
        np.add(flat, np.float32(params.channel_shift[i]), out=flat)
        np.clip(flat, np.float32(lo), np.float32(hi), out=flat)
    if params.brightness is not None:
        np.multiply(flat, np.float32(params.brightness[i]), out=flat)

"""`Augment`: what to draw, in ImageDataGenerator's argument names and meanings.

Validated once here; `drawing.draw` turns it into per-sample numbers and the executors
(NumPy/OpenCV, TensorFlow, torch) apply those numbers to images and masks.
"""

from __future__ import annotations

import numbers
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from packer.augment.drawing import draw
from packer.augment.dtypes import IMAGE_DTYPES, check_fill, check_ignore
from packer.augment.idg import elsewhere
from packer.augment.params import AugmentParams

FILL_MODES = ("constant", "nearest", "reflect", "wrap")


def _number(name: str, value: Any, *, minimum: float | None = 0.0) -> float:
    """``value`` as a finite float, at least ``minimum`` (None: any)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be a finite number >= {minimum:g}, got {value!r}")
    return float(value)


def _pair(name: str, value: Any, *, minimum: float = 0.0) -> tuple[float, float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a pair (low, high), got {value!r}")
    lo, hi = (_number(name, v, minimum=minimum) for v in value)
    if lo > hi:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {value!r}")
    return lo, hi


def _size(name: str, value: Any) -> tuple[int, int]:
    ok = isinstance(value, Sequence) and len(value) == 2
    if not ok or not all(isinstance(v, numbers.Integral) and v > 0 for v in value):
        raise ValueError(f"{name} must be (height, width) in positive ints, got {value!r}")
    return int(value[0]), int(value[1])


def _shift_range(name: str, value: Any) -> tuple[str, Any, bool]:
    """ImageDataGenerator's reading of a shift range: (kind, values, is_fraction).

    A float is a uniform range (a fraction of the size when < 1, pixels otherwise); an
    int n draws one of 0..n-1 pixels; a list draws one of its values; both with a random
    sign, and list values < 1 are fractions of the size.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a float, an int or a list of numbers, got {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(_number(name, value))
        return ("none", 0.0, False) if n == 0 else ("choice", np.arange(n, dtype=np.float64), False)
    if isinstance(value, numbers.Real):
        r = _number(name, value)
        return ("none", 0.0, False) if r == 0 else ("uniform", r, r < 1)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{name} must be a float, an int or a list of numbers, got {value!r}")
    values = np.array([_number(name, v, minimum=-np.inf) for v in value], dtype=np.float64)
    return "choice", values, bool(values.max() < 1)


def _argument_names() -> list[str]:
    """Augment's own argument names, for the hint at a misspelt one."""
    import inspect

    return [p for p in inspect.signature(Augment).parameters if p != "imagedatagenerator"]


class Augment:
    """Random image + mask augmentation with ImageDataGenerator's arguments.

    Per sample one affine map (flip, rotation, shear, zoom, shift and any random crop
    folded together) and one warp: bilinear images (area pre-shrink when shrinking 2x or
    more), nearest masks whose out-of-frame pixels become ``ignore_index`` whatever
    ``fill_mode`` is; colour changes (``channel_shift_range``, ``brightness_range``) on
    images only. ``shear_range`` and ``rotation_range`` are degrees. Numbers are drawn per
    (seed, epoch, sample index), so batches do not depend on worker count or reader.

    Detection targets move with the image (``targets=``): each box's corners through the
    sample's map, their hull clipped to the output frame; an object whose clipped box keeps
    less than ``min_visibility`` of the moved box's area (albumentations' meaning), or whose
    clipped width or height is 0 or below ``min_box_size`` pixels, is dropped with its label,
    mask and flags. Per-object masks are sampled as the class-id mask, 0 out of frame.

    Images stay in their dtype and bands: uint8, uint16 or float32, any channel count;
    masks uint8 or uint16 (``ignore_index`` up to 65535 for uint16 masks). ``cval`` and
    ``channel_shift_range`` are in the images' own units (ImageDataGenerator's meaning:
    10 is 10 counts of a uint8 or a uint16 image, 10.0 of a float32 one); integer images
    are rounded and saturated to their dtype, float32 images are not (`dtypes`).

    ``random_crop=(H, W)`` cuts a random H x W window; ``random_resized_crop=dict(size=(H, W),
    scale=(0.08, 1), ratio=(3/4, 4/3))`` is torchvision's RandomResizedCrop. ``seed=None``
    draws one seed now and keeps it (copies sent to workers agree).

    Differences from ImageDataGenerator: ``width_shift_range`` moves columns and
    ``height_shift_range`` rows (Keras 3's legacy code swaps them), rotation is about the
    true centre of non-square images, and ``wrap`` is periodic (scipy's "grid-wrap").
    ImageDataGenerator's other arguments (``rescale``, ``validation_split``,
    ``featurewise_center``...) are refused with where each goes in packer (`idg.ELSEWHERE`).
    """

    def __init__(
        self,
        rotation_range: float = 0,
        width_shift_range: Any = 0.0,
        height_shift_range: Any = 0.0,
        zoom_range: float | Sequence[float] = 0.0,
        shear_range: float = 0.0,
        channel_shift_range: float = 0.0,
        brightness_range: Sequence[float] | None = None,
        horizontal_flip: bool = False,
        vertical_flip: bool = False,
        fill_mode: str = "nearest",
        cval: float = 0.0,
        random_crop: Sequence[int] | None = None,
        random_resized_crop: dict | None = None,
        seed: int | None = None,
        ignore_index: int = 255,
        min_visibility: float = 0.0,
        min_box_size: float = 0.0,
        **imagedatagenerator: Any,
    ) -> None:
        if imagedatagenerator:  # ImageDataGenerator's other arguments: say where they go
            raise elsewhere(imagedatagenerator, _argument_names())
        self.rotation_range = _number("rotation_range", rotation_range)
        self.width_shift_range = width_shift_range
        self.height_shift_range = height_shift_range
        self.shift_x = _shift_range("width_shift_range", width_shift_range)
        self.shift_y = _shift_range("height_shift_range", height_shift_range)
        if isinstance(zoom_range, numbers.Real) and not isinstance(zoom_range, bool):
            z = _number("zoom_range", zoom_range)
            if z >= 1:
                raise ValueError(f"zoom_range as one number must be < 1 (zoom 1 +- it), got {z}")
            self.zoom_bounds = (1.0 - z, 1.0 + z)
        else:
            self.zoom_bounds = _pair("zoom_range", zoom_range)
            if self.zoom_bounds[0] <= 0:
                raise ValueError(f"zoom_range must be > 0, got {zoom_range!r}")
        self.zoom_range = zoom_range
        self.shear_range = _number("shear_range", shear_range)
        if self.shear_range >= 90:
            raise ValueError(f"shear_range is in degrees and must be < 90, got {shear_range}")
        self.channel_shift_range = _number("channel_shift_range", channel_shift_range)
        self.brightness_range = (
            None if brightness_range is None else _pair("brightness_range", brightness_range)
        )
        for name, flag in (("horizontal_flip", horizontal_flip), ("vertical_flip", vertical_flip)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {flag!r}")
        self.horizontal_flip, self.vertical_flip = bool(horizontal_flip), bool(vertical_flip)
        if fill_mode not in FILL_MODES:
            raise ValueError(f"fill_mode must be one of {', '.join(FILL_MODES)}; got {fill_mode!r}")
        self.fill_mode = fill_mode
        self.cval = _number("cval", cval, minimum=None)  # the images' range: check_dtypes
        self.random_crop = None if random_crop is None else _size("random_crop", random_crop)
        self.random_resized_crop = random_resized_crop
        if random_resized_crop is not None:
            self._check_resized_crop(random_resized_crop)
            if random_crop is not None:
                raise ValueError("give random_crop or random_resized_crop, not both")
        if seed is None:
            seed = secrets.randbits(63)
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}")
        self.seed = int(seed)
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
            raise ValueError(f"ignore_index must be an int in 0..65535, got {ignore_index!r}")
        if not 0 <= ignore_index <= 65535:
            raise ValueError(
                f"ignore_index must be in 0..65535 (0..255 for uint8 masks), got {ignore_index}"
            )
        self.ignore_index = int(ignore_index)
        self.min_visibility = _number("min_visibility", min_visibility)
        if self.min_visibility > 1:
            raise ValueError(f"min_visibility is a fraction in 0..1, got {min_visibility}")
        self.min_box_size = _number("min_box_size", min_box_size)

    def _check_resized_crop(self, spec: Any) -> None:
        if not isinstance(spec, dict) or "size" not in spec:
            raise ValueError(
                "random_resized_crop must be a dict like "
                f"dict(size=(H, W), scale=(0.08, 1), ratio=(3/4, 4/3)); got {spec!r}"
            )
        unknown = set(spec) - {"size", "scale", "ratio"}
        if unknown:
            raise ValueError(f"random_resized_crop has unknown keys {sorted(unknown)}")
        self.rrc_size = _size("random_resized_crop size", spec["size"])
        self.rrc_scale = _pair("random_resized_crop scale", spec.get("scale", (0.08, 1.0)))
        if not (self.rrc_scale[0] > 0 and self.rrc_scale[1] <= 1):
            raise ValueError(f"random_resized_crop scale must lie in (0, 1], got {spec['scale']!r}")
        self.rrc_ratio = _pair("random_resized_crop ratio", spec.get("ratio", (3 / 4, 4 / 3)))
        if self.rrc_ratio[0] <= 0:
            raise ValueError(f"random_resized_crop ratio must be > 0, got {spec['ratio']!r}")

    def output_hw(self, image_hw: tuple[int, int]) -> tuple[int, int]:
        """(height, width) of the augmented images for inputs of ``image_hw``."""
        h, w = int(image_hw[0]), int(image_hw[1])
        if self.random_crop is not None:
            ch, cw = self.random_crop
            if ch > h or cw > w:
                raise ValueError(f"random_crop {(ch, cw)} is larger than the images {(h, w)}")
            return ch, cw
        if self.random_resized_crop is not None:
            return self.rrc_size
        return h, w

    def check_dtypes(self, image_dtype: Any, mask_dtype: Any = None) -> None:
        """Refuse now, in one line, what these settings cannot do to images (and masks) of
        these dtypes: an unsupported dtype, a ``cval`` outside the images' range, an
        ``ignore_index`` the masks cannot hold. The executors check the same at each batch;
        a reader calls this once when it knows its pack's dtypes. NumPy dtypes or names."""
        image = np.dtype(image_dtype).name
        if image not in IMAGE_DTYPES:
            raise ValueError(f"Augment takes uint8, uint16 or float32 images, not {image}")
        check_fill(self.cval, image)
        if mask_dtype is not None:
            check_ignore(self.ignore_index, np.dtype(mask_dtype).name)

    @property
    def has_colour(self) -> bool:
        """Whether images get a colour change."""
        return bool(self.channel_shift_range) or self.brightness_range is not None

    def draw(self, epoch: int, indices, image_hw: tuple[int, int]) -> AugmentParams:
        """The parameters of samples ``indices`` in ``epoch`` (see `packer.augment.drawing`)."""
        return draw(self, epoch, indices, image_hw)

    def apply(
        self,
        images: np.ndarray,
        masks: np.ndarray | None = None,
        *,
        epoch: int,
        indices,
        out: tuple[np.ndarray, np.ndarray | None] | None = None,
        targets: Sequence[dict] | None = None,
        geometries: dict[str, Any] | None = None,
    ) -> tuple[Any, ...]:
        """Draw for ``indices`` and apply with the NumPy/OpenCV executor.

        Returns (images, masks), or (images, masks, targets) when ``targets`` (one dict per
        sample of per-object rows: boxes, labels, optional per-object masks, keypoints) are
        given. Their keys move by ``geometries`` (key -> "boxes", "points", "planes" or
        "none", or a `moves.Move`: points with a flip order) or, without it, as
        albumentations and torchvision name them: "boxes" boxes, "masks" per-object masks,
        "keypoints" points, others ride along."""
        from packer.augment.numpy_exec import apply  # OpenCV on first use only

        params = self.draw(epoch, indices, images.shape[1:3])
        return apply(images, masks, params, out=out, targets=targets, geometries=geometries)

    def __repr__(self) -> str:
        names = (
            "rotation_range", "width_shift_range", "height_shift_range", "zoom_range",
            "shear_range", "channel_shift_range", "brightness_range", "horizontal_flip",
            "vertical_flip", "fill_mode", "cval", "random_crop", "random_resized_crop",
            "seed", "ignore_index", "min_visibility", "min_box_size",
        )  # fmt: skip
        return f"Augment({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

"""One seeded draw of per-sample augmentation parameters, shared by every executor.

Each sample's numbers come from a counter-based hash of (seed, epoch, sample index, slot):
no generator state, so a sample gets the same parameters whatever batch, worker or reader
draws it, and a whole batch is drawn with a handful of vectorised NumPy operations.
All geometry is folded into one 2x3 matrix per sample (output pixel -> input pixel).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from packer.augment.params import AugmentParams

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)

# Uniform slots per sample; each random quantity has its own, so switching one option on
# or off never changes the numbers another option gets.
THETA, SHIFT_X, SIGN_X, SHIFT_Y, SIGN_Y, SHEAR, ZOOM_X, ZOOM_Y = range(8)
HFLIP, VFLIP, CHANNEL, BRIGHTNESS, CROP_Y, CROP_X = range(8, 14)
RRC_ATTEMPTS = 10  # torchvision's RandomResizedCrop: 10 tries, then a central crop
RRC = 14  # 4 slots per try: area, log ratio, y, x
SLOTS = RRC + 4 * RRC_ATTEMPTS


class Settings(Protocol):
    """What the draw reads of an `Augment` (spec.py), which validates it.

    A protocol rather than the class itself: spec imports this module, so this one must not
    import spec back. Shift ranges are `spec._shift_range`'s (kind, values, is_fraction).
    """

    seed: int
    rotation_range: float
    shift_x: tuple[str, Any, bool]
    shift_y: tuple[str, Any, bool]
    shear_range: float
    zoom_bounds: tuple[float, float]
    horizontal_flip: bool
    vertical_flip: bool
    random_crop: tuple[int, int] | None
    random_resized_crop: dict | None
    rrc_scale: tuple[float, float]  # set only with random_resized_crop
    rrc_ratio: tuple[float, float]
    channel_shift_range: float
    brightness_range: tuple[float, float] | None
    fill_mode: str
    cval: float
    ignore_index: int
    min_visibility: float
    min_box_size: float

    def output_hw(self, image_hw: tuple[int, int]) -> tuple[int, int]: ...


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective, well-mixing hash of uint64 values."""
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z = (z ^ (z >> np.uint64(27))) * _MUL2
    return z ^ (z >> np.uint64(31))


def uniforms(seed: int, epoch: int, indices: np.ndarray, slots: int) -> np.ndarray:
    """float64 [B, slots] in [0, 1): a pure function of (seed, epoch, index, slot)."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], np.uint64) * _GOLDEN + _GOLDEN)
        key = _mix(key + np.uint64(epoch + 1) * _GOLDEN)
        key = _mix(key + (indices.astype(np.uint64) + np.uint64(1)) * _GOLDEN)
        counters = (np.arange(1, slots + 1, dtype=np.uint64) * _GOLDEN)[None, :]
        bits = _mix(key[:, None] + counters) >> np.uint64(11)
    return bits.astype(np.float64) * (1.0 / (1 << 53))


def affine(
    theta: np.ndarray,
    shift_x: np.ndarray,
    shift_y: np.ndarray,
    shear: np.ndarray,
    zoom_x: np.ndarray,
    zoom_y: np.ndarray,
    frame_hw: tuple[int, int],
) -> np.ndarray:
    """[B, 3, 3] output -> input maps, composed as ImageDataGenerator composes them.

    rotation @ shift @ shear @ zoom about the frame centre; angles in degrees. The shift
    and zoom act on x (columns) and y (rows) as named.
    """
    t, s = np.deg2rad(theta), np.deg2rad(shear)
    cos, sin = np.cos(t), np.sin(t)
    sh_x, sh_y = -np.sin(s), np.cos(s)
    # R @ T @ S @ Z in closed form (T = shift, S = shear, Z = zoom).
    m = np.zeros((len(theta), 3, 3))
    m[:, 0, 0] = cos * zoom_x
    m[:, 0, 1] = (cos * sh_x - sin * sh_y) * zoom_y
    m[:, 0, 2] = cos * shift_x - sin * shift_y
    m[:, 1, 0] = sin * zoom_x
    m[:, 1, 1] = (sin * sh_x + cos * sh_y) * zoom_y
    m[:, 1, 2] = sin * shift_x + cos * shift_y
    m[:, 2, 2] = 1.0
    return about_centre(m, frame_hw)


def about_centre(m: np.ndarray, frame_hw: tuple[int, int]) -> np.ndarray:
    """offset @ m @ offset^-1 with the offset to the frame's centre pixel."""
    h, w = frame_hw
    cx, cy = w / 2 - 0.5, h / 2 - 0.5
    out = m.copy()
    out[:, 0, 2] += cx - m[:, 0, 0] * cx - m[:, 0, 1] * cy
    out[:, 1, 2] += cy - m[:, 1, 0] * cx - m[:, 1, 1] * cy
    return out


def flips(horizontal: np.ndarray, vertical: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """[B, 3, 3] output -> pre-flip maps: x -> W-1-x and/or y -> H-1-y."""
    h, w = out_hw
    f = np.zeros((len(horizontal), 3, 3))
    f[:, 0, 0] = np.where(horizontal, -1.0, 1.0)
    f[:, 0, 2] = np.where(horizontal, w - 1.0, 0.0)
    f[:, 1, 1] = np.where(vertical, -1.0, 1.0)
    f[:, 1, 2] = np.where(vertical, h - 1.0, 0.0)
    f[:, 2, 2] = 1.0
    return f


def _shift(aug_range, u_value, u_sign, size: int) -> np.ndarray:
    """ImageDataGenerator's shift draw: a float range is uniform, an int or list a choice."""
    kind, values, fraction = aug_range
    if kind == "none":
        return np.zeros_like(u_value)
    if kind == "uniform":
        shift = (2.0 * u_value - 1.0) * values
    else:
        pick = np.minimum((u_value * len(values)).astype(np.int64), len(values) - 1)
        shift = values[pick] * np.where(u_sign < 0.5, -1.0, 1.0)
    return shift * size if fraction else shift


def _crop_boxes(aug: Settings, u: np.ndarray, in_hw: tuple[int, int]) -> np.ndarray | None:
    """float64 [B, 4] source boxes (x0, y0, width, height), or None without a crop."""
    h, w = in_hw
    if aug.random_crop is not None:
        ch, cw = aug.random_crop
        y0 = np.floor(u[:, CROP_Y] * (h - ch + 1))
        x0 = np.floor(u[:, CROP_X] * (w - cw + 1))
        return np.stack([x0, y0, np.full_like(x0, cw), np.full_like(y0, ch)], axis=1)
    if aug.random_resized_crop is None:
        return None
    (s0, s1), (r0, r1) = aug.rrc_scale, aug.rrc_ratio
    tries = u[:, RRC:].reshape(len(u), RRC_ATTEMPTS, 4)
    area = h * w * (s0 + tries[..., 0] * (s1 - s0))
    ratio = np.exp(np.log(r0) + tries[..., 1] * (np.log(r1) - np.log(r0)))
    cw = np.rint(np.sqrt(area * ratio))
    ch = np.rint(np.sqrt(area / ratio))
    ok = (cw > 0) & (cw <= w) & (ch > 0) & (ch <= h)
    first = np.argmax(ok, axis=1)
    rows = np.arange(len(u))
    cw, ch, ok = cw[rows, first], ch[rows, first], ok[rows, first]
    y0 = np.floor(tries[rows, first, 2] * (h - ch + 1))
    x0 = np.floor(tries[rows, first, 3] * (w - cw + 1))
    # No try fitted: torchvision's fallback, the central crop with the ratio clamped.
    in_ratio = w / h
    fcw, fch = (
        (w, round(w / r0)) if in_ratio < r0 else (round(h * r1), h) if in_ratio > r1 else (w, h)
    )
    cw, ch = np.where(ok, cw, fcw), np.where(ok, ch, fch)
    x0, y0 = np.where(ok, x0, (w - fcw) // 2), np.where(ok, y0, (h - fch) // 2)
    return np.stack([x0, y0, cw, ch], axis=1)


def crop_maps(boxes: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """[B, 3, 3] maps from the output frame to each source box (pixel centres kept)."""
    h, w = out_hw
    sx, sy = boxes[:, 2] / w, boxes[:, 3] / h
    c = np.zeros((len(boxes), 3, 3))
    c[:, 0, 0], c[:, 1, 1], c[:, 2, 2] = sx, sy, 1.0
    c[:, 0, 2] = boxes[:, 0] + 0.5 * sx - 0.5
    c[:, 1, 2] = boxes[:, 1] + 0.5 * sy - 0.5
    return c


def draw(aug: Settings, epoch: int, indices, image_hw: tuple[int, int]) -> AugmentParams:
    """The parameters for samples ``indices`` of ``epoch`` on images of ``image_hw``.

    Sample i's parameters depend on (aug.seed, epoch, i) only, never on the batch it is in.
    """
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    if indices.size and indices.min() < 0:
        raise ValueError(f"sample indices must be >= 0, got {int(indices.min())}")
    if int(epoch) < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    in_hw = (int(image_hw[0]), int(image_hw[1]))
    out_hw = aug.output_hw(in_hw)
    slots = SLOTS if aug.random_resized_crop is not None else RRC
    u = uniforms(aug.seed, int(epoch), indices, slots)
    n = len(indices)
    zero, one = np.zeros(n), np.ones(n)

    def spread(col: int, r: float) -> np.ndarray:
        return (2.0 * u[:, col] - 1.0) * r if r else zero

    zlo, zhi = aug.zoom_bounds
    same = zlo == 1 and zhi == 1
    m = affine(
        theta=spread(THETA, aug.rotation_range),
        shift_x=_shift(aug.shift_x, u[:, SHIFT_X], u[:, SIGN_X], out_hw[1]),
        shift_y=_shift(aug.shift_y, u[:, SHIFT_Y], u[:, SIGN_Y], out_hw[0]),
        shear=spread(SHEAR, aug.shear_range),
        zoom_x=one if same else zlo + u[:, ZOOM_X] * (zhi - zlo),
        zoom_y=one if same else zlo + u[:, ZOOM_Y] * (zhi - zlo),
        frame_hw=out_hw,
    )
    if aug.horizontal_flip or aug.vertical_flip:
        hflip = aug.horizontal_flip & (u[:, HFLIP] < 0.5)
        vflip = aug.vertical_flip & (u[:, VFLIP] < 0.5)
        m = m @ flips(hflip, vflip, out_hw)
    boxes = _crop_boxes(aug, u, in_hw)
    if boxes is not None:
        m = crop_maps(boxes, out_hw) @ m
    channel = spread(CHANNEL, aug.channel_shift_range) if aug.channel_shift_range else None
    brightness = None
    if aug.brightness_range is not None:
        b0, b1 = aug.brightness_range
        brightness = b0 + u[:, BRIGHTNESS] * (b1 - b0)
    return AugmentParams(
        matrix=np.ascontiguousarray(m[:, :2, :]),
        in_hw=in_hw,
        out_hw=out_hw,
        brightness=None if brightness is None else brightness.astype(np.float32),
        channel_shift=None if channel is None else channel.astype(np.float32),
        fill_mode=aug.fill_mode,
        cval=float(aug.cval),
        ignore_index=int(aug.ignore_index),
        min_visibility=aug.min_visibility,
        min_box_size=aug.min_box_size,
        seed=aug.seed,
        epoch=int(epoch),
        indices=indices,
    )

"""ImageDataGenerator's own parameter dicts as `AugmentParams`: the bridge its users cross.

`ImageDataGenerator.apply_transform(x, params)` takes a dict (theta, tx, ty, shear, zx, zy,
flips, channel_shift_intensity, brightness); `from_idg` gives the packer parameters that
warp the same way, so a tuned setting can be checked pixel against pixel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from packer.augment.drawing import affine, flips
from packer.augment.params import AugmentParams


def idg_matrix(transform_parameters: Mapping, image_hw: tuple[int, int]) -> np.ndarray:
    """The 3x3 output -> input pixel map ImageDataGenerator applies for this dict.

    Keras 3's apply_affine_transform swaps its matrix's axes before scipy sees it, so
    ``tx`` ends up moving columns (x) and ``ty`` rows (y), ``zx`` scaling x and ``zy`` y;
    flips come after the warp. For square images this is its matrix to the last bit; for
    others it rotates about the true centre where ImageDataGenerator's is off by
    (H - W) / 2.
    """
    p = transform_parameters

    def one(name: str, default: float) -> np.ndarray:
        value = p.get(name, default)
        return np.array([default if value is None else value], dtype=np.float64)

    m = affine(
        theta=one("theta", 0.0),
        shift_x=one("tx", 0.0),
        shift_y=one("ty", 0.0),
        shear=one("shear", 0.0),
        zoom_x=one("zx", 1.0),
        zoom_y=one("zy", 1.0),
        frame_hw=image_hw,
    )
    f = flips(
        np.array([bool(p.get("flip_horizontal", False))]),
        np.array([bool(p.get("flip_vertical", False))]),
        image_hw,
    )
    return (m @ f)[0]


def from_idg(
    transform_parameters: Mapping,
    image_hw: tuple[int, int],
    *,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    ignore_index: int = 255,
) -> AugmentParams:
    """One sample's `AugmentParams` from an ImageDataGenerator transform dict."""
    p = transform_parameters
    hw = (int(image_hw[0]), int(image_hw[1]))
    shift, bright = p.get("channel_shift_intensity"), p.get("brightness")
    return AugmentParams(
        matrix=idg_matrix(p, hw)[None, :2, :],
        in_hw=hw,
        out_hw=hw,
        brightness=None if bright is None else np.array([bright], np.float32),
        channel_shift=None if shift is None else np.array([shift], np.float32),
        fill_mode=fill_mode,
        cval=float(cval),
        ignore_index=ignore_index,
    )


# ImageDataGenerator's (and flow_from_directory's) arguments that are no augmentation in
# packer, and where each goes instead.
ELSEWHERE = {
    "rescale": 'normalize="unit" on the reader (images / 255), e.g. '
    'PackedSequence(..., normalize="unit")',
    "featurewise_center": 'normalize="dataset" on the reader: the pack\'s per-channel mean and '
    "std, computed while packing (no fit() pass)",
    "featurewise_std_normalization": 'normalize="dataset" on the reader: the pack\'s '
    "per-channel mean and std, computed while packing (no fit() pass)",
    "samplewise_center": "not in packer: normalise each image in the model (a layer at its "
    'input), or use normalize="dataset" on the reader',
    "samplewise_std_normalization": "not in packer: normalise each image in the model (a layer "
    'at its input), or use normalize="dataset" on the reader',
    "zca_whitening": "not in packer: whiten in the model (a fixed matrix computed once)",
    "zca_epsilon": "not in packer: whiten in the model (a fixed matrix computed once)",
    "validation_split": "pack with --split train=0.8,val=0.2 (packer.pack(..., split=...)), "
    'then read split="val"',
    "subset": 'the reader\'s split: PackedSequence(pack, split="val")',
    "preprocessing_function": "apply it to whole batches: a layer at the model's input (e.g. "
    "keras.applications' preprocess_input in a Lambda layer), or your own Sequence over a "
    "PackedSequence, run in parallel by packer.parallel",
    "data_format": "readers give channels-last [B,H,W,3]; packer.torch takes "
    'layout="NCHW", or transpose in the model',
    "dtype": "readers give uint8 images, float32 with normalize=...; cast in the model "
    "(a pack of 16-bit or float32 images gives its own dtype)",
    "interpolation_order": "the warp is bilinear for images and nearest for masks, always",
    "target_size": "pack once at that size: pack SRC --size WIDTHxHEIGHT",
    "interpolation": "pack SRC --interpolation (the resize happens once, at pack time)",
    "color_mode": "packs hold RGB images for 8-bit photos, and other images with the bands "
    "their source has (grey, RGBA, multi-band); any conversion happens at pack time",
    "class_mode": "the reader's one_hot=True for categorical, class ids by default",
    "batch_size": "the reader's: PackedSequence(pack, split, batch_size)",
    "shuffle": "the reader's: PackedSequence(..., shuffle=True)",
}


def elsewhere(arguments: Mapping, known: Sequence[str]) -> TypeError:
    """The error for arguments Augment does not take: where each of ImageDataGenerator's goes
    in packer, or the nearest of ``known`` (Augment's own argument names, given by spec.py,
    which imports this module) for a misspelt one (one line)."""
    import difflib

    name = sorted(arguments)[0]
    if name in ELSEWHERE:
        return TypeError(f"Augment takes no {name} (from ImageDataGenerator): {ELSEWHERE[name]}")
    known = list(known)
    close = difflib.get_close_matches(name, [*known, *ELSEWHERE], n=1)
    hint = f"; did you mean {close[0]}?" if close else f"; it takes {', '.join(known)}"
    return TypeError(f"Augment got an unexpected argument {name}{hint}")

"""Detection targets moved by the NumPy/OpenCV executor: boxes, labels, per-object masks.

A target is one sample's dict: ``"boxes"`` float32 [N, 4] (x1, y1, x2, y2 in the input
image's continuous pixels), ``"labels"`` [N], optional ``"masks"`` uint8 [N, H, W] (0/1),
and any other per-object array of N rows (``"iscrowd"``, ``"difficult"``...); scalars (an
image id) pass through. Boxes of the whole batch move in one vectorised pass (`boxes`); the
kept objects' masks of a sample are bit-packed, eight to a uint8 plane, so one nearest
warpAffine moves eight masks: nearest sampling copies whole pixels, so every bit lands where
a separate warp would put it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from packer.augment.boxes import move_boxes
from packer.augment.params import AugmentParams

PACK = 8  # object masks per uint8 plane


def _per_object(key: str, value, n: int, i: int) -> bool:
    """Whether ``value`` is one row per object (moved with them) or a per-sample scalar."""
    if np.ndim(value) == 0:
        return False
    if len(value) != n:
        raise ValueError(
            f"target {i}: {key!r} has {len(value)} rows for {n} boxes (per-object fields "
            "need one row per box; per-image values must be scalars)"
        )
    return True


def _boxes(target: Mapping, i: int) -> np.ndarray:
    if "boxes" not in target:
        raise ValueError(f"target {i} has no 'boxes' (x1, y1, x2, y2 per object)")
    boxes = np.asarray(target["boxes"], dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        if boxes.size == 0:
            return boxes.reshape(0, 4)
        raise ValueError(f"target {i}: boxes must be [N, 4], got shape {boxes.shape}")
    return boxes


def move_all_boxes(params: AugmentParams, boxes: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """(moved float32 [K, 4], keep bool [K]) for every sample's boxes, concatenated."""
    counts = [len(b) for b in boxes]
    flat = np.concatenate([*boxes, np.empty((0, 4))])
    forward = params.box_matrix.reshape(-1, 6)[np.repeat(np.arange(len(boxes)), counts)]
    corners, keep = move_boxes(
        np,
        tuple(flat.T),
        tuple(forward.T),
        params.out_hw,
        params.min_visibility,
        params.min_box_size,
    )
    return np.stack(corners, axis=1).astype(np.float32), keep


def warp_object_masks(
    masks: np.ndarray, matrix: np.ndarray, out_hw: tuple[int, int], kept: np.ndarray
) -> np.ndarray:
    """uint8 [len(kept), Ho, Wo] 0/1: masks ``kept`` sampled nearest by the (nudged) matrix.

    Out-of-frame pixels are 0. Eight masks share one warp as the bits of a uint8 plane."""
    ho, wo = out_hw
    out = np.empty((len(kept), ho, wo), np.uint8)
    plane = np.empty(masks.shape[1:], np.uint8)
    bit = np.empty_like(plane)
    warped = np.empty((ho, wo), np.uint8)
    for start in range(0, len(kept), PACK):
        group = kept[start : start + PACK]
        for j, k in enumerate(group):  # nonzero -> bit j (cv2.threshold: one pass each)
            cv2.threshold(masks[k], 0, 1 << j, cv2.THRESH_BINARY, dst=plane if j == 0 else bit)
            if j:
                cv2.bitwise_or(plane, bit, dst=plane)
        got = cv2.warpAffine(
            plane,
            matrix,
            (wo, ho),
            dst=warped,
            flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=(0, 0, 0, 0),
        )
        for j in range(len(group)):
            np.right_shift(got, j, out=out[start + j])
            np.bitwise_and(out[start + j], 1, out=out[start + j])
    return out


def move_targets(params: AugmentParams, targets: Sequence[Mapping]) -> list[dict]:
    """One moved dict per sample: boxes through its map, clipped; objects left out dropped.

    ``targets`` hold NumPy arrays (or array-likes) in the input frame ``params.in_hw``; the
    results are in ``params.out_hw``: boxes float32, masks uint8 0/1, other per-object
    fields indexed, scalars passed through.
    """
    if len(targets) != len(params):
        raise ValueError(f"{len(targets)} targets for a batch of {len(params)} samples")
    boxes = [_boxes(t, i) for i, t in enumerate(targets)]
    moved, keep = move_all_boxes(params, boxes)
    mask_matrix = params.mask_matrix
    results, start = [], 0
    for i, (target, own) in enumerate(zip(targets, boxes, strict=True)):
        n = len(own)
        stop = start + n
        kept = np.flatnonzero(keep[start:stop])
        result = {}
        for key, value in target.items():
            if key == "boxes":
                result[key] = moved[start:stop][kept]
            elif key == "masks":
                result[key] = warp_object_masks(
                    _masks(value, n, params.in_hw, i), mask_matrix[i], params.out_hw, kept
                )
            elif _per_object(key, value, n, i):
                result[key] = np.asarray(value)[kept]
            else:
                result[key] = value
        results.append(result)
        start = stop
    return results


def _masks(value, n: int, in_hw: tuple[int, int], i: int) -> np.ndarray:
    masks = np.asarray(value)
    if masks.shape != (n, *in_hw) or masks.dtype != np.uint8:
        raise ValueError(
            f"target {i}: masks must be uint8 [{n}, {in_hw[0]}, {in_hw[1]}] (one per box, "
            f"the images' size), got {masks.dtype} {masks.shape}"
        )
    return masks

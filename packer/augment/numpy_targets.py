"""Per-object fields moved by the NumPy/OpenCV executor, each by its geometry (`moves`).

`move_rows` is what the readers call: every object's row of each ragged field, sample after
sample, with the samples' object counts. Boxes move by the box rule and decide which objects
stay (`boxes`); points move as box corners; per-object planes are sampled nearest; other fields
are kept or dropped with their object. `move_targets` takes users' dicts instead: one per
sample, ``"boxes"`` float32 [N, 4] (x1, y1, x2, y2 in the input image's continuous pixels),
``"labels"`` [N], optional ``"masks"`` uint8 [N, H, W] (0/1), ``"keypoints"`` and any other
per-object array of N rows (``"iscrowd"``, ``"difficult"``...); scalars (an image id) pass
through. Boxes of the whole batch move in one vectorised pass; the kept objects' masks of a
sample are bit-packed, eight to a uint8 plane, so one nearest warpAffine moves eight masks:
nearest sampling copies whole pixels, so every bit lands where a separate warp would put it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

import cv2
import numpy as np

from packer.augment.boxes import inside, mirrored, move_boxes, move_point
from packer.augment.moves import Move, by_convention
from packer.augment.params import AugmentParams

PACK = 8  # object masks per uint8 plane


def _per_object(key: str, value, n: int, i: int) -> bool:
    """Whether ``value`` is one row per object (moved with them) or a per-sample scalar."""
    if np.ndim(value) == 0:
        return False
    if len(value) != n:
        raise ValueError(
            f"target {i}: {key!r} has {len(value)} rows for {n} objects (per-object fields "
            "need one row per object; per-image values must be scalars)"
        )
    return True


def _boxes(target: Mapping, i: int, key: str = "boxes") -> np.ndarray:
    boxes = np.asarray(target[key], dtype=np.float64)
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


def move_points(
    points: np.ndarray,
    forward: np.ndarray,
    out_hw: tuple[int, int],
    flip_order: tuple[int, ...] = (),
) -> np.ndarray:
    """Points ``[K, ..., D]`` (last axis x, y[, visibility, ...]) through ``forward`` [K, 6]
    (one map per row), in their dtype: moved as box corners are; a point leaving the frame
    keeps its moved coordinates and, with a third value, gets visibility 0. With
    ``flip_order``, the points of a row ``[K, P, D]`` whose map mirrors take that order."""
    out = np.array(points, copy=True)
    if out.size == 0:
        return out
    if out.shape[-1] < 2:
        raise ValueError(f"points need x, y on their last axis, got rows of shape {out.shape[1:]}")
    columns = forward.reshape(len(forward), *[1] * (out.ndim - 2), 6)
    x, y = move_point(
        out[..., 0].astype(np.float64), out[..., 1].astype(np.float64), np.moveaxis(columns, -1, 0)
    )
    out[..., 0], out[..., 1] = x, y
    if out.shape[-1] >= 3:
        out[..., 2] = np.where(inside(x, y, out_hw), out[..., 2], 0)
    if flip_order:
        flips = np.flatnonzero(mirrored(tuple(forward.reshape(-1, 6).T)))
        out[flips] = out[flips][..., flip_order, :]
    return out


def move_rows(
    params: AugmentParams,
    rows: Mapping[str, np.ndarray],
    counts: np.ndarray,
    found: Mapping[str, Move],
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A batch's ragged fields (every object's row, sample after sample; ``counts`` [B] per
    sample) moved by their geometry: boxes by the box rule, whose dropped objects leave every
    field; points as box corners; per-object planes sampled nearest; others kept or dropped
    with their object. Returns (rows, counts) in ``params.out_hw``."""
    counts = np.asarray(counts, np.int64)
    if len(counts) != len(params):
        raise ValueError(f"{len(counts)} object counts for a batch of {len(params)} samples")
    owner = np.repeat(np.arange(len(counts)), counts)
    forward = params.box_matrix.reshape(-1, 6)[owner]
    keep = np.ones(len(owner), bool)
    moved: dict[str, np.ndarray] = {}
    for name, move in found.items():
        if move.geometry == "boxes":
            moved[name], kept = move_all_boxes(params, np.split(rows[name], np.cumsum(counts)[:-1]))
            keep &= kept
        elif move.geometry == "points":
            moved[name] = move_points(rows[name], forward, params.out_hw, move.flip_order)
    kept = np.flatnonzero(keep)
    starts = np.concatenate([[0], np.cumsum(counts)])
    out = {}
    for name, move in found.items():
        if move.geometry == "planes":
            out[name] = _planes(params, rows[name], starts, keep)
        else:
            out[name] = np.asarray(moved.get(name, rows[name]))[kept]
    return out, np.bincount(owner[kept], minlength=len(counts)).astype(np.int64)


def _planes(params: AugmentParams, planes, starts: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Each sample's kept per-object planes, warped nearest by its mask matrix (0 outside)."""
    planes = np.asarray(planes)
    if planes.dtype != np.uint8 or planes.shape[1:] != params.in_hw:
        raise ValueError(
            f"per-object masks must be uint8 [N, {params.in_hw[0]}, {params.in_hw[1]}] (the "
            f"images' size), got {planes.dtype} {planes.shape}"
        )
    matrix = params.mask_matrix
    parts = [
        warp_object_masks(planes, matrix[i], params.out_hw, a + np.flatnonzero(keep[a:b]))
        for i, (a, b) in enumerate(pairwise(starts))
    ]
    return np.concatenate([*parts, np.empty((0, *params.out_hw), np.uint8)])


def move_targets(
    params: AugmentParams, targets: Sequence[Mapping], geometries: Mapping | None = None
) -> list[dict]:
    """One moved dict per sample: boxes through its map, clipped; objects left out dropped.

    ``targets`` hold NumPy arrays (or array-likes) in the input frame ``params.in_hw``; the
    results are in ``params.out_hw``. Keys move by ``geometries`` (name -> geometry) or, without
    it, by the convention (`moves.CONVENTION`: boxes float32, masks uint8 0/1 per object,
    keypoints as points); other per-object fields are indexed, scalars passed through.
    """
    if len(targets) != len(params):
        raise ValueError(f"{len(targets)} targets for a batch of {len(params)} samples")
    keys = list(dict.fromkeys(k for t in targets for k in t))
    found = by_convention(keys, geometries)
    counts = [_count(t, i, found, geometries is None) for i, t in enumerate(targets)]
    per_object = []
    for i, (target, n) in enumerate(zip(targets, counts, strict=True)):
        per_object += [k for k, v in target.items() if _per_object(k, v, n, i)]
    rows = {
        key: _rows(targets, key, found[key], counts, params.in_hw)
        for key in keys
        if key in per_object
    }
    moved, kept = move_rows(params, rows, counts, {k: found[k] for k in rows})
    cuts = np.cumsum(kept)[:-1]
    split = {key: np.split(values, cuts) for key, values in moved.items()}
    return [
        {key: split[key][i] if key in split else value for key, value in target.items()}
        for i, target in enumerate(targets)
    ]


def _count(target: Mapping, i: int, found: Mapping[str, Move], convention: bool) -> int:
    """Sample ``i``'s object count: its boxes' rows (keypoints' without boxes)."""
    boxes = next((k for k in target if found[k].geometry == "boxes"), None)
    if boxes is not None:
        return len(_boxes(target, i, boxes))
    points = next((k for k in target if found[k].geometry == "points"), None)
    if convention and points is None:
        raise ValueError(f"target {i} has no 'boxes' (x1, y1, x2, y2 per object)")
    first = points or next((k for k in target if np.ndim(target[k]) > 0), None)
    return 0 if first is None else len(target[first])


def _rows(targets: Sequence[Mapping], key: str, move: Move, counts, in_hw) -> np.ndarray:
    """Every sample's rows of ``key``, concatenated (boxes as float64, masks checked)."""
    parts = []
    for i, (target, n) in enumerate(zip(targets, counts, strict=True)):
        if key not in target:
            raise ValueError(f"target {i} has no {key!r} (the batch's other targets have it)")
        value = target[key]
        if move.geometry == "boxes":
            value = _boxes(target, i, key)
        elif move.geometry == "planes":
            value = _masks(value, n, in_hw, i)
        parts.append(np.asarray(value))
    return np.concatenate(parts)


def _masks(value, n: int, in_hw: tuple[int, int], i: int) -> np.ndarray:
    masks = np.asarray(value)
    if masks.shape != (n, *in_hw) or masks.dtype != np.uint8:
        raise ValueError(
            f"target {i}: masks must be uint8 [{n}, {in_hw[0]}, {in_hw[1]}] (one per box, "
            f"the images' size), got {masks.dtype} {masks.shape}"
        )
    return masks

"""A sample's objects through the pack's geometry: boxes moved exactly as pixels, per-object
masks drawn at the source size and resampled as masks are.

The placement maps a source point (x, y) (continuous pixel coordinates, as boxes are given)
to (ox + (x - cx0) * w / cw, oy + (y - cy0) * h / ch) of the output: crop (cx0, cy0, cx1,
cy1) of size cw x ch, resized to w x h and pasted at (ox, oy). EXIF orientation is applied to
the image before this (objects are in the image as displayed), so the same map holds for both.
A box is the image of its corners, clipped to the pasted area. An object is dropped, with its
reason, only when that box has no area as stored (float32 x2 <= x1 or y2 <= y1: it lies
outside the frame, or the source gave it none), as torchvision's detection reference,
Detectron2 and Ultralytics keep every other box (a dropped object's keypoints leave with it);
or, when the pack asks for `min_box_size`, when it is narrower or lower than that, within
`SIZE_SLACK` of the box's coordinates (float32
source pixels, as YOLO's are computed, make an exactly 1 px object 0.99997 px). Masks: each
object's 0/1 plane at the source size (pycocotools for COCO polygons and RLE, as
`COCO.annToMask`; OpenCV's `fillPoly` for "fill" polygons, as Ultralytics' `polygon2mask`),
then the pack's nearest-neighbour crop and resize, then padding with 0.
"""

from __future__ import annotations

import warnings

import cv2
import numpy as np

from ..errors import LabelError
from ..fields.keypoints import place_points
from ..imaging import Placement
from ..imaging.geometry import SIZE_SLACK, nearest_indices
from ..sources import SourceObject


def place_boxes(boxes: np.ndarray, placement: Placement) -> np.ndarray:
    """Source boxes `[N,4]` x1,y1,x2,y2 in output pixels, clipped to the pasted area."""
    cx0, cy0, cx1, cy1 = placement.crop
    w, h = placement.scaled
    ox, oy = placement.offset
    scale = np.array([w / (cx1 - cx0), h / (cy1 - cy0)] * 2)
    shift = np.array([cx0, cy0] * 2, np.float64)
    out = (boxes.astype(np.float64) - shift) * scale + np.array([ox, oy] * 2)
    low, high = np.array([ox, oy] * 2), np.array([ox + w, oy + h] * 2)
    return np.clip(out, low, high)


def rle_of(shape: tuple, size: tuple[int, int]) -> dict:
    """A COCO polygon or RLE shape as one pycocotools RLE at the source size (W, H), made as
    `COCO.annToRLE` makes it; LabelError when it cannot be drawn there."""
    from pycocotools import mask as coco_mask  # loaded where masks are drawn: the workers

    width, height = size
    kind, data = shape
    if kind == "polygons":
        return coco_mask.merge(coco_mask.frPyObjects([list(p) for p in data], height, width))
    if kind != "rle":
        raise LabelError(f"an object shape of unknown kind {kind!r}")
    if list(data["size"]) != [height, width]:
        h, w = data["size"]
        raise LabelError(f"an RLE of {w}x{h} pixels, its image is {width}x{height}")
    counts = data["counts"]
    if isinstance(counts, str):
        return {"size": [height, width], "counts": counts.encode()}
    return coco_mask.frPyObjects({"size": [height, width], "counts": counts}, height, width)


def filled(shape: tuple | None, box: tuple, size: tuple[int, int]) -> np.ndarray:
    """A plane (H, W) of a "fill" polygon shape, as Ultralytics' `polygon2mask` fills it with
    OpenCV, or of the box itself when there is no shape."""
    width, height = size
    plane = np.zeros((height, width), np.uint8)
    if shape is None:
        x1, y1, x2, y2 = np.round(box).astype(int).tolist()
        plane[max(y1, 0) : y2, max(x1, 0) : x2] = 1
        return plane
    points = [np.asarray(p, np.float64).reshape(-1, 2).astype(np.int32) for p in shape[1]]
    return cv2.fillPoly(plane, points, 1)


def object_record(
    objects: list[SourceObject],
    source_size: tuple[int, int],
    placement: Placement,
    instances: bool,
    min_box_size: float = 0.0,
    points: int = 0,
) -> tuple[dict[str, np.ndarray], list[tuple[int, str]]]:
    """The object fields of one sample, and the objects dropped: (index among `objects`, why).
    Objects whose placed box has no area leave, with their keypoints; with `min_box_size`,
    smaller ones too. With `points` (K), each object's keypoints `[K, 3]` moved as pixels."""
    boxes = np.array([o.box for o in objects], np.float64).reshape(-1, 4)
    placed = place_boxes(boxes, placement).astype(np.float32)
    keep, dropped = _kept(boxes, placed, placement, min_box_size)
    kept = [o for o, k in zip(objects, keep.tolist(), strict=True) if k]
    record = {
        "boxes": placed[keep],
        "labels": np.array([o.label for o in kept], np.int32),
        "iscrowd": np.array([o.crowd for o in kept], np.uint8),
        "difficult": np.array([o.difficult for o in kept], np.uint8),
    }
    if points:
        flat = np.array([o.points or (0.0,) * points * 3 for o in kept], np.float64)
        record["keypoints"] = place_points(flat.reshape(-1, points, 3), placement).astype(
            np.float32
        )
    if instances:
        masks, failed = _masks(kept, source_size, placement)
        good = np.ones(len(kept), bool)
        for i, reason in failed.items():
            good[i] = False
            dropped.append((int(np.flatnonzero(keep)[i]), reason))
        record = {k: v[good] for k, v in record.items()} | {"masks": masks[good]}
    return record, dropped


def _kept(
    boxes: np.ndarray, placed: np.ndarray, placement: Placement, min_box_size: float
) -> tuple[np.ndarray, list[tuple[int, str]]]:
    """Which placed boxes (float32, as stored) stay, and why each other one leaves: no area
    (compared, not subtracted, so no rounding decides it), or under `min_box_size` pixels."""
    area = (placed[:, 2] > placed[:, 0]) & (placed[:, 3] > placed[:, 1])
    wide = placed.astype(np.float64)
    sides = np.minimum(wide[:, 2] - wide[:, 0], wide[:, 3] - wide[:, 1])
    large = np.ones(len(placed), bool)
    if min_box_size > 0:
        x0, y0, x1, y1 = placement.crop
        scale = max(placement.scaled[0] / (x1 - x0), placement.scaled[1] / (y1 - y0))
        source = np.abs(boxes).max(axis=1, initial=1.0) * scale  # its rounding, scaled
        reach = np.maximum(source, np.abs(placed).max(axis=1, initial=1.0))
        large = sides >= min_box_size - SIZE_SLACK * reach
    keep = area & large
    source_area = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    why = {True: "outside the frame", False: "no area in the source (x2 <= x1 or y2 <= y1)"}
    dropped = [
        (i, why[bool(source_area[i])] if not area[i] else f"under {min_box_size:g} px")
        for i in np.flatnonzero(~keep).tolist()
    ]
    return keep, dropped


def _masks(
    objects: list[SourceObject], size: tuple[int, int], placement: Placement
) -> tuple[np.ndarray, dict[int, str]]:
    """Per-object planes `[N,H,W]` in output pixels, and the objects whose shape could not be
    drawn (index: why). Planes are made column-major, (N, W, H), as pycocotools decodes them
    (no copy), resampled there, and turned back once."""
    from pycocotools import mask as coco_mask

    width, height = size
    failed: dict[int, str] = {}
    rles, drawn, others = [], [], {}
    for i, o in enumerate(objects):
        if o.shape is None or o.shape[0] == "fill":
            others[i] = filled(o.shape, o.box, size).T
            continue
        try:
            rles.append(rle_of(o.shape, size))
            drawn.append(i)
        except LabelError as exc:
            failed[i] = str(exc)
    with warnings.catch_warnings():  # pycocotools' decode under NumPy 2 warns of a copy
        warnings.simplefilter("ignore", DeprecationWarning)
        decoded = coco_mask.decode(rles).transpose(2, 1, 0) if rles else None
    if rles and len(drawn) == len(objects):
        planes = decoded  # the common case: every plane from pycocotools, not copied
    else:
        planes = np.zeros((len(objects), width, height), np.uint8)
        if rles:
            planes[drawn] = decoded
        for i, plane in others.items():
            planes[i] = plane
    x0, y0, x1, y1 = placement.crop
    w, h = placement.scaled
    cols, rows = nearest_indices(x0, x1, w), nearest_indices(y0, y1, h)
    scaled = _gather(_gather(planes, cols, 1), rows, 2)
    out_w, out_h = placement.size
    ox, oy = placement.offset
    canvas = np.zeros((len(objects), out_h, out_w), np.uint8)
    for plane, target in zip(scaled, canvas[:, oy : oy + h, ox : ox + w], strict=True):
        cv2.transpose(plane, dst=target)  # (W, H) -> (H, W): 6x NumPy's strided copy
    return canvas, failed


def _gather(array: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """`array.take(indices, axis)`, as a view when the indices are one contiguous run (a crop
    without resizing along that axis)."""
    if len(indices) and indices[-1] - indices[0] == len(indices) - 1:
        index = [slice(None)] * array.ndim
        index[axis] = slice(int(indices[0]), int(indices[-1]) + 1)
        return array[tuple(index)]
    return array.take(indices, axis=axis)

"""Classification, segmentation, detection and instances: presets of fields, nothing more.

A preset names the fields a task's samples hold; the manifest's `task` is the preset a pack's
fields are (`task_of`), "custom" for any other set. No stage branches on the task: each loops
over the fields and asks their kinds.
"""

from __future__ import annotations

import numpy as np

from ..schema import Field
from .keypoints import Skeleton

PRESETS = ("classification", "segmentation", "detection", "instances", "keypoints")
CUSTOM = "custom"


def fields_for(
    task: str,
    size: tuple[int, int],
    mask_dtype: np.dtype,
    image: tuple[str, int] = ("uint8", 3),
    points: Skeleton | None = None,
) -> tuple[Field, ...]:
    """Images `[H,W,C]` of the sample type and band count `image` (8-bit RGB unless the source
    is something else), plus masks `[H,W]` (segmentation), an int32 label (classification), or
    per object a box, a label, crowd and difficult flags (detection) and a bit-packed `[H,W]`
    mask (instances) or K keypoints (x, y, visibility) of `points` (keypoints, one point
    without it)."""
    width, height = size
    image_dtype, bands = image
    image = Field("images", (height, width, bands), np.dtype(image_dtype).str, kind="image")
    if task == "segmentation":
        return image, Field("masks", (height, width), np.dtype(mask_dtype).str, kind="mask")
    if task in ("detection", "instances", "keypoints"):
        objects = (
            Field("boxes", (4,), "<f4", ragged=True, kind="boxes"),
            Field("labels", (), "<i4", ragged=True, kind="object_class"),
            Field("iscrowd", (), "|u1", ragged=True, kind="flag"),
            Field("difficult", (), "|u1", ragged=True, kind="flag"),
        )
        masks = (Field("masks", (height, width), "|u1", True, "bits", "object_mask"),)
        if task == "keypoints":
            count, order = (len(points.names), points.flip_order) if points else (1, ())
            kept = Field("keypoints", (count, 3), "<f4", True, kind="keypoints", flip_order=order)
            return image, *objects, kept
        return image, *objects, *masks * (task == "instances")
    if task != "classification":
        raise ValueError(f"unknown preset {task!r}; choose one of {', '.join(PRESETS)}")
    return image, Field("labels", (), "<i4", kind="class")


def _signature(fields) -> tuple[tuple[str, str, bool], ...]:
    return tuple((f.name, f.kind, f.ragged) for f in fields)


def task_of(fields: tuple[Field, ...]) -> str:
    """The preset whose fields (names, kinds, raggedness) these are, or "custom"."""
    found = _signature(fields)
    for task in PRESETS:
        if _signature(fields_for(task, (1, 1), np.dtype(np.uint8))) == found:
            return task
    return CUSTOM

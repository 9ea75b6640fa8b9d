"""The pixels field kind: values of the image's size and placement (a depth map, a heat map)."""

from __future__ import annotations

from .kind import FieldKind


class Pixels(FieldKind):
    """Values of the image's size and placement, resampled bilinearly: a float array `[H, W]`
    of a Python sample unless named otherwise. Not the readers' input (that is `image`)."""

    name = "pixels"
    geometry = "pixels"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

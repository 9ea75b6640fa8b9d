"""The boxes field kind: per object x1, y1, x2, y2 float32 in the image's pixels."""

from __future__ import annotations

from .kind import FieldKind


class Boxes(FieldKind):
    """Per object x1, y1, x2, y2 float32 in the image's pixels."""

    name = "boxes"
    ragged = True
    geometry = "boxes"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

"""The object_mask field kind: per object a 0/1 plane of the image's size, bit-packed."""

from __future__ import annotations

from .kind import FieldKind


class ObjectMask(FieldKind):
    """Per object a 0/1 plane of the image's size, bit-packed. Not padded (max_boxes planes
    an image would dwarf the image)."""

    name = "object_mask"
    ragged = True
    geometry = "planes"
    padded = False

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

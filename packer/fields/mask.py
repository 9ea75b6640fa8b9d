"""The mask field kind: a plane `[H,W]` of class ids, moved by nearest neighbour."""

from __future__ import annotations

from .kind import FieldKind


class Mask(FieldKind):
    """A plane `[H,W]` of class ids (uint8 or uint16): nearest neighbour, padded with ignore."""

    name = "mask"
    geometry = "labels"
    class_ids = True

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO
    recordio = "mask"

    def tfrecord_keys(self, field):
        return ("mask/raw",)

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

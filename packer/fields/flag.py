"""The flag field kind: per object a 0/1 flag (uint8): COCO's iscrowd, VOC's difficult."""

from __future__ import annotations

from .kind import FieldKind


class Flag(FieldKind):
    """Per object a 0/1 flag (uint8): COCO's iscrowd, VOC's difficult. Not padded."""

    name = "flag"
    ragged = True
    padded = False

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

"""The object_class field kind: per object its class id (int32)."""

from __future__ import annotations

from .kind import FieldKind


class ObjectClass(FieldKind):
    """Per object its class id (int32)."""

    name = "object_class"
    ragged = True
    class_ids = True

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

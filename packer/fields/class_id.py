"""The class field kind: one class id per sample (int32)."""

from __future__ import annotations

from .kind import FieldKind


class ClassId(FieldKind):
    """One class id per sample (int32)."""

    name = "class"
    class_ids = True

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

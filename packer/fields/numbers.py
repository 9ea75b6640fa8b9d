"""The numbers field kind: regression targets, a float32 scalar or `[k]` vector a sample."""

from __future__ import annotations

from .kind import FieldKind


class Numbers(FieldKind):
    """Regression targets, float32: one number (`[]`) or a vector (`[k]`) a sample, which the
    geometry leaves alone (an age, a score, a pose's angles)."""

    name = "numbers"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

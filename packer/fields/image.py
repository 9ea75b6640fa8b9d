"""The image field kind: a picture `[H,W,C]` in its sample type, resampled bilinearly."""

from __future__ import annotations

from .kind import FieldKind


class Image(FieldKind):
    """A picture `[H,W,C]` in its sample type (uint8, uint16, float32), resampled bilinearly."""

    name = "image"
    geometry = "pixels"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off
    input = True  # the readers' input

    # --- augmentation

    # --- statistics, info and preview

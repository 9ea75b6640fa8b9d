"""The image field kind: a picture `[H,W,C]` in its sample type, resampled bilinearly."""

from __future__ import annotations

import numpy as np

from .kind import FieldKind


class Image(FieldKind):
    """A picture `[H,W,C]` in its sample type (uint8, uint16, float32), resampled bilinearly."""

    name = "image"
    geometry = "pixels"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO
    recordio = "image"
    tf_keys = ("image/raw", "image/height", "image/width", "image/channels")

    def tfrecord_keys(self, field):
        return self.tf_keys

    def tfrecord_encode(self, field, value, size, names):
        """The pixels' bytes as `image/raw`, with their height, width and bands."""
        raw = self.little_endian(field.coerce(value)).reshape(-1).view(np.uint8)
        height, width, *bands = field.shape
        return {
            "image/raw": ("bytes", [raw]),
            "image/height": ("int64", [height]),
            "image/width": ("int64", [width]),
            "image/channels": ("int64", [bands[0] if bands else 1]),
        }

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

"""The image field kind: a picture `[H,W,C]` in its sample type, resampled bilinearly."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .counting import channel_moments, histogram, shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..labels import ClassTable
    from ..schema import Field


class Image(FieldKind):
    """A picture `[H,W,C]` in its sample type (uint8, uint16, float32), resampled bilinearly."""

    name = "image"
    geometry = "pixels"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO
    recordio = "image"
    tf_keys = ("image/raw", "image/height", "image/width", "image/channels")
    # An encoded image: the Object Detection API's payload and its format.
    tf_encoded_keys = ("image/encoded", "image/format", *tf_keys[1:])

    def tfrecord_keys(self, field):
        return self.tf_keys if field.encoding == "raw" else self.tf_encoded_keys

    def tfrecord_encode(self, field, value, size, names):
        """The pixels' bytes as `image/raw` (an encoded image: its payload as `image/encoded`
        and `image/format`), with their height, width and bands."""
        height, width, *bands = field.shape
        if field.encoding == "raw":
            raw = self.little_endian(field.coerce(value)).reshape(-1).view(np.uint8)
            stored = {"image/raw": ("bytes", [raw])}
        else:
            stored = {
                "image/encoded": ("bytes", [value]),
                "image/format": ("bytes", [field.encoding.encode()]),
            }
        return {
            **stored,
            "image/height": ("int64", [height]),
            "image/width": ("int64", [width]),
            "image/channels": ("int64", [bands[0] if bands else 1]),
        }

    # --- reading: batches, targets, the workers' hand-off
    input = True  # the readers' input

    # --- augmentation

    # --- statistics, info and preview
    # Channel statistics sample about 32 rows per image, the middle row of each band of H // 32
    # rows (every row of images under 64 rows): on CamVid within 0.05 grey levels of every
    # pixel's mean/std. Rows 0, 8, 16, ... would miss the bottom band, 1.3 levels off there.
    stats_rows: ClassVar[int] = 32

    def count_channels(self, value: np.ndarray) -> tuple[str, np.ndarray]:
        """Sampled rows: exact histograms per band of 8-bit pictures (OpenCV's); count, sum
        and sum of squares per band (float64) of 16-bit and float ones."""
        step = max(1, len(value) // self.stats_rows)
        rows = value[step // 2 :: step]
        bands = rows.shape[2]
        if rows.dtype == np.uint8:
            return "channel_hist", np.stack([histogram(rows, c, 256) for c in range(bands)])
        values = rows.reshape(-1, bands).astype(np.float64)
        count = np.full(bands, len(values), np.float64)
        return "channel_moments", np.stack(
            [count, values.sum(axis=0), np.square(values).sum(axis=0)], axis=1
        )

    def stats_entries(self, receipts: list[dict], table: ClassTable) -> dict:
        """Per-band mean and standard deviation (what `normalize="dataset"` uses)."""
        mean, var = channel_moments(receipts)
        std = np.sqrt(np.maximum(var, 0.0))
        return {
            "mean": [round(float(v), 4) for v in np.nan_to_num(mean)],
            "std": [round(float(v), 4) for v in np.nan_to_num(std)],
        }

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words), and its
        encoding when compressed."""
        return shape_text(field) + ("" if field.encoding == "raw" else f" {field.encoding}")

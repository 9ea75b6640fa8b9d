"""The mask field kind: a plane `[H,W]` of class ids, moved by nearest neighbour."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .counting import histogram, last_nonzero, shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..schema import Field


class Mask(FieldKind):
    """A plane `[H,W]` of class ids (uint8 or uint16): nearest neighbour, padded with ignore."""

    name = "mask"
    geometry = "labels"
    class_ids = True

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    class_stats = ("class_pixels", "other_pixels")
    draw_layer = 0
    preview_alpha: ClassVar[float] = 0.5  # the class colours' weight over the image

    def count_classes(self, value: np.ndarray) -> np.ndarray:
        """Pixels per class id, up to the last id present (OpenCV's histogram for uint8)."""
        counts = histogram(value, 0, 256) if value.dtype == np.uint8 else np.bincount(value.ravel())
        return counts[: last_nonzero(counts) + 1]

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

    def draw(self, tile, value: np.ndarray) -> None:
        """Class colours blended over the image's pixels where the mask holds a class id (the
        ignore index stays clear); the classes present join the legend."""
        colors, alpha = tile.colors, self.preview_alpha
        known = value < len(colors)
        out = tile.pixels.astype(np.float32)
        out[known] = (1 - alpha) * out[known] + alpha * colors[value[known]]
        tile.pixels = out.astype(np.uint8)
        present = np.flatnonzero(np.bincount(value.ravel(), minlength=len(colors)))
        tile.shown.update(int(c) for c in present if c < len(colors))

"""The class field kind: one class id per sample (int32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..schema import Field


class ClassId(FieldKind):
    """One class id per sample (int32)."""

    name = "class"
    class_ids = True

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    class_stats = ("class_images", "other_images")

    def count_classes(self, value: np.ndarray) -> np.ndarray:
        """One image for the sample's class."""
        return np.bincount([int(value)])

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

    def draw(self, tile, value: np.ndarray) -> None:
        """The class's name under the tile."""
        tile.caption += f" {tile.names[int(value)]}"

"""The object_class field kind: per object its class id (int32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..schema import Field


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
    class_stats = ("class_objects", "other_images")

    def count_classes(self, value: np.ndarray) -> np.ndarray:
        """Objects per class id."""
        return np.bincount(value.astype(np.int64), minlength=1)

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

    def draw(self, tile, value: np.ndarray) -> None:
        """The object count under the tile; the objects' classes join the legend (their
        colours are what the other object fields are drawn in)."""
        tile.caption += f" {len(value)} objects"
        tile.shown.update(int(c) for c in value)

"""The multi-hot field kind: a sample's tags as a fixed float32 `[V]` vector of 0 and 1."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .kind import FieldKind
from .placing import fitted

if TYPE_CHECKING:
    from ..schema import Field
    from .placing import Frame


class MultiHot(FieldKind):
    """A sample's tags, one 0/1 per name of a sorted vocabulary, float32 `[V]`: what a Keras
    sigmoid head with `binary_crossentropy` and torch's `BCEWithLogitsLoss` take as targets
    without a cast (uint8 would need one in torch). The geometry leaves it alone."""

    name = "multi_hot"

    # --- packing: placing a source's value by the pack's geometry

    def place(self, value, field: Field, frame: Frame) -> np.ndarray:
        """The vector in the field's dtype; a value other than 0 or 1 is a ValueError."""
        array = fitted(value, field.dtype)
        if not ((array == 0) | (array == 1)).all():
            raise ValueError("a multi-hot vector holds only 0 and 1")
        return array

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    # Its tags are the pack's classes when no class column is beside it: counted per image.
    class_stats = ("class_images", "other_images")

    def count_classes(self, value: np.ndarray) -> np.ndarray:
        """One count per tag the sample has."""
        return (np.asarray(value) > 0).astype(np.int64)

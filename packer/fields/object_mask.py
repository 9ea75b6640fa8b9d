"""The object_mask field kind: per object a 0/1 plane of the image's size, bit-packed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import cv2
import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..schema import Field


class ObjectMask(FieldKind):
    """Per object a 0/1 plane of the image's size, bit-packed. Not padded (max_boxes planes
    an image would dwarf the image)."""

    name = "object_mask"
    ragged = True
    geometry = "planes"
    padded = False

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    draw_layer = 1

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

    def draw(self, tile, value: np.ndarray) -> None:
        """Each object's outline in its class colour, traced on the tile's pixels."""
        picture = tile.array()
        for k, plane in enumerate(value):
            big = cv2.resize(plane, tile.size, interpolation=cv2.INTER_NEAREST)
            contours, _ = cv2.findContours(big, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            cv2.drawContours(picture, contours, -1, tile.object_color(k), 1)

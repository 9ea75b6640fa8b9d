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
    # TFRecord: one PNG an object (the Object Detection API's PNG_MASKS) and the same planes
    # bit-packed (what packer reads, no decode); RecordIO: the `PKOB` trailer after the image.
    recordio = "objects"
    tf_png, tf_bits = "image/object/mask", "image/object/mask/packed"

    def tfrecord_keys(self, field):
        return (self.tf_bits, self.tf_png)

    @staticmethod
    def png(plane: np.ndarray) -> bytes:
        """A 0/1 plane as a lossless 8-bit grey PNG."""
        ok, data = cv2.imencode(".png", plane, [cv2.IMWRITE_PNG_COMPRESSION, 1])
        if not ok:
            raise ValueError("OpenCV could not encode a mask as PNG")
        return data.tobytes()

    def tfrecord_encode(self, field, value, size, names):
        rows = field.encode(value)
        pngs = [self.png(plane) for plane in np.asarray(value, np.uint8)]
        return {self.tf_png: ("bytes", pngs), self.tf_bits: ("bytes", list(rows))}

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

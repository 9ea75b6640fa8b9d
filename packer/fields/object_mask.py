"""The object_mask field kind: per object a 0/1 plane of the image's size, bit-packed."""

from __future__ import annotations

import numpy as np

from .kind import FieldKind


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
        import cv2

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

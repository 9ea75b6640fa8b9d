"""The flag field kind: per object a 0/1 flag (uint8): COCO's iscrowd, VOC's difficult."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..schema import Field


class Flag(FieldKind):
    """Per object a 0/1 flag (uint8): COCO's iscrowd, VOC's difficult. Not padded."""

    name = "flag"
    ragged = True
    padded = False

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO
    # TFRecord: an int64 list, under the Object Detection API's keys for COCO's crowd and VOC's
    # difficult flags, `image/object/<name>` for another flag; RecordIO: a column of MXNet's
    # label after the box (labels im2rec writes have none: 0).
    recordio = "detection"
    detection_order = 2
    detection_optional = True
    tf_keys: ClassVar[dict[str, str]] = {
        "iscrowd": "image/object/is_crowd",
        "difficult": "image/object/difficult",
    }

    def tfrecord_keys(self, field):
        return (self.tf_keys.get(field.name, f"image/object/{field.name}"),)

    def tfrecord_encode(self, field, value, size, names):
        return {self.tfrecord_keys(field)[0]: ("int64", [int(v) for v in np.ravel(value)])}

    def tfrecord_decode(self, field, example, size):
        return example.ints(self.tfrecord_keys(field)[0]).astype(field.dtype)

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

"""The flag field kind: per object a 0/1 flag (uint8): COCO's iscrowd, VOC's difficult."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview
    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

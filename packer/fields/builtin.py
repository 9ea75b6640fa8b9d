"""The kinds of today's presets: images, index masks, class ids and detection's object rows."""

from __future__ import annotations

from .kind import FieldKind


class Image(FieldKind):
    """A picture `[H,W,C]` in its sample type (uint8, uint16, float32), resampled bilinearly."""

    name = "image"
    geometry = "pixels"


class Mask(FieldKind):
    """A plane `[H,W]` of class ids (uint8 or uint16): nearest neighbour, padded with ignore."""

    name = "mask"
    geometry = "labels"
    class_ids = True


class ClassId(FieldKind):
    """One class id per sample (int32)."""

    name = "class"
    class_ids = True


class Boxes(FieldKind):
    """Per object x1, y1, x2, y2 float32 in the image's pixels."""

    name = "boxes"
    geometry = "boxes"


class ObjectClass(FieldKind):
    """Per object its class id (int32)."""

    name = "object_class"
    class_ids = True


class Flag(FieldKind):
    """Per object a 0/1 flag (uint8): COCO's iscrowd, VOC's difficult. Not padded."""

    name = "flag"
    padded = False


class ObjectMask(FieldKind):
    """Per object a 0/1 plane of the image's size, bit-packed. Not padded (max_boxes planes
    an image would dwarf the image)."""

    name = "object_mask"
    geometry = "planes"
    padded = False

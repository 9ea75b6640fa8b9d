"""`FieldKind`: what a kind of field's values are and how every stage treats them.

A field (`schema.Field`) is a name, a shape, a dtype and a kind; the kind is the one object
that says what its values mean: how the pack's geometry and the augmentation move them
(`geometry`), whether the padded readers yield them, and, stage by stage, the hooks below.
Formats, readers, the workers' hand-off, augmentation, statistics and preview loop over the
pack's fields and ask each field's kind; none of them names a field. A kind that overrides
nothing is stored as its dtype's bytes in every format and batched as it is: a new kind is a
subclass that says only what differs, registered with `packer.fields.register`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import numpy as np

    from ..schema import Field
    from .placing import Frame

# How the geometry (resize, crop, pad; the augmentation's flips, affine warps) moves a field:
#   "pixels"  a picture of the image's size: resampled with the kind's `interpolation`
#   "labels"  a plane of class ids of the image's size: nearest neighbour, padded with ignore
#   "boxes"   rows x1, y1, x2, y2 in the image's pixels: moved as coordinates
#   "points"  rows of (x, y[, ...]) in the image's pixels: moved as coordinates
#   "planes"  one 0/1 plane of the image's size per object: nearest neighbour, padded with 0
#   "none"    numbers the geometry does not touch (class ids, flags, regression targets)
GEOMETRIES = ("pixels", "labels", "boxes", "points", "planes", "none")
INTERPOLATIONS = ("linear", "area", "nearest", "cubic")


class FieldKind:
    """The base kind: numbers the geometry leaves alone, stored as their bytes."""

    name: ClassVar[str] = "array"
    geometry: ClassVar[str] = "none"
    interpolation: ClassVar[str] = "linear"  # for geometry "pixels"
    ragged: ClassVar[bool] = False  # rows per object (values + offsets), not one array a sample
    padded: ClassVar[bool] = True  # a ragged field: yielded by the padded readers (Keras, tf)
    class_ids: ClassVar[bool] = False  # values are indices into the pack's class table

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.geometry not in GEOMETRIES:
            raise TypeError(f"{cls.__name__}.geometry {cls.geometry!r}: one of {GEOMETRIES}")
        if cls.interpolation not in INTERPOLATIONS:
            raise TypeError(
                f"{cls.__name__}.interpolation {cls.interpolation!r}: one of {INTERPOLATIONS}"
            )

    def __repr__(self) -> str:
        return f"<field kind {self.name!r}: geometry {self.geometry}>"

    # --- packing: placing a source's value by the pack's geometry

    def place(self, value, field: Field, frame: Frame) -> np.ndarray:
        """One sample's `value` for `field` (ragged: its rows `[N, *row]`), placed by the
        pack's geometry as `frame` says (`fields.placing`: by this kind's `geometry`) and in
        the field's dtype without loss; a value that cannot be is a ValueError saying why."""
        from . import placing

        if self.geometry == "pixels":
            return placing.pixels(value, field.shape, field.dtype, frame, self.interpolation)
        if self.geometry == "labels":
            return placing.labels(value, field.dtype, frame)
        if self.geometry == "planes":
            return placing.planes(value, field.dtype, frame)
        if self.geometry in ("boxes", "points"):
            return placing.coordinates(value, field.dtype, frame, self.geometry == "boxes")
        return placing.fitted(value, field.dtype)

    # --- storage: TFRecord and RecordIO

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

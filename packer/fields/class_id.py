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
    recordio = "label"  # a scalar: MXNet's IRHeader label; TFRecord's image/class/label
    tf_key = "image/class/label"

    def tfrecord_keys(self, field):
        return (self.tf_key,) if field.shape == () else super().tfrecord_keys(field)

    def tfrecord_raw_key(self, field):
        return None if field.shape == () else super().tfrecord_raw_key(field)

    def tfrecord_encode(self, field, value, size, names):
        if field.shape != ():
            return super().tfrecord_encode(field, value, size, names)
        return {self.tf_key: ("int64", [int(field.coerce(value))])}

    def tfrecord_decode(self, field, example, size):
        if field.shape != ():
            return super().tfrecord_decode(field, example, size)
        values, dtype = example.ints(self.tf_key), np.dtype(field.dtype)
        if len(values) != 1:
            raise ValueError(f"{self.tf_key}: {len(values)} values, one expected")
        value = int(values[0])
        if not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:  # an edited record
            raise ValueError(f"{self.tf_key} {value} does not fit the field's {dtype.name}")
        return np.asarray(value, dtype)

    def tf_spec(self, field):
        import tensorflow as tf

        if field.shape != ():
            return super().tf_spec(field)
        return {self.tf_key: tf.io.FixedLenFeature([], tf.int64)}

    def tf_value(self, field, parsed, size):
        import tensorflow as tf

        if field.shape != ():
            return super().tf_value(field, parsed, size)
        value, dtype = parsed[self.tf_key], np.dtype(field.dtype).newbyteorder("=")
        if dtype == np.int64:
            return value
        cast, why = tf.cast(value, dtype.name), f"{self.tf_key} does not fit {dtype.name}"
        fits = [tf.debugging.assert_equal(tf.cast(cast, tf.int64), value, message=why)]
        if dtype.kind == "u":  # -1 round-trips through uint64: refused as such
            fits.append(tf.debugging.assert_non_negative(value, message=why))
        with tf.control_dependencies(fits):  # an edited record's id: never wrapped
            return tf.identity(cast)

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

"""The class field kind: one class id per sample (int32)."""

from __future__ import annotations

import numpy as np

from .kind import FieldKind


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
        return np.asarray(example.ints(self.tf_key)[0], field.dtype)

    def tf_spec(self, field):
        import tensorflow as tf

        if field.shape != ():
            return super().tf_spec(field)
        return {self.tf_key: tf.io.FixedLenFeature([], tf.int64)}

    def tf_value(self, field, parsed, size):
        import tensorflow as tf

        if field.shape != ():
            return super().tf_value(field, parsed, size)
        return tf.cast(parsed[self.tf_key], np.dtype(field.dtype).newbyteorder("=").name)

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

"""The object_class field kind: per object its class id (int32)."""

from __future__ import annotations

import numpy as np

from .kind import FieldKind


class ObjectClass(FieldKind):
    """Per object its class id (int32)."""

    name = "object_class"
    ragged = True
    class_ids = True

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO
    # TFRecord: the Object Detection API's label (class index + 1: its label maps start at 1, 0
    # being its background) and the class's name; RecordIO: the first column of MXNet's label.
    recordio = "detection"
    detection_order = 0
    tf_key, tf_text, offset = "image/object/class/label", "image/object/class/text", 1

    def tfrecord_keys(self, field):
        return (self.tf_key, self.tf_text)

    def tfrecord_encode(self, field, value, size, names):
        ids = [int(v) for v in np.asarray(value).reshape(-1)]
        return {
            self.tf_key: ("int64", [i + self.offset for i in ids]),
            self.tf_text: ("bytes", [names[i].encode() for i in ids]),
        }

    def tfrecord_decode(self, field, example, size):
        return (example.ints(self.tf_key) - self.offset).astype(field.dtype)

    def tf_spec(self, field):
        import tensorflow as tf

        return {self.tf_key: tf.io.VarLenFeature(tf.int64)}

    def tf_value(self, field, parsed, size):
        import tensorflow as tf

        labels = tf.RaggedTensor.from_sparse(parsed[self.tf_key]) - self.offset
        return tf.cast(labels, np.dtype(field.dtype).newbyteorder("=").name)

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

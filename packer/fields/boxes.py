"""The boxes field kind: per object x1, y1, x2, y2 float32 in the image's pixels."""

from __future__ import annotations

import numpy as np

from .kind import FieldKind


class Boxes(FieldKind):
    """Per object x1, y1, x2, y2 float32 in the image's pixels."""

    name = "boxes"
    ragged = True
    geometry = "boxes"

    # --- packing: placing a source's value by the pack's geometry

    # --- storage: TFRecord and RecordIO
    # TFRecord: the Object Detection API's corners, normalised by the image's width and height;
    # RecordIO: the 4 corner columns of MXNet's detection label, normalised the same way.
    recordio = "detection"
    detection_columns = 4
    detection_order = 1
    tf_keys = tuple(f"image/object/bbox/{k}" for k in ("xmin", "ymin", "xmax", "ymax"))

    @staticmethod
    def scale(size: tuple[int, int]) -> np.ndarray:
        width, height = size
        return np.array([width, height, width, height], np.float64)

    def tfrecord_keys(self, field):
        return self.tf_keys

    def tfrecord_encode(self, field, value, size, names):
        scaled = np.asarray(value, np.float64).reshape(-1, 4) / self.scale(size)
        return {key: ("float", scaled[:, k]) for k, key in enumerate(self.tf_keys)}

    def tfrecord_decode(self, field, example, size):
        scaled = np.stack([example.floats(k) for k in self.tf_keys], axis=1).astype(np.float64)
        return (scaled * self.scale(size)).astype(np.float32).astype(field.dtype)

    def tf_spec(self, field):
        import tensorflow as tf

        return {k: tf.io.VarLenFeature(tf.float32) for k in self.tf_keys}

    def tf_value(self, field, parsed, size):
        import tensorflow as tf

        corners = [tf.RaggedTensor.from_sparse(parsed[k]) for k in self.tf_keys]
        return tf.stack(corners, axis=-1) * tf.constant(self.scale(size), tf.float32)

    def detection_encode(self, field, value, size):
        return np.asarray(value, np.float64).reshape(-1, 4) / self.scale(size)

    def detection_decode(self, field, table, size):
        return (table * self.scale(size)).astype(np.float32).astype(field.dtype)

    # --- reading: batches, targets, the workers' hand-off

    # --- augmentation

    # --- statistics, info and preview

"""The object_class field kind: per object its class id (int32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .counting import shape_text
from .kind import FieldKind

if TYPE_CHECKING:
    from ..schema import Field


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
            # a class id the table does not name (integer ids given as such): its number
            self.tf_text: (
                "bytes",
                [(names[i] if i < len(names) else str(i)).encode() for i in ids],
            ),
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
    class_stats = ("class_objects", "other_images")

    def count_classes(self, value: np.ndarray) -> np.ndarray:
        """Objects per class id."""
        return np.bincount(value.astype(np.int64), minlength=1)

    def info(self, field: Field) -> str:
        """Its name, shape and dtype (a built-in kind's field needs no more words)."""
        return shape_text(field)

    def draw(self, tile, value: np.ndarray) -> None:
        """The object count under the tile; the objects' classes join the legend (their
        colours are what the other object fields are drawn in)."""
        tile.caption += f" {len(value)} objects"
        tile.shown.update(int(c) for c in value)

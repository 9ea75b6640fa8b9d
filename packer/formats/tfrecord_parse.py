"""The tfrecord format read by tf.data: a batch of packer's serialized Examples parsed at once.

TensorFlow is imported on first use, so that workers loading the format modules never import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..schema import Field, fixed, ragged
from . import tfrecord_objects
from .tfrecord import FEATURES

if TYPE_CHECKING:
    import tensorflow as tf


def example_decoder(
    fields: Sequence[Field], max_boxes: int = 100
) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """A function parsing a batch of serialized Examples at once: field name -> `[B, *shape]`.

    Raw bytes become fixed-shape arrays of each field's dtype; the int64 label is cast to the
    label field's dtype, as the other formats store it. Object fields (detection) become
    `boxes` `[B,max_boxes,4]` and `labels` `[B,max_boxes]` padded with -1, and `cut` the
    objects beyond max_boxes.
    """
    import tensorflow as tf

    objects = ragged(fields)
    fields = fixed(fields)
    size = tfrecord_objects.image_size(fields)

    dtypes = {f.name: tf.as_dtype(np.dtype(f.dtype).newbyteorder("=")) for f in fields}
    spec = {
        FEATURES[f.name]: tf.io.FixedLenFeature([], tf.int64 if f.shape == () else tf.string)
        for f in fields
    }

    spec.update(tfrecord_objects.tf_features(objects))

    def decode(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(serialized, spec)
        out = tfrecord_objects.tf_padded(parsed, size, max_boxes) if objects else {}
        for f in fields:
            value = parsed[FEATURES[f.name]]
            if f.shape == ():  # int64 label -> the label field's dtype
                out[f.name] = tf.cast(value, dtypes[f.name])
            else:
                raw = tf.io.decode_raw(value, dtypes[f.name], little_endian=True)
                out[f.name] = tf.ensure_shape(
                    tf.reshape(raw, [-1, *f.shape]), [serialized.shape[0], *f.shape]
                )
        return out

    return decode

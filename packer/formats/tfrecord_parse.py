"""The tfrecord format read by tf.data: a batch of packer's serialized Examples parsed at once.

TensorFlow is imported on first use, so that workers loading the format modules never import it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..fields import kind_of
from ..schema import Field
from . import tfrecord_objects

if TYPE_CHECKING:
    import tensorflow as tf


def example_decoder(
    fields: Sequence[Field], max_boxes: int = 100
) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """A function parsing a batch of serialized Examples at once: field name -> `[B, *shape]`.

    Each field's kind gives its parse spec and its values (`FieldKind.tf_spec`, `tf_value`):
    fixed fields as `[B, *shape]` of their dtype; ragged fields whose kind is padded (boxes,
    object classes) as `[B, max_boxes, *shape]` padded with -1 (KerasHub's), a batch with
    objects beyond max_boxes warning; other ragged fields (flags, per-object masks) left out.
    """
    import tensorflow as tf

    size = tfrecord_objects.image_size(fields)
    codecs = tfrecord_objects.codecs(fields)
    wanted = [(f, k) for f, k in codecs if not f.ragged or kind_of(f).padded]
    spec = {}
    for field, kind in wanted:
        spec.update(kind.tf_spec(field))

    def decode(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(serialized, spec)
        out, warned = {}, False
        for field, kind in wanted:
            value = kind.tf_value(field, parsed, size)
            if not field.ragged:
                out[field.name] = tf.ensure_shape(value, [serialized.shape[0], *field.shape])
                continue
            if not warned:  # every ragged field has the sample's objects: one check a batch
                cut = tf.reduce_sum(tf.maximum(value.row_lengths() - max_boxes, 0))
                tf.cond(cut > 0, lambda: _warn_cut(max_boxes), lambda: tf.constant(0))
                warned = True
            pad = tf.cast(-1, value.dtype)
            out[field.name] = value.to_tensor(pad, shape=[None, max_boxes, *field.shape])
        return out

    return decode


def _warn_cut(max_boxes: int):
    """tf.print a warning for a batch whose objects max_boxes cut (in-graph, per batch)."""
    import tensorflow as tf

    tf.print(f"packer: max_boxes={max_boxes} cut objects from a batch; raise max_boxes to "
             "keep them", output_stream=sys.stderr)  # fmt: skip
    return tf.constant(0)

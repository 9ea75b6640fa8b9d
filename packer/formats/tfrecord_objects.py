"""Object fields in a TFRecord Example, under the TensorFlow Object Detection API's keys.

Each ragged field encodes itself into features and decodes itself back (the writer and the
readers loop over fields without knowing them): boxes as `image/object/bbox/xmin|ymin|xmax|
ymax` (float32, normalised by the image's width and height), labels as
`image/object/class/label` (int64, the class index + 1: that API's label maps start at 1,
0 being its background) with `image/object/class/text` (the class names), crowd and difficult
flags as `image/object/is_crowd` and `image/object/difficult` (int64), per-object masks as
`image/object/mask` (one PNG per object, that API's PNG_MASKS) and
`image/object/mask/packed` (the same 0/1 planes bit-packed, what packer's readers unpack
without decoding). See formats/tfrecord.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import cv2
import numpy as np

from ..schema import Field
from .tfrecord_wire import (
    bytes_list_feature,
    bytes_values,
    expect,
    float_feature,
    int64_feature,
    int64_values,
)

BOX_KEYS = tuple(f"image/object/bbox/{k}" for k in ("xmin", "ymin", "xmax", "ymax"))
LABEL, TEXT = "image/object/class/label", "image/object/class/text"
FLAGS = {"iscrowd": "image/object/is_crowd", "difficult": "image/object/difficult"}
MASK_PNG, MASK_BITS = "image/object/mask", "image/object/mask/packed"
LABEL_OFFSET = 1  # stored label = class index + 1


def encode(
    field: Field, value: np.ndarray, size: tuple[int, int], names: Sequence[str]
) -> dict[str, list]:
    """The features of one ragged field's value `[N, *shape]` for an image of `size` (W, H)."""
    width, height = size
    if field.name == "boxes":
        scaled = np.asarray(value, np.float64) / np.array([width, height, width, height])
        return {key: float_feature(scaled[:, k]) for k, key in enumerate(BOX_KEYS)}
    if field.name == "labels":
        ids = [int(v) for v in value]
        return {
            LABEL: int64_feature([i + LABEL_OFFSET for i in ids]),
            TEXT: bytes_list_feature([names[i].encode() for i in ids]),
        }
    if field.name in FLAGS:
        return {FLAGS[field.name]: int64_feature([int(v) for v in value])}
    if field.name == "masks":
        rows = field.encode(value)
        pngs = [_png(plane) for plane in np.asarray(value, np.uint8)]
        return {MASK_PNG: bytes_list_feature(pngs), MASK_BITS: bytes_list_feature(list(rows))}
    raise ValueError(f"no TFRecord encoding for the ragged field {field.name!r}")


def _png(plane: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", plane, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise ValueError("OpenCV could not encode a mask as PNG")
    return data.tobytes()


def decode(field: Field, lists: dict, data, size: tuple[int, int]) -> np.ndarray:
    """One ragged field's value back from an Example's lists (`tfrecord_wire.decode_lists`)."""
    width, height = size

    def floats(key: str) -> np.ndarray:
        _, _, _, start, stop = lists[key]
        return _packed(data, start, stop, "<f4")

    if field.name == "boxes":
        scaled = np.stack([floats(k) for k in BOX_KEYS], axis=1).astype(np.float64)
        return (scaled * np.array([width, height, width, height])).astype(np.float32)
    if field.name == "labels":
        return (_ints(data, lists[LABEL]) - LABEL_OFFSET).astype(field.dtype)
    if field.name in FLAGS:
        return _ints(data, lists[FLAGS[field.name]]).astype(field.dtype)
    if field.name == "masks":
        _, _, _, start, stop = lists[MASK_BITS]
        rows = bytes_values(data, start, stop)
        joined = np.frombuffer(b"".join(rows), np.uint8)
        return field.decode(joined.reshape(len(rows), *field.stored_shape))
    raise ValueError(f"no TFRecord decoding for the ragged field {field.name!r}")


def _packed(data, start: int, stop: int, dtype: str) -> np.ndarray:
    """The packed values (field 1) of a FloatList message in data[start:stop]."""
    if start == stop:
        return np.zeros(0, dtype)
    begin, end = expect(data, start, 0x0A)
    return np.frombuffer(data, dtype, (end - begin) // np.dtype(dtype).itemsize, begin).copy()


def _ints(data, listed: tuple) -> np.ndarray:
    _, begin, end, start, stop = listed
    return np.asarray(int64_values(data, begin, end) if start < stop else [], np.int64)


def tf_features(fields: Sequence[Field]) -> dict:
    """The tf.io parse spec of the object keys the ragged `fields` store (VarLen lists)."""
    import tensorflow as tf

    spec = {}
    names = {f.name for f in fields if f.ragged}
    if "boxes" in names:
        spec.update({k: tf.io.VarLenFeature(tf.float32) for k in BOX_KEYS})
    if "labels" in names:
        spec[LABEL] = tf.io.VarLenFeature(tf.int64)
    return spec


def tf_padded(parsed: dict, size: tuple[int, int], max_boxes: int) -> dict:
    """Boxes `[B,max_boxes,4]` in pixels and labels `[B,max_boxes]` int32, padded with -1
    (KerasHub's), from a parsed batch; a batch with objects beyond max_boxes warns."""
    import tensorflow as tf

    width, height = size
    corners = [tf.RaggedTensor.from_sparse(parsed[k]) for k in BOX_KEYS]
    boxes = tf.stack(corners, axis=-1) * tf.constant([width, height, width, height], tf.float32)
    labels = tf.cast(tf.RaggedTensor.from_sparse(parsed[LABEL]) - LABEL_OFFSET, tf.int32)
    cut = tf.reduce_sum(tf.maximum(labels.row_lengths() - max_boxes, 0))
    tf.cond(cut > 0, lambda: _warn_cut(max_boxes), lambda: tf.constant(0))
    return {
        "boxes": boxes.to_tensor(-1.0, shape=[None, max_boxes, 4]),
        "labels": labels.to_tensor(-1, shape=[None, max_boxes]),
    }


def _warn_cut(max_boxes: int):
    """tf.print a warning for a batch whose objects max_boxes cut (in-graph, per batch)."""
    import tensorflow as tf

    tf.print(f"packer: max_boxes={max_boxes} cut objects from a batch; raise max_boxes to "
             "keep them", output_stream=sys.stderr)  # fmt: skip
    return tf.constant(0)


def image_size(fields: Sequence[Field]) -> tuple[int, int]:
    """(W, H) of the images field: what normalised box coordinates are relative to."""
    height, width, _ = next(f for f in fields if f.name == "images").shape
    return width, height

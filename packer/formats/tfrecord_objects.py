"""A field's features in a TFRecord Example: each field's kind says which features its value
takes (`FieldKind.tfrecord_encode`, the TensorFlow Object Detection API's keys for the built-in
object kinds, `packer/<field name>` for a kind of its own), this module writes them as wire
bytes and gives the kind an `Example` view to read them back. The writer and the readers loop
over fields without knowing them. See formats/tfrecord.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..fields import FieldKind, get, kind_of
from ..fields.boxes import Boxes
from ..fields.object_class import ObjectClass
from ..fields.object_mask import ObjectMask
from ..schema import Field
from .tfrecord_wire import (
    bytes_list_feature,
    bytes_values,
    expect,
    float_feature,
    int64_feature,
    int64_values,
)

# The Object Detection API's keys the built-in object kinds use (what tests and parsers name).
BOX_KEYS = Boxes.tf_keys
LABEL, TEXT = ObjectClass.tf_key, ObjectClass.tf_text
MASK_PNG, MASK_BITS = ObjectMask.tf_png, ObjectMask.tf_bits
WIRE = {"int64": int64_feature, "float": float_feature, "bytes": bytes_list_feature}


def codecs(fields: Sequence[Field]) -> list[tuple[Field, FieldKind]]:
    """Each field with the kind that stores it: its own, or, when an earlier field took one
    of its keys (a second field of a kind), the generic `FieldKind` under `packer/<name>`."""
    taken: set[str] = set()
    found = []
    for field in fields:
        kind = kind_of(field)
        if taken.intersection(kind.tfrecord_keys(field)):
            kind = get(FieldKind.name)
        taken.update(kind.tfrecord_keys(field))
        found.append((field, kind))
    return found


def encode(
    field: Field,
    value: np.ndarray,
    size: tuple[int, int],
    names: Sequence[str],
    kind: FieldKind | None = None,
) -> dict[str, list]:
    """The wire features of one field's value for an image of `size` (W, H)."""
    features = (kind or kind_of(field)).tfrecord_encode(field, value, size, names)
    return {key: WIRE[wire](values) for key, (wire, values) in features.items()}


def decode(
    field: Field, lists: dict, data, size: tuple[int, int], kind: FieldKind | None = None
) -> np.ndarray:
    """One field's value back from an Example's lists (`tfrecord_wire.decode_lists`)."""
    return (kind or kind_of(field)).tfrecord_decode(field, Example(lists, data), size)


class Example:
    """An Example's features as a kind reads them: a missing key is a KeyError."""

    def __init__(self, lists: dict, data) -> None:
        self.lists, self.data = lists, data

    def ints(self, key: str) -> np.ndarray:
        if self.lists[key][0] != 3:
            raise ValueError(f"{key} is not an int64 feature")
        return _ints(self.data, self.lists[key])

    def floats(self, key: str) -> np.ndarray:
        _, _, _, start, stop = self.lists[key]
        return _packed(self.data, start, stop, "<f4")

    def bytes(self, key: str) -> list[bytes]:
        _, _, _, start, stop = self.lists[key]
        return bytes_values(self.data, start, stop)

    def raw(self, key: str) -> memoryview:
        """The first value of a bytes feature, in place."""
        kind, begin, end, _, _ = self.lists[key]
        if kind != 1:
            raise ValueError(f"{key} is not a bytes feature")
        return memoryview(self.data)[begin:end]


def _packed(data, start: int, stop: int, dtype: str) -> np.ndarray:
    """The packed values (field 1) of a FloatList message in data[start:stop]."""
    if start == stop:
        return np.zeros(0, dtype)
    begin, end = expect(data, start, 0x0A)
    return np.frombuffer(data, dtype, (end - begin) // np.dtype(dtype).itemsize, begin).copy()


def _ints(data, listed: tuple) -> np.ndarray:
    _, begin, end, start, stop = listed
    return np.asarray(int64_values(data, begin, end) if start < stop else [], np.int64)


def image_size(fields: Sequence[Field]) -> tuple[int, int]:
    """(W, H) of the input field (the first of kind "image"): what normalised coordinates are
    relative to."""
    image = next(f for f in fields if f.kind == "image")
    height, width = image.shape[:2]
    return width, height

"""Fields: the arrays every packed sample holds (images, masks or labels; objects' boxes, ...).

A fixed field holds one array of `shape` per sample. A ragged field (detection, instances)
holds `[N, *shape]` per sample, N the sample's object count: each format stores its values and
where each sample's rows start, and the field itself says how one object's row is stored
(`encode`) and read back (`decode`): as its dtype's bytes, or with `packing="bits"` a 0/1 plane
packed eight pixels a byte (`np.packbits`, most significant bit first), so that reading
per-object masks is a bit-unpacking, never a decode.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

PACKINGS = ("", "bits")


@dataclass(frozen=True)
class Field:
    """One array per sample (fixed shape and dtype, a numpy dtype string with byte order), or
    with `ragged` one array of `shape` per object of the sample."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    ragged: bool = False
    packing: str = ""

    @cached_property
    def nbytes(self) -> int:
        """Bytes of one record (a ragged field: of one object's row) as stored (cached:
        writers ask for it per record)."""
        return (
            int(np.prod(self.stored_shape, dtype=np.int64)) * np.dtype(self.stored_dtype).itemsize
        )

    @cached_property
    def stored_shape(self) -> tuple[int, ...]:
        """One record's (or object's) shape as stored: bit-packed planes are rows of bytes."""
        if self.packing == "bits":
            return (-(-int(np.prod(self.shape, dtype=np.int64)) // 8),)
        return self.shape

    @property
    def stored_dtype(self) -> str:
        return "|u1" if self.packing == "bits" else self.dtype

    def to_json(self) -> dict:
        extra = {"ragged": True} if self.ragged else {}
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            **extra,
            **({"packing": self.packing} if self.packing else {}),
        }

    def coerce(self, value) -> np.ndarray:
        """`value` as a C-ordered array of this field's dtype; a wrong shape is an error."""
        array = np.asarray(value, dtype=self.dtype, order="C")
        if array.shape != self.shape:
            raise ValueError(f"{self.name}: shape {array.shape}, expected {self.shape}")
        return array

    def encode(self, value) -> np.ndarray:
        """A ragged field's value `[N, *shape]` as its stored rows `[N, *stored_shape]`."""
        array = np.asarray(value, dtype=self.dtype)
        if array.shape[1:] != self.shape:
            raise ValueError(f"{self.name}: objects of shape {array.shape[1:]}, not {self.shape}")
        if self.packing == "bits":
            flat = array.reshape(len(array), int(np.prod(self.shape))) != 0
            return np.packbits(flat, axis=1).reshape(len(array), *self.stored_shape)
        return np.ascontiguousarray(array)

    def decode(self, rows: np.ndarray, copy: bool = True) -> np.ndarray:
        """Stored rows `[N, *stored_shape]` (any bytes-like of N rows) as `[N, *shape]`; a
        copy unless `copy=False` (rows the caller owns, e.g. just gathered)."""
        rows = np.asarray(rows, self.stored_dtype)
        rows = rows.reshape(rows.size // max(self.nbytes // rows.itemsize, 1), *self.stored_shape)
        if self.packing == "bits":
            pixels = int(np.prod(self.shape, dtype=np.int64))
            bits = np.unpackbits(rows, axis=1, count=pixels)
            return bits.reshape(len(rows), *self.shape).astype(self.dtype, copy=False)
        return np.array(rows) if copy else rows  # never a view of a memmap or a record's bytes

    @classmethod
    def from_json(cls, data: dict) -> Field:
        return cls(
            data["name"],
            tuple(data["shape"]),
            data["dtype"],
            bool(data.get("ragged", False)),
            data.get("packing", ""),
        )


# The object fields of a detection pack, after the images: one row per object.
OBJECT_FIELDS = ("boxes", "labels", "iscrowd", "difficult")


def fields_for(
    task: str,
    size: tuple[int, int],
    mask_dtype: np.dtype,
    image: tuple[str, int] = ("uint8", 3),
) -> tuple[Field, ...]:
    """Images `[H,W,C]` of the sample type and band count `image` (8-bit RGB unless the source
    is something else), plus masks `[H,W]` (segmentation), an int32 label (classification), or
    per object a box, a label, crowd and difficult flags (detection) and a bit-packed `[H,W]`
    mask (instances)."""
    width, height = size
    image_dtype, bands = image
    image = Field("images", (height, width, bands), np.dtype(image_dtype).str)
    if task == "segmentation":
        return image, Field("masks", (height, width), np.dtype(mask_dtype).str)
    if task in ("detection", "instances"):
        objects = (
            Field("boxes", (4,), "<f4", ragged=True),
            Field("labels", (), "<i4", ragged=True),
            Field("iscrowd", (), "|u1", ragged=True),
            Field("difficult", (), "|u1", ragged=True),
        )
        masks = (Field("masks", (height, width), "|u1", True, "bits"),) * (task == "instances")
        return image, *objects, *masks
    return image, Field("labels", (), "<i4")


def fixed(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The fields with one array per sample (readers batch these)."""
    return tuple(f for f in fields if not f.ragged)


def ragged(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The fields with one row per object (readers give these per sample)."""
    return tuple(f for f in fields if f.ragged)


def record_bytes(fields: tuple[Field, ...]) -> int:
    """Bytes one sample takes across all fields (a ragged field: counted as one object)."""
    return sum(f.nbytes for f in fields)

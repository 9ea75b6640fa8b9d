"""Fields: the arrays every packed sample holds (images, masks or labels; objects' boxes, ...).

Each field has a kind (`packer.fields`): what its values mean and how each stage treats them.

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
    kind: str = ""  # a `packer.fields` kind name; empty: the kind today's fields of this name have
    # Points fields (K points a row): the point each one becomes when the image is mirrored
    # (left and right swap: YOLO's flip_idx); empty: points keep their order.
    flip_order: tuple[int, ...] = ()
    # How a fixed image field's value is stored: "raw" (its bytes), or "jpeg"/"png" (one
    # compressed payload a sample, decoded by the readers: `imaging.codec`).
    encoding: str = "raw"

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", PRESET_KINDS.get((self.name, self.ragged), "array"))
        order = tuple(int(i) for i in self.flip_order)
        if order and (len(self.shape) < 2 or sorted(order) != list(range(self.shape[-2]))):
            raise ValueError(
                f"{self.name}: flip_order {list(order)} is not an order of the "
                f"{self.shape[-2] if len(self.shape) >= 2 else 0} points a row holds"
            )
        object.__setattr__(self, "flip_order", order)

    @cached_property
    def nbytes(self) -> int:
        """Bytes of one record (a ragged field: of one object's row) as stored (cached:
        writers ask for it per record); an encoded field's: as decoded."""
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
            "kind": self.kind,
            "shape": list(self.shape),
            "dtype": self.dtype,
            **extra,
            **({"packing": self.packing} if self.packing else {}),
            **({"flip_order": list(self.flip_order)} if self.flip_order else {}),
            **({"encoding": self.encoding} if self.encoding != "raw" else {}),
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
            data.get("kind", ""),  # manifests before kinds: inferred from name and raggedness
            tuple(data.get("flip_order", ())),
            data.get("encoding", "raw"),  # manifests before encodings: raw
        )


# The kinds of today's presets' fields, by (name, ragged): what a manifest written before fields
# had kinds means by its fields.
PRESET_KINDS = {
    ("images", False): "image",
    ("masks", False): "mask",
    ("labels", False): "class",
    ("boxes", True): "boxes",
    ("labels", True): "object_class",
    ("iscrowd", True): "flag",
    ("difficult", True): "flag",
    ("masks", True): "object_mask",
}


def fixed(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The fields with one array per sample (readers batch these)."""
    return tuple(f for f in fields if not f.ragged)


def ragged(fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """The fields with one row per object (readers give these per sample)."""
    return tuple(f for f in fields if f.ragged)


def record_bytes(fields: tuple[Field, ...]) -> int:
    """Bytes one sample takes across all fields (a ragged field: counted as one object)."""
    return sum(f.nbytes for f in fields)

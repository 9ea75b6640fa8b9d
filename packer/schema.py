"""Fields: the fixed-shape arrays every packed sample holds (images, masks or labels)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Field:
    """One array per sample, fixed shape and dtype (a numpy dtype string with byte order)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @cached_property
    def nbytes(self) -> int:
        """Bytes of one record of this field (cached: writers ask for it per record)."""
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    def coerce(self, value) -> np.ndarray:
        """`value` as a C-ordered array of this field's dtype; a wrong shape is an error."""
        array = np.asarray(value, dtype=self.dtype, order="C")
        if array.shape != self.shape:
            raise ValueError(f"{self.name}: shape {array.shape}, expected {self.shape}")
        return array

    @classmethod
    def from_json(cls, data: dict) -> Field:
        return cls(data["name"], tuple(data["shape"]), data["dtype"])


def fields_for(task: str, size: tuple[int, int], mask_dtype: np.dtype) -> tuple[Field, ...]:
    """Images `[H,W,3]` uint8, plus masks `[H,W]` (segmentation) or an int32 label."""
    width, height = size
    image = Field("images", (height, width, 3), "|u1")
    if task == "segmentation":
        return image, Field("masks", (height, width), np.dtype(mask_dtype).str)
    return image, Field("labels", (), "<i4")


def record_bytes(fields: tuple[Field, ...]) -> int:
    """Bytes one sample takes across all fields."""
    return sum(f.nbytes for f in fields)

"""A field's shape and dtype from a sample's value and the pack's size: what the plans of
Python samples and of lists with columns decide before any sample is packed."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import fields, storage
from ..errors import ImageError, PackError
from ..fields import FieldKind
from ..imaging import decode_mask
from ..imaging.decode import probe_kind
from ..imaging.kinds import AUTO, PixelKind
from ..imaging.orientation import oriented_size
from ..schema import Field
from ..sources import SourceScan


def bytes_of(root: Path, value) -> bytes:
    """A path's file bytes (relative to `root`), or the bytes given."""
    if isinstance(value, str):
        try:
            return storage.read_bytes(os.path.join(root, value))
        except OSError as exc:
            raise PackError(f"{value}: cannot read file: {exc.strerror or exc}") from None
    return bytes(value)


def picture(root: Path, value, max_pixels: int):
    """The first image's kind of samples and its size (W, H) as displayed."""
    if isinstance(value, np.ndarray):
        if value.ndim not in (2, 3):
            raise PackError(f"samples[0]: an image array of shape {value.shape}, not [h, w, c]")
        bands = 1 if value.ndim == 2 else value.shape[2]  # an array's bands are kept as given
        return PixelKind(value.dtype.name, bands), (value.shape[1], value.shape[0])
    data = bytes_of(root, value)
    try:
        header, _, kind = probe_kind(data, max_pixels)
    except ImageError as exc:
        where = value if isinstance(value, str) else "samples[0]"
        raise PackError(f"{where}: {exc}") from None
    return kind, oriented_size(header.size, header.orientation)


def value_field(key: str, kind: FieldKind, value, size, root: Path, max_pixels: int) -> Field:
    """The field of `key`: its shape and dtype from the first sample's value and the size."""
    width, height = size
    if kind.name == "class":
        return Field(key, (), "<i4", kind=kind.name)
    if kind.geometry == "pixels" and not isinstance(value, np.ndarray):
        found, _ = picture(root, value, max_pixels)
        out = AUTO.output(found)
        return Field(key, (height, width, out.bands), np.dtype(out.dtype).str, kind=kind.name)
    if kind.geometry == "labels" and not isinstance(value, np.ndarray):
        try:
            value = decode_mask(bytes_of(root, value), max_pixels).values
        except ImageError as exc:
            raise PackError(f"{key}: {exc}") from None
    array = np.asarray(value)
    dtype = dtype_of(value, array)
    if kind.ragged:
        if array.ndim < 1:
            raise PackError(f"{key}: kind {kind.name} is ragged, its value is [N, ...] rows")
        return Field(key, tuple(array.shape[1:]), dtype, ragged=True, kind=kind.name)
    if kind.geometry in ("pixels", "labels"):
        return Field(key, (height, width, *array.shape[2:]), dtype, kind=kind.name)
    return Field(key, tuple(array.shape), dtype, kind=kind.name)


def dtype_of(value, array: np.ndarray) -> str:
    """A NumPy value's own dtype; Python numbers: float32, int32 (int64 beyond it)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return array.dtype.str
    if array.dtype.kind == "f":
        return "<f4"
    if array.dtype.kind in "iu":
        small = array.size == 0 or (array.min() >= -(2**31) and array.max() < 2**31)
        return "<i4" if small else "<i8"
    if array.dtype.kind == "b":
        return "|u1"
    raise PackError(f"a value of type {type(value).__name__} ({array.dtype}) cannot be stored")


def listed_fields(
    found: SourceScan, size: tuple[int, int], stored: tuple[str, int], max_pixels: int
) -> tuple[Field, ...]:
    """The fields of a source whose samples carry values (a list with columns): the input
    image as the images are stored, the others from the first sample's values."""
    first = found.samples[0].values.by_field  # type: ignore[union-attr]
    kinds = found.fields.kinds  # type: ignore[union-attr]
    root = Path(found.root)
    return tuple(
        Field(name, (size[1], size[0], stored[1]), np.dtype(stored[0]).str, kind="image")
        if position == 0
        else value_field(name, fields.get(kind), first[name], size, root, max_pixels)
        for position, (name, kind) in enumerate(kinds.items())
    )

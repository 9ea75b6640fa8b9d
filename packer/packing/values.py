"""A Python sample's record: its input image decoded and placed as any image is, then every
other field's value placed through its kind's packing hook (`FieldKind.place`) in the image's
frame; ragged fields checked to hold one row per object alike, and objects whose box has no
area once placed left out of every ragged field, as packed boxes are."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import fields
from ..errors import ImageError, ImageKindError
from ..fields.placing import NO_PIXEL_LIMIT, Frame, pixels
from ..imaging import decode_image
from ..imaging.geometry import place
from ..imaging.resize import interpolation_for
from ..schema import Field
from ..sources import Sample

# geometries whose value may be a file: a path is read (and recorded) as a source file
FILE_GEOMETRIES = ("pixels", "labels")


class SampleError(Exception):
    """One input that cannot be packed: the file (or `<sample N>`) at fault and the
    precise reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def values_record(
    sample: Sample, config, read: Callable[[str], bytes]
) -> tuple[dict[str, np.ndarray], str, list[dict]]:
    """The arrays of a Python sample by field name, how its image was decoded, and the objects
    left out (boxes without area once placed). A value that cannot be placed raises
    `SampleError` naming the sample (or the file) and the field."""
    values = sample.values.by_field  # type: ignore[union-attr]
    where = sample.image
    image_field = next(f for f in config.fields if f.kind == "image")
    limit = config.max_pixels or NO_PIXEL_LIMIT
    value = values[image_field.name]
    try:
        if isinstance(value, np.ndarray):
            size = (value.shape[1], value.shape[0])
            placement = place(size, config.geometry)
            interpolation = interpolation_for(config.geometry, placement.crop, placement.scaled)
            own = Frame(None, None, config.geometry, config.ignore_index, limit)
            image = pixels(value, image_field.shape, image_field.dtype, own, interpolation)
            image = image[..., np.newaxis] if image.ndim == 2 else image  # one band: [H, W, 1]
            backend = "array"
        else:
            data = read(value) if isinstance(value, str) else bytes(value)
            loaded = decode_image(data, config.geometry, limit, config.conversion)
            image, size, placement = loaded.pixels, loaded.source_size, loaded.placement
            backend = loaded.backend
    except (ImageError, OSError, ValueError) as exc:
        raise SampleError(where, f"{image_field.name}: {exc}") from exc
    if image.dtype != np.dtype(image_field.dtype) or image.shape != image_field.shape:
        raise ImageKindError(
            f"{where}: {image_field.name} is {image.dtype} {list(image.shape)}, the pack "
            f"stores {np.dtype(image_field.dtype)} {list(image_field.shape)} (as its first "
            "sample's)"
        )
    frame = Frame(size, placement, config.geometry, config.ignore_index, limit)
    record = {image_field.name: image}
    rows: dict[str, int] = {}
    for field in config.fields:
        if field is image_field:
            continue
        record[field.name] = _placed(field, values[field.name], frame, where, read)
        if field.ragged:
            rows[field.name] = len(record[field.name])
    if len(set(rows.values())) > 1:
        (a, n), (b, m) = next((p, q) for p in rows.items() for q in rows.items() if p[1] != q[1])
        raise SampleError(where, f"ragged fields differ in rows: {a} has {n}, {b} has {m}")
    return record, backend, _without_degenerate(record, config.fields, values, where)


def _without_degenerate(
    record: dict[str, np.ndarray], pack_fields: tuple[Field, ...], values: dict, where: str
) -> list[dict]:
    """Leave out, from every ragged field, the objects whose placed box (the first ragged
    field of geometry "boxes") has no area, as packed boxes leave; each one left out with
    where and why."""
    ragged = [f for f in pack_fields if f.ragged]
    boxes = next((f for f in ragged if fields.kind_of(f).geometry == "boxes"), None)
    if boxes is None:
        return []
    placed = record[boxes.name]
    keep = (placed[:, 2] > placed[:, 0]) & (placed[:, 3] > placed[:, 1])
    if keep.all():
        return []
    source = np.asarray(values[boxes.name], np.float64).reshape(-1, 4)
    had_area = (source[:, 2] > source[:, 0]) & (source[:, 3] > source[:, 1])
    for field in ragged:
        record[field.name] = record[field.name][keep]
    why = {True: "outside the frame", False: "no area in the source (x2 <= x1 or y2 <= y1)"}
    return [
        {"path": where, "object": i, "reason": why[bool(had_area[i])]}
        for i in np.flatnonzero(~keep).tolist()
    ]


def _placed(field: Field, value, frame: Frame, where: str, read) -> np.ndarray:
    """One field's value placed by its kind, its shape checked against the field's."""
    kind = fields.kind_of(field)
    source = where
    try:
        if isinstance(value, str) and kind.geometry in FILE_GEOMETRIES:
            source = value
            value = read(value)
        placed = kind.place(value, field, frame)
    except (ImageError, OSError, ValueError) as exc:
        raise SampleError(source, f"{field.name}: {exc}") from exc
    shape = placed.shape[1:] if field.ragged else placed.shape
    if field.ragged and placed.ndim == 0:
        shape = None
    if shape != field.shape:
        expected = f"[N, {', '.join(map(str, field.shape))}]" if field.ragged else list(field.shape)
        raise SampleError(where, f"{field.name}: shape {list(placed.shape)}, expected {expected}")
    return placed

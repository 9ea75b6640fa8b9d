"""Object fields in a RecordIO record: MXNet's detection label, and per-object masks after the
image.

The label is what im2rec writes for `ImageDetRecordIter` / `ImageDetIter`: the IRHeader's
`flag` counts the float32 values that follow it, `[A, B, objects...]` with A = 2 (the header
width: A and B themselves) and B the object width: per object the columns of the pack's
detection fields, each from its kind (`FieldKind.detection_encode`), in the kinds' order: its
class index, x1/W, y1/H, x2/W, y2/H (normalised corners) and then packer's flags (the presets:
iscrowd and difficult, B = 7; MXNet reads the first five). Instances' masks follow the image
payload as a trailer: every object's 0/1 plane bit-packed (`np.packbits`, most significant bit
first) in object order, then uint32 object count, uint32 bytes per plane and the magic `PKOB`.
See formats/recordio.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from ..errors import RecordIOError
from ..fields import kind_of
from ..schema import Field

HEADER_WIDTH = 2
OBJECTS_MAGIC = b"PKOB"
OBJECTS_TRAILER = struct.Struct("<II4s")  # objects, bytes per plane, magic


def label(
    record: dict[str, np.ndarray], size: tuple[int, int], fields: Sequence[Field] | None = None
) -> np.ndarray:
    """The float32 detection label of a record's object `fields` (their kinds' columns, in the
    label's order) for an image of `size` (W, H). Without `fields`: the record's entries, by
    the kinds packs before kinds gave their names."""
    if fields is None:
        fields = [Field(name, np.shape(v)[1:], "<f8", ragged=True) for name, v in record.items()]
    fields = sorted(
        (f for f in fields if kind_of(f).recordio == "detection"),
        key=lambda f: kind_of(f).detection_order,
    )
    columns = [kind_of(f).detection_encode(f, record[f.name], size) for f in fields]
    rows = np.concatenate(columns, axis=1) if columns else np.zeros((0, 0))
    header = np.array([HEADER_WIDTH, rows.shape[1]], "<f4")
    return np.concatenate([header, rows.astype("<f4").ravel()])


def mask_trailer(field: Field, masks: np.ndarray) -> bytes:
    """Per-object masks `[N,H,W]` as the payload's trailing bytes."""
    rows = field.encode(masks)
    return rows.tobytes() + OBJECTS_TRAILER.pack(len(rows), field.nbytes, OBJECTS_MAGIC)


def split_trailer(payload: bytes) -> tuple[bytes, np.ndarray | None]:
    """(the payload without its mask trailer, the stored mask rows or None)."""
    view = memoryview(payload)
    if len(view) < OBJECTS_TRAILER.size or bytes(view[-4:]) != OBJECTS_MAGIC:
        return payload, None
    count, nbytes, _ = OBJECTS_TRAILER.unpack_from(view, len(view) - OBJECTS_TRAILER.size)
    end = len(view) - OBJECTS_TRAILER.size
    if count * nbytes > end:
        raise RecordIOError(
            f"mask trailer promises {count} x {nbytes} bytes, the payload has {end}"
        )
    rows = np.frombuffer(view, np.uint8, count * nbytes, end - count * nbytes)
    return view[: end - count * nbytes], rows.reshape(count, nbytes)


def objects(
    fields: Sequence[Field], values: np.ndarray, rows: np.ndarray | None, size: tuple[int, int]
) -> dict[str, np.ndarray]:
    """The object fields (detection label columns, `PKOB` planes) among `fields` from a
    record's label values and mask rows; a label narrower than the fields' columns leaves the
    optional ones (flags) 0. Without detection fields the planes are the objects."""
    detection = sorted(
        (f for f in fields if kind_of(f).recordio == "detection"),
        key=lambda f: kind_of(f).detection_order,
    )
    out: dict[str, np.ndarray] = {}
    count = None if rows is None else len(rows)
    if detection:
        table = _table(values)
        out = _columns(detection, table, size)
        count = len(table)
    for f in fields:
        if kind_of(f).recordio == "objects":
            if rows is None or len(rows) != count:
                raise RecordIOError(f"{count} objects, but no mask for each")
            out[f.name] = f.decode(rows)
    return out


def _table(values: np.ndarray) -> np.ndarray:
    """A detection label's objects, `[N, B]` float64, checked."""
    values = np.asarray(values, np.float32)
    if values.size < 2:
        raise RecordIOError("a detection record needs a label of at least [A, B]")
    start, width = int(values[0]), int(values[1])
    table = values[start:]
    if width < 1 or table.size % width:
        raise RecordIOError(f"a detection label of {values.size} values, object width {width}")
    return table.reshape(-1, width).astype(np.float64)


def _columns(
    fields: Sequence[Field], table: np.ndarray, size: tuple[int, int]
) -> dict[str, np.ndarray]:
    """Each field's value from its columns of `table`, in order; an optional field the
    label is too narrow for is 0."""
    out, column, width = {}, 0, table.shape[1]
    for f in fields:
        kind = kind_of(f)
        stop = column + kind.detection_columns
        if stop <= width:
            part = table[:, column:stop]
        elif kind.detection_optional:
            part = np.zeros((len(table), stop - column))
        else:
            raise RecordIOError(
                f"a detection label of object width {width}: no columns for {f.name}"
            )
        out[f.name] = kind.detection_decode(f, part, size)
        column = stop
    return out

"""Object fields in a RecordIO record: MXNet's detection label, and per-object masks after the
image.

The label is what im2rec writes for `ImageDetRecordIter` / `ImageDetIter`: the IRHeader's
`flag` counts the float32 values that follow it, `[A, B, objects...]` with A = 2 (the header
width: A and B themselves) and B = 7 (the object width): per object its class index, x1/W,
y1/H, x2/W, y2/H (normalised corners) and then packer's iscrowd and difficult flags (MXNet
reads the first five). Instances' masks follow the image payload as a trailer: every object's
0/1 plane bit-packed (`np.packbits`, most significant bit first) in object order, then uint32
object count, uint32 bytes per plane and the magic `PKOB`. See formats/recordio.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from ..errors import RecordIOError
from ..schema import Field

HEADER_WIDTH, OBJECT_WIDTH = 2, 7
OBJECTS_MAGIC = b"PKOB"
OBJECTS_TRAILER = struct.Struct("<II4s")  # objects, bytes per plane, magic


def label(record: dict[str, np.ndarray], size: tuple[int, int]) -> np.ndarray:
    """The float32 detection label of a record's objects for an image of `size` (W, H)."""
    width, height = size
    boxes = np.asarray(record["boxes"], np.float64) / np.array([width, height, width, height])
    rows = np.column_stack(
        [record["labels"], boxes, record["iscrowd"], record["difficult"]]
    ).astype("<f4")
    return np.concatenate([np.array([HEADER_WIDTH, OBJECT_WIDTH], "<f4"), rows.ravel()])


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
    """The object fields from a record's label values and mask rows."""
    values = np.asarray(values, np.float32)
    if values.size < 2:
        raise RecordIOError("a detection record needs a label of at least [A, B]")
    start, width = int(values[0]), int(values[1])
    table = values[start:]
    if width < 5 or table.size % width:
        raise RecordIOError(f"a detection label of {values.size} values, object width {width}")
    table = table.reshape(-1, width).astype(np.float64)
    w, h = size
    found = {
        "boxes": (table[:, 1:5] * np.array([w, h, w, h])).astype(np.float32),
        "labels": table[:, 0],
        "iscrowd": table[:, 5] if width > 5 else np.zeros(len(table)),
        "difficult": table[:, 6] if width > 6 else np.zeros(len(table)),
    }
    out = {}
    for f in fields:
        if f.name == "masks":
            if rows is None or len(rows) != len(table):
                raise RecordIOError(f"{len(table)} objects, but no mask for each")
            out["masks"] = f.decode(rows)
        else:
            out[f.name] = np.asarray(found[f.name]).astype(f.dtype)
    return out

"""Where a RecordIO record keeps each field, by its kind, and the `PKFD` trailer that holds
the fields of kinds RecordIO has no place of its own for.

A kind asks for a place (`FieldKind.recordio`): the payload's image or mask, the IRHeader's
label, columns of MXNet's detection label, the `PKOB` trailer of bit-packed planes; the first
field asking gets it, and every other field goes to the fields' trailer, after the payload (and
after the `PKOB` trailer): each trailer field's bytes in field order (a fixed field: its
value; a ragged one: its rows, little-endian, C order), then per field uint32 rows (1 for a
fixed field) and uint32 bytes per row, then uint32 field count and the magic `PKFD`. Records
of packs without such fields have no trailer. See formats/recordio.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RecordIOError
from ..fields import FieldKind, kind_of
from ..schema import Field

FIELDS_MAGIC = b"PKFD"
FIELDS_FOOTER = struct.Struct("<I4s")  # trailer fields, magic
FIELD_ENTRY = struct.Struct("<II")  # rows, bytes per row


@dataclass(frozen=True)
class Places:
    """The fields of a pack by their place in a record."""

    image: Field
    mask: Field | None
    label: Field | None
    detection: tuple[Field, ...]  # in the label's column order
    objects: Field | None
    trailer: tuple[Field, ...]


def places(fields: Sequence[Field]) -> Places:
    """Each field's place, asked of its kind; a place already given, or a field it does not
    fit (a ragged image, a label of many values), goes to the trailer."""
    fits = {
        "image": lambda f: not f.ragged,
        "mask": lambda f: not f.ragged,
        "label": lambda f: not f.ragged and f.shape == (),
        "objects": lambda f: f.ragged,
    }
    given: dict[str, Field] = {}
    detection, trailer = [], []
    for field in fields:
        place = kind_of(field).recordio
        if place == "detection" and field.ragged:
            detection.append(field)
        elif place in fits and place not in given and fits[place](field):
            given[place] = field
        else:
            trailer.append(field)
    if "image" not in given:
        raise ValueError("a RecordIO pack needs a field of kind image (its payload)")
    label = given.get("label")
    if detection and label is not None:  # the header holds the detection label
        trailer.insert(0, label)
        trailer.sort(key=list(fields).index)
        label = None
    detection.sort(key=lambda f: kind_of(f).detection_order)
    return Places(
        given["image"], given.get("mask"), label, tuple(detection), given.get("objects"),
        tuple(trailer),
    )  # fmt: skip


def trailer(fields: Sequence[Field], record: dict) -> bytes:
    """The `PKFD` trailer of a record's `fields` (empty when there are none)."""
    if not fields:
        return b""
    data, entries = [], []
    for field in fields:
        if field.ragged:
            rows = FieldKind.little_endian(field.encode(record[field.name]))
            entries.append(FIELD_ENTRY.pack(len(rows), field.nbytes))
        else:
            rows = FieldKind.little_endian(field.coerce(record[field.name]))
            entries.append(FIELD_ENTRY.pack(1, field.nbytes))
        data.append(rows.tobytes())
    return b"".join([*data, *entries, FIELDS_FOOTER.pack(len(fields), FIELDS_MAGIC)])


def fixed_tail(fields: Sequence[Field]) -> bytes:
    """The end of every record's trailer when `fields` are all fixed: its (1, bytes) entries
    and footer, the same in each record."""
    entries = b"".join(FIELD_ENTRY.pack(1, f.nbytes) for f in fields)
    return entries + FIELDS_FOOTER.pack(len(fields), FIELDS_MAGIC) if fields else b""


def trailer_bytes(fields: Sequence[Field]) -> int:
    """Bytes of the trailer of fixed `fields` (ragged ones counted as one row)."""
    if not fields:
        return 0
    return sum(f.nbytes + FIELD_ENTRY.size for f in fields) + FIELDS_FOOTER.size


def split(payload, fields: Sequence[Field]) -> tuple[memoryview, dict[str, np.ndarray]]:
    """(the payload before the trailer, field name -> value of each of `fields`), checked
    against the manifest's fields; no `fields`: the payload as it is."""
    view = memoryview(payload)
    if not fields:
        return view, {}
    end = len(view) - FIELDS_FOOTER.size
    if end < 0 or bytes(view[end + 4 :]) != FIELDS_MAGIC:
        raise RecordIOError(f"no {FIELDS_MAGIC.decode()} trailer of the fields {_names(fields)}")
    (count, _) = FIELDS_FOOTER.unpack_from(view, end)
    if count != len(fields):
        raise RecordIOError(f"a trailer of {count} fields, the manifest has {len(fields)}")
    end -= count * FIELD_ENTRY.size
    if end < 0:
        raise RecordIOError("a cut fields trailer")
    entries = [FIELD_ENTRY.unpack_from(view, end + k * FIELD_ENTRY.size) for k in range(count)]
    end -= sum(rows * nbytes for rows, nbytes in entries)
    if end < 0:
        raise RecordIOError("the fields trailer promises more bytes than the record holds")
    values, start = {}, end
    for field, (rows, nbytes) in zip(fields, entries, strict=True):
        if nbytes != field.nbytes or (rows != 1 and not field.ragged):
            raise RecordIOError(
                f"{field.name}: {rows} x {nbytes} bytes in the trailer, the manifest says "
                f"{'rows' if field.ragged else 1} x {field.nbytes}"
            )
        stored = np.dtype(field.stored_dtype).newbyteorder("<")
        data = np.frombuffer(view, stored, rows * nbytes // stored.itemsize, start)
        data = data.astype(field.stored_dtype, copy=False)
        values[field.name] = field.decode(data) if field.ragged else data.reshape(field.shape)
        start += rows * nbytes
    return view[:end], values


def _names(fields: Sequence[Field]) -> str:
    return ", ".join(f.name for f in fields)

"""TFRecord framing and the `tf.train.Example` wire format, both ways, without TensorFlow.

A TFRecord is a little-endian uint64 length, its masked CRC32C, the data, and the data's masked
CRC32C (CRC32C from the `crc32c` library). Examples are encoded by hand in protobuf's wire
format, features in sorted key order, so the bytes never depend on dict order or `--workers`.
See formats/tfrecord.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import crc32c
import numpy as np

HEAD_BYTES = 12  # uint64 length + masked CRC32C of it
FOOT_BYTES = 4  # masked CRC32C of the data
CRC = struct.Struct("<I")
_LENGTH = struct.Struct("<QI")
FRAMING = _LENGTH.size + CRC.size  # bytes between one record's data and the next's
_UINT64 = (1 << 64) - 1


# --- TFRecord framing ----------------------------------------------------------------------------


def masked_crc(*pieces) -> int:
    """TFRecord's masked CRC32C (rotated right by 15 bits, plus a constant) of the pieces."""
    crc = 0
    for piece in pieces:
        crc = crc32c.crc32c(piece, crc)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(pieces: Sequence) -> list:
    """One TFRecord: length, its masked CRC, the data (given in pieces, never joined), data CRC."""
    length = struct.pack("<Q", sum(len(p) for p in pieces))
    return [length, CRC.pack(masked_crc(length)), *pieces, CRC.pack(masked_crc(*pieces))]


def scan(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(offset, length) of the data of every record of an uncompressed TFRecord file, checked."""
    starts, lengths = [], []
    size = path.stat().st_size
    with open(path, "rb") as f:
        position = 0
        while position < size:
            head = f.read(HEAD_BYTES)
            if len(head) < HEAD_BYTES:
                raise OSError(f"{path}: truncated record header at byte {position}")
            length, crc = _LENGTH.unpack(head)
            if masked_crc(head[:8]) != crc:
                raise OSError(f"{path}: corrupted record length at byte {position}")
            starts.append(position + HEAD_BYTES)
            lengths.append(length)
            position += HEAD_BYTES + length + FOOT_BYTES
            f.seek(position)
    if position != size:
        raise OSError(f"{path}: truncated last record (ends at byte {position} of {size})")
    return np.asarray(starts, np.int64), np.asarray(lengths, np.int64)


# --- tf.train.Example, protobuf wire format ------------------------------------------------------


def _varint(value: int) -> bytes:
    """Base-128 varint, least significant group first (negative int64: two's complement)."""
    value &= _UINT64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _delimited(number: int, pieces: list) -> list:
    """Field `number`, wire type 2 (length-delimited), around `pieces`."""
    return [_varint(number << 3 | 2) + _varint(sum(len(p) for p in pieces)), *pieces]


def bytes_feature(data) -> list:
    """Feature{bytes_list (1): BytesList{value (1): data}}."""
    return _delimited(1, _delimited(1, [data]))


def int64_feature(values: Sequence[int]) -> list:
    """Feature{int64_list (3): Int64List{value (1), packed varints}}; an empty list is an
    empty Int64List, as TensorFlow writes it."""
    if not len(values):
        return _delimited(3, [])
    return _delimited(3, _delimited(1, [b"".join(_varint(v) for v in values)]))


def float_feature(values: np.ndarray) -> list:
    """Feature{float_list (2): FloatList{value (1), packed little-endian float32}}."""
    if not len(values):
        return _delimited(2, [])
    return _delimited(2, _delimited(1, [np.asarray(values, "<f4").tobytes()]))


def bytes_list_feature(values: Sequence) -> list:
    """Feature{bytes_list (1): BytesList{value (1) per item}}."""
    return _delimited(1, [p for v in values for p in _delimited(1, [v])])


def encode_example(features: dict[str, list]) -> list:
    """Example{features (1): Features{feature (1): map entries {key (1), value (2)}}}, by key."""
    entries = []
    for key in sorted(features):
        entry = [*_delimited(1, [key.encode()]), *_delimited(2, features[key])]
        entries.extend(_delimited(1, entry))
    return _delimited(1, entries)


def _read_varint(data, pos: int, stop: int | None = None) -> tuple[int, int]:
    """The varint at `pos` (ending before `stop` where given) and the position after it; a
    ValueError past `stop` or beyond 64 bits (no quiet wrap into another value)."""
    value = shift = 0
    while True:
        if stop is not None and pos >= stop:
            raise ValueError("a varint cut short")
        byte = data[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise ValueError("a varint over 64 bits")
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def expect(data, pos: int, tag: int) -> tuple[int, int]:
    """(start, stop) of the length-delimited field `tag` that must begin at `pos`."""
    found, pos = _read_varint(data, pos)
    if found != tag:
        raise ValueError(f"not a packer Example: tag {found:#x} where {tag:#x} belongs")
    size, pos = _read_varint(data, pos)
    return pos, pos + size


def decode_example(data, start: int, stop: int) -> dict[str, tuple[int, int, int]]:
    """Feature name -> (kind, start, stop) for the Example in data[start:stop]: kind 1 is a
    BytesList whose first value lies in [start, stop), kind 3 an Int64List of packed varints,
    kind 2 a FloatList of packed float32s (an empty list: start == stop)."""
    return {k: v[:3] for k, v in decode_lists(data, start, stop).items()}


def decode_lists(data, start: int, stop: int) -> dict[str, tuple[int, int, int, int, int]]:
    """As `decode_example`, each with the span of the whole list message after: (kind, first
    start, first stop, list start, list stop)."""
    out = {}
    begin, end = expect(data, start, 0x0A)  # Example.features
    if end != stop:
        raise ValueError("not a packer Example: bytes after Example.features")
    pos = begin
    while pos < end:
        entry, entry_end = expect(data, pos, 0x0A)  # Features.feature map entry
        key_start, key_stop = expect(data, entry, 0x0A)
        feature, pos = expect(data, key_stop, 0x12)
        kind, _ = _read_varint(data, feature)  # BytesList 0x0A, FloatList 0x12, Int64List 0x1A
        if kind not in (0x0A, 0x12, 0x1A) or pos != entry_end:
            raise ValueError("not a packer Example: a feature is not a bytes, float or int64 list")
        listed = expect(data, feature, kind)
        values = expect(data, listed[0], 0x0A) if listed[0] < listed[1] else listed[:1] * 2
        out[bytes(data[key_start:key_stop]).decode()] = (kind >> 3, *values, *listed)
    return out


def bytes_values(data, start: int, stop: int) -> list[bytes]:
    """Every value of a BytesList message held in data[start:stop]."""
    values = []
    while start < stop:
        begin, start = expect(data, start, 0x0A)
        values.append(bytes(data[begin:start]))
    return values


def int64_values(data, start: int, stop: int) -> list[int]:
    """The packed varints of an Int64List, as signed 64-bit integers."""
    values = []
    while start < stop:
        value, start = _read_varint(data, start, stop)
        values.append(value - (1 << 64) if value >> 63 else value)
    return values

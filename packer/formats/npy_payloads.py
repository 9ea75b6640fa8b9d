"""The npy format's encoded (JPEG/PNG) image fields: each sample's payload, buffered per chunk,
joined per shard into a values file and an offsets file (see formats/npy.md), and decoded from
them into the batch rows (`imaging.codec`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..imaging import codec
from ..schema import Field
from . import encoding


class ChunkPayloads:
    """One chunk's payloads of the encoded fields: one part file per field at close, the
    payloads' lengths (int64 each) then the payloads."""

    def __init__(
        self, fields: Sequence[Field], options: dict, part_of: Callable[[Field], Path]
    ) -> None:
        self.fields = tuple(fields)
        self.quality = encoding.quality(options)
        self.parts = [part_of(f) for f in self.fields]
        self.payloads: list[list[bytes]] = [[] for _ in self.fields]

    def write(self, record: dict[str, np.ndarray]) -> None:
        for field, payloads in zip(self.fields, self.payloads, strict=True):
            payloads.append(encoding.payload(field, record[field.name], self.quality))

    def close(self) -> None:
        for part, payloads in zip(self.parts, self.payloads, strict=True):
            lengths = np.asarray([len(p) for p in payloads], "<i8").reshape(-1)
            part.write_bytes(b"".join([lengths.tobytes(), *payloads]))


def join(parts: Sequence[Path], kept: Sequence[int]) -> tuple[np.ndarray, list[memoryview]]:
    """A shard's offsets (count + 1 int64s) and payloads in record order, from its chunks'
    part files (each holding `kept` records)."""
    lengths, pieces = [], []
    for part, count in zip(parts, kept, strict=True):
        data = part.read_bytes()
        lengths.append(np.frombuffer(data, "<i8", count))
        pieces.append(memoryview(data)[8 * count :])
    offsets = np.concatenate([[0], np.cumsum(np.concatenate([np.zeros(0, "<i8"), *lengths]))])
    return offsets.astype("<i8"), pieces


def decode_into(
    values: np.ndarray, offsets: list[int], local: np.ndarray, array: np.ndarray, path: Path
) -> None:
    """Decode the payloads of records `local` into the rows of `array`; a CodecError naming
    the file (`path`, the shard's) and the record for one that does not decode."""
    for row, i in enumerate(local.tolist()):
        try:
            codec.decode_into(values[offsets[i] : offsets[i + 1]], array[row])
        except codec.CodecError as exc:
            raise codec.CodecError(f"{path}: record {i}: {exc}") from None

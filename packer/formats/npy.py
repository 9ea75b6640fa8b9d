"""The npy format, both ways: one `.npy` file per shard and field, loadable as a NumPy memmap.

Every file has a fixed 128-byte NPY 1.0 header, so the data of sample i of a field starts at
byte 128 + i * record_size (see formats/npy.md). Workers append raw records to part files;
finalising a shard writes the header and the parts into the final file.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..records import Field
from ..shardio import FileInfo, write_atomic
from . import part_path

HEADER_BYTES = 128
MAGIC = b"\x93NUMPY\x01\x00"
OPTIONS: dict = {}


def check_options(options: dict) -> None:
    """npy has no options of its own."""


def file_name(shard: str, field: str) -> str:
    """`train-00000-of-00003.images.npy`: shard name, field, extension."""
    return f"{shard}.{field}.npy"


def npy_header(field: Field, count: int) -> bytes:
    """The 128-byte NPY 1.0 header of a file holding `count` records of `field`."""
    shape = (count, *field.shape)
    text = f"{{'descr': '{field.dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    body_len = HEADER_BYTES - len(MAGIC) - 2
    if len(text) + 1 > body_len:
        raise ValueError(f"shape {shape} does not fit a {HEADER_BYTES}-byte npy header")
    body = text.ljust(body_len - 1) + "\n"
    return MAGIC + body_len.to_bytes(2, "little") + body.encode("latin1")


def read_header(path: Path) -> tuple[np.dtype, tuple[int, ...]]:
    """Parse the header of one of our npy files (dtype, shape); errors name the file."""
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if len(head) < HEADER_BYTES or not head.startswith(MAGIC[:6]):
        raise ValueError(f"{path}: not an npy file written by packer (bad or short header)")
    length = int.from_bytes(head[8:10], "little")
    meta = ast.literal_eval(head[10 : 10 + length].decode("latin1"))
    return np.dtype(meta["descr"]), tuple(meta["shape"])


class ChunkWriter:
    """Appends the raw bytes of each record's fields to one part file per field."""

    def __init__(
        self, part_dir: Path, shard: str, chunk: int, fields: Sequence[Field], options: dict
    ) -> None:
        self.fields = fields
        self._files = {f.name: _open_part(part_dir, shard, chunk, f.name) for f in fields}

    def write(self, record: dict[str, np.ndarray]) -> None:
        for field in self.fields:
            array = np.asarray(record[field.name], dtype=field.dtype, order="C")
            if array.shape != field.shape:
                raise ValueError(f"{field.name}: shape {array.shape}, expected {field.shape}")
            self._files[field.name].write(memoryview(array).cast("B"))

    def close(self) -> None:
        for f in self._files.values():
            f.close()


def _open_part(part_dir: Path, shard: str, chunk: int, name: str):
    """A part file for appending; the ChunkWriter closes it."""
    return open(part_path(part_dir, shard, chunk, name), "wb")


def finalize(
    out: Path,
    shard: str,
    split: str,
    chunks: Sequence[int],
    count: int,
    fields: Sequence[Field],
    part_dir: Path,
    options: dict,
    sources: Sequence[Sequence[str | None]] = (),
) -> list[FileInfo]:
    """Each field's file: the 128-byte header, then the chunks' parts in order."""
    files = []
    for f in fields:
        parts = [part_path(part_dir, shard, c, f.name) for c in chunks]
        path = out / split / file_name(shard, f.name)
        files.append(write_atomic(path, out, npy_header(f, count), parts))
        for part in parts:
            part.unlink()
    return files


def open_shard(
    root: Path, split: str, shard: dict, fields: Sequence[Field], options: dict
) -> NpyShardReader:
    paths = {f.name: root / split / file_name(shard["name"], f.name) for f in fields}
    return NpyShardReader(paths, shard["count"])


class NpyShardReader:
    """Random access to one shard's fields through read-only memmaps, opened on first use."""

    def __init__(self, paths: dict[str, Path], count: int) -> None:
        self.paths = paths
        self.count = count
        self._maps: dict[str, np.ndarray] | None = None

    def maps(self) -> dict[str, np.ndarray]:
        if self._maps is None:
            self._maps = {name: _open_memmap(path, self.count) for name, path in self.paths.items()}
        return self._maps

    def read_into(self, local: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Copy records `local` (sorted indices into this shard) of every field into `out`."""
        # mode="clip" writes straight into `out` ("raise" goes through a temporary copy);
        # the caller has checked the indices already.
        for name, array in out.items():
            np.take(self.maps()[name], local, axis=0, out=array, mode="clip")

    def close(self) -> None:
        self._maps = None


def _open_memmap(path: Path, count: int) -> np.ndarray:
    """Memmap a shard file and check it holds the records the manifest promises."""
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise OSError(f"{path}: cannot be opened as an npy memmap ({exc})") from exc
    if array.shape[0] != count:
        raise OSError(f"{path}: holds {array.shape[0]} records, the manifest says {count}")
    return array

"""The npy format, both ways: one `.npy` file per shard and field, loadable as a NumPy memmap.

Every file has a fixed 128-byte NPY 1.0 header, so the data of sample i of a field starts at
byte 128 + i * record_size (see formats/npy.md). Workers write records in place into the
shard's data files; finalising a shard writes the header, syncs, hashes and renames them.
A ragged field, and an encoded (JPEG/PNG) image field, is a values file (each sample's rows,
or its compressed payload, one after another) and an offsets file (where each sample's begin).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..options import declared
from ..schema import Field, fixed, ragged
from ..storage.local import (
    COPY_BLOCK,
    FileInfo,
    advise_willneed,
    pwrite_all,
    sha256_file,
    start_writeback,
    write_atomic,
)
from . import ChunkPosition, ShardJob, encoding, npy_payloads, part_path

HEADER_BYTES = 128
MAGIC = b"\x93NUMPY\x01\x00"


@dataclass(frozen=True)
class NpyOptions(encoding.EncodingOptions):
    """The npy format's pack options: the image encoding's only."""


FORMAT_OPTIONS = NpyOptions
OPTIONS: dict = {}  # the encoding's options are recorded only when given


def check_options(options: dict) -> None:
    """The encoding's values (`encoding` raw|jpeg|png, `quality` 1..100), where given."""
    for o in declared(FORMAT_OPTIONS):
        o.check(options.get(o.name))


def check_fields(fields: Sequence[Field], options: dict) -> None:
    """An encoded field must be one its encoding stores exactly (ValueError naming it)."""
    encoding.check_fields(fields)


def plain(fields: Sequence[Field]) -> tuple[Field, ...]:
    """The fixed fields stored as their bytes, one record a sample at a fixed place."""
    return tuple(f for f in fixed(fields) if f.encoding == "raw")


def encoded(fields: Sequence[Field]) -> tuple[Field, ...]:
    """The fixed fields stored as one compressed payload a sample (values + offsets)."""
    return tuple(f for f in fixed(fields) if f.encoding != "raw")


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


class ChunkWriter:
    """Writes each record's fields straight into the shard's data files, at the chunk's slots.

    A chunk's records start at its first record's slot (`task.start`), so chunks of one shard
    never touch the same bytes and nothing is copied again later; records after a rejected
    input move up within the chunk, and `finalize` closes the gaps between chunks (rare: only
    after rejections).
    """

    def __init__(
        self, part_dir: Path, task: ChunkPosition, fields: Sequence[Field], options: dict
    ) -> None:
        self.count = 0
        self.start = task.start
        self._kept = part_path(part_dir, task.shard, task.chunk, "kept")
        self._targets = [
            (
                f,
                os.open(data_path(part_dir, task.shard, f.name), os.O_WRONLY | os.O_CREAT, 0o644),
                HEADER_BYTES + task.start * f.nbytes,
            )
            for f in plain(fields)
        ]
        self._payloads = npy_payloads.ChunkPayloads(  # buffered, a part file per field at close
            encoded(fields), options, lambda f: _payloads_part(part_dir, task.shard, task.chunk, f)
        )
        self._objects = ragged(fields)  # buffered, one part file per chunk at close
        self._objects_part = part_path(part_dir, task.shard, task.chunk, "objects")
        self._rows: list[list[bytes]] = [[] for _ in self._objects]
        self._counts: list[int] = []

    def write(self, record: dict[str, np.ndarray]) -> None:
        for field, fd, base in self._targets:
            array = field.coerce(record[field.name])
            pwrite_all(fd, memoryview(array).cast("B"), base + self.count * field.nbytes)
        self._payloads.write(record)
        for field, rows in zip(self._objects, self._rows, strict=True):
            encoded = field.encode(record[field.name])
            rows.append(encoded.tobytes())
        if self._objects:
            self._counts.append(len(record[self._objects[0].name]))
        self.count += 1

    def close(self) -> None:
        for field, fd, base in self._targets:
            start_writeback(fd, base, self.count * field.nbytes)
            os.close(fd)
        self._payloads.close()
        if self._objects:  # counts (int64 each), then each field's rows, in field order
            counts = np.asarray(self._counts, "<i8").tobytes()
            self._objects_part.write_bytes(b"".join([counts, *(b"".join(r) for r in self._rows)]))
        self._kept.write_text(f"{self.start} {self.count}")  # where the chunk's records lie


def data_path(part_dir: Path, shard: str, field: str) -> Path:
    """The file a shard's field is written into before it is renamed into place."""
    return part_dir / f"{shard}.{field}.data"


def finalize(job: ShardJob) -> list[FileInfo]:
    """Close the gaps rejections left, write the header, sync, hash and rename each field file."""
    kept_files = [part_path(job.part_dir, job.shard, c, "kept") for c in job.chunks]
    runs = [tuple(int(v) for v in k.read_text().split()) for k in kept_files]
    files = []
    for f in plain(job.fields):
        data = data_path(job.part_dir, job.shard, f.name)
        with open(data, "r+b") as fh:
            _compact(fh, f.nbytes, runs)
            fh.seek(0)
            fh.write(npy_header(f, job.count))
            fh.truncate(HEADER_BYTES + job.count * f.nbytes)
            fh.flush()
            size, digest = sha256_file(data)  # hash while the writeback started earlier runs
            os.fsync(fh.fileno())
        final = job.out / job.split / file_name(job.shard, f.name)
        os.replace(data, final)
        files.append(FileInfo(final.relative_to(job.out).as_posix(), size, digest))
    files += _finalize_ragged(job)
    files += [info for f in encoded(job.fields) for info in _finalize_encoded(job, f, runs)]
    for k in kept_files:
        k.unlink()
    return files


def offsets_name(shard: str, field: str) -> str:
    """`train-00000-of-00003.boxes.offsets.npy`: where each sample's rows of a ragged field
    start in its values file, count + 1 int64s."""
    return f"{shard}.{field}.offsets.npy"


def _finalize_ragged(job: ShardJob) -> list[FileInfo]:
    """Each ragged field's values file (every object's row, in record order) and offsets
    file, from the chunks' objects parts."""
    fields = ragged(job.fields)
    if not fields:
        return []
    parts = [part_path(job.part_dir, job.shard, c, "objects") for c in job.chunks]
    chunks = [p.read_bytes() for p in parts]
    runs = [tuple(int(v) for v in part_path(job.part_dir, job.shard, c, "kept").read_text().split())
            for c in job.chunks]  # fmt: skip
    counts = [
        np.frombuffer(data, "<i8", kept) for data, (_, kept) in zip(chunks, runs, strict=True)
    ]
    offsets = np.concatenate([[0], np.cumsum(np.concatenate([np.zeros(0, "<i8"), *counts]))])
    offsets = offsets.astype("<i8")
    split_dir = job.out / job.split
    found = []
    starts = [8 * len(c) for c in counts]  # where each chunk's first field begins
    for f in fields:
        pieces = []
        for k, (data, chunk_counts) in enumerate(zip(chunks, counts, strict=True)):
            size = int(chunk_counts.sum()) * f.nbytes
            pieces.append(data[starts[k] : starts[k] + size])
            starts[k] += size
        rows = Field(f.name, f.stored_shape, f.stored_dtype)
        found.append(write_atomic(
            split_dir / file_name(job.shard, f.name), job.out,
            npy_header(rows, int(offsets[-1])), pieces,
        ))  # fmt: skip
        found.append(write_atomic(
            split_dir / offsets_name(job.shard, f.name), job.out,
            npy_header(Field("offsets", (), "<i8"), len(offsets)), [offsets.tobytes()],
        ))  # fmt: skip
    for part in parts:
        part.unlink()
    return found


def _payloads_part(part_dir: Path, shard: str, chunk: int, field: Field) -> Path:
    return part_path(part_dir, shard, chunk, f"{field.name}.encoded")


def _finalize_encoded(job: ShardJob, field: Field, runs: list) -> list[FileInfo]:
    """An encoded field's values file (every sample's payload, in record order, as uint8) and
    its offsets file (count + 1 int64s), from the chunks' parts."""
    parts = [_payloads_part(job.part_dir, job.shard, c, field) for c in job.chunks]
    offsets, pieces = npy_payloads.join(parts, [kept for _, kept in runs])
    split_dir = job.out / job.split
    found = [
        write_atomic(
            split_dir / file_name(job.shard, field.name), job.out,
            npy_header(Field(field.name, (), "|u1"), int(offsets[-1])), pieces,
        ),
        write_atomic(
            split_dir / offsets_name(job.shard, field.name), job.out,
            npy_header(Field("offsets", (), "<i8"), len(offsets)), [offsets.tobytes()],
        ),
    ]  # fmt: skip
    for part in parts:
        part.unlink()
    return found


def _compact(fh, nbytes: int, runs: list[tuple[int, int]]) -> None:
    """Move each chunk's kept records down to follow the previous chunk's (only after rejects)."""
    cursor = 0
    for first, kept in runs:
        if first != cursor:
            for done in range(0, kept * nbytes, COPY_BLOCK):
                block = min(COPY_BLOCK, kept * nbytes - done)
                fh.seek(HEADER_BYTES + first * nbytes + done)
                chunk = fh.read(block)
                fh.seek(HEADER_BYTES + cursor * nbytes + done)
                fh.write(chunk)
        cursor += kept


def open_shard(
    root: Path, split: str, shard: dict, fields: Sequence[Field], options: dict
) -> NpyShardReader:
    """Random access to one npy shard's fields (memmaps, opened on first use)."""
    paths = {f.name: root / split / file_name(shard["name"], f.name) for f in plain(fields)}
    payloads = {
        f.name: (
            root / split / file_name(shard["name"], f.name),
            root / split / offsets_name(shard["name"], f.name),
        )
        for f in encoded(fields)
    }
    objects = {
        f: (
            root / split / file_name(shard["name"], f.name),
            root / split / offsets_name(shard["name"], f.name),
        )
        for f in ragged(fields)
    }
    return NpyShardReader(paths, shard["count"], objects, payloads)


class NpyShardReader:
    """Random access to one shard's fields through read-only memmaps, opened on first use;
    encoded fields decoded into the batch rows."""

    def __init__(
        self,
        paths: dict[str, Path],
        count: int,
        objects: dict[Field, tuple[Path, Path]] | None,
        payloads: dict[str, tuple[Path, Path]] | None = None,
    ) -> None:
        self.paths = paths
        self.count = count
        self.objects = objects or {}
        self.payloads = payloads or {}
        self.decodes = bool(self.payloads)  # the gather splits even small batches
        self._maps: dict[str, np.ndarray] | None = None
        self._ragged: dict[Field, tuple[np.ndarray, np.ndarray]] | None = None
        self._encoded: dict[str, tuple[np.ndarray, list[int]]] | None = None

    def read_ragged(
        self, local: np.ndarray, names: Collection[str] | None = None
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The ragged fields of records `local` (those in `names`, or all): per field every
        row asked for, sample after sample (one gather and one decode per field), and each
        sample's row count."""
        if self._ragged is None:
            count = self.count + 1  # plain views of the memmaps: indexing a memmap is slow
            self._ragged = {
                f: (np.asarray(_open_values(values)), np.asarray(_open_memmap(offsets, count)))
                for f, (values, offsets) in self.objects.items()
            }
        if not self._ragged:
            return {}, np.zeros(len(local), np.int64)
        # every object field has the same rows per sample: find them once, in the first's offsets
        offsets = next(iter(self._ragged.values()))[1]
        starts, ends = offsets[local], offsets[local + 1]
        counts = ends - starts
        total = np.cumsum(counts)
        rows = np.repeat(starts - total + counts, counts)
        rows += np.arange(total[-1] if len(total) else 0)
        fields = {}
        for f, (values, _) in self._ragged.items():
            if names is None or f.name in names:  # stored rows are the values unless packed
                taken = values.take(rows, axis=0)
                fields[f.name] = f.decode(taken, copy=False) if f.packing else taken
        return fields, counts

    def open(self) -> None:
        """Map the shard's files now (reads map them on first use otherwise)."""
        self.maps()
        self.encoded()

    def encoded(self) -> dict[str, tuple[np.ndarray, list[int]]]:
        """Each encoded field's payloads (a uint8 view of the memmap) and offsets (a list:
        read one by one)."""
        if self._encoded is None:
            self._encoded = {
                name: (
                    np.asarray(_open_values(values)),
                    np.asarray(_open_memmap(offsets, self.count + 1)).tolist(),
                )
                for name, (values, offsets) in self.payloads.items()
            }
        return self._encoded

    def payloads_of(self, local: np.ndarray, name: str) -> list[np.ndarray]:
        """Encoded field `name`'s payloads of records `local`, undecoded (views of the map)."""
        values, offsets = self.encoded()[name]
        return [values[offsets[i] : offsets[i + 1]] for i in local.tolist()]

    def maps(self) -> dict[str, np.ndarray]:
        """Each field's records: plain ndarray views of the memmaps (a memmap's `take` pays
        for its subclass, 1.5x a view's on a small batch)."""
        if self._maps is None:
            self._maps = {
                name: np.asarray(_open_memmap(path, self.count))
                for name, path in self.paths.items()
            }
        return self._maps

    def read_into(self, local: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Copy records `local` (sorted indices into this shard) of every field into `out`."""
        # mode="clip" writes straight into `out` ("raise" goes through a temporary copy);
        # the caller has checked the indices already.
        maps = self._maps if self._maps is not None else self.maps()
        for name, array in out.items():  # the method: np.take's wrapper costs as much again
            if name in self.payloads:  # decoded into the rows
                values, offsets = self.encoded()[name]
                npy_payloads.decode_into(values, offsets, local, array, self.payloads[name][0])
            else:
                maps[name].take(local, axis=0, out=array, mode="clip")

    def prefetch(self, start: int, stop: int) -> None:
        """Ask the kernel to read records start..stop-1 ahead, as one sequential run per file."""
        for name, array in self.maps().items():
            record = array.strides[0]
            advise_willneed(
                self.paths[name], HEADER_BYTES + start * record, (stop - start) * record
            )
        for name, (_, offsets) in self.encoded().items():
            first, last = offsets[start], offsets[min(stop, self.count)]
            advise_willneed(self.payloads[name][0], HEADER_BYTES + first, last - first)

    def close(self) -> None:
        self._maps = None
        self._ragged = None
        self._encoded = None


def _open_values(path: Path) -> np.ndarray:
    """A ragged field's values as a memmap (an empty array when no sample has objects)."""
    try:
        return np.load(path, mmap_mode="r")
    except ValueError:  # NumPy cannot map zero bytes
        return np.load(path)
    except OSError as exc:
        raise OSError(f"{path}: cannot be opened as an npy memmap ({exc})") from exc


def _open_memmap(path: Path, count: int) -> np.ndarray:
    """Memmap a shard file and check it holds the records the manifest promises."""
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise OSError(f"{path}: cannot be opened as an npy memmap ({exc})") from exc
    if array.shape[0] != count:
        raise OSError(f"{path}: holds {array.shape[0]} records, the manifest says {count}")
    return array

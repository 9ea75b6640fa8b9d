"""The tfrecord format, both ways: one TFRecord file of `tf.train.Example`s per shard.

Workers frame records and encode Examples here, without TensorFlow (CRC32C from the `crc32c`
library, protobuf wire format by hand, features in sorted key order so bytes never depend on
`--workers`). Optional gzip: one gzip member per chunk, joined in order (every gzip reader,
TensorFlow's included, reads concatenated members as one stream). Optional DALI index files.
Random access for the NumPy readers scans the record framing once per shard.
See formats/tfrecord.md.
"""

from __future__ import annotations

import gzip
import mmap
import struct
import threading
from collections.abc import Sequence
from pathlib import Path

import crc32c
import numpy as np

from ..schema import Field
from ..storage.local import FileInfo, write_atomic
from . import ChunkPosition, ShardJob, part_path

OPTIONS: dict = {"compression": "none", "index": False}
COMPRESSIONS = ("none", "gzip")
GZIP_LEVEL = 6  # zlib's default, as TensorFlow's own GZIP writer
HEAD_BYTES = 12  # uint64 length + masked CRC32C of it
FOOT_BYTES = 4  # masked CRC32C of the data
IMAGE, MASK, LABEL = "image/raw", "mask/raw", "image/class/label"
HEIGHT, WIDTH, CHANNELS = "image/height", "image/width", "image/channels"
FEATURES = {"images": IMAGE, "masks": MASK, "labels": LABEL}  # packer field -> Example feature
_LENGTH = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_FRAMING = _LENGTH.size + _CRC.size  # bytes between one record's data and the next's
_UINT64 = (1 << 64) - 1


def check_options(options: dict) -> None:
    """Known compression; an index only for uncompressed files (DALI indexes those only)."""
    if options["compression"] not in COMPRESSIONS:
        raise ValueError(
            f"compression must be one of {', '.join(COMPRESSIONS)}, got {options['compression']!r}"
        )
    if options["index"] and options["compression"] != "none":
        raise ValueError(
            "--index with --compression gzip: DALI's index holds byte offsets into "
            "uncompressed TFRecord files only; drop one of the two"
        )


def file_name(shard: str, options: dict) -> str:
    """`train-00000-of-00003.tfrecord`, or `.tfrecord.gz` when gzip-compressed."""
    return f"{shard}.tfrecord" + (".gz" if options["compression"] == "gzip" else "")


def index_name(shard: str) -> str:
    """`train-00000-of-00003.idx`: the DALI index of the shard's TFRecord file."""
    return f"{shard}.idx"


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
    return [length, _CRC.pack(masked_crc(length)), *pieces, _CRC.pack(masked_crc(*pieces))]


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
    """Feature{int64_list (3): Int64List{value (1), packed varints}}."""
    return _delimited(3, _delimited(1, [b"".join(_varint(v) for v in values)]))


def encode_example(features: dict[str, list]) -> list:
    """Example{features (1): Features{feature (1): map entries {key (1), value (2)}}}, by key."""
    entries = []
    for key in sorted(features):
        entry = [*_delimited(1, [key.encode()]), *_delimited(2, features[key])]
        entries.extend(_delimited(1, entry))
    return _delimited(1, entries)


def _read_varint(data, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _expect(data, pos: int, tag: int) -> tuple[int, int]:
    """(start, stop) of the length-delimited field `tag` that must begin at `pos`."""
    found, pos = _read_varint(data, pos)
    if found != tag:
        raise ValueError(f"not a packer Example: tag {found:#x} where {tag:#x} belongs")
    size, pos = _read_varint(data, pos)
    return pos, pos + size


def decode_example(data, start: int, stop: int) -> dict[str, tuple[int, int, int]]:
    """Feature name -> (kind, start, stop) for the Example in data[start:stop]: kind 1 is a
    BytesList whose one value lies in [start, stop), kind 3 an Int64List of packed varints."""
    out = {}
    begin, end = _expect(data, start, 0x0A)  # Example.features
    if end != stop:
        raise ValueError("not a packer Example: bytes after Example.features")
    pos = begin
    while pos < end:
        entry, entry_end = _expect(data, pos, 0x0A)  # Features.feature map entry
        key_start, key_stop = _expect(data, entry, 0x0A)
        feature, pos = _expect(data, key_stop, 0x12)
        kind, _ = _read_varint(data, feature)  # BytesList (0x0A) or Int64List (0x1A)
        if kind not in (0x0A, 0x1A) or pos != entry_end:
            raise ValueError("not a packer Example: a feature is neither bytes nor int64")
        values = _expect(data, _expect(data, feature, kind)[0], 0x0A)
        out[bytes(data[key_start:key_stop]).decode()] = (kind >> 3, *values)
    return out


def int64_values(data, start: int, stop: int) -> list[int]:
    """The packed varints of an Int64List, as signed 64-bit integers."""
    values = []
    while start < stop:
        value, start = _read_varint(data, start)
        values.append(value - (1 << 64) if value >> 63 else value)
    return values


# --- writing -------------------------------------------------------------------------------------


class ChunkWriter:
    """Appends one framed Example per record to the chunk's part file (a gzip member if asked)."""

    def __init__(
        self, part_dir: Path, task: ChunkPosition, fields: Sequence[Field], options: dict
    ) -> None:
        self.fields = fields
        self._raw = part_path(part_dir, task.shard, task.chunk, "records").open("wb")
        self._out = (
            gzip.GzipFile("", "wb", GZIP_LEVEL, self._raw, mtime=0)
            if options["compression"] == "gzip"
            else self._raw
        )

    def write(self, record: dict[str, np.ndarray]) -> None:
        features = {}
        for field in self.fields:
            array = field.coerce(record[field.name])
            if field.name == "labels":
                features[LABEL] = int64_feature([int(array)])
            else:
                features[FEATURES[field.name]] = bytes_feature(memoryview(array).cast("B"))
            if field.name == "images":
                height, width, channels = field.shape
                features[HEIGHT] = int64_feature([height])
                features[WIDTH] = int64_feature([width])
                features[CHANNELS] = int64_feature([channels])
        self._out.writelines(frame(encode_example(features)))

    def close(self) -> None:
        self._out.close()
        self._raw.close()


def finalize(job: ShardJob) -> list[FileInfo]:
    """The shard's TFRecord file (the chunks' parts in order) and, if asked, its DALI index."""
    parts = [part_path(job.part_dir, job.shard, c, "records") for c in job.chunks]
    path = job.out / job.split / file_name(job.shard, job.options)
    files = [write_atomic(path, job.out, b"", parts)]
    for part in parts:
        part.unlink()
    if job.options["index"]:
        starts, lengths = scan(path)
        lines = "".join(
            f"{s - HEAD_BYTES} {n + HEAD_BYTES + FOOT_BYTES}\n"
            for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)
        )
        files.append(
            write_atomic(
                job.out / job.split / index_name(job.shard), job.out, b"", [lines.encode()]
            )
        )
    return files


# --- random access -------------------------------------------------------------------------------


def open_shard(
    root: Path, split: str, shard: dict, fields: Sequence[Field], options: dict
) -> TFRecordShardReader:
    if options["compression"] != "none":
        raise ValueError(
            f"{split}/{file_name(shard['name'], options)}: gzip-compressed TFRecords have no "
            "random access; stream them with packer.tf.dataset(...), or pack without --compression"
        )
    path = root / split / file_name(shard["name"], options)
    return TFRecordShardReader(path, shard["count"], fields)


class TFRecordShardReader:
    """Random access to one shard: the framing is scanned once, then records are read in place."""

    def __init__(self, path: Path, count: int, fields: Sequence[Field]) -> None:
        self.path = path
        self.count = count
        self.fields = {f.name: (np.dtype(f.dtype), f.shape, f.nbytes) for f in fields}
        self._lock = threading.Lock()
        self._map: mmap.mmap | None = None
        self._starts = self._lengths = np.zeros(0, np.int64)
        self._layout_cache: dict[str, tuple[int, int]] | None = None
        self._verified = np.zeros(count, bool)

    def _open(self) -> mmap.mmap:
        with self._lock:
            if self._map is None:
                starts, lengths = scan(self.path)
                if len(starts) != self.count:
                    raise OSError(
                        f"{self.path}: holds {len(starts)} records, the manifest says {self.count}"
                    )
                self._starts, self._lengths = starts, lengths
                with open(self.path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map

    def read_into(self, local: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Copy records `local` (sorted indices into this shard) of every field into `out`."""
        if not len(local):
            return
        data = self._open()
        for i in local[~self._verified[local]].tolist():  # each record's CRC once per reader
            start, stop = int(self._starts[i]), int(self._starts[i] + self._lengths[i])
            (crc,) = _CRC.unpack_from(data, stop)
            if masked_crc(memoryview(data)[start:stop]) != crc:
                raise OSError(f"{self.path}: record {i} is corrupted (data CRC mismatch)")
            self._verified[i] = True
        layout = self._layout(data)
        for name, array in out.items():
            if name in layout:  # same place in every record: plain row copies, no parsing
                begin, nbytes = layout[name]
                rows = np.ndarray(
                    (self.count, nbytes),
                    np.uint8,
                    data,
                    int(self._starts[0]) + begin,
                    (int(self._lengths[0]) + _FRAMING, 1),
                )
                flat = array.reshape(len(local), -1).view(np.uint8)
                for row, i in enumerate(local.tolist()):  # np.take would copy all of `rows`
                    np.copyto(flat[row], rows[i])
            else:
                for row, i in enumerate(local.tolist()):
                    array[row] = self._field(data, i, name)

    def _field(self, data: mmap.mmap, i: int, name: str) -> np.ndarray | int:
        """One field of record `i`, parsed from its Example."""
        start, stop = int(self._starts[i]), int(self._starts[i] + self._lengths[i])
        try:
            example = decode_example(data, start, stop)
        except (ValueError, IndexError) as exc:
            raise OSError(f"{self.path}: record {i}: {exc}") from exc
        kind, begin, end = example[FEATURES[name]]
        if kind == 3:
            return int64_values(data, begin, end)[0]
        dtype, shape, nbytes = self.fields[name]
        if end - begin != nbytes:
            raise OSError(
                f"{self.path}: record {i}: {FEATURES[name]} holds {end - begin} bytes, "
                f"{nbytes} expected"
            )
        return np.frombuffer(data, dtype, nbytes // dtype.itemsize, begin).reshape(shape)

    def _layout(self, data: mmap.mmap) -> dict[str, tuple[int, int]]:
        """Byte fields found at the same offset of every record (our writer's fixed layout).

        Records of equal length, evenly spaced, hold the same Example structure: parse the first
        and the last, and if they agree, every record's pixels sit at a fixed offset. Labels
        (varints) are always parsed per record.
        """
        if self._layout_cache is not None:
            return self._layout_cache
        layout: dict[str, tuple[int, int]] = {}
        step = self._lengths[0] + _FRAMING
        uniform = (self._lengths == self._lengths[0]).all() and (
            np.diff(self._starts) == step
        ).all()
        if uniform:
            first, last = (
                decode_example(data, int(self._starts[i]), int(self._starts[i] + self._lengths[i]))
                for i in (0, self.count - 1)
            )
            for name, (_, _, nbytes) in self.fields.items():
                kind, begin, end = first[FEATURES[name]]
                offset = begin - int(self._starts[0])
                tail = last[FEATURES[name]]
                if (
                    kind != 3
                    and end - begin == nbytes
                    and tail[1] - int(self._starts[-1]) == offset
                ):
                    layout[name] = (offset, nbytes)
        self._layout_cache = layout
        return layout

    def close(self) -> None:
        with self._lock:
            if self._map is not None:
                self._map.close()
                self._map = None

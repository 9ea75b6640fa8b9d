"""The recordio format, both ways: one `.rec` (with its `.idx` and `.lst`) per shard.

The bytes are MXNet's (`mxnet_recordio`). Workers frame records into part files with a
placeholder id; finalising a shard writes each record's index into its IRHeader and joins the
parts into the `.rec`, then writes the `.idx` and `.lst`. Reading copies raw records straight
into the batch arrays with `preadv` and decodes the others. See formats/recordio.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import RecordIOError
from ..schema import Field
from ..storage.local import FileInfo, write_atomic
from . import (
    ChunkPosition,
    ShardJob,
    check_values,
    defaults,
    encoding,
    part_path,
    recordio_fields,
    recordio_objects,
)
from .mxnet_recordio import (
    CHUNK,
    ENCODINGS,  # noqa: F401 (re-exported: the payload encodings)
    ID_OFFSET,
    IR_HEADER,
    MAGIC,
    MASK_ENCODING,
    RAW_HEADER,
    RecordIOReader,
    check_record_size,
    decode_encoded_into,
    decode_payload,
    encode_payload,
    frame,
    index_text,
    list_text,
    padded,
    raw_descriptor,
)


@dataclass(frozen=True)
class RecordioOptions(encoding.EncodingOptions):
    """The recordio format's pack options: the image encoding's (always recorded)."""


FORMAT_OPTIONS = RecordioOptions
OPTIONS: dict = defaults(FORMAT_OPTIONS)
IOV_MAX = 1024  # buffers per preadv call (Linux, macOS)


def check_options(options: dict) -> None:
    """`encoding` raw|jpeg|png; `quality` 1..100 (JPEG only)."""
    check_values(FORMAT_OPTIONS, options)


def check_fields(fields: Sequence[Field], options: dict) -> None:
    """Encoded payloads are 8-bit RGB pictures (what MXNet and DALI decode); other images go
    raw (ValueError, naming them)."""
    places = recordio_fields.places(fields)
    image, chosen = places.image, payload_encoding(places.image, options)
    if chosen != "raw" and (np.dtype(image.dtype) != np.uint8 or image.shape[2] != 3):
        raise ValueError(
            f"--encoding {chosen} stores 8-bit RGB pictures; these images are "
            f"{np.dtype(image.dtype).name} with {image.shape[2]} band(s): use --encoding raw "
            "(or convert them with --channels rgb --dtype uint8)"
        )
    others = [f.name for f in places.trailer if f.encoding != "raw"]
    if others:
        raise ValueError(
            f"RecordIO encodes its payload's image ({image.name}) only, not {', '.join(others)}: "
            "use --format npy or tfrecord, or --encoding raw"
        )


def file_names(shard: str) -> tuple[str, str, str]:
    """`<shard>.rec`, `<shard>.idx`, `<shard>.lst`."""
    return f"{shard}.rec", f"{shard}.idx", f"{shard}.lst"


class ChunkWriter:
    """Frames each sample as one record (placeholder id) into the chunk's part file, each field
    in the place its kind asks for (`recordio_fields.places`)."""

    def __init__(
        self, part_dir: Path, task: ChunkPosition, fields: Sequence[Field], options: dict
    ) -> None:
        self.places = recordio_fields.places(fields)
        height, width = self.places.image.shape[:2]
        self.size = (width, height)
        self.encoding = payload_encoding(self.places.image, options)
        self.quality = options["quality"]
        if self.encoding == "raw":
            check_record_size(raw_record_bytes(fields))
        self._records = part_path(part_dir, task.shard, task.chunk, "records").open("wb")
        self._index_path = part_path(part_dir, task.shard, task.chunk, "index")
        self._index: list[tuple[int, int]] = []  # (framed bytes, label) per record

    def write(self, record: dict[str, np.ndarray]) -> None:
        places = self.places
        image = places.image.coerce(record[places.image.name])
        mask = places.mask.coerce(record[places.mask.name]) if places.mask else None
        label = int(places.label.coerce(record[places.label.name])) if places.label else 0
        payload = encode_payload(image, mask, self.encoding, self.quality)
        head = IR_HEADER.pack(0, label, 0, 0)
        if places.detection:  # MXNet's detection label after the header
            values = recordio_objects.label(record, self.size, places.detection)
            head = IR_HEADER.pack(len(values), 0, 0, 0) + values.tobytes()
        if places.objects:  # the object planes after the image, then the other fields
            payload += recordio_objects.mask_trailer(places.objects, record[places.objects.name])
        payload += recordio_fields.trailer(places.trailer, record)
        framed = frame(head + payload)
        self._records.write(framed)
        self._index.append((len(framed), label))

    def close(self) -> None:
        self._records.close()
        np.asarray(self._index, "<i8").reshape(-1, 2).tofile(self._index_path)


def payload_encoding(image: Field, options: dict) -> str:
    """The payload's encoding: the image field's, or (a manifest written before fields had
    encodings) the pack's `encoding` option."""
    return image.encoding if image.encoding != "raw" else options["encoding"]


def stored_fields(fields: Sequence[Field], options: dict) -> tuple[Field, ...]:
    """The fields with the encoding a record stores each in: an encoded payload holds the
    image's mask as `MASK_ENCODING` too (`encode_payload`), the plan's estimate of the stored
    bytes encodes it so."""
    places = recordio_fields.places(fields)
    if places.mask is None or payload_encoding(places.image, options) == "raw":
        return tuple(fields)
    return tuple(replace(f, encoding=MASK_ENCODING) if f is places.mask else f for f in fields)


def raw_record_bytes(fields: Sequence[Field]) -> int:
    """Bytes of one raw record's data: IRHeader, raw descriptor, image and mask, and the
    fields' trailer (a ragged field counted as one row)."""
    places = recordio_fields.places(fields)
    pixels = sum(f.nbytes for f in (places.image, places.mask) if f is not None)
    trailer = recordio_fields.trailer_bytes(places.trailer)
    return IR_HEADER.size + RAW_HEADER.size + pixels + trailer


def finalize(job: ShardJob) -> list[FileInfo]:
    """Number the records, join the parts into the `.rec`, and write the `.idx` and `.lst`."""
    parts = [part_path(job.part_dir, job.shard, c, "records") for c in job.chunks]
    indexes = [part_path(job.part_dir, job.shard, c, "index") for c in job.chunks]
    tables = [np.fromfile(p, "<i8").reshape(-1, 2) for p in indexes]
    table = np.concatenate(tables)
    if len(table) != job.count:
        raise ValueError(f"{job.shard}: the parts hold {len(table)} records, expected {job.count}")
    key = 0
    for part, chunk_table in zip(parts, tables, strict=True):
        _write_ids(part, np.cumsum(chunk_table[:, 0]) - chunk_table[:, 0], key)
        key += len(chunk_table)
    offsets = np.cumsum(table[:, 0]) - table[:, 0]
    rec, idx, lst = (job.out / job.split / name for name in file_names(job.shard))
    files = [
        write_atomic(rec, job.out, b"", parts),
        write_atomic(idx, job.out, b"", [index_text(offsets.tolist())]),
        write_atomic(
            lst, job.out, b"", [list_text(table[:, 1].tolist(), [s[0] for s in job.sources])]
        ),
    ]
    for path in (*parts, *indexes):
        path.unlink()
    return files


def _write_ids(part: Path, offsets: np.ndarray, first: int) -> None:
    """Write ids first, first + 1, ... into the IRHeaders of the records at `offsets` of `part`.

    The placeholder id 0 and the real id (below the record count, far below the magic number)
    hold no magic word, so the chunk framing done by the worker stays exactly dmlc-core's.
    """
    with open(part, "r+b") as f:
        for key, offset in enumerate(offsets.tolist(), first):
            os.pwrite(f.fileno(), key.to_bytes(8, "little"), offset + ID_OFFSET)


def open_shard(
    root: Path, split: str, shard: dict, fields: Sequence[Field], options: dict
) -> RecordIOShardReader:
    """Batch reads of one shard for the NumPy readers; files open on first use."""
    rec, idx, _ = (root / split / name for name in file_names(shard["name"]))
    image = recordio_fields.places(fields).image
    return RecordIOShardReader(rec, idx, shard["count"], fields, payload_encoding(image, options))


class RecordIOShardReader:
    """Batch reads of one shard: raw records straight into the batch arrays, others decoded."""

    def __init__(
        self, rec: Path, idx: Path, count: int, fields: Sequence[Field], encoding: str
    ) -> None:
        self.rec, self.idx, self.count = rec, idx, count
        self.places = places = recordio_fields.places(fields)
        self.size = tuple(reversed(places.image.shape[:2]))
        self.ragged = tuple(f for f in places.trailer if f.ragged)
        same = not any(f.ragged for f in fields)  # raw records of one size: read in place
        same &= all(np.dtype(f.dtype).byteorder != ">" for f in places.trailer)
        self.raw = _RawLayout(fields) if encoding == "raw" and same else None
        self.decodes = encoding != "raw"  # the gather splits even small batches
        self._reader: RecordIOReader | None = None

    @property
    def reader(self) -> RecordIOReader:
        """The shard's `.rec` and `.idx`, opened on first use and checked against the manifest."""
        if self._reader is None:
            reader = RecordIOReader(self.rec, self.idx)
            if len(reader) != self.count or not np.array_equal(reader.keys, np.arange(self.count)):
                reader.close()
                raise RecordIOError(
                    f"{self.idx}: lists {len(reader)} records (keys 0..n-1 expected), "
                    f"the manifest says {self.count}"
                )
            self._reader = reader
        return self._reader

    def open(self) -> None:
        """Open the shard's files now (reads open them on first use otherwise)."""
        _ = self.reader

    def read_into(self, local: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Copy records `local` (sorted indices into this shard) into the arrays of `out`."""
        slow = range(len(local))
        if self.raw is not None:
            slow = self.raw.read_into(self.reader, local, out)
        for j in slow:
            self._decode_into(int(local[j]), out, j)

    def _decode_into(self, position: int, out: dict[str, np.ndarray], row: int) -> None:
        """One record through the general path: join chunks, unpack, decode, check, copy; an
        encoded image decodes straight into its row, checked there (`decode_encoded_into`)."""
        header, payload = self.reader[position]
        places, rows = self.places, out.get(self.places.image.name)
        try:
            payload, values = recordio_fields.split(payload, places.trailer)
            if places.objects is not None:
                payload = recordio_objects.split_trailer(payload)[0]
            if self.decodes:  # the image straight into its row
                image = None if rows is None else rows[row]
                mask = decode_encoded_into(payload, image)
            else:
                image, mask = decode_payload(payload)
        except RecordIOError as exc:
            raise RecordIOError(f"{self.rec}: record {position}: {exc}") from None
        values[places.image.name] = image
        if places.mask is not None:
            values[places.mask.name] = mask
        if places.label is not None:
            values[places.label.name] = header.label
        for name, array in out.items():
            value = values.get(name)
            if self.decodes and name == places.image.name:
                continue  # already in its row
            if value is None or np.shape(value) != array.shape[1:]:
                raise RecordIOError(
                    f"{self.rec}: record {position}: {name} of shape {np.shape(value)}, "
                    f"the manifest says {array.shape[1:]}"
                )
            if (value is image or value is mask) and value.dtype.name != array.dtype.name:
                raise RecordIOError(
                    f"{self.rec}: record {position}: {name} of type {value.dtype.name}, "
                    f"the manifest says {array.dtype.name}"
                )
            array[row] = value

    def read_objects(self, local: np.ndarray) -> list[dict[str, np.ndarray]]:
        """The ragged fields of records `local`: from their detection labels, mask rows and
        fields' trailers."""
        places, found = self.places, []
        objects = places.detection + ((places.objects,) if places.objects else ())
        for position in local.tolist():
            header, payload = self.reader[position]
            try:
                payload, values = recordio_fields.split(payload, places.trailer)
                if objects:
                    rows = recordio_objects.split_trailer(payload)[1]
                    values |= recordio_objects.objects(objects, header.label, rows, self.size)
                found.append({f.name: values[f.name] for f in (*objects, *self.ragged)})
            except RecordIOError as exc:
                raise RecordIOError(f"{self.rec}: record {position}: {exc}") from None
        return found

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


class _RawLayout:
    """Whole raw records of one shape, read with `preadv` straight into the batch arrays.

    A run of consecutive whole records is one system call whose buffers are each record's
    48 header bytes (chunk header, IRHeader, raw descriptor), its image and mask rows of the
    batch arrays, the rows of the fields in its trailer and the trailer's end, and its padding.
    The headers and trailers' ends are then checked together, vectorised.
    """

    HEAD = CHUNK.size + IR_HEADER.size + RAW_HEADER.size

    def __init__(self, fields: Sequence[Field]) -> None:
        places = recordio_fields.places(fields)
        image, mask, self.label = places.image, places.mask, places.label
        data_bytes = raw_record_bytes(fields)
        self.framed = CHUNK.size + padded(data_bytes)
        self.pad = bytearray(self.framed - CHUNK.size - data_bytes)
        head = CHUNK.pack(MAGIC, data_bytes) + IR_HEADER.pack(0, 0, 0, 0)
        head += raw_descriptor(
            image.shape, None if mask is None else np.dtype(mask.dtype), np.dtype(image.dtype)
        )
        self.expected = np.frombuffer(head, "<u4")[_CHECKED_WORDS]
        self.pixel_fields = [image.name] + ([] if mask is None else [mask.name])
        self.pixel_fields += [f.name for f in places.trailer]
        self.tail = np.frombuffer(recordio_fields.fixed_tail(places.trailer), np.uint8)

    def read_into(self, reader: RecordIOReader, local: np.ndarray, out: dict) -> list[int]:
        """Read the whole records among `local`; return the rows left for the general path."""
        n = len(local)
        heads = np.empty((n, self.HEAD), np.uint8)
        rows = [_byte_rows(out[name], n) for name in self.pixel_fields]
        tails = np.empty((n, len(self.tail)), np.uint8)
        per_record = 1 + len(rows) + bool(len(self.tail)) + bool(self.pad)
        whole = (reader.ends[local] - reader.offsets[local]) == self.framed
        positions, offsets = local.tolist(), reader.offsets[local].tolist()
        run: list[int] = []
        buffers: list = []
        for j in np.flatnonzero(whole).tolist():
            if run and (
                positions[j] != positions[run[-1]] + 1 or len(buffers) + per_record > IOV_MAX
            ):
                self._preadv(reader, run, buffers, positions, offsets)
                run, buffers = [], []
            run.append(j)
            buffers += [heads[j], *(r[j] for r in rows)]
            if len(self.tail):
                buffers.append(tails[j])
            if self.pad:
                buffers.append(self.pad)
        if run:
            self._preadv(reader, run, buffers, positions, offsets)
        self._check(reader, heads[whole], np.flatnonzero(whole), positions, offsets)
        cut = np.flatnonzero(whole & (tails != self.tail).any(axis=1))
        if len(cut):
            raise RecordIOError(
                f"{reader.path}: record {positions[cut[0]]}: its fields trailer differs from "
                "the manifest's fields"
            )
        if self.label is not None and self.label.name in out:
            out[self.label.name][whole] = heads[whole, 12:16].view("<f4")[:, 0]
        return np.flatnonzero(~whole).tolist()  # split around a magic word, or damaged

    def _preadv(self, reader, run: list[int], buffers: list, positions, offsets) -> None:
        got = os.preadv(reader.fileno(), buffers, offsets[run[0]])
        if got != len(run) * self.framed:
            raise RecordIOError(
                f"{reader.path}: records {positions[run[0]]}..{positions[run[-1]]}: read "
                f"{got} of {len(run) * self.framed} bytes from byte {offsets[run[0]]} (truncated?)"
            )

    def _check(self, reader, heads: np.ndarray, rows: np.ndarray, positions, offsets) -> None:
        """Every whole record must be one chunk of the raw layout the manifest describes."""
        words = heads.view("<u4")
        bad = np.flatnonzero((words[:, _CHECKED_WORDS] != self.expected).any(axis=1))
        if len(bad):
            j = int(rows[bad[0]])
            magic, lrecord = words[bad[0], :2].tolist()
            problem = (
                f"bad magic 0x{magic:08x} (expected 0x{MAGIC:08x})"
                if magic != MAGIC
                else f"lrecord 0x{lrecord:08x} or its headers differ from the manifest's raw layout"
            )
            raise RecordIOError(
                f"{reader.path}: record {positions[j]}: chunk at byte {offsets[j]}: {problem}"
            )


# The header words a whole raw record must hold: all but label (3), id (4, 5) and id2 (6, 7).
_CHECKED_WORDS = np.array([0, 1, 2, 8, 9, 10, 11])


def _byte_rows(array: np.ndarray, n: int) -> np.ndarray:
    """`array` as n rows of bytes, a view (the batch arrays are C-contiguous)."""
    if not array.flags.c_contiguous:
        raise ValueError("read_into needs C-contiguous output arrays")
    return array.reshape(n, -1).view(np.uint8)

"""MXNet/dmlc-core RecordIO bytes, both ways, with no MXNet: framing, IRHeader, payloads, index.

Chunk framing is dmlc-core's `RecordIOWriter::WriteRecord` / `RecordIOReader::NextRecord`;
every record opens with MXNet's IRHeader (`mxnet.recordio.pack`). The payload after it is
packer's raw layout (decoded pixels) or an encoded image that MXNet's ImageRecordIter and
DALI's readers.mxnet decode (see formats/recordio.md). `.idx` and `.lst` are the text files
MXNet and DALI read beside a `.rec`. The pack format built on these bytes is
`packer.formats.recordio`; the public face is `packer.recordio`.
"""

from __future__ import annotations

import os
import struct
from collections import namedtuple
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path

import cv2
import numpy as np

from ..errors import RecordIOError
from ..imaging import codec

MAGIC = 0xCED7230A
MAGIC_BYTES = MAGIC.to_bytes(4, "little")
LENGTH_BITS = 29
LENGTH_MASK = (1 << LENGTH_BITS) - 1
MAX_RECORD_BYTES = LENGTH_MASK  # records must be smaller than 2^29 bytes
CHUNK = struct.Struct("<II")  # magic, lrecord = cflag << 29 | length
IR_HEADER = struct.Struct("<IfQQ")  # flag, label, id, id2 (mxnet.recordio._IR_FORMAT)
ID_OFFSET = CHUNK.size + 8  # where a record's IRHeader id sits, from the record's first byte
RAW_MAGIC = b"PKRW"
# magic, height, width, channels, mask bytes per pixel, image sample type (IMAGE_TYPES' index)
RAW_HEADER = struct.Struct("<4sIIHBB")
# Image sample types of a raw payload; 0 (uint8) is also what packs before 16-bit images hold
# in that byte (it was the high byte of a uint16 mask bytes per pixel).
IMAGE_TYPES = (np.dtype("|u1"), np.dtype("<u2"), np.dtype("<f4"))
MASK_MAGIC = b"PKMK"
MASK_TRAILER = struct.Struct("<I4s")  # length of the mask PNG, magic
ENCODINGS = ("raw", "jpeg", "png")
MASK_ENCODING = "png"  # the mask of an encoded payload: exact, as masks are kept

IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = "MXNet's record header; `label` is a float32 array when flag > 0."


def check_record_size(nbytes: int) -> None:
    """Refuse a record RecordIO cannot frame (dmlc-core: `size < 2^29`)."""
    if nbytes > MAX_RECORD_BYTES:
        raise ValueError(
            f"a record of {nbytes:,} bytes is too large for RecordIO (records must be smaller "
            f"than 2^29 = {MAX_RECORD_BYTES + 1:,} bytes); choose a smaller --size or "
            "--encoding jpeg/png"
        )


def padded(length: int) -> int:
    """`length` rounded up to a multiple of 4: the bytes a chunk of `length` takes."""
    return (length + 3) & ~3


def frame(data: bytes) -> bytes:
    """One record as dmlc-core writes it: chunks split where the magic word is 4-byte aligned.

    The magic word is dropped at each split (the reader puts it back); the first chunk has
    cflag 1, middle ones 2, the last 3; an unsplit record is one chunk with cflag 0. Zero
    padding brings the record to a multiple of 4 bytes.
    """
    check_record_size(len(data))
    words = np.frombuffer(data, "<u4", count=len(data) // 4)
    pieces, start = [], 0
    for hit in (np.flatnonzero(words == MAGIC) * 4).tolist():
        pieces += [CHUNK.pack(MAGIC, (1 if start == 0 else 2) << LENGTH_BITS | hit - start)]
        pieces.append(data[start:hit])
        start = hit + 4
    flag = 3 if start else 0
    pieces += [CHUNK.pack(MAGIC, flag << LENGTH_BITS | len(data) - start), data[start:]]
    pieces.append(bytes(padded(len(data)) - len(data)))
    return b"".join(pieces)


def join_chunks(buf: bytes, path: Path, record: int, base: int = 0) -> bytes:
    """The data of the record that starts `buf`, continuation chunks joined, magic words restored.

    As dmlc-core's `RecordIOReader::NextRecord`. `base` is the file offset of `buf`, so that
    errors name the file, the record and the byte.
    """
    view, pos, parts = memoryview(buf), 0, []

    def error(problem: str) -> RecordIOError:
        return RecordIOError(f"{path}: record {record}: chunk at byte {base + pos}: {problem}")

    while True:
        if pos + CHUNK.size > len(view):
            raise error("truncated, the file ends inside its header")
        magic, lrecord = CHUNK.unpack_from(view, pos)
        if magic != MAGIC:
            raise error(
                f"bad magic 0x{magic:08x} (expected 0x{MAGIC:08x}); corrupt or not RecordIO"
            )
        cflag, length = lrecord >> LENGTH_BITS, lrecord & LENGTH_MASK
        if cflag not in ((2, 3) if parts else (0, 1)):
            raise error(f"continuation flag {cflag} after {len(parts)} chunk(s)")
        stop = pos + CHUNK.size + length
        if stop > len(view):
            raise error(f"truncated, {length} bytes of data, {len(view) - pos - CHUNK.size} left")
        parts.append(view[pos + CHUNK.size : stop])
        pos += CHUNK.size + padded(length)
        if cflag in (0, 3):
            return MAGIC_BYTES.join(parts)


def pack_record(header: IRHeader, payload: bytes) -> bytes:
    """IRHeader + payload, as `mxnet.recordio.pack`: an array label becomes flag float32s."""
    header = IRHeader(*header)
    if np.ndim(header.label) == 0:
        return IR_HEADER.pack(0, header.label, header.id, header.id2) + payload
    labels = np.asarray(header.label, "<f4")
    return IR_HEADER.pack(labels.size, 0.0, header.id, header.id2) + labels.tobytes() + payload


def unpack_record(data: bytes) -> tuple[IRHeader, bytes]:
    """(IRHeader, payload), as `mxnet.recordio.unpack`."""
    if len(data) < IR_HEADER.size:
        raise RecordIOError(f"a record of {len(data)} bytes is too short for an IRHeader")
    header = IRHeader(*IR_HEADER.unpack_from(data))
    payload = data[IR_HEADER.size :]
    if header.flag > 0:
        header = header._replace(label=np.frombuffer(payload, "<f4", header.flag).copy())
        payload = payload[4 * header.flag :]
    return header, payload


def raw_descriptor(
    image_shape: Sequence[int], mask_dtype: np.dtype | None, image_dtype: np.dtype = IMAGE_TYPES[0]
) -> bytes:
    """The 16 bytes that open a raw payload: magic, height, width, channels, mask bytes per
    pixel, image sample type."""
    height, width, channels = image_shape
    mask_bytes = 0 if mask_dtype is None else np.dtype(mask_dtype).itemsize
    kind = IMAGE_TYPES.index(np.dtype(image_dtype).newbyteorder("<"))
    return RAW_HEADER.pack(RAW_MAGIC, height, width, channels, mask_bytes, kind)


def encode_payload(
    image: np.ndarray, mask: np.ndarray | None, encoding: str, quality: int
) -> bytes:
    """A payload: raw pixels (+ mask), or the JPEG/PNG image (+ PNG mask and its trailer)."""
    if encoding == "raw":
        arrays = [image] if mask is None else [image, mask]
        descriptor = raw_descriptor(image.shape, None if mask is None else mask.dtype, image.dtype)
        return b"".join([descriptor, *(a.tobytes() for a in arrays)])
    encoded = codec.encode(image, encoding, quality)
    if mask is None:
        return encoded
    png = codec.encode(mask, MASK_ENCODING, quality)
    return encoded + png + MASK_TRAILER.pack(len(png), MASK_MAGIC)


def decode_payload(payload: bytes) -> tuple[np.ndarray, np.ndarray | None]:
    """(image [H,W,C] (encoded: uint8 RGB), mask [H,W] or None) from a payload in any of our
    layouts.

    Raw payloads give read-only views into `payload`; an encoded image without our mask
    trailer (as im2rec writes) decodes to the image alone.
    """
    view = memoryview(payload)
    if bytes(view[:4]) == RAW_MAGIC:
        return _decode_raw(view)
    image, png = split_encoded(view)
    mask = None if png is None else decode_mask(png)
    return _imdecode(image, cv2.IMREAD_COLOR_RGB, "image"), mask


def split_encoded(payload: bytes | memoryview) -> tuple[memoryview, memoryview | None]:
    """(image file, mask PNG or None) of an encoded payload (any bytes-like): the mask trailer
    parsed, as views of `payload`."""
    view = memoryview(payload)
    if len(view) < MASK_TRAILER.size or bytes(view[-4:]) != MASK_MAGIC:
        return view, None
    length, _ = MASK_TRAILER.unpack_from(view, len(view) - MASK_TRAILER.size)
    end = len(view) - MASK_TRAILER.size
    if length > end:
        raise RecordIOError(f"mask trailer promises {length} bytes, the payload has {end}")
    return view[: end - length], view[end - length : end]


def decode_encoded_into(payload: bytes | memoryview, image: np.ndarray | None) -> np.ndarray | None:
    """Decode an encoded payload's image straight into `image` (a batch row, by
    `codec.decode_into`; None skips it); return its mask [H, W], or None without one."""
    data, png = split_encoded(payload)
    if image is not None:
        try:
            codec.decode_into(data, image)
        except codec.CodecError as exc:
            raise RecordIOError(f"image: {exc}") from None
    return None if png is None else decode_mask(png)


def decode_mask(png: memoryview) -> np.ndarray:
    """A payload's mask PNG as the [H, W] array it holds (8- or 16-bit, unchanged)."""
    mask = _imdecode(png, cv2.IMREAD_UNCHANGED, "mask PNG")
    if mask.ndim != 2:
        raise RecordIOError(f"mask PNG decodes to shape {mask.shape}, expected 2 dimensions")
    return mask


def _decode_raw(view: memoryview) -> tuple[np.ndarray, np.ndarray | None]:
    if len(view) < RAW_HEADER.size:
        raise RecordIOError(f"raw payload of {len(view)} bytes is shorter than its header")
    _, height, width, channels, mask_bytes, kind = RAW_HEADER.unpack_from(view)
    if kind >= len(IMAGE_TYPES):
        raise RecordIOError(f"raw payload: unknown image sample type {kind}")
    image_dtype = IMAGE_TYPES[kind]
    image_size = height * width * channels * image_dtype.itemsize
    expected = RAW_HEADER.size + image_size + height * width * mask_bytes
    if len(view) != expected or mask_bytes not in (0, 1, 2):
        raise RecordIOError(
            f"raw payload of {len(view)} bytes does not match its header "
            f"({height}x{width}x{channels} {image_dtype.name}, {mask_bytes} mask bytes/pixel: "
            f"{expected} bytes)"
        )
    data = np.frombuffer(view, np.uint8, offset=RAW_HEADER.size)
    image = data[:image_size].view(image_dtype).reshape(height, width, channels)
    if not mask_bytes:
        return image, None
    return image, data[image_size:].view(f"<u{mask_bytes}").reshape(height, width)


def _imdecode(data: memoryview, flags: int, what: str) -> np.ndarray:
    array = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if array is None:
        raise RecordIOError(f"{what} of {len(data)} bytes cannot be decoded")
    return array


# ---------------------------------------------------------------- index and list files


def index_text(offsets: Sequence[int]) -> bytes:
    """`.idx`: `key<TAB>offset` per record (MXIndexedRecordIO, DALI); keys are 0, 1, 2, ..."""
    return "".join(f"{key}\t{offset}\n" for key, offset in enumerate(offsets)).encode()


def list_text(labels: Sequence[int], images: Sequence[str]) -> bytes:
    """`.lst` as im2rec writes it: `index<TAB>label<TAB>path`, label as `%f`."""
    lines = []
    for key, (label, image) in enumerate(zip(labels, images, strict=True)):
        if "\t" in image or "\n" in image:
            raise ValueError(f"{image!r}: a path with a tab or newline cannot go into a .lst")
        lines.append(f"{key}\t{label:f}\t{image}\n")
    return "".join(lines).encode()


def read_index(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(keys, offsets) of an `.idx` file; keys must be integers (as DALI requires)."""
    keys, offsets = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                key, offset = line.split()
                keys.append(int(key))
                offsets.append(int(offset))
            except ValueError:
                raise RecordIOError(
                    f"{path} line {number}: expected integer key<TAB>byte offset, got {line!r}"
                ) from None
    return np.asarray(keys, np.int64), np.asarray(offsets, np.int64)


def dali_index(recs: Sequence[str | os.PathLike], path: str | os.PathLike) -> Path:
    """Write one `.idx` for several `.rec` files (each with its `.idx` beside it), for DALI.

    DALI's readers.mxnet takes many `.rec` paths but a single index, whose offsets count from
    the start of the first file as if the files were concatenated in the order given.
    """
    offsets, base = [], 0
    for rec in map(Path, recs):
        offsets.append(read_index(rec.with_suffix(".idx"))[1] + base)
        base += rec.stat().st_size
    Path(path).write_bytes(index_text(np.concatenate(offsets).tolist() if offsets else []))
    return Path(path)


# ---------------------------------------------------------------- reading .rec files


class RecordIOReader:
    """A `.rec` file: records in file order (`iter`), by position (`reader[i]`) or by key.

    Without `path_idx` the `.idx` beside the `.rec` is used, or the chunk headers are scanned
    once. Records come back as (IRHeader, payload bytes); `decode_payload` makes ours arrays.
    """

    def __init__(
        self, path_rec: str | os.PathLike, path_idx: str | os.PathLike | None = None
    ) -> None:
        self.path = Path(path_rec)
        idx = Path(path_idx) if path_idx is not None else self.path.with_suffix(".idx")
        self._fd = os.open(self.path, os.O_RDONLY)
        try:
            self.file_bytes = os.fstat(self._fd).st_size
            if path_idx is not None or idx.exists():
                self.keys, self.offsets = read_index(idx)
            else:
                self.offsets = self._scan()
                self.keys = np.arange(len(self.offsets))
        except BaseException:
            os.close(self._fd)
            raise
        self.ends = _extent_ends(self.offsets, self.file_bytes)

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[tuple[IRHeader, bytes]]:
        """Every record in the order of the file."""
        for position in np.argsort(self.offsets, kind="stable").tolist():
            yield self[position]

    def __getitem__(self, position: int) -> tuple[IRHeader, bytes]:
        return unpack_record(self.read(position))

    def read_idx(self, key: int) -> tuple[IRHeader, bytes]:
        """The record the `.idx` lists under `key` (as `MXIndexedRecordIO.read_idx`)."""
        if key not in self._positions:
            raise KeyError(f"{self.path}: no record with key {key!r} in the index")
        return self[self._positions[key]]

    def read(self, position: int) -> bytes:
        """The data (IRHeader included) of the record at `position` in the index, chunks joined."""
        if not 0 <= position < len(self):
            raise IndexError(f"{self.path}: record {position} out of range ({len(self)} records)")
        if self._fd < 0:
            raise ValueError(f"{self.path}: the reader is closed")
        offset, end = int(self.offsets[position]), int(self.ends[position])
        data = os.pread(self._fd, max(0, end - offset), offset)
        return join_chunks(data, self.path, position, offset)

    def fileno(self) -> int:
        """The open `.rec` file descriptor (positional reads only, so threads may share it)."""
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RecordIOReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {key: position for position, key in enumerate(self.keys.tolist())}

    def _scan(self) -> np.ndarray:
        """Where each record starts, from the chunk headers alone (cflag 0 or 1 opens one)."""
        offsets: list[int] = []
        pos = 0
        while pos < self.file_bytes:
            head = os.pread(self._fd, CHUNK.size, pos)
            magic, lrecord = CHUNK.unpack(head) if len(head) == CHUNK.size else (None, 0)
            if magic != MAGIC:
                raise RecordIOError(
                    f"{self.path}: record {len(offsets)}: no chunk header at byte {pos} "
                    f"(bad magic or truncated); the file is corrupt or not RecordIO"
                )
            if lrecord >> LENGTH_BITS in (0, 1):
                offsets.append(pos)
            pos += CHUNK.size + padded(lrecord & LENGTH_MASK)
        return np.asarray(offsets, np.int64)


def _extent_ends(offsets: np.ndarray, file_bytes: int) -> np.ndarray:
    """Where each record's bytes end: the next record's offset, or the end of the file."""
    order = np.argsort(offsets, kind="stable")
    ends = np.empty_like(offsets)
    ends[order] = np.append(offsets[order][1:], file_bytes)
    return ends

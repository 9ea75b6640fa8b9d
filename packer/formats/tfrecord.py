"""The tfrecord format, both ways: one TFRecord file of `tf.train.Example`s per shard.

Workers write Examples without TensorFlow (the bytes: `tfrecord_wire`), each field under
the keys its kind gives (`tfrecord_objects`). Optional gzip: one gzip member per chunk, joined
in order (every gzip reader, TensorFlow's too, reads concatenated members as one stream).
Optional DALI index files. An encoded image field (`--encoding jpeg|png`) is its payload as one
bytes feature (the Object Detection API's `image/encoded`, with `image/format`), decoded by the
shard reader into the batch rows. NumPy readers scan the framing once per shard;
`tfrecord_parse.example_decoder` is the tf.data parse of a batch. See formats/tfrecord.md.
"""

from __future__ import annotations

import gzip
import mmap
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..imaging import codec
from ..options import declared, option
from ..schema import Field
from ..storage.local import FileInfo, write_atomic
from . import (
    ChunkPosition,
    ShardJob,
    defaults,
    encoding,
    part_path,
    tfrecord_objects,
)
from .tfrecord_wire import (  # noqa: F401 (bytes_feature, int64_feature, int64_values: re-exported)
    CRC,
    FOOT_BYTES,
    FRAMING,
    HEAD_BYTES,
    bytes_feature,
    decode_example,
    decode_lists,
    encode_example,
    frame,
    int64_feature,
    int64_values,
    masked_crc,
    scan,
)

COMPRESSIONS = ("none", "gzip")


@dataclass(frozen=True)
class TfrecordOptions(encoding.EncodingOptions):
    """The tfrecord format's pack options."""

    compression: str = option(
        "none",
        "compress shard files (readers must say so too)",
        kind="choice",
        choices=COMPRESSIONS,
    )
    index: bool = option(False, "also write DALI index files", kind="flag")


FORMAT_OPTIONS = TfrecordOptions
# what the manifest records when nothing is given (the encoding's options: only when given)
OPTIONS: dict = {k: v for k, v in defaults(FORMAT_OPTIONS).items() if k not in encoding.NAMES}
GZIP_LEVEL = 6  # zlib's default, as TensorFlow's own GZIP writer


def check_options(options: dict) -> None:
    """Known compression and encoding; an index only for uncompressed files (DALI indexes
    those only)."""
    for o in declared(FORMAT_OPTIONS):
        o.check(options.get(o.name))
    if options["index"] and options["compression"] != "none":
        raise ValueError(
            "--index with --compression gzip: DALI's index holds byte offsets into "
            "uncompressed TFRecord files only; drop one of the two"
        )


def check_fields(fields: Sequence[Field], options: dict) -> None:
    """An encoded field must be one its encoding stores exactly (ValueError naming it)."""
    encoding.check_fields(fields)


def file_name(shard: str, options: dict) -> str:
    """`train-00000-of-00003.tfrecord`, or `.tfrecord.gz` when gzip-compressed."""
    return f"{shard}.tfrecord" + (".gz" if options["compression"] == "gzip" else "")


def index_name(shard: str) -> str:
    """`train-00000-of-00003.idx`: the DALI index of the shard's TFRecord file."""
    return f"{shard}.idx"


# --- writing -------------------------------------------------------------------------------------


class ChunkWriter:
    """Appends one framed Example per record to the chunk's part file (a gzip member if asked):
    each field's features as its kind gives them."""

    def __init__(
        self, part_dir: Path, task: ChunkPosition, fields: Sequence[Field], options: dict
    ) -> None:
        self.codecs = tfrecord_objects.codecs(fields)
        self.names = options.get("class_names", ())  # for image/object/class/text
        self.size = tfrecord_objects.image_size(fields)
        self.quality = encoding.quality(options)
        self._raw = part_path(part_dir, task.shard, task.chunk, "records").open("wb")
        self._out = (
            gzip.GzipFile("", "wb", GZIP_LEVEL, self._raw, mtime=0)
            if options["compression"] == "gzip"
            else self._raw
        )

    def write(self, record: dict[str, np.ndarray]) -> None:
        features = {}
        for field, kind in self.codecs:
            value = record[field.name]
            if field.encoding != "raw":  # the kind stores the payload
                value = encoding.payload(field, value, self.quality)
            features.update(tfrecord_objects.encode(field, value, self.size, self.names, kind))
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


# --- streaming (any compression) ----------------------------------------------------------------


def random_access(options: dict) -> bool:
    """Whether shards can be read by record index: uncompressed ones only (gzip is a stream)."""
    return options["compression"] == "none"


def stream_shard(
    root: Path, split: str, shard: dict, fields: Sequence[Field], options: dict
) -> Iterator[dict[str, np.ndarray]]:
    """A shard's records in file order, each a dict field name -> array, CRCs checked:
    what reads a gzip-compressed shard (or any shard start to end) without TensorFlow."""
    path = root / split / file_name(shard["name"], options)
    opener = gzip.open if options["compression"] == "gzip" else open
    codecs = (tfrecord_objects.codecs(fields), tfrecord_objects.image_size(fields))
    count = 0
    with opener(path, "rb") as f:
        while head := f.read(HEAD_BYTES):
            if len(head) < HEAD_BYTES or masked_crc(head[:8]) != CRC.unpack_from(head, 8)[0]:
                raise OSError(f"{path}: record {count}: damaged record header")
            length = int.from_bytes(head[:8], "little")
            data = f.read(length)
            foot = f.read(FOOT_BYTES)
            if len(data) < length or len(foot) < FOOT_BYTES:
                raise OSError(f"{path}: record {count} is truncated")
            if masked_crc(data) != CRC.unpack(foot)[0]:
                raise OSError(f"{path}: record {count} is corrupted (data CRC mismatch)")
            yield _record(data, path, count, codecs)
            count += 1
    if count != shard["count"]:
        raise OSError(f"{path}: holds {count} records, the manifest says {shard['count']}")


def _record(data: bytes, path: Path, index: int, codecs: tuple) -> dict[str, np.ndarray]:
    """The fields of one serialized Example (ragged fields as `[N, *shape]`)."""
    pairs, size = codecs
    try:
        lists = decode_lists(data, 0, len(data))
        return {f.name: tfrecord_objects.decode(f, lists, data, size, k) for f, k in pairs}
    except (ValueError, IndexError, KeyError) as exc:
        raise OSError(f"{path}: record {index}: {exc}") from exc


# --- random access -------------------------------------------------------------------------------


def open_shard(
    root: Path, split: str, shard: dict, fields: Sequence[Field], options: dict
) -> TFRecordShardReader:
    """Random access to one uncompressed TFRecord shard's records."""
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
        codecs = tfrecord_objects.codecs(fields)
        self.fields = {f.name: (f, k) for f, k in codecs if not f.ragged}
        self.encoded = {
            n: k.tfrecord_keys(f)[0] for n, (f, k) in self.fields.items() if f.encoding != "raw"
        }
        self.decodes = bool(self.encoded)  # the gather splits even small batches
        self.objects = [(f, k) for f, k in codecs if f.ragged]
        self.size = tfrecord_objects.image_size(fields)
        self._lock = threading.Lock()
        self._map: mmap.mmap | None = None
        self._starts = self._lengths = np.zeros(0, np.int64)
        self._layout_cache: dict[str, tuple[int, int]] | None = None
        self._verified = np.zeros(count, bool)

    def open(self) -> mmap.mmap:
        """The shard's file, mapped (and its records found) on first use."""
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
        data = self._verify(local)
        layout = self._layout(data)
        for name, array in out.items():
            if name in layout:  # same place in every record: plain row copies, no parsing
                begin, nbytes = layout[name]
                rows = np.ndarray(
                    (self.count, nbytes),
                    np.uint8,
                    data,
                    int(self._starts[0]) + begin,
                    (int(self._lengths[0]) + FRAMING, 1),
                )
                flat = array.reshape(len(local), -1).view(np.uint8)
                for row, i in enumerate(local.tolist()):  # np.take would copy all of `rows`
                    np.copyto(flat[row], rows[i])
            elif name in self.encoded:
                for row, i in enumerate(local.tolist()):
                    self._decode_into(data, i, name, array[row])
            else:
                for row, i in enumerate(local.tolist()):
                    array[row] = self._field(data, i, name)

    def payloads_of(self, local: np.ndarray, name: str) -> list[memoryview]:
        """Encoded field `name`'s payloads of records `local`, undecoded (views of the map)."""
        data = self._verify(local)
        return [self._payload(data, i, name) for i in local.tolist()]

    def _payload(self, data: mmap.mmap, i: int, name: str) -> memoryview:
        """The payload of an encoded field of record `i`: its kind's first key's one bytes
        value."""
        start, stop = int(self._starts[i]), int(self._starts[i] + self._lengths[i])
        try:
            lists = decode_lists(data, start, stop)
            return tfrecord_objects.Example(lists, data).raw(self.encoded[name])
        except (ValueError, IndexError, KeyError) as exc:
            raise OSError(f"{self.path}: record {i}: {exc}") from exc

    def _decode_into(self, data: mmap.mmap, i: int, name: str, out: np.ndarray) -> None:
        """Decode the payload of an encoded field of record `i` into `out`."""
        try:
            codec.decode_into(self._payload(data, i, name), out)
        except ValueError as exc:
            raise OSError(f"{self.path}: record {i}: {exc}") from exc

    def _verify(self, local: np.ndarray) -> mmap.mmap:
        """The mapped file, after checking the CRC of each of records `local` once."""
        data = self.open()
        for i in local[~self._verified[local]].tolist():
            start, stop = int(self._starts[i]), int(self._starts[i] + self._lengths[i])
            (crc,) = CRC.unpack_from(data, stop)
            if masked_crc(memoryview(data)[start:stop]) != crc:
                raise OSError(f"{self.path}: record {i} is corrupted (data CRC mismatch)")
            self._verified[i] = True
        return data

    def read_objects(self, local: np.ndarray) -> list[dict[str, np.ndarray]]:
        """The ragged fields of records `local`, one dict field name -> `[N, *shape]` each."""
        data, size = self._verify(local), self.size
        found = []
        for i in local.tolist():
            start, stop = int(self._starts[i]), int(self._starts[i] + self._lengths[i])
            try:
                lists = decode_lists(data, start, stop)
                found.append(
                    {
                        f.name: tfrecord_objects.decode(f, lists, data, size, k)
                        for f, k in self.objects
                    }
                )
            except (ValueError, IndexError, KeyError) as exc:
                raise OSError(f"{self.path}: record {i}: {exc}") from exc
        return found

    def _field(self, data: mmap.mmap, i: int, name: str) -> np.ndarray:
        """One field of record `i`, parsed from its Example by its kind."""
        start, stop = int(self._starts[i]), int(self._starts[i] + self._lengths[i])
        field, kind = self.fields[name]
        try:
            lists = decode_lists(data, start, stop)
            return tfrecord_objects.decode(field, lists, data, self.size, kind)
        except (ValueError, IndexError, KeyError) as exc:
            raise OSError(f"{self.path}: record {i}: {exc}") from exc

    def raw_layout(self) -> tuple[int, int, dict[str, int]]:
        """Where record 0's data starts, the bytes from one record's data to the next's, and
        each field's offset in a record where it sits at the same place in every record (the
        file scanned on first use): what a copy of rows in place needs (packer.tf.compiled)."""
        data = self.open()
        if not self.count:
            return 0, 0, {}
        offsets = {name: begin for name, (begin, _) in self._layout(data).items()}
        return int(self._starts[0]), int(self._lengths[0]) + FRAMING, offsets

    def _layout(self, data: mmap.mmap) -> dict[str, tuple[int, int]]:
        """Byte fields found at the same offset of every record (our writer's fixed layout).

        Records of equal length, evenly spaced, hold the same Example structure: parse the first
        and the last, and if they agree, every record's raw bytes (`FieldKind.tfrecord_raw_key`)
        sit at a fixed offset. Other features (a label's varints) are parsed per record.
        """
        if self._layout_cache is not None:
            return self._layout_cache
        layout: dict[str, tuple[int, int]] = {}
        step = self._lengths[0] + FRAMING
        uniform = (self._lengths == self._lengths[0]).all() and (
            np.diff(self._starts) == step
        ).all()
        if uniform:
            first, last = (
                decode_example(data, int(self._starts[i]), int(self._starts[i] + self._lengths[i]))
                for i in (0, self.count - 1)
            )
            for name, (field, codec) in self.fields.items():
                key = codec.tfrecord_raw_key(field)
                stored = np.dtype(field.dtype)
                if key is None or key not in first or key not in last or stored.byteorder == ">":
                    continue
                kind, begin, end = first[key]
                offset = begin - int(self._starts[0])
                tail = last[key]
                nbytes = field.nbytes
                if (
                    kind == 1
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

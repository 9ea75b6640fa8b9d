"""Fields of kinds the formats have never seen, stored by every format without a line of its
own: a fixed float32 plane ("test_heat") and ragged float32 (x, y) rows ("test_spots", both
from tests/fixtures/field_kinds.py), beside
a classification, segmentation or detection preset, written by each format's ChunkWriter and
`finalize` and read back exactly through `open_shard` (samples without rows too); TensorFlow
parses the TFRecords with `example_decoder` and by the documented keys; the RecordIO `PKFD`
trailer parses as formats/recordio.md says."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import packer
from packer import formats
from packer.errors import RecordIOError
from packer.fields.presets import fields_for
from packer.formats import ShardJob, recordio_fields, tfrecord_parse
from packer.schema import Field, fixed, ragged
from tests.fixtures.field_kinds import HEAT as HEAT_KIND
from tests.fixtures.field_kinds import SPOTS as SPOTS_KIND

SHARD = "train-00000-of-00001"
SIZE = (6, 4)  # (W, H)
NAMES = ("cat", "dog", "eel")
COUNTS = (2, 0, 3, 1, 0, 4)  # objects a sample: two samples without any
HEAT = Field("heat", (4, 6), "<f4", kind=HEAT_KIND.name)
SPOTS = Field("spots", (2,), "<f4", ragged=True, kind=SPOTS_KIND.name)
PARTS = Field("parts", (4, 6), "|u1", kind="mask")  # a second field of a known kind
PACKS = {
    "classification": (*fields_for("classification", SIZE, np.dtype(np.uint8)), HEAT, SPOTS),
    "detection": (*fields_for("detection", SIZE, np.dtype(np.uint8)), HEAT, SPOTS),
    "segmentation": (*fields_for("segmentation", SIZE, np.dtype(np.uint8)), PARTS, HEAT, SPOTS),
    # per-object planes without a detection label: RecordIO counts the objects by the planes
    "planes": (
        fields_for("classification", SIZE, np.dtype(np.uint8))[0],
        Field("masks", (4, 6), "|u1", True, "bits", "object_mask"),
        SPOTS,
    ),
    # fixed fields only: RecordIO's raw records all of one size, read in place
    "classification+heat": (*fields_for("classification", SIZE, np.dtype(np.uint8)), HEAT),
}


@dataclass(frozen=True)
class Chunk:
    """Stands in for the packing side's chunk task: a `formats.ChunkPosition`."""

    shard: str
    chunk: int
    start: int


def make_records(fields: tuple[Field, ...]) -> list[dict[str, np.ndarray]]:
    """One record per COUNTS entry: random values of each field's dtype, class ids below
    len(NAMES), coordinates inside the image, negative and fractional floats in the heat."""
    rng = np.random.default_rng(11)
    records = []
    for count in COUNTS:
        record = {}
        for f in fields:
            shape = (count, *f.shape) if f.ragged else f.shape
            dtype = np.dtype(f.dtype)
            if f.kind in ("class", "object_class"):
                record[f.name] = rng.integers(0, len(NAMES), shape).astype(dtype)
            elif dtype.kind == "f":
                record[f.name] = (rng.random(shape) * SIZE[0] - (f.kind == "test_heat")).astype(
                    dtype
                )
            else:
                record[f.name] = rng.integers(0, 2 if f.ragged else 256, shape).astype(dtype)
        records.append(record)
    return records


def write_shard(
    root: Path, name: str, fields: tuple[Field, ...], **options
) -> tuple[dict, dict, list]:
    """The records packed as one shard of two chunks: (shard entry, options, records)."""
    fmt = formats.get(name)
    options = {**fmt.OPTIONS, "class_names": NAMES, **options}
    records = make_records(fields)
    part_dir = root / "parts"
    part_dir.mkdir()
    (root / "train").mkdir()
    for chunk, start in ((0, 0), (1, 3)):
        writer = fmt.ChunkWriter(part_dir, Chunk(SHARD, chunk, start), fields, options)
        for record in records[start : start + 3]:
            writer.write(record)
        writer.close()
    sources = tuple((f"src/{i}.png", None) for i in range(len(records)))
    job = ShardJob(root, SHARD, "train", (0, 1), fields, part_dir, options, sources)
    files = fmt.finalize(job)
    assert not list(part_dir.iterdir())
    return (
        {"name": SHARD, "count": job.count, "files": [f.to_json() for f in files]},
        options,
        records,
    )


def ragged_rows(reader, local: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Each sample's ragged fields, from whichever per-sample read the reader has."""
    if hasattr(reader, "read_objects"):
        return reader.read_objects(local)
    values, counts = reader.read_ragged(local)
    splits = np.cumsum(counts)[:-1]
    per_field = {name: np.split(array, splits) for name, array in values.items()}
    return [{name: rows[j] for name, rows in per_field.items()} for j in range(len(local))]


def assert_same(got: np.ndarray, want: np.ndarray, field: Field) -> None:
    assert got.dtype == np.dtype(field.dtype) and got.shape == want.shape, field.name
    if field.kind == "boxes":  # stored normalised by the image's size
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=field.name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=field.name)


@pytest.mark.parametrize("pack", PACKS)
@pytest.mark.parametrize("name", [*formats.FORMATS, "recordio-png"])
def test_fields_of_new_kinds_come_back_exactly(tmp_path, name, pack):
    fields = PACKS[pack]
    name, _, encoding = name.partition("-")  # recordio-png: the payload a PNG file
    shard, options, records = write_shard(
        tmp_path, name, fields, **({"encoding": encoding} if encoding else {})
    )
    reader = formats.get(name).open_shard(tmp_path, "train", shard, fields, options)
    try:
        for local in (np.arange(6), np.array([1, 4, 5]), np.array([4])):
            out = {f.name: np.empty((len(local), *f.shape), f.dtype) for f in fixed(fields)}
            reader.read_into(local, out)
            for f in fixed(fields):
                assert_same(out[f.name], np.stack([records[i][f.name] for i in local]), f)
            for j, rows in enumerate(ragged_rows(reader, local)):
                want = records[int(local[j])]
                assert set(rows) == {f.name for f in ragged(fields)}
                for f in ragged(fields):
                    assert_same(np.asarray(rows[f.name]), want[f.name], f)
    finally:
        reader.close()


@pytest.mark.parametrize("pack", PACKS)
def test_tensorflow_parses_new_kinds_with_the_example_decoder(tmp_path, pack):
    tf = pytest.importorskip("tensorflow")
    fields = PACKS[pack]
    _, options, records = write_shard(tmp_path, "tfrecord", fields)
    path = tmp_path / "train" / formats.get("tfrecord").file_name(SHARD, options)
    decode = tfrecord_parse.example_decoder(fields, max_boxes=5)
    batches = list(tf.data.TFRecordDataset(str(path)).batch(4).map(decode))
    padded = {f.name for f in ragged(fields) if packer.fields.kind_of(f).padded}
    assert set(batches[0]) == {f.name for f in fixed(fields)} | padded
    assert ("spots" in padded) == (SPOTS in fields)
    assert not padded & {"iscrowd", "difficult"}
    for f in fixed(fields):
        got = np.concatenate([b[f.name].numpy() for b in batches])
        assert got.dtype == np.dtype(f.dtype).newbyteorder("=")
        np.testing.assert_array_equal(got, np.stack([r[f.name] for r in records]), f.name)
    for name in padded:
        got = np.concatenate([b[name].numpy() for b in batches])
        field = next(f for f in fields if f.name == name)
        assert got.shape == (len(records), 5, *field.shape)
        for sample, record in zip(got, records, strict=True):
            count = len(record[name])
            np.testing.assert_allclose(sample[:count], record[name], rtol=1e-6)
            assert (sample[count:] == -1).all()


def test_tfrecord_keys_of_new_kinds_are_packer_slash_name(tmp_path):
    """The documented keys, parsed by TensorFlow alone: `packer/heat`, one bytes value of the
    plane's little-endian float32s; `packer/spots`, one bytes value per row; the second mask
    field under `packer/parts`, the first under `mask/raw`."""
    tf = pytest.importorskip("tensorflow")
    fields = PACKS["segmentation"]
    _, options, records = write_shard(tmp_path, "tfrecord", fields)
    path = tmp_path / "train" / formats.get("tfrecord").file_name(SHARD, options)
    spec = {
        "mask/raw": tf.io.FixedLenFeature([], tf.string),
        "packer/parts": tf.io.FixedLenFeature([], tf.string),
        "packer/heat": tf.io.FixedLenFeature([], tf.string),
        "packer/spots": tf.io.VarLenFeature(tf.string),
    }
    for serialized, record in zip(tf.data.TFRecordDataset(str(path)), records, strict=True):
        parsed = tf.io.parse_single_example(serialized, spec)
        assert parsed["mask/raw"].numpy() == record["masks"].tobytes()
        assert parsed["packer/parts"].numpy() == record["parts"].tobytes()
        assert parsed["packer/heat"].numpy() == record["heat"].astype("<f4").tobytes()
        rows = tf.sparse.to_dense(parsed["packer/spots"], b"").numpy().tolist()
        assert rows == [row.astype("<f4").tobytes() for row in record["spots"]]


def test_recordio_keeps_new_kinds_in_the_fields_trailer(tmp_path):
    """Parsed as formats/recordio.md says, from the record's end: magic `PKFD`, uint32 field
    count, per field uint32 rows and uint32 bytes a row, then the fields' bytes in order; the
    detection label and the image payload before it are MXNet's as ever."""
    fields = PACKS["detection"]
    _, _, records = write_shard(tmp_path, "recordio", fields)
    data = (tmp_path / "train" / f"{SHARD}.rec").read_bytes()
    offsets = [
        int(line.split("\t")[1])
        for line in (tmp_path / "train" / f"{SHARD}.idx").read_text().splitlines()
    ]
    width, height = SIZE
    for offset, record in zip(offsets, records, strict=True):
        magic, lrecord = struct.unpack_from("<II", data, offset)
        assert magic == 0xCED7230A
        body = data[offset + 8 : offset + 8 + lrecord]
        flag = struct.unpack_from("<I", body)[0]
        label = np.frombuffer(body, "<f4", flag, 24)
        assert label[:2].tolist() == [2, 7] and label.size == 2 + 7 * len(record["boxes"])
        payload = body[24 + 4 * flag :]
        count, found = struct.unpack_from("<I4s", payload, len(payload) - 8)
        assert (count, found) == (2, b"PKFD")
        table = np.frombuffer(payload, "<u4", 4, len(payload) - 8 - 16).reshape(2, 2)
        assert table.tolist() == [[1, height * width * 4], [len(record["spots"]), 8]]
        end = len(payload) - 8 - 16
        spots = np.frombuffer(payload, "<f4", 2 * len(record["spots"]), end - table[1].prod())
        heat_at = end - table[1].prod() - table[0].prod()
        heat = np.frombuffer(payload, "<f4", height * width, heat_at)
        np.testing.assert_array_equal(heat.reshape(height, width), record["heat"])
        np.testing.assert_array_equal(spots.reshape(-1, 2), record["spots"])
        raw = payload[:heat_at]
        assert len(raw) == 16 + height * width * 3  # raw descriptor + the image, nothing else
        assert raw[:4] == b"PKRW" and raw[16:] == record["images"].tobytes()


def test_a_fields_trailer_that_differs_from_the_manifest_is_refused():
    record = make_records((HEAT, SPOTS))[0]
    trailer = recordio_fields.trailer((HEAT, SPOTS), record)
    payload, values = recordio_fields.split(b"IMAGE" + trailer, (HEAT, SPOTS))
    assert bytes(payload) == b"IMAGE" and set(values) == {"heat", "spots"}
    wide = Field("heat", (4, 7), "<f4", kind=HEAT_KIND.name)
    with pytest.raises(RecordIOError, match="heat: 1 x 96 bytes in the trailer"):
        recordio_fields.split(trailer, (wide, SPOTS))
    with pytest.raises(RecordIOError, match="a trailer of 2 fields, the manifest has 1"):
        recordio_fields.split(trailer, (HEAT,))
    with pytest.raises(RecordIOError, match="no PKFD trailer"):
        recordio_fields.split(b"IMAGE", (HEAT,))
    with pytest.raises(RecordIOError, match="more bytes than the record holds"):
        recordio_fields.split(trailer[40:], (HEAT, SPOTS))

"""RecordIO: dmlc-core framing and IRHeader golden bytes, packs and readers, MXNet and DALI."""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

import packer
from packer.fields.presets import fields_for
from packer.formats import ShardJob
from packer.formats import recordio as fmt
from packer.recordio import (
    IRHeader,
    RecordIOError,
    RecordIOReader,
    check_record_size,
    dali_index,
    decode_payload,
    encode_payload,
    frame,
    join_chunks,
    pack_record,
    read_index,
    unpack_record,
)

MAGIC = bytes.fromhex("0a23d7ce")  # 0xced7230a, little-endian
SIZE = (32, 24)  # (W, H)
SHARD = 5 * 32 * 24 * 4  # five segmentation samples per shard


@dataclass(frozen=True)
class Chunk:
    """Stands in for the packing side's chunk task: a `formats.ChunkPosition`."""

    shard: str
    chunk: int
    start: int


def lrecord(cflag: int, length: int) -> bytes:
    return struct.pack("<I", cflag << 29 | length)


def ir_header(flag: int, label: float, id_: int, id2: int = 0) -> bytes:
    return struct.pack("<IfQQ", flag, label, id_, id2)


def shard_files(path: Path, split: str = "train") -> list[tuple[Path, Path, Path]]:
    """(rec, idx, lst) of every shard of a split, in order."""
    return [
        (p, p.with_suffix(".idx"), p.with_suffix(".lst"))
        for p in sorted((path / split).glob("*.rec"))
    ]


# ---------------------------------------------------------------- golden bytes


def test_small_record_is_one_chunk_padded_to_4_bytes():
    assert frame(b"hello") == MAGIC + lrecord(0, 5) + b"hello" + b"\0\0\0"
    assert frame(b"abcd") == MAGIC + lrecord(0, 4) + b"abcd"
    assert frame(b"") == MAGIC + lrecord(0, 0)
    data = pack_record(IRHeader(0, 3.0, 12, 0), b"xyz")
    assert data == ir_header(0, 3.0, 12) + b"xyz"
    assert frame(data) == MAGIC + lrecord(0, 27) + data + b"\0"


def test_aligned_magic_splits_the_record_as_dmlc_core_does():
    data = b"abcd" + MAGIC + b"efgh" + MAGIC + MAGIC + b"ij"
    assert frame(data) == (
        MAGIC + lrecord(1, 4) + b"abcd"  # first chunk: up to the magic word, which is dropped
        + MAGIC + lrecord(2, 4) + b"efgh"  # middle chunk
        + MAGIC + lrecord(2, 0)  # two magic words in a row: an empty middle chunk
        + MAGIC + lrecord(3, 2) + b"ij" + b"\0\0"  # last chunk, padded
    )  # fmt: skip
    assert frame(MAGIC) == MAGIC + lrecord(1, 0) + MAGIC + lrecord(3, 0)
    unaligned = b"ab" + MAGIC + b"cd"
    assert frame(unaligned) == MAGIC + lrecord(0, 8) + unaligned
    tail = b"abcde" + MAGIC[:3]  # a partial word at the end is never a split point
    assert frame(tail) == MAGIC + lrecord(0, 8) + tail
    for record in (data, MAGIC, MAGIC * 3, unaligned, tail, b""):
        assert join_chunks(frame(record), Path("x.rec"), 0) == record


def test_multiple_labels_precede_the_payload():
    data = pack_record(IRHeader(0, [1.0, 2.5, -3.0], 7, 0), b"xy")
    labels = struct.pack("<3f", 1.0, 2.5, -3.0)
    assert data == ir_header(3, 0.0, 7) + labels + b"xy"
    assert frame(data) == MAGIC + lrecord(0, 38) + data + b"\0\0"
    header, payload = unpack_record(data)
    assert header.flag == 3 and header.id == 7 and payload == b"xy"
    assert header.label.tolist() == [1.0, 2.5, -3.0]
    # A scalar label forces flag 0, as mxnet.recordio.pack does.
    assert pack_record(IRHeader(5, 2.0, 9, 0), b"z") == ir_header(0, 2.0, 9) + b"z"


def test_reader_joins_chunks_in_order_and_by_key(tmp_path):
    records = [
        pack_record(IRHeader(0, float(i), i, 0), p)
        for i, p in enumerate([b"a", MAGIC * 2, b"tail" + MAGIC])
    ]
    rec = tmp_path / "golden.rec"
    framed = [frame(r) for r in records]
    rec.write_bytes(b"".join(framed))
    offsets = np.cumsum([0] + [len(f) for f in framed])[:-1]
    (tmp_path / "golden.idx").write_text("".join(f"{10 + i}\t{o}\n" for i, o in enumerate(offsets)))
    with RecordIOReader(rec) as reader:
        assert len(reader) == 3 and reader.keys.tolist() == [10, 11, 12]
        assert [unpack_record(r) for r in records] == [(h, p) for h, p in reader]
        assert reader[1] == unpack_record(records[1]) == reader.read_idx(11)
        with pytest.raises(KeyError):
            reader.read_idx(3)
    (tmp_path / "golden.idx").unlink()
    with RecordIOReader(rec) as scanned:  # no .idx: found by scanning the file
        assert scanned.offsets.tolist() == offsets.tolist() and scanned[2] == unpack_record(
            records[2]
        )


def test_corrupt_files_name_the_file_and_record(tmp_path):
    rec = tmp_path / "bad.rec"
    framed = [frame(pack_record(IRHeader(0, 0.0, i, 0), bytes(10))) for i in range(3)]
    data = bytearray(b"".join(framed))
    data[len(framed[0])] ^= 0xFF  # record 1's magic
    rec.write_bytes(data)
    with pytest.raises(RecordIOError, match=r"bad\.rec: record 1: no chunk header at byte 44"):
        RecordIOReader(rec)  # no .idx: the scan finds it
    (tmp_path / "bad.idx").write_text("0\t0\n1\t44\n2\t88\n")
    with RecordIOReader(rec) as reader:
        assert reader[2][0].id == 2
        with pytest.raises(RecordIOError, match=r"bad\.rec: record 1: chunk at byte 44: bad magic"):
            reader[1]
        with pytest.raises(RecordIOError, match=r"bad\.rec: record 1: chunk at byte 44: bad magic"):
            list(reader)
    rec.write_bytes(b"".join(framed)[:-6])
    with RecordIOReader(rec) as reader:
        with pytest.raises(RecordIOError, match=r"bad\.rec: record 2: chunk at byte 88: truncated"):
            reader[2]
        with pytest.raises(RecordIOError, match=r"bad\.rec: record 2: chunk at byte 88: truncated"):
            list(reader)


def test_records_from_2_29_bytes_are_refused(tmp_path):
    check_record_size((1 << 29) - 1)
    with pytest.raises(ValueError, match=r"smaller than 2\^29"):
        check_record_size(1 << 29)
    huge = fields_for("segmentation", (16384, 8192), np.dtype(np.uint8))  # 512 MiB of pixels
    with pytest.raises(ValueError, match="too large for RecordIO"):
        fmt.ChunkWriter(tmp_path, Chunk("s", 0, 0), huge, fmt.OPTIONS)
    assert not list(tmp_path.iterdir())  # refused before writing anything


def test_options_are_checked():
    fmt.check_options({"encoding": "png", "quality": 100})
    with pytest.raises(ValueError, match="encoding"):
        fmt.check_options({"encoding": "webp", "quality": 95})
    with pytest.raises(ValueError, match="quality"):
        fmt.check_options({"encoding": "jpeg", "quality": 0})


@pytest.mark.parametrize("encoding", fmt.ENCODINGS)
def test_payloads_round_trip_with_16_bit_masks(encoding):
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (6, 10, 3), np.uint8)
    mask = rng.integers(0, 1000, (6, 10)).astype("<u2")
    decoded, got = decode_payload(encode_payload(image, mask, encoding, 90))
    assert got.dtype == np.uint16 and np.array_equal(got, mask)
    assert decoded.shape == image.shape and (encoding == "jpeg" or np.array_equal(decoded, image))


# ---------------------------------------------------------------- packs


@pytest.fixture(scope="module")
def packs(seg_src, cls_src, tmp_path_factory) -> dict[str, Path]:
    """npy and recordio (raw, png, jpeg) packs of the same sources and options."""
    root = tmp_path_factory.mktemp("recordio-packs")
    made = {}
    for task, src in (("seg", seg_src), ("cls", cls_src)):
        made[f"{task}-npy"] = root / f"{task}-npy"
        packer.pack(src, out=made[f"{task}-npy"], size=SIZE, shard_size=SHARD, progress=False)
        for encoding in fmt.ENCODINGS:
            out = made[f"{task}-{encoding}"] = root / f"{task}-{encoding}"
            packer.pack(
                src, out=out, format="recordio", size=SIZE, shard_size=SHARD, encoding=encoding,
                progress=False,
            )  # fmt: skip
    return made


def read_all(path: Path, split: str = "train") -> dict[str, np.ndarray]:
    ds = packer.open(path)[split]
    return ds.reader.read(np.arange(ds.count))


@pytest.mark.parametrize("task", ["seg", "cls"])
def test_raw_pack_matches_the_npy_pack(packs, task):
    npy, rec = packer.open(packs[f"{task}-npy"]), packer.open(packs[f"{task}-raw"])
    assert rec.format == "recordio" and rec.fields == npy.fields and rec.classes == npy.classes
    for split in npy.splits:
        assert [s["count"] for s in rec[split].shards] == [s["count"] for s in npy[split].shards]
        assert len(npy[split].shards) > 1 or split != "train"
        a, b = read_all(npy.root, split), read_all(rec.root, split)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        assert [rec[split].source(i) for i in range(rec[split].count)] == [
            npy[split].source(i) for i in range(npy[split].count)
        ]


@pytest.mark.parametrize("task", ["seg", "cls"])
def test_png_is_exact_and_jpeg_close_masks_and_labels_always_exact(packs, task):
    target = "masks" if task == "seg" else "labels"
    raw = read_all(packs[f"{task}-raw"])
    png, jpeg = read_all(packs[f"{task}-png"]), read_all(packs[f"{task}-jpeg"])
    assert np.array_equal(png["images"], raw["images"])
    assert np.array_equal(png[target], raw[target]) and np.array_equal(jpeg[target], raw[target])
    assert np.abs(jpeg["images"].astype(int) - raw["images"]).mean() < 6


@pytest.mark.parametrize("name", ["seg-raw", "seg-jpeg", "cls-png"])
def test_each_shard_has_rec_idx_and_im2rec_lst(packs, name):
    ds = packer.open(packs[name])
    raw = read_all(packs[name.split("-")[0] + "-raw"])
    labels = raw.get("labels", np.zeros(ds["train"].count, int))
    first = 0
    for shard, (rec, idx, lst) in zip(ds["train"].shards, shard_files(ds.root), strict=True):
        listed = {f["path"] for f in shard["files"]}
        assert {f"train/{p.name}" for p in (rec, idx, lst)} <= listed
        sources = json.loads(rec.with_suffix(".sources.json").read_text())
        lines = [line.split("\t") for line in lst.read_text().splitlines()]
        assert lines == [
            [str(i), f"{float(labels[first + i]):f}", image] for i, (image, _) in enumerate(sources)
        ]
        with RecordIOReader(rec) as reader:
            offsets = [int(line.split("\t")[1]) for line in idx.read_text().splitlines()]
            assert reader.keys.tolist() == list(range(shard["count"]))
            assert reader.offsets.tolist() == offsets and offsets[0] == 0
            for i, (header, _) in enumerate(reader):
                assert (header.flag, header.id, header.id2) == (0, i, 0)
                assert header.label == labels[first + i]
        first += shard["count"]


def test_jpeg_classification_payload_is_exactly_an_rgb_jpeg(packs):
    raw = read_all(packs["cls-raw"])["images"]
    rec = shard_files(packs["cls-jpeg"])[0][0]
    with RecordIOReader(rec) as reader:
        for i, (_, payload) in enumerate(reader):
            assert payload[:2] == b"\xff\xd8" and payload[-2:] == b"\xff\xd9"
            image = np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))
            assert np.abs(image.astype(int) - raw[i]).mean() < 6  # RGB, not BGR
            assert np.abs(image[..., ::-1].astype(int) - raw[i]).mean() > 30


@pytest.mark.parametrize("encoding", ["jpeg", "png"])
def test_segmentation_payload_opens_as_the_image_with_the_mask_png_after_it(packs, encoding):
    raw = read_all(packs["seg-raw"])
    rec = shard_files(packs[f"seg-{encoding}"])[0][0]
    with RecordIOReader(rec) as reader:
        for i, (_, payload) in enumerate(reader):
            # what an ImageRecordIter/DALI-style decoder sees: the image, trailer ignored
            image = np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))
            assert np.array_equal(
                image, cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR_RGB)
            )
            decoded, mask = decode_payload(payload)
            assert np.array_equal(decoded, image) and np.array_equal(mask, raw["masks"][i])
            assert payload[-4:] == b"PKMK"


def test_packs_are_byte_identical_whatever_the_workers(seg_src, tmp_path):
    for encoding in ("raw", "jpeg"):
        hashes = []
        for workers in (1, 2):
            out = tmp_path / f"{encoding}-{workers}"
            ds = packer.pack(
                seg_src, out=out, format="recordio", size=SIZE, shard_size=SHARD, workers=workers,
                encoding=encoding, quality=80, progress=False,
            )  # fmt: skip
            hashes.append(
                [f["sha256"] for s in ds.manifest["splits"]["train"]["shards"] for f in s["files"]]
            )
        assert hashes[0] == hashes[1]


@pytest.mark.parametrize("encoding", ["raw", "jpeg"])
def test_packed_sequence_reads_recordio_packs(packs, encoding):
    from packer.keras import PackedSequence

    npy = PackedSequence(packs["seg-npy"], batch_size=4, shuffle=True, seed=3)
    rec = PackedSequence(packs[f"seg-{encoding}"], batch_size=4, shuffle=True, seed=3)
    for i in range(len(npy)):
        (a, ma), (b, mb) = npy[i], rec[i]
        assert np.array_equal(ma, mb) and b.dtype == np.uint8 and b.shape == a.shape
        assert np.array_equal(a, b) if encoding == "raw" else np.abs(a.astype(int) - b).mean() < 6


def test_one_dali_index_for_the_shards_of_a_split(packs, tmp_path):
    recs = [f[0] for f in shard_files(packs["seg-raw"])]
    keys, offsets = read_index(dali_index(recs, tmp_path / "train.idx"))
    starts = np.cumsum([0] + [rec.stat().st_size for rec in recs])
    expected = [
        offset + starts[k]
        for k, rec in enumerate(recs)
        for offset in read_index(rec.with_suffix(".idx"))[1]
    ]
    assert len(recs) > 1 and keys.tolist() == list(range(len(expected)))
    assert offsets.tolist() == expected


# ---------------------------------------------------------------- records split by the magic word


def magic_shard(tmp_path: Path, encoding: str = "raw") -> tuple[Path, dict, list[dict]]:
    """A segmentation shard written by the format's own writer; records 1 and 3 hold magic words."""
    fields = fields_for("segmentation", (8, 4), np.dtype(np.uint8))
    rng = np.random.default_rng(0)
    records = [
        {
            "images": rng.integers(0, 256, (4, 8, 3), np.uint8),
            "masks": rng.integers(0, 4, (4, 8), np.uint8),
        }
        for _ in range(5)
    ]
    records[1]["images"].reshape(-1)[:4] = list(MAGIC)  # raw data offset 40: aligned
    records[1]["images"].reshape(-1)[44:52] = list(MAGIC * 2)
    records[3]["masks"].reshape(-1)[-4:] = list(MAGIC)  # the last word of the record
    parts = tmp_path / "parts"
    parts.mkdir()
    (tmp_path / "train").mkdir()
    options = {**fmt.OPTIONS, "encoding": encoding}
    for chunk, batch in enumerate((records[:2], records[2:])):
        task = Chunk("train-00000-of-00001", chunk, 2 * chunk)
        writer = fmt.ChunkWriter(parts, task, fields, options)
        for record in batch:
            writer.write(record)
        writer.close()
    sources = tuple((f"img/{i}.png", f"mask/{i}.png") for i in range(5))
    job = ShardJob(
        tmp_path, "train-00000-of-00001", "train", (0, 1), fields, parts, options, sources
    )
    files = fmt.finalize(job)
    shard = {"name": "train-00000-of-00001", "count": 5, "files": [f.to_json() for f in files]}
    return tmp_path, shard, records


def test_records_split_by_the_magic_word_read_back_exactly(tmp_path):
    root, shard, records = magic_shard(tmp_path)
    rec = root / "train" / f"{shard['name']}.rec"
    data = rec.read_bytes()
    words = np.frombuffer(data, "<u4")
    heads = np.flatnonzero(words == 0xCED7230A)
    flags = (words[heads + 1] >> 29).tolist()
    assert flags == [0, 1, 2, 2, 3, 0, 1, 3, 0]  # records 1 and 3 split, the others whole
    fields = fields_for("segmentation", (8, 4), np.dtype(np.uint8))
    reader = fmt.open_shard(root, "train", shard, fields, fmt.OPTIONS)
    for local in (np.arange(5), np.array([1]), np.array([0, 2, 3])):
        out = {
            "images": np.zeros((len(local), 4, 8, 3), np.uint8),
            "masks": np.zeros((len(local), 4, 8), np.uint8),
        }
        reader.read_into(local, out)
        for j, i in enumerate(local):
            assert np.array_equal(out["images"][j], records[i]["images"])
            assert np.array_equal(out["masks"][j], records[i]["masks"])
    reader.close()
    with RecordIOReader(rec) as rio:
        for i, (header, payload) in enumerate(rio):
            image, mask = decode_payload(payload)
            assert header.id == i and np.array_equal(image, records[i]["images"])
            assert np.array_equal(mask, records[i]["masks"])


def test_corrupt_raw_records_name_the_file_and_record(tmp_path):
    root, shard, _ = magic_shard(tmp_path)
    rec = root / "train" / f"{shard['name']}.rec"
    fields = fields_for("segmentation", (8, 4), np.dtype(np.uint8))
    offsets = [
        int(line.split("\t")[1]) for line in rec.with_suffix(".idx").read_text().splitlines()
    ]
    good = rec.read_bytes()
    out = {"images": np.zeros((5, 4, 8, 3), np.uint8), "masks": np.zeros((5, 4, 8), np.uint8)}
    for record, damage in ((2, offsets[2]), (4, offsets[4] + 4), (1, offsets[1] + 4)):
        data = bytearray(good)
        data[damage] ^= 0x40
        rec.write_bytes(data)
        reader = fmt.open_shard(root, "train", shard, fields, fmt.OPTIONS)
        with pytest.raises(RecordIOError, match=rf"{rec.name}: record {record}\b"):
            reader.read_into(np.arange(5), out)
        reader.close()
    rec.write_bytes(good[:-5])
    reader = fmt.open_shard(root, "train", shard, fields, fmt.OPTIONS)
    with pytest.raises(
        RecordIOError, match=rf"{rec.name}: record 4: chunk at byte {offsets[4]}: truncated"
    ):
        reader.read_into(np.arange(5), out)
    reader.close()


def test_encoded_records_decode_into_the_rows_and_misfits_are_refused_naming_them(tmp_path):
    """A JPEG shard's images decode straight into the batch rows (`decode_payload`'s pixels),
    masks exact; a grey, misshapen or cut image, or a mask of another type, is refused in one
    line naming the file and the record."""
    root, shard, records = magic_shard(tmp_path, "jpeg")
    rec = root / "train" / f"{shard['name']}.rec"
    fields = fields_for("segmentation", (8, 4), np.dtype(np.uint8))
    options = {**fmt.OPTIONS, "encoding": "jpeg"}
    out = {"images": np.zeros((5, 4, 8, 3), np.uint8), "masks": np.zeros((5, 4, 8), np.uint8)}
    reader = fmt.open_shard(root, "train", shard, fields, options)
    reader.read_into(np.arange(5), out)
    reader.close()
    with RecordIOReader(rec) as rio:
        stored = [rio[i] for i in range(5)]
    for j, (_, payload) in enumerate(stored):
        image, mask = decode_payload(payload)
        assert np.array_equal(out["images"][j], image)
        assert np.array_equal(out["masks"][j], mask) and np.array_equal(mask, records[j]["masks"])
    image, mask = records[2]["images"], records[2]["masks"]
    grey = r"image: decodes to uint8 \[4, 8\], the manifest says uint8 \[4, 8, 3\]"
    misfits = {
        grey: encode_payload(image[..., 0], mask, "jpeg", 90),
        r"image: decodes to uint8 \[8, 8, 3\]": encode_payload(
            np.vstack([image] * 2), None, "jpeg", 90
        ),
        r"image: .* \(cut short\)": encode_payload(image, None, "jpeg", 90)[:-20],
        "masks of type uint16, the manifest says uint8": encode_payload(
            image, mask.astype("<u2"), "jpeg", 90
        ),
    }
    for problem, payload in misfits.items():
        framed = [
            frame(pack_record(h, payload if i == 2 else p)) for i, (h, p) in enumerate(stored)
        ]
        rec.write_bytes(b"".join(framed))
        offsets = np.cumsum([0] + [len(f) for f in framed])[:-1].tolist()
        rec.with_suffix(".idx").write_text("".join(f"{k}\t{o}\n" for k, o in enumerate(offsets)))
        reader = fmt.open_shard(root, "train", shard, fields, options)
        with pytest.raises(RecordIOError, match=rf"^[^\n]*{rec.name}: record 2: {problem}[^\n]*$"):
            reader.read_into(np.arange(5), out)
        reader.close()


# ---------------------------------------------------------------- MXNet and DALI, where installed


def test_mxnet_writes_the_same_bytes_and_reads_ours(tmp_path):
    mx = pytest.importorskip("mxnet")
    root, shard, _ = magic_shard(tmp_path)
    rec = root / "train" / f"{shard['name']}.rec"
    ours = RecordIOReader(rec)
    theirs = mx.recordio.MXIndexedRecordIO(str(tmp_path / "mx.idx"), str(tmp_path / "mx.rec"), "w")
    for i in range(len(ours)):
        theirs.write_idx(i, ours.read(i))
    theirs.close()
    assert (tmp_path / "mx.rec").read_bytes() == rec.read_bytes()
    assert (tmp_path / "mx.idx").read_text() == rec.with_suffix(".idx").read_text()
    reading = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    for i in range(len(ours)):
        header, payload = mx.recordio.unpack(reading.read_idx(i))
        assert tuple(header) == tuple(ours[i][0]) and payload == ours[i][1]
    reading.close()
    ours.close()


def test_our_reader_reads_what_mxnet_wrote(tmp_path):
    mx = pytest.importorskip("mxnet")
    writer = mx.recordio.MXIndexedRecordIO(str(tmp_path / "m.idx"), str(tmp_path / "m.rec"), "w")
    payloads = [b"x", MAGIC * 3 + b"yz", bytes(range(256)) * 9]
    for i, payload in enumerate(payloads):
        label = [float(i), 0.5] if i == 1 else float(i)
        writer.write_idx(100 + i, mx.recordio.pack(mx.recordio.IRHeader(0, label, i, 0), payload))
    writer.close()
    with RecordIOReader(tmp_path / "m.rec") as reader:
        assert reader.keys.tolist() == [100, 101, 102]
        for i, (header, payload) in enumerate(reader):
            assert payload == payloads[i] and header.id == i
            assert np.array_equal(header.label, [1.0, 0.5] if i == 1 else i)
            assert reader.read_idx(100 + i)[1] == payload


@pytest.mark.parametrize("name", ["cls-jpeg", "cls-png", "seg-jpeg"])
def test_mxnet_image_record_iter_trains_from_our_pack(packs, name):
    mx = pytest.importorskip("mxnet")
    rec, idx, lst = shard_files(packs[name])[0]
    ours = read_all(packs[name])
    count = len(idx.read_text().splitlines())
    labels = ours.get("labels", np.zeros(len(ours["images"])))[:count]
    for imglist in ({}, {"path_imglist": str(lst)}):  # labels from the IRHeader, or by id from .lst
        it = mx.io.ImageRecordIter(
            path_imgrec=str(rec), path_imgidx=str(idx), data_shape=(3, SIZE[1], SIZE[0]),
            batch_size=count, shuffle=False, **imglist,
        )  # fmt: skip
        batch = it.next()
        images = batch.data[0].asnumpy().transpose(0, 2, 3, 1)  # RGB, as ours
        assert np.array_equal(batch.label[0].asnumpy(), labels)
        assert np.abs(images - ours["images"][:count]).mean() < 1


@pytest.mark.parametrize("name", ["cls-jpeg", "cls-png", "seg-jpeg"])
def test_dali_reads_and_decodes_our_pack(packs, name, tmp_path):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def, types

    recs = [f[0] for f in shard_files(packs[name])]
    ours = read_all(packs[name])
    count = len(ours["images"])
    expected_labels = ours.get("labels", np.zeros(count))

    @pipeline_def(batch_size=count, num_threads=1, device_id=None)
    def pipeline(paths, index):
        jpegs, labels = fn.readers.mxnet(path=paths, index_path=[index], random_shuffle=False)
        return fn.decoders.image(jpegs, device="cpu", output_type=types.RGB), labels

    # the whole split through one index (what DALI takes for many files), then a single shard
    for paths, index in (
        (recs, dali_index(recs, tmp_path / "split.idx")),
        (recs[:1], recs[0].with_suffix(".idx")),
    ):
        pipe = pipeline([str(p) for p in paths], str(index))
        pipe.build()
        images, labels = pipe.run()
        n = len(read_index(index)[0])
        images = np.stack([np.asarray(images[i]) for i in range(n)])
        labels = np.array([np.asarray(labels[i]).item() for i in range(n)])
        assert np.abs(images.astype(int) - ours["images"][:n]).mean() < 1
        assert np.array_equal(labels, expected_labels[:n])

"""TFRecord packs: bytes that TensorFlow and an independent reader parse, DALI index, gzip."""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import packer
import packer.tf
from packer.errors import PackError
from packer.formats import tfrecord as fmt
from packer.keras import PackedSequence
from packer.packing import plan
from tests.fixtures.packs import manifest_hashes

SIZE = (32, 24)  # (W, H)
SHARD = 5 * 32 * 24 * 4  # five segmentation samples per shard
# The PyPI `tfrecord` package registers its own copy of example.proto, which clashes with
# TensorFlow's in one process: it runs in a subprocess without TensorFlow.
INDEPENDENT = """
import json, pickle, sys
from pathlib import Path
from tfrecord.reader import tfrecord_loader
from tfrecord.tools.tfrecord2idx import create_index
job = json.loads(sys.argv[1])
out = {"records": [], "indexes": []}
for name in job["files"]:
    index = None
    if job["index"]:
        theirs = Path(job["out"]).with_name(Path(name).name + ".theirs.idx")
        create_index(name, str(theirs))
        out["indexes"].append(theirs.read_bytes())
        index = str(Path(name).with_suffix(".idx"))  # ours: the reader takes it
    for record in tfrecord_loader(name, index, job["keys"], shard=index and (0, 1),
                                  compression_type=job["compression"]):
        out["records"].append({k: bytes(v) if isinstance(v, bytes) else v.tolist()
                               for k, v in record.items()})
Path(job["out"]).write_bytes(pickle.dumps(out))
"""
SEG_SPEC = {
    "image/raw": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/channels": tf.io.FixedLenFeature([], tf.int64),
    "mask/raw": tf.io.FixedLenFeature([], tf.string),
}


@pytest.fixture(scope="module")
def seg(seg_src, tmp_path_factory) -> tuple[Path, Path]:
    """The same source and options packed as npy and as tfrecord with DALI indexes."""
    root = tmp_path_factory.mktemp("tfrecord-seg")
    packer.pack(seg_src, out=root / "npy", size=SIZE, shard_size=SHARD)
    packer.pack(
        seg_src, out=root / "tfr", format="tfrecord", size=SIZE, shard_size=SHARD, index=True
    )
    return root / "npy", root / "tfr"


@pytest.fixture(scope="module")
def cls(cls_src, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tfrecord-cls")
    packer.pack(cls_src, out=root / "npy", size=24, shard_size=8 * 24 * 24 * 3)
    packer.pack(cls_src, out=root / "tfr", format="tfrecord", size=24, shard_size=8 * 24 * 24 * 3)
    return root / "npy", root / "tfr"


def everything(path: Path, split: str = "train") -> dict[str, np.ndarray]:
    part = packer.open(path)[split]
    return part.reader.read(np.arange(part.count))


def record_files(path: Path, split: str = "train", suffix: str = ".tfrecord") -> list[Path]:
    ds = packer.open(path)
    return [path / split / f"{s['name']}{suffix}" for s in ds[split].shards]


def parse_with_tensorflow(files: list[Path], compression: str = "") -> dict[str, np.ndarray]:
    """Every record of `files`, in order, parsed and decoded by TensorFlow alone."""
    images, masks = [], []
    for example in tf.data.TFRecordDataset([str(f) for f in files], compression):
        parsed = tf.io.parse_single_example(example, SEG_SPEC)
        shape = [int(parsed[k]) for k in ("image/height", "image/width", "image/channels")]
        images.append(tf.reshape(tf.io.decode_raw(parsed["image/raw"], tf.uint8), shape))
        masks.append(tf.reshape(tf.io.decode_raw(parsed["mask/raw"], tf.uint8), shape[:2]))
    return {"images": np.stack(images), "masks": np.stack(masks)}


def read_independently(
    files: list[Path], tmp_path: Path, keys: list[str], index: bool = False, compression=None
) -> dict[str, list]:
    """Records (feature -> bytes or int64 list) read by the `tfrecord` package, with its indexes."""
    out = tmp_path / "independent.pickle"
    job = {"files": [str(f) for f in files], "keys": keys, "index": index, "out": str(out)}
    job["compression"] = compression
    subprocess.run([sys.executable, "-c", INDEPENDENT, json.dumps(job)], check=True)
    return pickle.loads(out.read_bytes())


def test_writer_never_imports_tensorflow():
    code = "import sys, packer.formats.tfrecord; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_example_and_framing_are_byte_identical_to_tensorflow(tmp_path):
    pixels = np.arange(60, dtype=np.uint8)
    features = {
        "image/raw": fmt.bytes_feature(memoryview(pixels)),
        "image/class/label": fmt.int64_feature([300]),
        "image/height": fmt.int64_feature([-2]),
    }
    ours = b"".join(bytes(p) for p in fmt.encode_example(features))
    theirs = tf.train.Example(
        features=tf.train.Features(
            feature={
                "image/raw": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[pixels.tobytes()])
                ),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[300])),
                "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[-2])),
            }
        )
    ).SerializeToString(deterministic=True)
    assert ours == theirs
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        writer.write(theirs)
    assert b"".join(bytes(p) for p in fmt.frame([ours])) == (tmp_path / "tf.tfrecord").read_bytes()
    fields = fmt.decode_example(ours, 0, len(ours))
    kind, start, stop = fields["image/raw"]
    assert kind == 1 and ours[start:stop] == pixels.tobytes()
    assert fmt.int64_values(ours, *fields["image/height"][1:]) == [-2]
    assert fmt.int64_values(ours, *fields["image/class/label"][1:]) == [300]


def test_layout_manifest_and_shard_boundaries_match_the_npy_pack(seg):
    npy, tfr = seg
    a, b = packer.open(npy), packer.open(tfr)
    assert b.format == "tfrecord" and b.fields == a.fields
    assert b.manifest["options"]["compression"] == "none" and b.manifest["options"]["index"]
    assert len(b["train"].shards) == 3
    for split in ("train", "val"):
        assert [(s["name"], s["count"]) for s in b[split].shards] == [
            (s["name"], s["count"]) for s in a[split].shards
        ]
        for shard in b[split].shards:
            paths = [f["path"] for f in shard["files"]]
            stem = f"{split}/{shard['name']}"
            assert paths == [f"{stem}.tfrecord", f"{stem}.idx", f"{stem}.sources.json"]
            assert all((tfr / f["path"]).stat().st_size == f["bytes"] for f in shard["files"])
        assert [b[split].source(i) for i in range(b[split].count)] == [
            a[split].source(i) for i in range(a[split].count)
        ]


def test_tensorflow_parses_every_record_back_to_the_npy_pixels(seg):
    npy, tfr = seg
    for split in ("train", "val"):
        expected = everything(npy, split)
        offset = 0
        for path in record_files(tfr, split):  # shard by shard: identical boundaries
            parsed = parse_with_tensorflow([path])
            count = len(parsed["images"])
            for name in ("images", "masks"):
                assert np.array_equal(parsed[name], expected[name][offset : offset + count])
            offset += count
        assert offset == len(expected["images"])


def test_independent_reader_and_dali_index(seg, tmp_path):
    npy, tfr = seg
    expected = everything(npy)
    files = record_files(tfr)
    keys = ["image/raw", "mask/raw", "image/width"]
    found = read_independently(files, tmp_path, keys, index=True)
    for path, theirs in zip(files, found["indexes"], strict=True):
        ours = path.with_suffix(".idx").read_bytes()  # DALI's tfrecord2idx algorithm, same bytes
        assert ours == theirs
        lines = [tuple(map(int, line.split(" "))) for line in ours.decode().splitlines()]
        assert lines[0][0] == 0 and sum(size for _, size in lines) == path.stat().st_size
    records = found["records"]
    assert [r["image/width"] for r in records] == [[SIZE[0]]] * len(records)
    assert [r["image/raw"] for r in records] == [x.tobytes() for x in expected["images"]]
    assert [r["mask/raw"] for r in records] == [x.tobytes() for x in expected["masks"]]


def test_classification_labels_are_int64(cls, tmp_path):
    npy, tfr = cls
    expected = everything(npy)
    found = read_independently(record_files(tfr), tmp_path, ["image/class/label"])
    labels = [r["image/class/label"][0] for r in found["records"]]
    assert labels == expected["labels"].tolist()
    got = everything(tfr)
    assert got["labels"].dtype == np.int32 and np.array_equal(got["labels"], expected["labels"])
    assert np.array_equal(got["images"], expected["images"])


def test_masks_above_255_are_little_endian_uint16(seg, seg_src, tmp_path):
    npy, _ = seg
    out = tmp_path / "u16"
    packer.pack(seg_src, out=out, format="tfrecord", size=SIZE, ignore_index=1000)
    assert packer.open(out).field("masks").dtype == "<u2"
    spec = {"mask/raw": tf.io.FixedLenFeature([], tf.string)}
    masks = [
        tf.io.decode_raw(tf.io.parse_single_example(r, spec)["mask/raw"], tf.uint16).numpy()
        for r in tf.data.TFRecordDataset([str(p) for p in record_files(out)])
    ]
    expected = everything(npy)["masks"]  # every colour is a class: ids equal the uint8 pack's
    assert np.array_equal(np.stack(masks).reshape(expected.shape), expected)
    assert np.array_equal(everything(out)["masks"], expected)


def test_random_access_reads_like_the_npy_pack(seg):
    npy, tfr = seg
    order = np.random.default_rng(3).permutation(14)[:9]
    a, b = (
        packer.open(npy)["train"].reader.read(order),
        packer.open(tfr)["train"].reader.read(order),
    )
    assert all(np.array_equal(a[k], b[k]) for k in ("images", "masks"))
    seq_a = PackedSequence(npy, batch_size=4, seed=5)
    seq_b = PackedSequence(tfr, batch_size=4, seed=5)
    for i in range(len(seq_a)):
        assert all(np.array_equal(x, y) for x, y in zip(seq_a[i], seq_b[i], strict=True))


def test_one_corrupted_byte_is_a_data_loss(seg, tmp_path):
    _, tfr = seg
    copy = tmp_path / "copy"
    shutil.copytree(tfr, copy)
    path = record_files(copy)[1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record"):
        list(tf.data.TFRecordDataset(str(path)))
    with pytest.raises(tf.errors.DataLossError):
        list(packer.tf.dataset(copy, batch_size=4, shuffle=False, stream=True))
    with pytest.raises(tf.errors.OpError, match=rf"{path.name}: record \d+ is corrupted"):
        list(packer.tf.dataset(copy, batch_size=4, shuffle=False))  # packer's shard reader
    with pytest.raises(OSError, match=rf"{path.name}: record \d+ is corrupted"):
        packer.open(copy)["train"].reader.read(np.arange(14))


def test_gzip_is_deterministic_and_read_by_every_reader(seg, seg_src, tmp_path, monkeypatch):
    npy, tfr = seg
    monkeypatch.setattr(plan, "CHUNK_BYTES", 2 * 32 * 24 * 4)  # several gzip members per shard
    outs = [tmp_path / "w1", tmp_path / "w2"]
    for workers, out in zip((1, 2), outs, strict=True):
        packer.pack(
            seg_src,
            out=out,
            format="tfrecord",
            size=SIZE,
            shard_size=SHARD,
            compression="gzip",
            workers=workers,
        )
    assert manifest_hashes(outs[0]) == manifest_hashes(outs[1])
    files = record_files(outs[0], suffix=".tfrecord.gz")
    for gz, plain in zip(files, record_files(tfr), strict=True):
        assert gz.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime
        assert gzip.decompress(gz.read_bytes()) == plain.read_bytes()
    expected = everything(npy)
    parsed = parse_with_tensorflow(files, "GZIP")
    assert all(np.array_equal(parsed[k], expected[k]) for k in ("images", "masks"))
    found = read_independently(files, tmp_path, ["mask/raw"], compression="gzip")
    assert [r["mask/raw"] for r in found["records"]] == [m.tobytes() for m in expected["masks"]]
    streamed = packer.tf.dataset(outs[0], batch_size=4, shuffle=False)
    assert np.array_equal(np.concatenate([x for x, _ in streamed]), expected["images"])
    with pytest.raises(ValueError, match=r"packer\.tf\.dataset"):
        packer.open(outs[0])["train"].reader  # noqa: B018


def test_options_are_checked():
    with pytest.raises(PackError, match="DALI"):
        packer.packing.make_plan("unused", format="tfrecord", compression="gzip", index=True)
    with pytest.raises(PackError, match="compression"):
        packer.packing.make_plan("unused", format="tfrecord", compression="zstd")

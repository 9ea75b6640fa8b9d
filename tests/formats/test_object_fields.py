"""Object fields stored in all three formats: the same targets back from each; TensorFlow
parses our TFRecords with the Object Detection API's keys; MXNet's detection label and the npy
values + offsets parsed independently; the same bytes whatever the worker count."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import packer
from tests.fixtures.detection import make_detection_coco
from tests.fixtures.packs import manifest_hashes

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
SIZE = (36, 28)


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fmt")
    src = make_detection_coco(root / "coco")
    return {
        fmt: packer.pack(src, out=root / fmt, format=fmt, size=SIZE, task="instances").root
        for fmt in ("npy", "tfrecord", "recordio")
    }


def targets(path: Path, split: str = "train") -> list[dict]:
    part = packer.open(path)[split]
    return [part[i][1] for i in range(part.count)]


def test_every_format_gives_the_same_targets(packs):
    reference = targets(packs["npy"])
    assert sum(len(t["labels"]) for t in reference) > 10
    for fmt in ("tfrecord", "recordio"):
        for want, got in zip(reference, targets(packs[fmt]), strict=True):
            assert set(got) == set(want)
            np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-4)
            for key in ("labels", "iscrowd", "difficult", "masks"):
                np.testing.assert_array_equal(got[key], want[key])
                assert got[key].dtype == want[key].dtype


def test_tensorflow_parses_the_object_detection_api_keys(packs):
    import tensorflow as tf

    path = packs["tfrecord"]
    manifest = json.loads((path / "dataset.json").read_text())
    names = [c["name"] for c in manifest["classes"]]
    shard = manifest["splits"]["train"]["shards"][0]
    record = path / next(f["path"] for f in shard["files"] if f["path"].endswith(".tfrecord"))
    spec = {
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        **{
            f"image/object/bbox/{k}": tf.io.VarLenFeature(tf.float32)
            for k in ("xmin", "ymin", "xmax", "ymax")
        },
        "image/object/class/label": tf.io.VarLenFeature(tf.int64),
        "image/object/class/text": tf.io.VarLenFeature(tf.string),
        "image/object/is_crowd": tf.io.VarLenFeature(tf.int64),
        "image/object/difficult": tf.io.VarLenFeature(tf.int64),
        "image/object/mask": tf.io.VarLenFeature(tf.string),
    }
    expected = targets(path)
    width, height = SIZE
    for i, serialized in enumerate(tf.data.TFRecordDataset(str(record))):
        parsed = tf.io.parse_single_example(serialized, spec)
        dense = {
            k: tf.sparse.to_dense(v).numpy() for k, v in parsed.items() if k.startswith("image/o")
        }
        want = expected[i]
        assert (parsed["image/width"].numpy(), parsed["image/height"].numpy()) == SIZE
        corners = np.stack(
            [dense[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], 1
        )
        np.testing.assert_allclose(
            corners.reshape(-1, 4) * [width, height, width, height], want["boxes"], atol=1e-4
        )
        assert (corners >= 0).all() and (corners <= 1).all()
        assert dense["image/object/class/label"].tolist() == (want["labels"] + 1).tolist()
        assert [t.decode() for t in dense["image/object/class/text"]] == [
            names[k] for k in want["labels"]
        ]
        assert dense["image/object/is_crowd"].tolist() == want["iscrowd"].tolist()
        pngs = [tf.io.decode_png(p).numpy()[..., 0] for p in dense["image/object/mask"]]
        np.testing.assert_array_equal(np.array(pngs).reshape(want["masks"].shape), want["masks"])


def mxnet_records(rec: Path, idx: Path) -> list[tuple[int, np.ndarray, bytes]]:
    """An independent parse: .idx offsets, dmlc-core's chunk header (magic, cflag << 29 |
    length), MXNet's IRHeader <IfQQ, then `flag` float32 labels and the payload."""
    data = rec.read_bytes()
    records = []
    for line in idx.read_text().splitlines():
        offset = int(line.split("\t")[1])
        magic, lrecord = struct.unpack_from("<II", data, offset)
        assert magic == 0xCED7230A and lrecord >> 29 == 0  # our small records are one chunk
        body = data[offset + 8 : offset + 8 + (lrecord & (1 << 29) - 1)]
        flag, label, key, _ = struct.unpack_from("<IfQQ", body)
        values = np.frombuffer(body, "<f4", flag, 24)
        assert label == 0  # MXNet's pack() zeroes it when the label is an array
        records.append((key, values, body[24 + 4 * flag :]))
    return records


def test_recordio_holds_mxnets_detection_label(packs):
    path = packs["recordio"]
    shard = packer.open(path)["train"].shards[0]["name"]
    parsed = mxnet_records(path / "train" / f"{shard}.rec", path / "train" / f"{shard}.idx")
    width, height = SIZE
    for (_, values, payload), want in zip(parsed, targets(path), strict=True):
        count, plane, magic = struct.unpack_from("<II4s", payload, len(payload) - 12)
        assert magic == b"PKOB" and count == len(want["labels"])
        rows = np.frombuffer(payload, np.uint8, count * plane, len(payload) - 12 - count * plane)
        bits = np.unpackbits(rows.reshape(count, plane), axis=1, count=height * width)
        np.testing.assert_array_equal(bits.reshape(want["masks"].shape), want["masks"])
        assert values[:2].tolist() == [2, 7]  # header width, object width
        table = values[2:].reshape(-1, 7)
        assert table[:, 0].tolist() == want["labels"].tolist()
        np.testing.assert_allclose(
            table[:, 1:5] * [width, height, width, height], want["boxes"], atol=1e-4
        )
        assert table[:, 5].tolist() == want["iscrowd"].tolist()
    assert [k for k, _, _ in parsed] == list(range(len(parsed)))


def test_npy_stores_values_and_offsets_as_memmaps(packs):
    path = packs["npy"]
    shard = packer.open(path)["train"].shards[0]["name"]
    want = targets(path)
    boxes = np.load(path / "train" / f"{shard}.boxes.npy", mmap_mode="r")
    offsets = np.load(path / "train" / f"{shard}.boxes.offsets.npy", mmap_mode="r")
    masks = np.load(path / "train" / f"{shard}.masks.npy", mmap_mode="r")
    assert isinstance(boxes, np.memmap) and offsets[0] == 0 and len(offsets) == len(want) + 1
    height, width = SIZE[1], SIZE[0]
    for i, t in enumerate(want):
        np.testing.assert_array_equal(boxes[offsets[i] : offsets[i + 1]], t["boxes"])
        rows = masks[offsets[i] : offsets[i + 1]]
        planes = np.unpackbits(rows, axis=1, count=height * width).reshape(-1, height, width)
        np.testing.assert_array_equal(planes, t["masks"])


@pytest.mark.parametrize("fmt", ["npy", "tfrecord", "recordio"])
def test_the_same_bytes_whatever_the_workers(tmp_path, fmt):
    src = make_detection_coco(tmp_path / "coco")
    one = packer.pack(src, out=tmp_path / "a", format=fmt, size=SIZE, task="instances", workers=1)
    two = packer.pack(
        src, out=tmp_path / "b", format=fmt, size=SIZE, task="instances", workers=2, shard_size=4000
    )
    three = packer.pack(src, out=tmp_path / "c", format=fmt, size=SIZE, task="instances", workers=2)
    assert manifest_hashes(one.root) == manifest_hashes(three.root)
    assert len(packer.open(two.root)["train"].shards) > 1  # smaller shards, the same samples
    for want, got in zip(targets(one.root), targets(two.root), strict=True):
        np.testing.assert_array_equal(got["masks"], want["masks"])


def test_gzip_tfrecords_stream_the_same_objects(packs, tmp_path):
    src = packer.open(packs["npy"]).manifest["source"]["root"]
    gz = packer.pack(
        src, out=tmp_path / "gz", format="tfrecord", compression="gzip", size=SIZE, task="instances"
    )
    for want, got in zip(targets(packs["npy"]), targets(gz.root), strict=True):
        np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-4)
        np.testing.assert_array_equal(got["masks"], want["masks"])
    from packer.cli.preview import save

    shown = save(gz.root, tmp_path / "grid.png", count=3)  # in file order, objects drawn
    assert shown.path.is_file() and "the first 3" in shown.text


def test_jpeg_recordio_keeps_the_objects_after_the_image(packs, tmp_path):
    src = packer.open(packs["npy"]).manifest["source"]["root"]
    jpeg = packer.pack(
        src, out=tmp_path / "j", format="recordio", encoding="jpeg", size=SIZE, task="instances"
    )
    for want, got in zip(targets(packs["npy"]), targets(jpeg.root), strict=True):
        np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-4)
        np.testing.assert_array_equal(got["masks"], want["masks"])
    image = packer.open(jpeg.root)["train"][0][0]
    assert image.shape == (SIZE[1], SIZE[0], 3)

"""Compressed image fields (`--encoding jpeg|png`) in every format, through every reader.

PNG comes back exactly; JPEG as `cv2.imdecode` of the stored bytes gives it, exactly, within
the codec's error of the raw pack; masks stay exact. Packs are byte-identical across workers;
a corrupt payload is named by file and record; images an encoding cannot store are refused in
one line naming their type.
"""

from __future__ import annotations

import itertools
import json
import pickle
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

import packer
from packer.errors import PackError
from packer.imaging import codec
from packer.reading.loader import Loader
from packer.schema import Field
from tests.fixtures.packs import manifest_hashes

FORMATS = ("npy", "tfrecord", "recordio")
QUALITY = 90
ENCODED = {"raw": {}, "jpeg": {"encoding": "jpeg", "quality": QUALITY}, "png": {"encoding": "png"}}


def pack(src: Path, out: Path, **options) -> Path:
    packer.pack(src, out=out, workers=1, **options)
    return out


def batches(path: Path, batch: int = 5) -> list[dict[str, np.ndarray]]:
    """Every batch of train, in order, through the NumPy reader (copies)."""
    loader = Loader(str(path), "train", batch, shuffle=False)
    return [{k: v.copy() for k, v in loader.read(b).items()} for b in range(len(loader))]


@pytest.fixture(scope="module")
def packs(seg_src, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """The segmentation source packed raw, as JPEG (q90) and as PNG, in every format."""
    root = tmp_path_factory.mktemp("compressed")
    found = {}
    for fmt in FORMATS:
        for encoding, options in ENCODED.items():
            found[fmt, encoding] = pack(seg_src, root / f"{fmt}-{encoding}", format=fmt, **options)
    return found


def stored_jpegs(path: Path) -> list[bytes]:
    """The payloads an npy pack stores for train's images, in order."""
    shard = json.loads((path / "dataset.json").read_text())["splits"]["train"]["shards"][0]
    values = np.load(path / "train" / f"{shard['name']}.images.npy")
    offsets = np.load(path / "train" / f"{shard['name']}.images.offsets.npy")
    return [values[a:b].tobytes() for a, b in itertools.pairwise(offsets)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_png_comes_back_exactly_and_jpeg_within_the_codec(packs, fmt):
    raw = batches(packs[fmt, "raw"])
    for got, want in zip(batches(packs[fmt, "png"]), raw, strict=True):
        assert np.array_equal(got["images"], want["images"])
        assert np.array_equal(got["masks"], want["masks"])
    for got, want in zip(batches(packs[fmt, "jpeg"]), raw, strict=True):
        assert np.array_equal(got["masks"], want["masks"])  # masks stay exact
        for image, raw_image in zip(got["images"], want["images"], strict=True):
            # exactly OpenCV's JPEG round trip of the raw pixels: the codec's error, no more
            again = codec.decode(codec.encode(raw_image, "jpeg", QUALITY), image.shape, "|u1")
            assert np.array_equal(image, again)


def test_jpeg_reads_exactly_as_opencv_decodes_the_stored_bytes(packs):
    payloads = stored_jpegs(packs["npy", "jpeg"])
    assert all(p[:2] == b"\xff\xd8" for p in payloads)  # JPEG's SOI marker
    expected = np.stack([cv2.imdecode(np.frombuffer(p, np.uint8), cv2.IMREAD_COLOR_RGB)
                         for p in payloads])  # fmt: skip
    got = np.concatenate([b["images"] for b in batches(packs["npy", "jpeg"])])
    assert np.array_equal(got, expected)
    for fmt in ("tfrecord", "recordio"):  # the same encoder: the same bytes, the same pixels
        other = np.concatenate([b["images"] for b in batches(packs[fmt, "jpeg"])])
        assert np.array_equal(other, expected), fmt


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_reader_decodes_the_same_batches(packs, fmt):
    from packer.keras import PackedSequence

    path = packs[fmt, "jpeg"]
    expected = batches(path)
    sequence = PackedSequence(str(path), "train", 5, shuffle=False)
    tf_batches = list(packer.tf.dataset(str(path), "train", 5, shuffle=False))
    for b, want in enumerate(expected):
        for images, masks in (sequence[b], (t.numpy() for t in tf_batches[b])):
            assert np.array_equal(images, want["images"])
            assert np.array_equal(masks, want["masks"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_torch_workers_decode_into_their_slots(packs, fmt):
    torch = pytest.importorskip("torch")
    from packer.torch import PackedDataset

    path = packs[fmt, "jpeg"]
    expected = batches(path)
    for workers in (0, 2):
        dataset = PackedDataset(str(path), "train", 5, shuffle=False)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers)
        got = list(loader)
        assert len(got) == len(expected)
        for (images, masks), want in zip(got, expected, strict=True):
            assert np.array_equal(images.numpy(), want["images"]), workers
            assert np.array_equal(masks.numpy(), want["masks"]), workers


def test_packed_sequence_workers_decode_the_same(packs):
    from packer.keras import PackedSequence

    path = packs["npy", "jpeg"]
    expected = batches(path)
    sequence = PackedSequence(str(path), "train", 5, shuffle=False, workers=2)
    for b, want in enumerate(expected):
        images, masks = sequence[b]
        assert np.array_equal(images, want["images"])
        assert np.array_equal(masks, want["masks"])


def test_gzip_tfrecord_decodes_in_graph_within_the_codec(seg_src, tmp_path, packs):
    path = pack(seg_src, tmp_path / "gz", format="tfrecord", encoding="jpeg",
                quality=QUALITY, compression="gzip")  # fmt: skip
    expected = np.concatenate([b["images"] for b in batches(packs["npy", "jpeg"])])
    got = [x.numpy() for x, _ in packer.tf.dataset(str(path), "train", 5, shuffle=False)]
    got = np.concatenate(got)
    assert got.shape == expected.shape
    assert np.abs(got.astype(int) - expected.astype(int)).mean() < 1  # TF's libjpeg vs OpenCV's


@pytest.mark.parametrize("fmt", FORMATS)
def test_compressed_packs_are_byte_identical_across_workers(seg_src, tmp_path, fmt):
    one = pack(seg_src, tmp_path / "one", format=fmt, encoding="jpeg", quality=QUALITY)
    packer.pack(seg_src, out=tmp_path / "two", format=fmt, encoding="jpeg", quality=QUALITY,
                workers=2)  # fmt: skip
    assert manifest_hashes(one) == manifest_hashes(tmp_path / "two")


def test_the_manifest_says_the_encoding_on_the_image_field_only(packs):
    data = json.loads((packs["npy", "jpeg"] / "dataset.json").read_text())
    fields = {f["name"]: f for f in data["fields"]}
    assert fields["images"]["encoding"] == "jpeg"
    assert "encoding" not in fields["masks"]
    assert data["options"]["quality"] == QUALITY
    assert data["options"]["encoder"] == codec.BACKEND
    raw = json.loads((packs["npy", "raw"] / "dataset.json").read_text())
    assert all("encoding" not in f for f in raw["fields"])
    assert "encoding" not in raw["options"]  # npy records it only when given


def test_a_field_keeps_its_encoding_through_json_and_pickle():
    field = Field("images", (4, 6, 3), "|u1", kind="image", encoding="png")
    assert Field.from_json(field.to_json()) == field
    assert pickle.loads(pickle.dumps(field)) == field
    assert "encoding" not in Field("images", (4, 6, 3), "|u1").to_json()


def test_an_old_recordio_manifest_with_options_encoding_reads_the_same(packs, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(packs["recordio", "jpeg"], old)
    manifest = json.loads((old / "dataset.json").read_text())
    for field in manifest["fields"]:
        field.pop("encoding", None)  # as written before fields had encodings
    (old / "dataset.json").write_text(json.dumps(manifest))
    for got, want in zip(batches(old), batches(packs["recordio", "jpeg"]), strict=True):
        assert np.array_equal(got["images"], want["images"])


def corrupt_first_payload(path: Path, fmt: str) -> Path:
    """Overwrite the start of train's record 1 image payload; return the file changed."""
    shard = json.loads((path / "dataset.json").read_text())["splits"]["train"]["shards"][0]
    if fmt == "npy":
        offsets = np.load(path / "train" / f"{shard['name']}.images.offsets.npy")
        target = path / "train" / f"{shard['name']}.images.npy"
        data = bytearray(target.read_bytes())
        start = 128 + int(offsets[1])
        data[start : start + 64] = bytes(64)
    else:
        target = path / "train" / f"{shard['name']}.tfrecord"
        data = bytearray(target.read_bytes())
        start = data.index(b"\xff\xd8", data.index(b"\xff\xd8") + 2)  # record 1's SOI
        data[start : start + 64] = bytes(64)
    target.write_bytes(bytes(data))
    return target


@pytest.mark.parametrize("fmt", ["npy", "tfrecord"])
def test_a_corrupt_payload_is_named_by_verify_and_by_the_reader(packs, tmp_path, fmt):
    path = tmp_path / fmt
    shutil.copytree(packs[fmt, "jpeg"], path)
    target = corrupt_first_payload(path, fmt)
    from packer.cli.verify import verify

    problems = verify(path)
    assert len(problems) == 1 and str(target) in problems[0]
    assert "record 1" in problems[0]
    with pytest.raises((ValueError, OSError), match=rf"{target.name}: record 1"):
        batches(path, batch=14)


@pytest.mark.parametrize("fmt", ["npy", "tfrecord"])
def test_images_an_encoding_cannot_store_are_refused_naming_their_type(seg_src, tmp_path, fmt):
    with pytest.raises(PackError, match="float32 with 3 band"):
        pack(seg_src, tmp_path / "f", format=fmt, encoding="jpeg", dtype="float32")
    with pytest.raises(PackError, match=r"uint16 with 3 band.*or png"):
        pack(seg_src, tmp_path / "u", format=fmt, encoding="jpeg", dtype="uint16")


def test_png_stores_16_bit_and_jpeg_grey_images(seg_src, tmp_path):
    wide = pack(seg_src, tmp_path / "wide", encoding="png", dtype="uint16")
    raw = pack(seg_src, tmp_path / "wide-raw", dtype="uint16")
    for got, want in zip(batches(wide), batches(raw), strict=True):
        assert got["images"].dtype == np.uint16
        assert np.array_equal(got["images"], want["images"])
    grey = pack(seg_src, tmp_path / "grey", encoding="jpeg", channels="grey")
    images = np.concatenate([b["images"] for b in batches(grey)])
    assert images.shape[-1] == 1
    payload = stored_jpegs(grey)[0]
    first = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_GRAYSCALE)
    assert np.array_equal(images[0, ..., 0], first)


def test_the_codec_refuses_what_it_cannot_store():
    with pytest.raises(ValueError, match="images are int8 with 3 band"):
        codec.check("jpeg", "images", "|i1", (4, 6, 3))
    with pytest.raises(ValueError, match="2 band"):
        codec.check("png", "images", "|u1", (4, 6, 2))
    codec.check("png", "images", "<u2", (4, 6, 1))
    out = np.empty((4, 6, 3), np.uint8)
    with pytest.raises(codec.CodecError, match="do not decode"):
        codec.decode_into(b"not an image", out)
    with pytest.raises(codec.CodecError, match=r"decodes to uint8 \[4, 6, 3\].*\[5, 6, 3\]"):
        codec.decode_into(codec.encode(out, "png", 90), np.empty((5, 6, 3), np.uint8))
    grey = codec.encode(out[..., 0], "png", 90)  # OpenCV's RGB flag would make it 3 bands
    with pytest.raises(codec.CodecError, match="colour type 0, the manifest says 3 band"):
        codec.decode_into(grey, out)
    with pytest.raises(codec.CodecError, match="colour type 2, the manifest says 1 band"):
        codec.decode_into(codec.encode(out, "png", 90), np.empty((4, 6, 1), np.uint8))


def test_jpeg_decodes_as_opencv_and_refuses_what_opencv_refuses():
    """libjpeg-turbo through imagecodecs decodes JPEG payloads: OpenCV's pixels, and a cut,
    garbled or misshapen payload is a CodecError, as OpenCV's path makes it."""
    rng = np.random.default_rng(3)
    picture = cv2.GaussianBlur(rng.integers(0, 256, (24, 32, 3), np.uint8), (5, 5), 0)
    payload = codec.encode(picture, "jpeg", QUALITY)
    out = np.empty((24, 32, 3), np.uint8)
    codec.decode_into(payload, out)
    want = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR_RGB)
    assert np.array_equal(out, want)
    grey = codec.encode(picture[..., 0], "jpeg", QUALITY)
    band = np.empty((24, 32, 1), np.uint8)
    codec.decode_into(grey, band)
    assert np.array_equal(band[..., 0], cv2.imdecode(np.frombuffer(grey, np.uint8), 0))
    assert cv2.imdecode(np.frombuffer(payload[:-200], np.uint8), cv2.IMREAD_COLOR_RGB) is None
    with pytest.raises(codec.CodecError, match="cut short"):
        codec.decode_into(payload[:-200], out)
    with pytest.raises(codec.CodecError, match="do not decode as JPEG"):
        codec.decode_into(payload[:2] + bytes(100) + payload[-2:], out)
    with pytest.raises(codec.CodecError, match=r"decodes to uint8 \[24, 32, 3\].*\[24, 32\]"):
        codec.decode_into(payload, np.empty((24, 32), np.uint8))


def test_a_jpeg_lands_in_a_strided_row_and_a_colour_one_never_turns_grey():
    """Rows that are views (a band of a wider array, every other column) take the same
    pixels, and a colour JPEG is refused by a one-band row whatever its layout, never
    converted to grey on the way."""
    rng = np.random.default_rng(4)
    picture = cv2.GaussianBlur(rng.integers(0, 256, (24, 32, 3), np.uint8), (5, 5), 0)
    payload = codec.encode(picture, "jpeg", QUALITY)
    want = np.empty((24, 32, 3), np.uint8)
    codec.decode_into(payload, want)
    strided = np.zeros((24, 64, 3), np.uint8)[:, ::2]
    codec.decode_into(payload, strided)
    assert np.array_equal(strided, want)
    one_band = np.zeros((24, 32, 2), np.uint8)[..., :1]  # not contiguous
    with pytest.raises(codec.CodecError, match=r"decodes to uint8 \[24, 32, 3\].*\[24, 32, 1\]"):
        codec.decode_into(payload, one_band)


@pytest.mark.parametrize("fmt", FORMATS)
def test_python_samples_take_the_encoding_too(tmp_path, fmt):
    rng = np.random.default_rng(3)
    samples = []
    for i in range(4):
        path = tmp_path / f"rgb_{i}.png"
        cv2.imwrite(str(path), rng.integers(0, 256, (30, 40, 3), np.uint8))
        samples.append({"images": str(path), "labels": ["dog", "cat"][i % 2]})
    raw = tmp_path / "raw"
    packer.pack(samples, out=raw, format=fmt, progress=False)
    png = tmp_path / "png"
    packer.pack(samples, out=png, format=fmt, encoding="png", progress=False)
    fields = json.loads((png / "dataset.json").read_text())["fields"]
    assert [f.get("encoding") for f in fields] == ["png", None]
    for got, want in zip(batches(png, 2), batches(raw, 2), strict=True):
        assert np.array_equal(got["images"], want["images"])
        assert np.array_equal(got["labels"], want["labels"])


def test_bench_names_the_decoder_of_each_encoding(packs):
    from packer.cli import bench

    result = bench.run(packs["npy", "jpeg"], batch_size=4, seconds=0.05)
    assert result.decoder.startswith("images (jpeg) decoded by libjpeg-turbo (imagecodecs ")
    assert "opencv" in bench.run(packs["npy", "png"], batch_size=4, seconds=0.05).decoder

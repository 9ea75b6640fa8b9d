"""Kept as the source has it, through the pack and back: 16-bit PNG, uint16 4- and 12-band TIFF,
float32 TIFF, 8-bit grey kept 1-band when asked, and 16-bit index masks with classes 256 and 300
round-trip exactly in every format and through every reader; images that differ are refused in
one line; a pack that packs nothing exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile
from click.testing import CliRunner

import packer
import packer.keras
import packer.packing
import packer.tf
import packer.torch
from packer.cli import pack_command
from packer.errors import ImageKindError, PackError

FORMATS = ("npy", "tfrecord", "recordio")
SIZE = (10, 7)  # W, H: every source image's, so that packs keep them at identity geometry


def write_png(path: Path, array: np.ndarray) -> None:
    if array.ndim == 3 and array.shape[2] in (3, 4):
        array = array[..., [2, 1, 0, 3][: array.shape[2]]]
    assert cv2.imwrite(str(path), array)


def write_tiff(path: Path, array: np.ndarray) -> None:
    contig = {"planarconfig": "contig"} if array.ndim == 3 else {}
    tifffile.imwrite(path, array, photometric="minisblack", **contig)


def kind_source(root: Path, name: str, seed: int) -> dict[str, np.ndarray]:
    """Three images of one kind in one class folder; returns relative path -> stored array."""
    rng = np.random.default_rng(seed)
    width, height = SIZE
    makers = {
        "grey16.png": lambda: rng.integers(500, 4120, (height, width), dtype=np.uint16),
        "rgb16.png": lambda: rng.integers(0, 65536, (height, width, 3), dtype=np.uint16),
        "grey8.png": lambda: rng.integers(0, 256, (height, width), dtype=np.uint8),
        "rgbn16.tif": lambda: rng.integers(0, 65536, (height, width, 4), dtype=np.uint16),
        "bands12.tif": lambda: rng.integers(0, 65536, (height, width, 12), dtype=np.uint16),
        "float32.tif": lambda: rng.normal(0, 100, (height, width)).astype(np.float32),
    }
    (root / "things").mkdir(parents=True)
    stored = {}
    for i in range(3):
        array = makers[name]()
        rel = f"things/{i}{Path(name).suffix}"
        (write_tiff if rel.endswith(".tif") else write_png)(root / rel, array)
        stored[rel] = array if array.ndim == 3 else array[..., None]
    return stored


KINDS = {  # source kind -> pack options
    "grey16.png": {},
    "rgb16.png": {},
    "grey8.png": {"channels": 1},
    "rgbn16.tif": {},
    "bands12.tif": {},
    "float32.tif": {},
}


@pytest.fixture(scope="module")
def kept_packs(tmp_path_factory) -> dict[str, tuple[dict, dict[str, Path]]]:
    """Per source kind: its stored arrays and its pack in each format."""
    found = {}
    for n, (name, options) in enumerate(KINDS.items()):
        root = tmp_path_factory.mktemp(name.replace(".", "-"))
        stored = kind_source(root / "src", name, n)
        packs = {}
        for fmt in FORMATS:
            packs[fmt] = root / fmt
            packer.pack(root / "src", out=packs[fmt], format=fmt, workers=1, **options)
        found[name] = (stored, packs)
    return found


def by_source(path: Path, images: np.ndarray, root: Path) -> dict[str, np.ndarray]:
    """The packed images of split train, keyed by their source path relative to `root`."""
    split = packer.open(path)["train"]
    return {str(Path(split.source(i)).relative_to(root)): images[i] for i in range(split.count)}


@pytest.mark.parametrize("name", list(KINDS))
def test_packs_keep_every_kind_exactly_in_every_format(kept_packs, name):
    stored, packs = kept_packs[name]
    first = next(iter(stored.values()))
    for fmt, path in packs.items():
        ds = packer.open(path)
        image_field = ds.manifest["fields"][0]
        assert image_field["dtype"] == first.dtype.str and image_field["shape"] == list(first.shape)
        split = ds["train"]
        images = split.reader.read(np.arange(split.count))["images"]
        got = by_source(path, images, path.parent / "src")
        assert got.keys() == stored.keys(), fmt
        for rel, array in stored.items():
            assert np.array_equal(got[rel], array), (fmt, rel)
        mean = np.stack(list(stored.values())).reshape(-1, first.shape[2]).astype(np.float64)
        # per band, over every row (images under 64 rows)
        assert np.allclose(ds.manifest["stats"]["mean"], mean.mean(axis=0), atol=1e-3)
        assert np.allclose(ds.manifest["stats"]["std"], mean.std(axis=0), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name", list(KINDS))
def test_every_reader_yields_the_stored_kind(kept_packs, name):
    _, packs = kept_packs[name]
    for fmt, path in packs.items():
        split = packer.open(path)["train"]
        expected = split.reader.read(np.arange(split.count))["images"]
        dtype = expected.dtype
        keras_images, _ = packer.keras.PackedSequence(path, batch_size=3, shuffle=False)[0]
        tf_images, _ = next(iter(packer.tf.dataset(path, batch_size=3, shuffle=False)))
        torch_images, _ = next(iter(packer.torch.PackedDataset(path, batch_size=3, shuffle=False)))
        for reader, images in (
            ("keras", keras_images),
            ("tf", tf_images.numpy()),
            ("torch", torch_images.numpy()),
        ):
            assert images.dtype == dtype and np.array_equal(images, expected), (fmt, reader)
        unit, _ = packer.keras.PackedSequence(path, batch_size=3, shuffle=False, normalize="unit")[
            0
        ]
        scale = 1.0 if dtype.kind == "f" else np.iinfo(dtype).max
        assert np.allclose(unit, expected.astype(np.float64) / scale, rtol=1e-6)
        tf_unit, _ = next(
            iter(packer.tf.dataset(path, batch_size=3, shuffle=False, normalize="unit"))
        )
        assert np.allclose(tf_unit.numpy(), unit, rtol=1e-6)


def test_torch_workers_hand_over_kept_images(kept_packs):
    import torch

    _, packs = kept_packs["bands12.tif"]
    path = packs["npy"]
    split = packer.open(path)["train"]
    expected = split.reader.read(np.arange(split.count))["images"]
    dataset = packer.torch.PackedDataset(path, batch_size=3, shuffle=False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1)
    images, _ = next(iter(loader))
    assert images.dtype == torch.uint16 and np.array_equal(images.numpy(), expected)


def index_masks(root: Path, values: list[int], count: int = 3, seed: int = 0) -> dict:
    """images/ + masks/ with 16-bit index masks holding `values`; mask arrays by image stem."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    masks = {}
    width, height = SIZE
    for i in range(count):
        write_png(root / "images" / f"{i}.png", rng.integers(0, 256, (height, width, 3), np.uint8))
        mask = rng.choice(np.array(values, np.uint16), (height, width))
        write_png(root / "masks" / f"{i}.png", mask)
        masks[f"images/{i}.png"] = mask
    return masks


def test_sixteen_bit_index_masks_keep_classes_256_and_300(tmp_path):
    masks = index_masks(tmp_path / "src", [0, 1, 256, 300])
    for fmt in FORMATS:
        ds = packer.pack(tmp_path / "src", out=tmp_path / fmt, format=fmt, workers=1)
        assert ds.manifest["fields"][1]["dtype"] == "<u2"
        assert len(ds.classes) == 301 and ds.manifest["ignore_index"] == 65535
        pixels = ds.manifest["stats"]["class_pixels"]
        assert {k for k, v in pixels.items() if v} == {
            "class_0",
            "class_1",
            "class_256",
            "class_300",
        }
        split = ds["train"]
        got = by_source(
            tmp_path / fmt, split.reader.read(np.arange(split.count))["masks"], tmp_path / "src"
        )
        for rel, mask in masks.items():
            assert np.array_equal(got[rel], mask), (fmt, rel)
    expected = split.reader.read(np.arange(split.count))["masks"]
    _, tf_masks = next(iter(packer.tf.dataset(tmp_path / "npy", batch_size=3, shuffle=False)))
    _, torch_masks = next(
        iter(packer.torch.PackedDataset(tmp_path / "npy", batch_size=3, shuffle=False))
    )
    assert np.array_equal(tf_masks.numpy(), expected)
    assert np.array_equal(torch_masks.numpy(), expected)


def test_depth_maps_as_masks_are_kept_not_wrapped(tmp_path):
    """An image + 16-bit depth map set packed with the depth maps as masks: the values are
    kept (uint16), never taken modulo 256, and the summary says how they are read."""
    masks = index_masks(tmp_path / "src", list(range(500, 4120, 7)))
    (tmp_path / "src" / "masks").rename(tmp_path / "src" / "depth")
    ds = packer.pack(
        tmp_path / "src", out=tmp_path / "out", masks=tmp_path / "src" / "depth", workers=1
    )
    split = ds["train"]
    got = by_source(
        tmp_path / "out", split.reader.read(np.arange(split.count))["masks"], tmp_path / "src"
    )
    for rel, mask in masks.items():
        assert np.array_equal(got[rel], mask)


def test_a_later_wide_mask_value_becomes_the_ignore_index_counted(tmp_path):
    """Masks found 8-bit by the first headers: a later mask's value 300 cannot be stored, so it
    is the ignore index, counted and named (never 300 % 256 = 44)."""
    index_masks(tmp_path / "src", [0, 1, 2], count=9)
    late = np.zeros(SIZE[::-1], np.uint16)
    late[:2, :3] = 300
    write_png(tmp_path / "src" / "masks" / "8.png", late)  # the probe reads 0..7
    for i in range(8):  # 8-bit masks
        mask = cv2.imread(str(tmp_path / "src" / "masks" / f"{i}.png"), cv2.IMREAD_UNCHANGED)
        write_png(tmp_path / "src" / "masks" / f"{i}.png", mask.astype(np.uint8))
    ds = packer.pack(tmp_path / "src", out=tmp_path / "out", workers=1)
    assert ds.manifest["fields"][1]["dtype"] == "|u1"
    assert ds.manifest["unknown_labels"] == [{"path": "masks/8.png", "values": {"index 300": 6}}]
    split = ds["train"]
    got = by_source(
        tmp_path / "out", split.reader.read(np.arange(split.count))["masks"], tmp_path / "src"
    )
    assert (got["images/8.png"][:2, :3] == 255).all() and 44 not in got["images/8.png"]


def test_images_that_differ_are_refused_in_one_line_or_converted_when_asked(tmp_path):
    src = tmp_path / "src"
    kind_source(src, "rgb16.png", 0)
    rgb8 = np.full((*SIZE[::-1], 3), 200, np.uint8)
    write_png(src / "things" / "9.png", rgb8)
    with pytest.raises(ImageKindError) as caught:
        packer.pack(src, out=tmp_path / "out", workers=1)
    message = str(caught.value)
    assert "\n" not in message and "things/0.png is uint16 with 3 bands" in message
    assert "things/9.png is an 8-bit picture" in message and "dtype" in message
    ds = packer.pack(src, out=tmp_path / "converted", workers=1, dtype="uint8")
    assert ds.manifest["fields"][0]["dtype"] == "|u1" and ds.manifest["options"]["dtype"] == "uint8"
    plan = packer.packing.make_plan(src, tmp_path / "again", dtype="uint8")
    assert any("16 to 8 bits" in note for note in plan.notes)


def test_an_image_of_another_kind_past_the_probe_stops_the_pack(tmp_path):
    src = tmp_path / "src"
    (src / "things").mkdir(parents=True)
    rng = np.random.default_rng(1)
    for i in range(9):
        array = rng.integers(0, 65536, (*SIZE[::-1], 3), dtype=np.uint16)
        write_png(src / "things" / f"{i}.png", array if i < 8 else array[..., 0])
    with pytest.raises(ImageKindError, match=r"things/8\.png is uint16 with 1 band"):
        packer.pack(src, out=tmp_path / "out", workers=1)
    assert not (tmp_path / "out" / "dataset.json").exists()


def test_a_pack_of_no_sample_exits_non_zero_with_the_reason(tmp_path):
    src = tmp_path / "src" / "things"
    src.mkdir(parents=True)
    (src / "a.tif").write_bytes(b"II*\x00" + b"\x07" * 40)
    (src / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    with pytest.raises(PackError, match="nothing was packed: all 2 input"):
        packer.pack(tmp_path / "src", out=tmp_path / "out", size=8, workers=1)
    result = CliRunner().invoke(
        pack_command, [str(tmp_path / "src"), "--out", str(tmp_path / "cli"), "--size", "8"]
    )
    assert result.exit_code != 0
    assert "Error: nothing was packed: all 2 input(s) were rejected" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "cli" / "dataset.json").exists()


def test_recordio_encodings_refuse_images_that_are_not_8_bit_rgb(tmp_path):
    kind_source(tmp_path / "src", "rgbn16.tif", 2)
    with pytest.raises(PackError, match="--encoding png stores 8-bit RGB pictures"):
        packer.pack(tmp_path / "src", out=tmp_path / "out", format="recordio", encoding="png")


def test_manifest_records_conversions_only_when_asked(kept_packs):
    _, packs = kept_packs["rgb16.png"]
    options = json.loads((packs["npy"] / "dataset.json").read_text())["options"]
    assert "channels" not in options and "dtype" not in options
    _, packs = kept_packs["grey8.png"]
    assert packer.open(packs["npy"]).manifest["options"]["channels"] == 1


@pytest.mark.parametrize("name", ["bands12.tif", "float32.tif", "grey16.png"])
def test_preview_draws_every_kind(kept_packs, name, tmp_path):
    from packer.cli.preview import displayable, render

    _, packs = kept_packs[name]
    assert render(packs["npy"], count=2).mode == "RGB"
    split = packer.open(packs["npy"])["train"]
    images = split.reader.read(np.arange(split.count))["images"]
    shown = displayable(images)
    assert shown.dtype == np.uint8 and shown.shape == (*images.shape[:3], 3)

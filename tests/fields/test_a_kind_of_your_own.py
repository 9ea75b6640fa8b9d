"""A field kind defined only in the tests (tests/fixtures/field_kinds: `test_heat`, a float32
plane moved like pixels, and `test_spots`, ragged (x, y) rows moved as points) goes through
every stage with no edit elsewhere: packed from Python samples in all three formats, read by all
three readers, through their worker processes, and augmented with the images."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import packer
from tests.fixtures.field_kinds import HEAT, SPOTS

W, H = 32, 24
COUNT = 7
FORMATS = ("npy", "tfrecord", "recordio")


def _sample(folder: Path, i: int, objects: bool) -> dict:
    """Image i (random pixels), its heat = its first band as float32 plus i / 8, i % 3 spots;
    with `objects`, a box and a class id per spot (the spot is the box's centre)."""
    rng = np.random.default_rng(i)
    image = rng.integers(0, 256, (H, W, 3), np.uint8)
    path = folder / f"img_{i}.png"
    cv2.imwrite(str(path), image[..., ::-1])
    spots = np.array([[3.5 + 7 * k, 2.25 + 5 * k] for k in range(i % 3)], np.float32).reshape(-1, 2)
    sample = {"images": str(path), "heat": image[..., 0].astype(np.float32) + i / 8}
    sample["spots"] = spots
    if objects:
        sample["boxes"] = np.concatenate([spots - 2, spots + 2], axis=1).astype(np.float32)
        sample["labels"] = np.arange(len(spots), dtype=np.int32) % 2
    else:
        sample["labels"] = ["cold", "hot"][i % 2]
    return sample


KINDS = {
    False: {"images": "image", "labels": "class", "heat": HEAT.name, "spots": SPOTS.name},
    True: {
        "images": "image",
        "heat": HEAT.name,
        "spots": SPOTS.name,
        "boxes": "boxes",
        "labels": "object_class",
    },
}


@pytest.fixture(scope="module", params=[False, True], ids=["per-image", "per-object"])
def samples(request, tmp_path_factory) -> tuple[bool, list[dict]]:
    folder = tmp_path_factory.mktemp("samples")
    return request.param, [_sample(folder, i, request.param) for i in range(COUNT)]


@pytest.fixture(scope="module", params=FORMATS)
def pack(request, samples, tmp_path_factory) -> tuple[Path, bool, dict[int, dict]]:
    """The samples packed at their own size, and each packed sample's source sample by index."""
    objects, given = samples
    out = tmp_path_factory.mktemp(request.param) / "pack"
    ds = packer.pack(
        given, out=out, format=request.param, size=(W, H), fields=KINDS[objects], progress=False
    )
    split = ds["train"]
    by_index = {k: given[int(Path(split.source(k)).stem.split("_")[1])] for k in range(COUNT)}
    return out, objects, by_index


def _expected(sample: dict, objects: bool, names: tuple[str, ...]) -> dict:
    ids = {"cold": 0, "hot": 1}
    found = {"heat": sample["heat"], "spots": sample["spots"]}
    found["labels"] = sample["labels"] if objects else ids[sample["labels"]]
    if objects:
        found["boxes"] = sample["boxes"]
    return {k: v for k, v in found.items() if k in names}


def test_the_manifest_lists_the_kinds(pack):
    out, objects, _ = pack
    data = packer.open(out).manifest
    assert {f["name"]: f["kind"] for f in data["fields"]} == KINDS[objects]
    assert data["task"] == "custom"


def test_packed_sequence_and_its_workers_read_every_field_exactly(pack):
    out, objects, by_index = pack
    for workers in (0, 2):
        seq = packer.keras.PackedSequence(out, batch_size=3, shuffle=False, workers=workers)
        k = 0
        for b in range(len(seq)):
            images, targets = seq[b]
            assert set(targets) == set(KINDS[objects]) - {"images"}
            for row in range(len(images)):
                sample = by_index[k]
                np.testing.assert_array_equal(images[row, ..., 0], np.floor(sample["heat"]))
                n = len(sample["spots"])
                np.testing.assert_array_equal(targets["heat"][row], sample["heat"])
                np.testing.assert_array_equal(targets["spots"][row, :n], sample["spots"])
                assert (targets["spots"][row, n:] == -1).all()
                if objects:
                    np.testing.assert_array_equal(targets["boxes"][row, :n], sample["boxes"])
                    np.testing.assert_array_equal(targets["labels"][row, :n], sample["labels"])
                else:
                    assert targets["labels"][row] == {"cold": 0, "hot": 1}[sample["labels"]]
                k += 1
    assert k == COUNT


def test_tf_dataset_reads_every_field_exactly(pack):
    out, objects, by_index = pack
    k = 0
    for images, targets in packer.tf.dataset(out, batch_size=4, shuffle=False):
        for row in range(images.shape[0]):
            sample = by_index[k]
            n = len(sample["spots"])
            np.testing.assert_array_equal(targets["heat"][row].numpy(), sample["heat"])
            np.testing.assert_array_equal(targets["spots"][row, :n].numpy(), sample["spots"])
            if objects:
                np.testing.assert_array_equal(targets["boxes"][row, :n].numpy(), sample["boxes"])
            k += 1
    assert k == COUNT


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_through_dataloader_workers_reads_every_field_exactly(pack, workers):
    out, objects, by_index = pack
    dataset = packer.torch.PackedDataset(out, batch_size=3, shuffle=False)
    k = 0
    for images, targets in DataLoader(dataset, batch_size=None, num_workers=workers):
        assert isinstance(images, torch.Tensor) and len(targets) == len(images)
        for target in targets:
            sample = by_index[k]
            np.testing.assert_array_equal(target["heat"].numpy(), sample["heat"])
            np.testing.assert_array_equal(target["spots"].numpy(), sample["spots"])
            if objects:
                np.testing.assert_array_equal(target["boxes"].numpy(), sample["boxes"])
                np.testing.assert_array_equal(target["labels"].numpy(), sample["labels"])
            else:
                assert int(target["labels"]) == {"cold": 0, "hot": 1}[sample["labels"]]
            k += 1
    assert k == COUNT


def _moved_alike(images, heat, spots, sample, flipped_only: bool) -> None:
    """The heat moved as the image's first band (its value minus the sample's i / 8) and the
    spots as the image's pixels: mirrored when the image was, else where they were."""
    offset = sample["heat"][0, 0] - np.floor(sample["heat"][0, 0])
    band = np.asarray(images[..., 0], np.float32)
    if flipped_only:
        np.testing.assert_array_equal(np.asarray(heat) - offset, band)
    else:  # an affine warp: the float plane and the rounded uint8 band agree within a level
        assert np.abs(np.asarray(heat) - offset - band).mean() < 1.0
    original = np.floor(sample["heat"])
    expected = np.array(sample["spots"], np.float64)
    if flipped_only and not np.array_equal(band, original):
        assert np.array_equal(band, original[:, ::-1])
        expected[:, 0] = W - expected[:, 0]
    if flipped_only:
        np.testing.assert_allclose(np.asarray(spots)[: len(expected)], expected, atol=1e-4)


def test_numpy_augmentation_moves_the_new_kinds_with_the_images(pack):
    out, _, by_index = pack
    augment = packer.Augment(horizontal_flip=True, seed=3)
    seq = packer.keras.PackedSequence(out, batch_size=COUNT, shuffle=False, augment=augment)
    images, targets = seq[0]
    flips = 0
    for row in range(COUNT):
        sample = by_index[row]
        _moved_alike(images[row], targets["heat"][row], targets["spots"][row], sample, True)
        flips += not np.array_equal(images[row, ..., 0], np.floor(sample["heat"]))
    assert 0 < flips < COUNT  # both cases were seen
    rotate = packer.Augment(rotation_range=20, seed=3)
    seq = packer.keras.PackedSequence(out, batch_size=COUNT, shuffle=False, augment=rotate)
    images, targets = seq[0]
    for row in range(COUNT):
        _moved_alike(images[row], targets["heat"][row], None, by_index[row], False)


def test_tf_and_torch_augmentation_move_them_alike(pack):
    out, _, by_index = pack
    augment = packer.Augment(horizontal_flip=True, seed=3)
    images, targets = next(iter(packer.tf.dataset(out, batch_size=COUNT, augment=augment)))
    for row in range(COUNT):
        moved = (targets["heat"][row].numpy(), targets["spots"][row].numpy())
        _moved_alike(images[row].numpy(), *moved, by_index[row], True)
    dataset = packer.torch.PackedDataset(out, batch_size=COUNT, shuffle=False, augment=augment)
    images, targets = next(iter(DataLoader(dataset, batch_size=None, num_workers=2)))
    for row, target in enumerate(targets):
        moved = (target["heat"].numpy(), target["spots"].numpy())
        _moved_alike(images[row].numpy(), *moved, by_index[row], True)

"""Readers decide by the pack's fields and their kinds: packs holding kinds defined only in
the tests (`test_heat`, fixed; `test_spots`, ragged) read back exactly through the Loader,
`packer.open`, PackedSequence (0 and 2 workers), packer.parallel and packer.tf.dataset."""

from __future__ import annotations

import numpy as np
import pytest

import packer
from packer.keras import PackedSequence
from packer.reading.loader import Loader
from packer.reading.objects import PAD
from tests.fixtures.custom_fields import all_packs

MAX = 3  # max_boxes: no sample has more objects, so nothing is cut


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> dict:
    return all_packs(tmp_path_factory.mktemp("custom"))


def padded(records: list[dict], rows: np.ndarray) -> dict[str, np.ndarray]:
    """What the padded readers must yield for samples `rows`: fixed targets stacked, ragged
    fields of padded kinds `[B, MAX, *row]` padded with -1 (flags are not padded)."""
    out = {}
    for name, value in records[0].items():
        if name in ("images", "iscrowd", "difficult"):
            continue
        if name in ("boxes", "spots") or (name == "labels" and value.ndim == 1):
            table = np.full((len(rows), MAX, *value.shape[1:]), PAD, value.dtype)
            for k, i in enumerate(rows):
                table[k, : len(records[i][name])] = records[i][name]
            out[name] = table
        else:
            out[name] = np.stack([records[i][name] for i in rows])
    return out


def check_padded(records: list[dict], rows: np.ndarray, images, targets) -> None:
    np.testing.assert_array_equal(
        np.asarray(images), np.stack([records[i]["images"] for i in rows])
    )
    want = padded(records, rows)
    assert list(targets) == list(want)  # in the pack's order
    for name, values in want.items():
        got = np.asarray(targets[name])
        assert got.dtype == values.dtype, name
        np.testing.assert_array_equal(got, values, err_msg=name)


def test_targets_follow_the_kinds(packs):
    custom = Loader(packs["custom"][0], "train", 4, seed=0)
    assert custom.targets.input == "images" and custom.targets.fixed == ("labels", "heat")
    assert custom.targets.ragged == custom.targets.padded == ("spots",)
    assert custom.objects and custom.padder.names == ("spots",)
    detection = Loader(packs["detection"][0], "train", 4, seed=0)
    assert detection.targets.fixed == ("heat",)
    assert detection.padder.names == ("boxes", "labels", "spots")  # flags are not padded
    assert Loader(packs["fixed"][0], "train", 4, seed=0).targets.single is None


@pytest.mark.parametrize("name", ["custom", "detection"])
def test_loader_batches_are_per_sample_dicts_of_every_field(packs, name):
    path, records = packs[name]
    loader = Loader(path, "train", 3, seed=1)
    for index in range(len(loader)):
        rows = np.sort(loader.indices(index))
        images, targets = loader.batch(index)
        np.testing.assert_array_equal(images, np.stack([records[i]["images"] for i in rows]))
        for target, i in zip(targets, rows, strict=True):
            assert set(target) == set(records[i]) - {"images"}
            for key, value in target.items():
                np.testing.assert_array_equal(value, records[i][key], err_msg=key)


@pytest.mark.parametrize("name", ["custom", "detection", "fixed"])
def test_open_gives_each_sample_by_its_fields(packs, name):
    path, records = packs[name]
    split = packer.open(path)["train"]
    for i, record in enumerate(records):
        image, target = split[i]
        np.testing.assert_array_equal(image, record["images"])
        assert set(target) == set(record) - {"images"}
        for key, value in target.items():
            np.testing.assert_array_equal(value, record[key], err_msg=key)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", ["custom", "detection", "fixed"])
def test_packed_sequence_pads_the_ragged_and_stacks_the_fixed(packs, name, workers):
    path, records = packs[name]
    reference = Loader(path, "train", 3, seed=2)
    seq = PackedSequence(path, "train", 3, seed=2, max_boxes=MAX, workers=workers)
    try:
        for index in range(len(seq)):
            images, targets = seq[index]
            check_padded(records, np.sort(reference.indices(index)), images, targets)
    finally:
        seq.close()


def test_parallel_hands_every_field_over(packs):
    path, records = packs["detection"]
    reference = Loader(path, "train", 3, seed=3)
    fast = packer.parallel(PackedSequence(path, "train", 3, seed=3, max_boxes=MAX), workers=2)
    try:
        for index in range(len(reference)):
            images, targets = fast[index]
            check_padded(records, np.sort(reference.indices(index)), images, targets)
    finally:
        fast.close()


@pytest.mark.parametrize("name", ["custom", "detection", "fixed"])
def test_tf_dataset_reads_the_same(packs, name):
    path, records = packs[name]
    reference = Loader(path, "train", 3, seed=4)
    batches = packer.tf.dataset(path, "train", 3, seed=4, max_boxes=MAX)
    for index, (images, targets) in enumerate(batches):
        targets = {k: v.numpy() for k, v in targets.items()}
        check_padded(records, np.sort(reference.indices(index)), images.numpy(), targets)
    assert index == len(reference) - 1


def test_one_hot_expands_the_fixed_class_ids_only(packs):
    path, records = packs["custom"]
    loader = Loader(path, "train", 3, seed=0, one_hot=True)
    rows = np.sort(loader.indices(0))
    _, targets = loader.batch(0)
    for target, i in zip(targets, rows, strict=True):
        np.testing.assert_array_equal(
            target["labels"], np.eye(3, dtype=np.float32)[records[i]["labels"]]
        )
        np.testing.assert_array_equal(target["heat"], records[i]["heat"])
    with pytest.raises(ValueError, match="one_hot=True does not apply"):
        Loader(packs["detection"][0], "train", 3, one_hot=True)


@pytest.mark.parametrize("name", ["custom", "detection"])
def test_a_mixture_relabels_every_field_of_class_ids(packs, name):
    """Fixed (class) and ragged (object_class) class ids are looked up through the second
    pack's table; heat and spots pass as they are."""
    path, records = packs[name]
    swap = {"cat": "dog", "dog": "cat"}
    mix = packer.Mixture([packer.Stream(path), packer.Stream(path, class_map=swap)])
    loader = Loader(mix, "train", 4, seed=0)
    table = np.array([1, 0, 2])
    for index in range(len(loader)):
        ids = np.sort(loader.indices(index))
        pack, sample = loader.split.locate(ids)
        _, targets = loader.batch(index)
        for target, k, i in zip(targets, pack.tolist(), sample.tolist(), strict=True):
            labels = records[i]["labels"]
            np.testing.assert_array_equal(target["labels"], table[labels] if k else labels)
            np.testing.assert_array_equal(target["heat"], records[i]["heat"])
            np.testing.assert_array_equal(target["spots"], records[i]["spots"])

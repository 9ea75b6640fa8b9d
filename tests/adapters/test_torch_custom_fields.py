"""packer.torch decides by the pack's fields and their kinds: packs holding kinds defined only
in the tests read back exactly with 0 and 2 DataLoader workers, every field, fixed or ragged,
crossing the workers in packer's shared-memory slots (torch's per-tensor sharing unused)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.multiprocessing.reductions as reductions
from torch.utils.data import DataLoader

import packer.torch
from packer.reading import handoff
from packer.reading.loader import Loader
from tests.fixtures.custom_fields import all_packs

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
REBUILDS = ("rebuild_tensor", "rebuild_storage_fd", "rebuild_storage_filename")


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> dict:
    return all_packs(tmp_path_factory.mktemp("custom"))


@pytest.fixture
def torch_rebuilds(monkeypatch) -> list[str]:
    """The names of torch's per-tensor rebuild functions as this process calls them."""
    called: list[str] = []
    for name in REBUILDS:
        original = getattr(reductions, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            called.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(reductions, name, spy)
    return called


def want(value: np.ndarray, one_hot: bool = False) -> np.ndarray:
    """A stored value as packer.torch yields it: signed integers (class ids) as int64."""
    return value.astype(np.int64) if value.dtype.kind == "i" else value


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", ["custom", "detection", "fixed"])
def test_every_field_reads_back_exactly(packs, name, workers, torch_rebuilds):
    path, records = packs[name]
    reference = Loader(path, "train", 3, seed=5)
    ds = packer.torch.PackedDataset(path, "train", 3, seed=5)
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    count = 0
    for index, (images, targets) in enumerate(loader):
        rows = np.sort(reference.indices(index))
        np.testing.assert_array_equal(
            images.numpy(), np.stack([records[i]["images"] for i in rows])
        )
        if name == "fixed":  # fixed fields only, more than one target: a dict of batches
            assert list(targets) == ["labels", "heat"]
            for key, values in targets.items():
                expected = want(np.stack([records[i][key] for i in rows]))
                assert values.numpy().dtype == expected.dtype
                np.testing.assert_array_equal(values.numpy(), expected, err_msg=key)
        else:  # per image a dict of every ragged field's rows and each fixed target's value
            assert len(targets) == len(rows)
            for target, i in zip(targets, rows, strict=True):
                assert set(target) == set(records[i]) - {"images"}
                for key, value in target.items():
                    expected = want(records[i][key])
                    assert value.numpy().dtype == expected.dtype, key
                    np.testing.assert_array_equal(value.numpy(), expected, err_msg=key)
        count += 1
    assert count == len(reference)
    if workers and handoff.AVAILABLE:
        assert torch_rebuilds == []  # nothing went through torch's per-tensor sharing


def test_one_hot_labels_beside_the_other_fields(packs):
    path, records = packs["fixed"]
    ds = packer.torch.PackedDataset(path, "train", 3, seed=0, one_hot=True)
    rows = np.sort(ds.loader.indices(0))
    for workers in (0, 2):
        _, targets = next(iter(DataLoader(ds, batch_size=None, num_workers=workers)))
        labels = np.stack([records[i]["labels"] for i in rows])
        assert targets["labels"].dtype == torch.float32
        np.testing.assert_array_equal(targets["labels"].numpy(), np.eye(3)[labels])
        np.testing.assert_array_equal(
            targets["heat"].numpy(), np.stack([records[i]["heat"] for i in rows])
        )


@pytest.mark.parametrize("workers", [0, 2])
def test_normalised_and_one_hot_ragged_batches_cross_the_slots(packs, workers, torch_rebuilds):
    path, records = packs["custom"]
    ds = packer.torch.PackedDataset(path, "train", 3, seed=6, one_hot=True, normalize="unit")
    rows = np.sort(ds.loader.indices(1))
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    images, targets = list(loader)[1]
    expected = np.stack([records[i]["images"] for i in rows]).astype(np.float32) / 255
    np.testing.assert_allclose(images.numpy(), expected, rtol=1e-6)
    for target, i in zip(targets, rows, strict=True):
        np.testing.assert_array_equal(target["labels"].numpy(), np.eye(3)[records[i]["labels"]])
        np.testing.assert_array_equal(target["heat"].numpy(), records[i]["heat"])
        np.testing.assert_array_equal(target["spots"].numpy(), records[i]["spots"])
    if workers and handoff.AVAILABLE:
        assert torch_rebuilds == []

"""Every field of a detection or instances batch crosses a DataLoader's workers in packer's
shared-memory slots: one array per ragged field per batch, split per image in the process that
receives it. The targets are exactly those of 0 workers, each field's per-image tensors are
views of one tensor, and torch's per-tensor sharing (a file descriptor and a rebuild per
tensor) is never used for them."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing.reductions as reductions
from torch.utils.data import DataLoader

import packer
import packer.torch
from packer.reading import handoff
from tests.fixtures.detection import make_detection_coco

pytestmark = [
    pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
    pytest.mark.skipif(not handoff.AVAILABLE, reason="shared-memory slots need memfd (Linux)"),
]
SIZE = (36, 28)
REBUILDS = ("rebuild_tensor", "rebuild_storage_fd", "rebuild_storage_filename")


@pytest.fixture(scope="module", params=["detection", "instances"])
def pack(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp(request.param)
    src = make_detection_coco(root / "coco")
    return packer.pack(src, out=root / "p", size=SIZE, task=request.param, workers=1).root


@pytest.fixture
def torch_rebuilds(monkeypatch) -> list[str]:
    """The names of torch's per-tensor rebuild functions as this process calls them (the
    workers, forked after the patch, pickle references to the counting wrappers)."""
    calls: list[str] = []
    for name in REBUILDS:
        original = getattr(reductions, name)

        @functools.wraps(original)
        def counted(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(reductions, name, counted)
    return calls


def epoch(dataset, workers: int) -> list:
    dataset.set_epoch(0)
    return list(DataLoader(dataset, batch_size=None, num_workers=workers))


def same_targets(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert list(x) == list(y)
        for name in x:
            assert x[name].dtype == y[name].dtype and x[name].shape == y[name].shape, name
            assert torch.equal(x[name], y[name]), name


OPTIONS = {
    "as stored": {},
    "augmented in the workers": {
        "augment": packer.Augment(horizontal_flip=True, width_shift_range=0.2, seed=0)
    },
    "normalised": {"normalize": "unit", "layout": "NCHW"},
}


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_two_workers_give_the_targets_of_none_through_the_slots(pack, options, torch_rebuilds):
    dataset = packer.torch.PackedDataset(pack, "train", batch_size=3, seed=2, **options)
    alone = epoch(dataset, 0)
    torch_rebuilds.clear()
    handed = epoch(dataset, 2)
    assert torch_rebuilds == []  # no tensor crossed by torch's own sharing
    assert len(handed) == len(alone) > 1
    for (images, targets), (want_images, want) in zip(handed, alone, strict=True):
        assert torch.equal(images, want_images)
        same_targets(targets, want)
        for name in targets[0]:  # views of one tensor per field: one storage for the batch
            assert len({t[name].untyped_storage().data_ptr() for t in targets}) == 1, name
    labels = handed[0][1][0]["labels"]
    assert labels.dtype == torch.int64  # class ids as torchvision takes them


def test_augment_device_batches_cross_the_slots_too(pack, torch_rebuilds):
    options = dict(batch_size=3, seed=5, augment=packer.Augment(horizontal_flip=True, seed=1))
    dataset = packer.torch.PackedDataset(pack, "train", augment_device="cpu", **options)
    alone = [tuple(batch) for batch in epoch(dataset, 0)]
    torch_rebuilds.clear()
    handed = [tuple(batch) for batch in epoch(dataset, 2)]  # augmented here, on unpacking
    assert torch_rebuilds == []
    for (images, targets), (want_images, want) in zip(handed, alone, strict=True):
        assert torch.equal(images, want_images)
        same_targets(targets, want)


def test_the_old_way_would_be_seen(pack, torch_rebuilds):
    """The check above can fail: per-image tensors made in a worker cross by torch's sharing."""
    from torch.utils.data import Dataset

    class PerImageTensors(Dataset):
        def __len__(self) -> int:
            return 2

        def __getitem__(self, index: int) -> list[dict]:
            return [{"boxes": torch.zeros(2, 4)} for _ in range(3)]

    list(DataLoader(PerImageTensors(), batch_size=None, num_workers=1))
    assert "rebuild_tensor" in torch_rebuilds
    assert np.isin(["rebuild_storage_fd", "rebuild_storage_filename"], torch_rebuilds).any()


def test_a_mixture_of_object_packs_crosses_the_slots_too(pack, tmp_path, torch_rebuilds):
    """Two packs (npy and TFRecord, one relabelled by its table) mixed: the same fields."""
    other = make_detection_coco(tmp_path / "coco")
    task = packer.open(pack).manifest["task"]
    second = packer.pack(other, out=tmp_path / "t", format="tfrecord", size=SIZE, task=task)
    mix = packer.Mixture([packer.Stream(pack), packer.Stream(second.root, repeat=2)])
    dataset = packer.torch.PackedDataset(mix, "train", batch_size=4, seed=3)
    alone = epoch(dataset, 0)
    torch_rebuilds.clear()
    handed = epoch(dataset, 2)
    assert torch_rebuilds == []
    for (images, targets), (want_images, want) in zip(handed, alone, strict=True):
        assert torch.equal(images, want_images)
        same_targets(targets, want)


def test_the_streaming_dataset_hands_objects_over_alike(pack, torch_rebuilds):
    dataset = packer.torch.PackedIterable(pack, "train", batch_size=2, seed=1)
    alone = epoch(dataset, 0)
    torch_rebuilds.clear()
    handed = epoch(dataset, 2)
    assert torch_rebuilds == [] and len(handed) == len(alone)
    for (images, targets), (want_images, want) in zip(handed, alone, strict=True):
        assert torch.equal(images, want_images)
        same_targets(targets, want)

"""packer.torch: batches as tensors, DataLoader workers, DDP rank sharding, training."""

from __future__ import annotations

import json
import pickle
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

import packer
from packer.augment import Augment
from packer.fields.presets import fields_for
from packer.reading.transforms import ids_table
from packer.torch import PackedDataset
from packer.torch.device import DeviceBatch
from tests.jobs.torch_jobs import (
    DDP_CASES,
    KINDS,
    ddp_rank,
    epochs,
    everything,
    ids_of,
    sample_ids,
)

FORMATS = ("npy", "tfrecord", "recordio")


@pytest.fixture(scope="module")
def seg(seg_src, tmp_path_factory) -> dict[str, Path]:
    """14 train samples, 32x24, shards of 5, 5 and 4, in every format."""
    root = tmp_path_factory.mktemp("torch-seg")
    for fmt in FORMATS:
        packer.pack(seg_src, out=root / fmt, format=fmt, size=(32, 24), shard_size=5 * 32 * 24 * 4)
    return {fmt: root / fmt for fmt in FORMATS}


@pytest.fixture(scope="module")
def cls(cls_src, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("torch-cls")
    for fmt in FORMATS:
        packer.pack(cls_src, out=root / fmt, format=fmt, size=24, shard_size=8 * 24 * 24 * 3)
    return {fmt: root / fmt for fmt in FORMATS}


def test_items_are_whole_batches_of_tensors(seg, cls):
    ds = PackedDataset(seg["npy"], batch_size=4, shuffle=False)
    expected = everything(seg["npy"])
    assert len(ds) == 4  # 14 samples
    images, masks = ds[0]
    assert images.dtype == torch.uint8 and tuple(images.shape) == (4, 24, 32, 3)
    assert masks.dtype == torch.int64 and tuple(masks.shape) == (4, 24, 32)
    assert np.array_equal(images.numpy(), expected["images"][:4])
    assert np.array_equal(masks.numpy(), expected["masks"][:4])
    assert ds[3][0].shape[0] == 2
    with pytest.raises(IndexError):
        ds[4]
    nchw, _ = PackedDataset(seg["npy"], batch_size=4, shuffle=False, layout="NCHW")[0]
    assert tuple(nchw.shape) == (4, 3, 24, 32)
    assert nchw.is_contiguous(memory_format=torch.channels_last)  # a view, no copy
    assert torch.equal(nchw.permute(0, 2, 3, 1), images)
    unit, onehot = PackedDataset(
        seg["npy"], batch_size=4, shuffle=False, one_hot=True, normalize="unit"
    )[0]
    assert unit.dtype == torch.float32 and torch.allclose(unit, images / 255.0)
    assert np.array_equal(
        onehot.numpy(),
        ids_table(4, 255, fields_for("segmentation", (1, 1), np.dtype(np.uint8))[1:])[
            masks.numpy()
        ],
    )
    _, labels = PackedDataset(cls["npy"], batch_size=5, shuffle=False)[0]
    assert labels.dtype == torch.int64 and tuple(labels.shape) == (5,)
    with pytest.raises(ValueError, match="layout"):
        PackedDataset(seg["npy"], layout="CHW")


@pytest.mark.parametrize("workers", [0, 2])
def test_target_dtype_uint8_keeps_the_stored_bytes(seg, workers):
    options = {"batch_size": 4, "seed": 1}
    wide = list(DataLoader(PackedDataset(seg["npy"], **options), batch_size=None))
    narrow = PackedDataset(seg["npy"], target_dtype="uint8", **options)
    got = list(DataLoader(narrow, batch_size=None, num_workers=workers))
    for (images, masks), (want_images, want_masks) in zip(got, wide, strict=True):
        assert masks.dtype == torch.uint8 and torch.equal(masks.long(), want_masks)
        assert torch.equal(images, want_images)
    onehot = PackedDataset(seg["npy"], one_hot=True, target_dtype=torch.uint8, **options)
    assert onehot[0][1].dtype == torch.uint8 and onehot[0][1].shape[-1] == 4
    aug = Augment(rotation_range=10, seed=0)
    on_device = PackedDataset(seg["npy"], target_dtype="int32", augment=aug, augment_device="cpu")
    assert next(iter(DataLoader(on_device, batch_size=None)))[1].dtype == torch.int32
    with pytest.raises(ValueError, match="target_dtype must be one of"):
        PackedDataset(seg["npy"], target_dtype="complex64")


@pytest.mark.parametrize("kind", KINDS)
def test_same_batches_as_packed_sequence(seg, kind):
    from packer.keras import PackedSequence

    seq = PackedSequence(seg["npy"], batch_size=3, shuffle="global", seed=5)
    ds = KINDS[kind](seg["npy"], batch_size=3, shuffle="global", seed=5)
    for epoch in range(2):
        ds.set_epoch(epoch)
        got = [x.numpy() for x, _ in DataLoader(ds, batch_size=None)]
        want = [seq[i][0] for i in range(len(seq))]
        assert len(got) == len(want) and all(map(np.array_equal, got, want))
        seq.on_epoch_end()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_every_sample_once_per_epoch_with_any_workers(seg, kind, workers):
    ids = sample_ids(seg["npy"])
    ds = KINDS[kind](seg["npy"], batch_size=3, seed=2)
    loader = DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0)
    first, second = epochs(ds, loader, 2, ids)
    assert sorted(first) == sorted(second) == list(range(14))
    assert first != second  # set_epoch reached the (persistent) workers
    again = KINDS[kind](seg["npy"], batch_size=3, seed=2)
    assert epochs(again, DataLoader(again, batch_size=None), 1, ids)[0] == first


@pytest.mark.parametrize("one_hot", [False, True])
def test_batches_a_consumer_keeps_are_never_overwritten(seg, one_hot):
    """Workers hand batches over in reusable shared slots: held ones must stay intact."""
    ds = PackedDataset(seg["npy"], batch_size=2, shuffle=False, one_hot=one_hot, layout="NCHW")
    expected = everything(seg["npy"])
    loader = DataLoader(ds, batch_size=None, num_workers=1, persistent_workers=True)
    for _ in range(2):  # the second pass reuses the slots the first one released
        kept = list(loader)
        images = torch.cat([x for x, _ in kept]).permute(0, 2, 3, 1)
        targets = torch.cat([y for _, y in kept]).numpy()
        assert np.array_equal(images.numpy(), expected["images"])
        masks = expected["masks"]
        want = (
            ids_table(4, 255, fields_for("segmentation", (1, 1), np.dtype(np.uint8))[1:])[masks]
            if one_hot
            else masks
        )
        assert np.array_equal(targets, want)
        assert kept[0][0].is_contiguous(memory_format=torch.channels_last)
        del kept


def test_pickles_without_open_files(seg):
    ds = PackedDataset(seg["npy"], batch_size=4, shuffle=False)
    first = ds[0][0]
    state = pickle.dumps(ds)
    assert len(state) < 50_000 < first.numel() * 10  # no mapped arrays travel, only the path
    assert torch.equal(pickle.loads(state)[0][0], first)


def test_a_dataloader_batch_size_is_refused_with_the_fix(seg):
    ds = PackedDataset(seg["npy"], batch_size=4)
    with pytest.raises(TypeError, match="batch_size=None"):
        next(iter(DataLoader(ds, batch_size=2)))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_that_shuffles_or_samples_the_batches_is_refused_with_the_fix(seg, workers):
    """Its batch order would break exact resume and the ranks' parts: one line says what to do,
    when the DataLoader is made or first iterated; the dataset's own shuffle goes on working."""
    ds = PackedDataset(seg["npy"], batch_size=3, seed=1)
    fix = r"give the DataLoader shuffle=False and no (RandomSampler|DistributedSampler)"
    with pytest.raises(ValueError, match=fix) as made:
        DataLoader(ds, batch_size=None, shuffle=True, num_workers=workers)
    assert "\n" not in str(made.value) and "shuffle=" in str(made.value)
    sampled = DataLoader(ds, batch_size=None, sampler=RandomSampler(ds, num_samples=3))
    with pytest.raises(ValueError, match=fix):
        next(iter(sampled))
    with pytest.raises(ValueError, match=fix):
        DistributedSampler(ds, num_replicas=2, rank=0)
    ids = sample_ids(seg["npy"])
    loader = DataLoader(ds, batch_size=None, shuffle=False, num_workers=workers)
    first, second = epochs(ds, loader, 2, ids)
    reference = PackedDataset(seg["npy"], batch_size=3, seed=1)
    assert first == [i for b in range(len(reference)) for i in ids_of(reference[b][0], ids)]
    assert sorted(second) == list(range(14)) and second != first


def test_augment_applies_the_seeded_draw_of_each_sample(seg):
    aug = Augment(rotation_range=20, horizontal_flip=True, seed=3)
    ds = PackedDataset(seg["npy"], batch_size=4, seed=1, augment=aug)
    plain = PackedDataset(seg["npy"], batch_size=4, seed=1)
    ds.set_epoch(1)
    plain.set_epoch(1)
    images, masks = ds[1]
    raw, raw_masks = plain[1]
    indices = np.sort(plain.loader.indices(1))
    want, want_masks = aug.apply(raw.numpy(), raw_masks.numpy().astype(np.uint8), epoch=1,
                                 indices=indices)  # fmt: skip
    assert np.array_equal(images.numpy(), want) and np.array_equal(masks.numpy(), want_masks)
    assert not torch.equal(images, raw)


def close_to(got: torch.Tensor, want: np.ndarray) -> None:
    """The torch executor's pixels within interpolation error of the NumPy executor's."""
    diff = np.abs(got.numpy().astype(int) - want.astype(int))
    assert got.shape == want.shape and diff.mean() < 0.5 and np.percentile(diff, 99.9) <= 3


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_augment_device_warps_where_the_batch_is_unpacked(seg, kind, workers):
    """augment_device="cpu" runs the very path of "cuda" (torch executor after the hand-over)."""
    aug = Augment(rotation_range=20, zoom_range=0.1, horizontal_flip=True, channel_shift_range=10,
                  fill_mode="constant", seed=3)  # fmt: skip
    on_cpu = KINDS[kind](seg["npy"], batch_size=4, seed=1, augment=aug)
    on_device = KINDS[kind](seg["npy"], batch_size=4, seed=1, augment=aug, augment_device="cpu")
    for ds in (on_cpu, on_device):
        ds.set_epoch(2)
    loader = DataLoader(on_device, batch_size=None, num_workers=workers, pin_memory=False)
    want = list(DataLoader(on_cpu, batch_size=None))
    batches = list(loader)
    assert all(isinstance(b, DeviceBatch) for b in batches)  # not yet augmented
    got = [tuple(batch) for batch in batches]
    assert len(got) == len(want) == 4
    for (images, masks), (want_images, want_masks) in zip(got, want, strict=True):
        assert images.dtype == torch.uint8 and masks.dtype == torch.int64
        close_to(images, want_images.numpy())
        assert (masks == want_masks).float().mean() >= 0.9999  # docs/augmentation.md: 99.99%
        assert set(masks.unique().tolist()) <= set(range(len(packer.open(seg["npy"]).classes))) | {
            255
        }


def test_augment_device_normalises_and_one_hots_after_the_warp(seg):
    aug = Augment(rotation_range=30, seed=4)
    options = dict(batch_size=4, seed=1, augment=aug, normalize="dataset", one_hot=True)
    want_images, want_targets = PackedDataset(seg["npy"], **options)[2]
    batch = PackedDataset(seg["npy"], layout="NCHW", augment_device="cpu", **options)[2]
    images, targets = batch
    assert images.dtype == torch.float32 and images.shape[1] == 3
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert (images.permute(0, 2, 3, 1) - want_images).abs().mean() < 0.02
    assert targets.dtype == torch.float32 and targets.shape == want_targets.shape
    assert (targets == want_targets).all(-1).float().mean() >= 0.9999
    assert batch[0] is images and len(batch) == 2  # augmented once, kept


def test_augment_device_is_refused_clearly(seg):
    with pytest.raises(ValueError, match="give both"):
        PackedDataset(seg["npy"], augment_device="cpu")
    with pytest.raises(ValueError, match="not a torch device"):
        PackedDataset(seg["npy"], augment=Augment(seed=0), augment_device="gpu:fast")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            PackedDataset(seg["npy"], augment=Augment(seed=0), augment_device="cuda")


def test_a_model_trains_from_batches_augmented_on_the_device(seg):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    aug = Augment(rotation_range=10, horizontal_flip=True, seed=0)
    ds = PackedDataset(seg["npy"], batch_size=4, seed=0, augment=aug, augment_device=device,
                       normalize="unit", layout="NCHW")  # fmt: skip
    model = tiny_model(len(packer.open(seg["npy"]).classes), True).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=255)
    losses = []
    for images, masks in DataLoader(
        ds, batch_size=None, num_workers=1, pin_memory=device == "cuda"
    ):
        assert images.device.type == masks.device.type == device
        optimiser.zero_grad()
        loss = loss_fn(model(images), masks)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert len(losses) == len(ds) and np.isfinite(losses).all()


def tiny_model(classes: int, segmentation: bool) -> torch.nn.Module:
    layers = [torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, classes, 1)]
    if not segmentation:
        layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("task", ["segmentation", "classification"])
def test_a_tiny_model_trains_an_epoch_from_each_format(seg, cls, fmt, task):
    path = (seg if task == "segmentation" else cls)[fmt]
    ds = PackedDataset(path, batch_size=4, normalize="dataset", layout="NCHW", seed=0)
    model = tiny_model(len(packer.open(path).classes), task == "segmentation")
    before = [p.detach().clone() for p in model.parameters()]
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=255)
    losses = []
    for images, targets in DataLoader(ds, batch_size=None, num_workers=1):
        optimiser.zero_grad()
        loss = loss_fn(model(images), targets)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert len(losses) == len(ds) and np.isfinite(losses).all()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_ranks_share_every_epoch_out(seg, tmp_path, world):
    torch.multiprocessing.start_processes(
        ddp_rank,
        (world, free_port(), str(seg["npy"]), str(tmp_path)),
        nprocs=world,
        start_method="spawn",
    )
    ranks = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(world)]
    shard_of = np.repeat([0, 1, 2], [5, 5, 4])
    for case, (_, shuffle, uneven) in enumerate(DDP_CASES):
        results = [ranks[r][case] for r in range(world)]
        assert [r["rank"] for r in results] == list(range(world))  # from torch.distributed
        per_rank, rest = divmod(14, world)
        size = per_rank + (rest > 0 if uneven == "pad" else 0)
        for epoch in range(2):
            parts = [r["epochs"][epoch] for r in results]
            assert [len(p) for p in parts] == [size] * world  # equal batch counts: no DDP hang
            assert results[0]["counts"] == [len(p) for p in parts]
            union = [i for p in parts for i in p]
            if uneven == "pad":  # all of the split, a few repeated
                assert sorted(set(union)) == list(range(14)) and len(union) == world * size
                if shuffle == "windows":  # each repeats its own samples
                    assert sum(len(set(p)) for p in parts) == 14
            else:  # disjoint, a few left out
                assert len(set(union)) == len(union) == 14 - rest
            if shuffle == "windows":  # a rank reads its own stretch: shards meet at the edges
                touched = [set(shard_of[p]) for p in parts]
                assert sum(map(len, touched)) <= 3 + world - 1
        assert results[0]["epochs"][0] != results[0]["epochs"][1] or not shuffle

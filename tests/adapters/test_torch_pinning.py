"""The DataLoader hand-off's slots and CUDA pinning (`packer.torch.pinning`): where CUDA is
absent the slots stay as they were (pageable, freed as their views go); the ring's release hook
that pinning uses frees a slot only when told to."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import packer
import packer.torch
from packer.reading import handoff
from packer.reading.ring import FREE, VIEWED, Memory, Ring, anonymous_memory, lay_out
from packer.synthetic import make_segmentation

pytestmark = pytest.mark.skipif(not handoff.AVAILABLE, reason="slots need memfd (Linux)")


def test_a_slot_given_a_release_hook_is_freed_only_when_the_hook_frees_it():
    ring = Ring([Memory(anonymous_memory("test-slot"))])
    layout = lay_out([((4, 4), np.uint8)])
    ring.memory[0].write([np.full((4, 4), 7, np.uint8)])
    waiting = []
    views = ring.views(0, layout, waiting.append)
    assert views[0].sum() == 7 * 16 and ring.held[0] == VIEWED
    del views
    assert ring.held[0] == VIEWED and len(waiting) == 1  # dropped, but the hook holds it
    waiting.pop()()
    assert ring.held[0] == FREE


def test_a_mapping_let_go_is_reported_to_whoever_registered_it():
    memory = Memory(anonymous_memory("test-slot"))
    memory.write([np.zeros(16, np.uint8)])
    first, unmapped = memory.mapping, []
    memory.before_unmap = unmapped.append
    memory.write([np.zeros(1 << 20, np.uint8)])  # grown: mapped again
    assert unmapped == [first] and memory.mapping is not first
    memory.close()
    assert len(unmapped) == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only path")
def test_without_cuda_dataloader_batches_come_through_unpinned_slots(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 12}, size=(32, 24))
    packer.pack(src, out=tmp_path / "pack", format="npy", workers=1)
    packer.torch.pin_slots(True)
    dataset = packer.torch.PackedDataset(tmp_path / "pack", "train", batch_size=4)
    loader = DataLoader(dataset, batch_size=None, num_workers=1)
    batches = [images.clone() for images, _ in loader]
    assert handoff._current_pinner() is None  # no CUDA: nothing registered
    expected = [images for images, _ in packer.torch.PackedDataset(tmp_path / "pack", "train", 4)]
    assert all(torch.equal(a, b) for a, b in zip(batches, expected, strict=True))
    packer.torch.pin_slots(False)
    assert handoff._current_pinner() is None
    packer.torch.pin_slots(True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_with_cuda_batches_arrive_pinned_in_registered_slots_and_match(tmp_path):
    src = make_segmentation(tmp_path / "src", {"train": 24}, size=(64, 48))
    packer.pack(src, out=tmp_path / "pack", format="npy", workers=1)
    packer.torch.pin_slots(True)
    dataset = packer.torch.PackedDataset(tmp_path / "pack", "train", batch_size=4)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, pin_memory=True)
    expected = [images for images, _ in packer.torch.PackedDataset(tmp_path / "pack", "train", 4)]
    got = []
    for images, _ in loader:
        assert images.is_pinned()
        got.append(images.to("cuda", non_blocking=True))
    pinner = handoff._current_pinner()
    assert pinner is not None and pinner.working and pinner.registered
    assert all(torch.equal(a.cpu(), b) for a, b in zip(got, expected, strict=True))

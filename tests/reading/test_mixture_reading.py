"""Reading a mixture: every reader gives the same batches, a repeat=1 pack shows each sample
once per epoch, ranks get equal batches, and a state resumes exactly mid-epoch in other layouts
and readers (2 ranks x 8 -> 3 ranks x 4 -> torch 1 x 16), augmentation included."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from torch.utils.data import DataLoader

import packer
from packer.reading.loader import Loader
from tests.fixtures.mixture import image_ids, seg_pack

SEED = 4


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    return seg_pack(root, 14, seed=0), seg_pack(root, 9, seed=1)


@pytest.fixture(scope="module")
def mix(packs):
    """14 samples once and 9 twice: an epoch of 32."""
    a, b = packs
    return packer.Mixture([packer.Stream(a), packer.Stream(b, repeat=2)])


def test_a_mixture_reads_as_its_plan_says(packs, mix):
    ids = image_ids(*packs)
    loader = Loader(mix, "train", 5, seed=SEED)
    assert loader.sampler.count == 32 and len(loader) == 7
    for epoch in range(2):
        loader.set_epoch(epoch)
        seen = [ids[x.tobytes()] for b in range(len(loader)) for x in loader.batch(b)[0]]
        counts = Counter(seen)
        assert {s for (k, s) in counts if k == 0} == set(range(14))  # repeat=1: each once
        assert all(c == 1 for (k, _), c in counts.items() if k == 0)
        assert all(counts[(1, s)] == 2 for s in range(9))  # repeat=2: each twice
        rows = np.sort(np.concatenate([loader.indices(b) for b in range(len(loader))]))
        assert np.array_equal(rows, np.sort(loader.sampler.epoch_order(loader.pass_)))


def test_ranks_get_equal_batches_and_together_the_epoch(packs, mix):
    ranks = [Loader(mix, "train", 4, seed=SEED, rank=r, world_size=3) for r in range(3)]
    assert len({len(r) for r in ranks}) == 1
    together = [i for r in ranks for b in range(len(r)) for i in r.indices(b)]
    assert set(together) == set(ranks[0].sampler.epoch_order(ranks[0].pass_).tolist())
    assert len(together) - 32 <= 2  # padding evens out 32 over 3 ranks


def test_keras_tf_and_torch_read_the_same_batches_of_a_mixture(mix):
    import packer.tf
    from packer.keras import PackedSequence
    from packer.torch import PackedDataset, PackedIterable

    loader = Loader(mix, "train", 8, seed=SEED, one_hot=True)
    expected = [loader.batch(b) for b in range(len(loader))]
    seq = PackedSequence(mix, "train", 8, seed=SEED, one_hot=True)
    tfds = packer.tf.dataset(mix, "train", 8, seed=SEED, one_hot=True)
    torch_ds = PackedDataset(mix, "train", 8, seed=SEED, one_hot=True)
    torch_batches = list(DataLoader(torch_ds, batch_size=None, num_workers=1))
    tf_batches = [(x.numpy(), y.numpy()) for x, y in tfds]
    iterable = PackedIterable(mix, "train", 8, seed=SEED, one_hot=True)  # "windows" by default
    streamed = list(DataLoader(iterable, batch_size=None, num_workers=2))
    assert len(streamed) == len(expected) == len(tf_batches)
    for b, (images, targets) in enumerate(expected):
        torch_ones = [[t.numpy() for t in torch_batches[b]], [t.numpy() for t in streamed[b]]]
        for got in (seq[b], tf_batches[b], *torch_ones):
            assert np.array_equal(got[0], images)
            assert np.array_equal(got[1], targets)


def test_augmentation_and_normalisation_of_a_mixture_agree_across_readers(packs, mix):
    """tf.data's in-graph warp of a mixture agrees with the NumPy one (one draw per id), and
    normalize="dataset" uses the packs' statistics weighted by their draws (14 and 18)."""
    import packer.tf

    aug = packer.Augment(rotation_range=15, zoom_range=0.1, horizontal_flip=True, seed=2)
    loader = Loader(mix, "train", 8, seed=SEED, augment=aug)
    batches = list(packer.tf.dataset(mix, "train", 8, seed=SEED, augment=aug))
    assert len(batches) == len(loader)
    agree = []
    for b, (images, masks) in enumerate(batches):
        want_images, want_masks = loader.batch(b)
        assert np.abs(images.numpy().astype(int) - want_images).mean() < 2.0
        agree.append((masks.numpy() == want_masks).mean())
    assert np.mean(agree) >= 0.9999
    means = [np.asarray(packer.open(p).manifest["stats"]["splits"]["train"]["mean"]) for p in packs]
    normalised = Loader(mix, "train", 8, seed=SEED, normalize="dataset")
    expected = (14 * means[0] + 18 * means[1]) / 32
    assert np.allclose(normalised.transform.normalizer.mean, expected)


def test_elastic_resume_with_augmentation_across_layouts_and_readers(packs, mix):
    """2 ranks x 8, then 3 ranks x 4, then torch 1 x 16 with a DataLoader worker: each draw
    of the epoch read once, each warped exactly as an uninterrupted reader warps it."""
    from packer.torch import PackedDataset

    aug = packer.Augment(rotation_range=15, zoom_range=0.1, horizontal_flip=True, seed=2)
    whole = Loader(mix, "train", 4, seed=SEED, augment=aug)
    expected = {}
    for b in range(len(whole)):
        expected.update(zip(np.sort(whole.indices(b)).tolist(), whole.batch(b)[0], strict=True))
    seen, state = [], None
    for world, batch in [(2, 8), (3, 4)]:
        ranks = []
        for rank in range(world):
            loader = Loader(mix, "train", batch, seed=0, augment=aug, rank=rank, world_size=world)
            if state is not None:
                loader.load_state_dict(json.loads(json.dumps(state)))
            ranks.append(loader)
        assert len({len(r) for r in ranks}) == 1
        for loader in ranks:
            ids = np.sort(loader.indices(0)).tolist()
            for i, image in zip(ids, loader.batch(0)[0], strict=True):
                assert np.array_equal(image, expected[i])
            seen += ids
        states = [r.state_dict(1) for r in ranks]
        state = states[0]
        assert all(s["consumed"] == state["consumed"] for s in states)
    assert state["consumed"] == 28 and state["mixture"] == [[14, 14], [9, 18]]
    ds = PackedDataset(mix, "train", batch_size=16, seed=1, augment=aug, world_size=1)
    ds.load_state_dict(state)
    batches = list(DataLoader(ds, batch_size=None, num_workers=1))
    assert len(batches) == 1
    ids = np.sort(ds.loader.indices(0)).tolist()
    for i, image in zip(ids, batches[0][0].numpy(), strict=True):
        assert np.array_equal(image, expected[i])
    seen += ids
    assert sorted(seen) == sorted(expected)  # the epoch's 32 draws, each once


def test_several_resumes_in_a_row_continue_one_epoch_then_the_next(mix):
    fresh = Loader(mix, "train", 3, seed=SEED)
    order = [i for b in range(len(fresh)) for i in fresh.indices(b)]
    state, seen = fresh.state_dict(0), []
    for batch in (5, 2, 4, 3):
        loader = Loader(mix, "train", batch, seed=0)
        loader.load_state_dict(state)
        seen += loader.indices(0).tolist()
        state = loader.state_dict(1)
    assert seen == order[: len(seen)] and state["consumed"] == 14
    loader = Loader(mix, "train", 32, seed=0)
    loader.load_state_dict(loader.sampler.state_dict(loader.pass_, 1) | {"seed": SEED})
    fresh.set_epoch(1)
    next_epoch = np.concatenate([fresh.indices(b) for b in range(len(fresh))])
    assert loader.epoch == 1 and np.array_equal(loader.indices(0), next_epoch)


def test_a_state_of_another_mixture_or_of_a_pack_is_refused(packs, mix):
    a, b = packs
    other = packer.Mixture([packer.Stream(a), packer.Stream(b, repeat=3)])
    state = Loader(mix, "train", 4, seed=SEED).state_dict(1)
    with pytest.raises(ValueError, match="count=32"):
        Loader(other, "train", 4).load_state_dict(state)
    same_size = packer.Mixture([packer.Stream(a, choose=5), packer.Stream(b, repeat=3)])
    with pytest.raises(ValueError, match="a mixture of 14 draws of 14, 18 draws of 9"):
        Loader(same_size, "train", 4).load_state_dict(state)
    with pytest.raises(ValueError, match="saved by a reader of one pack"):
        pack_state = Loader(a, "train", 4).state_dict(1) | {"count": 32}
        Loader(mix, "train", 4).load_state_dict(pack_state)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_resumed_mixture_warps_on_the_augment_device_as_the_workers_do(mix, device):
    """augment_device runs the torch executor where the batch lands ("cpu" takes the very path
    of "cuda"): a mixture resumed there gives the draws the state left, warped as NumPy does."""
    import torch

    from packer.torch import PackedDataset

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    aug = packer.Augment(rotation_range=20, zoom_range=0.1, horizontal_flip=True, seed=3)
    whole = Loader(mix, "train", 8, seed=1, augment=aug)
    expected = {}
    for b in range(len(whole)):
        ids = np.sort(whole.indices(b)).tolist()
        expected.update(zip(ids, zip(*whole.batch(b), strict=True), strict=True))
    ranks = [Loader(mix, "train", 8, seed=1, rank=r, world_size=2) for r in range(2)]
    done = {int(i) for r in ranks for i in r.indices(0)}
    ds = PackedDataset(mix, "train", 16, seed=0, augment=aug, augment_device=device)
    ds.load_state_dict(ranks[1].state_dict(1))
    seen = []
    for b, batch in enumerate(DataLoader(ds, batch_size=None, num_workers=1)):
        images, masks = (t.cpu().numpy() for t in tuple(batch))
        ids = np.sort(ds.loader.indices(b)).tolist()
        for i, image, mask in zip(ids, images, masks, strict=True):
            diff = np.abs(image.astype(int) - expected[i][0].astype(int))
            assert diff.mean() < 0.5 and np.percentile(diff, 99.9) <= 3
            assert (mask == expected[i][1]).mean() >= 0.999
        seen += ids
    assert sorted(seen) == sorted(set(expected) - done)

"""Elastic resume: a reading state is a place in the epoch's global order, so a state saved by
one layout (world size, batch size, workers, reader) resumes in another, and the new ranks
together read exactly what that epoch had left, each sample once (padding aside)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

import packer
from packer.reading.loader import Loader
from packer.reading.position import ENCODED_LENGTH, MAX_PASSES, Pass, agreed
from packer.reading.sampler import Sampler
from tests.jobs.torch_jobs import KINDS, ids_of, sample_ids

COUNT = 14  # samples in the pack's train split, in shards of 5, 5 and 4


@pytest.fixture(scope="module")
def pack(seg_src, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("elastic") / "p"
    packer.pack(seg_src, out=out, size=(32, 24), shard_size=5 * 32 * 24 * 4)
    return out


def ranks(pack: Path, layout: tuple[int, int], shuffle, uneven: str, state=None) -> list[Loader]:
    """Every rank of a `(world_size, batch_size)` layout, resumed from `state` when given."""
    world, batch = layout
    loaders = []
    for rank in range(world):
        loader = Loader(pack, batch_size=batch, shuffle=shuffle, seed=3, shuffle_window=4,
                        rank=rank, world_size=world, uneven=uneven)  # fmt: skip
        if state is not None:
            loader.load_state_dict(json.loads(json.dumps(state)))  # plain JSON, saved anywhere
        loaders.append(loader)
    return loaders


def step(loaders: list[Loader], batches: int) -> tuple[list[int], dict]:
    """Every rank reads `batches` batches in lockstep: the samples read, and the one state all
    ranks then name."""
    assert len({len(loader) for loader in loaders}) == 1  # equal batch counts on every rank
    batches = min(batches, len(loaders[0]))
    seen = [int(i) for b in range(batches) for loader in loaders for i in loader.indices(b)]
    states = [loader.state_dict(batches) for loader in loaders]
    position = ("epoch", "seed", "shuffle", "count", "passes", "consumed", "window")
    assert all({k: s.get(k) for k in position} == {k: states[0].get(k) for k in position}
               for s in states)  # fmt: skip
    return seen, states[0]


LAYOUTS = [(2, 2), (3, 1), (1, 2), (2, 1)]  # (world_size, batch_size) of successive resumes


@pytest.mark.parametrize("shuffle", [False, "global", "windows"])
@pytest.mark.parametrize("uneven", ["pad", "drop"])
def test_resumes_in_other_layouts_read_the_rest_of_the_epoch_once(pack, shuffle, uneven):
    state, seen = None, []
    for layout in LAYOUTS:  # several resumes in a row, each in a new layout
        loaders = ranks(pack, layout, shuffle, uneven, state)
        if state is not None:
            assert loaders[0].epoch == 0  # still the interrupted epoch
        read, state = step(loaders, 1)
        seen += read
        assert state["consumed"] == (len(set(seen)) if state["epoch"] == 0 else 0)
    while state["epoch"] == 0:  # the last layout finishes the epoch
        read, state = step(ranks(pack, LAYOUTS[-1], shuffle, uneven, state), 100)
        seen += read
    if uneven == "pad":  # every sample, a few twice: padding evens out each layout's ranks
        assert set(seen) == set(range(COUNT))
        assert len(seen) - COUNT <= sum(world - 1 for world, _ in LAYOUTS)
    else:  # none twice, at most a few left out, as an uninterrupted "drop" epoch would
        assert len(seen) == len(set(seen)) >= COUNT - sum(world - 1 for world, _ in LAYOUTS)
    # later epochs follow the new layout: the same batches as readers that started there
    resumed, fresh = (
        ranks(pack, (2, 1), shuffle, uneven, state),
        ranks(pack, (2, 1), shuffle, uneven),
    )
    for loader in fresh:
        loader.set_epoch(1)
    assert step(resumed, 100)[0] == step(fresh, 100)[0]


@pytest.mark.parametrize("shuffle", ["global", "windows"])
def test_same_layout_resume_is_exact_even_in_its_padding(pack, shuffle):
    whole, _ = step(ranks(pack, (3, 2), shuffle, "pad"), 100)
    head, state = step(ranks(pack, (3, 2), shuffle, "pad"), 1)
    tail, _ = step(ranks(pack, (3, 2), shuffle, "pad", state), 100)
    assert head + tail == whole


def test_states_that_disagree_are_refused_with_the_reason(pack):
    loaders = ranks(pack, (2, 3), "global", "pad")
    states = [loaders[0].state_dict(1), loaders[1].state_dict(2)]
    fresh = ranks(pack, (1, 3), "global", "pad")[0]
    with pytest.raises(ValueError, match=r"different positions.*rank 0.*rank 1"):
        fresh.load_state_dict(states)
    fresh.load_state_dict([loaders[0].state_dict(1), loaders[1].state_dict(1)])  # they agree
    assert fresh.state_dict()["consumed"] == 6
    other = Loader(pack, split="val", batch_size=3, seed=3)
    with pytest.raises(ValueError, match="count=14"):
        other.load_state_dict(states[0])


def test_augmentation_draws_follow_the_sample_not_the_batch(pack):
    aug = packer.Augment(rotation_range=20, horizontal_flip=True, seed=1)
    whole = Loader(pack, batch_size=4, seed=5, augment=aug)
    images = {}
    for b in range(len(whole)):
        order = np.sort(whole.indices(b))  # batches come in ascending sample order
        images.update(zip(order.tolist(), whole.batch(b)[0], strict=True))
    first = Loader(pack, batch_size=4, seed=5, augment=aug)
    resumed = Loader(pack, batch_size=3, seed=0, augment=aug, world_size=2, rank=1)
    resumed.load_state_dict(first.state_dict(2))
    for b in range(len(resumed)):
        order = np.sort(resumed.indices(b))
        for sample, image in zip(order.tolist(), resumed.batch(b)[0], strict=True):
            assert np.array_equal(image, images[sample])


def test_a_state_moves_between_keras_torch_and_tf_readers(pack):
    """PackedSequence saves, two torch ranks with workers go on, tf.data finishes the epoch."""
    import packer.tf
    from packer.keras import PackedSequence

    ids = sample_ids(pack)
    seq = PackedSequence(pack, batch_size=4, seed=6)
    seen = [i for b in range(2) for i in ids_of(seq[b][0], ids)]
    state = seq.state_dict(batches=2)
    datasets = [KINDS["map"](pack, batch_size=1, seed=0, rank=r, world_size=2) for r in range(2)]
    for ds in datasets:
        ds.load_state_dict(state)
    loaders = [iter(DataLoader(ds, batch_size=None, num_workers=1)) for ds in datasets]
    for _ in range(2):  # two batches of one on each rank
        seen += [i for loader in loaders for i in ids_of(next(loader)[0], ids)]
    state = datasets[1].state_dict(batches=2)
    assert state == datasets[0].state_dict(batches=2) | {"rank": 1}
    rest = packer.tf.dataset(pack, batch_size=5, seed=6, start=state)
    seen += [i for images, _ in rest for i in ids_of(images.numpy(), ids)]
    assert sorted(seen) == list(range(COUNT))  # 8 + 4 + 2: the epoch, each sample once


def test_windows_resume_keeps_the_saved_window_across_windows_and_world_sizes(pack):
    """The window an epoch was shuffled in belongs to the epoch, not to the reader: readers
    with other `shuffle_window`s and world sizes continue its order, each sample once."""

    def layout(world: int, batch: int, window: int, state=None) -> list[Loader]:
        loaders = [
            Loader(pack, batch_size=batch, shuffle="windows", seed=0 if state else 3,
                   shuffle_window=window, rank=rank, world_size=world, uneven="allow")
            for rank in range(world)
        ]  # fmt: skip
        for loader in loaders:
            if state is not None:
                loader.load_state_dict(json.loads(json.dumps(state)))
        return loaders

    def orders(loaders: list[Loader]) -> list[list[int]]:
        return [[int(i) for b in range(len(x)) for i in x.indices(b)] for x in loaders]

    # the epoch as two ranks with windows of 4 read it: contiguous parts of one global order
    first = layout(2, 3, 4)
    epoch = orders(first)
    assert sorted(epoch[0] + epoch[1]) == list(range(COUNT))
    seen, state = step(first, 1)  # 3 samples on each rank
    assert state["window"] == 4
    left = epoch[0][3:] + epoch[1][3:]
    # three ranks with windows of 6 cut what is left into three contiguous stretches
    second = layout(3, 1, 6, state)
    assert orders(second) == [p.tolist() for p in np.array_split(left, 3)]
    seen += [int(i) for loader in second for i in loader.indices(0)]  # one batch each
    state = agreed([loader.state_dict(1) for loader in second])  # parts of 3, 3 and 2
    assert state["window"] == 4  # still the epoch's window
    left = [i for p in np.array_split(left, 3) for i in p.tolist()[1:]]
    # one rank with its default window reads the rest of the epoch in that order
    third = layout(1, 5, 0, state)
    assert orders(third) == [left]
    read, state = step(third, 100)
    seen += read
    assert sorted(seen) == list(range(COUNT))  # every sample exactly once
    # the next epoch is shuffled in the new reader's own window, as a fresh reader's
    assert state["epoch"] == 1
    fresh = layout(1, 5, 0)
    fresh[0].set_epoch(1)
    assert orders(layout(1, 5, 0, state)) == orders(fresh)


def resumed(state: dict, world: int, shuffle) -> tuple[list[int], dict, Pass]:
    """All ranks of a `world`-rank layout (batches of one) load `state` and read one batch
    each: the samples read, the state they then name, and rank 0's pass."""
    samplers = [
        Sampler([50, 50, 40], 1, shuffle, seed=2, window=7, rank=r, world_size=world,
                uneven="allow")
        for r in range(world)
    ]  # fmt: skip
    passes = [s.load_state_dict(json.loads(json.dumps(state))) for s in samplers]
    read = [int(i) for s, p in zip(samplers, passes, strict=True) for i in s.batch(p, 0)]
    return read, samplers[0].state_dict(passes[0], 1), passes[0]


@pytest.mark.parametrize("shuffle", [False, "global"])
def test_strided_positions_stay_one_prefix_however_often_resumed(shuffle):
    """Dealt-out orders only ever consume a prefix: any number of layout changes is one pass."""
    state = Sampler([50, 50, 40], 1, shuffle, seed=2).state_dict(Pass(0), 0)
    seen = []
    for resume in range(3 * MAX_PASSES):
        read, state, _ = resumed(state, 2 + resume % 2, shuffle)
        seen += read
        assert len(state["passes"]) <= 2 and state["consumed"] == len(seen)
    assert len(set(seen)) == len(seen)


def test_windows_epochs_take_8_world_size_changes_each_pass_encodable():
    """Each world-size change of a windows epoch adds a pass. After 8 (as docs/resume.md says), the
    epoch goes on in the same world size and refuses another change with the reason. Every
    pass fits the fixed-length encoding that torch's worker processes read from shared memory."""
    state = Sampler([50, 50, 40], 1, "windows", seed=2, window=7).state_dict(Pass(0), 1)
    seen = [int(Sampler([50, 50, 40], 1, "windows", seed=2, window=7).batch(Pass(0), 0)[0])]
    for change in range(8):  # world sizes 3, 2, 3, ...
        read, state, p = resumed(state, 3 - change % 2, "windows")
        seen += read
        assert len(p.before) == change + 1
        assert len(p.encode()) == ENCODED_LENGTH and Pass.decode(p.encode()) == p
    read, state, p = resumed(state, 2, "windows")  # the same world size again: goes on
    seen += read
    assert len(p.before) == 8 and Pass.decode(p.encode()) == p
    assert state["consumed"] == len(seen) == len(set(seen))
    with pytest.raises(ValueError, match=r"read in 9 layouts \(at most 8 before a new one\)"):
        resumed(state, 3, "windows")

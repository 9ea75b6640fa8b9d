"""Epoch orders as docs/readers.md states them: "windows" visits shards in a shuffled order and
shuffles within consecutive windows, each rank reads only its own stretch of shards, each
window is read ahead as sorted runs; windows of about 256 MB; orders depend on (seed, epoch)
only, however many epochs one sampler serves, and a sampler pickles for worker processes."""

from __future__ import annotations

import itertools
import json
import pickle

import numpy as np
import pytest

from packer.reading.position import Pass
from packer.reading.sampler import Sampler, window_length

SHARDS = [9, 12, 7, 12, 10]  # records per shard: 50
OFFSETS = np.cumsum([0, *SHARDS])


def sampler(window: int, **options) -> Sampler:
    return Sampler(SHARDS, 4, "windows", seed=5, window=window, uneven="allow", **options)


def shard_order(order: np.ndarray) -> list[int]:
    """The shards in the order an unshuffled-within-windows order visits them."""
    shards = np.searchsorted(OFFSETS, order, side="right") - 1
    return [int(s) for k, s in enumerate(shards) if k == 0 or s != shards[k - 1]]


def test_windows_visit_whole_shards_in_a_shuffled_order():
    visits = []
    for epoch in range(6):
        plain = sampler(1).order(epoch)  # windows of one record: the shards' records in turn
        visited = shard_order(plain)
        assert sorted(visited) == list(range(len(SHARDS)))  # each shard once, whole
        assert np.array_equal(plain, np.concatenate([np.arange(OFFSETS[s], OFFSETS[s + 1])
                                                     for s in visited]))  # fmt: skip
        visits.append(visited)
    assert len({tuple(v) for v in visits}) > 1  # the shard order changes with the epoch


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_each_rank_reads_its_own_stretch_shuffled_within_its_windows(world):
    """Rank r's samples are the r-th contiguous stretch of the shards' records (the first
    `count % world` one longer), shuffled within consecutive windows of 7 from its start."""
    for epoch in range(3):
        plain = sampler(1).order(epoch)
        stretches = np.array_split(plain, world)
        for rank, stretch in enumerate(stretches):
            part = sampler(7, rank=rank, world_size=world).order(epoch)
            assert len(part) == len(stretch)
            for start in range(0, len(part), 7):
                assert sorted(part[start : start + 7]) == sorted(stretch[start : start + 7])
            assert not np.array_equal(part, stretch)  # shuffled within its windows


def test_each_window_is_read_ahead_as_the_sorted_runs_of_its_records():
    s = sampler(7)
    order = s.order(Pass(0))
    for batch in range(s.batches(Pass(0))):
        first = batch * 4 // 7 * 7
        runs = s.window_runs(Pass(0), batch)
        covered = [i for start, stop in runs for i in range(start, stop)]
        assert covered == sorted(order[first : first + 7].tolist())  # each record once
        assert all(a[1] < b[0] for a, b in itertools.pairwise(runs))  # runs apart, ascending
    assert s.window_runs(Pass(0), 100) == []  # past the end


def test_default_window_is_about_256_mb_and_at_least_four_batches():
    assert window_length(1_000_000, 8) == 256  # records of 1 MB
    assert window_length(3 * 64 * 64 + 64 * 64, 32) == 256_000_000 // (4 * 64 * 64)
    assert window_length(500_000_000, 8) == 32  # huge records: four batches


def test_orders_depend_on_seed_and_epoch_however_many_epochs_one_sampler_serves():
    """A sampler keeps a few epochs' orders; asking for many in turn gives each epoch's own."""
    for shuffle in ("global", "windows"):
        busy = Sampler(SHARDS, 4, shuffle, seed=5, window=7)
        seen = [busy.order(epoch).copy() for epoch in range(8)] + [busy.order(0)]
        fresh = [Sampler(SHARDS, 4, shuffle, seed=5, window=7).order(e) for e in range(8)]
        assert all(np.array_equal(a, b) for a, b in zip(seen, [*fresh, fresh[0]], strict=True))
        assert not np.array_equal(fresh[0], fresh[1])


def test_a_sampler_pickles_for_worker_processes_and_gives_the_same_batches():
    s = sampler(7, rank=1, world_size=2)
    s.order(0)  # a cached order and a lock: neither travels
    copy = pickle.loads(pickle.dumps(s))
    assert [copy.batch(Pass(0), b).tolist() for b in range(len(copy))] == [
        s.batch(Pass(0), b).tolist() for b in range(len(s))
    ]
    copy.order(1)  # its own lock works


def test_a_rank_outside_the_world_is_refused():
    for rank, world in ((2, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match=r"rank must be within 0\.\.world_size-1"):
            sampler(7, rank=rank, world_size=world)


def test_saved_states_of_this_and_the_first_version_keep_loading():
    """States live in files between runs: one of this version (passes) and one of version 1
    (batches of one layout) load as the position they name, in another world size."""
    v2 = {"version": 2, "epoch": 3, "seed": 5, "shuffle": "global", "count": 50,
          "passes": [[2, 8]], "consumed": 16, "batch_size": 4, "rank": 0}  # fmt: skip
    v1 = {"version": 1, "epoch": 3, "seed": 5, "shuffle": "global", "count": 50,
          "batches": 2, "batch_size": 4, "world_size": 2}  # fmt: skip
    rest = Sampler(SHARDS, 4, "global", seed=5).order(3)[16:]
    for state in (v2, v1):
        s = Sampler(SHARDS, 4, "global")
        p = s.load_state_dict(state)
        assert p == Pass(3, ((1, 16),)) and s.seed == 5
        assert np.array_equal(s.order(p), rest)
    saved = Sampler(SHARDS, 4, "global", seed=5).state_dict(Pass(3), np.int64(4))
    assert json.loads(json.dumps(saved)) == saved | {"passes": [[1, 16]], "consumed": 16}
    assert saved["version"] == 2


@pytest.mark.parametrize("epoch, passes", [(0, []), (0, [[0, 3]]), (0, [[2, -1]]), (-1, [[2, 3]])])
def test_a_state_out_of_range_is_refused_with_the_reason(epoch, passes):
    state = {"version": 2, "epoch": epoch, "seed": 5, "shuffle": "global", "count": 50,
             "passes": passes}  # fmt: skip
    with pytest.raises(ValueError, match="state position out of range"):
        Sampler(SHARDS, 4, "global").load_state_dict(state)


def test_a_position_that_leaves_this_layout_nothing_starts_the_next_epoch():
    """One sample left for two ranks that drop what does not divide: the next epoch."""
    state = {"version": 2, "epoch": 3, "seed": 5, "shuffle": "global", "count": 50,
             "passes": [[1, 49]]}  # fmt: skip
    s = Sampler(SHARDS, 4, "global", world_size=2, uneven="drop")
    assert s.load_state_dict(state) == Pass(4)
    with pytest.raises(IndexError, match="out of range"):
        s.batch(Pass(4), s.batches(Pass(4)))  # one batch past the end


def test_a_pass_asked_again_after_a_state_with_another_seed_gets_that_seeds_order():
    """The sampler finds the last pass's order by identity; a loaded state's seed must not
    leave the old seed's order behind for the same Pass object."""
    s = Sampler(SHARDS, 4, "global", seed=1)
    p = Pass(2)
    first = s.order(p).copy()
    other = Sampler(SHARDS, 4, "global", seed=7)
    s.load_state_dict(other.state_dict(Pass(0), 0))
    assert s.order(p) is s.order(p)
    assert not np.array_equal(s.order(p), first)
    assert np.array_equal(s.order(p), other.order(Pass(2)))
    with pytest.raises(IndexError):
        s.batch(p, len(s))
    assert np.array_equal(s.batch(p, len(s) - 1), other.order(Pass(2))[4 * (len(s) - 1) :])


@pytest.mark.parametrize("drop", [False, True])
def test_batch_indices_end_where_the_batch_count_says(drop):
    s = Sampler(SHARDS, 4, "global", drop_remainder=drop)  # 50 records: 12 whole batches + 2
    assert s.batches(Pass(0)) == (12 if drop else 13)
    assert [len(s.batch(Pass(0), i)) for i in range(s.batches(Pass(0)))][-1] == (4 if drop else 2)
    for index in (-1, s.batches(Pass(0))):
        with pytest.raises(IndexError):
            s.batch(Pass(0), index)

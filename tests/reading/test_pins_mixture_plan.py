"""Exact draw counts of a mixture's epochs, written out by hand: proportions share the epoch
as MosaicML Streaming's do where the shares are whole (each pack epoch_size x its proportion
over their sum); a fractional rest goes to the largest remainders, ties to the earlier pack
(packer's own deterministic rule). Fractional repeats take round(repeat x size) draws and walk
one endless stream of permutations, so a repeat is split across epochs and every sample comes
as often as the repeats say."""

from __future__ import annotations

import numpy as np
import pytest

from packer.errors import MixtureError
from packer.reading.mixture_plan import (
    Plan,
    draws,
    independent_longest_run,
    longest_run_bound,
    longest_runs,
    permutations,
)


def test_proportions_share_an_epoch_exactly():
    # Streaming's choose = epoch_size * proportion / sum(proportions), when it is whole
    assert draws([10, 20, 30], [("proportion", 0.5), ("proportion", 0.25),
                                ("proportion", 0.25)], None) == [30, 15, 15]  # fmt: skip
    assert draws([5, 5], [("proportion", 3), ("proportion", 1)], 8) == [6, 2]
    # a remainder: 7 x (0.5, 0.3, 0.2) = 3.5, 2.1, 1.4 -> floors 3, 2, 1, the last draw to
    # the largest remainder (0.5)
    assert draws([9, 9, 9], [("proportion", 0.5), ("proportion", 0.3),
                             ("proportion", 0.2)], 7) == [4, 2, 1]  # fmt: skip
    # 3 x (0.2, 0.4, 0.4) = 0.6, 1.2, 1.2 -> floors 0, 1, 1, the last to 0.6
    assert draws([9, 9, 9], [("proportion", 0.2), ("proportion", 0.4),
                             ("proportion", 0.4)], 3) == [1, 1, 1]  # fmt: skip
    # ties go to the earlier pack: 4 / 3 each -> 2, 1, 1; 5 / 3 each -> 2, 2, 1
    equal = [("proportion", 1)] * 3
    assert draws([9, 9, 9], equal, 4) == [2, 1, 1]
    assert draws([9, 9, 9], equal, 5) == [2, 2, 1]
    assert sum(draws([9, 9, 9], equal, 100)) == 100


def test_fixed_packs_and_proportions_share_an_epoch():
    """repeat 2 of 5 and choose 3 fix 13 draws; a proportion of 0.35 makes them 65% of the
    epoch (20), the rest (7) its own; with epoch_size the proportions share what is left."""
    amounts = [("repeat", 2), ("choose", 3), ("proportion", 0.35)]
    assert draws([5, 8, 40], amounts, None) == [10, 3, 7]
    assert draws([5, 8, 40], amounts, 13 + 9) == [10, 3, 9]
    assert draws([5, 8, 40], [("repeat", 2), ("choose", 3), None], None) == [10, 3, 40]
    # the fixed packs alone may fill an epoch exactly, leaving none to the proportion
    assert draws([5, 8, 40], amounts, 13) == [10, 3, 0]


@pytest.mark.parametrize(
    ("size", "repeat", "count"), [(8, 0.5, 4), (4, 1.5, 6), (4, 2.25, 9), (10, 0.3, 3), (7, 1, 7)]
)
def test_a_fractional_repeat_takes_repeat_times_size_draws(size, repeat, count):
    assert draws([size], [("repeat", repeat)], None) == [count]
    assert draws([size, 3], [("repeat", repeat), ("choose", 2)], None) == [count, 2]


@pytest.mark.parametrize(
    ("amounts", "epoch_size", "message"),
    [
        ([("repeat", 1), ("proportion", 1.0)], None, "add up to 1, leaving nothing"),
        ([("choose", 0), ("choose", 0)], None, "needs at least one sample, not 0"),
        ([("choose", 3), ("proportion", 1)], 0, "needs at least one sample, not 0"),
        ([("choose", 3), ("choose", 2)], 6, "take 5 samples: give a proportion to some pack"),
        ([("choose", 3), ("proportion", 1)], 2, "take 3 samples: or leave epoch_size out"),
    ],
)
def test_amounts_that_cannot_make_an_epoch_are_refused(amounts, epoch_size, message):
    with pytest.raises(MixtureError, match=message):
        draws([10, 10], amounts, epoch_size)


def counts_over(plan: Plan, seed: int, epochs: range) -> list[np.ndarray]:
    """Per pack, how often each sample was drawn over `epochs`."""
    totals = [np.zeros(n, int) for n in plan.sizes]
    for epoch in epochs:
        ids = plan.order(seed, epoch)
        assert len(set(ids.tolist())) == len(ids) == plan.count  # ids unique in an epoch
        _, pack, sample = plan.locate(ids)
        for k in range(len(plan.sizes)):
            totals[k] += np.bincount(sample[pack == k], minlength=plan.sizes[k])
    return totals


def test_fractional_repeats_walk_one_stream_of_permutations_across_epochs():
    """repeat 0.3 of 10 (3 draws an epoch: epoch 3 straddles two repeats), 2.5 of 4 (10 an
    epoch), and 1.5 of 2 upsampled past the looped repeats (3 an epoch)."""
    sizes = [10, 4, 2]
    plan = Plan(sizes, draws(sizes, [("repeat", 0.3), ("repeat", 2.5), ("repeat", 1.5)], None))
    assert plan.draws == [3, 10, 3] and plan.count == 16
    assert plan.repeats == max(-(-3 // 10), -(-10 // 4), -(-3 // 2)) + 1 == 4
    totals = counts_over(plan, 7, range(10))  # 30 draws of pack 0: three whole repeats
    assert totals[0].tolist() == [3] * 10
    assert totals[1].tolist() == [25] * 4  # 100 draws, 25 repeats
    assert totals[2].tolist() == [15, 15]
    # epochs 0..2 take pack 0's repeat 0 but one sample, epoch 3 its last and two of repeat 1
    firsts = [plan.locate(plan.order(7, e)) for e in range(4)]
    seen = np.concatenate([s[p == 0] for _, p, s in firsts[:3]])
    assert len(set(seen.tolist())) == 9
    reps, packs, samples = firsts[3]
    assert sorted(reps[packs == 0].tolist()) == [0, 1, 1]
    assert samples[(packs == 0) & (reps == 0)][0] not in seen  # repeat 0's tenth sample
    # pack 0's draws in stream order are repeat after repeat, each a permutation
    stream = np.concatenate([plan._pack_ids(0, 10, 3, 7, e, True) for e in range(10)])
    rows = plan.locate(stream)[2].reshape(3, 10)
    assert all(sorted(row.tolist()) == list(range(10)) for row in rows)
    assert len({tuple(row.tolist()) for row in rows}) == 3


def test_many_repeats_in_an_epoch_are_each_a_permutation_of_their_own():
    """repeat 20 of 3 draws 60 an epoch (21 repeats touched > 16): made at once from hashed
    keys, still a pure function of (seed, pack, repeat)."""
    plan = Plan([3, 5], draws([3, 5], [("repeat", 20), None], None))
    assert plan.draws == [60, 5]
    totals = counts_over(plan, 1, range(2))
    assert totals[0].tolist() == [40, 40, 40] and totals[1].tolist() == [2] * 5
    rows = permutations(1, 0, np.arange(4, 8), 3, True)
    assert all(sorted(r.tolist()) == [0, 1, 2] for r in rows)
    np.testing.assert_array_equal(permutations(1, 0, np.array([6]), 3, True)[0], rows[2])
    np.testing.assert_array_equal(permutations(1, 0, np.array([6]), 3, False)[0],
                                  np.random.default_rng([1, 0, 6]).permutation(3))  # fmt: skip
    assert not np.array_equal(permutations(1, 0, np.arange(64), 6, True),
                              permutations(1, 1, np.arange(64), 6, True))  # fmt: skip


def test_an_unshuffled_epoch_takes_each_pack_in_sample_order_from_where_it_left_off():
    plan = Plan([5, 4], [3, 2])
    for epoch, (first, second) in enumerate([([0, 1, 2], [0, 1]), ([3, 4, 0], [2, 3]),
                                             ([1, 2, 3], [0, 1])]):  # fmt: skip
        _, pack, sample = plan.locate(plan.order(0, epoch, shuffled=False))
        assert sample[pack == 0].tolist() == first
        assert sample[pack == 1].tolist() == second
        assert pack.tolist() == [0, 1, 0, 1, 0]  # strata at (j + 0.5) / d


def test_a_pack_with_no_draws_is_left_out_of_the_epoch():
    plan = Plan([4, 6], [0, 5])
    _, pack, sample = plan.locate(plan.order(3, 0))
    assert set(pack.tolist()) == {1} and sorted(sample.tolist()) == sorted(set(sample.tolist()))


def test_a_plan_survives_pickling_and_names_itself_by_sizes_and_draws():
    import pickle

    plan = Plan([4, 6], [2, 5])
    again = pickle.loads(pickle.dumps(plan))
    assert again.key == [[4, 2], [6, 5]] == plan.key
    np.testing.assert_array_equal(again.order(1, 2), plan.order(1, 2))
    assert plan.order(1, 2) is plan.order(1, 2)  # cached
    for epoch in range(6):  # more epochs than the cache keeps: each still the same order
        plan.order(1, epoch)
    np.testing.assert_array_equal(plan.order(1, 2), again.order(1, 2))


def test_run_lengths_and_their_bounds():
    assert longest_runs(np.array([0, 0, 1, 1, 1, 0, 2, 2, 0]), 4) == [2, 3, 2, 0]
    assert longest_runs(np.array([], int), 2) == [0, 0]
    assert longest_run_bound([10, 3], 0) == 2 + 20 // 3
    assert longest_run_bound([10, 3, 0], 1) == 2 + 0
    assert longest_run_bound([7, 0], 0) == 7
    assert independent_longest_run(1.0, 50) == 50.0
    assert independent_longest_run(0.0, 50) == 0.0
    assert independent_longest_run(0.5, 64) == pytest.approx(5.0)  # log2(32)
    assert independent_longest_run(0.5, 2) == 1.0


def test_an_epoch_of_one_draw():
    assert draws([5, 3], [("choose", 1), ("choose", 0)], None) == [1, 0]
    assert draws([5, 3], [("proportion", 1), ("proportion", 1)], 1) == [1, 0]


def test_orders_depend_on_the_seed_and_the_epoch():
    """The permutations (both ways of making them) and the packs' interleave each change
    with the seed; the interleave changes with the epoch too."""
    for many in (False, True):
        rows = [permutations(seed, 0, np.arange(8), 12, many) for seed in (1, 2, 3)]
        assert not np.array_equal(rows[0], rows[1]) and not np.array_equal(rows[1], rows[2])
    plan = Plan([6, 6], [6, 6])

    def interleave(seed, epoch):
        return tuple(plan.locate(plan.order(seed, epoch))[1].tolist())

    assert len({interleave(seed, 0) for seed in range(6)}) > 2
    assert len({interleave(0, epoch) for epoch in range(6)}) > 2


@pytest.mark.parametrize("many", [False, True])
def test_permutations_are_uniform(many):
    """Over 1200 repeats of 6 samples, each sample lands first about 1/6 of the time (a
    degenerate hash would leave samples near their own places)."""
    rows = permutations(11, 2, np.arange(1200), 6, many)
    first = np.bincount(rows[:, 0], minlength=6)
    assert (np.abs(first - 200) < 60).all(), first
    assert len({tuple(r) for r in rows.tolist()}) > 500  # of 720 orders

"""A mixture's epoch plans, without packs: draws per pack (proportion, repeat, choose, epoch
size), each pack's samples shuffled and repeated as asked, packs spread through the epoch, and
amounts that cannot be met refused in one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from packer.errors import MixtureError
from packer.reading.mixture import Mixture, Stream
from packer.reading.mixture_plan import (
    Plan,
    draws,
    independent_longest_run,
    longest_run_bound,
    longest_runs,
)

SIZES = [1000, 300, 40]


def plan_of(amounts, epoch_size=None, sizes=SIZES) -> Plan:
    return Plan(list(sizes), draws(list(sizes), amounts, epoch_size))


def packs_and_samples(plan: Plan, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    _, pack, sample = plan.locate(plan.order(seed, epoch))
    return pack, sample


def test_draws_follow_proportion_repeat_and_choose():
    assert draws(SIZES, [None, None, None], None) == SIZES  # each pack once
    # repeat and choose fix 960 samples, which the proportion 0.7 leaves as 30% of the epoch
    assert draws(SIZES, [("proportion", 0.7), ("repeat", 3), ("choose", 60)], None) == [
        2240,
        900,
        60,
    ]
    assert draws(SIZES, [("proportion", 3), ("proportion", 1), None], 1000) == [720, 240, 40]
    assert draws(SIZES, [("proportion", 1), ("proportion", 1), ("proportion", 2)], None) == [
        335,
        335,
        670,  # every pack a proportion: the packs' total size, shared 1:1:2
    ]
    assert draws(SIZES, [("repeat", 0.5), ("repeat", 1.5), ("choose", 7)], None) == [500, 450, 7]


@pytest.mark.parametrize(
    ("amounts", "epoch_size", "message"),
    [
        ([("proportion", 0.7), ("proportion", 0.5), None], None, "add up to 1.2"),
        ([None, None, None], 10, "epoch_size=10, but the packs' repeat/choose take 1340"),
        ([("proportion", 0.5), ("choose", 500), None], 100, "take 540 samples"),
    ],
)
def test_amounts_that_cannot_be_met_are_refused_in_one_line(amounts, epoch_size, message):
    with pytest.raises(MixtureError, match=message) as error:
        draws(SIZES, amounts, epoch_size)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"proportion": 0.5, "repeat": 2}, "at most one of proportion, repeat and choose"),
        ({"proportion": 0}, "proportion must be a number above 0"),
        ({"repeat": float("nan")}, "repeat must be a number above 0"),
        ({"choose": 2.5}, "choose must be a whole number"),
    ],
)
def test_streams_that_say_too_much_or_nonsense_are_refused(kwargs, message):
    with pytest.raises(MixtureError, match=message) as error:
        Stream("some-pack", **kwargs)
    assert "\n" not in str(error.value)
    with pytest.raises(MixtureError, match="epoch_size must be a whole number"):
        Mixture([Stream("a")], epoch_size=0)


def test_the_order_is_a_function_of_seed_epoch_and_mixture_only():
    plan = plan_of([("proportion", 0.5), ("repeat", 2), None])
    again = plan_of([("proportion", 0.5), ("repeat", 2), None])
    assert np.array_equal(plan.order(3, 1), again.order(3, 1))
    assert not np.array_equal(plan.order(3, 1), plan.order(3, 2))
    assert not np.array_equal(plan.order(3, 1), plan.order(4, 1))
    ids = plan.order(3, 1)
    assert len(np.unique(ids)) == len(ids) == plan.count  # a draw's id is unique in its epoch


def test_a_repeat_1_pack_shows_every_sample_once_per_epoch_each_epoch_in_a_new_order():
    plan = plan_of([None, ("proportion", 0.8), ("choose", 100)], epoch_size=3000)
    orders = []
    for epoch in range(3):
        pack, sample = packs_and_samples(plan, 7, epoch)
        mine = sample[pack == 0]
        assert sorted(mine.tolist()) == list(range(SIZES[0]))
        orders.append(mine)
    assert not np.array_equal(orders[0], orders[1])
    assert not np.array_equal(orders[0], np.arange(SIZES[0]))  # shuffled, not pack order


def test_repeats_appear_as_often_as_asked_each_in_a_new_order():
    plan = plan_of([("repeat", 3), ("repeat", 0.5), ("repeat", 1.5)])
    pack, sample = packs_and_samples(plan, 1, 0)
    counts = np.bincount(sample[pack == 0], minlength=SIZES[0])
    assert set(counts.tolist()) == {3}  # upsampled: each exactly three times
    rep = plan.locate(plan.order(1, 0))[0][pack == 0]
    repeats = [sample[pack == 0][rep == r] for r in range(3)]
    assert all(sorted(r.tolist()) == list(range(SIZES[0])) for r in repeats)
    assert len({tuple(r.tolist()) for r in repeats}) == 3  # three different orders
    halves = [sample[pack == 1] for pack, sample in [packs_and_samples(plan, 1, e) for e in (0, 1)]]
    assert len(halves[0]) == 150 and len(set(halves[0].tolist())) == 150
    assert sorted(np.concatenate(halves).tolist()) == list(range(300))  # two epochs: the pack
    pack, sample = packs_and_samples(plan, 1, 0)
    counts = np.bincount(sample[pack == 2], minlength=40)
    assert set(counts.tolist()) == {1, 2} and counts.sum() == 60  # 1.5: once or twice, no more


def test_choose_is_exact_every_epoch():
    plan = plan_of([("choose", 123), ("choose", 1), ("choose", 77)])
    for epoch in range(4):
        pack, _ = packs_and_samples(plan, 0, epoch)
        assert np.bincount(pack).tolist() == [123, 1, 77]


def test_proportions_hold_within_binomial_tolerance_in_every_window_of_several_epochs():
    """Not only per epoch (exact by construction): every 64 consecutive draws hold each pack
    within 3 binomial standard deviations of its share (independent draws would not always)."""
    shares = [0.6, 0.3, 0.1]
    plan = plan_of([("proportion", p) for p in shares], epoch_size=5000)
    window = 64
    for epoch in range(3):
        pack, _ = packs_and_samples(plan, 11, epoch)
        assert np.bincount(pack).tolist() == [3000, 1500, 500]
        for start in range(0, len(pack) - window + 1, window):
            counts = np.bincount(pack[start : start + window], minlength=3)
            for k, p in enumerate(shares):
                tolerance = 3 * math.sqrt(window * p * (1 - p))
                assert abs(counts[k] - window * p) <= tolerance


@pytest.mark.parametrize(
    "amounts",
    [
        [("proportion", 0.5), ("proportion", 0.5), ("proportion", 0.01)],
        [("proportion", 0.9), ("proportion", 0.09), ("proportion", 0.01)],
        [None, ("repeat", 4), ("choose", 3)],
    ],
)
def test_runs_from_one_pack_stay_within_the_stratified_bound(amounts):
    plan = plan_of(amounts, epoch_size=None if amounts[0] is None else 20000)
    for epoch in range(3):
        pack, _ = packs_and_samples(plan, epoch, epoch)
        runs = longest_runs(pack, 3)
        for k in range(3):
            assert runs[k] <= longest_run_bound(plan.draws, k)
            share = plan.draws[k] / plan.count
            if 0.2 < share < 0.95:  # clearly shorter than independent draws' expected run
                assert runs[k] < independent_longest_run(share, plan.count)


def test_longest_runs_counts_consecutive_equal_entries():
    assert longest_runs(np.array([0, 0, 1, 0, 0, 0, 2, 2]), 4) == [3, 1, 2, 0]
    assert longest_run_bound([100, 100], 0) == 4
    assert independent_longest_run(0.5, 1024) == pytest.approx(9.0)


def test_ranks_get_equal_batches_of_a_mixture():
    from packer.reading.sampler import Sampler

    plan = plan_of([("proportion", 0.7), ("repeat", 1), ("choose", 5)])
    lengths = {
        len(Sampler([plan.count], 16, "global", seed=2, rank=r, world_size=3, plan=plan))
        for r in range(3)
    }
    assert len(lengths) == 1

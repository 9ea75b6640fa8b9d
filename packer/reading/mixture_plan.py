"""A mixture's epochs as plans: how many draws each pack gets, and the epoch's order of them.

Each draw is named by one integer, its id: `(offset[pack] + sample) * repeats + repeat`, where
`repeat` counts the pack's repeats from the first one this epoch touches (fewer than `repeats`).
Ids are unique within an epoch (a repeat draws each sample once), so the sampler's machinery
(rank parts, positions, resume) and the augmentation draw (keyed by id) work on them as on one
pack's sample indices, and sorting a batch's ids sorts its rows by pack and then sample, so each
pack's rows are one run in ascending sample order, which its reader fills directly in one call.

A pack's draws over the epochs are one endless stream of repeats, each a new permutation of its
samples keyed by (seed, pack, repeat): epoch e takes draws e*d .. (e+1)*d-1 of it, so repeat=1
shows every sample once per epoch, repeat=0.5 covers the pack every two epochs and repeat=3
shows each sample three times, in three orders. Packs are merged by a stratified interleave:
draw j of a pack with d draws sits at (j + u) / d, u uniform in [0, 1), so every pack is spread
evenly through the epoch and a run from one pack stays short (see `longest_run_bound`).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..errors import MixtureError

_CACHED = 4  # epoch plans kept: parallel readers may straddle an epoch boundary
_LOOPED_REPEATS = 16  # repeats per epoch up to which each is its own NumPy permutation
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-mixed uint64 per input (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def permutations(seed: int, pack: int, repeats: np.ndarray, size: int, many: bool) -> np.ndarray:
    """Row r: the permutation of `size` samples of repeat `repeats[r]` of pack `pack`, a pure
    function of (seed, pack, repeat), so a repeat split across two epochs is one order. A pack
    whose epochs touch `many` repeats (a small pack upsampled) has them all made at once from
    hashed keys; others one by one by NumPy's permutation (5x faster per sample)."""
    if not many:
        return np.stack(
            [np.random.default_rng([seed % 2**63, pack, int(r)]).permutation(size) for r in repeats]
        )
    base = _mix64(_mix64(np.uint64(seed % 2**64)) ^ np.uint64(pack))
    rows = _mix64(base ^ np.asarray(repeats, np.uint64))
    keys = _mix64(rows[:, None] ^ np.arange(size, dtype=np.uint64)[None, :])
    return np.argsort(keys, axis=1, kind="stable")


def draws(
    sizes: list[int], amounts: list[tuple[str, float] | None], epoch_size: int | None
) -> list[int]:
    """Draws per pack per epoch. `repeat` and `choose` fix a pack's count (none: its size
    once); `proportion` packs share the rest of the epoch in the ratio of their proportions.
    Without `epoch_size` the epoch is the packs' total size when every pack has a proportion,
    else the fixed counts over one minus the proportions (each proportion then being its pack's
    share of the epoch)."""
    fixed = [_fixed(n, a) for n, a in zip(sizes, amounts, strict=True)]
    shares = {k: a[1] for k, a in enumerate(amounts) if a is not None and a[0] == "proportion"}
    taken = sum(c for c in fixed if c is not None)
    if epoch_size is None:
        if not shares:
            epoch_size = taken
        elif len(shares) == len(sizes):
            epoch_size = sum(sizes)
        elif sum(shares.values()) >= 1:
            raise MixtureError(
                f"proportions add up to {sum(shares.values()):g}, leaving nothing for the packs "
                "with repeat/choose: make them add up to less than 1, or give epoch_size"
            )
        else:
            epoch_size = round(taken / (1 - sum(shares.values())))
    if epoch_size < 1:
        raise MixtureError(f"a mixture's epoch needs at least one sample, not {epoch_size}")
    if taken > epoch_size or (not shares and taken != epoch_size):
        raise MixtureError(
            f"epoch_size={epoch_size}, but the packs' repeat/choose take {taken} samples: "
            f"{'give a proportion to some pack, ' if not shares else ''}or leave epoch_size out"
        )
    rest = epoch_size - taken
    total = sum(shares.values())
    exact = {k: rest * p / total for k, p in shares.items()}
    counts = {k: math.floor(v) for k, v in exact.items()}
    by_remainder = sorted(exact, key=lambda k: (counts[k] - exact[k], k))  # largest first
    for k in by_remainder[: rest - sum(counts.values())]:
        counts[k] += 1
    return [counts[k] if c is None else c for k, c in enumerate(fixed)]


def _fixed(size: int, amount: tuple[str, float] | None) -> int | None:
    if amount is None:
        return size
    kind, value = amount
    if kind == "choose":
        return int(value)
    if kind == "repeat":
        return round(value * size)
    return None


def longest_run_bound(draws: list[int], pack: int) -> int:
    """The longest run of consecutive draws from `pack` a stratified plan can hold: 2 plus
    twice its draws per draw of the largest other pack (any interval of two strata of that
    pack holds one of its draws)."""
    others = [d for k, d in enumerate(draws) if k != pack and d]
    if not others:
        return draws[pack]
    return 2 + math.floor(2 * draws[pack] / max(others))


def independent_longest_run(share: float, length: int) -> float:
    """The longest run of one pack expected when every draw picks a pack independently with
    its share (Erdős-Rényi: about log base 1/share of length * (1 - share))."""
    if share >= 1:
        return float(length)
    if share <= 0:
        return 0.0
    return max(1.0, math.log(max(length * (1 - share), 1.0)) / math.log(1 / share))


def longest_runs(packs: np.ndarray, count: int) -> list[int]:
    """Per pack, the longest run of consecutive entries of `packs` (pack numbers) equal to it."""
    longest = [0] * count
    if not len(packs):
        return longest
    cuts = np.flatnonzero(np.diff(packs)) + 1
    starts = np.concatenate([[0], cuts])
    lengths = np.diff(np.concatenate([starts, [len(packs)]]))
    for k in range(count):
        mine = lengths[packs[starts] == k]
        longest[k] = int(mine.max()) if len(mine) else 0
    return longest


@dataclass
class Plan:
    """The epochs of one mixture over one split: pack sizes and draws per epoch. `order(seed,
    epoch, shuffled)` is the epoch's ids in order; `key` names the plan in a reading state
    (its sizes and draws: a resume needs the same, wherever the packs now live)."""

    sizes: list[int]
    draws: list[int]
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.offsets = np.cumsum([0, *self.sizes]).astype(np.int64)
        self.count = int(sum(self.draws))
        # an epoch touches at most ceil(d/n) + 1 repeats of a pack (it may start mid-repeat)
        self.repeats = max(-(-d // n) + 1 for n, d in zip(self.sizes, self.draws, strict=True))

    def __getstate__(self) -> dict:
        return {"sizes": self.sizes, "draws": self.draws}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["sizes"], state["draws"])

    @property
    def key(self) -> list[list[int]]:
        return [[n, d] for n, d in zip(self.sizes, self.draws, strict=True)]

    def order(self, seed: int, epoch: int, shuffled: bool = True) -> np.ndarray:
        """The ids of epoch `epoch`, in the order the epoch visits them."""
        name = (int(seed), int(epoch), bool(shuffled))
        with self._lock:
            if name in self._cache:
                return self._cache[name]
        ids, keys = [], []
        for k, (n, d) in enumerate(zip(self.sizes, self.draws, strict=True)):
            if not d:
                continue
            ids.append(self._pack_ids(k, n, d, *name))
            u = np.random.default_rng([name[0] % 2**63, name[1], k]).random(d) if shuffled else 0.5
            keys.append((np.arange(d) + u) / d)
        merged = np.concatenate(ids)[np.argsort(np.concatenate(keys), kind="stable")]
        with self._lock:
            self._cache[name] = merged
            while len(self._cache) > _CACHED:
                self._cache.popitem(last=False)
        return merged

    def _pack_ids(self, k: int, n: int, d: int, seed: int, epoch: int, shuffled: bool):
        """Pack k's draws of the epoch, as ids, in its own order (repeat after repeat)."""
        start = epoch * d
        first, last = start // n, (start + d - 1) // n
        repeats = np.arange(first, last + 1)
        rows = (
            permutations(seed, k, repeats, n, -(-d // n) + 1 > _LOOPED_REPEATS)
            if shuffled
            else np.broadcast_to(np.arange(n), (len(repeats), n))
        )
        samples = rows.reshape(-1)[start - first * n : start - first * n + d]
        repeat = (np.arange(d) + (start - first * n)) // n
        return (self.offsets[k] + samples) * self.repeats + repeat

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(repeat, pack, sample) of each id."""
        whole, repeat = np.divmod(np.asarray(ids, np.int64), self.repeats)
        pack = np.searchsorted(self.offsets, whole, side="right") - 1
        return repeat, pack, whole - self.offsets[pack]

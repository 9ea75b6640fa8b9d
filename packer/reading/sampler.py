"""Which samples each batch of an epoch holds: seeded epoch orders, shard windows, batches.

A uniform shuffle reads records all over the disk: fine while the pack sits in the page
cache, slow from a cold disk. The windowed order visits shards in a shuffled order and
shuffles only inside consecutive windows of records, so each window is one long sequential
read (which a reader can prefetch) and batches still mix many samples. Orders depend only on
(seed, epoch), so any process that builds the same sampler agrees on every batch. A reading
position is a place in the epoch's global order (`position.Pass`), so a state saved by one
layout (world size, batch size, workers, reader) resumes in another, exactly.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .position import MAX_PASSES, Pass, collapse, consume, rank_part

if TYPE_CHECKING:
    from .mixture_plan import Plan as MixturePlan

WINDOW_BYTES = 256 * 1000 * 1000  # records per window: about this many bytes
RAM_SHARE = 0.5  # a split larger than this share of RAM is read in windows by default
SHUFFLE_MODES = (True, False, "global", "windows")


def window_length(record_bytes: int, batch_size: int) -> int:
    """Records per window: about WINDOW_BYTES, and at least a few batches."""
    return max(4 * batch_size, WINDOW_BYTES // max(1, record_bytes))


def larger_than_ram(total_bytes: int) -> bool:
    """Whether a split would not stay in the page cache (Linux; False where RAM is unknown)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return False
    return total_bytes > RAM_SHARE * ram


def uniform(count: int, rng: np.random.Generator) -> np.ndarray:
    """A uniform permutation of the split's sample indices."""
    return rng.permutation(count)


def windowed(
    shard_counts: list[int], window: int, rng: np.random.Generator, parts: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Shards in a random order, cut into `parts` contiguous parts of near-equal length (the
    first `count % parts` one longer), each shuffled within its own consecutive windows of
    `window`. Returns the order and the parts' bounds; part r holds order[bounds[r]:bounds[r+1]].
    """
    offsets = np.cumsum([0, *shard_counts])
    order = np.concatenate(
        [np.arange(offsets[s], offsets[s + 1]) for s in rng.permutation(len(shard_counts))]
        or [np.zeros(0, np.int64)]
    )
    size, rest = divmod(len(order), parts)
    bounds = np.cumsum([0] + [size + (r < rest) for r in range(parts)])
    for first, last in itertools.pairwise(bounds):
        for start in range(first, last, window):
            rng.shuffle(order[start : min(start + window, last)])
    return order, bounds


def runs(members: np.ndarray) -> list[tuple[int, int]]:
    """Sample indices as sorted runs of consecutive indices: (start, stop) each."""
    members = np.sort(members)
    if not len(members):
        return []
    cuts = np.flatnonzero(np.diff(members) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(members, cuts)]


UNEVEN_MODES = ("pad", "drop", "allow")
STATE_VERSION = 2
_CACHED = 4  # pass orders kept: parallel readers may straddle an epoch boundary


@dataclass
class Sampler:
    """Epoch orders and batches of one split, for one of `world_size` ranks.

    `shuffle`: False (pack order), "global" (a uniform permutation per epoch) or "windows"
    (shuffled shards, shuffled within windows of `window` records). Every rank gets a
    disjoint part of each epoch and together they cover the split. Unshuffled and "global",
    ranks take every `world_size`-th sample of the epoch's order; "windows" cuts the epoch's
    shard order into one contiguous part per rank, so a rank reads only its own stretch of
    shards (sharing at most a boundary shard with a neighbour, never its records). When the
    split does not divide evenly, `uneven="pad"` repeats a few samples and `"drop"` leaves a
    few out, so every rank gets the same number of batches (uneven counts hang distributed
    training); `"allow"` gives the first ranks one sample more (for tf.distribute, which
    handles partial batches). A pass (`position.Pass`) is an epoch, or what a resumed reader
    has left of one; batches are numbered within it.
    """

    shard_counts: list[int]
    batch_size: int
    shuffle: bool | str = "global"
    seed: int = 0
    window: int = 0
    drop_remainder: bool = False
    rank: int = 0
    world_size: int = 1
    uneven: str = "pad"
    plan: MixturePlan | None = None  # a mixture's: its epoch orders, of draws' ids
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # (pass, its order) last asked for: every batch of a pass asks again, and a reader keeps
    # one Pass object for its pass, so `is` finds it without hashing or locking
    _last: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        if self.shuffle not in (False, "global", "windows"):
            raise ValueError(f"shuffle must be False, 'global' or 'windows', not {self.shuffle!r}")
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(
                f"rank must be within 0..world_size-1, got rank={self.rank} of {self.world_size}"
            )
        if self.uneven not in UNEVEN_MODES:
            raise ValueError(f"uneven must be one of {UNEVEN_MODES}, not {self.uneven!r}")
        self.count = int(sum(self.shard_counts))
        self.window = self.window or self.count or 1
        self.strided = self.shuffle != "windows"

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"], state["_lock"], state["_last"] = OrderedDict(), None, None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def __len__(self) -> int:
        """Batches of a whole epoch (of this rank)."""
        return self.batches(Pass(0))

    def batches(self, p: Pass) -> int:
        """Batches of pass `p`."""
        whole, rest = divmod(len(self.order(p)), self.batch_size)
        return whole + (1 if rest and not self.drop_remainder else 0)

    def order(self, p: Pass | int) -> np.ndarray:
        """This rank's sample indices, in the order pass `p` (or a whole epoch) visits them."""
        last = self._last
        if last is not None and last[0] is p:
            return last[1]
        p = Pass(p) if isinstance(p, int) else p
        with self._lock:
            if p not in self._cache:
                self._cache[p] = self._make_order(p)
                while len(self._cache) > _CACHED:
                    self._cache.popitem(last=False)
            order = self._cache[p]
            self._last = (p, order)
            return order

    def _make_order(self, p: Pass) -> np.ndarray:
        epoch_order = self.epoch_order(p)
        remaining = epoch_order
        for world, per_rank in p.before:
            remaining = consume(self.strided, remaining, world, per_rank)
        part = rank_part(
            self.strided, remaining, epoch_order, self.world_size, self.rank, self.uneven
        )
        return part[p.offset :]

    def epoch_order(self, p: Pass) -> np.ndarray:
        """The epoch's global order (windows: cut for the world size of its first pass)."""
        if self.plan is not None:  # a mixture: the plan shuffles and interleaves its packs
            return self.plan.order(self.seed, p.epoch, bool(self.shuffle))
        if not self.shuffle:
            return np.arange(self.count)
        rng = np.random.default_rng([self.seed, p.epoch])
        if self.strided:
            return rng.permutation(self.count)
        parts = p.before[0][0] if p.before else self.world_size
        return windowed(self.shard_counts, p.window or self.window, rng, parts)[0]

    def batch(self, p: Pass, index: int) -> np.ndarray:
        """Sample indices of batch `index` of pass `p`."""
        order = self.order(p)
        start = index * self.batch_size
        if (
            index < 0
            or start >= len(order)
            or (self.drop_remainder and start + self.batch_size > len(order))
        ):
            raise IndexError(f"batch {index} out of range ({self.batches(p)} batches)")
        return order[start : start + self.batch_size]

    def window_runs(self, p: Pass, index: int) -> list[tuple[int, int]]:
        """The window of pass `p` that batch `index` starts in, as sorted runs of consecutive
        indices (to read ahead); empty past the end."""
        first = index * self.batch_size // self.window * self.window
        return runs(self.order(p)[first : first + self.window])

    def state_dict(self, p: Pass, batches: int) -> dict:
        """The position "`batches` batches of pass `p` done" in the epoch's global order, with
        the seed and shuffle mode that fix that order (plain JSON types). The layout that read
        it (batch size, rank) is there for people; it never has to match. A whole pass done is
        the next epoch's start."""
        batches = int(batches)
        if not 0 <= batches <= self.batches(p):
            raise ValueError(f"batches must be within 0..{self.batches(p)}, got {batches}")
        if batches == self.batches(p):
            p, per_rank = Pass(p.epoch + 1), 0
        else:
            per_rank = p.offset + batches * self.batch_size
        passes = [*p.before, (self.world_size, per_rank)]
        remaining = self.epoch_order(p)
        for world, done in passes:
            remaining = consume(self.strided, remaining, world, done)
        state = {
            "version": STATE_VERSION,
            "epoch": p.epoch,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "count": self.count,
            "passes": [list(link) for link in passes],
            "consumed": self.count - len(remaining),
            "batch_size": self.batch_size,
            "rank": self.rank,
        }
        if not self.strided:
            state["window"] = p.window or self.window
        if self.plan is not None:
            state["mixture"] = self.plan.key
        return state

    def load_state_dict(self, state: dict) -> Pass:
        """The pass that continues `state` (from any reader of this split with this shuffle
        mode) in this sampler's layout; the seed is taken from the state. A ValueError says
        why a state cannot be continued."""
        state = _upgraded(state)
        for key, mine in (("count", self.count), ("shuffle", self.shuffle)):
            if state.get(key) != mine:
                raise ValueError(
                    f"the state was saved by a reader with {key}={state.get(key)!r} "
                    f"(this reader: {mine!r}), so its epoch order differs"
                )
        mixture = None if self.plan is None else self.plan.key
        if state.get("mixture") != mixture:
            raise ValueError(
                f"the state was saved by a reader of {_mixture(state.get('mixture'))}, this "
                f"reader reads {_mixture(mixture)}, so its epoch order differs"
            )
        epoch, passes = int(state["epoch"]), [tuple(map(int, p)) for p in state["passes"]]
        if epoch < 0 or not passes or any(w < 1 or c < 0 for w, c in passes):
            raise ValueError(f"state position out of range: epoch {epoch}, passes {passes}")
        world, per_rank = passes[-1]
        if len(passes) - (world == self.world_size) > MAX_PASSES:  # the passes before this one
            raise ValueError(
                f"this epoch was read in {len(passes)} layouts (at most {MAX_PASSES} before a "
                f"new one): finish it with world_size={world} before changing the world size again"
            )
        with self._lock:
            self.seed, self._cache, self._last = int(state["seed"]), OrderedDict(), None
        window = int(state.get("window", 0)) if not self.strided else 0
        if not any(c for _, c in passes):  # an epoch's start: read it all in this layout
            return Pass(epoch)
        if world == self.world_size:
            p = Pass(epoch, collapse(self.strided, passes[:-1]), per_rank, window)
        else:
            p = Pass(epoch, collapse(self.strided, passes), 0, window)
        return p if self.batches(p) else Pass(epoch + 1)


def _mixture(key: list | None) -> str:
    """A mixture's plan as a state names it (packs' sizes and draws), in words."""
    if key is None:
        return "one pack"
    return "a mixture of " + ", ".join(f"{d} draws of {n}" for n, d in key)


def _upgraded(state: dict) -> dict:
    """A state of this version; version 1 (same options only) named (epoch, batches)."""
    version = state.get("version")
    if version == 1:
        per_rank = int(state["batches"]) * int(state["batch_size"])
        return state | {"passes": [[int(state["world_size"]), per_rank]]}
    if version != STATE_VERSION:
        raise ValueError(f"not a packer reading state (version {version!r})")
    return state

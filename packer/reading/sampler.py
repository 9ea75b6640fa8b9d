"""Which samples each batch of an epoch holds: seeded epoch orders, shard windows, batches.

A uniform shuffle reads records all over the disk: fine while the pack sits in the page
cache, slow from a cold disk. The windowed order visits shards in a shuffled order and
shuffles only inside consecutive windows of records, so each window is one long sequential
read (which a reader can prefetch) and batches still mix many samples. Orders depend only on
(seed, epoch), so any process that builds the same sampler agrees on every batch, and a
reading position is just (epoch, batch): `state_dict` / `load_state_dict` carry it with the
options that fix the order, for exact mid-epoch resume.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field

import numpy as np

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
STATE_VERSION = 1
# The options a reading position depends on: a state only loads into a sampler that has them.
STATE_OPTIONS = ("count", "batch_size", "shuffle", "drop_remainder", "rank", "world_size", "uneven")


@dataclass
class Sampler:
    """Epoch orders and batches of one split, for one of `world_size` ranks.

    `shuffle`: False (pack order), "global" (a uniform permutation per epoch) or "windows"
    (shuffled shards, shuffled within windows of `window` records). Every rank gets a
    disjoint part of each epoch and together they cover the split. Unshuffled and "global",
    ranks take every `world_size`-th sample of the epoch's order; "windows" cuts the epoch's
    shard order into one contiguous part per rank, so a rank reads only its own stretch of
    shards (sharing at most a boundary shard with a neighbour, never its records). When the
    split does not divide evenly, `uneven="pad"` repeats a few of the rank's own samples and
    `"drop"` leaves a few out, so every rank gets the same number of batches (uneven counts
    hang distributed training); `"allow"` gives the first ranks one sample more (for
    tf.distribute, which handles partial batches).
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
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

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
        per_rank, rest = divmod(self.count, self.world_size)
        extra = {"pad": rest > 0, "drop": False, "allow": self.rank < rest}[self.uneven]
        self.rank_count = per_rank + int(extra)
        self.window = self.window or self.count or 1

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_cache"], state["_lock"] = {}, None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def __len__(self) -> int:
        """Batches per epoch (of this rank)."""
        whole, rest = divmod(self.rank_count, self.batch_size)
        return whole + (1 if rest and not self.drop_remainder else 0)

    def order(self, epoch: int) -> np.ndarray:
        """This rank's sample indices, in the order epoch `epoch` visits them."""
        with self._lock:
            if epoch not in self._cache:
                # This epoch and the one before: parallel readers may straddle the boundary.
                self._cache = {e: o for e, o in self._cache.items() if e == epoch - 1}
                self._cache[epoch] = self._make_order(epoch)
            return self._cache[epoch]

    def _make_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return self._strided(np.arange(self.count))
        rng = np.random.default_rng([self.seed, epoch])
        if self.shuffle == "global":
            return self._strided(rng.permutation(self.count))
        order, bounds = windowed(self.shard_counts, self.window, rng, self.world_size)
        part = order[bounds[self.rank] : bounds[self.rank + 1]]
        if self.uneven == "pad" and len(part) < self.rank_count:  # repeat its own first ones
            return np.resize(part, self.rank_count)
        return part[: self.rank_count]

    def _strided(self, order: np.ndarray) -> np.ndarray:
        """Every world_size-th sample from `rank` on, padded or cut to `rank_count`."""
        if self.world_size == 1:
            return order
        if self.uneven == "allow":
            return order[self.rank :: self.world_size]
        total = self.rank_count * self.world_size
        if total > len(order):  # pad: repeat from the start of the order
            order = np.concatenate([order, np.resize(order, total - len(order))])
        return order[:total][self.rank :: self.world_size]

    def batch(self, epoch: int, index: int) -> np.ndarray:
        """Sample indices of batch `index` of epoch `epoch`."""
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} out of range ({len(self)} batches)")
        start = index * self.batch_size
        return self.order(epoch)[start : start + self.batch_size]

    def window_of(self, index: int) -> int:
        """The window that batch `index` starts in."""
        return index * self.batch_size // self.window

    def window_runs(self, epoch: int, window: int) -> list[tuple[int, int]]:
        """Window `window` of this rank's epoch order as sorted runs of consecutive indices
        (to read ahead)."""
        return runs(self.order(epoch)[window * self.window : (window + 1) * self.window])

    def state_dict(self, epoch: int, batches: int) -> dict:
        """The reading position "`batches` batches of epoch `epoch` done", with the seed and
        the options that fix the order (plain JSON types). A whole epoch done is the next
        epoch's start."""
        epoch, batches = int(epoch), int(batches)
        if not 0 <= batches <= len(self):
            raise ValueError(f"batches must be within 0..{len(self)}, got {batches}")
        if batches == len(self):
            epoch, batches = epoch + 1, 0
        options = {k: getattr(self, k) for k in STATE_OPTIONS}
        if self.shuffle == "windows":
            options["window"] = self.window
        position = {"epoch": epoch, "batches": batches, "seed": self.seed}
        return {"version": STATE_VERSION, **position, **options}

    def load_state_dict(self, state: dict) -> tuple[int, int]:
        """Take the seed of `state` and return its (epoch, batches); the options that fix the
        order must match this sampler's (a ValueError names those that differ)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"not a packer reading state (version {state.get('version')!r})")
        names = STATE_OPTIONS + (("window",) if self.shuffle == "windows" else ())
        differ = [
            f"{k}={state.get(k)!r} (this reader: {getattr(self, k)!r})"
            for k in names
            if state.get(k) != getattr(self, k)
        ]
        if differ:
            raise ValueError(
                "the state was saved by a reader with other options, so its batches would "
                f"differ: {', '.join(differ)}"
            )
        epoch, batches = int(state["epoch"]), int(state["batches"])
        if epoch < 0 or not 0 <= batches < max(1, len(self)):
            raise ValueError(f"state position out of range: epoch {epoch}, batch {batches}")
        with self._lock:
            self.seed, self._cache = int(state["seed"]), {}
        return epoch, batches

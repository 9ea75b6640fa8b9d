"""A reading position every reader understands: how far the ranks together are through one
epoch's global order, whatever world size, batch size or worker count read it.

Each epoch has one global order of the split's samples (seeded by (seed, epoch)). A layout of
`world` ranks splits what remains of it: unshuffled and "global" orders are dealt out every
world-th sample (`strided`), so after c samples on each rank the first c*world of what
remained are consumed, however they were batched; "windows" cuts what remains into one
contiguous stretch per rank (shard locality), so the first c of every stretch are consumed. A
position is the list of passes (world, samples per rank) made in that epoch, applied in turn
to the global order: a reader with another layout splits what they left its own way, and the
ranks together read each remaining sample once. Padding that evens out the ranks comes from
the start of the epoch's order (strided) or of the rank's own stretch (windows).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

MAX_PASSES = 8  # earlier passes a reader may continue (each world-size change adds one)
_HEAD = 4  # encoded: epoch, offset, window, number of earlier passes


@dataclass(frozen=True)
class Pass:
    """One reader's pass over (the rest of) epoch `epoch`.

    `before`: earlier layouts' passes (world size, samples each rank consumed), applied to the
    epoch's order first; this reader's own split of what they left starts `offset` samples into
    each rank's part. `window` ("windows" mode): the window the epoch's order was shuffled in
    (0: the reader's own); the order is cut for the world size of the first pass.
    """

    epoch: int
    before: tuple[tuple[int, int], ...] = ()
    offset: int = 0
    window: int = 0

    def encode(self) -> list[int]:
        """Fixed-length integers (for a shared-memory tensor that worker processes read)."""
        links = [v for link in self.before for v in link]
        padding = [0] * (2 * MAX_PASSES - len(links))
        return [self.epoch, self.offset, self.window, len(self.before), *links, *padding]

    @classmethod
    def decode(cls, values: list[int]) -> Pass:
        epoch, offset, window, count = values[:_HEAD]
        links = values[_HEAD : _HEAD + 2 * count]
        return cls(epoch, tuple(zip(links[::2], links[1::2], strict=True)), offset, window)


ENCODED_LENGTH = _HEAD + 2 * MAX_PASSES


def bounds(length: int, parts: int) -> np.ndarray:
    """Cuts of `length` items into `parts` contiguous parts, the first `length % parts` longer."""
    size, rest = divmod(length, parts)
    return np.cumsum([0] + [size + (r < rest) for r in range(parts)])


def rank_count(length: int, world: int, rank: int, uneven: str) -> int:
    """Samples rank `rank` of `world` reads out of `length`: "pad" rounds up for every rank,
    "drop" down, "allow" gives the first `length % world` ranks one more."""
    per, rest = divmod(length, world)
    return per + int({"pad": rest > 0, "drop": False, "allow": rank < rest}[uneven])


def rank_part(
    strided: bool, remaining: np.ndarray, order: np.ndarray, world: int, rank: int, uneven: str
) -> np.ndarray:
    """Rank `rank`'s samples of `remaining`, evened out as `uneven` says; `order` is the
    epoch's whole order (strided padding repeats its start)."""
    if world == 1:
        return remaining
    count = rank_count(len(remaining), world, rank, uneven)
    if strided:
        if uneven == "allow":
            return remaining[rank::world]
        total = count * world
        if total > len(remaining):
            remaining = np.concatenate([remaining, np.resize(order, total - len(remaining))])
        return remaining[:total][rank::world]
    cuts = bounds(len(remaining), world)
    part = remaining[cuts[rank] : cuts[rank + 1]]
    if len(part) < count:  # pad with its own first ones (with the epoch's when it has none)
        return np.resize(part if len(part) else order, count)
    return part[:count]


def consume(strided: bool, remaining: np.ndarray, world: int, per_rank: int) -> np.ndarray:
    """What is left of `remaining` once each of `world` ranks has read `per_rank` samples."""
    if strided:
        return remaining[per_rank * world :]
    cuts = bounds(len(remaining), world)
    rest = [remaining[min(a + per_rank, b) : b] for a, b in itertools.pairwise(cuts)]
    return np.concatenate(rest) if rest else remaining[:0]


def collapse(strided: bool, passes: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Equivalent, shorter passes: strided passes only ever remove a prefix of the order, so
    they add up to one (world size 1, samples)."""
    if not strided or not passes:
        return tuple(passes)
    return ((1, sum(world * per_rank for world, per_rank in passes)),)


def agreed(states: list[dict]) -> dict:
    """The one position a list of states (one per rank, say) names, or a ValueError saying
    which two disagree."""
    keys = ("epoch", "seed", "shuffle", "count", "passes", "window", "mixture")

    def where(state: dict) -> str:
        rank = state.get("rank", "?")
        return f"epoch {state.get('epoch')}, {state.get('consumed')} consumed (rank {rank})"

    first = states[0]
    for state in states[1:]:
        if any(state.get(k) != first.get(k) for k in keys):
            raise ValueError(
                f"the states name different positions: {where(first)} against {where(state)}; "
                "resume from states saved at the same step"
            )
    return first

"""The one place packer reaches into torch's internals, because torch has no public way: a
map-style dataset is not told which sampler its `DataLoader` draws indices with, and the
`RandomSampler` of `shuffle=True` (or a `DistributedSampler`) must be refused before training
starts, not at the first out-of-order batch. Both samplers ask the dataset's length while they
are made or first iterated, from a method of their own; `refuse_reordering` looks at that
caller. Outside `SUPPORTED` torch, importing `packer.torch` fails in one line.
"""

from __future__ import annotations

import re
import sys

import torch
from torch.utils.data import DistributedSampler, RandomSampler

from ..errors import FrameworkVersionError, ReorderError

SUPPORTED = ((2, 1), (3, 0))  # torch versions tested (scripts/compat.sh): >= first, < second


def check_version(version: str = torch.__version__) -> None:
    """A one-line error when the installed torch is outside the range packer is tested with."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", version)[:2])
    low, high = SUPPORTED
    if not low <= numbers < high:
        raise FrameworkVersionError(
            f"packer.torch supports torch >={low[0]}.{low[1]},<{high[0]}.{high[1]} "
            f"(found {version}): install a torch in that range"
        )


def refuse_reordering(dataset_name: str) -> None:
    """A one-line error when the caller of the dataset's `__len__` (two frames up) is a sampler
    that would reorder or split the batches: the RandomSampler of a DataLoader's
    `shuffle=True` (its `num_samples`, when the DataLoader is made) or a DistributedSampler."""
    sampler = sys._getframe(2).f_locals.get("self")
    if isinstance(sampler, RandomSampler | DistributedSampler):
        raise ReorderError(
            f"{dataset_name} orders and shards its batches itself (seeded, resumable): give "
            f"the DataLoader shuffle=False and no {type(sampler).__name__}; shuffle with the "
            f"dataset's shuffle=, shard with its rank/world_size (default: torch.distributed's)"
        )


check_version()

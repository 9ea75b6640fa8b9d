"""The DataLoader hand-off's slots page-locked for CUDA (`cudaHostRegister`), so that
`pin_memory=True` adds no copy: a registered slot is pinned memory already, which
`Tensor.pin_memory()` returns as it is, and the copy to the GPU reads the slot directly.

Pinned memory that torch allocates is kept from reuse until the copies out of it are done (its
caching host allocator records an event). A slot is reused by its worker once the parent lets
go of it, so here the letting go waits the same way: an event recorded on the current stream
when the last view of the batch is dropped, and the slot freed once it has passed.

torch exposes `cudaHostRegister` only through `torch.cuda.cudart()`; this module is the one
place that calls it. Where CUDA is absent, or registering fails, slots stay pageable as before.
"""

from __future__ import annotations

import collections
import mmap
from collections.abc import Callable

import numpy as np
import torch

from ..reading import handoff
from ..reading.ring import Memory

_enabled = [True]


def pin_slots(enabled: bool = True) -> None:
    """Whether packer.torch registers the DataLoader hand-off's slots with CUDA (on by
    default where CUDA is available; off: the DataLoader's pin_memory copies each batch into
    pinned memory of its own, as it does for any dataset). Set before iterating."""
    _enabled[0] = bool(enabled)
    handoff.pin_with(_pinner_here)


def _pinner_here() -> SlotPinner | None:
    """A SlotPinner when pinning is on and torch sees a CUDA device, else None."""
    if not _enabled[0] or not torch.cuda.is_available():
        return None
    return SlotPinner()


def _address(mapping: mmap.mmap) -> int:
    view = np.frombuffer(mapping, np.uint8)
    try:
        return view.ctypes.data
    finally:
        del view  # a held view would keep the mapping from being closed


class SlotPinner:
    """Registers slot mappings with CUDA and frees slots once their copies are done."""

    def __init__(self) -> None:
        self.cudart = torch.cuda.cudart()
        self.pending: collections.deque = collections.deque()  # (event, free), in order
        self.registered: dict[int, mmap.mmap] = {}  # id of a slot's Memory -> mapping pinned
        self.working = True

    def pin(self, memory: Memory) -> None:
        self.poll()
        mapping = memory.mapping
        if not self.working or mapping is None or self.registered.get(id(memory)) is mapping:
            return
        code = self.cudart.cudaHostRegister(_address(mapping), len(mapping), 0)
        if int(code) != 0:  # not page-lockable here (limits, a sandbox): stay pageable
            self.working = False
            return
        self.registered[id(memory)] = mapping
        memory.before_unmap = self._unpin

    def _unpin(self, mapping: mmap.mmap) -> None:
        self.cudart.cudaHostUnregister(_address(mapping))

    def release(self, free: Callable[[], None]) -> None:
        if not torch.cuda.is_initialized():
            free()
            return
        event = torch.cuda.Event()
        event.record()
        self.pending.append((event, free))
        self.poll()

    def poll(self) -> None:
        """Free the slots whose copies have finished."""
        while self.pending and self.pending[0][0].query():
            self.pending.popleft()[1]()


handoff.pin_with(_pinner_here)

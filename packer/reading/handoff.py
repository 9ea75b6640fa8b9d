"""Batches handed from a DataLoader worker process to its parent through reusable shared-memory
slots.

A DataLoader worker's result is pickled to the parent; arrays normally travel as fresh shared
memory per batch, whose pages the kernel must allocate and zero every time, and which the
parent maps anew: for multi-MB batches that costs more than reading them. Here each worker
keeps a `ring.Ring` of slots whose free/held bytes lie in a page of flags shared with the
parent, and the parent keeps each slot's descriptor and mapping: a batch is written into a
free slot (grown when it does not fit) and only its number and layout travel (each descriptor
goes once; the parent maps a grown slot again). The parent hands out views of the slot;
once the last is dropped, its byte says so and the worker may fill it again. While every slot
is held, `take` returns None and the caller sends its batch the ordinary way, so a caller that
keeps batches never stalls a worker. (Why the worker, not the parent, owns the ring: see
`ring`.)

A framework adapter may also pin the slots in the parent (`pin_with`): packer.torch registers
each slot's mapping with CUDA, so the DataLoader's `pin_memory=True` finds the batch already
page-locked and copies nothing, and a slot is freed only once the copies out of it are done.
"""

from __future__ import annotations

import mmap
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .ring import (
    NAMELESS,
    Layout,
    Memory,
    Ring,
    SharedFd,
    anonymous_memory,
    arrays_at,
    extent,
    lay_out,
)

AVAILABLE = NAMELESS  # Linux; elsewhere batches go the ordinary way
SLOTS = 4  # per worker: prefetched batches (a DataLoader's default is 2) + ones held
# Flag bytes: the ring's (one per slot), GIVEN (the parent has the slot's descriptor), then one
# byte saying the parent has these flags.
HELD, GIVEN, KNOWN = 0, SLOTS, 2 * SLOTS


@dataclass
class Slot:
    """A free slot, its arrays laid out for filling."""

    index: int
    layout: Layout
    arrays: list[np.ndarray]


class Sender:
    """The worker side: a ring of slots, its bytes in the flags the parent writes back into."""

    def __init__(self) -> None:
        self.name = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.flags_fd = anonymous_memory("packer-flags")
        os.ftruncate(self.flags_fd, mmap.PAGESIZE)
        self.flags = np.frombuffer(mmap.mmap(self.flags_fd, mmap.PAGESIZE), np.uint8)
        self.ring = Ring.anonymous(SLOTS, "packer-batch", self.flags[HELD : HELD + SLOTS])

    def take(self, specs: list[tuple[tuple, Any]]) -> Slot | None:
        """A free slot holding arrays of these (shape, dtype), or None while all are held."""
        index = self.ring.free_slot()
        if index is None:
            return None
        layout = lay_out(specs)
        memory = self.ring.memory[index].grown(extent(layout))
        return Slot(index, layout, arrays_at(memory, layout))

    def parcel(self, slot: Slot) -> Parcel:
        """The filled `slot`, to pickle to the parent (held until it drops every view)."""
        self.ring.take(slot.index)
        flags = None if self.flags[KNOWN] else SharedFd(self.flags_fd)
        given = self.flags[GIVEN + slot.index]
        fd = None if given else SharedFd(self.ring.memory[slot.index].fd)
        return Parcel(self.name, slot.index, flags, fd, slot.layout)


@dataclass
class Parcel:
    """Which slot of which sender, its layout, and the descriptors the parent lacks yet."""

    sender: str
    index: int
    flags: SharedFd | None
    slot: SharedFd | None
    layout: Layout

    def __reduce__(self) -> tuple:
        return receive, (self.sender, self.index, self.flags, self.slot, self.layout)


_senders: dict[str, tuple[Ring, np.ndarray]] = {}  # in the parent: name -> its ring, flags


class Pinner(Protocol):
    """What the parent may do with the slots it maps (see `pin_with`)."""

    def pin(self, memory: Memory) -> None:
        """Make the slot's current mapping page-locked for the device (once per mapping)."""

    def release(self, free: Callable[[], None]) -> None:
        """Free the slot (call `free`) once the device's pending copies out of it are done."""


_pinner: Callable[[], Pinner | None] | None = None  # in the parent: makes the pinner, once
_pinning: list[Pinner | None] = []  # the pinner made, or None: slots stay pageable


def pin_with(make: Callable[[], Pinner | None] | None) -> None:
    """Let the parent pin the slots it receives: `make()` (called at the first batch, so a
    framework initialises its device only then) returns a Pinner, or None to leave them as
    they are. A framework adapter sets this; None turns it off again."""
    global _pinner
    _pinner = make
    _pinning.clear()


def _current_pinner() -> Pinner | None:
    if _pinner is None:
        return None
    if not _pinning:
        _pinning.append(_pinner())
    return _pinning[0]


def receive(
    sender: str, index: int, flags: SharedFd | None, slot: SharedFd | None, layout: Layout
) -> list[np.ndarray]:
    """Views of the arrays in slot `index` of `sender`; dropping the last frees the slot."""
    if flags is not None:  # parcels sent before the first one arrived carry the flags too
        if sender in _senders:
            os.close(flags.fd)
        else:
            _forget_dead_senders()
            page = np.frombuffer(mmap.mmap(flags.fd, mmap.PAGESIZE), np.uint8)
            os.close(flags.fd)  # the mapping keeps the page
            ring = Ring([Memory() for _ in range(SLOTS)], page[HELD : HELD + SLOTS])
            _senders[sender] = ring, page
            page[KNOWN] = 1
    ring, page = _senders[sender]
    if slot is not None:
        ring.memory[index].fd = slot.fd
        page[GIVEN + index] = 1
    pinner = _current_pinner()
    if pinner is None:
        return ring.views(index, layout)
    views = ring.views(index, layout, pinner.release)
    pinner.pin(ring.memory[index])
    return views


def _forget_dead_senders() -> None:
    """Let go of the slots of workers that have exited (a new worker is announcing itself)."""
    for name in list(_senders):
        try:
            os.kill(int(name.split("-")[0]), 0)
        except ProcessLookupError:
            _senders.pop(name)[0].close()
        except PermissionError:
            pass

"""Batches handed from a worker process to its parent through reusable shared-memory slots.

A DataLoader worker's result is pickled to the parent; arrays normally travel as fresh shared
memory per batch, whose pages the kernel must allocate and zero every time, and which the
parent maps anew: for multi-MB batches that costs more than reading them. Here each worker
keeps a small ring of memfd slots and a page of flags, and the parent keeps each slot mapped:
a batch is written into a free slot and only its number and layout travel (descriptors go
once). The parent hands out views of the slot; once the last is dropped, the slot's flag says
so and the worker may fill it again. While every slot is held, `take` returns None and the
caller sends its batch the ordinary way, so a caller that keeps batches never stalls a worker.
"""

from __future__ import annotations

import mmap
import os
import secrets
import weakref
from dataclasses import dataclass
from multiprocessing import reduction
from typing import Any

import numpy as np

AVAILABLE = hasattr(os, "memfd_create")  # Linux; elsewhere batches go the ordinary way
SLOTS = 4  # per worker: prefetched batches (a DataLoader's default is 2) + ones held
_ALIGN = 64
# Flag bytes: HELD (the parent holds views of the slot), MAPPED (it keeps the slot's current
# memory mapped), then one byte saying the parent has mapped these flags.
HELD, MAPPED, KNOWN = 0, SLOTS, 2 * SLOTS
_POPULATE = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # map every page in one call


@dataclass
class Slot:
    """A free slot, its arrays laid out for filling."""

    index: int
    size: int
    layout: list[tuple[int, tuple, str]]  # (offset, shape, dtype) per array
    arrays: list[np.ndarray]


class Sender:
    """The worker side: a ring of slots and the flags the parent writes back into."""

    def __init__(self) -> None:
        self.name = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.flags_fd = os.memfd_create("packer-flags")
        os.ftruncate(self.flags_fd, mmap.PAGESIZE)
        self.flags = np.frombuffer(mmap.mmap(self.flags_fd, mmap.PAGESIZE), np.uint8)
        self.slots: dict[int, tuple[int, mmap.mmap]] = {}  # index -> (fd, mapping)

    def take(self, specs: list[tuple[tuple, Any]]) -> Slot | None:
        """A free slot holding arrays of these (shape, dtype), or None while all are held."""
        index = next((i for i in range(SLOTS) if not self.flags[HELD + i]), None)
        if index is None:
            return None
        layout, size = [], 0
        for shape, dtype in specs:
            layout.append((size, tuple(shape), np.dtype(dtype).str))
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            size += -(-nbytes // _ALIGN) * _ALIGN
        if index not in self.slots or len(self.slots[index][1]) < size:
            self._replace(index, size)
        memory = self.slots[index][1]
        arrays = [np.ndarray(shape, dtype, memory, offset) for offset, shape, dtype in layout]
        return Slot(index, size, layout, arrays)

    def parcel(self, slot: Slot) -> Parcel:
        """The filled `slot`, to pickle to the parent (held until it drops every view)."""
        self.flags[HELD + slot.index] = 1
        flags_fd = None if self.flags[KNOWN] else self.flags_fd
        slot_fd = None if self.flags[MAPPED + slot.index] else self.slots[slot.index][0]
        return Parcel(self.name, slot.index, flags_fd, slot_fd, slot.size, slot.layout)

    def _replace(self, index: int, size: int) -> None:
        """New memory for free slot `index` (the parent maps it again when it arrives)."""
        if index in self.slots:
            fd, memory = self.slots.pop(index)
            memory.close()
            os.close(fd)
        fd = os.memfd_create("packer-batch")
        os.ftruncate(fd, size)
        self.slots[index] = fd, mmap.mmap(fd, size)
        self.flags[MAPPED + index] = 0


@dataclass
class Parcel:
    """Which slot of which sender, and the descriptors the parent does not have yet."""

    sender: str
    index: int
    flags_fd: int | None
    slot_fd: int | None
    size: int
    layout: list

    def __reduce__(self) -> tuple:
        flags, slot = (None if fd is None else reduction.DupFd(fd) for fd in self.fds)
        return receive, (self.sender, self.index, flags, slot, self.size, self.layout)

    @property
    def fds(self) -> tuple[int | None, int | None]:
        return self.flags_fd, self.slot_fd


class _View:
    """The parent's side of one sender: its flags and its slots, kept mapped."""

    def __init__(self, flags: mmap.mmap) -> None:
        self.flags = np.frombuffer(flags, np.uint8)
        self.slots: dict[int, mmap.mmap] = {}

    def release(self, index: int) -> None:
        self.flags[HELD + index] = 0


_views: dict[str, _View] = {}  # in the parent: sender name -> its view


def receive(
    sender: str, index: int, flags: Any, slot: Any, size: int, layout: list
) -> list[np.ndarray]:
    """Views of the arrays in slot `index` of `sender`; dropping the last frees the slot."""
    if flags is not None:  # parcels sent before the first one arrived carry the flags too
        memory = _detached(flags, mmap.PAGESIZE, mmap.MAP_SHARED)
        if sender not in _views:
            _forget_dead_senders()
            _views[sender] = _View(memory)
            _views[sender].flags[KNOWN] = 1
    view = _views[sender]
    if slot is not None:
        view.slots[index] = _detached(slot, size, _POPULATE)
        view.flags[MAPPED + index] = 1
    buffer = np.frombuffer(view.slots[index], np.uint8, count=size)
    weakref.finalize(buffer, view.release, index)
    return [np.ndarray(shape, dtype, buffer, offset) for offset, shape, dtype in layout]


def _detached(duplicate: Any, size: int, flags: int) -> mmap.mmap:
    """Map the received descriptor, then close it (the mapping keeps the memory)."""
    fd = duplicate.detach()
    try:
        return mmap.mmap(fd, size, flags=flags)
    finally:
        os.close(fd)


def _forget_dead_senders() -> None:
    """Unmap the slots of workers that have exited (a new worker is announcing itself)."""
    for name in list(_views):
        try:
            os.kill(int(name.split("-")[0]), 0)
        except ProcessLookupError:
            del _views[name]
        except PermissionError:
            pass

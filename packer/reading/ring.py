"""Slots of shared memory that one process writes a batch of arrays into and another views:
the one place packer makes such memory, lays arrays out in it and passes it between processes.

- `anonymous_memory`: memory without a name anywhere (a memfd; elsewhere an unlinked temporary
  file), so nothing outlives the processes that hold it, SIGKILL included.
- `SharedFd`: a descriptor that reaches another process when pickled by multiprocessing.
- `lay_out`, `extent`, `arrays_at`: arrays at 64-byte aligned offsets, and views of them.
- `Memory`: one slot's descriptor and mapping; the writer grows it when a batch does not fit,
  the reader maps it again when it finds it grown.
- `Ring`: slots and one byte each saying whether a slot is free; a batch handed out as views
  holds its slot until the last of them is dropped.

Both users keep a Ring where batches are consumed and differ only in who picks a batch's slot,
which their process model decides. Packer's own pipeline (`reading.pipeline`) starts its
workers and talks to them over its own pipes: the parent makes the memory, passes it to each
worker as it starts and names the slot in each task, so its ring's bytes stay private to it.
A PyTorch DataLoader worker (`reading.handoff`) is started and fed by torch, which tells it
only a batch index: the worker makes its own ring and picks a free slot itself, so the ring's
bytes live in a page of shared memory the parent writes, and the descriptors travel to the
parent with the first batches that use them.
"""

from __future__ import annotations

import contextlib
import functools
import math
import mmap
import os
import tempfile
import weakref
from collections.abc import Callable, Iterable
from multiprocessing import reduction
from typing import Any

import numpy as np

NAMELESS = hasattr(os, "memfd_create")  # memory with no name even for a moment (Linux)
ALIGN = 64  # TensorFlow adopts 64-byte aligned arrays without a copy
FREE, TAKEN, VIEWED = 0, 1, 2  # a slot's byte: free, being filled or awaited, views out

Layout = list[tuple[int, tuple, str | np.dtype]]  # (offset, shape, dtype) per array


def anonymous_memory(name: str) -> int:
    """A descriptor of growable shared memory with no name anywhere (`name` shows only in the
    holders' /proc/<pid>/fd and maps)."""
    if NAMELESS:
        return os.memfd_create(name)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryFile(dir=shm) as file:  # unlinked at once (O_TMPFILE where it can)
        return os.dup(file.fileno())


class SharedFd:
    """A file descriptor that reaches another process when multiprocessing pickles it: a
    child's start arguments (inherited by fork, passed along by spawn) or a message to a
    running process. Unpickled, `fd` is that process's own, to keep or close."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple:
        return SharedFd._rebuild, (reduction.DupFd(self.fd),)

    @staticmethod
    def _rebuild(duplicate: Any) -> SharedFd:
        return SharedFd(duplicate.detach())


def lay_out(specs: Iterable[tuple[tuple, Any]]) -> Layout:
    """(offset, shape, dtype) for arrays of these (shape, dtype), one after the other, each
    starting on an ALIGN-byte boundary. A dtype that its string names exactly is given as
    that string, which pickles several times faster than the dtype."""
    layout, end = [], 0
    for shape, dtype in specs:
        try:
            given, size = _spelled(dtype)
        except TypeError:  # a spelling that cannot be a cache key (a list of fields)
            given, size = _spelled.__wrapped__(dtype)
        offset = -(-end // ALIGN) * ALIGN
        layout.append((offset, tuple(shape), given))
        end = offset + math.prod(shape) * size
    return layout


@functools.lru_cache(maxsize=256)
def _spelled(dtype: Any) -> tuple[str | np.dtype, int]:
    """A dtype as a layout gives it (its string when that names it exactly) and its item
    size; cached, since making and comparing dtypes costs microseconds a batch."""
    dtype = np.dtype(dtype)
    exact = dtype.metadata is None and np.dtype(dtype.str) == dtype
    return (dtype.str if exact else dtype), dtype.itemsize


def extent(layout: Layout) -> int:
    """Bytes a slot needs for `layout`: up to the end of its last array."""
    if not layout:
        return 0
    offset, shape, dtype = layout[-1]
    return offset + math.prod(shape) * np.dtype(dtype).itemsize


def arrays_at(buffer: Any, layout: Layout) -> list[np.ndarray]:
    """The arrays at `layout` in `buffer`, as views that keep it alive."""
    return [np.ndarray(shape, dtype, buffer, offset) for offset, shape, dtype in layout]


class Memory:
    """One slot's shared memory: its descriptor (None until a reader receives it) and a
    mapping of it, replaced when it is too short."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd = fd
        self.mapping: mmap.mmap | None = None
        # Called with a mapping about to be let go (a reader that registered it elsewhere,
        # with CUDA say, takes it back first).
        self.before_unmap: Callable[[mmap.mmap], None] | None = None

    def grown(self, end: int) -> mmap.mmap:
        """For the writer: a mapping of `end` bytes or more, the memory grown when shorter
        (with room to spare, so that varying shapes rarely remap)."""
        if self.mapping is not None and len(self.mapping) >= end:
            return self.mapping
        size = os.fstat(self.fd).st_size
        if size < end or size == 0:
            size = -(-(end + end // 8 + 1) // mmap.PAGESIZE) * mmap.PAGESIZE
            os.ftruncate(self.fd, size)
        return self._map(size)

    def mapped(self, end: int) -> mmap.mmap:
        """For the reader: a mapping of `end` bytes or more, mapped again at the memory's size
        once the writer has grown it."""
        if self.mapping is None or len(self.mapping) < end:
            return self._map(os.fstat(self.fd).st_size)
        return self.mapping

    def write(self, arrays: list[np.ndarray]) -> Layout:
        """Copy `arrays` in at their layout, grown to fit; returns the layout."""
        layout = lay_out((array.shape, array.dtype) for array in arrays)
        targets = arrays_at(self.grown(extent(layout)), layout)
        for target, array in zip(targets, arrays, strict=True):
            np.copyto(target, array, casting="no")
        return layout

    def close(self) -> None:
        """Let go of the descriptor and the mapping (views still held stay valid)."""
        if self.mapping is not None and self.before_unmap is not None:
            self.before_unmap(self.mapping)
        self.mapping = None
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def _map(self, size: int) -> mmap.mmap:
        if self.mapping is not None and self.before_unmap is not None:
            self.before_unmap(self.mapping)
        if self.mapping is not None:
            with contextlib.suppress(BufferError):  # views still held keep it mapped
                self.mapping.close()
        self.mapping = mmap.mmap(self.fd, size)
        return self.mapping


class Ring:
    """Slots of shared memory and one byte each in `held` (FREE, TAKEN or VIEWED); a slot
    handed out as views is held until the last of them, and of any view of them, is dropped."""

    def __init__(self, memory: list[Memory], held: np.ndarray | None = None) -> None:
        self.memory = memory
        self.held = np.zeros(len(memory), np.uint8) if held is None else held

    @classmethod
    def anonymous(cls, count: int, name: str, held: np.ndarray | None = None) -> Ring:
        """`count` slots of new anonymous memory, each called `name`."""
        return cls([Memory(anonymous_memory(name)) for _ in range(count)], held)

    def free_slot(self) -> int | None:
        """The first free slot (those beyond what is in use stay untouched), or None."""
        index = int(self.held.argmin())
        return None if self.held[index] else index

    def take(self, index: int) -> None:
        """Slot `index` is being filled, or its batch awaits the consumer."""
        self.held[index] = TAKEN

    def free(self, index: int) -> None:
        """Slot `index` may be filled again."""
        self.held[index] = FREE

    def views(
        self,
        index: int,
        layout: Layout,
        release: Callable[[Callable[[], None]], None] | None = None,
    ) -> list[np.ndarray]:
        """The arrays at `layout` in slot `index`, which is freed once they are dropped (or,
        given `release`, when `release` calls the freeing function it is handed then)."""
        end = extent(layout)
        buffer = np.frombuffer(self.memory[index].mapped(end), np.uint8, count=end)
        self.held[index] = VIEWED
        free = functools.partial(self.free, index)
        if release is None:
            weakref.finalize(buffer, free)
        else:
            weakref.finalize(buffer, release, free)
        return arrays_at(buffer, layout)

    def copies(self, index: int, layout: Layout) -> list[np.ndarray]:
        """Copies of the arrays at `layout` in slot `index`, which is free again at once."""
        views = arrays_at(self.memory[index].mapped(extent(layout)), layout)
        arrays = [np.array(view) for view in views]
        self.free(index)
        return arrays

    def viewed(self) -> int:
        """How many slots are held by views handed out."""
        return int(np.count_nonzero(self.held == VIEWED))

    def close(self) -> None:
        """Let go of every slot's descriptor and mapping (views still held stay valid)."""
        for memory in self.memory:
            memory.close()

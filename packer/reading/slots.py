"""Shared-memory slots for the worker pipeline: anonymous memory that reaches a worker under
any start method, a worker's growable mappings of it, and batches flattened to arrays.

A batch is any nesting of tuples, lists and dicts of arrays; `split` turns it into a
picklable description plus its arrays, which the worker copies into a slot at aligned
offsets, and `build` turns the description and views of the slot back into the batch.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from multiprocessing import reduction
from typing import Any

import numpy as np

ALIGN = 64  # TensorFlow adopts 64-byte aligned arrays without a copy


def nbytes(entry: tuple) -> int:
    """Bytes of one (offset, shape, dtype) layout entry."""
    _, shape, dtype = entry
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def anonymous_memory() -> int:
    """A file descriptor of growable shared memory that has no name anywhere."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("packer-slot")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryFile(dir=shm) as file:  # unlinked at once (O_TMPFILE where it can)
        return os.dup(file.fileno())


class SharedFd:
    """A file descriptor that reaches a worker under any start method (inherited by fork,
    passed along by spawn)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple:
        return SharedFd._rebuild, (reduction.DupFd(self.fd),)

    @staticmethod
    def _rebuild(duplicate: Any) -> SharedFd:
        return SharedFd(duplicate.detach())


def split(obj: Any, arrays: list[np.ndarray]) -> tuple:
    """A picklable description of `obj` with its arrays replaced by their positions in `arrays`.
    Tuples (named ones keep their class), lists and dicts are walked; other leaves travel as
    they are."""
    if isinstance(obj, (tuple, list)):
        named = type(obj) if hasattr(obj, "_fields") else None
        kind = "list" if isinstance(obj, list) else "tuple"
        return (kind, named, [split(item, arrays) for item in obj])
    if isinstance(obj, dict):
        return ("dict", None, [(key, split(value, arrays)) for key, value in obj.items()])
    if isinstance(obj, np.ndarray) or (hasattr(obj, "__array__") and not np.isscalar(obj)):
        array = np.asarray(obj)
        if not array.dtype.hasobject:
            arrays.append(array)
            return ("array", len(arrays) - 1)
    return ("value", obj)


def build(spec: tuple, leaves: list[np.ndarray]) -> Any:
    """The inverse of `_split`."""
    kind = spec[0]
    if kind == "array":
        return leaves[spec[1]]
    if kind == "value":
        return spec[1]
    _, named, items = spec
    if kind == "dict":
        return {key: build(value, leaves) for key, value in items}
    built = [build(item, leaves) for item in items]
    if kind == "list":
        return built
    return named(*built) if named else tuple(built)


# -- worker side ------------------------------------------------------------------------


class Slots:
    """A worker's mappings of the slots, grown (file and mapping) when a batch does not fit."""

    def __init__(self, fds: list[int]) -> None:
        self.fds = fds
        self.maps: list[mmap.mmap | None] = [None] * len(fds)

    def write(self, slot: int, arrays: list[np.ndarray]) -> list[tuple]:
        """Copy `arrays` into `slot`, each on an aligned offset; return (offset, shape, dtype)s."""
        layout, end = [], 0
        for array in arrays:
            end = -(-end // ALIGN) * ALIGN
            layout.append((end, array.shape, array.dtype))
            end += array.nbytes
        buffer = np.frombuffer(self._mapped(slot, end), np.uint8, count=end)
        for (offset, shape, dtype), array in zip(layout, arrays, strict=True):
            target = buffer[offset : offset + array.nbytes].view(dtype).reshape(shape)
            np.copyto(target, array, casting="no")
        return layout

    def _mapped(self, slot: int, end: int) -> mmap.mmap:
        mapping, fd = self.maps[slot], self.fds[slot]
        if mapping is not None and len(mapping) >= end:
            return mapping
        size = os.fstat(fd).st_size
        if size < end or size == 0:  # room to grow a little, so varying shapes rarely remap
            size = -(-(end + end // 8 + 1) // mmap.PAGESIZE) * mmap.PAGESIZE
            os.ftruncate(fd, size)
        if mapping is not None:
            mapping.close()
        self.maps[slot] = mmap.mmap(fd, size)
        return self.maps[slot]

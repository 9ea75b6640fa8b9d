"""Batch arrays that are reused once nobody holds them, so reads do not fault in fresh memory.

A new 20 MB array per batch costs thousands of page faults (zeroed pages mapped one by one);
above a few MB that halves the read rate. A pool hands the same arrays out again, but only
when their reference count shows that no caller still holds them (or a view of them), so a
batch a caller keeps is never overwritten.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from ..schema import Field

# References while `_released` inspects a pooled array: the pool's dict, `take`'s loop
# variable, the parameter and getrefcount's argument; its owner (when the array is a view):
# the array's `base`, the local name and getrefcount's argument.
_ARRAY_REFS, _OWNER_REFS = 4, 3


def _released(array: np.ndarray) -> bool:
    """True when no caller holds the array, nor any view of it (views reference the owner)."""
    owner = array.base
    if owner is None:
        return sys.getrefcount(array) <= _ARRAY_REFS
    return sys.getrefcount(array) <= _ARRAY_REFS and sys.getrefcount(owner) <= _OWNER_REFS


class BufferPool:
    """Per-batch-size sets of field arrays, handed out again once released by every caller."""

    def __init__(self, fields: tuple[Field, ...], limit: int = 8) -> None:
        self.fields = fields
        self.limit = limit
        self._sets: dict[int, list[dict[str, np.ndarray]]] = {}
        self._lock = threading.Lock()

    def take(self, count: int) -> dict[str, np.ndarray]:
        """Arrays of `count` records per field: a released set if there is one, else new ones."""
        with self._lock:
            sets = self._sets.get(count)
            if sets is None:
                sets = self._sets[count] = []
            for arrays in sets:
                for a in arrays.values():  # a loop, not all(...): its generator costs more
                    if not _released(a):
                        break
                else:
                    return dict(arrays)  # the caller's references mark the set as taken
            arrays = {f.name: aligned_empty((count, *f.shape), f.dtype) for f in self.fields}
            if len(sets) < self.limit:
                sets.append(arrays)
            return dict(arrays)


def aligned_empty(shape: tuple[int, ...], dtype: str, align: int = 64) -> np.ndarray:
    """An uninitialised array starting on an `align`-byte boundary, which TensorFlow adopts
    without a copy (`tf.numpy_function` outputs, `tf.convert_to_tensor`); NumPy's own are not."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + nbytes].view(dtype).reshape(shape)

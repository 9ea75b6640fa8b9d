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

from .records import Field

# References to a pooled array while the pool inspects it: the pool's own dict, the loop
# variable and getrefcount's argument.
_HELD_BY_POOL = 3


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
            sets = self._sets.setdefault(count, [])
            for arrays in sets:
                if all(sys.getrefcount(a) <= _HELD_BY_POOL for a in arrays.values()):
                    return dict(arrays)  # the caller's references mark the set as taken
            arrays = {f.name: np.empty((count, *f.shape), np.dtype(f.dtype)) for f in self.fields}
            if len(sets) < self.limit:
                sets.append(arrays)
            return dict(arrays)

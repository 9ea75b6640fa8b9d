"""A batch's copy spread over a few threads, so that reading runs at every core's copy rate.

A batch is read as runs: a shard reader, the sorted records of its shard and the batch rows
they go to. One thread copies at about one core's memory bandwidth; NumPy's copies and
`os.preadv` release the GIL, so a few threads, each taking its part of the rows, copy at the
rate of all the cores the process may use. The pool is sized from this process's CPU affinity,
divided among the processes of one reader that copy at the same time (`share_cores`: a
reader's workers), and made anew in a forked child, where the parent's threads do not exist.
A batch too small to be worth handing over is copied by the calling thread alone. A shard
reader that decodes (`decodes`: a JPEG/PNG field) costs about a millisecond a record, so its
batches are split by records, into more parts than threads, which then balance the work.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

# Each thread gets at least this many bytes of a batch: below it, handing a part to another
# thread costs more than copying it (measured in
# benchmarks/results/2026-11-26-reading-on-every-core.md, "From what batch size threads pay").
MIN_BYTES_PER_THREAD = 2 << 20
PARTS_PER_THREAD = 4  # a decoding batch's parts per thread (decode times vary per record)


class ShardReader(Protocol):
    """What a format's shard reader offers the gather (every format's does)."""

    def open(self) -> object: ...

    def read_into(self, local: np.ndarray, out: dict[str, np.ndarray]) -> None: ...


Run = tuple[ShardReader, np.ndarray, dict[str, np.ndarray]]

_lock = threading.Lock()
_sharing = 1  # processes of one reader that copy at the same time (this one among them)
_executor: ThreadPoolExecutor | None = None
_executor_threads = 0


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows: every core
        return os.cpu_count() or 1


def share_cores(processes: int) -> None:
    """Say that this process is one of `processes` that read at once (a reader's workers), so
    that it takes its share of the cores and the processes do not crowd each other out."""
    global _sharing
    _sharing = max(1, int(processes))


def thread_count() -> int:
    """How many threads copy one batch in this process."""
    return max(1, usable_cores() // _sharing)


def read(runs: Sequence[Run]) -> None:
    """Read every run (`reader.read_into(local, rows)`), its rows split among the threads when
    the batch is large enough; returns when every row is filled."""
    total = 0
    for _, _, rows in runs:
        for array in rows.values():
            total += array.nbytes
    split = total // MIN_BYTES_PER_THREAD  # most batches stop here, before the affinity call
    decoding = any(getattr(reader, "decodes", False) for reader, _, _ in runs)
    if decoding:  # every record is worth a thread
        split = sum(len(local) for _, local, _ in runs)
    threads = min(thread_count(), split) if split > 1 else 1
    if threads <= 1:
        for reader, local, rows in runs:
            reader.read_into(local, rows)
        return
    pieces = _pieces(runs, min(split, threads * PARTS_PER_THREAD) if decoding else threads)
    for reader, _, _ in runs:
        reader.open()  # lazy opens happen here, once, not racing in the threads
    _share(pieces, _pool(threads), threads - 1)


def _pieces(runs: Sequence[Run], threads: int) -> list[list[Run]]:
    """The runs cut into `threads` parts of about the same number of records, in order."""
    records = sum(len(local) for _, local, _ in runs)
    step = math.ceil(records / threads)
    pieces: list[list[Run]] = [[]]
    room = step
    for reader, local, rows in runs:
        start = 0
        while start < len(local):
            if room == 0:
                pieces.append([])
                room = step
            stop = min(len(local), start + room)
            part = {name: array[start:stop] for name, array in rows.items()}
            pieces[-1].append((reader, local[start:stop], part))
            room -= stop - start
            start = stop
    return pieces


def _share(pieces: list[list[Run]], pool: ThreadPoolExecutor, helpers: int) -> None:
    """Read `pieces`, taken in turn from one queue by the calling thread and `helpers` pool
    threads; return when all are read, raising the first error among them.

    The caller never waits for a helper that has not started: on a busy machine a woken
    thread may get no core for milliseconds, and a fixed share handed to it would hold the
    whole batch back. The caller takes the pieces left itself and cancels such a helper.
    """
    queue = iter(pieces)  # next() on a list iterator is atomic under the GIL
    errors: list[BaseException] = []

    def drain() -> None:
        for piece in queue:
            try:
                _read_piece(piece)
            except BaseException as exc:  # the others still run: they write into the batch
                errors.append(exc)

    futures = [pool.submit(drain) for _ in range(helpers)]
    drain()
    for future in futures:
        if not future.cancel():
            future.result()
    if errors:
        raise errors[0]


def _read_piece(piece: list[Run]) -> None:
    for reader, local, rows in piece:
        reader.read_into(local, rows)


def _pool(threads: int) -> ThreadPoolExecutor:
    """This process's pool with at least `threads - 1` threads (the caller is one more)."""
    global _executor, _executor_threads
    with _lock:
        if _executor is None or _executor_threads < threads - 1:
            if _executor is not None:
                _executor.shutdown(wait=False)
            _executor = ThreadPoolExecutor(threads - 1, thread_name_prefix="packer-gather")
            _executor_threads = threads - 1
        return _executor


def _forget_pool_after_fork() -> None:
    """A forked child has none of its parent's threads: it makes its own pool when needed."""
    global _executor, _executor_threads, _lock
    _executor, _executor_threads, _lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)

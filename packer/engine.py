"""The local process pool: runs chunk tasks, then each shard's finalisation, with a progress bar.

Workers are forked when the parent has no threads-heavy framework loaded (fast start), else
spawned, so a pack started from a TensorFlow script never forks TensorFlow's threads.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from tqdm import tqdm

from . import convert
from .plan import ChunkTask

_FORK_UNSAFE = ("tensorflow", "torch", "jax", "keras")


class _Bar(tqdm):
    """A tqdm bar without tqdm's monitor thread, which would make the next pack unable to fork."""

    monitor_interval = 0


def start_method() -> str:
    """'fork' when it is safe (Linux, one thread, no framework loaded), else 'spawn'."""
    if sys.platform != "linux" or threading.active_count() > 1:
        return "spawn"
    if any(name in sys.modules for name in _FORK_UNSAFE):
        return "spawn"
    return "fork"


def run(
    config: convert.PackConfig,
    shards: dict[str, list[ChunkTask]],
    make_finalize: Callable[[str, list[convert.ChunkResult]], convert.FinalizeTask],
    workers: int,
    total_images: int,
    progress: bool = True,
    on_chunk: Callable[[convert.ChunkResult], None] | None = None,
) -> list[dict]:
    """Pack every chunk of `shards` (shard name -> its chunks) and return the shard receipts.

    `on_chunk` sees each chunk's result and may raise to stop the pack. On any exception
    (Ctrl-C included) the workers are killed at once and the exception propagates; finished
    shards stay finished, so the same pack resumes from them.
    """
    if not shards:
        return []
    context = multiprocessing.get_context(start_method())
    pending_chunks = {name: len(chunks) for name, chunks in shards.items()}
    results: dict[str, list[convert.ChunkResult]] = {name: [] for name in shards}
    receipts: list[dict] = []
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=convert.init_worker, initargs=(config, os.getpid())
    )
    bar = _Bar(
        total=total_images,
        unit="img",
        disable=not progress,
        dynamic_ncols=True,
        desc="packing",
        smoothing=0.1,
    )
    # Shards with the most chunks first: the shard finished last is finalised (hashed, synced)
    # while the other workers have nothing left to do, so that one should be the smallest.
    by_size = sorted(shards.values(), key=len, reverse=True)
    queued = iter([task for chunks in by_size for task in chunks])
    try:
        running: set[Future] = set()
        with _main_hidden(context.get_start_method() != "fork"):
            _top_up(pool, running, queued, 2 * workers)  # the first submits start the workers
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                outcome = future.result()
                if isinstance(outcome, dict):
                    receipts.append(outcome)
                    continue
                bar.update(len(outcome.kept) + len(outcome.rejected))
                if on_chunk is not None:
                    on_chunk(outcome)
                results[outcome.shard].append(outcome)
                pending_chunks[outcome.shard] -= 1
                if pending_chunks[outcome.shard] == 0:
                    task = make_finalize(outcome.shard, results.pop(outcome.shard))
                    running.add(pool.submit(convert.finalize_shard, task))
            _top_up(pool, running, queued, 2 * workers)
    except BaseException:
        _kill(pool)
        raise
    finally:
        bar.close()
        pool.shutdown(wait=True, cancel_futures=True)
    return receipts


@contextlib.contextmanager
def _main_hidden(hide: bool) -> Iterator[None]:
    """Spawned workers re-import the caller's main script (and with it TensorFlow, in a
    training script) unless `__main__` looks like no script while they start."""
    if not hide:
        yield
        return
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _top_up(pool: ProcessPoolExecutor, running: set[Future], queued, window: int) -> None:
    """Keep a few chunks in flight, shard by shard, so finished shards are finalised promptly
    (a shard's parts never wait behind the whole dataset, and a stop loses little work)."""
    while len(running) < window and (task := next(queued, None)) is not None:
        running.add(pool.submit(convert.pack_chunk, task))


def _kill(pool: ProcessPoolExecutor) -> None:
    """Stop every worker now, not after its current chunk (Python 3.14 has terminate_workers)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.kill()
    for process in processes:
        process.join(timeout=5)


def ordered_chunks(results: Sequence[convert.ChunkResult]) -> tuple[convert.ChunkResult, ...]:
    """Chunk results in chunk order, whatever order the workers finished them in."""
    return tuple(sorted(results, key=lambda r: r.chunk))

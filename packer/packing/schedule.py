"""The schedule: shard tasks over any engine, with a progress bar, finalising each shard once
its last chunk is written.

Engines whose workers share the output disk get chunk tasks, a few in flight per worker,
queued shard by shard (so a finished shard is finalised promptly and a stop loses little),
the shards with the most chunks first (so the finalise left at the end is the smallest).
Other engines get one task per whole shard. Either way the bytes are the plan's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait

from tqdm import tqdm

from ..engines import Engine
from .convert import Converter
from .tasks import ChunkResult, ShardTask

IN_FLIGHT_PER_WORKER = 2


class _Bar(tqdm):
    """A tqdm bar without tqdm's monitor thread, which would make the next pack unable to fork."""

    monitor_interval = 0


def run(
    engine: Engine,
    converter: Converter,
    shards: list[ShardTask],
    progress: bool = True,
    on_chunk: Callable[[ChunkResult], None] | None = None,
) -> list[dict]:
    """Write `shards` with `engine` and return their receipts.

    `on_chunk` sees each chunk's result and may raise to stop the pack. On any exception
    (Ctrl-C included) the engine's workers are stopped at once and the exception propagates;
    finished shards stay finished, so the same pack resumes from them.
    """
    if not shards:
        return []
    bar = _Bar(
        total=sum(s.count for s in shards),
        unit="img",
        disable=not progress,
        dynamic_ncols=True,
        desc="packing",
        smoothing=0.1,
    )
    engine.start(converter)
    try:
        step = _by_chunks if engine.shares_disk else _by_shards
        receipts = step(engine, shards, bar, on_chunk or (lambda result: None))
    except BaseException:
        with contextlib.suppress(Exception):  # stopping must not hide why the pack stopped
            engine.stop(cancel=True)
        raise
    finally:
        bar.close()
    engine.stop()
    return receipts


def _by_chunks(engine: Engine, shards: list[ShardTask], bar, on_chunk) -> list[dict]:
    """Chunk tasks, then one finalise task per shard once its chunks are all done."""
    by_name = {s.shard: s for s in shards}
    pending = {s.shard: len(s.chunks) for s in shards}
    results: dict[str, list[ChunkResult]] = {s.shard: [] for s in shards}
    ordered = sorted(shards, key=lambda s: len(s.chunks), reverse=True)
    queued = iter([chunk for s in ordered for chunk in s.chunks])
    window = IN_FLIGHT_PER_WORKER * engine.workers
    receipts: list[dict] = []
    running: set[Future] = set()
    _top_up(engine, running, queued, window)
    while running:
        done, running = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            outcome = future.result()
            if isinstance(outcome, dict):  # a finalised shard's receipt
                receipts.append(outcome)
                continue
            bar.update(len(outcome.kept) + len(outcome.rejected))
            on_chunk(outcome)
            results[outcome.shard].append(outcome)
            pending[outcome.shard] -= 1
            if pending[outcome.shard] == 0:
                task = by_name[outcome.shard]
                running.add(
                    engine.submit(
                        "finalize_shard", task.without_samples(), results.pop(outcome.shard)
                    )
                )
        _top_up(engine, running, queued, window)
    return receipts


def _top_up(engine: Engine, running: set[Future], queued, window: int) -> None:
    """Keep `window` tasks in flight."""
    while len(running) < window and (task := next(queued, None)) is not None:
        running.add(engine.submit("pack_chunk", task))


def _by_shards(engine: Engine, shards: list[ShardTask], bar, on_chunk) -> list[dict]:
    """One task per whole shard, the largest first."""
    ordered = sorted(shards, key=lambda s: s.count, reverse=True)
    running = {engine.submit("pack_shard", s) for s in ordered}
    receipts = []
    while running:
        done, running = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            receipt, results = future.result()
            for result in results:
                bar.update(len(result.kept) + len(result.rejected))
                on_chunk(result)
            receipts.append(receipt)
    return receipts

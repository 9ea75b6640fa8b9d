"""The local engine: a process pool on this machine, its workers writing to the shared disk.

Workers are forked when the parent has no threads-heavy framework loaded (fast start), else
spawned, so a pack started from a TensorFlow script never forks TensorFlow's threads. Each
worker ignores Ctrl-C (the parent decides how a pack stops and kills them itself), dies with
the parent and runs OpenCV on one thread (the pool is the parallelism).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from ..processes import (
    die_with_parent,
    main_hidden,
    one_opencv_thread,
    one_opencv_thread_while_forking,
    start_method,
)
from . import cpu_count

_converter: Any = None  # this worker process's converter, set by _init_worker


class LocalEngine:
    """`workers` processes on this machine."""

    name = "local"
    shares_disk = True

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or cpu_count()
        self._pool: ProcessPoolExecutor | None = None
        self._spawned = False
        self._opencv = contextlib.ExitStack()  # the parent's OpenCV count, while workers fork

    def start(self, converter: Any) -> None:
        context = multiprocessing.get_context(start_method())
        self._spawned = context.get_start_method() != "fork"
        if not self._spawned:
            # A forked worker's garbage collector would walk the parent's objects (a plan of
            # a million samples with their annotations) and copy every page it touches:
            # frozen, they are left alone and stay shared.
            gc.freeze()
            # and forks (whenever the pool makes them) with OpenCV's pool at rest
            self._opencv.enter_context(one_opencv_thread_while_forking())
        self._pool = ProcessPoolExecutor(
            self.workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(converter, os.getpid(), self._spawned),
        )

    def submit(self, method: str, *args: Any) -> Future:
        assert self._pool is not None, "start() the engine first"
        with main_hidden(self._spawned):  # a spawned worker must not run the caller's script
            return self._pool.submit(_call, method, *args)

    def stop(self, cancel: bool = False) -> None:
        if self._pool is None:
            return
        gc.unfreeze()
        self._opencv.close()  # the parent's own OpenCV thread count again
        if cancel:
            _kill(self._pool)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None


def _init_worker(converter: Any, parent_pid: int, spawned: bool) -> None:
    """Per-process set-up: keep the converter, ignore Ctrl-C, die with the parent, one OpenCV
    thread (a forked worker has it from its parent, see `LocalEngine.submit`)."""
    global _converter
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    if spawned:
        one_opencv_thread()
    _converter = converter


def _call(method: str, *args: Any) -> Any:
    return getattr(_converter, method)(*args)


def _kill(pool: ProcessPoolExecutor) -> None:
    """Stop every worker now, not after its current task (Python 3.14 has terminate_workers)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.kill()
    for process in processes:
        process.join(timeout=5)

"""CPU time of a benchmark and every process it started, for CPU-per-item columns; processes
forked to run side by side, released together.

Standard library only, so that scripts running in the peers' environment can import it too.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def cpu_seconds() -> float:
    """CPU time of this process (threads included), its finished children and its live ones."""
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent, used = _stat(int(entry))
            except OSError:
                continue
            if parent == os.getpid():
                live += used
    return time.process_time() + done.ru_utime + done.ru_stime + live


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far."""
    return _stat(pid)[1]


def _stat(pid: int) -> tuple[int, float]:
    """A live process's parent pid and CPU seconds, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # fields[1] is the ppid; utime and stime, in clock ticks, are fields[11] and fields[12]
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forked_together(target: Callable, arguments: Sequence[tuple]) -> list:
    """Run `target(*args, barrier, queue)` in a forked process per `args`, all released by one
    barrier once ready; the one report each puts on `queue`, in arrival order. A process that
    fails stops the benchmark."""
    context = multiprocessing.get_context("fork")
    barrier, queue = context.Barrier(len(arguments)), context.Queue()
    procs = [context.Process(target=target, args=(*args, barrier, queue)) for args in arguments]
    for p in procs:
        p.start()
    reports = [queue.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a benchmark process failed (exit code {p.exitcode})")
    return reports

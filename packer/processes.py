"""Child processes packer starts itself (pack workers, reader workers): how to start them
safely and how they end with their parent.

Fork is fast, but forking a parent that runs TensorFlow's or torch's threads can deadlock
the child, so those parents spawn. Spawned children would re-import the caller's script
(and TensorFlow with it) unless `__main__` is hidden while they start. Children ask the
kernel to kill them when the parent dies, so a killed parent leaves no worker behind.
"""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

from .storage.local import libc

FORK_UNSAFE = ("tensorflow", "torch", "jax", "keras")
_PR_SET_PDEATHSIG = 1


def start_method() -> str:
    """'fork' when it is safe (Linux, one thread, no framework loaded), else 'spawn'."""
    if sys.platform != "linux" or threading.active_count() > 1:
        return "spawn"
    if any(name in sys.modules for name in FORK_UNSAFE):
        return "spawn"
    return "fork"


@contextlib.contextmanager
def main_hidden(hide: bool) -> Iterator[None]:
    """While children start: `__main__` looks like no script, so spawned children do not
    re-import the caller's main script (and with it TensorFlow, in a training script)."""
    if not hide:
        yield
        return
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def unguarded_main_line() -> int | None:
    """The line of the main script running now at its top level outside an `if __name__ ==
    "__main__":` block, which a spawned child importing the script would run again (and
    start children of its own while it bootstraps); None when the running line is guarded,
    or the main module is no script being run (an interactive session, a finished import)."""
    main = sys.modules["__main__"]
    path = getattr(main, "__file__", None)
    frame = sys._current_frames().get(threading.main_thread().ident)
    line = None
    while frame is not None:  # the outermost frame of the script's own top-level code
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            line = frame.f_lineno
        frame = frame.f_back
    if line is None or not path:
        return None
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return None if _is_main_guard(node) else line
    return None


def _is_main_guard(node: ast.stmt) -> bool:
    """Whether `node` is `if __name__ == "__main__":` (either way round)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    names = {s.id for s in sides if isinstance(s, ast.Name)}
    values = {s.value for s in sides if isinstance(s, ast.Constant)}
    return names == {"__name__"} and values == {"__main__"}


def one_opencv_thread() -> None:
    """In a worker process: OpenCV on one thread, as the workers are the parallelism (its
    default, a thread per core in every worker, oversubscribes the cores). Only in a spawned
    worker: in a fork of a parent that ran OpenCV's thread pool (a script that resized, a
    compressed pack's plan), cv2.setNumThreads hangs on the pool the fork copied about every
    other time; forked workers get the count from `one_opencv_thread_while_forking`, which the
    engine holds while its workers live."""
    import cv2

    cv2.setNumThreads(1)


@contextlib.contextmanager
def one_opencv_thread_while_forking() -> Iterator[None]:
    """OpenCV on one thread in this process while it forks workers (a pool may fork one
    whenever it needs one), its own count again after: the workers start with one thread and a
    pool at rest, set here where the threads exist."""
    import cv2

    before = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(before)


def die_with_parent(parent_pid: int) -> None:
    """In a child, Linux: ask for SIGKILL when the parent dies; exit now if it already has."""
    try:
        libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError, TypeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)

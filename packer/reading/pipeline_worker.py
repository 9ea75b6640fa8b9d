"""The worker processes of `reading.pipeline`: the loop each runs, how a batch crosses to the
parent (a picklable description plus its arrays, written into the slot the task names), and
stopping them. Apart from the Pipeline class so that each stays a readable size.

A batch is any nesting of tuples, lists and dicts of arrays; `split` turns it into a
description and its arrays, and `build` turns the description and views of the slot back
into the batch.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import traceback
from multiprocessing import connection
from typing import Any

import numpy as np

from ..processes import die_with_parent, one_opencv_thread
from . import gather
from .ring import Memory, Ring, SharedFd


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
    """The inverse of `split`."""
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


def work(
    payload: bytes,
    conn: connection.Connection,
    shared: list[SharedFd],
    parent: int,
    deathsig: bool,
    spawned: bool,
    workers: int,
) -> None:
    """A worker's loop: make the batches asked for into their slots, answer calls, until
    told to stop or the parent is gone. The `workers` share the cores (`gather`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gather.share_cores(workers)
    if deathsig:
        die_with_parent(parent)
    if spawned:
        one_opencv_thread()
    try:
        produce = pickle.loads(payload)
    except BaseException:
        conn.send(("failed", traceback.format_exc()))
        return
    slots = [Memory(s.fd) for s in shared]
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        if message[0] == "call":
            _, method, args = message
            try:
                getattr(getattr(produce, "__self__", produce), method)(*args)
                conn.send(("called", None))
            except Exception:
                conn.send(("called", traceback.format_exc()))
            continue
        _, gen, index, slot = message
        try:
            arrays: list[np.ndarray] = []
            spec = split(produce(index), arrays)
            layout = slots[slot].write(arrays)
            conn.send(("batch", gen, index, slot, spec, layout))
        except Exception:
            conn.send(("error", gen, index, slot, traceback.format_exc(), None))


def shutdown(processes: list, conns: list, ring: Ring) -> None:
    """Ask the workers to stop, kill those that do not, close pipes and memory."""
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.send(("stop",))
    for process in processes:
        process.join(timeout=2)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
    for conn in conns:
        conn.close()
    ring.close()


def main_importable() -> bool:
    """Whether spawned workers can import the main module (a script, or `python -m`)."""
    main = sys.modules["__main__"]
    path = getattr(main, "__file__", None)
    return getattr(main, "__spec__", None) is not None or bool(path and os.path.isfile(path))

"""Batches made in packer-owned worker processes and handed over through shared memory.

Workers write each batch into one of a ring of memory slots (memfds: memory without a name,
so nothing outlives the processes, SIGKILL included); only slot numbers, shapes and dtypes
travel through the pipes. The parent yields the batches in order, as views of their slot.
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from multiprocessing import connection
from typing import Any

import numpy as np

from ..errors import PackError
from ..processes import die_with_parent, main_hidden, start_method
from .slots import SharedFd, Slots, anonymous_memory, build, nbytes, split

_PER_WORKER = 2  # tasks queued per worker, so none waits for the parent between batches
_RESERVE = 2  # slots the caller may hold as zero-copy views; past that it gets copies


class WorkerError(PackError):
    """A worker raised, could not start, or died; the message carries its traceback."""


class Pipeline:
    """`produce(index)` for indices 0..length-1, run in `workers` processes, read ahead in order.

    `produce` is a picklable callable (a bound method of a picklable object, typically)
    returning an array, or a tuple, list or dict (nested as you like) of arrays; other leaves
    (None, numbers, strings) travel as they are. Each worker gets its own copy; `broadcast`
    calls a method on every copy. `pipeline[i]` returns batch i: asking in order is served
    from up to `max_queue_size` batches made ahead; any other index starts over from there.

    Arrays come back as views of a shared slot, which is reused only once the caller has
    dropped every array of that batch (and every view of them); while the caller holds more
    than two batches, further ones are handed out as copies, so a caller that keeps batches
    never stalls the workers. Slots are sized by the batches and grow when one is larger.

    Workers ignore Ctrl-C and die with the thread that started them (on Linux; create the
    pipeline in a long-lived thread, normally the main one), or else at the next message
    once the parent is gone. With the spawn start method a script whose producer is defined
    in `__main__` is imported by every worker, so it needs the `if __name__ == "__main__":`
    guard, as with any spawned pool.
    """

    def __init__(
        self,
        produce: Callable[[int], Any],
        length: int,
        workers: int = 2,
        max_queue_size: int | None = None,
        start: str | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        try:
            payload = pickle.dumps(produce, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise TypeError(f"produce must be picklable to reach worker processes: {exc}") from exc
        self.length = length
        self.ahead = max(1, max_queue_size or 2 * workers)
        self.start_method = start or start_method()
        self._lock = threading.RLock()
        self._fds = [anonymous_memory() for _ in range(self.ahead + _RESERVE)]
        self._maps: list[mmap.mmap | None] = [None] * len(self._fds)
        self._free = list(range(len(self._fds)))
        self._held: dict[int, weakref.ref] = {}
        self._released: collections.deque[int] = collections.deque()
        self._ready: dict[int, tuple] = {}
        self._pending: set[int] = set()
        self._queued = [0] * workers  # messages each worker has yet to answer
        self._acks: list[str | None] = []
        self._want = 0
        self._gen = 0
        context = multiprocessing.get_context(self.start_method)
        deathsig = threading.current_thread() is threading.main_thread()
        shared = [SharedFd(fd) for fd in self._fds]
        self._conns: list[connection.Connection] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._finalizer = weakref.finalize(self, _shutdown, self._processes, self._conns, self._fds)
        needs_main = b"__main__" in payload  # pickled by reference to the main script
        if needs_main and self.start_method != "fork" and not _main_importable():
            raise TypeError(
                "produce uses code defined in an interactive session, which spawned workers "
                "cannot import: define it in a module (a .py file) and import it from there"
            )
        hide_main = self.start_method != "fork" and not needs_main
        with main_hidden(hide_main):
            for number in range(workers):
                parent_end, child_end = context.Pipe()
                process = context.Process(
                    target=_work,
                    args=(payload, child_end, shared, os.getpid(), deathsig),
                    name=f"packer-pipeline-{number}",
                    daemon=True,
                )
                process.start()
                child_end.close()
                self._conns.append(parent_end)
                self._processes.append(process)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers."""
        return [p.pid for p in self._processes]

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[Any]:
        for index in range(self.length):
            yield self[index]

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getitem__(self, index: int) -> Any:
        """Batch `index`, as `produce(index)` returned it; raises WorkerError if that raised."""
        if not 0 <= index < self.length:
            raise IndexError(f"batch {index} out of range for {self.length} batches")
        with self._lock:
            self._check_open()
            if index != self._want:
                self.seek(index)
            while index not in self._ready:
                self._fill()
                self._receive(block=True)
            message = self._ready.pop(index)
            self._want = index + 1
            self._fill()
            return self._hand_out(message)

    def seek(self, index: int) -> None:
        """Make batches from `index` on next (what `pipeline[index]` does when not in order)."""
        with self._lock:
            self._check_open()
            self._want = index
            for stale in [i for i in self._ready if not self._wanted(i)]:
                self._free.append(self._ready.pop(stale)[3])
            self._fill()

    def broadcast(self, method: str, *args: Any) -> None:
        """Call `method(*args)` on every worker's copy of the producer (the object `produce` is
        a method of, or `produce` itself) and wait for all; batches made before are dropped."""
        with self._lock:
            self._check_open()
            self._gen += 1
            self._pending.clear()
            for message in self._ready.values():
                self._free.append(message[3])
            self._ready.clear()
            self._acks = []
            for number in range(len(self._conns)):
                self._send(number, ("call", method, args))
            while len(self._acks) < len(self._conns):
                self._receive(block=True)
            failures = [tb for tb in self._acks if tb is not None]
            if failures:
                raise WorkerError(f"{method} failed in a worker:\n{failures[0]}")
            self._fill()

    def close(self) -> None:
        """Stop the workers and let go of the slots (batches still held stay valid)."""
        with self._lock:
            self._finalizer()
            self._maps = [None] * len(self._maps)

    # -- parent side --------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._finalizer.alive:
            raise WorkerError("the pipeline is closed")

    def _wanted(self, index: int) -> bool:
        return self._want <= index < min(self.length, self._want + self.ahead)

    def _send(self, number: int, message: tuple) -> None:
        try:
            self._conns[number].send(message)
        except OSError:
            self._died(number)
        self._queued[number] += 1

    def _fill(self) -> None:
        """Hand the next wanted batches to the least busy workers while slots are free."""
        while self._released:
            slot = self._released.popleft()
            if self._held.pop(slot, None) is not None:
                self._free.append(slot)
        for index in range(self._want, min(self.length, self._want + self.ahead)):
            if index in self._ready or index in self._pending:
                continue
            number = min(range(len(self._conns)), key=self._queued.__getitem__)
            if not self._free or self._queued[number] >= _PER_WORKER:
                return
            self._send(number, ("batch", self._gen, index, self._free.pop()))
            self._pending.add(index)

    def _receive(self, block: bool) -> None:
        """Take every message waiting (at least one when `block`); raise if a worker died."""
        sentinels = {p.sentinel: n for n, p in enumerate(self._processes)}
        ready = connection.wait([*self._conns, *sentinels], timeout=None if block else 0)
        for item in ready:
            if item in sentinels:
                self._died(sentinels[item])
        for number, conn in enumerate(self._conns):
            if conn in ready:
                while conn.poll():
                    try:
                        message = conn.recv()
                    except (EOFError, OSError):
                        self._died(number)
                    self._queued[number] -= 1
                    self._take(number, message)

    def _take(self, number: int, message: tuple) -> None:
        kind = message[0]
        if kind == "failed":
            self.close()
            raise WorkerError(f"worker {number} could not start:\n{message[1]}")
        if kind == "called":
            self._acks.append(message[1])
            return
        _, gen, index, slot = message[:4]
        if gen == self._gen:
            self._pending.discard(index)
        if gen == self._gen and self._wanted(index):
            self._ready[index] = (*message, number)
        else:
            self._free.append(slot)

    def _died(self, number: int) -> None:
        process = self._processes[number]
        process.join(timeout=1)
        self.close()
        raise WorkerError(
            f"worker {number} (pid {process.pid}) died with exit code {process.exitcode}"
        )

    def _hand_out(self, message: tuple) -> Any:
        kind, _, index, slot, spec, layout, number = message
        if kind == "error":
            self._free.append(slot)
            raise WorkerError(f"batch {index} failed in worker {number}:\n{spec}")
        if not layout:
            self._free.append(slot)
            return build(spec, [])
        end = layout[-1][0] + nbytes(layout[-1])
        owner = np.frombuffer(self._mapped(slot, end), np.uint8, count=end)
        leaves = [owner[o : o + nbytes((o, s, d))].view(d).reshape(s) for o, s, d in layout]
        if len(self._held) >= _RESERVE:
            leaves = [np.array(leaf) for leaf in leaves]
            self._free.append(slot)
        else:
            released = self._released
            self._held[slot] = weakref.ref(owner, lambda _, s=slot: released.append(s))
        return build(spec, leaves)

    def _mapped(self, slot: int, end: int) -> mmap.mmap:
        mapping = self._maps[slot]
        if mapping is None or len(mapping) < end:
            if mapping is not None:
                with contextlib.suppress(BufferError):
                    mapping.close()
            mapping = mmap.mmap(self._fds[slot], os.fstat(self._fds[slot]).st_size)
            self._maps[slot] = mapping
        return mapping


def _shutdown(processes: list, conns: list, fds: list[int]) -> None:
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
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _main_importable() -> bool:
    """Whether spawned workers can import the main module (a script, or `python -m`)."""
    main = sys.modules["__main__"]
    path = getattr(main, "__file__", None)
    return getattr(main, "__spec__", None) is not None or bool(path and os.path.isfile(path))


def _work(
    payload: bytes, conn: connection.Connection, shared: list, parent: int, deathsig: bool
) -> None:
    """A worker's loop: make the batches asked for into their slots, answer calls, until
    told to stop or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if deathsig:
        die_with_parent(parent)
    try:
        produce = pickle.loads(payload)
    except BaseException:
        conn.send(("failed", traceback.format_exc()))
        return
    slots = Slots([s.fd for s in shared])
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
            layout = slots.write(slot, arrays)
            conn.send(("batch", gen, index, slot, spec, layout))
        except Exception:
            conn.send(("error", gen, index, slot, traceback.format_exc(), None))

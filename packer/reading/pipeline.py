"""Batches made in packer-owned worker processes and handed over through shared memory.

Workers write each batch into one of a `ring.Ring` of shared-memory slots (memory without a
name, so nothing outlives the processes, SIGKILL included); only slot numbers, shapes and
dtypes travel through the pipes. The parent yields the batches in order, as views of their
slot. What runs in the workers is in `pipeline_worker`.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import pickle
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from multiprocessing import connection
from typing import Any

from ..errors import PackError
from ..processes import main_hidden, start_method, unguarded_main_line
from .pipeline_worker import build, main_importable, shutdown, work
from .ring import Ring, SharedFd

_PER_WORKER = 2  # tasks queued per worker, so none waits for the parent between batches
_RESERVE = 2  # slots a consumer holds beyond those queued for it (Keras queues `ahead`)
_IN_ORDER = 3  # asks in a row near the last one that turn reading ahead back on
_WAKE = 0.5  # seconds a waiting thread sleeps at most: slots freed meanwhile get used


class WorkerError(PackError):
    """A worker raised, could not start, or died; the message carries its traceback."""


class Pipeline:
    """`produce(index)` for indices 0..length-1, run in `workers` processes, read ahead in order.

    `produce` is a picklable callable (a bound method of a picklable object, typically)
    returning an array, or a tuple, list or dict (nested as you like) of arrays; other leaves
    (None, numbers, strings) travel as they are. Each worker gets its own copy; `broadcast`
    calls a method on every copy. `pipeline[i]` returns batch i: asking in order is served
    from up to `max_queue_size` batches made ahead. Several threads may ask at once, in any
    order (Keras' enqueuer does, in its shuffled order): each asked batch goes to a free
    worker; reading ahead stops while the asking is out of order and resumes with it.

    Arrays come back as views of a shared slot, which is reused only once the caller has
    dropped every array of that batch (and every view of them); while the caller holds
    `max_queue_size` + 2 batches, further ones are handed out as copies, so a caller that
    keeps batches never stalls the workers. Slots are sized by the batches and grow when one
    is larger.

    Workers ignore Ctrl-C and die with the thread that started them (on Linux; create the
    pipeline in a long-lived thread, normally the main one), or else at the next message
    once the parent is gone. With the spawn start method a script whose producer is defined
    in `__main__` is imported by every worker, so it needs the `if __name__ == "__main__":`
    guard, as with any spawned pool: without one the pipeline is refused before any worker
    starts (the workers would run the script again and fail while starting).
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
        needs_main = b"__main__" in payload  # pickled by reference to the main script
        spawned = self.start_method != "fork"
        if needs_main and spawned:
            _check_main_guard(self.start_method)
        self._lock = threading.Condition(threading.RLock())
        self.holds = self.ahead + _RESERVE  # batches held as zero-copy views; then copies
        self._ring = Ring.anonymous(self.ahead + self.holds, "packer-slot")
        self._ready: dict[int, tuple] = {}
        self._pending: set[int] = set()
        self._queued = [0] * workers  # messages each worker has yet to answer
        self._acks: list[str | None] = []
        self._asked: collections.Counter[int] = collections.Counter()  # threads waiting, per batch
        self._want = 0  # where asking in order goes next: the read-ahead starts there
        self._in_order = _IN_ORDER  # consecutive asks near `_want`; reads ahead from _IN_ORDER
        self._receiving = False  # one thread at a time waits on the pipes
        self._broken: WorkerError | None = None
        self._gen = 0
        context = multiprocessing.get_context(self.start_method)
        # a forkserver's children have the server as parent: they stop when their pipe closes
        in_main = threading.current_thread() is threading.main_thread()
        deathsig = in_main and self.start_method != "forkserver"
        shared = [SharedFd(memory.fd) for memory in self._ring.memory]
        self._conns: list[connection.Connection] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._finalizer = weakref.finalize(self, shutdown, self._processes, self._conns, self._ring)
        hide_main = spawned and not needs_main
        with main_hidden(hide_main):
            for number in range(workers):
                parent_end, child_end = context.Pipe()
                process = context.Process(
                    target=work,
                    args=(payload, child_end, shared, os.getpid(), deathsig, spawned, workers),
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
            in_order = self._want <= index < self._want + self.ahead
            self._in_order = self._in_order + 1 if in_order else 0
            self._asked[index] += 1
            try:
                while index not in self._ready:
                    self._fill()
                    self._await()
            finally:
                self._asked[index] -= 1
                if not self._asked[index]:
                    del self._asked[index]
            message = self._ready.pop(index)
            self._want = max(self._want, index + 1) if in_order else index + 1
            self._fill()
            return self._hand_out(message)

    def seek(self, index: int) -> None:
        """Read ahead from `index` on (the start of a pass, say)."""
        with self._lock:
            self._check_open()
            self._want, self._in_order = index, _IN_ORDER
            self._fill()

    def broadcast(self, method: str, *args: Any) -> None:
        """Call `method(*args)` on every worker's copy of the producer (the object `produce` is
        a method of, or `produce` itself) and wait for all; batches made before are dropped."""
        with self._lock:
            self._check_open()
            while self._receiving:  # a thread still waiting for a batch of the last pass
                self._lock.wait()
            self._gen += 1
            self._pending.clear()
            for message in self._ready.values():
                self._ring.free(message[3])
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

    # -- parent side --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._broken is not None:
            raise WorkerError(str(self._broken))
        if not self._finalizer.alive:
            raise WorkerError("the pipeline is closed")

    def _reading_ahead(self) -> range:
        """The batches made ahead of asking: none while the asking is out of order."""
        if self._in_order < _IN_ORDER:
            return range(0)
        return range(self._want, min(self.length, self._want + self.ahead))

    def _evict(self) -> None:
        """Free the slot of a batch made ahead that no thread waits for, one outside the
        read-ahead first (batches made ahead are kept, as shuffled asking may want them)."""
        window = self._reading_ahead()
        spare = sorted((i for i in self._ready if i not in self._asked), key=window.__contains__)
        if spare:
            self._ring.free(self._ready.pop(spare[0])[3])

    def _send(self, number: int, message: tuple) -> None:
        try:
            self._conns[number].send(message)
        except OSError:
            self._died(number)
        self._queued[number] += 1

    def _fill(self) -> None:
        """Hand the batches asked for, then those to read ahead, to the least busy workers
        while slots are free (a batch asked for takes one from a batch made ahead)."""
        for index in [*sorted(self._asked), *self._reading_ahead()]:
            if index in self._ready or index in self._pending:
                continue
            if self._ring.free_slot() is None and index in self._asked:
                self._evict()
            number = min(range(len(self._conns)), key=self._queued.__getitem__)
            slot = self._ring.free_slot()
            if slot is None or self._queued[number] >= _PER_WORKER:
                return
            self._ring.take(slot)
            self._send(number, ("batch", self._gen, index, slot))
            self._pending.add(index)

    def _await(self) -> None:
        """Take the workers' next messages. One thread waits on the pipes, without the lock
        so that others can still ask; the rest sleep until it has taken what came."""
        if self._receiving:
            self._lock.wait()
            self._check_open()
            return
        self._receiving = True
        try:
            self._receive(block=True, unlocked=True)
        finally:
            self._receiving = False
            self._lock.notify_all()

    def _receive(self, block: bool, unlocked: bool = False) -> None:
        """Take every message waiting (when `block`, wait for one up to _WAKE seconds); raise
        if a worker died.
        `unlocked`: let go of the lock while waiting (the caller holds it once)."""
        sentinels = {p.sentinel: n for n, p in enumerate(self._processes)}
        waiting = [*self._conns, *sentinels]
        if unlocked:
            self._lock.release()
        try:
            ready = connection.wait(waiting, timeout=_WAKE if block else 0)
        finally:
            if unlocked:
                self._lock.acquire()
        self._check_open()
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
            self._fail(WorkerError(f"worker {number} could not start:\n{message[1]}"))
        if kind == "called":
            self._acks.append(message[1])
            return
        _, gen, index, slot = message[:4]
        if gen == self._gen:
            self._pending.discard(index)
            self._ready[index] = (*message, number)
        else:
            self._ring.free(slot)

    def _died(self, number: int) -> None:
        process = self._processes[number]
        process.join(timeout=1)
        self._fail(
            WorkerError(
                f"worker {number} (pid {process.pid}) died with exit code {process.exitcode}"
            )
        )

    def _fail(self, error: WorkerError) -> None:
        """Stop everything and raise `error`, here and in every thread that asks from now on."""
        self._broken = error
        self.close()
        raise error

    def _hand_out(self, message: tuple) -> Any:
        kind, _, index, slot, spec, layout, number = message
        if kind == "error":
            self._ring.free(slot)
            raise WorkerError(f"batch {index} failed in worker {number}:\n{spec}")
        if not layout:
            self._ring.free(slot)
            return build(spec, [])
        if self._ring.viewed() >= self.holds:  # the caller keeps batches: copies, slot freed
            return build(spec, self._ring.copies(slot, layout))
        return build(spec, self._ring.views(slot, layout))


def _check_main_guard(method: str) -> None:
    """Refuse, before any worker starts, what would make every worker fail: workers that must
    import the main script (the producer is defined in it) can do so only when it is a file
    and when importing it does not start them again."""
    if not main_importable():
        raise TypeError(
            "produce uses code defined in an interactive session, which spawned workers "
            "cannot import: define it in a module (a .py file) and import it from there"
        )
    line = unguarded_main_line()
    if line is not None:
        script = os.path.basename(sys.modules["__main__"].__file__ or "the script")
        raise WorkerError(
            f"packer's worker processes ({method}) import {script} to find what it defines, "
            f"which would run its line {line} again in each of them: put the code that starts "
            'them under `if __name__ == "__main__":` at the end of the script'
        )


def asking_threads(ahead: int) -> dict:
    """Keras PyDataset options for a dataset served by a Pipeline reading `ahead` batches
    ahead: as many threads, which only ask (Keras shuffles batch order in `fit`, and asks
    ahead in that order only through its enqueuer), never Keras' own processes."""
    return {"workers": ahead, "use_multiprocessing": False, "max_queue_size": ahead}

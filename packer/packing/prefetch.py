"""Source bytes fetched ahead, for sources at a URL: object stores answer each request after
tens of milliseconds, longer than a decode takes, so a worker that read its chunk's files one
by one would mostly wait. A few threads keep the next files of the chunk in flight while the
worker decodes; files are handed over in the chunk's order, so the bytes written do not change.
Local sources are read as before, on the worker's own thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from .. import storage

IN_FLIGHT = 16  # files requested ahead per worker


class Fetcher:
    """`fetcher(path)` reads a file; for a URL root, the files `paths` (relative to `root`,
    in the order they will be asked for) are requested before they are needed."""

    def __init__(self, root: str, paths: Sequence[str], read: Callable[[str], bytes]) -> None:
        self.read = read
        self.pool = None
        self.pending: dict[str, list[Future]] = {}
        if storage.is_url(root) and paths:
            self.pool = ThreadPoolExecutor(min(IN_FLIGHT, len(paths)), "packer-fetch")
            self.queued = iter([os.path.join(root, p) for p in paths])
            self._top_up()

    def __call__(self, path: str) -> bytes:
        futures = self.pending.get(path)
        if not futures:
            return self.read(path)  # a local root, or a file not announced
        future = futures.pop(0)
        if not futures:
            del self.pending[path]
        try:
            return future.result()
        finally:
            self._top_up()

    def _top_up(self) -> None:
        while sum(len(f) for f in self.pending.values()) < IN_FLIGHT:
            path = next(self.queued, None)
            if path is None:
                return
            self.pending.setdefault(path, []).append(self.pool.submit(self.read, path))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

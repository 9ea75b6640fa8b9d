"""A local cache of the shard files of remote packs, so readers can memmap them.

Layout: `CACHE_DIR/<key>/<split>/<file>`, one folder per remote pack (the key hashes its URL
and fingerprint, so a different pack at the same URL never reuses old files), mirroring the
pack's own layout so that the formats' `open_shard` reads the cached copy as a local pack.

- A file is downloaded to a temporary name, its size and SHA-256 checked against the
  manifest, then renamed: a partial or corrupt download is never used.
- Concurrent readers on one machine share the cache: a file's lock makes one process
  download while the others wait for it, and eviction runs under a cache-wide lock. The
  locks are LOCK_FILES files, each file's chosen by a hash of its name, so the lock folder
  stays the same size however many files the cache has seen.
- Size bound with LRU eviction: each use of a file touches its mtime (at most once per
  TOUCH_EVERY seconds per process); when the cache grows past `max_bytes`, the least recently
  used files go first. The files of the shard being fetched, and files touched in the last
  GRACE seconds by any process (about to be opened), are kept, so the bound can be exceeded
  while they are needed; each finished download trims the cache back to the bound. Evicting
  a file that a reader has open is safe: its memmap keeps the data until closed.

The bound, the locks and the eviction (`Bounded`) serve the parts of remote source files too
(`storage.ranges`, under `CACHE_DIR/sources/`). `CACHE_DIR` defaults to `$PACKER_CACHE_DIR`,
else `$XDG_CACHE_HOME/packer`, else `~/.cache/packer`; `max_bytes` to `$PACKER_CACHE_BYTES`,
else DEFAULT_MAX_BYTES.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
import uuid
from collections.abc import Iterator, Set
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..errors import StorageError
from .remote import download  # a cached pack is always remote
from .url import URLPath

DEFAULT_MAX_BYTES = 50 * 10**9
TOUCH_EVERY = 30.0  # seconds between LRU touches of one file by one process
GRACE = 10.0  # files used this recently are never evicted (between fetch and open)
STALE_TMP = 3600.0  # a temporary download this old was left by a killed process
DOWNLOAD_THREADS = 4
LOW_WATER = 0.9  # a tallied folder's walk empties it to this much of its bound
# Two files share a lock file 1 time in 4,096: one download then waits for the other (a
# shard's, at most); 8 downloads at once (2 readers) meet one 0.7% of the time.
LOCK_FILES = 4096
_TMP = ".tmp-"


def default_dir() -> Path:
    """The user's cache folder for packer."""
    if os.environ.get("PACKER_CACHE_DIR"):
        return Path(os.environ["PACKER_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "packer"


def default_max_bytes() -> int:
    """The cache's bound in bytes: `$PACKER_CACHE_BYTES`, else DEFAULT_MAX_BYTES."""
    text = os.environ.get("PACKER_CACHE_BYTES")
    return int(float(text)) if text else DEFAULT_MAX_BYTES


@contextlib.contextmanager
def flock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock between processes (and threads: each opens the file anew) of
    this machine, released on exit or death."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def file_lock(top: Path, name: str) -> contextlib.AbstractContextManager[None]:
    """The lock of one cached file `name` (any string naming it) under the cache folder `top`:
    one of LOCK_FILES lock files, so they are not left behind one per file ever fetched. Never
    take a second file's lock while holding one (two names may share a lock file)."""
    bucket = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % LOCK_FILES
    return flock(top / ".locks" / f"file-{bucket:03d}")


@dataclass(frozen=True)
class Bounded:
    """A folder of cached files kept within `max_bytes` by evicting the least recently used,
    its evictions serialised by the machine-wide lock file `lock` (kept outside `folder`).

    `tally`: for a folder of many small files that only `claimed` adds to (a remote source's
    parts: one a row group), the bytes claimed are kept in a file beside the lock, and the
    folder is walked only when they would pass the bound, then emptied to LOW_WATER of it:
    a walk a tenth of the bound's bytes, not a walk a file (5,100 parts: 50 ms each). Files
    gone meanwhile (failed fetches, another bound's eviction, removed by hand) only make the
    tally high, so the next walk comes sooner and sets it right."""

    folder: Path
    max_bytes: int
    lock: Path
    tally: bool = False

    @contextlib.contextmanager
    def claimed(self, local: Path, incoming: int, keep: Set[Path] = frozenset()) -> Iterator[Path]:
        """A temporary file beside `local` for `incoming` bytes, room made for them first and
        the room claimed (counted by every process from now on): the body writes it, and it
        becomes `local` when the body returns; it is removed when the body raises."""
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f"{_TMP}{local.name}.{uuid.uuid4().hex[:8]}")
        try:
            with flock(self.lock):
                self._make_room(incoming, keep)
                with open(tmp, "wb") as claim:
                    claim.truncate(incoming)  # sparse: it takes no disk until written
            yield tmp
            os.replace(tmp, local)
        finally:
            tmp.unlink(missing_ok=True)

    def _make_room(self, incoming: int, keep: Set[Path]) -> None:
        """Evict for `incoming` more bytes (under the lock): by a walk, or by the tally."""
        if not self.tally:
            _evict(self.folder, self.max_bytes, incoming, keep)
            return
        tally = self.lock.with_name(self.lock.name + ".bytes")
        try:
            total = int(tally.read_text())
        except (OSError, ValueError):  # none yet, or cut short by a kill: walk
            total = None
        if total is None or total + incoming > self.max_bytes:
            total = _evict(self.folder, int(self.max_bytes * LOW_WATER), incoming, keep)
        tally.write_text(str(total + incoming))

    def trim(self, keep: Set[Path] = frozenset()) -> None:
        """Back within the bound, once downloads that held room meanwhile are done."""
        with flock(self.lock):
            _evict(self.folder, self.max_bytes, 0, keep)


class ShardCache:
    """Local copies of one remote pack's files, fetched on demand or ahead of use."""

    def __init__(
        self,
        url: URLPath,
        manifest: dict,
        cache_dir: str | os.PathLike | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.url = url
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_dir()
        self.max_bytes = default_max_bytes() if max_bytes is None else int(max_bytes)
        key = hashlib.sha256(f"{url}\0{manifest.get('fingerprint')}".encode()).hexdigest()
        self.root = self.cache_dir / key[:24]
        self.room = Bounded(self.cache_dir, self.max_bytes, self.cache_dir / ".locks" / "evict")
        self._touched: dict[str, float] = {}
        self._pending: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.update(_touched={}, _pending={}, _lock=None, _pool=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def ensure(self, files: list[dict]) -> None:
        """Have each file (a manifest entry: path, bytes, sha256) in the cache; blocks."""
        now = time.monotonic()
        for f in files:
            if now - self._touched.get(f["path"], -TOUCH_EVERY) < TOUCH_EVERY:
                continue
            future = self._pending.get(f["path"])
            if future is not None:
                future.result()
            else:
                self._fetch(f, files)
            self._touched[f["path"]] = time.monotonic()

    def prefetch(self, files: list[dict]) -> None:
        """Start downloading files in the background (no-op for those present or under way)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(DOWNLOAD_THREADS, "packer-cache")
            for f in files:
                if f["path"] in self._pending or f["path"] in self._touched:
                    continue
                self._pending[f["path"]] = self._pool.submit(self._fetch, f, files)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _fetch(self, f: dict, batch: list[dict]) -> Path:
        """Download one file unless a valid copy is there; touch it for the LRU order. The
        files of `batch` (those needed together, a shard's) are not evicted to make room."""
        local = self.root / f["path"]
        if self._valid(local, f):
            touch(local)
            return local
        with file_lock(self.cache_dir, f"{self.root}\0{f['path']}"):
            if not self._valid(local, f):  # another process may have fetched it meanwhile
                keep = {self.root / g["path"] for g in batch}
                with self.room.claimed(local, f["bytes"], keep) as tmp:
                    self._download(tmp, f)
                self.room.trim(keep)
            touch(local)
        return local

    @staticmethod
    def _valid(local: Path, f: dict) -> bool:
        try:
            return local.stat().st_size == f["bytes"]
        except OSError:
            return False

    def _download(self, tmp: Path, f: dict) -> None:
        """Fetch into the temporary file, its size and SHA-256 checked against the manifest."""
        url = self.url / f["path"]
        size, digest = download(str(url), tmp)
        if size != f["bytes"] or digest != f["sha256"]:
            raise StorageError(
                f"{url}: downloaded {size} bytes with sha256 {digest[:16]}..., the "
                f"manifest says {f['bytes']} bytes, {f['sha256'][:16]}... (changed or "
                "corrupted in the store; `packer verify` checks every file)"
            )


def _evict(folder: Path, max_bytes: int, incoming: int, keep: Set[Path]) -> int:
    """Remove least recently used files under `folder` until `incoming` more bytes fit
    `max_bytes`, sparing downloads under way, the files in `keep` and those used in the last
    GRACE seconds (call under the folder's eviction lock). A download finished while others
    held their room calls it with nothing incoming, so the folder returns within its bound.
    A walk, not a running total: once full, each fetch needs every file's last use (touched by
    readers without the lock) to choose what goes, and a shared total drifts (killed fetches,
    files removed by hand, `sources/` inside the shard cache's folder under another lock);
    `Bounded.tally` walks less where a total that only runs high is enough. Returns the bytes
    left, downloads under way included."""
    files = list(_cached_files(folder))
    total = sum(size for _, size, _, _ in files)  # downloads under way included
    now = time.time()
    for path, size, mtime, busy in sorted(files, key=lambda x: x[2]):
        if total + incoming <= max_bytes:
            break
        if busy or path in keep or now - mtime < GRACE:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
    return total


def touch(path: Path) -> None:
    """Mark a cached file used now, for the LRU order (gone meanwhile: nothing to mark)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _cached_files(top: Path) -> Iterator[tuple[Path, int, float, bool]]:
    """(path, size, mtime, downloading) of every file under `top` (its lock files aside);
    temporaries that a killed process left are removed."""
    now = time.time()
    for folder, dirs, names in os.walk(top):
        if Path(folder) == top:
            dirs[:] = [d for d in dirs if d != ".locks"]
        for name in names:
            path = Path(folder) / name
            try:
                info = path.stat()
            except OSError:
                continue
            busy = name.startswith(_TMP)
            if busy and now - info.st_mtime > STALE_TMP:
                path.unlink(missing_ok=True)
                continue
            yield path, info.st_size, info.st_mtime, busy

"""The lock object of a pack at a URL: one writer at a time, on stores without file locks.

The object holds its owner (host, boot id, pid, a random token) and a time that a heartbeat
thread renews every HEARTBEAT seconds. It is created with an exclusive write where the store
has one (S3's If-None-Match), then read back, so of two racing writers one wins. Another
process is refused (LockHeldError naming the holder and how long ago it was seen); a lock
whose owner provably died on this machine (same boot, pid gone) is taken over; a lock without
a heartbeat for STALE_AFTER seconds is broken only with `force`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

from ..errors import LockHeldError
from ..flags import flag

STALE_AFTER = 300.0  # seconds without a heartbeat after which a lock may be broken (--force)
HEARTBEAT = 30.0  # seconds between a held lock's heartbeats


def acquire(fs, url: str, holder: str, force: bool) -> dict:
    """Take the lock at `url` on the fsspec file system `fs`; the owner record it holds."""
    owner = {
        "holder": holder,
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "pid": os.getpid(),
        "token": uuid.uuid4().hex,
    }
    for _ in range(5):
        try:
            fs.pipe_file(url, _body(owner), mode="create")
        except FileExistsError:
            current = _read(fs, url)
            if current is None:
                continue  # released meanwhile: try again
            now = time.time()
            stale = now - float(current.get("time", 0)) > STALE_AFTER
            if _is_dead(current) or (force and stale):
                fs.rm_file(url)
                continue
            hint = f"; stale: pass {flag('force', True)} to break it" if stale else ""
            raise LockHeldError(url, describe(current, now) + hint) from None
        current = _read(fs, url)  # stores without exclusive create: who won the race?
        if current and current.get("token") == owner["token"]:
            return owner
        raise LockHeldError(url, describe(current or {}, time.time()))
    raise LockHeldError(url, "another process (the lock keeps changing hands)")


def release(fs, url: str, owner: dict) -> None:
    """Remove the lock object if it is still ours."""
    with contextlib.suppress(Exception):
        current = _read(fs, url)
        if current and current.get("token") == owner["token"]:
            fs.rm_file(url)


class Heartbeat(threading.Thread):
    """Rewrites the lock's time every HEARTBEAT seconds while it is ours."""

    def __init__(self, fs, url: str, owner: dict) -> None:
        super().__init__(name="packer-lock-heartbeat", daemon=True)
        self.fs, self.url, self.owner = fs, url, owner
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(HEARTBEAT):
            with contextlib.suppress(Exception):
                current = _read(self.fs, self.url)
                if not current or current.get("token") != self.owner["token"]:
                    return  # released, removed with the work folder, or broken by --force
                self.fs.pipe_file(self.url, _body(self.owner))

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def describe(owner: dict, now: float) -> str:
    """`host H pid P, last seen N s ago`: who holds a lock, for an error message."""
    age = now - float(owner.get("time", 0))
    return f"host {owner.get('host', '?')} pid {owner.get('pid', '?')}, last seen {age:.0f} s ago"


def _body(owner: dict) -> bytes:
    return json.dumps({**owner, "time": time.time()}).encode()


def _read(fs, url: str) -> dict | None:
    try:
        return json.loads(fs.cat_file(url))
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        return {}


def _is_dead(owner: dict) -> bool:
    """A holder that provably no longer runs: this very machine (same boot), pid gone."""
    return (
        owner.get("host") == socket.gethostname()
        and owner.get("boot") == _boot_id()
        and isinstance(owner.get("pid"), int)
        and owner["pid"] != os.getpid()
        and not _pid_alive(owner["pid"])
    )


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

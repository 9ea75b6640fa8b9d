"""The output folder's life cycle: one writer at a time, resume or refuse, clean temporaries.

A folder with `dataset.json` holds a finished pack. A folder with `.partial/plan.json` holds
an unfinished one: its finished shards have receipts in `.partial/shards/`, and re-running
the same pack (same fingerprint) resumes from them. Anything else is not ours to overwrite.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import manifest
from .errors import PackError
from .storage.local import TMP_PREFIX

PARTIAL_DIR = ".partial"
LOCK_NAME = "lock"
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@contextmanager
def exclusive(out: Path) -> Iterator[None]:
    """Hold OUT's lock for the whole pack, so two packs never write into one folder."""
    path = out / PARTIAL_DIR / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as lock:
        try:
            # A POSIX record lock belongs to this process alone: forked workers do not inherit
            # it, and it vanishes with the process, however it dies.
            fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise PackError(
                f"{out} is being written by another pack ({holder}); wait for it to finish"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        yield


def prepare(out: Path, fingerprint: str, overwrite: bool) -> bool:
    """Get OUT ready (lock held); False when it already holds this very pack, finished."""
    marker = out / PARTIAL_DIR / "plan.json"
    if overwrite:
        remove_pack(out)
    elif (out / manifest.MANIFEST_NAME).exists():
        if manifest.read(out).get("fingerprint") == fingerprint:
            return False
        raise PackError(
            f"{out} already holds a different pack (other sources, options or packer version); "
            "choose another --out or pass --overwrite to replace it"
        )
    elif marker.exists():
        if json.loads(marker.read_text()).get("fingerprint") != fingerprint:
            raise PackError(
                f"{out} holds an unfinished pack with other sources, options or packer "
                "version; finish it with the command (and packer) that started it, or pass "
                "--overwrite"
            )
    elif any(p.name != PARTIAL_DIR for p in out.iterdir()):
        raise PackError(
            f"{out} exists and is not a packer dataset; choose another --out or pass --overwrite"
        )
    remove_temporaries(out)
    marker.write_text(json.dumps({"fingerprint": fingerprint}))
    return True


def remove_temporaries(out: Path) -> None:
    """Delete chunk parts and half-written files (a killed run leaves them; they are redone)."""
    shutil.rmtree(out / PARTIAL_DIR / "parts", ignore_errors=True)
    for path in out.rglob(TMP_PREFIX + "*"):
        path.unlink(missing_ok=True)


def clear_partial(out: Path, keep_lock: bool = False) -> None:
    """Remove the work folder (once the manifest is written), or all of it but the lock."""
    partial = out / PARTIAL_DIR
    if not keep_lock:
        shutil.rmtree(partial, ignore_errors=True)
        return
    for path in partial.iterdir() if partial.is_dir() else ():
        if path.name == LOCK_NAME:
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def remove_pack(out: Path) -> None:
    """Delete what a pack wrote in OUT (manifest first, so nothing claims a finished dataset)."""
    (out / manifest.MANIFEST_NAME).unlink(missing_ok=True)
    clear_partial(out, keep_lock=True)
    for split_dir in [p for p in out.iterdir() if p.is_dir() and p.name != PARTIAL_DIR]:
        for f in split_dir.iterdir():
            if f.is_file() and ("-of-" in f.name or f.name.startswith(TMP_PREFIX)):
                f.unlink()
        if not any(split_dir.iterdir()):
            split_dir.rmdir()


def finished_receipts(out: Path, fingerprint: str) -> dict[str, dict]:
    """Shards an interrupted run finished: receipt present, same plan, files of the right size."""
    receipts: dict[str, dict] = {}
    for path in sorted((out / PARTIAL_DIR / "shards").glob("[!.]*.json")):
        try:
            receipt = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        files_ok = all(
            (out / f["path"]).is_file() and (out / f["path"]).stat().st_size == f["bytes"]
            for f in receipt["files"]
        )
        if receipt.get("fingerprint") == fingerprint and files_ok:
            receipts[receipt["name"]] = receipt
    return receipts


def is_out_of_space(exc: BaseException) -> bool:
    """True for the errors a full disk, a quota or a file size limit raise."""
    return isinstance(exc, OSError) and exc.errno in OUT_OF_SPACE

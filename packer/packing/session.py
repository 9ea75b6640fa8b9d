"""A pack's session with its output folder: one writer at a time, resume or refuse, commit.

A folder with `dataset.json` holds a finished pack. A folder with `.partial/plan.json` holds
an unfinished one: its finished shards have receipts in `.partial/shards/`, and re-running
the same pack (same fingerprint) resumes from them. Anything else is not ours to overwrite.
The manifest is written last; then the work folder goes.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

from .. import __version__, engines, manifest, storage
from ..errors import LockHeldError, PackError
from ..imaging import backend_versions
from ..labels import ClassTable
from ..storage.local import TMP_PREFIX
from . import schedule, scratch, workdir
from .convert import Converter
from .plan import PackPlan
from .tasks import ChunkResult

OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def execute(
    plan: PackPlan,
    workers: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    strict: bool = False,
    max_rejects: int | None = None,
    engine: str | engines.Engine = "local",
    engine_options: dict | None = None,
    force: bool = False,
) -> dict:
    """Run a plan: lock and prepare OUT, pack the missing shards, write the manifest.

    `strict` stops at the first rejected input, `max_rejects` once more than that many are
    rejected. Whatever stops a pack (those limits, a full disk, Ctrl-C) leaves the finished
    shards in place and no temporary files, so the same command resumes it. `engine` is a
    name (with `engine_options` for its constructor) or an Engine; `force` breaks a stale lock
    (a remote OUT's lock object whose holder stopped renewing it).
    """
    if not plan.scan.samples:
        raise PackError(f"{plan.scan.root}: nothing to pack")
    runner = (
        engines.create(engine, workers=workers, **(engine_options or {}))
        if isinstance(engine, str)
        else engine
    )
    scratch.check_paths(plan.config.root, plan.out, runner.name)
    limit = 0 if strict else max_rejects
    rejected = [{"path": r.path, "reason": r.reason} for r in plan.scan.rejected]
    _check_rejects(rejected, limit)
    out = plan.out
    storage.make_dirs(out)
    try:
        lock = storage.lock(workdir.lock_path(out), f"pid {os.getpid()}", force)
        with lock:
            try:
                if not prepare(out, plan.fingerprint, overwrite):
                    return manifest.read(out) | {"up_to_date": True}
                data = _pack_missing(plan, runner, progress, rejected, limit)
            except BaseException as exc:
                remove_temporaries(out)
                if is_out_of_space(exc):
                    raise PackError(
                        f"no space left for {out} ({exc.strerror}); finished shards are kept: "
                        "free space and run the same command again to resume"
                    ) from exc
                raise
            manifest.write(out, data)
            storage.remove_tree(workdir.partial_dir(out))
            scratch.clear(out)
    except LockHeldError as exc:
        raise PackError(
            f"{out} is being written by another pack ({exc.holder}); wait for it to finish"
        ) from None
    return data


def prepare(out: Path, fingerprint: str, overwrite: bool) -> bool:
    """Get OUT ready (lock held); False when it already holds this very pack, finished."""
    marker = workdir.plan_marker(out)
    if overwrite:
        remove_pack(out)
    elif storage.exists(out / manifest.MANIFEST_NAME):
        if manifest.read(out).get("fingerprint") == fingerprint:
            return False
        raise PackError(
            f"{out} already holds a different pack (other sources, options or packer version); "
            "choose another --out or pass --overwrite to replace it"
        )
    elif storage.exists(marker):
        if json.loads(storage.read_text(marker)).get("fingerprint") != fingerprint:
            raise PackError(
                f"{out} holds an unfinished pack with other sources, options or packer "
                "version; finish it with the command (and packer) that started it, or pass "
                "--overwrite"
            )
    elif any(name != workdir.PARTIAL_DIR for name in storage.list_dir(out)):
        raise PackError(
            f"{out} exists and is not a packer dataset; choose another --out or pass --overwrite"
        )
    remove_temporaries(out)
    storage.write_text_atomic(marker, json.dumps({"fingerprint": fingerprint}))
    return True


def remove_temporaries(out: Path) -> None:
    """Delete chunk parts and half-written files (a killed run leaves them; they are redone)."""
    storage.remove_tree(workdir.parts_dir(out))
    scratch.clear(out)  # OUT at a URL: this machine's local copies of unfinished shards
    for path in storage.walk_files(out, TMP_PREFIX):
        storage.remove(path)


def remove_pack(out: Path) -> None:
    """Delete what a pack wrote in OUT (manifest first, so nothing claims a finished dataset),
    keeping the lock that this process holds."""
    storage.remove(out / manifest.MANIFEST_NAME)
    partial = workdir.partial_dir(out)
    if storage.is_dir(partial):
        for name in storage.list_dir(partial):
            path = partial / name
            if path == workdir.lock_path(out):
                continue
            storage.remove_tree(path) if storage.is_dir(path) else storage.remove(path)
    for split in storage.list_dir(out):
        split_dir = out / split
        if split == workdir.PARTIAL_DIR or not storage.is_dir(split_dir):
            continue
        for name in storage.list_dir(split_dir):
            if storage.is_file(split_dir / name) and (
                "-of-" in name or name.startswith(TMP_PREFIX)
            ):
                storage.remove(split_dir / name)
        if not storage.list_dir(split_dir):
            storage.remove_tree(split_dir)


def finished_receipts(out: Path, fingerprint: str) -> dict[str, dict]:
    """Shards an interrupted run finished: receipt present, same plan, files of the right size."""
    folder = workdir.receipts_dir(out)
    names = storage.list_dir(folder) if storage.is_dir(folder) else []
    receipts: dict[str, dict] = {}
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        try:
            receipt = json.loads(storage.read_text(folder / name))
        except (OSError, json.JSONDecodeError):
            continue
        files_ok = all(
            storage.is_file(out / f["path"]) and storage.file_size(out / f["path"]) == f["bytes"]
            for f in receipt["files"]
        )
        if receipt.get("fingerprint") == fingerprint and files_ok:
            receipts[receipt["name"]] = receipt
    return receipts


def is_out_of_space(exc: BaseException) -> bool:
    """True for the errors a full disk, a quota or a file size limit raise."""
    return isinstance(exc, OSError) and exc.errno in OUT_OF_SPACE


def _check_rejects(rejected: list[dict], limit: int | None) -> None:
    """Stop once more inputs were rejected than `limit` allows (None: no limit)."""
    if limit is not None and len(rejected) > limit:
        shown = "; ".join(f"{r['path']}: {r['reason']}" for r in rejected[:5])
        raise PackError(
            f"{len(rejected)} input(s) rejected, more than the {limit} allowed "
            f"(--strict / --max-rejects): {shown}"
        )


def _pack_missing(
    plan: PackPlan, runner: engines.Engine, progress: bool, rejected: list[dict], limit
) -> dict:
    """Pack the shards no earlier run finished and build the manifest from all receipts."""
    out = plan.out
    started = time.perf_counter()
    done = finished_receipts(out, plan.fingerprint)
    seen = rejected + [x for r in done.values() for x in r["rejected"]]

    def on_chunk(result: ChunkResult) -> None:
        seen.extend(result.rejected)
        _check_rejects(seen, limit)

    _check_rejects(seen, limit)
    tasks = plan.shard_tasks(skip=set(done))
    receipts = schedule.run(runner, Converter(plan.config), tasks, progress, on_chunk)
    receipts += list(done.values())
    return manifest.build(
        fmt=plan.config.format,
        task=plan.scan.task,
        fields=plan.config.fields,
        table=plan.table or _table_from_counts(receipts, plan.config.ignore_index),
        receipts=receipts,
        options=plan.options,
        fingerprint=plan.fingerprint,
        source={
            "root": str(plan.scan.root),
            "layout": plan.scan.layout,
            "split_source": plan.scan.split_source,
        },
        run={
            "packer_version": __version__,
            "workers": runner.workers,
            "seconds": round(time.perf_counter() - started, 3),
            "resumed_shards": len(done),
            "libraries": backend_versions(),
        },
        rejected=rejected,
    )


def _table_from_counts(receipts: list[dict], ignore_index: int) -> ClassTable:
    """Without a class table, classes are the indices that occur (0..max), named class_N."""
    seen = {int(k) for r in receipts for k in r["class_counts"]} - {ignore_index}
    return ClassTable.from_names(
        [f"class_{i}" for i in range(max(seen, default=-1) + 1)], "mask values"
    )

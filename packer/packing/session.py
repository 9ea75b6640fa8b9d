"""A pack's session with its output folder: one writer at a time, resume, update or refuse,
commit.

A folder with `dataset.json` holds a finished pack; one with `.partial/plan.json` an
unfinished one, whose finished shards have receipts beside their files. `update.decide` says
what a run does with what is there; this module does it under the folder's lock: pack the
shards not kept, write the manifest last, then remove what the manifest no longer lists and
the work folder. A refused or up-to-date run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import __version__, engines, manifest, storage
from ..errors import LockHeldError, PackError, StorageError
from ..flags import flag
from ..imaging import backend_versions
from ..labels import ClassTable
from . import plan as planning
from . import schedule, stored_size
from .convert import Converter
from .ledger import Decision, Ledger, scratch
from .options import RunOptions
from .plan import PackPlan
from .tasks import ChunkResult

OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
REFUSE_ABOVE_FREE = 2.0  # refuse (unless forced) when a pack needs this many times the free space
# The space check counts a compressed pack's estimated stored bytes this much larger. The
# estimate is the mean payload of a few samples, rounded to two digits (`stored_size`): within
# a few percent of the set's on photos, but a set whose drawn samples are simpler than the rest
# stores more, and shards add their small files (index, sources). 25% covers the 20% by which
# the shard-size tests let shards differ from the asked bytes, and stays far below the decoded
# bytes (about 10x a JPEG's) that would refuse packs that fit.
STORED_MARGIN = 1.25


def execute(
    plan: PackPlan,
    run: RunOptions | Mapping[str, Any] | None = None,
    *,
    engine: str | engines.Engine | None = None,
    engine_options: dict | None = None,
    command: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict:
    """Run a plan: lock OUT, pack the shards not already there, write the manifest.

    `run` holds the run's options (`RunOptions`, or a mapping of some of them: the defaults
    for the rest): `strict`
    stops at the first rejected input, `max_rejects` once more than that many are rejected.
    Whatever stops a pack (those limits, a full disk, Ctrl-C) leaves the finished shards in
    place and no temporary files, so the same command resumes it. A finished pack whose
    sources changed is updated (only its stale shards packed again) unless `update` is
    False. `force` packs even when the output clearly will not fit, and breaks a stale lock
    (a remote OUT's lock object whose holder stopped renewing it). `engine` may be an Engine
    itself (else `run`'s engine name, built with `engine_options`); `command` is how the run
    was asked for (quoted if an unfinished pack has to be finished); `warn` receives warnings.
    """
    o = run if isinstance(run, RunOptions) else RunOptions.resolve(run or {})
    workers, overwrite, progress = o.workers, o.overwrite, o.progress
    strict, max_rejects, update, force = o.strict, o.max_rejects, o.update, o.force
    engine = o.engine if engine is None else engine
    if not plan.scan.samples:
        raise PackError(f"{plan.scan.root}: nothing to pack")
    if overwrite:
        plan = for_overwrite(plan)
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
    created = not storage.exists(out)
    job = _Job(plan, runner, progress, rejected, limit, warn or _warn)
    try:
        storage.make_dirs(out)
        with job.ledger.lock(force):
            return job.run(overwrite, update, force, command)
    except LockHeldError as exc:
        raise PackError(
            f"{out} is being written by another pack ({exc.holder}); wait for it to finish"
        ) from None
    except OSError as exc:
        if isinstance(exc, PackError):
            raise
        raise writing_error(out, exc) from exc
    finally:
        if created and storage.is_dir(out) and not storage.list_dir(out):
            storage.remove_tree(out)  # a refused first run leaves no empty folder either


def for_overwrite(plan: PackPlan) -> PackPlan:
    """The plan an `overwrite` run packs: `plan` with its stored size estimated anew where it
    took the estimate of the pack in OUT, which the run replaces (the shards a fresh pack has);
    `plan` itself otherwise."""
    if not plan.stored.own:
        return plan
    seed, shard_size = plan.options["seed"], plan.options["shard_size"]
    stored = stored_size.estimate(plan.config, plan.scan.samples, seed)
    shards = planning.plan_shards(
        plan.scan.samples, seed, stored.record, shard_size, plan.scan.root
    )
    old = plan.stored.notes(shard_size)
    notes = [n for n in plan.notes if n not in old] + stored.notes(shard_size)
    return dataclasses.replace(plan, shards=shards, stored=stored, notes=notes)


def writing_error(out: Path, exc: OSError) -> StorageError:
    """A one-line error for an OSError met while writing OUT, saying what to do."""
    where = exc.filename or out
    if exc.errno in (errno.EACCES, errno.EPERM):
        what, todo = "permission denied", f"choose an {flag('out')} folder you can write to"
    elif exc.errno == errno.EROFS:
        what, todo = "read-only file system", f"choose an {flag('out')} folder on a writable disk"
    else:
        what, todo = exc.strerror or str(exc), f"check {out} and run the same command again"
    error = StorageError(f"cannot write {where}: {what}; {todo}")
    error.errno = exc.errno
    return error


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=4)


class _Job:
    """One run of a plan against its output folder (lock held)."""

    def __init__(self, plan, runner, progress, rejected, limit, warn) -> None:
        self.plan = plan
        self.out: Path = plan.out
        self.runner = runner
        self.progress = progress
        self.rejected = rejected
        self.limit = limit
        self.warn = warn
        self.ledger = Ledger(plan.out)

    def run(self, overwrite: bool, update_: bool, force: bool, command: str | None) -> dict:
        out, ledger = self.out, self.ledger
        decision = ledger.decide(self.plan, overwrite, update_)
        if decision.action in ("current", "stale"):
            data = decision.manifest or {}
            if decision.action == "current" and decision.changes.touched:
                data = ledger.refresh(decision)
            return data | {
                "up_to_date": True,
                "stale": decision.action == "stale",
                "changes": decision.changes.to_json() | {"text": decision.changes.describe()},
            }
        self._check_space(decision, force)
        try:
            ledger.begin(self.plan, decision, overwrite, command)
            data = self._pack_missing(decision)
        except BaseException as exc:
            with contextlib.suppress(Exception):  # cleaning up must not hide why it stopped
                ledger.abort()
            if is_out_of_space(exc):
                raise PackError(
                    f"no space left for {out} ({exc.strerror}); finished shards are kept: "
                    "free space and run the same command again to resume"
                ) from exc
            raise
        ledger.commit(data)
        return data

    def _check_space(self, decision: Decision, force: bool) -> None:
        """Warn when the shards to write need more than the free space; refuse when they
        need far more, unless forced."""
        needed, how = self._needed(set(decision.keep))
        free = storage.free_space(self.out)
        if free is None or needed <= free:
            return
        text = (
            f"the pack needs about {_megabytes(needed)} in {self.out} ({how}), which "
            f"has {_megabytes(free)} free"
        )
        if needed > REFUSE_ABOVE_FREE * free and not force:
            raise PackError(
                f"{text}; free space, choose another {flag('out')}, a smaller {flag('size')}, "
                f"or pass {flag('force', True)} to try anyway"
            )
        self.warn(f"{text}: it may stop when the disk is full (finished shards are kept)")

    def _needed(self, skip: set[str]) -> tuple[int, str]:
        """Bytes the shards not in `skip` take on disk, and how they were counted: decoded for
        a raw pack, the stored estimate with its margin when fields are encoded."""
        needed, stored = self.plan.planned_bytes(skip=skip), self.plan.stored
        if not stored.encoded:
            return needed, "uncompressed"
        margin = round(100 * (STORED_MARGIN - 1))
        return math.ceil(
            needed * STORED_MARGIN
        ), f"estimated as stored, {stored.what}, plus {margin}%"

    def _pack_missing(self, decision: Decision) -> dict:
        """Pack the shards not kept and build the manifest from all receipts."""
        plan = self.plan
        started = time.perf_counter()
        done = self.ledger.kept(decision)
        seen = self.rejected + [x for r in done.values() for x in r["rejected"]]

        def on_chunk(result: ChunkResult) -> None:
            seen.extend(result.rejected)
            seen.extend(d for d in result.dropped if "object" not in d)  # bad input, not geometry
            _check_rejects(seen, self.limit)

        _check_rejects(seen, self.limit)
        tasks = plan.shard_tasks(skip=set(done))
        converter = Converter(plan.config)
        made = schedule.run(self.runner, converter, tasks, self.progress, on_chunk)
        _check_packed(made + list(done.values()), seen)
        run = {
            "packer_version": __version__,
            "workers": self.runner.workers,
            "seconds": round(time.perf_counter() - started, 3),
            "resumed_shards": len(done) if decision.action == "resume" else 0,
            "packed_samples": sum(r["count"] for r in made),
            "libraries": backend_versions(),
        }
        if decision.action == "update":
            run["update"] = {
                **decision.changes.to_json(),
                "text": decision.changes.describe(),
                "kept_shards": len(done),
                "packed_shards": len(made),
            }
        return manifest.build(
            fmt=plan.config.format,
            task=plan.scan.task,
            fields=plan.config.fields,
            table=plan.table or _table_from_counts(made + list(done.values()), plan),
            receipts=made + list(done.values()),
            options=plan.options,
            fingerprint=plan.fingerprint,
            converter_revision=planning.CONVERTER_REVISION,
            source={
                "root": str(plan.scan.root),
                "layout": plan.scan.layout,
                "split_source": plan.scan.split_source,
            },
            run=run,
            rejected=self.rejected,
            left_out=plan.scan.left_out,
            keypoints=plan.scan.keypoints and plan.scan.keypoints.to_json(),
            stored_size=plan.stored.to_json(),
        )


def is_out_of_space(exc: BaseException) -> bool:
    """True for the errors a full disk, a quota or a file size limit raise."""
    return isinstance(exc, OSError) and exc.errno in OUT_OF_SPACE


def _check_rejects(rejected: list[dict], limit: int | None) -> None:
    """Stop once more inputs were rejected than `limit` allows (None: no limit)."""
    if limit is not None and len(rejected) > limit:
        shown = "; ".join(f"{r['path']}: {r['reason']}" for r in rejected[:5])
        raise PackError(
            f"{len(rejected)} input(s) rejected, more than the {limit} allowed "
            f"({flag('strict', True)} / {flag('max_rejects')}): {shown}"
        )


def _check_packed(receipts: list[dict], rejected: list[dict]) -> None:
    """A pack that holds no sample is an error (no manifest is written), with the reason."""
    if any(r["count"] for r in receipts):
        return
    if not rejected:
        raise PackError("nothing was packed: the source lists no sample")
    first = rejected[0]
    raise PackError(
        f"nothing was packed: all {len(rejected)} input(s) were rejected; the first: "
        f"{first['path']}: {first['reason']}"
    )


def _table_from_counts(made: list[dict], plan: PackPlan) -> ClassTable:
    """Without a class table, classes are the indices that occur (0..max), named class_N."""
    seen = {int(k) for r in made for k in r["class_counts"]} - {plan.config.ignore_index}
    return ClassTable.from_names(
        [f"class_{i}" for i in range(max(seen, default=-1) + 1)], "mask values"
    )

"""The bookkeeping of one output folder, behind one small interface: its lock, what it holds
(a finished or an unfinished pack, shard receipts), what a plan does with it (`update`), the
states of the sources it was made from (`freshness`), and its work folder (`workdir`,
`scratch`, `cleanup`). The session runs a plan through a `Ledger`; `verify` and the command
line ask it what a pack holds.
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from ... import manifest, storage
from ...errors import ManifestError
from . import freshness, receipts, scratch, update, workdir
from .cleanup import remove_pack, remove_temporaries, remove_unlisted
from .freshness import SourceChanges
from .update import Decision

if TYPE_CHECKING:
    from ..plan import PackPlan

__all__ = ["Decision", "Ledger", "SourceChanges"]


class Ledger:
    """What OUT holds and the changes a run makes to it, in the order a run makes them:
    `lock`, `decide`, `begin`, then `kept` + the shards packed, then `commit` (or `abort`)."""

    def __init__(self, out: str | os.PathLike) -> None:
        self.out = storage.as_path(out)

    def lock(self, force: bool = False) -> AbstractContextManager:
        """One writer at a time; `force` breaks a stale lock of a remote OUT."""
        owner = f"pid {os.getpid()}"
        return storage.lock(workdir.lock_path(self.out), owner, remove=True, force=force)

    def decide(self, plan: PackPlan, overwrite: bool, update_: bool) -> Decision:
        """What a run of `plan` does here: fresh, resume, update, current or stale."""
        return update.decide(self.out, plan, overwrite, update_)

    def begin(
        self, plan: PackPlan, decision: Decision, overwrite: bool, command: str | None
    ) -> None:
        """Make OUT an unfinished pack of `plan`: replace what `overwrite` replaces, record the
        plan (keeping the command that started an unfinished pack), then take the manifest
        of a finished pack being updated away and the receipts of shards to redo."""
        out = self.out
        if overwrite:
            remove_pack(out)
        remove_temporaries(out)
        started = decision.marker or {}
        marker = update.marker_for(
            plan, started.get("command", command), started.get("cwd", str(Path.cwd()))
        )
        storage.write_text_atomic(workdir.plan_marker(out), json.dumps(marker, ensure_ascii=False))
        storage.remove(out / manifest.MANIFEST_NAME)
        for shard in plan.all_shards:
            if shard.name not in decision.keep:
                storage.remove(workdir.receipt_path(out, shard.split, shard.name))

    def kept(self, decision: Decision) -> dict[str, dict]:
        """The receipts of the shards kept, rewritten where sources were touched without
        changing (so later runs need not hash them again)."""
        touched = decision.changes.touched
        found = {}
        for name, receipt in decision.keep.items():
            hits = touched.keys() & receipt.get("sources", {}).keys()
            if hits:
                states = {**receipt["sources"], **{k: touched[k] for k in hits}}
                receipt = receipts.write(self.out, {**receipt, "sources": states})
            found[name] = receipt
        return found

    def refresh(self, decision: Decision) -> dict:
        """A current pack's manifest, with the receipts of touched sources rewritten."""
        kept = self.kept(decision)
        data = dict(decision.manifest or {})
        for split in data["splits"].values():
            for shard in split["shards"]:
                if shard["name"] in kept:
                    shard["receipt"] = kept[shard["name"]]["receipt_file"]
        manifest.write(self.out, data)
        return data

    def commit(self, data: dict) -> None:
        """Write the manifest (last), then remove what it does not list and the work folder."""
        out = self.out
        manifest.write(out, data)
        remove_unlisted(out, data)
        storage.remove_tree(workdir.parts_dir(out))
        storage.remove(workdir.plan_marker(out))
        scratch.clear(out)

    def abort(self) -> None:
        """After a stopped run: chunk parts and half-written files go; finished shards stay."""
        remove_temporaries(self.out)

    def unfinished(self) -> dict | None:
        """An unfinished pack's state (its plan, shards done and in all), or None."""
        return update.unfinished(self.out)

    def source_changes(self, data: dict) -> SourceChanges:
        """Every source of the finished pack `data` re-hashed against its receipts."""
        loaded = [
            receipts.load(self.out, split, shard["name"])
            for split, part in data["splits"].items()
            for shard in part["shards"]
        ]
        recorded = receipts.recorded_sources([r for r in loaded if r is not None])
        if recorded is None or None in loaded:
            raise ManifestError(
                f"{self.out}: this pack records no source states (made by an older packer); "
                "pack it again to be able to check its sources"
            )
        return freshness.check(storage.as_path(data["source"]["root"]), recorded, rehash=True)

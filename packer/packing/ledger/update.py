"""What OUT already holds, and what a plan does with it: nothing, finish, update, or refuse.

The same source folder and options make the same pack: its finished shards are kept when
their samples and source files are unchanged (receipts + `freshness`), the others are packed
again. Another source folder, other options or another converter revision make a different
pack, refused with what differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ... import __version__, manifest, storage
from ...errors import ManifestError, PackError
from ...flags import flag, name_of
from ...sources import MaskRecipe
from .. import plan as planning
from . import freshness, receipts, workdir
from .freshness import SourceChanges

if TYPE_CHECKING:
    from ..plan import PackPlan


@dataclass
class Decision:
    """What a run does with OUT.

    `action`: "fresh" (nothing there yet, or replaced), "resume" (an unfinished pack of the
    same), "update" (a finished pack whose sources changed), "current" (nothing to do), or
    "stale" (sources changed, but no update was asked for).
    """

    action: str
    keep: dict[str, dict] = field(default_factory=dict)  # finished shards kept, by name
    changes: SourceChanges = field(default_factory=SourceChanges)
    manifest: dict | None = None  # the finished pack's manifest
    marker: dict | None = None  # the unfinished pack's plan.json


def decide(out: Path, plan: PackPlan, overwrite: bool, update: bool) -> Decision:
    """Look at OUT (lock held) and decide; refuses a different pack or a foreign folder."""
    if overwrite:
        return Decision("fresh")
    if storage.exists(out / manifest.MANIFEST_NAME):
        old = manifest.read(out)
        _refuse_other(out, old, plan, finished=True)
        return _against_finished(out, plan, old, update)
    marker_path = workdir.plan_marker(out)
    if storage.exists(marker_path):
        marker = read_marker(out)
        _refuse_other(out, marker, plan, finished=False)
        candidates = receipts.finished(out, _planned(plan))
        keep, changes = _fresh(plan, candidates)
        return Decision("resume", keep, changes, marker=marker)
    if any(name != workdir.PARTIAL_DIR for name in storage.list_dir(out)):
        raise PackError(
            f"{out} exists and is not a packer dataset; choose another {flag('out')} or pass "
            f"{flag('overwrite', True)}"
        )
    return Decision("fresh")


def marker_for(plan: PackPlan, command: str | None, cwd: str | None) -> dict:
    """The plan.json of an unfinished pack: enough to recognise it, resume it and say how (a
    compressed pack's estimate too, which a resume cuts the shards by again)."""
    stored = plan.stored.to_json()
    return {
        "fingerprint": plan.fingerprint,
        "format": plan.config.format,
        "task": plan.scan.task,
        "options": plan.options,
        "converter_revision": planning.CONVERTER_REVISION,
        "packer_version": __version__,
        "source": {"root": str(plan.scan.root)},
        "shards": {s.name: [s.split, plan.shard_fingerprints[s.name]] for s in plan.all_shards},
        "command": command,
        "cwd": cwd,
        **({"stored_size": stored} if stored else {}),
    }


def read_marker(out: Path) -> dict:
    """An unfinished pack's plan.json."""
    path = workdir.plan_marker(out)
    try:
        return json.loads(storage.read_text(path))
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: unreadable ({exc}); pass {flag('overwrite', True)}") from None


def how_to_finish(marker: dict) -> str:
    """The command that started an unfinished pack, to quote when asking to finish it."""
    command = marker.get("command")
    if not command:
        return "the command (and packer) that started it"
    cwd = marker.get("cwd")
    return f"`cd {cwd} && {command}`" if cwd and cwd != str(Path.cwd()) else f"`{command}`"


def differences(recorded: dict, plan: PackPlan) -> list[str]:
    """What makes a recorded pack (manifest or plan.json) another pack than `plan`: its
    source folder, its options (which ones) or its converter revision."""
    found = []
    root = recorded.get("source", {}).get("root")
    if root != str(plan.scan.root):
        found.append(f"other sources: it was packed from {root}, this pack reads {plan.scan.root}")
    old = recorded.get("options", {})
    new = json.loads(json.dumps(plan.options))
    changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    if changed:
        found.append(
            "other options: "
            + ", ".join(
                f"{name_of(k)} {_shown(old.get(k))} there, {_shown(new.get(k))} here"
                for k in changed
            )
        )
    revision = recorded.get("converter_revision")
    if revision is not None and revision != planning.CONVERTER_REVISION:
        version = recorded.get("packer_version") or recorded.get("run", {}).get("packer_version")
        found.append(
            f"another packer version: {version} wrote converter revision {revision}, this "
            f"packer {__version__} writes revision {planning.CONVERTER_REVISION} (other bytes)"
        )
    return found


def _shown(value) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return f"{value[0]}x{value[1]}"
    return "(not set)" if value is None else json.dumps(value)


def _refuse_other(out: Path, recorded: dict, plan: PackPlan, finished: bool) -> None:
    found = differences(recorded, plan)
    if not found:
        return
    if finished:
        raise PackError(
            f"{out} already holds a different pack ({'; '.join(found)}); choose another "
            f"{flag('out')} or pass {flag('overwrite', True)} to replace it"
        )
    raise PackError(
        f"{out} holds an unfinished pack that differs ({'; '.join(found)}); finish it with "
        f"{how_to_finish(recorded)}, or pass {flag('overwrite', True)} to start again"
    )


def _planned(plan: PackPlan) -> dict[str, tuple[str, str]]:
    return {s.name: (s.split, plan.shard_fingerprints[s.name]) for s in plan.all_shards}


def _fresh(plan: PackPlan, candidates: dict[str, dict]) -> tuple[dict[str, dict], SourceChanges]:
    """The candidates whose sources are unchanged, and what changed."""
    recorded = receipts.recorded_sources(list(candidates.values())) or {}
    changes = freshness.check(plan.scan.root, recorded)
    changed = set(changes.changed)
    keep = {
        name: r
        for name, r in candidates.items()
        if "sources" in r and not changed.intersection(r["sources"])
    }
    return keep, changes


def _against_finished(out: Path, plan: PackPlan, old: dict, update: bool) -> Decision:
    """A finished pack of the same source folder and options: current, stale, or to update."""
    loaded = {
        shard["name"]: receipts.load(out, split, shard["name"])
        for split, data in old["splits"].items()
        for shard in data["shards"]
    }
    recorded = receipts.recorded_sources([r for r in loaded.values() if r is not None])
    if recorded is None or None in loaded.values():
        changes = SourceChanges(unrecorded=True)
        keep: dict[str, dict] = {}
    else:
        wanted = plan.sources()
        changes = freshness.check(
            plan.scan.root, {k: v for k, v in recorded.items() if k in wanted}
        )
        changes.added = sorted(wanted.difference(recorded))
        changes.removed = sorted(set(recorded).difference(wanted))
        changes.annotations = _changed_annotations(plan, loaded.values())
        changes.values = _changed_values(plan, loaded.values())
        candidates = receipts.finished(out, _planned(plan), loaded)
        changed = set(changes.changed)
        keep = {n: r for n, r in candidates.items() if not changed.intersection(r["sources"])}
    if not changes and len(keep) == len(plan.all_shards):
        return Decision("current", keep, changes, manifest=old)
    return Decision("update" if update else "stale", keep, changes, manifest=old)


def _changed_annotations(plan: PackPlan, loaded) -> list[str]:
    """Images whose annotations (their digest in the receipts) differ from the plan's."""
    recorded: dict[str, str] = {}
    for receipt in loaded:
        recorded.update(receipt.get("annotations", {}))
    if not recorded:
        return []
    return sorted(
        s.image
        for s in plan.scan.samples
        if isinstance(s.mask, MaskRecipe) and recorded.get(s.image, s.mask.digest) != s.mask.digest
    )


def _changed_values(plan: PackPlan, loaded) -> list[str]:
    """Python samples whose values (their digest in the receipts) differ from the plan's."""
    recorded: dict[str, str] = {}
    for receipt in loaded:
        recorded.update(receipt.get("values", {}))
    return sorted(
        s.image
        for s in plan.scan.samples
        if s.values is not None and recorded.get(s.image, s.values.digest) != s.values.digest
    )


def unfinished(out: Path) -> dict | None:
    """An unfinished pack's state: its plan.json with shards `done` and `total`, and per split
    [done, total]; None when OUT holds no unfinished pack."""
    if storage.exists(out / manifest.MANIFEST_NAME) or not storage.exists(workdir.plan_marker(out)):
        return None
    marker = read_marker(out)
    shards = {name: (split, fp) for name, (split, fp) in marker.get("shards", {}).items()}
    done = receipts.finished(out, shards)
    per_split: dict[str, list[int]] = {}
    for name, (split, _) in sorted(shards.items()):
        counts = per_split.setdefault(split, [0, 0])
        counts[0] += name in done
        counts[1] += 1
    return {**marker, "done": len(done), "total": len(shards), "progress": per_split}

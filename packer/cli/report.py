"""Human-readable texts: the dry-run plan, the end-of-pack summary, `packer info`."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ..fields import kind_of
from ..packing.plan import PackPlan
from ..packing.preflight import DECODE_ONLY
from ..reading.dataset import PackedDataset
from ..sources import Rejection, mask_files
from .report_objects import dropped_lines, object_lines

_SHOWN = 10
_CLASSES_SHOWN = 40
_VALUES_SHOWN = 12


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def plural(count: int, noun: str) -> str:
    """`1 worker`, `2 workers`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def reason_kind(reason: str) -> str:
    """A reason without its details (the part after a colon, parentheses, numbers on their
    own), so that like rejections group together; names with digits in them stay whole.
    An annotation's or segment's id (`annotation 7: ...`) gives way to what is wrong with it."""
    item = re.match(r"(annotation|segment) [^\s:]+: ", reason)
    if item:
        return f"{item[1]}: {reason_kind(reason[item.end() :])}"
    kind = re.sub(r"\s*\([^()]*\)", "", reason.split(":")[0])
    numbers = r"(?<![\w.])\d+(?:x\d+)?(?![\w.])"  # 12, 480x352; not R0_f1 or v1.2
    return re.sub(numbers, lambda m: re.sub(r"\d+", "N", m[0]), kind).strip()


def _output_line(plan: PackPlan) -> list[str]:
    width, height = plan.config.geometry.size
    line = f"output:  {plan.out} ({plan.config.format}, {width}x{height}, "
    line += f"{plan.config.geometry.mode})"
    return [line] + ([f"size:    {plan.size_rule}"] if plan.size_rule else [])


def dry_run(plan: PackPlan, predicted: list[Rejection] | None = None) -> str:
    """What a pack would do: layout, output, splits, classes, notes, and what it would reject
    (found in file names, and `predicted` from the files' headers)."""
    s = plan.scan
    lines = [f"source:  {s.root}", f"layout:  {s.layout} ({s.task})"]
    lines += [f"found:   {s.why}"] * bool(s.why)
    lines += [f"task:    {s.task}: {s.task_why}"] * bool(s.task_why)
    lines += _output_line(plan)
    bad = {r.path for r in predicted or []}
    stored = plan.stored  # a compressed pack's bytes are estimated (see the note)
    estimated = f" (estimated, {stored.what})" if stored.encoded else ""
    for split, shards in plan.shards.items():
        count = sum(len(sh.samples) for sh in shards)
        failing = sum(
            1 for sh in shards for x in sh.samples if {x.image, *mask_files(x.mask)} & bad
        )
        lost = f" ({failing} would be rejected)" if failing else ""
        lines.append(
            f"split {split}: {count} samples{lost} in {plural(len(shards), 'shard')}, "
            f"~{human_bytes((count - failing) * stored.record)}{estimated}"
        )
    names = plan.table.names if plan.table else None
    masks = any(kind_of(f).geometry == "labels" for f in plan.config.fields)
    lines.append(
        f"classes: {len(names)}: {_few(names, _CLASSES_SHOWN)}"
        if names
        else "classes: counted from the masks while packing"
        if masks
        else "classes: none (no field holds class ids)"
    )
    lines += [f"note:    {n}" for n in plan.notes]
    lines += _left_out_lines(s.left_out)
    found = [*s.rejected, *(predicted or [])]
    lines += _rejections(sorted(({"path": r.path, "reason": r.reason} for r in found), key=_key))
    if predicted is not None:
        lines.append(
            "checked: file names, and each file's header and ends; only packing finds "
            + DECODE_ONLY
        )
    return "\n".join(lines)


def _key(rejection: dict) -> tuple[str, str]:
    return rejection["path"], rejection["reason"]


def _few(names: list[str], limit: int) -> str:
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _rejections(rejected: list[dict]) -> list[str]:
    if not rejected:
        return ["rejected: none"]
    kinds = Counter(reason_kind(r["reason"]) for r in rejected)
    lines = [
        f"rejected: {len(rejected)} ("
        + "; ".join(f"{n} x {k}" for k, n in kinds.most_common())
        + ")"
    ]
    lines += [f"  {r['path']}: {r['reason']}" for r in rejected[:_SHOWN]]
    if len(rejected) > _SHOWN:
        lines.append(f"  ... and {len(rejected) - _SHOWN} more (see dataset.json 'rejected')")
    return lines


def pack_summary(data: dict, plan: PackPlan) -> str:
    """What a `pack` did: nothing, left a stale pack alone, updated or packed."""
    out = plan.out
    if data.get("stale"):
        return (
            f"{out} is out of date: sources {data['changes']['text']} since it was packed; left "
            "as it is (--no-update). Run without --no-update to pack the touched shards again."
        )
    if data.get("up_to_date"):
        return f"{out} already holds this pack (same sources and options): nothing to do"
    counts = {name: split["count"] for name, split in data["splits"].items()}
    total = sum(counts.values())
    run = data["run"]
    packed = run.get("packed_samples", total)  # this run's: fewer after an update or resume
    rate = packed / run["seconds"] if run["seconds"] else 0
    lines = []
    if run.get("update"):
        u = run["update"]
        sources = u["changed"] or u["added"] or u["removed"] or u["unrecorded"]
        sources = sources or u.get("annotations")
        why = f"sources {u['text']}" if sources else "shard files were missing or cut short"
        lines.append(
            f"updated: {why}; packed {plural(u['packed_shards'], 'shard')} again, "
            f"kept {u['kept_shards']}"
        )
    of = f" of {total}" if packed != total else ""
    lines.append(
        f"packed {packed}{of} samples ("
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f") in {run['seconds']:.1f} s ({rate:.0f} img/s, {plural(run['workers'], 'worker')})"
    )
    if run.get("resumed_shards"):
        lines.append(f"resumed: {plural(run['resumed_shards'], 'shard')} already finished")
    if plan.size_rule:
        lines.append(f"size: {plan.size_rule}")
    lines += _rejections(data["rejected"])
    lines += dropped_lines(data, named=3)
    lines += _left_out_lines(data.get("left_out", []))
    if data["unknown_labels"]:
        pixels = sum(sum(u["values"].values()) for u in data["unknown_labels"])
        lines.append(
            f"unknown mask values in {len(data['unknown_labels'])} file(s), {pixels} "
            f"pixels set to ignore index {data['ignore_index']} (see 'packer info')"
        )
    lines.append(f"output: {out}")
    return "\n".join(lines)


def unfinished(path: str | Path, state: dict) -> str:
    """`packer info` on a folder whose pack is not finished: how far it got, how to finish."""
    splits = ", ".join(f"{name} {d} of {t}" for name, (d, t) in state["progress"].items())
    command = state.get("command")
    lines = [
        f"{path}: unfinished {state.get('format', '')} pack, {state.get('task', '')}".rstrip(", "),
        f"shards:   {state['done']} of {state['total']} done ({splits})",
        f"source:   {state.get('source', {}).get('root')}",
    ]
    if command:
        cwd = state.get("cwd")
        lines.append(f"finish it with: {command}" + (f"   (in {cwd})" if cwd else ""))
    else:
        lines.append("finish it with the command that started it")
    return "\n".join(lines)


def summary(data: dict) -> dict:
    """The manifest without provenance and receipts: what scripts usually want, with every
    shard's files and SHA-256 so that two packs compare without reading dataset.json."""
    return {
        "format": data["format"],
        "task": data["task"],
        "fields": data["fields"],
        "classes": data["classes"],
        "ignore_index": data["ignore_index"],
        "splits": {
            name: {
                "count": s["count"],
                "shards": len(s["shards"]),
                "bytes": sum(sh["bytes"] for sh in s["shards"]),
                "shard_files": [_shard_files(sh) for sh in s["shards"]],
            }
            for name, s in data["splits"].items()
        },
        "options": data["options"],
        "class_mapping": data.get("class_mapping"),
        "stats": data["stats"],
        "source": data["source"],
        "rejected": len(data["rejected"]),
        **({"dropped_objects": len(data["dropped_objects"])} if "dropped_objects" in data else {}),
        "unknown_labels": data["unknown_labels"],
        "backends": data["run"]["backends"],
    }


def _shard_files(shard: dict) -> dict:
    """A shard's name, sample count and files (path, bytes, sha256)."""
    files = [{k: f[k] for k in ("path", "bytes", "sha256")} for f in shard["files"]]
    return {"name": shard["name"], "count": shard["count"], "files": files}


def info(dataset: PackedDataset) -> str:
    data = dataset.manifest
    fields = ", ".join(kind_of(f).info(f) for f in dataset.fields)
    lines = [
        f"{dataset.root}: {data['format']} pack, {data['task']}",
        f"fields:   {fields}",
        f"source:   {data['source']['root']} ({data['source']['layout']})",
    ]
    for name, s in data["splits"].items():
        size = sum(sh["bytes"] for sh in s["shards"])
        each = f" ({human_bytes(size / s['count'])} a sample)" if s["count"] else ""
        lines.append(
            f"split {name}: {s['count']} samples, {plural(len(s['shards']), 'shard')}, "
            f"{human_bytes(size)}{each}"
        )
    lines += _class_lines(data)
    lines += object_lines(data)
    lines += _mapping_lines(data)
    stats = data["stats"]
    if "mean" in stats:
        pairs = zip(stats["mean"], stats["std"], strict=True)
        lines.append("mean/std: " + " ".join(f"{m:.1f}/{s:.1f}" for m, s in pairs))
    opts = data["options"]
    own = ", ".join(f"{k} {opts[k]}" for k in dataset.format_options)
    lines.append(
        f"options:  size {opts['size'][0]}x{opts['size'][1]}, resize {opts['resize']}, "
        f"interpolation {opts['interpolation']}, seed {opts['seed']}" + (f", {own}" if own else "")
    )
    lines.append("backends: " + ", ".join(f"{k} ({v})" for k, v in data["run"]["backends"].items()))
    lines += _rejections(data["rejected"])
    lines += dropped_lines(data)
    lines += _left_out_lines(data.get("left_out", []))
    unknown = data["unknown_labels"]
    for u in unknown[:_SHOWN]:
        lines.append(
            f"unknown:  {u['path']}: " + ", ".join(f"{k} x {v} px" for k, v in u["values"].items())
        )
    if len(unknown) > _SHOWN:
        lines.append(f"  ... and {len(unknown) - _SHOWN} more (info --json lists them all)")
    return "\n".join(lines)


def _left_out_lines(left_out: list[str]) -> list[str]:
    """What the source holds that the pack does not store (the manifest's `left_out`)."""
    return [f"left out: {what}" for what in left_out]


def _mapping_lines(data: dict) -> list[str]:
    """The class mapping the pack applied: what the user asked (ignored classes, class-map
    rows) and where each mask value went when values are not class ids."""
    lines = []
    asked = data["options"].get("class_mapping")
    if asked:
        parts = [f"ignored {', '.join(asked['ignore'])}"] if asked["ignore"] else []
        parts += [f"{source} -> {target}" for source, target in asked["map"][:_SHOWN]]
        if len(asked["map"]) > _SHOWN:
            parts.append(f"... {len(asked['map']) - _SHOWN} more rows")
        where = f" (from {asked['file']})" if asked["file"] else ""
        lines.append(f"mapping:  {'; '.join(parts)}{where}")
    values = (data.get("class_mapping") or {}).get("values")
    if values:
        names = {c["index"]: c["name"] for c in data["classes"]}
        shown = [f"{v} {names.get(i, 'ignore')}" for v, i in list(values.items())[:_VALUES_SHOWN]]
        more = f", ... ({len(values)} values)" if len(values) > _VALUES_SHOWN else ""
        lines.append(f"values:   mask value -> class: {', '.join(shown)}{more}")
    return lines


def _class_lines(data: dict) -> list[str]:
    """Classes with their share of the pixels (or images, or objects), and the ignore index's
    share of the pixels."""
    stats = data["stats"]
    pixels = "class_pixels" in stats
    counts = stats.get("class_pixels") or stats.get("class_images") or {}
    counts = counts or stats.get("class_objects") or {}
    other = stats.get("other_pixels") or stats.get("other_images") or {}
    total = (sum(counts.values()) + sum(other.values())) or 1
    unit = "pixels" if pixels else "objects" if "class_objects" in stats else "images"
    classes = data["classes"]
    lines = [f"classes:  {len(classes)} (from {data['class_source']}; share of {unit})"]
    for c in classes[:_CLASSES_SHOWN]:
        color = "" if c["color"] is None else " rgb(" + ",".join(map(str, c["color"])) + ")"
        lines.append(
            f"  {c['index']:>3} {c['name']:<20} {100 * counts.get(c['name'], 0) / total:6.2f}%"
            f"{color}"
        )
    if len(classes) > _CLASSES_SHOWN:
        lines.append(f"  ... and {len(classes) - _CLASSES_SHOWN} more (info --json lists them all)")
    if pixels:
        ignored = other.get(str(data["ignore_index"]), 0)
        lines.append(
            f"  ignore index {data['ignore_index']}: {100 * ignored / total:.2f}% of pixels"
            " (unknown mask values and padding; leave them out of the loss)"
        )
    return lines

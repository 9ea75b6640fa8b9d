"""Human-readable texts: the dry-run plan, the end-of-pack summary, `packer info`."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from .packing.plan import PackPlan
from .reading.dataset import PackedDataset

_SHOWN = 10


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def reason_kind(reason: str) -> str:
    """A reason without its numbers and quoted names, so like rejections group together."""
    return re.sub(r"\d+", "N", reason.split(":")[0]).strip()


def dry_run(plan: PackPlan) -> str:
    s = plan.scan
    width, height = plan.config.geometry.size
    lines = [
        f"source:  {s.root}",
        f"layout:  {s.layout} ({s.task})",
        f"output:  {plan.out} ({plan.config.format}, {width}x{height}, "
        f"{plan.config.geometry.mode})",
    ]
    for split, shards in plan.shards.items():
        count = sum(len(sh.samples) for sh in shards)
        lines.append(
            f"split {split}: {count} samples in {len(shards)} shard(s), "
            f"~{human_bytes(count * plan.record_bytes)}"
        )
    names = plan.table.names if plan.table else None
    lines.append(
        f"classes: {len(names)}: {', '.join(names)}"
        if names
        else "classes: counted from the masks while packing"
    )
    lines += [f"note:    {n}" for n in plan.notes]
    lines += _rejections([{"path": r.path, "reason": r.reason} for r in s.rejected])
    return "\n".join(lines)


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


def pack_summary(data: dict, out: Path) -> str:
    if data.get("up_to_date"):
        return f"{out} already holds this pack (same sources and options): nothing to do"
    counts = {name: split["count"] for name, split in data["splits"].items()}
    total = sum(counts.values())
    run = data["run"]
    rate = total / run["seconds"] if run["seconds"] else 0
    lines = [
        f"packed {total} samples ("
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f") in {run['seconds']:.1f} s ({rate:.0f} img/s, {run['workers']} workers)"
    ]
    if run.get("resumed_shards"):
        lines.append(f"resumed: {run['resumed_shards']} shard(s) were already finished")
    lines += _rejections(data["rejected"])
    if data["unknown_labels"]:
        pixels = sum(sum(u["values"].values()) for u in data["unknown_labels"])
        lines.append(
            f"unknown mask values in {len(data['unknown_labels'])} file(s), {pixels} "
            f"pixels set to ignore index {data['ignore_index']} (see 'packer info')"
        )
    lines.append(f"output: {out}")
    return "\n".join(lines)


def summary(data: dict) -> dict:
    """The manifest without per-file detail: what scripts usually want."""
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
            }
            for name, s in data["splits"].items()
        },
        "options": data["options"],
        "stats": data["stats"],
        "source": data["source"],
        "rejected": len(data["rejected"]),
        "unknown_labels": len(data["unknown_labels"]),
        "backends": data["run"]["backends"],
    }


def info(dataset: PackedDataset) -> str:
    data = dataset.manifest
    fields = ", ".join(f"{f.name} {list(f.shape)} {f.dtype}" for f in dataset.fields)
    lines = [
        f"{dataset.root}: {data['format']} pack, {data['task']}",
        f"fields:   {fields}",
        f"source:   {data['source']['root']} ({data['source']['layout']})",
    ]
    for name, s in data["splits"].items():
        size = sum(sh["bytes"] for sh in s["shards"])
        lines.append(
            f"split {name}: {s['count']} samples, {len(s['shards'])} shard(s), {human_bytes(size)}"
        )
    stats = data["stats"]
    counts = stats.get("class_pixels") or stats.get("class_images") or {}
    total = sum(counts.values()) or 1
    unit = "pixels" if data["task"] == "segmentation" else "images"
    lines.append(f"classes:  {len(data['classes'])} (from {data['class_source']}; share of {unit})")
    for c in data["classes"]:
        color = "" if c["color"] is None else " rgb(" + ",".join(map(str, c["color"])) + ")"
        lines.append(
            f"  {c['index']:>3} {c['name']:<20} {100 * counts.get(c['name'], 0) / total:6.2f}%"
            f"{color}"
        )
    lines.append(
        "mean/std: "
        + " ".join(f"{m:.1f}/{s:.1f}" for m, s in zip(stats["mean"], stats["std"], strict=True))
    )
    opts = data["options"]
    own = ", ".join(f"{k} {opts[k]}" for k in dataset.format_options)
    lines.append(
        f"options:  size {opts['size'][0]}x{opts['size'][1]}, resize {opts['resize']}, "
        f"interpolation {opts['interpolation']}, seed {opts['seed']}" + (f", {own}" if own else "")
    )
    lines.append("backends: " + ", ".join(f"{k} ({v})" for k, v in data["run"]["backends"].items()))
    lines += _rejections(data["rejected"])
    for u in data["unknown_labels"][:_SHOWN]:
        lines.append(
            f"unknown:  {u['path']}: " + ", ".join(f"{k} x {v} px" for k, v in u["values"].items())
        )
    return "\n".join(lines)

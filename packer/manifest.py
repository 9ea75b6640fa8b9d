"""dataset.json: built from shard receipts, written last and atomically, read back by every reader.

The manifest describes a pack as data (fields, classes, splits, shard files with hashes,
options, rejections, stats) so that a reader in any language needs nothing else.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np

from . import storage
from .errors import ManifestError
from .labels import ClassTable
from .schema import Field

MANIFEST_NAME = "dataset.json"
FORMAT_VERSION = 1
OBJECT_TASKS = ("detection", "instances")  # tasks whose samples hold objects


def build(
    *,
    fmt: str,
    task: str,
    fields: tuple[Field, ...],
    table: ClassTable,
    receipts: list[dict],
    source: dict,
    options: dict,
    run: dict,
    rejected: list[dict],
    fingerprint: str,
    converter_revision: int,
    left_out: list[str] | None = None,
) -> dict:
    """Assemble the manifest; receipts are taken in (split, shard) order so stats are exact.

    Each shard lists its files (what `verify` hashes and readers read) and, under `receipt`,
    the receipt beside them (statistics and the states of its sources, for updates).
    `left_out` (present when not empty) says what the source holds that no field stores.
    """
    receipts = sorted(receipts, key=lambda r: r["name"])
    splits: dict[str, dict] = {}
    for r in receipts:
        split = splits.setdefault(r["split"], {"count": 0, "shards": []})
        split["count"] += r["count"]
        entry = {
            "name": r["name"],
            "count": r["count"],
            "bytes": sum(f["bytes"] for f in r["files"]),
            "files": r["files"],
        }
        if "receipt_file" in r:
            entry["receipt"] = r["receipt_file"]
        split["shards"].append(entry)
    backends: Counter = Counter()
    for r in receipts:
        backends.update(r["backends"])
    return {
        "format_version": FORMAT_VERSION,
        "format": fmt,
        "task": task,
        "fields": [f.to_json() for f in fields],
        "classes": [c.to_json() for c in table.classes],
        "class_source": table.source,
        **({"class_mapping": table.mapping_json()} if table.mapping_json() else {}),
        "ignore_index": options.get("ignore_index"),
        "splits": dict(sorted(splits.items())),
        "options": options,
        "source": source,
        "fingerprint": fingerprint,
        "converter_revision": converter_revision,
        "run": {**run, "backends": dict(sorted(backends.items()))},
        "rejected": rejected + [x for r in receipts for x in r["rejected"]],
        "unknown_labels": [u for r in receipts for u in r["unknown"]],
        **({"left_out": list(left_out)} if left_out else {}),
        **(
            {"dropped_objects": [d for r in receipts for d in r.get("dropped", [])]}
            if task in OBJECT_TASKS
            else {}
        ),
        "stats": _all_stats(task, table, receipts),
    }


def _all_stats(task: str, table: ClassTable, receipts: list[dict]) -> dict:
    """Stats of the training split (what `normalize="dataset"` uses), plus each split's own."""
    per_split = {
        name: _stats(task, table, [r for r in receipts if r["split"] == name])
        for name in sorted({r["split"] for r in receipts})
    }
    reference = "train" if "train" in per_split else None
    top = per_split[reference] if reference else _stats(task, table, receipts)
    return {**top, "computed_on": reference or "all splits", "splits": per_split}


def _stats(task: str, table: ClassTable, receipts: list[dict]) -> dict:
    """Per-channel mean/std from exact integer histograms; class pixel or image counts."""
    classes: Counter = Counter()
    for r in receipts:
        classes.update({int(k): v for k, v in r["class_counts"].items()})
    mean, var = _channel_moments(receipts)
    std = np.sqrt(np.maximum(var, 0.0))
    known = {c.index for c in table.classes}
    count_key = "class_pixels" if task == "segmentation" else "class_images"
    if task in OBJECT_TASKS:
        count_key = "class_objects"
        objects: Counter = Counter()
        for r in receipts:
            objects.update(r.get("objects", {}))
    return {
        "mean": [round(float(v), 4) for v in np.nan_to_num(mean)],
        "std": [round(float(v), 4) for v in np.nan_to_num(std)],
        count_key: {c.name: int(classes.get(c.index, 0)) for c in table.classes},
        "other_pixels" if task == "segmentation" else "other_images": {
            str(k): int(v) for k, v in sorted(classes.items()) if k not in known
        },
        **({"objects": _object_stats(objects)} if task in OBJECT_TASKS else {}),
    }


def _channel_moments(receipts: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Per-band mean and variance: from exact histograms (8-bit images), or from counts, sums
    and sums of squares (16-bit and float images)."""
    moments = [
        np.asarray(r["channel_moments"], np.float64) for r in receipts if "channel_moments" in r
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        if moments:
            count, total, squares = np.sum(moments, axis=0).T
            mean = total / count
            return mean, squares / count - mean**2
        hists = [np.asarray(r["channel_hist"], np.float64) for r in receipts]
        hists = [h for h in hists if h.any()]  # a shard of rejected records counted nothing
        hist = np.sum(hists, axis=0) if hists else np.zeros((3, 256))
        values = np.arange(256, dtype=np.float64)
        total = hist.sum(axis=1)
        mean = (hist * values).sum(axis=1) / total
        return mean, (hist * values**2).sum(axis=1) / total - mean**2


def _object_stats(counts: Counter) -> dict:
    """Objects per image (image count by object count), COCO's area ranges, dropped by why."""
    per_image = {
        int(k.rpartition("_")[2]): v for k, v in counts.items() if k.startswith("images_with_")
    }
    return {
        "images_by_count": {str(k): v for k, v in sorted(per_image.items())},
        "sizes": {k: counts.get(k, 0) for k in ("small", "medium", "large")},
        "dropped": {
            k.removeprefix("dropped: "): v
            for k, v in sorted(counts.items())
            if k.startswith("dropped: ")
        },
    }


def write(out: Path, manifest: dict) -> Path:
    """Write dataset.json via a temporary file and a rename, so it is complete or absent."""
    path = out / MANIFEST_NAME
    storage.write_text_atomic(path, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return path


def read(root: str | os.PathLike) -> dict:
    """Load and sanity-check a dataset.json; errors say which file and what is wrong."""
    path = storage.as_path(root) / MANIFEST_NAME
    if not storage.is_file(path):
        raise ManifestError(f"{root}: no {MANIFEST_NAME} here (not a finished packer dataset)")
    try:
        data = json.loads(storage.read_text(path))
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: unreadable ({exc})") from exc
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ManifestError(f"{path}: format_version {version}, this packer reads {FORMAT_VERSION}")
    return data

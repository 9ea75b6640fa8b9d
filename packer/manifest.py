"""dataset.json: built from shard receipts, written last and atomically, read back by every reader.

The manifest describes a pack as data (fields, classes, splits, shard files with hashes,
options, rejections, stats) so that a reader in any language needs nothing else.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from . import storage
from .errors import ManifestError
from .fields import kind_of
from .labels import ClassTable
from .schema import Field

MANIFEST_NAME = "dataset.json"
# The provenance of a sample whose image came as data, not a file: "<sample 7>".
SAMPLE_WITHOUT_FILE = "<sample {}>"
FORMAT_VERSION = 1
# The presets whose samples hold objects. The manifest decides by fields (a pack with ragged
# fields lists its dropped objects; kinds make the stats); still read by reading.loader,
# tf.tfdata and packing.plan until they decide by fields too.
OBJECT_TASKS = ("detection", "instances", "keypoints")


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
    keypoints: dict | None = None,
    stored_size: dict | None = None,
) -> dict:
    """Assemble the manifest; receipts are taken in (split, shard) order so stats are exact.

    Each shard lists its files (what `verify` hashes and readers read) and, under `receipt`,
    the receipt beside them (statistics and the states of its sources, for updates).
    `left_out` (present when not empty) says what the source holds that no field stores;
    `keypoints` (when given) names a keypoints field's points, its skeleton and flip order;
    `stored_size` (when given: fields are encoded) is the estimate the shards were cut by,
    which an update of the pack cuts them by again.
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
        **({"stored_size": stored_size} if stored_size else {}),
        "run": {**run, "backends": dict(sorted(backends.items()))},
        "rejected": rejected + [x for r in receipts for x in r["rejected"]],
        "unknown_labels": [u for r in receipts for u in r["unknown"]],
        **({"left_out": list(left_out)} if left_out else {}),
        **({"keypoints": keypoints} if keypoints else {}),
        **(
            {"dropped_objects": [d for r in receipts for d in r.get("dropped", [])]}
            if any(f.ragged for f in fields)
            else {}
        ),
        "stats": _all_stats(fields, table, receipts),
    }


def _all_stats(fields: tuple[Field, ...], table: ClassTable, receipts: list[dict]) -> dict:
    """Stats of the training split (what `normalize="dataset"` uses), plus each split's own."""
    per_split = {
        name: _stats(fields, table, [r for r in receipts if r["split"] == name])
        for name in sorted({r["split"] for r in receipts})
    }
    reference = "train" if "train" in per_split else None
    top = per_split[reference] if reference else _stats(fields, table, receipts)
    return {**top, "computed_on": reference or "all splits", "splits": per_split}


def _stats(fields: tuple[Field, ...], table: ClassTable, receipts: list[dict]) -> dict:
    """Each field's kind's entries from the receipts' counts: per-channel mean/std (images),
    class pixel, image or object counts, object statistics (boxes)."""
    stats: dict = {}
    for f in fields:
        stats.update(kind_of(f).stats_entries(receipts, table))
    return stats


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

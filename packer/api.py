"""`packer.pack`: source -> samples -> plan -> shard tasks -> writers -> manifest.

This module orchestrates; the pieces (sources, labels, imaging, plan, convert, engine,
outdir, manifest) each do one job.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, engine, formats, manifest, outdir
from .convert import ChunkResult, FinalizeTask, PackConfig, cpu_count
from .dataset import PackedDataset, open_dataset
from .errors import PackError
from .imaging import DEFAULT_MAX_PIXELS, Geometry, backend_versions, load_image
from .labels import ClassTable, find_class_table, mask_dtype, read_class_table
from .plan import ChunkTask, ShardPlan, chunk_tasks, plan_shards
from .schema import fields_for, record_bytes
from .sources import SourceScan, scan

DEFAULT_SHARD_BYTES = 256 * 1000 * 1000
# Part of every fingerprint: raise it when the same options and sources would give other bytes
# or statistics, so that a pack is never resumed across that change (2: channel statistics
# sample ~32 centred rows per image).
CONVERTER_REVISION = 2


@dataclass
class PackPlan:
    """Everything decided before any pixel is decoded (what `--dry-run` shows)."""

    scan: SourceScan
    out: Path
    table: ClassTable | None
    config: PackConfig
    shards: dict[str, list[ShardPlan]]
    options: dict
    fingerprint: str
    notes: list[str] = field(default_factory=list)

    @property
    def record_bytes(self) -> int:
        return record_bytes(self.config.fields)


def default_out(src: str | os.PathLike, fmt: str) -> Path:
    """`<SRC>-<format>` beside SRC (a list file's name without its extension)."""
    src_path = Path(src).resolve()
    stem = src_path.stem if src_path.is_file() else src_path.name
    return src_path.parent / f"{stem}-{fmt}"


def make_plan(
    src: str | os.PathLike,
    out: str | os.PathLike | None = None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    *,
    resize: str = "fill",
    interpolation: str = "auto",
    pad_value: int = 0,
    seed: int = 0,
    shard_size: int = DEFAULT_SHARD_BYTES,
    split: dict[str, float] | None = None,
    layout: str = "auto",
    masks: str | os.PathLike | None = None,
    mask_suffix: str | None = None,
    classes: str | os.PathLike | None = None,
    ignore_index: int | None = None,
    unknown_colors: str = "ignore",
    max_pixels: int = DEFAULT_MAX_PIXELS,
    **format_options,
) -> PackPlan:
    """Scan the source and decide shapes, classes, shards and the output folder.

    `format_options` are the chosen format's own options (see its module's OPTIONS).
    """
    fmt_options = _format_options(format, format_options)
    if shard_size <= 0:
        raise PackError("--shard-size must be a positive number of bytes")
    found = scan(src, layout=layout, masks=masks, mask_suffix=mask_suffix, split=split)
    notes = list(found.notes)
    table = _class_table(found, classes, notes)
    if ignore_index is None:
        ignore_index = 255 if table is None or len(table) <= 255 else 65535
    if found.task == "segmentation" and not 0 <= ignore_index <= 65535:
        raise PackError(f"--ignore-index {ignore_index} must be within 0..65535")
    if table is not None and found.task == "segmentation" and ignore_index < len(table):
        raise PackError(
            f"--ignore-index {ignore_index} is a class id ({table.names[ignore_index]!r}); "
            f"choose a value of at least {len(table)}"
        )
    geometry = Geometry(_output_size(found, size, notes), resize, interpolation, pad_value)
    fields = fields_for(found.task, geometry.size, mask_dtype(table and len(table), ignore_index))
    out_path = Path(out) if out is not None else default_out(src, format)
    options = {
        "format": format,
        "size": list(geometry.size),
        "resize": resize,
        "interpolation": interpolation,
        "pad_value": pad_value,
        "seed": seed,
        "shard_size": shard_size,
        "split": split,
        "layout": layout,
        "masks": masks and str(masks),
        "mask_suffix": mask_suffix,
        "classes": classes and str(classes),
        "ignore_index": ignore_index,
        "unknown_colors": unknown_colors,
        "max_pixels": max_pixels,
        **fmt_options,
    }
    config = PackConfig(
        root=str(found.root),
        out=str(out_path.resolve()),
        format=format,
        task=found.task,
        geometry=geometry,
        fields=fields,
        table=table,
        ignore_index=ignore_index,
        unknown_colors=unknown_colors,
        max_pixels=max_pixels,
        format_options=fmt_options,
    )
    shards = plan_shards(found.samples, seed, record_bytes(fields), shard_size)
    return PackPlan(
        found, out_path, table, config, shards, options, _fingerprint(options, found), notes
    )


def _format_options(name: str, given: dict) -> dict:
    """The format's options with defaults filled in; unknown or impossible ones are errors."""
    try:
        fmt = formats.get(name)
    except ValueError as exc:
        raise PackError(str(exc)) from None
    unknown = sorted(set(given) - set(fmt.OPTIONS))
    if unknown:
        raise PackError(f"option(s) {', '.join(unknown)} do not apply to --format {name}")
    options = {**fmt.OPTIONS, **given}
    try:
        fmt.check_options(options)
    except ValueError as exc:
        raise PackError(f"--format {name}: {exc}") from None
    return options


def _class_table(found: SourceScan, classes, notes: list[str]) -> ClassTable | None:
    """The class table: --classes, else a file in the source root, else folder/list names."""
    path = Path(classes) if classes is not None else find_class_table(found.root)
    if path is not None:
        table = read_class_table(path)
        notes.append(f"classes from {path.name}: {len(table)}")
        if found.class_names is not None and len(table) < len(found.class_names):
            raise PackError(
                f"{path} lists {len(table)} classes, the source has "
                f"{len(found.class_names)}: {', '.join(found.class_names)}"
            )
        return table
    if found.class_names is not None:
        return ClassTable.from_names(
            list(found.class_names),
            "folder names" if found.layout == "class-folders" else "list labels",
        )
    notes.append("no class table found: masks are read as class indices, classes are counted")
    return None


def _output_size(found: SourceScan, size, notes: list[str]) -> tuple[int, int]:
    """--size as (W, H); without it, the size of the first image (others are resized to it)."""
    if isinstance(size, int):
        return (size, size)
    if size is not None:
        return (int(size[0]), int(size[1]))
    first = found.samples[0].image
    width, height = load_image(found.root / first, None).source_size
    notes.append(f"no --size given: using {width}x{height}, the size of {first}")
    return (width, height)


def _fingerprint(options: dict, found: SourceScan) -> str:
    """Identifies what a pack would contain: its options, the converter revision and its
    exact list of samples."""
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    digest.update(f"converter {CONVERTER_REVISION}\n".encode())
    for s in found.samples:
        digest.update(f"{s.split}\0{s.image}\0{s.mask}\0{s.label}\n".encode())
    return digest.hexdigest()


def pack(
    src: str | os.PathLike,
    out: str | os.PathLike | None = None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    *,
    workers: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    strict: bool = False,
    max_rejects: int | None = None,
    **options,
) -> PackedDataset:
    """Pack SRC into OUT and return the opened dataset; resumes an interrupted pack of the same."""
    plan = make_plan(src, out, format, size, **options)
    execute(plan, workers, overwrite, progress, strict, max_rejects)
    return open_dataset(plan.out)


def execute(
    plan: PackPlan,
    workers: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    strict: bool = False,
    max_rejects: int | None = None,
) -> dict:
    """Run a plan: lock and prepare OUT, pack the missing shards, write the manifest.

    `strict` stops at the first rejected input, `max_rejects` once more than that many are
    rejected. Whatever stops a pack (those limits, a full disk, Ctrl-C) leaves the finished
    shards in place and no temporary files, so the same command resumes it.
    """
    if not plan.scan.samples:
        raise PackError(f"{plan.scan.root}: nothing to pack")
    limit = 0 if strict else max_rejects
    rejected = [{"path": r.path, "reason": r.reason} for r in plan.scan.rejected]
    _check_rejects(rejected, limit)
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    with outdir.exclusive(out):
        try:
            if not outdir.prepare(out, plan.fingerprint, overwrite):
                return manifest.read(out) | {"up_to_date": True}
            data = _pack_missing(plan, workers or cpu_count(), progress, rejected, limit)
        except BaseException as exc:
            outdir.remove_temporaries(out)
            if outdir.is_out_of_space(exc):
                raise PackError(
                    f"no space left for {out} ({exc.strerror}); finished shards are kept: "
                    "free space and run the same command again to resume"
                ) from exc
            raise
        manifest.write(out, data)
        outdir.clear_partial(out)
    return data


def _check_rejects(rejected: list[dict], limit: int | None) -> None:
    """Stop once more inputs were rejected than `limit` allows (None: no limit)."""
    if limit is not None and len(rejected) > limit:
        shown = "; ".join(f"{r['path']}: {r['reason']}" for r in rejected[:5])
        raise PackError(
            f"{len(rejected)} input(s) rejected, more than the {limit} allowed "
            f"(--strict / --max-rejects): {shown}"
        )


def _pack_missing(
    plan: PackPlan, workers: int, progress: bool, rejected: list[dict], limit: int | None
) -> dict:
    """Pack the shards no earlier run finished and build the manifest from all receipts."""
    out = plan.out
    started = time.perf_counter()
    done = outdir.finished_receipts(out, plan.fingerprint)
    todo = {
        s.name: chunk_tasks(s, plan.record_bytes)
        for shards in plan.shards.values()
        for s in shards
        if s.name not in done
    }
    seen = rejected + [x for r in done.values() for x in r["rejected"]]

    def on_chunk(result: ChunkResult) -> None:
        seen.extend(result.rejected)
        _check_rejects(seen, limit)

    _check_rejects(seen, limit)
    receipts = engine.run(
        plan.config,
        todo,
        lambda name, results: FinalizeTask(
            name, _split_of(todo[name]), plan.fingerprint, engine.ordered_chunks(results)
        ),
        workers,
        sum(len(c.samples) for chunks in todo.values() for c in chunks),
        progress,
        on_chunk,
    )
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
            "workers": workers,
            "seconds": round(time.perf_counter() - started, 3),
            "resumed_shards": len(done),
            "libraries": backend_versions(),
        },
        rejected=rejected,
    )


def _split_of(chunks: list[ChunkTask]) -> str:
    return chunks[0].split


def _table_from_counts(receipts: list[dict], ignore_index: int) -> ClassTable:
    """Without a class table, classes are the indices that occur (0..max), named class_N."""
    seen = {int(k) for r in receipts for k in r["class_counts"]} - {ignore_index}
    return ClassTable.from_names(
        [f"class_{i}" for i in range(max(seen, default=-1) + 1)], "mask values"
    )

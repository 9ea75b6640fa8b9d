"""The plan: everything decided before any pixel is decoded (what `--dry-run` shows).

Samples are ordered by a seeded shuffle and cut into shards and chunk tasks. The plan depends
only on the sources, the options and the record size, never on `--workers` or the engine,
which is what makes shards byte-identical however and wherever they are written.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import formats, storage
from ..errors import PackError
from ..imaging import DEFAULT_MAX_PIXELS, Geometry, decode_image
from ..labels import ClassTable, find_class_table, mask_dtype, read_class_table
from ..schema import fields_for, record_bytes
from ..sources import Sample, SourceScan, scan
from .convert import PackConfig, read_source
from .tasks import ChunkTask, ShardTask

DEFAULT_SHARD_BYTES = 256 * 1000 * 1000
CHUNK_BYTES = 8 << 20  # one worker task writes about this much; small enough to balance 2 cores
MAX_CHUNK_SAMPLES = 256
# Part of every fingerprint: raise it when the same options and sources would give other bytes
# or statistics, so that a pack is never resumed across that change (2: channel statistics
# sample ~32 centred rows per image).
CONVERTER_REVISION = 2


@dataclass(frozen=True)
class ShardPlan:
    """One shard: its split, position and the samples it will hold, in order."""

    split: str
    index: int
    total: int
    samples: tuple[Sample, ...]

    @property
    def name(self) -> str:
        return f"{self.split}-{self.index:05d}-of-{self.total:05d}"


@dataclass
class PackPlan:
    """Sources, classes, shapes, shards and the output folder of one pack."""

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

    def shard_tasks(self, skip: set[str] | frozenset[str] = frozenset()) -> list[ShardTask]:
        """The shards to write (all but those named in `skip`), each cut into chunk tasks."""
        return [
            ShardTask(s.name, s.split, self.fingerprint, tuple(chunk_tasks(s, self.record_bytes)))
            for shards in self.shards.values()
            for s in shards
            if s.name not in skip
        ]


def shuffled(samples: Sequence[Sample], seed: int, split: str) -> list[Sample]:
    """Samples of one split in a seeded order, so each shard mixes classes and folders."""
    ordered = sorted(samples, key=lambda s: s.image)
    digest = hashlib.sha256(f"{seed}/{split}".encode()).digest()
    random.Random(int.from_bytes(digest[:8], "little")).shuffle(ordered)
    return ordered


def plan_shards(
    samples: Iterable[Sample], seed: int, record_bytes: int, shard_bytes: int
) -> dict[str, list[ShardPlan]]:
    """Split samples by split, order each split, and cut it into shards of at most `shard_bytes`."""
    by_split: dict[str, list[Sample]] = {}
    for sample in samples:
        by_split.setdefault(sample.split, []).append(sample)
    per_shard = max(1, shard_bytes // max(1, record_bytes))
    plans: dict[str, list[ShardPlan]] = {}
    for split in sorted(by_split):
        ordered = shuffled(by_split[split], seed, split)
        total = -(-len(ordered) // per_shard)
        plans[split] = [
            ShardPlan(split, i, total, tuple(ordered[i * per_shard : (i + 1) * per_shard]))
            for i in range(total)
        ]
    return plans


def chunk_tasks(shard: ShardPlan, record_bytes: int) -> list[ChunkTask]:
    """Cut a shard into worker tasks; chunk boundaries never change the bytes written."""
    size = max(1, min(MAX_CHUNK_SAMPLES, CHUNK_BYTES // max(1, record_bytes)))
    return [
        ChunkTask(shard.name, shard.split, n, start, shard.samples[start : start + size])
        for n, start in enumerate(range(0, len(shard.samples), size))
    ]


def default_out(src: str | os.PathLike, fmt: str) -> Path:
    """`<SRC>-<format>` beside SRC (a list file's name without its extension)."""
    src_path = storage.as_path(src).resolve()
    stem = src_path.stem if storage.is_file(src_path) else src_path.name
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
    out_path = storage.as_path(out) if out is not None else default_out(src, format)
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
    path = storage.as_path(classes) if classes is not None else find_class_table(found.root)
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
    width, height = decode_image(read_source(str(found.root / first)), None).source_size
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

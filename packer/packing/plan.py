"""The plan: everything decided before any pixel is decoded (what `--dry-run` shows).

Samples are ordered (`order`) and cut into shards and chunk tasks. The plan depends only on the
sources, the options and the record size, never on `--workers` or the engine, which is what
makes shards byte-identical however and wherever they are written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .. import formats, storage
from ..errors import ImageError, PackError
from ..fields.presets import fields_for
from ..flags import flag
from ..imaging import Geometry
from ..imaging.kinds import Conversion
from ..labels import ClassTable, mask_dtype
from ..manifest import OBJECT_TASKS
from ..options import with_signature
from ..schema import record_bytes
from ..sources import AnnotationOptions, Sample, SourceScan, mask_line, scan
from ..sources.model import sample_files
from .classes import class_mapping, class_table, relabelled
from .convert import PackConfig
from .format_options import check_fields, format_options
from .kinds import image_kinds, mask_bits
from .options import PLAN_OPTIONS, PlanOptions
from .order import shuffled
from .placement import check_out
from .preflight import default_size
from .shapes import listed_fields
from .stored_size import StoredSize, estimate, own
from .tasks import ChunkTask, ShardTask

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
    stored: StoredSize  # one record's bytes on disk: estimated when fields are encoded
    notes: list[str] = field(default_factory=list)
    size_rule: str | None = None  # how the size was chosen when none was given

    @property
    def record_bytes(self) -> int:
        return record_bytes(self.config.fields)

    @cached_property
    def options_fingerprint(self) -> str:
        """What every shard's bytes depend on besides its samples: options, converter revision."""
        return _fingerprint(self.options, None)

    @cached_property
    def shard_fingerprints(self) -> dict[str, str]:
        """Shard name -> SHA-256 of the options fingerprint, the name and the shard's samples:
        a finished shard with the same fingerprint (and unchanged sources) is this shard."""
        found = {}
        for shards in self.shards.values():
            for s in shards:
                digest = hashlib.sha256(f"{self.options_fingerprint}\n{s.name}\n".encode())
                for sample in s.samples:
                    digest.update(_sample_line(sample))
                found[s.name] = digest.hexdigest()
        return found

    @property
    def all_shards(self) -> list[ShardPlan]:
        return [s for shards in self.shards.values() for s in shards]

    def sources(self) -> set[str]:
        """Every source file the plan reads (images and masks), relative to the source root."""
        return {p for s in self.scan.samples for p in sample_files(s)}

    def planned_bytes(self, skip: set[str] | frozenset[str] = frozenset()) -> int:
        """Bytes the shards not in `skip` will take as stored: exactly for raw fields,
        estimated where fields are encoded (`stored`)."""
        return sum(
            len(s.samples) * self.stored.record for s in self.all_shards if s.name not in skip
        )

    def shard_tasks(self, skip: set[str] | frozenset[str] = frozenset()) -> list[ShardTask]:
        """The shards to write (all but those named in `skip`), each cut into chunk tasks."""
        return [
            ShardTask(
                s.name,
                s.split,
                self.shard_fingerprints[s.name],
                tuple(chunk_tasks(s, self.record_bytes)),
            )
            for s in self.all_shards
            if s.name not in skip
        ]


def plan_shards(
    samples: Iterable[Sample],
    seed: int,
    record_bytes: int,
    shard_bytes: int,
    root: str | os.PathLike | None = None,
) -> dict[str, list[ShardPlan]]:
    """Split samples by split, order each split, and cut it into shards of at most `shard_bytes`.
    `root`: the folder the samples' paths are relative to (cells are ordered by row group)."""
    by_split: dict[str, list[Sample]] = {}
    for sample in samples:
        by_split.setdefault(sample.split, []).append(sample)
    per_shard = max(1, shard_bytes // max(1, record_bytes))
    plans: dict[str, list[ShardPlan]] = {}
    for split in sorted(by_split):
        ordered = shuffled(by_split[split], seed, split, root)
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
    src_path = storage.as_path(src).expanduser().resolve()
    stem = src_path.stem if storage.is_file(src_path) else src_path.name
    return src_path.parent / f"{stem}-{fmt}"


def make_plan(
    src: str | os.PathLike,
    out: str | os.PathLike | None = None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    **options,
) -> PackPlan:
    """Scan the source and decide shapes, classes, shards and the output folder.

    `options` are the plan's (`PLAN_OPTIONS`: resize, split, classes, coco, ignore_class, ...;
    `help(make_plan)` lists them with their defaults) and the chosen format's own (see its
    module's OPTIONS); any other keyword is refused, with the nearest known name.
    """
    declared = {o.name for o in PLAN_OPTIONS}
    fmt_options = format_options(format, {k: v for k, v in options.items() if k not in declared})
    o = PlanOptions.resolve(options)
    if o.shard_size <= 0:
        raise PackError(f"{flag('shard_size', o.shard_size)}: must be a positive number of bytes")
    for path in (src, out):
        if path is not None:
            storage.backend(path)  # a clear error for remote paths no backend handles
    if out is not None:
        check_out(src, out, root=o.root, masks=o.masks)
    output_size = _given_size(size)
    out_path = storage.as_path(out).expanduser() if out is not None else default_out(src, format)
    annotations = AnnotationOptions.given(o.coco, o.overlap, o.crowd, o.task, o.classes)
    mapping = class_mapping(o.ignore_class, o.class_map)
    found = scan(
        src,
        layout=o.layout,
        masks=o.masks,
        mask_suffix=o.mask_suffix,
        split=o.split,
        exclude=[out_path],
        root=o.root,
        annotations=annotations,
        columns=o.columns,
        vocabulary=o.vocabulary,
    )
    notes = list(found.notes)
    table = class_table(found, o.classes, o.layout, notes)
    if mapping and (found.task in OBJECT_TASKS or found.fields is not None):
        what = f"{found.task} packs" if found.fields is None else "a list with columns"
        raise PackError(
            f"{flag('ignore_class')} and {flag('class_map')} do not apply to {what} yet: "
            "the source's classes are kept"
        )
    if mapping:
        table = relabelled(found, table, mapping, notes)
    conversion = _conversion(o.channels, o.dtype)
    kinds = image_kinds(found.root, found.samples, conversion, o.max_pixels)
    if kinds.losses:
        notes.append(f"images converted as asked, losing: {'; '.join(kinds.losses)}")
    wide_masks = (
        table is None
        and found.task == "segmentation"
        and mask_bits(found.root, found.samples, o.max_pixels) == 16
    )
    ignore_index = o.ignore_index
    if ignore_index is None:
        wide = wide_masks if table is None else len(table) > 255
        ignore_index = 65535 if wide else 255
    if wide_masks:
        notes.append(
            "masks hold 16-bit values and there is no class table: each value is kept as its "
            f"class id (uint16), {ignore_index} is the ignore index"
        )
    if table is not None and found.task == "segmentation" and ignore_index < len(table):
        raise PackError(
            f"{flag('ignore_index', ignore_index)} is a class id "
            f"({table.names[ignore_index]!r}); choose a value of at least {len(table)}"
        )
    size_rule = None
    if output_size is None:
        output_size, size_rule = default_size(found.root, found.samples, o.max_pixels)
    geometry = Geometry(output_size, o.resize, o.interpolation, o.pad_value)
    stored = (kinds.stored.dtype, kinds.stored.bands)
    if found.fields is not None:  # a list with columns: each column's field
        fields = listed_fields(found, geometry.size, stored, o.max_pixels)
    else:
        dtype = mask_dtype(table and len(table), ignore_index)
        fields = fields_for(found.task, geometry.size, dtype, stored, found.keypoints)
    fields, fmt_options = formats.encoding.encoded(fields, fmt_options)  # image fields
    check_fields(format, fields, fmt_options)
    recorded = {
        **geometry_options(format, geometry, o, conversion),
        # what the sources' headers decided, when it is not what packer stored before it kept
        # them: a pack of such sources written before then is not resumed as this one
        **({"images": list(stored)} if stored != ("uint8", 3) else {}),
        **({"mask_bits": 16} if wide_masks else {}),
        "seed": o.seed,
        "shard_size": o.shard_size,
        "split": o.split,
        "layout": o.layout,
        "masks": o.masks and str(o.masks),
        "mask_suffix": o.mask_suffix,
        "classes": o.classes and str(o.classes),
        "ignore_index": ignore_index,
        "unknown_colors": o.unknown_colors,
        "max_pixels": o.max_pixels,
        **({"root": str(o.root)} if o.root is not None else {}),  # only when given: old packs match
        # Object packs only: what decides which objects stay (a pack before it kept none under 1 px)
        **({"min_box_size": o.min_box_size} if found.task in OBJECT_TASKS else {}),
        **annotations.to_options(),
        **({"class_mapping": mapping.to_json()} if mapping else {}),
        # a list with columns: its fields, the columns' roles and the tag vocabularies
        **({"vocabulary": str(o.vocabulary)} if o.vocabulary is not None else {}),
        **({"fields": [f.to_json() for f in fields]} if found.fields is not None else {}),
        **(found.fields.recorded if found.fields is not None else {}),
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
        unknown_colors=o.unknown_colors,
        max_pixels=o.max_pixels,
        format_options=fmt_options,
        conversion=conversion,
        image_kinds=kinds,
        min_box_size=o.min_box_size,
    )
    # shards of what lands on disk: by the estimate of the pack in OUT when this run updates it
    on_disk = own(out_path, recorded, found.root, CONVERTER_REVISION) or estimate(
        config, found.samples, o.seed
    )
    shards = plan_shards(found.samples, o.seed, on_disk.record, o.shard_size, found.root)
    notes += on_disk.notes(o.shard_size)
    fingerprint = _fingerprint(recorded, found)
    return PackPlan(
        found, out_path, table, config, shards, recorded, fingerprint, on_disk, notes, size_rule
    )


with_signature(make_plan, PLAN_OPTIONS)


def geometry_options(
    format: str, geometry: Geometry, o: PlanOptions, conversion: Conversion
) -> dict:
    """The options recorded first: format, geometry, a conversion only when asked for one."""
    return {
        "format": format,
        "size": list(geometry.size),
        "resize": o.resize,
        "interpolation": o.interpolation,
        "pad_value": o.pad_value,
        **({"channels": conversion.channels} if conversion.channels != "auto" else {}),
        **({"dtype": conversion.dtype} if conversion.dtype != "auto" else {}),
    }


def _conversion(channels, dtype: str) -> Conversion:
    """The bands and sample type asked for, checked (a one-line error naming the option)."""
    try:
        return Conversion(channels, dtype)
    except ImageError as exc:
        raise PackError(f"{flag('channels', channels)}: {exc}") from None


def _given_size(size) -> tuple[int, int] | None:
    """`size` as (W, H) (one number: a square), checked; None when not given."""
    if size is None:
        return None
    pair = (size, size) if isinstance(size, int) else tuple(size)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
        raise PackError(f"{flag('size', size)}: expected (width, height) or one number")
    if min(pair) <= 0:
        raise PackError(f"{flag('size', size)}: width and height must be positive")
    return pair[0], pair[1]


def _sample_line(s: Sample) -> bytes:
    values = "" if s.values is None else f"\0{s.values.digest}"  # Python samples' values
    return f"{s.split}\0{s.image}\0{mask_line(s.mask)}\0{s.label}{values}\n".encode()


def _fingerprint(options: dict, found: SourceScan | None) -> str:
    """Identifies what a pack would contain: its options, the converter revision and its
    exact list of samples (none: the options' own fingerprint)."""
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    digest.update(f"converter {CONVERTER_REVISION}\n".encode())
    for s in found.samples if found is not None else ():
        digest.update(_sample_line(s))
    return digest.hexdigest()

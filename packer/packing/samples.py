"""The plan of a pack from Python samples (`packer.pack(samples, ...)`): fields from the first
sample (or as given), the class table from its class names, shapes from the pack's size.

The plan is a `PackPlan` as a folder's is, so resume, update, workers and engines treat it
alike: each sample's values travel inside its chunk task, its digest enters the fingerprints,
and the files its paths name are checked for changes as any source file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .. import formats, storage
from ..errors import ImageError, PackError, SourceError
from ..fields import FieldKind
from ..fields.presets import task_of
from ..imaging import Geometry
from ..labels import ClassTable
from ..schema import Field
from ..sources import SourceScan
from ..sources.python_samples import as_samples, class_names, infer, listed
from ..sources.splits import assign_split
from .convert import PackConfig
from .format_options import check_fields, format_options
from .options import PlanOptions
from .plan import (
    CONVERTER_REVISION,
    PackPlan,
    _conversion,
    _fingerprint,
    _given_size,
    geometry_options,
    plan_shards,
)
from .shapes import picture, value_field
from .stored_size import estimate, own

LAYOUT = "python samples"


def plan_samples(
    samples,
    out: str | os.PathLike | None,
    format: str = "npy",
    size: tuple[int, int] | int | None = None,
    fields: Mapping[str, str | FieldKind] | None = None,
    **options,
) -> PackPlan:
    """Decide fields, classes, shapes and shards of a pack of Python samples (dicts)."""
    if out is None:
        raise PackError("packing Python samples needs out= (there is no source folder beside)")
    if fields is not None and not isinstance(fields, Mapping):
        raise PackError(f"fields=: a dict of key -> kind name, not {type(fields).__name__}")
    declared = set(PlanOptions.__dataclass_fields__)
    fmt_options = format_options(format, {k: v for k, v in options.items() if k not in declared})
    o = PlanOptions.resolve({k: v for k, v in options.items() if k in declared})
    try:
        given, notes = listed(samples)
        kinds = infer(given[0], fields)
    except SourceError as exc:
        raise PackError(str(exc)) from None
    image_key = next((k for k, (kind, _) in kinds.items() if kind.name == "image"), None)
    if image_key is None:
        raise PackError(
            "the samples hold no image (a path or bytes of an image file): name "
            "the input's key in fields= as kind 'image'"
        )
    class_key = next((k for k, (kind, _) in kinds.items() if kind.name == "class"), None)
    names = class_names(given, class_key) if class_key else None
    table = ClassTable.from_names(names, f"the sorted names of {class_key!r}") if names else None
    fractions = o.split
    split = (lambda where: assign_split(where, fractions)) if fractions else None
    try:
        folder, found = as_samples(
            given,
            {k: v[0] for k, v in kinds.items()},
            {n: i for i, n in enumerate(names or [])},
            split,
        )
    except SourceError as exc:
        raise PackError(str(exc)) from None
    root = Path(folder)
    first = found[0].values.by_field  # type: ignore[union-attr]
    conversion = _conversion(o.channels, o.dtype)
    image_kind, image_size = picture(root, first[image_key], o.max_pixels)
    try:
        stored = conversion.output(image_kind)
    except ImageError as exc:
        raise PackError(f"{image_key}: {exc}") from None
    output_size = _given_size(size)
    size_rule = None
    if output_size is None:
        output_size = image_size
        size_rule = (
            f"the first sample's image size, {image_size[0]}x{image_size[1]} (no size given)"
        )
    geometry = Geometry(output_size, o.resize, o.interpolation, o.pad_value)
    shaped = [
        value_field(key, kind, first[key], geometry.size, root, o.max_pixels)
        if key != image_key
        else Field(
            key, (*geometry.size[::-1], stored.bands), np.dtype(stored.dtype).str, kind="image"
        )
        for key, (kind, _) in kinds.items()
    ]
    shaped, fmt_options = formats.encoding.encoded(shaped, fmt_options)  # the image fields
    check_fields(format, shaped, fmt_options)
    ignore_index = o.ignore_index
    if ignore_index is None:
        wide = any(f.kind == "mask" and np.dtype(f.dtype).itemsize > 1 for f in shaped)
        ignore_index = 65535 if wide else 255
    task = task_of(tuple(shaped))
    why = "; ".join(
        f"{k}: {kind.name} {list(f.shape)} {np.dtype(f.dtype).name}"
        f"{' ragged' if f.ragged else ''} ({reason})"
        for (k, (kind, reason)), f in zip(kinds.items(), shaped, strict=True)
    )
    recorded = {
        **geometry_options(format, geometry, o, conversion),
        "fields": [f.to_json() for f in shaped],
        "seed": o.seed,
        "shard_size": o.shard_size,
        "split": o.split,
        "ignore_index": ignore_index,
        "max_pixels": o.max_pixels,
        **fmt_options,
    }
    scan = SourceScan(
        root,
        LAYOUT,
        task,
        found,
        names,
        [],
        "all samples in train" if not fractions else "split by a hash of each sample's provenance",
        notes,
        table,
        why=f"{len(found)} Python samples; fields {why}",
    )
    config = PackConfig(
        root=str(root),
        out=str(storage.as_path(out).expanduser().resolve()),
        format=format,
        task=task,
        geometry=geometry,
        fields=tuple(shaped),
        table=table,
        ignore_index=ignore_index,
        unknown_colors=o.unknown_colors,
        max_pixels=o.max_pixels,
        format_options=fmt_options,
        conversion=conversion,
        min_box_size=o.min_box_size,
    )
    out_path = storage.as_path(out).expanduser()
    # shards of what lands on disk: by the estimate of the pack in OUT when this run updates it
    on_disk = own(out_path, recorded, root, CONVERTER_REVISION) or estimate(config, found, o.seed)
    shards = plan_shards(found, o.seed, on_disk.record, o.shard_size)
    notes = [*notes, *on_disk.notes(o.shard_size)]  # the scan's own stay the source's
    fingerprint = _fingerprint(recorded, scan)
    return PackPlan(
        scan, out_path, table, config, shards, recorded, fingerprint, on_disk, notes, size_rule
    )


def describe(plan: PackPlan) -> str:
    """What a pack would hold, as `dry_run` shows it: its source and how its fields were
    found, each field, the output, splits, classes and notes."""
    s = plan.scan
    width, height = plan.config.geometry.size
    lines = [f"source:  {s.root if s.layout != LAYOUT else 'Python samples'}"]
    lines += [f"layout:  {s.layout} ({s.task})"]
    lines += [f"found:   {s.why}"] * bool(s.why)
    lines += [
        f"field:   {f.name}: {f.kind} {'[N, ' if f.ragged else '['}"
        f"{', '.join(map(str, f.shape))}] {np.dtype(f.dtype).name}"
        for f in plan.config.fields
    ]
    lines.append(f"output:  {plan.out} ({plan.config.format}, {width}x{height})")
    lines += [f"size:    {plan.size_rule}"] * bool(plan.size_rule)
    for split, shards in plan.shards.items():
        count = sum(len(sh.samples) for sh in shards)
        lines.append(f"split {split}: {count} samples in {len(shards)} shard(s)")
    names = plan.table.names if plan.table else None
    lines.append(f"classes: {len(names)}: {', '.join(names)}" if names else "classes: none named")
    lines += [f"note:    {n}" for n in plan.notes]
    return "\n".join(lines)

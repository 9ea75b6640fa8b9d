"""A mixture's classes: identical class tables as they are, or reconciled by name through class
maps given at read time (`Stream(class_map=...)`), and each pack's lookup from its class ids to
the mixture's, applied to a batch's targets as they are read (never a re-pack).

A class map names a pack's classes and the mixture class each becomes (None or "ignore": the
ignore index); unnamed classes keep their names. The mixture's classes are the names in order of
first appearance, first pack first. Tables that differ with no class map anywhere are reconciled
by name only when every pack has the same names (in another order); else they are refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import MixtureError
from ..fields import get, kind_of
from ..relabel import IGNORE, read_class_map
from ..schema import PRESET_KINDS, Field

ClassMap = Mapping[str, str | None] | str | os.PathLike


@dataclass(frozen=True)
class Reconciled:
    """The mixture's classes (index, name, colour), its ignore index (segmentation), and per
    pack the lookup from its ids to the mixture's (None where they are the same)."""

    classes: list[dict]
    ignore_index: int | None
    tables: list[np.ndarray | None]


def class_map_of(value: ClassMap | None) -> dict[str, str | None] | None:
    """A class map as {pack class: mixture class or None}: a mapping, or a `source,target` CSV
    (the format of `pack --class-map`)."""
    if value is None:
        return None
    rows = value.items() if isinstance(value, Mapping) else read_class_map(value)
    return {str(s): None if t is None or str(t).lower() == IGNORE else str(t) for s, t in rows}


def reconcile(task: str, packs: list[dict], labels: list[str], maps: list) -> Reconciled:
    """Reconcile the class tables of `packs` (manifests) named `labels` through `maps`;
    `task` says where their class ids lie (`ids_in`): "segmentation", in planes of class ids
    with an ignore index, or another preset's name, in values without one."""
    maps = [class_map_of(m) for m in maps]
    named = []
    for manifest, label, mapping in zip(packs, labels, maps, strict=True):
        names = [c["name"] for c in manifest["classes"]]
        unknown = sorted(set(mapping or {}) - set(names))
        if unknown:
            raise MixtureError(
                f"{label}: class_map names {', '.join(map(repr, unknown))}, which this pack "
                f"has not (its classes: {', '.join(names[:20])})"
            )
        named.append([(mapping or {}).get(n, n) for n in names])
    if all(m is None for m in maps):
        ignores = {_ignore(task, manifest) for manifest in packs}
        if all(n == named[0] for n in named) and len(ignores) == 1:
            return Reconciled(
                _table(packs[0], named[0]), _ignore(task, packs[0]), [None] * len(packs)
            )
        for k, names in enumerate(named[1:], start=1):
            if set(names) != set(named[0]):
                extra = sorted(set(names) ^ set(named[0]))
                raise MixtureError(
                    f"the packs' classes differ: {labels[0]} and {labels[k]} do not share "
                    f"{', '.join(extra[:10])}: give a Stream class_map={{pack class: mixture "
                    "class}} to reconcile them by name"
                )
    order = list(dict.fromkeys(n for names in named for n in names if n is not None))
    if task != "segmentation" and any(None in names for names in named):
        raise MixtureError(
            f"a class_map maps a class to the ignore index, which only masks have: map it to "
            f"one of the mixture's classes ({', '.join(order[:20])})"
        )
    ignore = _ignore(task, packs[0])
    if ignore is not None and len(order) > ignore:
        raise MixtureError(
            f"the mixture has {len(order)} classes, so its class ids would reach the ignore "
            f"index {ignore}: map some of them together with class_map"
        )
    colours = {}
    for manifest, names in zip(packs, named, strict=True):
        for c, name in zip(manifest["classes"], names, strict=True):
            if name is not None and colours.get(name) is None:
                colours[name] = c.get("color")
    classes = [{"index": i, "name": n, "color": colours.get(n)} for i, n in enumerate(order)]
    index = {n: i for i, n in enumerate(order)}
    tables = [
        _lookup(task, manifest, names, index, ignore)
        for manifest, names in zip(packs, named, strict=True)
    ]
    return Reconciled(classes, ignore, tables)


def _table(manifest: dict, names: list[str]) -> list[dict]:
    return [{"index": i, "name": n, "color": c.get("color")} for i, (n, c) in
            enumerate(zip(names, manifest["classes"], strict=True))]  # fmt: skip


def _ignore(task: str, manifest: dict) -> int | None:
    return manifest.get("ignore_index") if task == "segmentation" else None


def _lookup(task: str, manifest: dict, names: list, index: dict, ignore: int | None):
    """One pack's id -> mixture id table (None when it changes nothing)."""
    ids = np.asarray([ignore if n is None else index[n] for n in names], np.int64)
    own_ignore = _ignore(task, manifest)
    if np.array_equal(ids, np.arange(len(ids))) and own_ignore == ignore:
        return None
    if task != "segmentation":
        return ids.astype(np.int32)
    dtype = np.dtype(next(f["dtype"] for f in manifest["fields"] if _is_plane(f)))
    table = np.full(256 if dtype.itemsize == 1 else 65536, ignore, dtype)
    table[: len(ids)] = ids
    return table


def _is_plane(entry: dict) -> bool:
    """Whether a manifest's field entry is a fixed plane of class ids (the mask kind); its
    kind inferred from name and raggedness where the manifest predates kinds."""
    ragged = bool(entry.get("ragged", False))
    kind = get(entry.get("kind") or PRESET_KINDS.get((entry["name"], ragged), "array"))
    return not ragged and kind.class_ids and kind.geometry == "labels"


def ids_in(pack_fields: Sequence[Field]) -> str:
    """Where the class ids of a pack of `pack_fields` lie, as `reconcile` takes it, by their
    kinds: "segmentation" when a fixed field of class ids is a plane (the mask kind, which has
    the ignore index), else "classification"."""
    planes = any(
        not f.ragged and kind_of(f).class_ids and kind_of(f).geometry == "labels"
        for f in pack_fields
    )
    return "segmentation" if planes else "classification"


def class_id_fields(pack_fields: Sequence[Field]) -> tuple[str, ...]:
    """The fields (fixed or ragged) whose kind says their values are class ids: what a
    mixture's lookup relabels."""
    return tuple(f.name for f in pack_fields if kind_of(f).class_ids)


def relabel(arrays: dict[str, np.ndarray], table: np.ndarray, names: tuple[str, ...]) -> None:
    """Map the class ids of `arrays[name]` for each of `names` through `table`, in place; ids
    outside the table (a detection target's negative padding) stay as they are."""
    for name in names:
        values = arrays.get(name)
        if values is None:
            continue
        if values.dtype.kind == "u" and len(table) >= 2 ** (8 * values.dtype.itemsize):
            values[...] = table[values]  # every value has a row: one vectorised lookup
            continue
        inside = (values >= 0) & (values < len(table))
        values[inside] = table[values[inside]]

"""A mixture opened for reading: its packs' splits seen as one split whose sample indices are
the plan's ids (see mixture_plan), so `Loader` and every adapter read it as they read a pack.

The packs must agree on what a sample is (its fields: names, kinds, image size) or are refused
in one line; their classes are reconciled (mixture_classes). A batch's ids, sorted, fall into
one run per pack in ascending sample order, shard by shard: each shard's run is read by its
format's shard reader straight into its rows of the batch (no extra copy), as a pack's
`BatchReader` reads its shards, then the pack's class ids are looked up where its table
differs.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from ..errors import MixtureError
from ..fields.presets import task_of
from ..schema import Field, fixed
from . import gather
from .buffers import BufferPool
from .dataset import ManifestView, PackedDataset, Split
from .mixture_classes import Reconciled, class_id_fields, ids_in, reconcile, relabel
from .mixture_plan import Plan, draws


class Streams(Protocol):
    """What a `MixedSplit` reads: a `mixture.Mixture` (named by what it offers, as `mixture`
    imports this module): its `Stream`s (path, split, amount, label and class map of each
    pack) and its epoch size."""

    streams: tuple[Any, ...]
    epoch_size: int | None


class MixedSplit:
    """A mixture's packs read as one split of `count` draws per epoch (ids, not samples)."""

    random_access = True

    def __init__(
        self,
        mixture: Streams,
        split: str,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        self.mixture = mixture
        self.name = split
        self.parts = [
            PackedDataset(s.path, cache_dir, cache_bytes)[s.split or split] for s in mixture.streams
        ]
        labels = [s.label for s in mixture.streams]
        _check_agree(self.parts, labels)
        for part, label in zip(self.parts, labels, strict=True):
            if not part.random_access:
                raise MixtureError(f"{label}: a gzip tfrecord pack is read only in file order, "
                                   "not mixed: repack it uncompressed or as npy")  # fmt: skip
            if not part.count:
                raise MixtureError(f"{label}: split {part.name!r} has no samples to mix")
        sizes = [p.count for p in self.parts]
        amounts = [s.amount for s in mixture.streams]
        self.plan = Plan(sizes, draws(sizes, amounts, mixture.epoch_size))
        first = self.parts[0].dataset
        self.classes = reconcile(
            ids_in(first.fields),
            [p.dataset.manifest for p in self.parts],
            labels,
            [s.class_map for s in mixture.streams],
        )
        self.dataset = MixedDataset(self)
        self.count = self.plan.count
        self.shards = [{"count": self.count}]

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"<MixedSplit {self.name!r} of {self.mixture!r}: {self.count} draws per epoch>"

    @cached_property
    def reader(self) -> MixedReader:
        """Batch reads of the mixture's ids (each pack's reader opened on first use)."""
        return MixedReader(self)

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pack number, sample index in that pack's split) of each id."""
        _, pack, sample = self.plan.locate(ids)
        return pack, sample


def _check_agree(parts: list[Split], labels: list[str]) -> None:
    """Packs mixed must hold the same fields (names, kinds, image size, mask dtype); packs of
    two presets are refused naming both."""
    first = parts[0].dataset
    for part, label in zip(parts[1:], labels[1:], strict=True):
        data = part.dataset
        mine, theirs = task_of(first.fields), task_of(data.fields)
        if mine != theirs:
            raise MixtureError(
                f"packs of different tasks cannot be mixed: {labels[0]} is {mine}, "
                f"{label} is {theirs}"
            )
        if data.image_shape != first.image_shape:
            mine, theirs = (f"{s[1]}x{s[0]}" for s in (first.image_shape, data.image_shape))
            raise MixtureError(
                f"image sizes differ: {labels[0]} is {mine}, {label} is {theirs} (WxH): repack "
                f"one at the other's size (pack --size {mine})"
            )
        if data.fields != first.fields:
            shown = "; ".join(f"{f.name} {f.shape} {f.dtype}" for f in data.fields)
            mine = "; ".join(f"{f.name} {f.shape} {f.dtype}" for f in first.fields)
            raise MixtureError(f"fields differ: {labels[0]} has {mine}, {label} has {shown}")


class MixedDataset(ManifestView):
    """What readers ask of a pack, for a mixture: fields, task, classes and a manifest of what
    batch transforms read (task, classes, ignore index, per-channel stats weighted by draws)."""

    format = "mixture"
    cache = None

    def __init__(self, split: MixedSplit) -> None:
        self.format_options: dict = {}
        first = split.parts[0].dataset
        self.root = repr(split.mixture)
        self.task: str = first.task
        self.fields: tuple[Field, ...] = first.fields
        reconciled: Reconciled = split.classes
        self.manifest = {
            "format": self.format,
            "task": self.task,
            "fields": [f.to_json() for f in self.fields],
            "classes": reconciled.classes,
            "ignore_index": reconciled.ignore_index,
            "stats": _weighted_stats(split.parts, split.plan.draws),
        }


def _weighted_stats(parts: list[Split], weights: list[int]) -> dict:
    """Per-channel mean and std of the mixture's draws (each split's own stats, where kept)."""
    means, squares = [], []
    for part in parts:
        stats = part.dataset.manifest["stats"]
        own = stats.get("splits", {}).get(part.name, stats)
        mean, std = np.asarray(own["mean"], np.float64), np.asarray(own["std"], np.float64)
        means.append(mean)
        squares.append(std**2 + mean**2)
    w = np.asarray(weights, np.float64)[:, None] / max(sum(weights), 1)
    mean = (w * np.asarray(means)).sum(0)
    std = np.sqrt(np.maximum((w * np.asarray(squares)).sum(0) - mean**2, 0))
    return {"mean": mean.tolist(), "std": std.tolist(), "computed_on": "the mixture's draws"}


class MixedReader:
    """Reads a batch of a mixture's ids: rows in ascending id order, which is pack by pack and
    shard by shard, so the packs' shards are read as one pack's are (one `read_into` per shard
    run, straight into the batch's rows); then class ids are looked up where a pack's table
    differs. A remote pack's shard is fetched into its cache before its first read."""

    def __init__(self, split: MixedSplit) -> None:
        self.split = split
        self.plan = split.plan
        self.fields = fixed(split.dataset.fields)  # batched; ragged ones by `ragged`
        self.tables = split.classes.tables
        self.relabelled = any(table is not None for table in self.tables)
        self.targets = class_id_fields(split.dataset.fields)
        self.buffers = BufferPool(self.fields)
        self.readers = [part.reader for part in split.parts]
        # every shard of every pack, in pack order: its first sample in the packs' joint
        # numbering (pack offset + sample), its pack and shard, and its files a cache fetches
        self.shards = [
            (k, s) for k, part in enumerate(split.parts) for s in range(len(part.shards))
        ]
        self.starts = np.asarray(
            [self.plan.offsets[k] + split.parts[k].offsets[s] for k, s in self.shards], np.int64
        )
        self.pack_of = np.asarray([k for k, _ in self.shards], np.int64)  # per shard
        self.files = [
            [
                f
                for f in split.parts[k].shards[s]["files"]
                if not f["path"].endswith(".sources.json")
            ]
            for k, s in self.shards
        ]

    def read(
        self,
        indices: np.ndarray,
        out: dict[str, np.ndarray] | None = None,
        ordered: bool = False,
    ) -> dict[str, np.ndarray]:
        """Arrays for the ids `indices` in ascending id order (as `BatchReader.read`), into
        `out` when given; `ordered=True` keeps the order asked (one more copy)."""
        order = np.sort(np.asarray(indices, np.int64))
        if len(order) and order[0] < 0:
            raise IndexError(f"a mixture's ids are >= 0, got {order[0]}")
        if out is None:
            out = self.buffers.take(len(order))
        # an id's (pack offset + sample) is the id // repeats (see mixture_plan): ascending,
        # packs one after another, so each shard's rows are one stretch of the sorted batch
        joint = order // self.plan.repeats
        shard = self.starts.searchsorted(joint, side="right") - 1
        cuts = [0, *(np.flatnonzero(shard[1:] != shard[:-1]) + 1).tolist(), len(order)]
        runs = []
        for start, stop in itertools.pairwise(cuts):
            v = int(shard[start])
            k, s = self.shards[v]
            reader = self.readers[k]
            rows = {name: array[start:stop] for name, array in out.items()}
            run = (reader.shards[s], joint[start:stop] - self.starts[v], rows)
            if reader.cache is None:
                runs.append(run)
            else:  # remote: read while the shard is surely in the cache
                reader.cache.ensure(self.files[v])
                gather.read([run])
        gather.read(runs)
        if self.relabelled:
            pack = self.pack_of[shard]
            for k, table in enumerate(self.tables):
                if table is not None:
                    first, last = np.searchsorted(pack, [k, k + 1])
                    rows = {name: array[first:last] for name, array in out.items()}
                    relabel(rows, table, self.targets)
        if ordered:
            inverse = np.searchsorted(order, np.asarray(indices, np.int64))
            for array in out.values():
                array[...] = array[inverse]
        return out

    def ragged(
        self, indices: np.ndarray, names: Collection[str] | None = None
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """A detection mixture's object fields of the ids `indices` (ascending id order; those
        in `names`, or all), one array per field, every object sample after sample, and each
        sample's object count; labels looked up where a pack's table differs."""
        order = np.sort(np.asarray(indices, np.int64))
        _, pack, sample = self.plan.locate(order)
        parts, counts = [], []
        for k in np.unique(pack).tolist():  # ascending ids: pack after pack
            first, last = np.searchsorted(pack, [k, k + 1])
            fields, found = self.readers[k].ragged(sample[first:last], names)
            relabelled = [name for name in self.targets if name in fields]
            if self.tables[k] is not None and relabelled:
                fields = fields | {n: fields[n].copy() for n in relabelled}  # maybe mapped views
                relabel(fields, self.tables[k], self.targets)
            parts.append(fields)
            counts.append(found)
        if len(parts) == 1:
            return parts[0], counts[0]
        names = list(parts[0]) if parts else []
        return (
            {name: np.concatenate([p[name] for p in parts]) for name in names},
            np.concatenate([np.zeros(0, np.int64), *counts]),
        )

    def prefetch(self, start: int, stop: int) -> None:
        """Reading ahead is per pack; a mixture's plan reads each pack uniformly shuffled."""

    def close(self) -> None:
        for part in self.split.parts:
            if "reader" in vars(part):
                part.reader.close()

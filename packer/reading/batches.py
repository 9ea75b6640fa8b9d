"""Batch reads: any set of sample indices of a split as whole-batch arrays, without decoding.

Indices are read in ascending order, one run per shard touched, through the format's shard
readers (a memmap for npy), into arrays the caller supplies or into pooled ones, the rows
of a large batch copied by a few threads at once (`gather`). For a remote
pack each shard's files are fetched into the local cache before its first read.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection
from typing import Any, Protocol

import numpy as np

from .. import formats
from ..errors import ManifestError
from ..schema import fixed, ragged
from . import gather
from .buffers import BufferPool


class ShardedSplit(Protocol):
    """What a `BatchReader` reads: a pack's `dataset.Split` (named by what it offers, as
    `dataset` imports this module): the split's name, sample count, shard entries and each
    shard's first sample, and `dataset`, its pack (format, fields, format options, local root
    and shard cache)."""

    name: str
    count: int
    shards: list[dict]
    offsets: np.ndarray
    dataset: Any


class BatchReader:
    """Reads any set of sample indices as whole-batch arrays, shard by shard, without decoding."""

    def __init__(self, split: ShardedSplit) -> None:
        self.split = split
        self.fields = split.dataset.fields
        dataset = split.dataset
        fmt = formats.get(dataset.format)
        try:
            self.shards = [
                fmt.open_shard(
                    dataset.local_root, split.name, s, self.fields, dataset.format_options
                )
                for s in split.shards
            ]
        except ValueError as exc:  # a format option without random access (gzip TFRecords)
            raise ManifestError(str(exc)) from None
        self.cache = dataset.cache  # None for a local pack
        self.fields = fixed(self.fields)  # batched; ragged ones are read per sample (objects)
        self.object_fields = ragged(split.dataset.fields)
        self.has_objects = bool(self.object_fields)
        self.buffers = BufferPool(self.fields)

    def read(
        self,
        indices: np.ndarray,
        out: dict[str, np.ndarray] | None = None,
        ordered: bool = False,
        leave: Collection[str] = (),
    ) -> dict[str, np.ndarray]:
        """Arrays for `indices`, in ascending index order (sorted reads are sequential), or in
        the order asked with `ordered=True` (one more copy of the batch).

        `out` (field name -> array of len(indices) records) receives the records, e.g. a
        shared-memory slot or a pinned buffer; without it the arrays come from a pool: once
        every reference to a batch is dropped, a later read may fill the same memory again.
        Fields named in `leave` (encoded ones, whose `payloads` the caller takes) may be
        missing from `out` and are then not read.
        """
        indices = np.asarray(indices, dtype=np.int64)
        if ordered:
            permutation = np.argsort(indices, kind="stable")
            batch = self.read(indices, out, leave=leave)
            inverse = np.empty_like(permutation)
            inverse[permutation] = np.arange(len(permutation))
            for array in batch.values():
                array[...] = array[inverse]
            return batch
        order = np.sort(indices)
        if len(order) and (order[0] < 0 or order[-1] >= self.split.count):
            raise IndexError(
                f"indices out of range 0..{self.split.count - 1} of {self.split.name!r}"
            )
        if out is None:
            out = self.buffers.take(len(order))
        else:
            self._check_out(out, len(order), leave)
        if len(self.shards) == 1 and self.cache is None:  # one run: no cutting, no views
            gather.read([(self.shards[0], order, out)])
            return out
        runs = []
        for shard, start, stop in self._runs(order):
            local = order[start:stop] - self.split.offsets[shard]
            runs.append((self.shards[shard], local, {k: v[start:stop] for k, v in out.items()}))
            if self.cache is not None:  # remote: each shard read while it is surely cached
                self.cache.ensure(self._data_files(shard))
                gather.read(runs[-1:])
                if shard + 1 < len(self.shards):
                    self.cache.prefetch(self._data_files(shard + 1))  # in order: the next
        if self.cache is None:
            gather.read(runs)
        return out

    def objects(self, indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        """The ragged fields (boxes, labels, masks, ...) of each sample of sorted `indices`,
        one dict each, in that order."""
        fields, counts = self.ragged(indices)
        bounds = [0, *np.cumsum(counts).tolist()]
        return [
            {name: array[a:b] for name, array in fields.items()}
            for a, b in itertools.pairwise(bounds)
        ]

    def ragged(
        self, indices: np.ndarray, names: Collection[str] | None = None
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The ragged fields of sorted `indices` (those in `names`, or all) as one array per
        field (every row, sample after sample) and each sample's row count."""
        order = np.asarray(indices, dtype=np.int64)
        wanted = [f.name for f in self.object_fields if names is None or f.name in names]
        parts, counts = [], []
        for shard, start, stop in self._runs(order):
            local = order[start:stop] - self.split.offsets[shard]
            if self.cache is not None:
                self.cache.ensure(self._data_files(shard))
            reader = self.shards[shard]
            if hasattr(reader, "read_ragged"):
                found, found_counts = reader.read_ragged(local, names)
            else:  # formats that parse records one by one
                samples = reader.read_objects(local)
                first = self.object_fields[0].name  # every ragged field has a row per object
                found_counts = np.array([len(s[first]) for s in samples], np.int64)
                found = {k: [s[k] for s in samples] for k in wanted}
                found = {k: np.concatenate([self._empty(k), *v]) for k, v in found.items()}
            parts.append(found)
            counts.append(found_counts)
        if len(parts) == 1:
            return parts[0], counts[0]
        return (
            {k: np.concatenate([self._empty(k)] + [p[k] for p in parts]) for k in wanted},
            np.concatenate([np.zeros(0, np.int64), *counts]),
        )

    def _empty(self, name: str) -> np.ndarray:
        f = next(f for f in self.object_fields if f.name == name)
        return np.zeros((0, *f.shape), f.dtype)

    def payloads(self, indices: np.ndarray, name: str) -> list:
        """Encoded field `name`'s payloads (bytes-like, undecoded) of sorted `indices`, in
        that order: what a reader that decodes elsewhere (a GPU) takes instead of pixels."""
        order = np.asarray(indices, dtype=np.int64)
        found = []
        for shard, start, stop in self._runs(order):
            if self.cache is not None:
                self.cache.ensure(self._data_files(shard))
            found += self.shards[shard].payloads_of(
                order[start:stop] - self.split.offsets[shard], name
            )
        return found

    def _check_out(self, out: dict[str, np.ndarray], count: int, leave: Collection[str]) -> None:
        """Caller-supplied arrays must match the fields' record shapes and dtypes exactly."""
        for f in self.fields:
            array = out.get(f.name)
            if array is None and f.name in leave:
                continue
            expected = (count, *f.shape)
            if array is None or array.shape != expected or array.dtype != np.dtype(f.dtype):
                got = "missing" if array is None else f"{array.shape} {array.dtype}"
                raise ValueError(f"out[{f.name!r}]: expected {expected} {f.dtype}, got {got}")

    def prefetch(self, start: int, stop: int) -> None:
        """Hint that samples start..stop-1 come next (formats that can read ahead do so)."""
        for shard, reader in enumerate(self.shards):
            first, last = self.split.offsets[shard], self.split.offsets[shard + 1]
            if self.cache is not None:  # remote: download ahead, in the background
                if first < stop and start < last:
                    self.cache.prefetch(self._data_files(shard))
                continue
            if hasattr(reader, "prefetch") and first < stop and start < last:
                reader.prefetch(int(max(start, first) - first), int(min(stop, last) - first))

    def _runs(self, order: np.ndarray) -> list[tuple[int, int, int]]:
        """(shard, start, stop): the stretches of sorted `order` that fall in one shard each."""
        if len(self.shards) == 1:
            return [(0, 0, len(order))]
        shard_of = np.searchsorted(self.split.offsets, order, side="right") - 1
        cuts = [0, *(np.flatnonzero(shard_of[1:] != shard_of[:-1]) + 1).tolist(), len(order)]
        return [(int(shard_of[a]), a, b) for a, b in itertools.pairwise(cuts)]

    def _data_files(self, shard: int) -> list[dict]:
        """A shard's files that readers open (not its provenance)."""
        files = self.split.shards[shard]["files"]
        return [f for f in files if not f["path"].endswith(".sources.json")]

    def close(self) -> None:
        for shard in self.shards:
            shard.close()

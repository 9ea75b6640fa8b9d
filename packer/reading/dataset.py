"""`packer.open`: a packed dataset as Python objects (manifest, classes, splits, provenance).

A pack at a URL (s3://, gs://, ...) is read through a local shard cache (storage.cache): the
manifest and provenance come from the store, shard files are downloaded (checked against the
manifest) before the formats' readers memmap them from `local_root`.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import formats, manifest, storage
from ..errors import SplitNotFoundError
from ..schema import Field
from ..storage.cache import ShardCache
from .batches import BatchReader


class PackedDataset:
    """A finished pack: its manifest, classes and splits. `ds["train"]` gives one split."""

    def __init__(
        self,
        root: str | os.PathLike,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        self.root = storage.as_path(root)
        self.manifest = manifest.read(self.root)
        self.cache = (
            ShardCache(self.root, self.manifest, cache_dir, cache_bytes)
            if storage.is_url(self.root)
            else None
        )
        self.format: str = self.manifest["format"]
        self.task: str = self.manifest["task"]
        self.fields = tuple(Field.from_json(f) for f in self.manifest["fields"])
        self.splits = {
            name: Split(self, name, data) for name, data in self.manifest["splits"].items()
        }

    @property
    def local_root(self) -> Path:
        """Where the shard files are read: the pack itself, or a remote pack's local cache."""
        return self.cache.root if self.cache is not None else Path(self.root)

    def fetch_local(self, local_path: str | bytes) -> bytes:
        """Have a shard file (named by its path under `local_root`) in the cache; its path."""
        text = os.fsdecode(local_path)
        if self.cache is not None:
            rel = Path(text).relative_to(self.cache.root).as_posix()
            self.cache.ensure([f for f in self._files() if f["path"] == rel])
        return os.fsencode(text)

    def _files(self) -> list[dict]:
        return [
            f
            for split in self.manifest["splits"].values()
            for shard in split["shards"]
            for f in shard["files"]
        ]

    @property
    def classes(self) -> list[dict]:
        """Class index, name and colour (None where the source had none), in index order."""
        return self.manifest["classes"]

    @property
    def class_names(self) -> list[str]:
        return [c["name"] for c in self.classes]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.field("images").shape  # type: ignore[return-value]

    @cached_property
    def format_options(self) -> dict:
        """The format's own options as packed (defaults for options the manifest predates)."""
        fmt = formats.get(self.format)
        return {k: self.manifest["options"].get(k, v) for k, v in fmt.OPTIONS.items()}

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)

    def __getitem__(self, split: str) -> Split:
        if split not in self.splits:
            raise SplitNotFoundError(
                f"{self.root}: no split {split!r}; splits: {', '.join(self.splits)}"
            )
        return self.splits[split]

    def __repr__(self) -> str:
        counts = ", ".join(f"{n}={s.count}" for n, s in self.splits.items())
        return (
            f"PackedDataset({str(self.root)!r}, format={self.format}, task={self.task}, {counts})"
        )


class Split:
    """One split of a pack: sample count, shards, provenance and a batch reader."""

    def __init__(self, dataset: PackedDataset, name: str, data: dict) -> None:
        self.dataset = dataset
        self.name = name
        self.count: int = data["count"]
        self.shards: list[dict] = data["shards"]
        self.offsets = np.cumsum([0] + [s["count"] for s in self.shards])

    def locate(self, index: int) -> tuple[int, int]:
        """(shard number, index inside that shard) of sample `index`."""
        if not 0 <= index < self.count:
            raise IndexError(f"sample {index} out of range for split {self.name!r} ({self.count})")
        shard = int(np.searchsorted(self.offsets, index, side="right")) - 1
        return shard, index - int(self.offsets[shard])

    def source(self, index: int) -> str:
        """The source file (image) that became sample `index`."""
        return self._sources(index)[0]

    def mask_source(self, index: int) -> str | None:
        """The mask file of sample `index` (None for classification)."""
        return self._sources(index)[1]

    def _sources(self, index: int) -> tuple[str, str | None]:
        shard, local = self.locate(index)
        image, mask = self._provenance(shard)[local]
        root = storage.as_path(self.dataset.manifest["source"]["root"])
        return str(root / image), mask and str(root / mask)

    def _provenance(self, shard: int) -> list:
        cache = self.__dict__.setdefault("_provenance_cache", {})
        if shard not in cache:
            path = next(
                f["path"]
                for f in self.shards[shard]["files"]
                if f["path"].endswith(".sources.json")
            )
            cache[shard] = json.loads(storage.read_text(self.dataset.root / path))
        return cache[shard]

    @cached_property
    def reader(self) -> BatchReader:
        """Batch reads of this split (opened on first use)."""
        return BatchReader(self)


def open_dataset(
    root: str | os.PathLike,
    cache_dir: str | os.PathLike | None = None,
    cache_bytes: int | None = None,
) -> PackedDataset:
    """Open a packed dataset (any format) by its folder or URL; a remote pack's shards are
    cached under `cache_dir` (default: the user's cache folder), at most `cache_bytes`."""
    return PackedDataset(root, cache_dir, cache_bytes)

"""`packer.open`: a packed dataset as Python objects (manifest, classes, splits, provenance),
samples by index, and class weights from the stored counts.

A pack at a URL (s3://, gs://, ...) is read through a local shard cache (storage.cache): the
manifest and provenance come from the store, shard files are downloaded (checked against the
manifest) before the formats' readers memmap them from `local_root`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import formats, manifest, storage
from ..errors import SplitNotFoundError
from ..schema import Field
from ..storage.cache import ShardCache
from .batches import BatchReader
from .transforms import Targets, input_field

WEIGHT_METHODS = ("inverse", "median_frequency")


class ClassWeights(dict):
    """Class index -> weight: a dict for Keras' `class_weight`, and an array (np.asarray)
    for a per-class loss weight vector (segmentation)."""

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.array([self[i] for i in range(len(self))], dtype or np.float32)


class ManifestView:
    """What a manifest's `classes` and `fields` tell readers; a pack's and a mixture's alike."""

    manifest: dict
    fields: tuple[Field, ...]

    @property
    def classes(self) -> list[dict]:
        """Class index, name and colour (None where the source had none), in index order."""
        return self.manifest["classes"]

    @property
    def class_names(self) -> list[str]:
        return [c["name"] for c in self.classes]

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """The input images' shape (the first field of kind "image")."""
        return input_field(self.fields).shape  # type: ignore[return-value]

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


class PackedDataset(ManifestView):
    """A finished pack: its manifest, classes and splits. `ds["train"]` gives one split."""

    def __init__(
        self,
        root: str | os.PathLike,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        storage.backend(root)  # a clear error for a remote path no backend handles
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

    @cached_property
    def format_options(self) -> dict:
        """The format's own options as packed (defaults for options the manifest predates)."""
        fmt = formats.get(self.format)
        return {k: self.manifest["options"].get(k, v) for k, v in fmt.OPTIONS.items()}

    def class_weights(self, method: str = "inverse", split: str | None = None) -> ClassWeights:
        """Per-class weights from the pixel (segmentation) or image (classification) counts
        of `split` (default: the split the statistics were computed on, train when there is
        one), so that rare classes weigh more in the loss.

        `inverse`: total / (classes present x count), so the weights average 1 over the
        samples; `median_frequency`: median class frequency / class frequency (Eigen &
        Fergus, with frequencies over all pixels). Classes that never occur get 0.
        """
        if method not in WEIGHT_METHODS:
            raise ValueError(f"method must be one of {', '.join(WEIGHT_METHODS)}, not {method!r}")
        stats = self.manifest["stats"]
        if split is not None:
            stats = stats["splits"][self[split].name]
        counts = (
            stats.get("class_pixels")
            or stats.get("class_images")
            or stats.get("class_objects")
            or {}
        )
        n = np.array([counts.get(c["name"], 0) for c in self.classes], np.float64)
        present = n > 0
        weights = np.zeros_like(n)
        if method == "inverse":
            weights[present] = n.sum() / (present.sum() * n[present])
        else:
            frequency = n / max(n.sum(), 1)
            weights[present] = np.median(frequency[present]) / frequency[present]
        return ClassWeights((i, float(w)) for i, w in enumerate(weights))

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

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{f.name} {'x'.join(map(str, f.shape)) or 'scalar'} {np.dtype(f.dtype).name}"
            for f in self.dataset.fields
        )
        return (
            f"<Split {self.name!r} of {str(self.dataset.root)!r}: {self.count} samples in "
            f"{len(self.shards)} shard(s); {fields}>"
        )

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray | int | dict]:
        """Sample `index` (negative counts from the end) as (image, target), as the readers
        give a sample (`reading.transforms.Targets`): the one fixed target's value (a class id
        as an int, a mask of class ids), else a dict of every target field's value: for
        detection and instances "boxes" float32 `[N,4]` x1,y1,x2,y2 in the image's pixels,
        "labels" `[N]`, "iscrowd" and "difficult" uint8 `[N]`, "masks" uint8 `[N,H,W]`
        (instances)."""
        if not isinstance(index, int | np.integer):
            raise TypeError(f"split indices are integers, not {type(index).__name__}")
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            raise IndexError(f"sample {index} out of range for split {self.name!r} ({self.count})")
        targets = Targets.of(self.dataset.fields)
        if self.random_access:
            record = {k: v[0] for k, v in self.reader.read(np.asarray([index])).items()}
            if targets.ragged:
                record |= self.reader.objects(np.asarray([index]))[0]
        else:  # read its shard from the start
            shard, local = self.locate(index)
            records = self._stream(self.shards[shard])
            record = next(r for i, r in enumerate(records) if i == local)
        image = np.array(record[targets.input])
        if targets.single is not None:
            value = np.array(record[targets.single])
            return image, int(value) if value.ndim == 0 and value.dtype.kind in "iu" else value
        return image, {k: np.array(record[k]) for k in targets.fixed + targets.ragged}

    @property
    def random_access(self) -> bool:
        """Whether any sample can be read directly (not for gzip-compressed TFRecords, which
        are read in file order: `records`)."""
        fmt = formats.get(self.dataset.format)
        check = getattr(fmt, "random_access", None)
        return True if check is None else check(self.dataset.format_options)

    def records(self, limit: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Samples in file order, one field dict each (at most `limit`), for any format: by
        shard streams where there is no random access, else in batches of the reader."""
        stop = self.count if limit is None else min(limit, self.count)
        if self.random_access:
            for start in range(0, stop, 64):
                batch = self.reader.read(np.arange(start, min(stop, start + 64)))
                for k in range(len(next(iter(batch.values())))):
                    yield {name: array[k] for name, array in batch.items()}
            return
        done = 0
        for shard in self.shards:
            for record in self._stream(shard):
                if done == stop:
                    return
                yield record
                done += 1

    def _stream(self, shard: dict) -> Iterator[dict[str, np.ndarray]]:
        fmt = formats.get(self.dataset.format)
        data = self.dataset
        if data.cache is not None:  # a remote pack: the shard's files into the cache first
            data.cache.ensure(
                [f for f in shard["files"] if not f["path"].endswith(".sources.json")]
            )
        return fmt.stream_shard(data.local_root, self.name, shard, data.fields, data.format_options)

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
        if re.fullmatch(
            manifest.SAMPLE_WITHOUT_FILE.format(r"\d+"), image
        ):  # a Python sample's image given as data
            return image, None
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
    cached under `cache_dir` (default: the user's cache folder), at most `cache_bytes`. A URL
    no installed storage backend handles is a StorageError saying so."""
    return PackedDataset(root, cache_dir, cache_bytes)

"""The work a converter does: decode, transform and write a chunk; finalise a shard.

A `Converter` holds its whole configuration (small and picklable, no module globals), so any
engine can ship it to its workers once and call its methods there. Each method takes a small
task description and returns a small summary: pixels go from the source files to the shard
files inside the worker and never through a pipe. This module must not import TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import formats, storage
from ..errors import ImageError, ImageKindError, LabelError, UnknownLabelError
from ..imaging import (
    Geometry,
    MaskPixels,
    decode_image,
    decode_mask,
    pad_to_canvas,
    resample_mask,
)
from ..imaging.kinds import AUTO, Conversion
from ..labels import ClassTable, LabelMapper
from ..schema import Field
from ..sources import MaskRecipe, ObjectsRecipe, Sample, mask_key
from ..sources.model import sample_files
from . import prefetch, stats
from .kinds import ImageKinds
from .ledger import scratch, workdir
from .objects import object_record
from .preflight import mask_size_mismatch
from .tasks import ChunkResult, ChunkTask, ShardTask
from .values import SampleError, values_record


@dataclass(frozen=True)
class PackConfig:
    """Everything a worker needs to turn a chunk of samples into records (small, picklable)."""

    root: str
    out: str
    format: str
    task: str
    geometry: Geometry
    fields: tuple[Field, ...]
    table: ClassTable | None
    ignore_index: int
    unknown_colors: str  # "ignore": map to ignore_index and report; "error": stop the pack
    max_pixels: int
    format_options: dict
    conversion: Conversion = AUTO
    image_kinds: ImageKinds | None = None  # the stored kind, from the first images probed
    min_box_size: float = 0.0  # objects narrower or lower than this (pixels) are dropped


DROPPED = "dropped objects"  # a record's key for its objects left out (never a field)


class Converter:
    """Turns chunk tasks into part files and finished chunks into shards, per its config."""

    def __init__(self, config: PackConfig) -> None:
        self.config = config

    def __getstate__(self) -> dict:
        return {"config": self.config}  # the label lookup table is rebuilt where it is used

    @cached_property
    def mapper(self) -> LabelMapper | None:
        """Mask value -> class id lookup, built on first use in each worker."""
        mask_field = next((f for f in self.config.fields if f.name == "masks"), None)
        if mask_field is None:
            return None
        return LabelMapper(self.config.table, self.config.ignore_index, np.dtype(mask_field.dtype))

    @cached_property
    def keypoints(self) -> int:
        """Points per object of the pack's keypoints field (0: none), asked once per worker."""
        return next((f.shape[0] for f in self.config.fields if f.kind == "keypoints"), 0)

    @property
    def out(self) -> Path:
        """Where the formats write: OUT, or a local scratch copy of it when OUT is a URL."""
        return scratch.local_out(self.config.out)

    def pack_chunk(self, task: ChunkTask) -> ChunkResult:
        """Decode and transform each sample of a ChunkTask, appending records to its parts."""
        config = self.config
        result = ChunkResult(task.shard, task.chunk)
        part_dir = workdir.parts_dir(self.out)
        storage.make_dirs(part_dir)
        options = config.format_options
        if config.table is not None:  # class names, for the writers that store them beside ids
            options = {**options, "class_names": tuple(config.table.names)}
        writer = formats.get(config.format).ChunkWriter(part_dir, task, config.fields, options)
        read = prefetch.Fetcher(  # sources at a URL: the next files requested ahead
            config.root,
            [p for s in task.samples for p in sample_files(s)],
            storage.read_with_stat,
        )
        try:
            for sample in task.samples:
                try:
                    record, backend, unknown = self.record(sample, result.sources, read)
                except SampleError as exc:
                    result.rejected.append({"path": exc.path, "reason": exc.reason})
                    continue
                dropped = record.pop(DROPPED, None)
                if dropped is not None:
                    result.dropped += dropped
                    result.stats.dropped([d["reason"] for d in dropped])
                if unknown:
                    result.unknown.append({"path": mask_key(sample.mask), "values": unknown})
                    if config.unknown_colors == "error":
                        found = ", ".join(f"{k} x {v} px" for k, v in unknown.items())
                        raise UnknownLabelError(
                            f"{mask_key(sample.mask)}: values not in the class table: {found}"
                        )
                writer.write(record)
                result.kept.append([sample.image, mask_key(sample.mask)])
                if isinstance(sample.mask, MaskRecipe):
                    result.annotations[sample.image] = sample.mask.digest
                elif sample.values is not None:
                    result.values[sample.image] = sample.values.digest
                result.stats.add(record, backend, config.fields)
        finally:
            read.close()
            writer.close()
        return result

    def finalize_shard(self, task: ShardTask, results: list[ChunkResult]) -> dict:
        """Join the chunk parts into the shard's files, atomically, and write its receipt last.

        `results` are the shard's chunk results, in any order.
        """
        config = self.config
        out = self.out
        storage.make_dirs(out / task.split)
        results = sorted(results, key=lambda r: r.chunk)
        kept = [s for c in results for s in c.kept]
        files = formats.get(config.format).finalize(
            formats.ShardJob(
                out,
                task.shard,
                task.split,
                tuple(c.chunk for c in results),
                config.fields,
                workdir.parts_dir(out),
                config.format_options,
                tuple(tuple(s) for s in kept),
            )
        )
        sources_path = out / task.split / f"{task.shard}.sources.json"
        files.append(
            storage.write_atomic(
                sources_path, out, b"", [json.dumps(kept, ensure_ascii=False).encode()]
            )
        )
        target = storage.as_path(config.out)
        scratch.publish(out, target, files)  # a URL's shard files: uploaded, each whole
        receipt = {
            "name": task.shard,
            "split": task.split,
            "fingerprint": task.fingerprint,
            "count": len(kept),
            "files": [f.to_json() for f in files],
            **stats.merge([c.stats for c in results]),
            "rejected": [r for c in results for r in c.rejected],
            "unknown": [u for c in results for u in c.unknown],
            **(
                {"dropped": [d for c in results for d in c.dropped]}
                if any(f.ragged for f in config.fields)  # objects: the presets' and others'
                else {}
            ),
            "sources": dict(sorted((k, v) for c in results for k, v in c.sources.items())),
            **_annotations(results),
        }
        text = json.dumps(receipt, ensure_ascii=False).encode()
        info = storage.write_atomic(  # last, and into OUT itself (a URL: one upload)
            workdir.receipt_path(target, task.split, task.shard), target, b"", [text]
        )
        return {**receipt, "receipt_file": info.to_json()}

    def pack_shard(self, task: ShardTask) -> tuple[dict, list[ChunkResult]]:
        """Write every chunk of a shard, then finalise it: one task, one worker."""
        results = [self.pack_chunk(chunk) for chunk in task.chunks]
        return self.finalize_shard(task, results), results

    def record(
        self, sample: Sample, states: dict, read=storage.read_with_stat
    ) -> tuple[dict[str, np.ndarray], str, dict]:
        """One sample's arrays as the writers get them (before any field's encoding): the
        transformed image and its label or its mapped, aligned mask; with the decode backend and
        the mask values not in the class table. The states of the source files read go into
        `states`; a sample packing rejects raises SampleError. Packing and the plan's estimate
        of the stored bytes (`stored_size`) both make records here."""
        config = self.config
        if sample.values is not None:
            record, backend, dropped = values_record(
                sample, config, lambda r: self._read(r, states, read)
            )
            return {**record, DROPPED: dropped} if dropped else record, backend, {}
        try:
            data = self._read(sample.image, states, read)
            image = decode_image(data, config.geometry, config.max_pixels, config.conversion)
        except (ImageError, OSError) as exc:
            raise SampleError(sample.image, str(exc)) from exc
        self._check_kind(sample.image, image)
        if sample.mask is None:
            return {"images": image.pixels, "labels": np.int32(sample.label)}, image.backend, {}
        if isinstance(sample.mask, ObjectsRecipe):
            return self._objects_record(sample, image, states, read), image.backend, {}
        try:
            if isinstance(sample.mask, MaskRecipe):
                ids = sample.mask.pixels(
                    lambda rel: self._read(rel, states, read),
                    image.source_size,
                    config.ignore_index,
                )
                mask = MaskPixels(ids, "index", None, (ids.shape[1], ids.shape[0]))
            else:
                mask = decode_mask(self._read(sample.mask, states, read), config.max_pixels)
            mismatch = mask_size_mismatch(mask.size, image.source_size, sample.image)
            if mismatch:
                raise LabelError(mismatch)
            # Map at source resolution so that every unknown value is reported, even outside
            # the crop.
            mapped = self.mapper.map(mask.values, mask.kind, mask.palette)  # type: ignore[union-attr]
        except (ImageError, LabelError, OSError) as exc:
            raise SampleError(mask_key(sample.mask), str(exc)) from exc
        resampled = resample_mask(mapped.ids, image.placement)
        ids = pad_to_canvas(resampled, image.placement, config.ignore_index)
        return {"images": image.pixels, "masks": ids}, image.backend, mapped.unknown

    def _check_kind(self, path: str, image) -> None:
        """Stop the pack at an image whose stored kind is not the images field's."""
        field = self.config.fields[0]
        pixels = image.pixels
        if pixels.dtype == np.dtype(field.dtype) and pixels.shape[2:] == field.shape[2:]:
            return
        kinds = self.config.image_kinds
        stored = self.config.conversion.output(image.kind)
        if kinds is None:
            raise ImageKindError(
                f"{path}: {image.kind.describe()}, the pack stores {field.dtype} "
                f"{list(field.shape)} images"
            )
        raise ImageKindError(kinds.mismatch(path, image.kind, stored))

    def _objects_record(self, sample: Sample, image, states: dict, read) -> dict:
        """The image with its objects moved by the pack's geometry; the objects left out
        (by the source or by the geometry) under DROPPED, each with where and why."""
        recipe = sample.mask
        try:
            objects, problems = recipe.objects(  # type: ignore[union-attr]
                lambda rel: self._read(rel, states, read), image.source_size
            )
        except (ImageError, LabelError, OSError) as exc:
            raise SampleError(mask_key(recipe), str(exc)) from exc
        record, geometry = object_record(
            objects,
            image.source_size,
            image.placement,
            self.config.task == "instances",
            self.config.min_box_size,
            self.keypoints,
        )
        dropped = [_dropped(p, recipe) for p in problems]
        dropped += [{"path": sample.image, "object": i, "reason": why} for i, why in geometry]
        return {"images": image.pixels, **record, DROPPED: dropped}

    def _read(self, rel: str, states: dict, read=storage.read_with_stat) -> bytes:
        """A source's bytes; its size, modification time and SHA-256 go into the chunk's
        source states (size and time alone when it cannot be read), for later staleness
        checks."""
        path = os.path.join(self.config.root, rel)
        try:
            data, size, mtime_ns = read(path)
        except OSError as exc:
            found = storage.stat(path) if not isinstance(exc, FileNotFoundError) else None
            states[rel] = None if found is None else [*found, None]
            raise ImageError(f"cannot read file: {exc.strerror or exc}") from exc
        states[rel] = [size, mtime_ns, hashlib.sha256(data).hexdigest()]
        return data


def _dropped(problem: str, recipe) -> dict:
    """A problem line `where: why` of an objects recipe as a manifest entry."""
    where, sep, why = problem.partition(": ")
    return {"path": where, "reason": why} if sep else {"path": mask_key(recipe), "reason": problem}


def _annotations(results: list[ChunkResult]) -> dict:
    """The receipt's `annotations` (image -> digest of its annotations) and `values` (a Python
    sample's provenance -> digest of its values), when there are any."""
    found = {}
    for key in ("annotations", "values"):
        digests = dict(sorted((k, v) for c in results for k, v in getattr(c, key).items()))
        found |= {key: digests} if digests else {}
    return found


def read_source(path: str) -> bytes:
    """A source file's bytes; an unreadable file is an ImageError with the reason."""
    try:
        return storage.read_bytes(path)
    except OSError as exc:
        raise ImageError(f"cannot read file: {exc.strerror or exc}") from exc

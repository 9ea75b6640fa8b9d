"""The work a converter process does: decode, transform and write a chunk; finalise a shard.

Both functions take small task descriptions and return small summaries: pixels go from the
source files to the shard files inside the worker and never through a pipe. This module must
not import TensorFlow.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from . import formats
from .errors import UnknownLabelError
from .imaging import Geometry, ImageError, load_image, load_mask, pad_to_canvas, resample_mask
from .labels import ClassTable, LabelError, LabelMapper
from .outdir import PARTIAL_DIR
from .plan import ChunkTask
from .schema import Field
from .sources import Sample
from .storage.local import FileInfo, libc, write_atomic


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

    @property
    def part_dir(self) -> Path:
        return Path(self.out) / PARTIAL_DIR / "parts"

    @property
    def receipt_dir(self) -> Path:
        return Path(self.out) / PARTIAL_DIR / "shards"


@dataclass
class ChunkResult:
    """What a worker reports for a chunk: kept sources, rejections and stats, never pixels."""

    shard: str
    chunk: int
    kept: list[list[str | None]] = field(default_factory=list)  # [image, mask] per record
    rejected: list[dict] = field(default_factory=list)
    unknown: list[dict] = field(default_factory=list)
    channel_hist: np.ndarray = field(default_factory=lambda: np.zeros((3, 256), np.int64))
    class_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    backends: Counter = field(default_factory=Counter)


_config: PackConfig | None = None
_mapper: LabelMapper | None = None


def init_worker(config: PackConfig, parent_pid: int) -> None:
    """Per-process set-up: one OpenCV thread per worker (the pool is the parallelism).

    Workers ignore Ctrl-C (the parent decides how the pack stops and kills them itself) and
    die with the parent, so a killed pack leaves no worker writing behind the next run.
    """
    global _config, _mapper
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    cv2.setNumThreads(1)
    _config = config
    mask_field = next((f for f in config.fields if f.name == "masks"), None)
    _mapper = mask_field and LabelMapper(
        config.table, config.ignore_index, np.dtype(mask_field.dtype)
    )


def _die_with_parent(parent_pid: int) -> None:
    """Linux: ask for SIGKILL when the parent dies; exit now if it already has."""
    try:
        libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError, TypeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def pack_chunk(task: ChunkTask) -> ChunkResult:
    """Decode and transform each sample, appending records to the chunk's part files."""
    config = _require_config()
    result = ChunkResult(task.shard, task.chunk)
    config.part_dir.mkdir(parents=True, exist_ok=True)
    writer = formats.get(config.format).ChunkWriter(
        config.part_dir, task, config.fields, config.format_options
    )
    try:
        for sample in task.samples:
            try:
                record, backend, unknown = _make_record(config, sample)
            except SampleError as exc:
                result.rejected.append({"path": exc.path, "reason": exc.reason})
                continue
            if unknown:
                result.unknown.append({"path": sample.mask, "values": unknown})
                if config.unknown_colors == "error":
                    found = ", ".join(f"{k} x {v} px" for k, v in unknown.items())
                    raise UnknownLabelError(
                        f"{sample.mask}: values not in the class table: {found}"
                    )
            writer.write(record)
            result.kept.append([sample.image, sample.mask])
            result.backends[backend] += 1
            _accumulate(result, record)
    finally:
        writer.close()
    return result


class SampleError(Exception):
    """One input that cannot be packed: the file at fault and the precise reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _make_record(config: PackConfig, sample: Sample) -> tuple[dict[str, np.ndarray], str, dict]:
    """One sample's arrays: the transformed image and its label or its mapped, aligned mask."""
    try:
        image = load_image(
            os.path.join(config.root, sample.image), config.geometry, max_pixels=config.max_pixels
        )
    except (ImageError, OSError) as exc:
        raise SampleError(sample.image, str(exc)) from exc
    if sample.mask is None:
        return {"images": image.pixels, "labels": np.int32(sample.label)}, image.backend, {}
    try:
        mask = load_mask(os.path.join(config.root, sample.mask), max_pixels=config.max_pixels)
        if mask.size != image.source_size:
            raise LabelError(
                f"mask is {mask.size[0]}x{mask.size[1]} pixels but its image {sample.image} is "
                f"{image.source_size[0]}x{image.source_size[1]}"
            )
        # Map at source resolution so that every unknown value is reported, even outside the crop.
        mapped = _mapper.map(mask, mask.values)  # type: ignore[union-attr]
    except (ImageError, LabelError, OSError) as exc:
        raise SampleError(sample.mask, str(exc)) from exc
    resampled = resample_mask(mapped.ids, image.placement)
    ids = pad_to_canvas(resampled, image.placement, config.ignore_index)
    return {"images": image.pixels, "masks": ids}, image.backend, mapped.unknown


# Channel statistics sample about 32 rows per image, the middle row of each band of H // 32 rows
# (every row of images under 64 rows): on CamVid within 0.05 grey levels of every pixel's
# mean/std. Rows 0, 8, 16, ... would miss the bottom band, 1.3 levels off there.
STATS_ROWS = 32


def _accumulate(result: ChunkResult, record: dict[str, np.ndarray]) -> None:
    """Per-channel histograms (mean/std later) and exact class counts, with OpenCV's histograms."""
    step = max(1, len(record["images"]) // STATS_ROWS)
    rows = record["images"][step // 2 :: step]
    for c in range(3):
        result.channel_hist[c] += _histogram(rows, c, 256)
    if "masks" in record:
        mask = record["masks"]
        counts = _histogram(mask, 0, 256) if mask.dtype == np.uint8 else np.bincount(mask.ravel())
        counts = counts[: _last_nonzero(counts) + 1]
    else:
        counts = np.bincount([int(record["labels"])])
    if len(counts) > len(result.class_counts):
        result.class_counts = np.pad(
            result.class_counts, (0, len(counts) - len(result.class_counts))
        )
    result.class_counts[: len(counts)] += counts


def _last_nonzero(counts: np.ndarray) -> int:
    """Index of the last non-zero count, -1 when all are zero (np.trim_zeros is 10x slower)."""
    nonzero = np.flatnonzero(counts)
    return int(nonzero[-1]) if nonzero.size else -1


def _histogram(array: np.ndarray, channel: int, bins: int) -> np.ndarray:
    """Exact integer counts of the values 0..bins-1 of one channel (cv2.calcHist, as int64)."""
    hist = cv2.calcHist([array], [channel], None, [bins], [0, bins])
    return hist.ravel().astype(np.int64)


@dataclass(frozen=True)
class FinalizeTask:
    """A shard whose chunks are all written: their order and what they kept."""

    shard: str
    split: str
    fingerprint: str
    chunks: tuple[ChunkResult, ...]


def finalize_shard(task: FinalizeTask) -> dict:
    """Join the chunk parts into the shard's files, atomically, and write its receipt last."""
    config = _require_config()
    out = Path(config.out)
    (out / task.split).mkdir(parents=True, exist_ok=True)
    kept = [s for c in task.chunks for s in c.kept]
    files = formats.get(config.format).finalize(
        formats.ShardJob(
            out,
            task.shard,
            task.split,
            tuple(c.chunk for c in task.chunks),
            config.fields,
            config.part_dir,
            config.format_options,
            tuple(tuple(s) for s in kept),
        )
    )
    sources_path = out / task.split / f"{task.shard}.sources.json"
    files.append(
        write_atomic(sources_path, out, b"", [json.dumps(kept, ensure_ascii=False).encode()])
    )
    receipt = _receipt(task, len(kept), files)
    config.receipt_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(
        config.receipt_dir / f"{task.shard}.json", out, b"", [json.dumps(receipt).encode()]
    )
    return receipt


def _receipt(task: FinalizeTask, count: int, files: list[FileInfo]) -> dict:
    """Everything the manifest needs about a finished shard, so a resumed pack can skip it."""
    hist = np.zeros((3, 256), np.int64)
    classes: Counter = Counter()
    backends: Counter = Counter()
    for c in task.chunks:
        hist += c.channel_hist
        classes.update({int(k): int(c.class_counts[k]) for k in np.flatnonzero(c.class_counts)})
        backends.update(c.backends)
    return {
        "name": task.shard,
        "split": task.split,
        "fingerprint": task.fingerprint,
        "count": count,
        "files": [f.to_json() for f in files],
        "channel_hist": hist.tolist(),
        "class_counts": {str(k): v for k, v in sorted(classes.items())},
        "backends": dict(sorted(backends.items())),
        "rejected": [r for c in task.chunks for r in c.rejected],
        "unknown": [u for c in task.chunks for u in c.unknown],
    }


def _require_config() -> PackConfig:
    if _config is None:
        raise RuntimeError("worker not initialised: call init_worker(config) first")
    return _config


def cpu_count() -> int:
    """Cores this process may use (respects affinity masks and containers)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

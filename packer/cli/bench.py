"""`packer bench DIR`: how fast this machine reads a pack, beside the limits that matter.

Everything is measured in one run: this machine's memcpy rate for the same bytes (the limit a
reader cannot pass), shuffled batches from the pack with a warm and with a cold page cache
(the shards' pages evicted with posix_fadvise), and the naive per-step decode of the original
files. Packs without random access (gzip TFRecords) are read in file order instead. With the
step time of a model, it says whether the reader keeps the GPU fed. A mixture (a saved one's
.json) is read warm beside each of its packs alone, and its epoch is shown.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from ..errors import PackError, StorageError
from ..flags import flag
from ..imaging import codec
from ..reading import gather
from ..reading.dataset import PackedDataset, Split
from ..reading.loader import Loader
from ..reading.mixture import Mixture, is_mixture_file
from ..schema import record_bytes

GB = 1e9


@dataclass
class Rate:
    """A measured throughput: samples per second and bytes per second."""

    name: str
    images_per_s: float
    bytes_per_s: float
    note: str = ""


def timed(step: Callable[[], int], seconds: float) -> float:
    """Units per second of `step` (which returns the units it did), repeated for `seconds`."""
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or done == 0:
        done += step()
    return done / elapsed


def shard_files(split: Split) -> list[Path]:
    """Every file of a split's shards, as local paths."""
    root = split.dataset.root
    return [root / f["path"] for s in split.shards for f in s["files"]]


def warm(paths: list[Path]) -> None:
    """Read files once so their pages are in the page cache."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


def evict(paths: list[Path]) -> None:
    """Drop the files' pages from the page cache (they must not be mapped by this process)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def epoch_reader(
    split: Split, batch: int, seed: int, windows: bool
) -> tuple[Loader, Callable[[], int]]:
    """A loader and a step that reads its next shuffled batch (a new order every epoch), as
    the readers do: uniformly shuffled, or in shuffled shard windows read ahead."""
    shuffle = "windows" if windows else "global"
    loader = Loader(split.dataset.root, split.name, batch, shuffle=shuffle, seed=seed)
    return loader, _stepper(loader)


def read_rate(split: Split, batch: int, seconds: float, cold: bool, windows: bool = False) -> float:
    """Samples/s of shuffled batches; cold reads one epoch right after evicting the shards."""
    files = shard_files(split)
    unmap(split)  # before either run
    loader, step = epoch_reader(split, batch, seed=1 if cold else 0, windows=windows)
    if cold:
        evict(files)
        start = time.perf_counter()
        done = sum(step() for _ in range(len(loader)))
        rate = done / (time.perf_counter() - start)
    else:
        warm(files)
        rate = timed(step, seconds)
    loader.split.reader.close()
    return rate


def unmap(split: Split) -> None:
    """Close the split's reader if it was opened: mapped pages cannot be evicted."""
    if "reader" in vars(split):
        split.reader.close()


def sequential_rate(split: Split) -> float:
    """Bytes/s of reading the shard files start to end from a cold cache (what dd measures)."""
    files = shard_files(split)
    unmap(split)
    evict(files)
    start = time.perf_counter()
    total = 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while block := f.read(16 << 20):
                total += len(block)
    return total / (time.perf_counter() - start)


def stream_rate(split: Split, seconds: float, cold: bool) -> float:
    """Samples/s reading the split's records in file order (packs without random access):
    warm, repeated for `seconds`; cold, one pass right after evicting the shards."""
    files = shard_files(split)

    def one_pass() -> int:
        return sum(1 for _ in split.records())

    if cold:
        evict(files)
        start = time.perf_counter()
        done = one_pass()
        return done / (time.perf_counter() - start)
    warm(files)
    return timed(one_pass, seconds)


def memcpy_rate(sample_bytes: int, batch: int, seconds: float) -> float:
    """Bytes/s of np.copyto moving batch-sized chunks out of a RAM array: the bandwidth limit."""
    chunk = sample_bytes * batch
    source = np.ones(max(chunk * 8, 256 << 20), np.uint8)
    target = np.empty(chunk, np.uint8)
    chunks = len(source) // chunk

    def step() -> int:
        for k in range(chunks):
            np.copyto(target, source[k * chunk : (k + 1) * chunk])
        return chunks * chunk

    return timed(step, seconds)


def naive_rate(split: Split, seconds: float) -> float | None:
    """Samples/s of decoding the original files per step (cv2 + resize + float), if they exist."""
    sources = [(split.source(i), split.mask_source(i)) for i in range(min(split.count, 64))]
    if not all(Path(image).is_file() for image, _ in sources):
        return None
    height, width = split.dataset.image_shape[:2]
    classes = max(1, len(split.dataset.classes))

    def step() -> int:
        for image_path, mask_path in sources:
            image = cv2.resize(cv2.imread(image_path), (width, height)).astype(np.float32) / 255
            if mask_path is not None and Path(mask_path).is_file():  # not annotations in a JSON
                mask = cv2.imread(mask_path, cv2.IMREAD_UNCHANGED)
                mask = cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST)
                np.stack([mask == c for c in range(classes)], -1).astype(np.float32)
            assert image.shape[:2] == (height, width)
        return len(sources)

    return timed(step, seconds)


@dataclass
class BenchResult:
    """The rates of one `packer bench` run and, with a step time, the feeding verdict."""

    dataset: str
    split: str
    samples: int
    sample_bytes: int
    batch_size: int
    rates: list[Rate]
    step_ms: float | None = None
    needed_images_per_s: float | None = None
    headroom: float | None = None
    note: str | None = None  # what was measured differs from what was asked
    epoch: str | None = None  # a mixture's epoch: draws, shares, repeats, runs per pack
    decoder: str | None = None  # a compressed pack's: what decodes, on how many threads

    def to_json(self) -> dict:
        return asdict(self)


def run(
    path: str | os.PathLike | Mixture,
    split: str = "train",
    batch_size: int = 32,
    seconds: float = 3.0,
    step_ms: float | None = None,
) -> BenchResult:
    """Measure a pack's reader warm and cold, beside memcpy and the naive decode loop (a
    mixture's, or a saved one's .json: warm, beside each of its packs alone); a damaged pack
    is a StorageError naming the file."""
    mixture = path if isinstance(path, Mixture) else None
    if mixture is None and is_mixture_file(path):
        mixture = Mixture.load(path)
    try:
        if mixture is not None:
            return _measure_mixture(mixture, split, batch_size, seconds, step_ms)
        return _measure(path, split, batch_size, seconds, step_ms)
    except OSError as exc:
        if isinstance(exc, PackError):
            raise
        raise StorageError(f"{exc}; check the pack with `packer verify {path}`") from exc


def _measure(path, split: str, batch_size: int, seconds: float, step_ms) -> BenchResult:
    dataset = PackedDataset(path)
    part = dataset[split]
    asked, batch_size = batch_size, min(batch_size, part.count)  # a batch is at most the split
    size = record_bytes(dataset.fields)
    copy = memcpy_rate(size, batch_size, seconds)
    rates = [Rate("memcpy limit (np.copyto)", copy / size, copy, "no reader is faster")]
    if part.random_access:
        warm_rate = read_rate(part, batch_size, seconds, cold=False)
        cold_rate = read_rate(part, batch_size, seconds, cold=True)
        cold_windows = read_rate(part, batch_size, seconds, cold=True, windows=True)
        rates += [
            Rate("packed reader, warm cache", warm_rate, warm_rate * size),
            Rate(
                "packed reader, cold cache", cold_rate, cold_rate * size, "one epoch after eviction"
            ),
            Rate(
                "  cold, shuffled shard windows",
                cold_windows,
                cold_windows * size,
                'shuffle="windows", read ahead',
            ),
        ]
    else:
        warm_rate = stream_rate(part, seconds, cold=False)
        cold_rate = stream_rate(part, seconds, cold=True)
        note = "in file order: no random access"
        rates += [
            Rate("packed reader, warm cache", warm_rate, warm_rate * size, note),
            Rate("packed reader, cold cache", cold_rate, cold_rate * size, note),
        ]
    sequential = sequential_rate(part)
    rates.append(Rate("sequential file read, cold", sequential / size, sequential, "like dd"))
    naive = naive_rate(part, seconds)
    if naive is not None:
        rates.append(Rate("naive decode of the sources", naive, naive * size, "cv2 + float"))
    result = BenchResult(str(dataset.root), split, part.count, size, batch_size, rates)
    encoded = [f for f in dataset.fields if f.encoding != "raw"]
    if encoded:
        names = ", ".join(f"{f.name} ({f.encoding})" for f in encoded)
        decoders = ", ".join(sorted({codec.decoder(f.encoding) for f in encoded}))
        result.decoder = (
            f"{names} decoded by {decoders} on {gather.thread_count()} thread(s); rates are "
            "of decoded samples"
        )
    if asked > batch_size:
        result.note = (
            f"{flag('batch_size', asked)} is larger than split {split!r}: batches of all "
            f"{batch_size} samples were read"
        )
    if step_ms:
        result.step_ms = step_ms
        result.needed_images_per_s = asked * 1000.0 / step_ms  # the model's batch
        result.headroom = warm_rate / result.needed_images_per_s
    return result


def _measure_mixture(mixture: Mixture, split: str, batch_size: int, seconds: float, step_ms):
    """A mixture's reader, warm, beside each of its packs read alone and the cost their shares
    of the epoch would take at those rates (the mixture's own cost is the ratio to that)."""
    part = mixture.open(split)
    batch_size = min(batch_size, part.count)
    size = record_bytes(part.dataset.fields)
    copy = memcpy_rate(size, batch_size, seconds)
    rates = [Rate("memcpy limit (np.copyto)", copy / size, copy, "no reader is faster")]
    alone = []
    for stream, pack in zip(mixture.streams, part.parts, strict=True):
        warm(shard_files(pack))
        loader = Loader(stream.path, pack.name, min(batch_size, pack.count), seed=0)
        alone.append(timed(_stepper(loader), seconds))
        rates.append(Rate(f"  {stream.label[-30:]} alone", alone[-1], alone[-1] * size))
    for pack in part.parts:
        warm(shard_files(pack))
    mixed = timed(_stepper(Loader(mixture, split, batch_size, seed=0)), seconds)
    shares = [d / part.count for d in part.plan.draws]
    expected = 1 / sum(share / rate for share, rate in zip(shares, alone, strict=True))
    cost = f"{expected / mixed:.2f}x the cost of its packs' shares read alone"
    rates.insert(1, Rate("mixture reader, warm cache", mixed, mixed * size, cost))
    result = BenchResult(repr(mixture), split, part.count, size, batch_size, rates)
    result.epoch = mixture.describe(split)
    if step_ms:
        result.step_ms = step_ms
        result.needed_images_per_s = batch_size * 1000.0 / step_ms
        result.headroom = mixed / result.needed_images_per_s
    return result


def _stepper(loader: Loader) -> Callable[[], int]:
    """A step that reads the loader's next batch, epoch after epoch."""
    state = {"at": 0}

    def step() -> int:
        if state["at"] >= len(loader):
            loader.set_epoch(loader.epoch + 1)
            state["at"] = 0
        arrays = loader.read(state["at"])
        state["at"] += 1
        return len(arrays["images"])

    return step


def render(result: BenchResult) -> str:
    """The human table and verdict."""
    lines = [
        f"{result.dataset} [{result.split}]: {result.samples} samples of "
        f"{result.sample_bytes / 1e6:.2f} MB, batches of {result.batch_size}",
        *([f"note: {result.note}"] if result.note else []),
        *([f"decoder: {result.decoder}"] if result.decoder else []),
        "",
        f"{'':34} {'img/s':>10} {'GB/s':>8}  share of the memcpy limit",
    ]
    limit = result.rates[0].images_per_s
    for r in result.rates:
        lines.append(
            f"{r.name:34} {r.images_per_s:>10,.0f} {r.bytes_per_s / GB:>8.2f}  "
            f"{r.images_per_s / limit:6.3f}{'  (' + r.note + ')' if r.note else ''}"
        )
    if result.epoch:
        lines += ["", result.epoch]
    if result.headroom is not None:
        verdict = "keeps" if result.headroom >= 1 else "does NOT keep"
        lines += [
            "",
            f"at {result.step_ms:g} ms per step the model needs "
            f"{result.needed_images_per_s:,.0f} img/s: the reader {verdict} the GPU fed "
            f"({result.headroom:.1f}x headroom, warm cache)",
        ]
    return "\n".join(lines)

"""Compressed packs: an ImageNet-like JPEG pack on disk and read against the decode ceiling.

The corpus: `--images` synthetic photos of about 500x375 (smooth colour fields, shapes and
grain: a JPEG of one at 256x256 q90 is photo-sized), in class folders, written as q95 JPEGs,
then packed at 256x256 as npy with `--encoding jpeg --quality 90`. Rows:

  size       the pack's bytes on disk against the same samples raw (256*256*3 bytes an image
             and its label: what the raw npy pack holds), and JPEG bytes per image
  ceiling    the stored payloads decoded by `cv2.imdecode` (the readers' decoder), one call per
             image, in one process per usable core, nothing around it: what no reader beats
  sequence   `PackedSequence`, shuffled batches of `--batch`, img/s over whole batches
  torch      `packer.torch.PackedDataset` in a DataLoader with 2 workers (batch_size=None)

Each round measures the ceiling and both readers for `--seconds` each, in rotated order; the
table gives the median of the rounds and each reader's ratio to the ceiling of its round.
FFCV (issue 39's other yardstick) runs where `.venv-peers` has it (benchmarks/setup_peers.sh).

    python benchmarks/bench_compressed.py [--images 10000] [--rounds 3] [--seconds 10]
        [--batch 256] [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import report, rotate
from packer.imaging import codec
from packer.reading.gather import usable_cores

SOURCE = (500, 375)  # (W, H): ImageNet's typical photo
SIZE = 256
QUALITY = 90
CLASSES = 10
BASES = 97  # distinct scenes; every image is one of them shifted, tinted and with its own grain


def scene(rng: np.random.Generator) -> np.ndarray:
    """One photo-like RGB scene at SOURCE: colour fields at two scales, a few shapes, grain."""
    width, height = SOURCE
    coarse = cv2.resize(rng.uniform(0, 255, (4, 5, 3)), (width, height), cv2.INTER_CUBIC)
    detail = cv2.resize(rng.normal(0, 30, (48, 64, 3)), (width, height), cv2.INTER_CUBIC)
    image = coarse + detail
    for _ in range(rng.integers(3, 8)):
        centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        colour = rng.uniform(0, 255, 3).tolist()
        cv2.circle(image, centre, int(rng.integers(10, 90)), colour, -1, cv2.LINE_AA)
    return image.clip(0, 255).astype(np.float32)


def make_corpus(root: Path, count: int) -> Path:
    """`count` q95 JPEG photos in CLASSES class folders, made by one forked process per core
    (this process never runs OpenCV's thread pool: a pack's forked workers would hang on it)."""
    for k in range(CLASSES):
        (root / f"class_{k:02d}").mkdir(parents=True, exist_ok=True)
    cores = usable_cores()
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_make_photos, args=(root, range(k, count, cores), k))
        for k in range(cores)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return root


def _make_photos(root: Path, numbers: range, seed: int) -> None:
    """Photos `numbers`: each one of BASES scenes shifted, tinted and with its own grain."""
    rng = np.random.default_rng(seed)
    bases = [scene(np.random.default_rng(b)) for b in range(BASES)]
    for i in numbers:
        base = bases[i % BASES]
        shifted = np.roll(base, (int(rng.integers(0, 375)), int(rng.integers(0, 500))), (0, 1))
        grain = rng.normal(0, 4, (SOURCE[1], SOURCE[0], 1)).astype(np.float32)
        image = (shifted * rng.uniform(0.8, 1.2, 3).astype(np.float32) + grain).clip(0, 255)
        path = root / f"class_{i % CLASSES:02d}" / f"photo_{i:06d}.jpg"
        cv2.imwrite(str(path), image.astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 95])


def payloads(pack: Path) -> list[bytes]:
    """Every stored JPEG payload of train, in order (npy: values + offsets)."""
    found = []
    for values_path in sorted((pack / "train").glob("*.images.npy")):
        values = np.load(values_path, mmap_mode="r")
        offsets = np.load(str(values_path).replace(".images.npy", ".images.offsets.npy"))
        found += [bytes(values[a:b]) for a, b in itertools.pairwise(offsets)]
    return found


def _decode_loop(args: tuple[list[bytes], float, multiprocessing.Queue]) -> None:
    """Decode `data` over and over for `seconds` (one decoder call per image); put the count."""
    data, seconds, queue = args
    buffers = [np.frombuffer(p, np.uint8) for p in data]
    done, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        for buffer in buffers:
            cv2.imdecode(buffer, cv2.IMREAD_COLOR_RGB)
            done += 1
    queue.put(done)


def ceiling(data: list[bytes], seconds: float) -> float:
    """img/s of `cv2.imdecode` on every usable core, one process each, nothing around it."""
    cores = usable_cores()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    share = data[: 2000 * cores]
    workers = [
        context.Process(target=_decode_loop, args=((share[k::cores], seconds, queue),))
        for k in range(cores)
    ]
    start = time.perf_counter()
    for w in workers:
        w.start()
    counts = [queue.get() for _ in workers]
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - start)


def decoder_rates(data: list[bytes], seconds: float, rounds: int) -> dict[str, float]:
    """img/s of each installed decoder on one core (best of `rounds`), each decoding a payload
    into a batch row: OpenCV (what packer uses), Pillow, simplejpeg and PyTurboJPEG if there."""
    import importlib.util
    import io

    from PIL import Image

    out = np.empty((SIZE, SIZE, 3), np.uint8)
    buffers = [np.frombuffer(p, np.uint8) for p in data[:500]]

    def opencv(k: int) -> None:
        np.copyto(out, cv2.imdecode(buffers[k], cv2.IMREAD_COLOR_RGB))

    def pillow(k: int) -> None:
        image = Image.open(io.BytesIO(data[k]))
        image.load()
        np.copyto(out, np.asarray(image))

    decoders = {f"OpenCV {cv2.__version__}": opencv, f"Pillow {Image.__version__}": pillow}
    if importlib.util.find_spec("simplejpeg"):
        import simplejpeg

        decoders["simplejpeg"] = lambda k: np.copyto(out, simplejpeg.decode_jpeg(data[k]))
    if importlib.util.find_spec("turbojpeg"):
        from turbojpeg import TJPF_RGB, TurboJPEG

        turbo = TurboJPEG()
        decoders["PyTurboJPEG"] = lambda k: np.copyto(out, turbo.decode(data[k], TJPF_RGB))
    best = dict.fromkeys(decoders, 0.0)
    for _ in range(rounds):
        for name, decode in decoders.items():
            done, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                decode(done % len(buffers))
                done += 1
            best[name] = max(best[name], done / (time.perf_counter() - start))
    return best


def timed_batches(batches, seconds: float) -> float:
    """img/s over the batches an endless iterator yields, for `seconds` after one warm-up."""
    next(batches)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += len(next(batches)[0])
    return done / (time.perf_counter() - start)


def endless(make):
    """The batches of epoch after epoch of `make(epoch)`."""
    epoch = 0
    while True:
        yield from make(epoch)
        epoch += 1


def sequence_rate(pack: Path, batch: int, seconds: float) -> float:
    from packer.keras import PackedSequence

    sequence = PackedSequence(str(pack), "train", batch, seed=0)

    def epoch(e: int):
        sequence.on_epoch_end()
        return (sequence[b] for b in range(len(sequence)))

    return timed_batches(endless(epoch), seconds)


def torch_rate(pack: Path, batch: int, seconds: float) -> float:
    import torch

    from packer.torch import PackedDataset

    dataset = PackedDataset(str(pack), "train", batch, seed=0)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=None, num_workers=2, persistent_workers=True
    )

    def epoch(e: int):
        dataset.set_epoch(e)
        return iter(loader)

    return timed_batches(endless(epoch), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--out", type=Path, help="where corpus and pack go (default: a temp)")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and pack")
    args = parser.parse_args()

    import packer
    from packer.reading.gather import thread_count

    root = args.out or Path(tempfile.mkdtemp(prefix="bench-compressed-"))
    started = time.perf_counter()
    source = make_corpus(root / "photos", args.images)
    made = time.perf_counter() - started
    pack = root / "pack"
    started = time.perf_counter()
    packer.pack(source, out=pack, size=SIZE, encoding="jpeg", quality=QUALITY)
    packed = time.perf_counter() - started
    on_disk = sum(p.stat().st_size for p in (pack / "train").iterdir())
    raw = args.images * (SIZE * SIZE * 3 + 4)  # images + int32 labels: the raw npy pack's data
    per_image = sum(map(len, data := payloads(pack))) / len(data)

    rates: dict[str, list[float]] = {"ceiling": [], "sequence": [], "torch": []}
    measure = {
        "ceiling": lambda: ceiling(data, args.seconds),
        "sequence": lambda: sequence_rate(pack, args.batch, args.seconds),
        "torch": lambda: torch_rate(pack, args.batch, args.seconds),
    }
    for r in range(args.rounds):
        for name in rotate(list(rates), r):
            rates[name].append(measure[name]())
        done = ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items())
        print(f"round {r + 1}: {done}", flush=True)
    ratio = {
        name: statistics.median(a / c for a, c in zip(rates[name], rates["ceiling"], strict=True))
        for name in ("sequence", "torch")
    }
    rows = [
        ["raw npy pack (256x256, computed)", f"{raw / 1e6:,.0f} MB", "", ""],
        [
            "jpeg q90 npy pack, on disk",
            f"{on_disk / 1e6:,.0f} MB",
            f"{raw / on_disk:.2f}x smaller",
            f"{per_image / 1e3:.1f} KB/image",
        ],
        [
            "decode ceiling (cv2.imdecode, all cores)",
            f"{statistics.median(rates['ceiling']):,.0f} img/s",
            "1.00",
            "",
        ],
        [
            f"PackedSequence, batches of {args.batch}",
            f"{statistics.median(rates['sequence']):,.0f} img/s",
            f"{ratio['sequence']:.2f}",
            "",
        ],
        [
            "packer.torch, DataLoader 2 workers",
            f"{statistics.median(rates['torch']):,.0f} img/s",
            f"{ratio['torch']:.2f}",
            "",
        ],
    ]
    notes = (
        f"{args.images:,} photos of {SOURCE[0]}x{SOURCE[1]} made in {made:.0f} s, packed at "
        f"{SIZE}x{SIZE} q{QUALITY} in {packed:.0f} s; decoder: {codec.BACKEND} on "
        f"{thread_count()} thread(s) ({usable_cores()} usable cores); medians of "
        f"{args.rounds} rounds of {args.seconds:g} s; ratio: to the ceiling of the same round. "
        "FFCV: not installed here (no .venv-peers; benchmarks/setup_peers.sh), no FFCV row."
    )
    report("Compressed packs: size and read speed", ["what", "value", "ratio", "note"], rows, notes)
    decoders = decoder_rates(data, args.seconds / 4, args.rounds + 1)
    report(
        "Decoders, one core, a 256x256 q90 payload into a batch row",
        ["decoder", "img/s", "/ OpenCV"],
        [[k, f"{v:,.0f}", f"{v / next(iter(decoders.values())):.2f}"] for k, v in decoders.items()],
        f"best of {args.rounds + 1} runs of {args.seconds / 4:g} s, alternating",
    )
    if not args.keep and args.out is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()

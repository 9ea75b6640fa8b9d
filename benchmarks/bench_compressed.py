"""Compressed packs: an ImageNet-like JPEG pack on disk and read against the decode ceiling
and against FFCV on the same JPEGs.

The corpus: `--images` synthetic photos of about 500x375 (smooth colour fields, shapes and
grain: a JPEG of one at 256x256 q90 is photo-sized), in class folders, written as q95 JPEGs,
then packed at 256x256 as npy with `--encoding jpeg --quality 90`. Rows:

  size       the pack's bytes on disk against the same samples raw (256*256*3 bytes an image
             and its label: what the raw npy pack holds), and JPEG bytes per image
  ceiling    the stored payloads decoded by imagecodecs' `jpeg8_decode` (the readers' decoder,
             libjpeg-turbo) into one row, one call per image, in one process per usable core,
             nothing around it: what no reader beats
  sequence   `PackedSequence`, shuffled batches of `--batch`, img/s over whole batches
  torch      `packer.torch.PackedDataset` in a DataLoader with 2 workers (batch_size=None)
  ffcv       FFCV 1.0.2 (issue 39's yardstick): the pack's 256x256 pixels (a raw pack of the
             same photos) written by `DatasetWriter` with `RGBImageField(write_mode="jpg",
             jpeg_quality=90)` and an `IntField` label, read by its `Loader` (2 workers, random
             order, os_cache, batches of `--batch`, the last one kept) into uint8 HWC tensors

FFCV runs in the peers' environment (`bash benchmarks/setup_peers.sh` makes .venv-peers): this
script starts itself there (`--peer`), which writes the .beton, reads one untimed epoch (numba
compiles the pipeline), then times rounds when asked. Where .venv-peers or FFCV is missing,
the notes say why and the rest runs. Each round measures every contender for `--seconds`, in
rotated order; the table gives the median of the rounds and each reader's ratios to the
ceiling and to FFCV of its round (issue 39's goals: >= 0.9 and >= 1.0).

    python benchmarks/bench_compressed.py [--images 10000] [--rounds 3] [--seconds 10]
        [--batch 256] [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import imagecodecs
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import (
    PEERS_PYTHON,
    Peer,
    endless,
    median_ratios,
    report,
    rotate,
    run_for,
    serve_rounds,
    start_peer,
)
from packer.imaging import codec
from packer.reading.gather import usable_cores

SOURCE = (500, 375)  # (W, H): ImageNet's typical photo
SIZE = 256
QUALITY = 90
CLASSES = 10
BASES = 97  # distinct scenes; every image is one of them shifted, tinted and with its own grain
FFCV_WORKERS = 2  # as issue 39 compares: FFCV's loader and packer.torch with 2 workers each
CHECKED = 100  # FFCV's JPEGs compared byte for byte with the pack's, the first this many
GOAL = "goals >= 0.9, >= 1.0"  # issue 39: each packer reader over the ceiling, over FFCV


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


def payloads(pack: Path, limit: int | None = None) -> list[bytes]:
    """The stored JPEG payloads of train, in order (npy: values + offsets); the first `limit`."""
    found: list[bytes] = []
    for values_path in sorted((pack / "train").glob("*.images.npy")):
        values = np.load(values_path, mmap_mode="r")
        offsets = np.load(str(values_path).replace(".images.npy", ".images.offsets.npy"))
        found += [bytes(values[a:b]) for a, b in itertools.pairwise(offsets)]
        if limit is not None and len(found) >= limit:
            return found[:limit]
    return found


def _decode_loop(args: tuple[list[bytes], float, multiprocessing.Queue]) -> None:
    """Decode `data` over and over for `seconds` (one decoder call per image); put the count."""
    data, seconds, queue = args
    buffers = [np.frombuffer(p, np.uint8) for p in data]
    row = np.empty((SIZE, SIZE, 3), np.uint8)
    done, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        for buffer in buffers:
            imagecodecs.jpeg8_decode(buffer, out=row)
            done += 1
    queue.put(done)


def ceiling(data: list[bytes], seconds: float) -> float:
    """img/s of the readers' decoder on every usable core, one process each, nothing around
    it."""
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
    into a batch row (32-byte aligned, as batch rows are): OpenCV, imagecodecs' libjpeg-turbo
    into that row and into one 16 bytes off (libjpeg-turbo stores faster there), packer's own
    decode (libjpeg-turbo into an off row, then a copy), Pillow, simplejpeg and PyTurboJPEG if
    there."""
    import importlib.util
    import io

    from PIL import Image

    buffers = [np.frombuffer(p, np.uint8) for p in data[:500]]
    room = np.empty(SIZE * SIZE * 3 + 64, np.uint8)  # a row 32-byte aligned, as batch rows are
    aligned = room[-room.ctypes.data % 64 :][: SIZE * SIZE * 3].reshape(SIZE, SIZE, 3)
    off = room[-room.ctypes.data % 64 + 16 :][: SIZE * SIZE * 3].reshape(SIZE, SIZE, 3)

    def opencv(k: int) -> None:
        np.copyto(aligned, cv2.imdecode(buffers[k], cv2.IMREAD_COLOR_RGB))

    def pillow(k: int) -> None:
        image = Image.open(io.BytesIO(data[k]))
        image.load()
        np.copyto(aligned, np.asarray(image))

    libjpeg = f"imagecodecs {imagecodecs.__version__} (libjpeg-turbo)"
    decoders = {
        f"OpenCV {cv2.__version__}": opencv,
        f"{libjpeg}, into a 32-byte aligned row": lambda k: imagecodecs.jpeg8_decode(
            buffers[k], out=aligned
        ),
        f"{libjpeg}, into a row 16 bytes off": lambda k: imagecodecs.jpeg8_decode(
            buffers[k], out=off
        ),
        "packer's codec.decode_into (the readers'), into an aligned row": lambda k: (
            codec.decode_into(buffers[k], aligned)
        ),
        f"Pillow {Image.__version__}": pillow,
    }
    if importlib.util.find_spec("simplejpeg"):
        import simplejpeg

        decoders["simplejpeg"] = lambda k: np.copyto(aligned, simplejpeg.decode_jpeg(data[k]))
    if importlib.util.find_spec("turbojpeg"):
        from turbojpeg import TJPF_RGB, TurboJPEG

        turbo = TurboJPEG()
        decoders["PyTurboJPEG"] = lambda k: np.copyto(aligned, turbo.decode(data[k], TJPF_RGB))
    best = dict.fromkeys(decoders, 0.0)
    for _ in range(rounds):
        for name, decode in decoders.items():
            done, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                decode(done % len(buffers))
                done += 1
            best[name] = max(best[name], done / (time.perf_counter() - start))
    return best


def sequence_rate(pack: Path, batch: int, seconds: float) -> float:
    from packer.keras import PackedSequence

    sequence = PackedSequence(str(pack), "train", batch, seed=0)

    def epoch(e: int):
        sequence.on_epoch_end()
        return (sequence[b] for b in range(len(sequence)))

    return run_for(endless(epoch).__next__, seconds, warmup=1)


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

    return run_for(endless(epoch).__next__, seconds, warmup=1)


# --- FFCV: its side runs in the peers' environment ------------------------------------------


class RawSamples:
    """The raw pack's train samples by index, (uint8 HWC image, int label): the pixels the JPEG
    pack encoded, in its order, for FFCV's writer to encode its own way."""

    def __init__(self, raw: Path) -> None:
        shards = sorted((raw / "train").glob("*.images.npy"))
        self.images = [np.load(p, mmap_mode="r") for p in shards]
        self.labels = [np.load(str(p).replace(".images.npy", ".labels.npy")) for p in shards]
        self.starts = np.cumsum([0, *map(len, self.images)])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        shard = int(np.searchsorted(self.starts, index, "right")) - 1
        k = index - int(self.starts[shard])
        return np.ascontiguousarray(self.images[shard][k]), int(self.labels[shard][k])


def write_beton(raw: Path, pack: Path, beton: Path) -> dict:
    """The raw pack as FFCV's .beton (JPEG q90 image, int label), written by one process per
    usable core: its bytes, its seconds, and how many of its first CHECKED JPEGs (FFCV's
    encoder on the same pixels) are byte for byte the pack's own."""
    from ffcv.fields import IntField, RGBImageField
    from ffcv.fields.rgb_image import encode_jpeg
    from ffcv.writer import DatasetWriter

    samples = RawSamples(raw)
    fields = {"image": RGBImageField(write_mode="jpg", jpeg_quality=QUALITY), "label": IntField()}
    beton.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    DatasetWriter(str(beton), fields, num_workers=usable_cores()).from_indexed_dataset(samples)
    seconds = time.perf_counter() - start
    ours = payloads(pack, CHECKED)
    same = sum(encode_jpeg(samples[k][0], QUALITY).tobytes() == p for k, p in enumerate(ours))
    return {"bytes": beton.stat().st_size, "seconds": seconds, "same": same, "checked": len(ours)}


def ffcv_loader(beton: Path, batch: int):
    """FFCV's Loader as issue 39 sets it: FFCV_WORKERS workers, random order, os_cache, the last
    batch kept (as packer's readers do); uint8 HWC image tensors (no normalisation, no device)."""
    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor

    return Loader(
        str(beton),
        batch_size=batch,
        num_workers=FFCV_WORKERS,
        order=OrderOption.RANDOM,
        os_cache=True,
        drop_last=False,
        seed=0,
        pipelines={
            "image": [SimpleRGBImageDecoder(), ToTensor()],
            "label": [IntDecoder(), ToTensor()],
        },
    )


def ffcv_missing() -> str | None:
    """None where FFCV imports in this environment, else why not, in one line."""
    import importlib.util

    from benchmarks.bench_peers import brief, not_installed

    if importlib.util.find_spec("ffcv") is None:
        return not_installed("ffcv")
    try:
        import ffcv.loader  # noqa: F401
    except ImportError as exc:  # installed, but its compiled parts do not load
        return brief(exc)
    return None


def ffcv_peer() -> None:
    """FFCV's side: a hello line (its version, or why it cannot run here); then, asked for the
    .beton of a raw pack, write it, read one untimed epoch (numba compiles the pipeline on the
    first), answer what was written, and serve timed rounds of "ffcv" (harness.serve_rounds)."""
    import importlib.metadata

    missing = ffcv_missing()
    version = None if missing else importlib.metadata.version("ffcv")
    print(json.dumps({"version": version, "missing": missing}), flush=True)
    if missing:
        return
    job = json.loads(sys.stdin.readline())
    written = write_beton(Path(job["raw"]), Path(job["pack"]), Path(job["beton"]))
    loader = ffcv_loader(Path(job["beton"]), job["batch"])
    for _ in loader:
        pass
    serve_rounds({"ffcv": endless(lambda epoch: loader).__next__}, written)


def start_ffcv(
    source: Path, pack: Path, root: Path, batch: int, notes: list[str]
) -> tuple[Peer, dict] | None:
    """FFCV's side started in the peers' environment, handed the photos packed raw at SIZE (the
    pixels the JPEG pack encoded) to write as its .beton: (the peer, what it wrote); None, with a
    note on why, where there is no .venv-peers, no FFCV in it, or FFCV's side fails."""
    import packer

    why: list[str] = []
    try:
        peer = start_peer(PEERS_PYTHON, __file__, [], why)
        if peer is not None and peer.hello["missing"]:
            why.append(f"{peer.hello['missing']} in .venv-peers (benchmarks/setup_peers.sh)")
            peer.close()
        elif peer is not None:
            packer.pack(source, out=root / "raw", size=SIZE)
            job = {"raw": str(root / "raw"), "pack": str(pack), "batch": batch}
            return peer, peer.ask({**job, "beton": str(root / "ffcv" / "train.beton")})
    except RuntimeError as exc:  # its process ended; its messages are above
        why.append(str(exc))
    notes += [f"FFCV: {line}; no FFCV row." for line in why]
    return None


def size_row(what: str, size: int, raw: int, count: int) -> list[str]:
    """A row of the table for bytes on disk: MB, how much smaller than raw, KB an image."""
    note = f"{raw / size:.2f}x smaller than raw, {size / count / 1e3:.1f} KB/image"
    return [what, f"{size / 1e6:,.0f} MB", "", "", note]


def rate_row(what: str, name: str, rates: dict, ratio: dict, goal: str = "") -> list[str]:
    """A row of the table for a reader: median img/s, its ratios to the ceiling and FFCV."""
    cells = [f"{ratio[base][name]:.2f}" if base in ratio else "" for base in ("ceiling", "ffcv")]
    return [what, f"{statistics.median(rates[name]):,.0f} img/s", *cells, goal]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--out", type=Path, help="where corpus and packs go (default: a temp)")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and packs")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        ffcv_peer()
        return

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
    data = payloads(pack)

    measure = {
        "ceiling": lambda: ceiling(data, args.seconds),
        "sequence": lambda: sequence_rate(pack, args.batch, args.seconds),
        "torch": lambda: torch_rate(pack, args.batch, args.seconds),
    }
    notes: list[str] = []
    ffcv, written = start_ffcv(source, pack, root, args.batch, notes) or (None, {})
    if ffcv is not None:
        measure["ffcv"] = lambda: ffcv.ask({"run": "ffcv", "seconds": args.seconds})["wall"]
    rates: dict[str, list[float]] = {name: [] for name in measure}
    for r in range(args.rounds):
        for name in rotate(list(rates), r):
            rates[name].append(measure[name]())
        done = ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items())
        print(f"round {r + 1}: {done}", flush=True)
    if ffcv is not None:
        ffcv.close()
    ratio = {base: median_ratios(rates, base) for base in ("ceiling", "ffcv") if base in rates}
    version = ffcv.hello["version"] if ffcv is not None else None
    rows = [
        ["raw npy pack (256x256, computed)", f"{raw / 1e6:,.0f} MB", "", "", ""],
        size_row("jpeg q90 npy pack, on disk", on_disk, raw, args.images),
    ]
    if ffcv is not None:
        what = f"FFCV {version} .beton, jpg q90, on disk"
        rows.append(size_row(what, written["bytes"], raw, args.images))
    rows += [
        rate_row("decode ceiling (jpeg8_decode, all cores)", "ceiling", rates, ratio),
        rate_row(f"PackedSequence, batches of {args.batch}", "sequence", rates, ratio, GOAL),
        rate_row("packer.torch, DataLoader 2 workers", "torch", rates, ratio, GOAL),
    ]
    if ffcv is not None:
        what = f"FFCV {version} Loader, {FFCV_WORKERS} workers, batches of {args.batch}"
        rows.append(rate_row(what, "ffcv", rates, ratio))
        notes.append(
            f"FFCV: the same photos packed raw, written by its DatasetWriter in "
            f"{written['seconds']:.0f} s from those pixels (no decode, no resize: not a pack "
            f"time to compare); its encoder gave the pack's own JPEG bytes for "
            f"{written['same']} of the first {written['checked']} images; its Loader in random "
            "order, os_cache, the last batch kept, uint8 HWC tensors, one untimed epoch first."
        )
    notes.insert(
        0,
        f"{args.images:,} photos of {SOURCE[0]}x{SOURCE[1]} made in {made:.0f} s, packed at "
        f"{SIZE}x{SIZE} q{QUALITY} in {packed:.0f} s; decoder: imagecodecs "
        f"{imagecodecs.__version__} (libjpeg-turbo) on "
        f"{thread_count()} thread(s) ({usable_cores()} usable cores); medians of "
        f"{args.rounds} rounds of {args.seconds:g} s; ratios: to the ceiling and to FFCV of "
        "the same round.",
    )
    headers = ["what", "value", "/ ceiling", "/ FFCV", "note"]
    report("Compressed packs: size and read speed", headers, rows, "\n\n".join(notes))
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

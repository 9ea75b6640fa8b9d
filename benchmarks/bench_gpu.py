"""On a GPU: does packer keep it fed? ResNet-50 trained four ways in one run, the GPU's busy
share sampled every 100 ms, the hand-off's pinned slots A/B, the CUDA augmentation checked.

Feeds (each: warm-up steps, then --steps timed steps of --batch images at 224x224):
  (a) synthetic   uint8 tensors already on the GPU: the ceiling
  (b) packer cuda packer.torch.PackedDataset over an npy pack (256x256), augment_device="cuda"
                  (random resized crop to 224, flips, shifts, zoom, rotation), DataLoader
                  workers, pin_memory=True
  (c) packer cpu  the same augmentation in the DataLoader workers (NumPy/OpenCV)
  (d) jpeg folder torchvision ImageFolder + transforms.v2 decoding the JPEGs every step, the
                  same workers (what users run today)
  (e) jpeg nvjpeg the same images packed as JPEG q90 (a tenth of the bytes), decode_device=
                  "cuda": the workers hand over the payloads, nvJPEG decodes each batch in the
                  DataLoader's pin-memory thread, the augmentation of (b) after it on the GPU
  (f) jpeg workers that JPEG pack decoded by the workers (libjpeg-turbo), augmented as (b)
Model: torchvision's ResNet-50, bf16 autocast, channels_last, SGD; images normalised on the
GPU. The data: --images synthetic JPEGs around 500x375 in 10 class folders, made here.

Then: the DataLoader hand-off's shared-memory slots registered with CUDA (packer.torch.pin_slots)
against the DataLoader's own pin_memory copy (batches/s and host-to-device GB/s), and the CUDA
executor of packer.Augment against the NumPy executor on the same draw (masks >= 99.99%).

Writes gpu_util.csv, gpu_util.png and gpu_feed.json to --out; prints the tables. Needs CUDA,
torchvision and matplotlib (the benchmarks' environment). `--smoke` runs the same code on the
CPU with a small model and few images, to check the script where there is no GPU.

    python benchmarks/bench_gpu.py [--images 20000] [--steps 200] [--workers 12] --out DIR
    python benchmarks/bench_gpu.py --images 12000 --steps 150 --feeds abef --extras executors \
        --read-batches 40 --out DIR       # compressed packs on the GPU (issue 39's must-hold 5)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing import Pool
from pathlib import Path

import cv2
import harness
import numpy as np
import torch
from torch.utils.data import DataLoader

import packer
import packer.torch
from packer.augment import numpy_exec, torch_exec

CLASSES = 10
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
SIDE = 224  # what the model sees
PACKED = 256  # what the pack stores: room for the random resized crop
PREFETCH = 4  # batches each DataLoader worker keeps ready


def augment(seed: int = 0) -> packer.Augment:
    """Flips, shifts, zoom and rotation after a random resized crop to SIDE x SIDE."""
    return packer.Augment(
        rotation_range=10,
        width_shift_range=0.05,
        height_shift_range=0.05,
        zoom_range=0.1,
        horizontal_flip=True,
        random_resized_crop=dict(size=(SIDE, SIDE), scale=(0.25, 1.0)),
        seed=seed,
    )


# --- the data ------------------------------------------------------------------------------


def _one_jpeg(args: tuple[Path, int]) -> None:
    path, i = args
    rng = np.random.default_rng(i)
    w, h = int(rng.integers(400, 600)), int(rng.integers(300, 450))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    image = np.empty((h, w, 3), np.float32)
    for c in range(3):
        image[..., c] = 128 + 60 * np.sin(xx / rng.uniform(8, 40) + yy / rng.uniform(8, 40) + c)
    image += rng.normal(0, 12, image.shape).astype(np.float32)
    for _ in range(int(rng.integers(3, 8))):
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        colour = tuple(int(v) for v in rng.integers(0, 255, 3))
        cv2.circle(image, centre, int(rng.integers(10, 90)), colour, -1)
    cv2.imwrite(str(path), image.clip(0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])


def make_jpegs(root: Path, count: int, workers: int) -> Path:
    """`count` JPEGs in CLASSES class folders, ImageNet-like sizes (400-600 x 300-450)."""
    src = root / "jpegs"
    for c in range(CLASSES):
        (src / f"class{c:02d}").mkdir(parents=True, exist_ok=True)
    jobs = [(src / f"class{i % CLASSES:02d}" / f"{i:06d}.jpg", i) for i in range(count)]
    with Pool(workers) as pool:
        pool.map(_one_jpeg, jobs, chunksize=64)
    return src


# --- one training run per feed ---------------------------------------------------------------


class Sampler(threading.Thread):
    """The GPU's busy share (NVML's utilization.gpu) every `period` s, tagged with the feed."""

    def __init__(self, period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.period, self.feed, self.rows = period, "idle", []
        self.stop = threading.Event()
        self.read = _utilization_reader()
        self.t0 = time.perf_counter()

    def run(self) -> None:
        while not self.stop.wait(self.period):
            self.rows.append((time.perf_counter() - self.t0, self.feed, self.read()))


def _utilization_reader() -> Callable[[], float]:
    if not torch.cuda.is_available():
        return lambda: float("nan")
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:  # no NVML bindings: torch's own reading of the same counter
        return lambda: float(torch.cuda.utilization())


class Trainer:
    """ResNet-50 (or a small stand-in with --smoke), bf16 autocast, channels_last, SGD."""

    def __init__(self, device: torch.device, smoke: bool) -> None:
        if smoke:
            model = torch.nn.Sequential(
                torch.nn.Conv2d(3, 16, 3, stride=4),
                torch.nn.ReLU(),
                torch.nn.AdaptiveAvgPool2d(1),
                torch.nn.Flatten(),
                torch.nn.Linear(16, CLASSES),
            )
        else:
            import torchvision

            model = torchvision.models.resnet50(num_classes=CLASSES)
        self.device = device
        self.model = model.to(device, memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.inv_std = 1 / torch.tensor(STD, device=device).view(1, 3, 1, 1)
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16)

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """One step on uint8 NCHW images (any memory format) and int64 labels."""
        images = images.to(self.device, non_blocking=True)
        labels = labels.to(self.device, non_blocking=True)
        x = images.float().sub_(self.mean).mul_(self.inv_std)
        x = x.contiguous(memory_format=torch.channels_last)
        with self.autocast:
            loss = torch.nn.functional.cross_entropy(self.model(x), labels)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()


def run_feed(
    name: str, batches: Iterator, trainer: Trainer, sampler: Sampler, warmup: int, steps: int
) -> dict:
    """Warm-up then `steps` timed steps from `batches`; img/s over the timed steps."""
    sampler.feed = name
    for _ in range(warmup):
        trainer.step(*next(batches))
    trainer.sync()
    start, images = time.perf_counter(), 0
    for _ in range(steps):
        x, y = next(batches)
        images += len(y)
        trainer.step(x, y)
    trainer.sync()
    end = time.perf_counter()
    seconds = end - start
    sampler.feed = "idle"
    window = (start - sampler.t0, end - sampler.t0)
    timed = [u for t, f, u in sampler.rows if f == name and window[0] <= t <= window[1]]
    return {
        "feed": name,
        "img_per_s": images / seconds,
        "seconds": seconds,
        "busy_median": float(np.median(timed)) if timed else float("nan"),
        "busy_mean": float(np.mean(timed)) if timed else float("nan"),
        "busy_share_over_90": float(np.mean(np.array(timed) >= 90)) if timed else float("nan"),
    }


def synthetic(batch: int, device: torch.device) -> Iterator:
    images = torch.randint(0, 256, (batch, 3, SIDE, SIDE), dtype=torch.uint8, device=device)
    images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, CLASSES, (batch,), device=device)
    while True:
        yield images, labels


def epochs(dataset, loader: DataLoader) -> Iterator:
    """The loader's batches epoch after epoch (packer datasets told each epoch)."""
    epoch = 0
    while True:
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
        yield from loader
        epoch += 1


def packer_feed(
    pack: Path, batch: int, workers: int, device: str | None, decode: str | None = None
) -> tuple:
    """packer.torch over `pack`: augmented on `device` (None: in the workers), a JPEG pack's
    images decoded on `decode` (None: in the workers)."""
    dataset = packer.torch.PackedDataset(
        pack,
        "train",
        batch_size=batch,
        shuffle=True,
        augment=augment(),
        augment_device=None if decode else device,
        decode_device=decode,
        layout="NCHW",
        drop_remainder=True,
    )
    return dataset, _loader(dataset, None, workers)


def read_rate(batches: Iterator, count: int, device: torch.device, in_flight: int) -> float:
    """Images a second the feed delivers on `device`, finished (decoded, augmented), no model:
    the `in_flight` batches the DataLoader holds ready are drained first, so the rate is the
    pipeline's, not its queue's."""
    for _ in range(in_flight + 5):
        next(batches)[0].to(device)
    _sync(device)
    start, images = time.perf_counter(), 0
    for _ in range(count):
        x, y = next(batches)
        x.to(device, non_blocking=True)
        images += len(y)
    _sync(device)
    return images / (time.perf_counter() - start)


def pack_bytes(pack: Path) -> int:
    """Bytes on disk of the pack's train split."""
    return sum(f.stat().st_size for f in (pack / "train").rglob("*") if f.is_file())


def folder_feed(src: Path, batch: int, workers: int) -> tuple:
    import torchvision
    from torchvision.transforms import v2

    transform = v2.Compose(
        [
            v2.PILToTensor(),
            v2.RandomResizedCrop(SIDE, scale=(0.25, 1.0), antialias=True),
            v2.RandomHorizontalFlip(),
            v2.RandomAffine(degrees=10, translate=(0.05, 0.05), scale=(0.9, 1.1)),
        ]
    )
    dataset = torchvision.datasets.ImageFolder(str(src), transform=transform)
    return dataset, _loader(dataset, batch, workers, shuffle=True, drop_last=True)


def _loader(dataset, batch: int | None, workers: int, **more) -> DataLoader:
    extra = dict(persistent_workers=True, prefetch_factor=PREFETCH) if workers else {}
    return DataLoader(
        dataset, batch_size=batch, num_workers=workers, pin_memory=True, **extra, **more
    )


# --- pinned slots A/B ------------------------------------------------------------------------


def pinned_slots_ab(pack: Path, batch: int, workers: int, count: int, device) -> list[dict]:
    """Batches/s of a DataLoader (workers, pin_memory=True) whose batches are copied to the
    device as they come, with the slots registered with CUDA and without; and the copy's
    GB/s from a registered slot, from pageable memory and from torch's pinned memory."""
    rows = []
    for pinned in (False, True, False, True):
        packer.torch.pin_slots(pinned)
        dataset = packer.torch.PackedDataset(
            pack, "train", batch_size=batch, shuffle=True, layout="NCHW", drop_remainder=True
        )
        loader = _loader(dataset, None, workers)
        batches = epochs(dataset, loader)
        for _ in range(10):
            next(batches)[0].to(device, non_blocking=True)
        _sync(device)
        start, moved = time.perf_counter(), 0
        for _ in range(count):
            images, labels = next(batches)
            on_device = images.to(device, non_blocking=True)
            moved += images.numel()
            del images, labels, on_device
        _sync(device)
        seconds = time.perf_counter() - start
        images, _ = next(batches)
        copy = _copy_rate(images, device)
        rows.append(
            {
                "slots": "registered" if pinned else "pageable + DataLoader pin copy",
                "batches_per_s": count / seconds,
                "ms_per_batch": 1000 * seconds / count,
                "loop_GB_per_s": moved / seconds / 1e9,
                "is_pinned": bool(images.is_pinned()) if device.type == "cuda" else False,
                "h2d_GB_per_s": copy,
            }
        )
        del images, batches, loader, dataset
    packer.torch.pin_slots(True)
    if device.type == "cuda":
        pageable = torch.empty(batch, 3, PACKED, PACKED, dtype=torch.uint8)
        rows.append(
            {"slots": "reference: pageable tensor", "h2d_GB_per_s": _copy_rate(pageable, device)}
        )
        rows.append({"slots": "reference: torch pinned tensor",
                     "h2d_GB_per_s": _copy_rate(pageable.pin_memory(), device)})  # fmt: skip
    return rows


def _copy_rate(tensor: torch.Tensor, device: torch.device, rounds: int = 10) -> float:
    if device.type != "cuda":
        return float("nan")
    tensor.to(device)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(rounds):
        tensor.to(device, non_blocking=True)
    torch.cuda.synchronize()
    return rounds * tensor.numel() * tensor.element_size() / (time.perf_counter() - start) / 1e9


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# --- the CUDA executor against the NumPy one --------------------------------------------------


def executors_agree(pack: Path, device: torch.device, count: int = 64) -> dict:
    """One draw for `count` packed images and synthetic masks, warped by the NumPy executor
    and by the torch executor on `device`: the share of mask pixels that agree, and the
    images' mean absolute difference (interpolation error)."""
    data = packer.open(pack)["train"]
    images = np.stack([data[i][0] for i in range(count)])
    rng = np.random.default_rng(0)
    masks = np.zeros(images.shape[:3], np.uint8)
    for i in range(count):  # blocks of classes, so that edges move with the geometry
        for _ in range(6):
            x, y = rng.integers(0, PACKED - 40, 2)
            w, h = rng.integers(20, 120, 2)
            masks[i, y : y + h, x : x + w] = rng.integers(1, CLASSES)
    params = augment(seed=3).draw(0, np.arange(count), (PACKED, PACKED))
    cpu_images, cpu_masks = numpy_exec.apply(images, masks, params)
    gpu_images, gpu_masks = torch_exec.apply(
        torch.from_numpy(images).to(device), torch.from_numpy(masks).to(device), params,
        device=device,
    )  # fmt: skip
    gpu_images, gpu_masks = gpu_images.cpu().numpy(), gpu_masks.cpu().numpy()
    difference = np.abs(gpu_images.astype(np.int16) - cpu_images.astype(np.int16))
    return {
        "samples": count,
        "mask_agreement": float((gpu_masks == cpu_masks).mean()),
        "image_mean_abs_diff": float(difference.mean()),
        "image_share_within_2": float((difference <= 2).mean()),
    }


def targets_agree(device: torch.device, count: int = 64, objects: int = 8) -> dict:
    """Boxes and per-object masks of `count` synthetic samples moved by the NumPy executor and
    by the torch executor on `device`, from one draw: the largest box difference in pixels
    (<= 0.5 asked), whether the same objects were kept, and the masks' agreement."""
    from packer.augment import numpy_targets, torch_targets

    rng = np.random.default_rng(1)
    targets = []
    for _ in range(count):
        xy = rng.uniform(0, PACKED - 60, (objects, 2))
        wh = rng.uniform(8, 120, (objects, 2))
        boxes = np.concatenate([xy, np.minimum(xy + wh, PACKED)], axis=1).astype(np.float32)
        masks = np.zeros((objects, PACKED, PACKED), np.uint8)
        for k, (x1, y1, x2, y2) in enumerate(boxes.astype(int)):
            masks[k, y1:y2, x1:x2] = 1
        targets.append(
            {"boxes": boxes, "labels": rng.integers(0, CLASSES, objects), "masks": masks}
        )
    params = augment(seed=5).draw(0, np.arange(count), (PACKED, PACKED))
    cpu = numpy_targets.move_targets(params, targets)
    on_device = [{k: torch.as_tensor(v, device=device) for k, v in t.items()} for t in targets]
    gpu = torch_targets.move_targets(params, on_device, device=device)
    same_kept = all(len(a["labels"]) == len(b["labels"]) for a, b in zip(cpu, gpu, strict=True))
    worst, agree, pixels = 0.0, 0, 0
    for a, b in zip(cpu, gpu, strict=True):
        if len(a["boxes"]) and len(a["boxes"]) == len(b["boxes"]):
            worst = max(worst, float(np.abs(a["boxes"] - b["boxes"].cpu().numpy()).max()))
            agree += int((a["masks"] == b["masks"].cpu().numpy()).sum())
            pixels += a["masks"].size
    kept = sum(len(t["labels"]) for t in cpu)
    return {"samples": count, "objects": count * objects, "kept": kept, "same_kept": same_kept,
            "box_max_abs_diff_px": worst, "mask_agreement": agree / max(pixels, 1)}  # fmt: skip


def decodes_agree(pack: Path, device: torch.device, count: int = 256) -> dict:
    """The first `count` JPEG payloads of `pack` decoded on `device` (nvJPEG on a GPU) and by
    packer's CPU decoder (libjpeg-turbo): how far apart their pixels are, in levels."""
    from packer.reading.loader import Loader
    from packer.torch import decode as torch_decode

    loader = Loader(str(pack), "train", count, shuffle=False)
    payloads = loader.payloads(0, "images")
    shape = loader.dataset.field("images").shape
    payload = torch.from_numpy(np.concatenate([np.frombuffer(p, np.uint8) for p in payloads]))
    lengths = [len(p) for p in payloads]
    on_device = torch_decode.decode(payload, lengths, shape, device).cpu().numpy()
    on_cpu = torch_decode.decode(payload, lengths, shape, torch.device("cpu")).numpy()
    difference = np.abs(on_device.astype(np.int16) - on_cpu.astype(np.int16))
    return {
        "images": count,
        "mean_abs_diff": float(difference.mean()),
        "p99_abs_diff": float(np.percentile(difference, 99)),
        "max_abs_diff": int(difference.max()),
        "share_within_2": float((difference <= 2).mean()),
    }


# --- the report ------------------------------------------------------------------------------


def plot(rows: list[tuple], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    for feed in dict.fromkeys(f for _, f, _ in rows if f != "idle"):
        points = [(t, u) for t, f, u in rows if f == feed]
        t0 = points[0][0]
        ax.plot([t - t0 for t, _ in points], [u for _, u in points], label=feed, lw=1)
    ax.set_xlabel("seconds since the feed started (warm-up included)")
    ax.set_ylabel("GPU busy, % (NVML, every 100 ms)")
    ax.set_ylim(0, 105)
    ax.legend(loc="lower right")
    ax.set_title("ResNet-50 bf16, batch 256: the GPU's busy share by input pipeline")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def save(summary: dict, rows: list[tuple], out: Path) -> None:
    """The summary and the samples so far (a run cut short keeps what it measured)."""
    (out / "gpu_feed.json").write_text(json.dumps(summary, indent=1, default=str))
    with open(out / "gpu_util.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["seconds", "feed", "gpu_busy_percent"])
        writer.writerows((f"{t:.3f}", feed, u) for t, feed, u in list(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=min(12, (os.cpu_count() or 2) - 2))
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--feeds", default="abcd", help="which of the feeds to run (abcdef)")
    parser.add_argument(
        "--extras", default="pins,executors", help="also: pins (slots A/B), executors (agree)"
    )
    parser.add_argument("--read-batches", type=int, default=0, help="feeds' read rates, no model")
    parser.add_argument("--smoke", action="store_true", help="CPU, small model, few images")
    args = parser.parse_args()
    device = torch.device("cpu" if args.smoke else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu: torch sees no CUDA device (use --smoke to check on a CPU)")
    torch.backends.cudnn.benchmark = True
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-gpu-"))
    info = {
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "none (smoke)",
        "cuda": torch.version.cuda,
        "driver": _driver(),
    }
    print(json.dumps(info))

    t = time.perf_counter()
    src = make_jpegs(work, args.images, os.cpu_count() or 2)
    print(f"made {args.images:,} JPEGs in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    pack = work / "pack-npy"
    packer.pack(src, out=pack, format="npy", size=(PACKED, PACKED), workers=os.cpu_count())
    print(f"packed them at {PACKED}x{PACKED} in {time.perf_counter() - t:.1f} s", flush=True)
    jpeg = work / "pack-jpeg"
    if set(args.feeds) & set("ef"):
        t = time.perf_counter()
        packer.pack(src, out=jpeg, format="npy", size=(PACKED, PACKED), encoding="jpeg",
                    quality=90, workers=os.cpu_count())  # fmt: skip
        print(f"packed them as JPEG q90 in {time.perf_counter() - t:.1f} s", flush=True)
    decoded = device.type  # nvJPEG on a GPU; packer's decoder where the batch lands in a smoke

    sampler = Sampler()
    sampler.start()
    trainer = Trainer(device, args.smoke)
    results = []
    feeds = {
        "a": ("(a) synthetic on GPU", lambda: (None, synthetic(args.batch, device))),
        "b": ("(b) packer, CUDA augment",
              lambda: packer_feed(pack, args.batch, args.workers, device.type)),
        "c": ("(c) packer, CPU augment in workers",
              lambda: packer_feed(pack, args.batch, args.workers, None)),
        "d": ("(d) ImageFolder + transforms.v2",
              lambda: folder_feed(src, args.batch, args.workers)),
        "e": ("(e) JPEG pack, nvJPEG decode + CUDA augment",
              lambda: packer_feed(jpeg, args.batch, args.workers, device.type, decoded)),
        "f": ("(f) JPEG pack, decoded in workers, CUDA augment",
              lambda: packer_feed(jpeg, args.batch, args.workers, device.type)),
    }  # fmt: skip
    packs = {"b": pack, "c": pack, "e": jpeg, "f": jpeg}
    shown = {k: v for k, v in vars(args).items() if k not in ("work", "out")}
    summary = {"info": info, "args": shown,
               "feeds": results, "pinned_slots": [], "executors": {}}  # fmt: skip
    for key in args.feeds:
        name, make = feeds[key]
        made = make()
        batches = made[1] if made[0] is None else epochs(*made)
        results.append(run_feed(name, batches, trainer, sampler, args.warmup, args.steps))
        if key in packs:
            results[-1]["bytes_per_image"] = pack_bytes(packs[key]) / args.images
        if args.read_batches and key != "a":
            in_flight = PREFETCH * args.workers
            results[-1]["read_img_per_s"] = read_rate(batches, args.read_batches, device, in_flight)
        print(json.dumps(results[-1]), flush=True)
        del made, batches
        save(summary, sampler.rows, args.out)
    sampler.stop.set()
    ceiling = results[0]["img_per_s"] if results and args.feeds.startswith("a") else None
    for row in results:
        row["of_ceiling"] = row["img_per_s"] / ceiling if ceiling else None
    save(summary, sampler.rows, args.out)
    pins, agree = [], {}
    if "pins" in args.extras:
        pins = pinned_slots_ab(pack, args.batch, args.workers, 60 if not args.smoke else 5, device)
        summary["pinned_slots"] = pins
        save(summary, sampler.rows, args.out)
    if set(args.feeds) & set("ef"):
        summary["decodes"] = decodes_agree(jpeg, device)
        print(f"nvJPEG vs libjpeg-turbo: {json.dumps(summary['decodes'])}", flush=True)
        save(summary, sampler.rows, args.out)
    if "executors" in args.extras:
        agree = executors_agree(pack, device, 64 if not args.smoke else 8)
        try:
            agree["targets"] = targets_agree(device, 64 if not args.smoke else 4)
        except ImportError as error:  # a revision without detection targets
            agree["targets"] = f"not checked: {error}"
        summary["executors"] = agree
        save(summary, sampler.rows, args.out)
    try:
        plot(sampler.rows, args.out / "gpu_util.png")
    except ImportError as error:
        print(f"no plot: {error}")

    notes = (
        f"{info['gpu']}, torch {info['torch']}, CUDA {info['cuda']}, driver {info['driver']}; "
        f"feeds one after the other, {args.steps} timed steps each after {args.warmup} warm-up"
    )
    feeds_table = [
        [row["feed"], row["img_per_s"], f"{row['of_ceiling']:.3f}" if row["of_ceiling"] else "-",
         f"{row['busy_median']:.0f}", f"{row['busy_mean']:.1f}",
         f"{row['bytes_per_image'] / 1000:.1f}" if "bytes_per_image" in row else "-",
         f"{row['read_img_per_s']:.0f}" if "read_img_per_s" in row else "-"]
        for row in results
    ]  # fmt: skip
    headers = ["feed", "img/s", "x (a)", "busy med", "busy mean", "KB/image", "read img/s"]
    harness.report("ResNet-50 fed four ways", headers, feeds_table, notes)
    slots = [
        [row["slots"], f"{row.get('batches_per_s', float('nan')):.1f}",
         f"{row.get('ms_per_batch', float('nan')):.2f}", f"{row['h2d_GB_per_s']:.1f}",
         str(row.get("is_pinned", ""))]
        for row in pins
    ]  # fmt: skip
    if slots:
        print(harness.table(["hand-off slots", "batch/s", "ms/batch", "H2D GB/s", "pinned"], slots))
    print(f"\nCUDA executor vs NumPy: {json.dumps(agree)}")


def _driver() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        return str(pynvml.nvmlSystemGetDriverVersion())
    except Exception:
        return "unknown"


if __name__ == "__main__":
    main()

"""`pack --workers 2` on colour-coded masks against twice its single-core work, in one run.

CamVid's index masks are turned into colour masks (`<stem>_L.png`, RGB PNGs, each class index
painted in its `class_dict.csv` colour), in the Semantic-Segmentation-Suite layout `train/` +
`train_labels/` with `class_dict.csv` at the root, and the pairs are hard-linked under new
names until there are `--pairs` of them (2,000 by default). Then, alternating, in rounds:

- (a) one process pinned to one core does, with packer's own functions and the pack's own
  options (the plan's geometry, class table and ignore index), the per-pair work no pack can
  avoid: read both files, decode the image and crop/resize it (`decode_image`), decode the
  colour mask (`decode_mask`), map its colours to class ids (`LabelMapper.map`; its colour
  table is built inside the timed loop, as every worker builds its own) and crop/resample it
  as the image (`resample_mask`, `pad_to_canvas`). Timed from the first read to the last mask.
- (a') the same per-pair work the way a training script would do it in plain OpenCV + NumPy
  (issue 7's "decode limit" of bench_pack.py, with a colour lookup): `cv2.imread` of image
  and mask, the same centre crop (INTER_AREA when it also resizes, nearest for the mask), and
  a 2**24-entry NumPy table indexed by r << 16 | g << 8 | b. Context, not the issue's ratio.
- (a2) the work of (a) in 2 processes, each pinned to its own core and given half the
  pairs: how far this machine's two cores scale on it at all.
- (a+) the work of (a) plus the least a pack must add by its contract (docs/design.md: a
  manifest with the SHA-256 of every shard file and the pack's channel and class
  statistics): each pair's arrays written to one file, SHA-256 of the bytes written, and
  `ChunkStats.add`. No fsync, no source hashes, no receipts, no start-up: a floor, so
  (a+) / (a) bounds what (b) / 2x (a) can reach on two cores that scale perfectly.
- (b) `pack SRC --out OUT --workers 2 --size WxH` as a command, in a fresh process, into a
  fresh folder: img/s from its wall time. On top of (a) it pays for: interpreter start-up and
  imports, scanning the sources and planning, starting the workers, SHA-256 of every source
  (for later staleness checks), channel and class statistics, writing the records, SHA-256
  and fsync of every shard file, receipts and the manifest, and a core idle while the last
  shard is finalised. The manifest's own `run.seconds` (workers started to last shard
  finalised: no interpreter start-up, imports, plan or manifest) is reported beside it.

The default size, 480x352, is a centre crop of CamVid's 480x360 without a resize (the size
of the README's CamVid tables); `--size` changes it for every contender alike. CPU time per
pair (user + system; for (b) the whole process tree, imports included) is reported beside
the rates: less sensitive than wall time to what else runs on a shared machine, and its
(a) / (b) quotient is the ratio (b) would reach on two idle cores that scale perfectly.
The page cache holds the sources before each contender; each pack is deleted and synced
away before the next. Medians over `--rounds` are compared:

    ratio = (b) img/s / (2 x (a) img/s), target >= 0.9 (issue 16, item 5)

`--breakdown` adds one more pack, its workers' stages timed (ms per pair; not in the ratio).

    python benchmarks/bench_colour_masks.py [--pairs 2000] [--rounds 5] [--size 480x352]
        [--breakdown] [--json results.json]
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import harness
import numpy as np
from harness import forked_together
from PIL import Image

from packer.imaging import decode_image, decode_mask, pad_to_canvas, resample_mask
from packer.labels import LabelMapper
from packer.packing import make_plan
from packer.packing.convert import PackConfig, read_source
from packer.packing.stats import ChunkStats

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CAMVID = SHARED / "camvid"
STAGES = ("read", "image", "mask_decode", "colour_lookup", "mask_crop")
CONTENDERS = ("single", "opencv", "two_processes", "floor", "pack")


def colour_masks(camvid: Path, dest: Path) -> list[tuple[Path, Path]]:
    """CamVid's train pairs with each index mask painted in its class_dict.csv colours, written
    once under `dest` as `<stem>_L.png` (RGB PNG): [(image, colour mask)]."""
    with open(camvid / "class_dict.csv", newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    palette = np.zeros((256, 3), np.uint8)
    for index, row in enumerate(rows):
        palette[index] = [int(v) for v in row[1:4]]
    dest.mkdir(parents=True)
    pairs = []
    for image in sorted((camvid / "train").glob("*.png")):
        index = np.asarray(Image.open(camvid / "trainannot" / image.name))
        if index.max() >= len(rows):
            raise SystemExit(f"{image.name}: mask value {index.max()} is not in class_dict.csv")
        mask = dest / f"{image.stem}_L.png"
        Image.fromarray(palette[index]).save(mask)
        pairs.append((image, mask))
    return pairs


def build(camvid: Path, tmp: Path, count: int) -> Path:
    """The Semantic-Segmentation-Suite layout with `count` hard-linked pairs; returns its root."""
    pairs = colour_masks(camvid, tmp / "colour-masks")  # outside the root: not scanned
    root = tmp / "camvid-colour"
    (root / "train").mkdir(parents=True)
    (root / "train_labels").mkdir()
    shutil.copyfile(camvid / "class_dict.csv", root / "class_dict.csv")
    for k in range(count):
        image, mask = pairs[k % len(pairs)]
        copy = k // len(pairs)
        os.link(image, root / "train" / f"r{copy:03d}_{image.name}")
        os.link(mask, root / "train_labels" / f"r{copy:03d}_{mask.name}")
    return root


def packer_work(
    config: PackConfig, samples: list, stages: dict[str, float], keep=lambda image, ids: None
) -> None:
    """(a): read, decode, crop/resize the image; decode, colour-map and crop the mask;
    `keep(image, ids)` gets each pair's arrays."""
    mask_dtype = np.dtype(next(f.dtype for f in config.fields if f.name == "masks"))
    mapper = LabelMapper(config.table, config.ignore_index, mask_dtype)  # a fresh colour table
    clock = time.perf_counter
    for sample in samples:
        t0 = clock()
        image_bytes = read_source(os.path.join(config.root, sample.image))
        mask_bytes = read_source(os.path.join(config.root, sample.mask))
        t1 = clock()
        image = decode_image(image_bytes, config.geometry, max_pixels=config.max_pixels)
        t2 = clock()
        mask = decode_mask(mask_bytes, max_pixels=config.max_pixels)
        t3 = clock()
        mapped = mapper.map(mask.values, mask.kind, mask.palette)
        t4 = clock()
        ids = pad_to_canvas(
            resample_mask(mapped.ids, image.placement), image.placement, config.ignore_index
        )
        t5 = clock()
        keep(image.pixels, ids)
        for stage, seconds in zip(
            STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True
        ):
            stages[stage] += seconds


def floor_work(scratch: Path, config: PackConfig, samples: list, stages: dict) -> None:
    """(a+): (a), each pair's arrays written to a file, hashed (SHA-256) and counted into
    the pack's statistics, as a pack's contract asks at the least."""
    digest, counts = hashlib.sha256(), ChunkStats()
    fd, path = tempfile.mkstemp(dir=scratch)

    def keep(image: np.ndarray, ids: np.ndarray) -> None:
        for array in (image, ids):
            data = memoryview(array).cast("B")
            os.write(fd, data)
            digest.update(data)
        counts.add({"images": image, "masks": ids}, "")

    try:
        packer_work(config, samples, stages, keep)
    finally:
        os.close(fd)
        os.unlink(path)


def opencv_work(config: PackConfig, samples: list, stages: dict[str, float]) -> None:
    """(a'): the same per-pair work in plain OpenCV + NumPy, as a training script does it."""
    size = config.geometry.size
    lut = np.full(1 << 24, config.ignore_index, np.uint8)
    for cls in config.table.classes:
        r, g, b = cls.color
        lut[r << 16 | g << 8 | b] = cls.index
    for sample in samples:
        image = cv2.imread(os.path.join(config.root, sample.image), cv2.IMREAD_COLOR_RGB)
        image = centre_crop(image, size)
        if image.shape[1::-1] != size:
            image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        rgb = cv2.imread(os.path.join(config.root, sample.mask), cv2.IMREAD_COLOR_RGB)
        keys = rgb[..., 0].astype(np.int32) << 16 | rgb[..., 1].astype(np.int32) << 8
        ids = lut[keys | rgb[..., 2]]
        ids = centre_crop(ids, size)
        if ids.shape[1::-1] != size:
            ids = cv2.resize(ids, size, interpolation=cv2.INTER_NEAREST)


def centre_crop(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The largest centred region of `array` with the aspect ratio of `size` (W, H)."""
    height, width = array.shape[:2]
    crop_w = min(width, round(height * size[0] / size[1]))
    crop_h = min(height, round(width * size[1] / size[0]))
    x0, y0 = (width - crop_w) // 2, (height - crop_h) // 2
    return array[y0 : y0 + crop_h, x0 : x0 + crop_w]


def _worker(work, config: PackConfig, samples: list, cpu: int, barrier, queue) -> None:
    """One pinned process of (a) / (a') / (a2) / (a+): waits for its peers, then reports
    (start, end, CPU seconds, stages)."""
    os.sched_setaffinity(0, {cpu})
    cv2.setNumThreads(1)
    stages = dict.fromkeys(STAGES, 0.0)
    barrier.wait()
    start, cpu_start = time.perf_counter(), time.process_time()
    work(config, samples, stages)
    queue.put((start, time.perf_counter(), time.process_time() - cpu_start, stages))


def decode_rate(work, config: PackConfig, samples: list, processes: int) -> dict:
    """Pairs/s of `processes` forked processes, one per core, sharing `samples` equally; CPU
    ms per pair; ms per pair by stage (summed over the processes)."""
    cpus = sorted(os.sched_getaffinity(0))
    reports = forked_together(
        _worker,
        [(work, config, samples[k::processes], cpus[k % len(cpus)]) for k in range(processes)],
    )
    seconds = max(r[1] for r in reports) - min(r[0] for r in reports)
    return {
        "rate": len(samples) / seconds,
        "cpu_ms": sum(r[2] for r in reports) / len(samples) * 1000,
        "stages": {k: sum(r[3][k] for r in reports) / len(samples) * 1000 for k in STAGES},
    }


def pack_command(root: Path, out: Path, size: tuple[int, int], workers: int) -> list[str]:
    """The pack command's arguments after the interpreter."""
    command = ["-m", "packer", "pack", str(root), "--out", str(out), "--no-progress"]
    return [*command, "--size", f"{size[0]}x{size[1]}", "--workers", str(workers)]


def pack_rate(root: Path, out: Path, size: tuple[int, int], workers: int) -> dict:
    """Pairs/s of the `pack` command from its wall time and from the manifest's run.seconds;
    CPU ms per pair of its whole process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *pack_command(root, out, size, workers)], capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"pack failed ({done.returncode}):\n{done.stderr}")
    manifest = json.loads((out / "dataset.json").read_text())
    count = sum(s["count"] for s in manifest["splits"].values())
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "rate": count / wall,
        "run_rate": count / manifest["run"]["seconds"],
        "cpu_ms": cpu / count * 1000,
    }


def clear(out: Path) -> None:
    """Delete a pack and let the disk settle, so its writeback never overlaps the next timing."""
    shutil.rmtree(out, ignore_errors=True)
    os.sync()


# The pack command with its workers' stages timed: each wrapped function adds its wall time to
# a per-process total, which every worker writes to a JSON file as it exits.
_BREAKDOWN = r"""
import hashlib, json, os, sys, time, types
start, logs = time.perf_counter(), sys.argv[1]
import packer.cli
imported = time.perf_counter() - start
from multiprocessing import util
from packer import labels
from packer.engines import local
from packer.formats import npy
from packer.packing import convert, stats
totals = {}
def timed(name, function):
    def run(*args, **kwargs):
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - began
    return run
for owner, attr, name in [
    (convert.Converter, "_read", "read + source SHA-256"), (convert, "decode_image", "image"),
    (convert, "decode_mask", "mask_decode"), (labels.LabelMapper, "map", "colour_lookup"),
    (convert, "resample_mask", "mask_crop"), (npy.ChunkWriter, "write", "write records"),
    (stats.ChunkStats, "add", "statistics"), (npy.ChunkWriter, "close", "start writeback"),
    (convert.Converter, "pack_chunk", "chunk tasks"),
    (convert.Converter, "finalize_shard", "finalise shards (SHA-256, fsync)"),
]:
    setattr(owner, attr, timed(name, getattr(owner, attr)))
convert.hashlib = types.SimpleNamespace(sha256=timed("source SHA-256", hashlib.sha256))
def dump():
    with open(os.path.join(logs, f"{os.getpid()}.json"), "w") as fh:
        json.dump(totals, fh)
init = local._init_worker
def init_worker(*args):
    init(*args)
    util.Finalize(None, dump, exitpriority=100)
local._init_worker = init_worker
with open(os.path.join(logs, "parent.json"), "w") as fh:
    json.dump({"imports": imported}, fh)
sys.argv = ["pack", *sys.argv[2:]]
packer.cli.pack_command()
"""


def breakdown(root: Path, out: Path, size: tuple[int, int], workers: int, tmp: Path) -> dict:
    """One instrumented pack: ms per pair summed over its workers, by stage."""
    logs = tmp / "breakdown"
    logs.mkdir()
    harness.warm(root)
    command = pack_command(root, out, size, workers)[3:]  # after "-m packer pack"
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _BREAKDOWN, str(logs), *command], check=True, capture_output=True
    )
    wall = time.perf_counter() - start
    count = sum(
        s["count"] for s in json.loads((out / "dataset.json").read_text())["splits"].values()
    )
    clear(out)
    parent = json.loads((logs / "parent.json").read_text())
    totals: dict[str, float] = {}
    for path in logs.glob("[0-9]*.json"):
        for name, seconds in json.loads(path.read_text()).items():
            totals[name] = totals.get(name, 0.0) + seconds
    shutil.rmtree(logs)
    ms = {name: seconds / count * 1000 for name, seconds in totals.items()}
    ms["read"] = ms.pop("read + source SHA-256") - ms["source SHA-256"]
    inner = ("read", *STAGES[1:], "source SHA-256", "write records", "statistics")
    inner += ("start writeback",)
    per_pair = {name: ms.get(name, 0.0) for name in inner}
    per_pair["other work in chunk tasks"] = ms["chunk tasks"] - sum(per_pair.values())
    per_pair["finalise shards (SHA-256, fsync)"] = ms["finalise shards (SHA-256, fsync)"]
    per_pair["all worker tasks"] = ms["chunk tasks"] + ms["finalise shards (SHA-256, fsync)"]
    return {"wall_s": wall, "imports_s": parent["imports"], "ms_per_pair": per_pair}


def measure(root: Path, size: tuple[int, int], rounds: int, workers: int, tmp: Path) -> dict:
    plan = make_plan(root, out=tmp / "unused", size=size)  # the pack's own options
    samples = list(plan.scan.samples)
    if plan.table is None or not plan.table.has_colors or plan.scan.task != "segmentation":
        raise SystemExit(f"{root}: expected colour masks with a class_dict.csv")
    out = tmp / "packed"

    def pack() -> dict:
        rate = pack_rate(root, out, size, workers)
        clear(out)
        return rate

    works = {"opencv": opencv_work, "floor": functools.partial(floor_work, tmp)}
    contenders = {
        name: pack if name == "pack" else functools.partial(
            decode_rate, works.get(name, packer_work), plan.config, samples,
            2 if name == "two_processes" else 1,
        )
        for name in CONTENDERS
    }  # fmt: skip
    # interleaved rounds, so that drift on a shared machine hits all alike
    runs = harness.side_by_side(
        contenders, 0, rounds, lambda: harness.warm(root), measure=lambda run, _: run()
    )
    median = {
        name: {key: statistics.median(r[key] for r in runs[name]) for key in ("rate", "cpu_ms")}
        for name in CONTENDERS
    }
    median["pack"]["run_rate"] = statistics.median(r["run_rate"] for r in runs["pack"])
    single = median["single"]["rate"]
    return {
        "pairs": len(samples),
        "size": list(size),
        "workers": workers,
        "rounds": runs,
        "median": median,
        "stages_ms": {k: statistics.median(r["stages"][k] for r in runs["single"]) for k in STAGES},
        "ratio": median["pack"]["rate"] / (workers * single),
        "ratio_per_round": [
            p["rate"] / (workers * s["rate"])
            for p, s in zip(runs["pack"], runs["single"], strict=True)
        ],
        "ratio_vs_opencv": median["pack"]["rate"] / (workers * median["opencv"]["rate"]),
        "floor_ratio": median["floor"]["rate"] / single,
        "scaling_two_processes": median["two_processes"]["rate"] / (2 * single),
    }


def report(r: dict) -> None:
    m, w = r["median"], r["workers"]
    single = m["single"]["rate"]
    notes = (
        f"numpy {np.__version__}, opencv {cv2.__version__}; {r['pairs']} pairs, "
        f"{r['size'][0]}x{r['size'][1]}, medians of {len(r['ratio_per_round'])} interleaved "
        "rounds, warm page cache (shared machine, compare within a run)"
    )
    named = [
        ("(a) read + decode + crop + colour lookup, packer's functions, 1 core", m["single"]),
        ("(a') the same in plain OpenCV + NumPy, 1 core", m["opencv"]),
        ("(a2) (a) in 2 processes on 2 cores (this machine's ceiling)", m["two_processes"]),
        ("(a+) (a) + write, SHA-256 and statistics of the records, 1 core", m["floor"]),
        (f"(b) `pack --workers {w}`, wall time of the command", m["pack"]),
    ]
    rows = [
        [name, row["rate"], row["rate"] / single, row["rate"] / (w * single), row["cpu_ms"]]
        for name, row in named
    ]
    run_rate = m["pack"]["run_rate"]
    rows.append(
        ["(b) the same packs, the manifest's run.seconds (start-up, plan, manifest left out)",
         run_rate, run_rate / single, run_rate / (w * single), ""]
    )  # fmt: skip
    headers = ["contender", "img/s", "/ (a)", f"/ {w}x (a)", "CPU ms per pair"]
    harness.report("Colour masks: pack vs one core's decode", headers, rows, notes)
    rounds = ", ".join(f"{v:.2f}" for v in r["ratio_per_round"])
    print(f"ratio (b) / {w}x (a): **{r['ratio']:.2f}** (target >= 0.9; per round: {rounds})")
    print(f"(b) / {w}x (a'): {r['ratio_vs_opencv']:.2f}")
    print(
        f"(a+) / (a): {r['floor_ratio']:.2f}: the most (b) / {w}x (a) can reach while it does "
        "the contract's work"
    )
    print("\n(a) per pair, ms (median of rounds):\n")
    stages = r["stages_ms"]
    values = [f"{stages[k]:.2f}" for k in STAGES]
    print(harness.table([*STAGES, "total"], [[*values, f"{sum(stages.values()):.2f}"]]))
    if "breakdown" in r:
        b = r["breakdown"]
        print(
            f"\nOne more pack with its workers' stages timed ({b['wall_s']:.2f} s wall, of which "
            f"{b['imports_s']:.2f} s the parent's imports); ms per pair, summed over workers:\n"
        )
        print(harness.table(["stage", "ms per pair"], b["ms_per_pair"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000, help="hard-linked pairs to pack")
    parser.add_argument("--rounds", type=int, default=5, help="medians over this many rounds")
    parser.add_argument("--size", default="480x352", help="output WIDTHxHEIGHT (all contenders)")
    parser.add_argument("--workers", type=int, default=2, help="pack's --workers")
    parser.add_argument("--breakdown", action="store_true", help="time one pack's stages too")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not (CAMVID / "trainannot").is_dir():
        raise SystemExit(f"needs the CamVid index masks in {CAMVID}")
    width, height = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        root = build(CAMVID, Path(tmp), args.pairs)
        result = measure(root, (width, height), args.rounds, args.workers, Path(tmp))
        if args.breakdown:
            out = Path(tmp) / "packed"
            result["breakdown"] = breakdown(root, out, (width, height), args.workers, Path(tmp))
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

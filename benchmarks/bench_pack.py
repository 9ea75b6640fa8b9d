"""Pack speed against this machine's decode limit, side by side in one run.

For each dataset, the same images are decoded, cropped/resized and label-mapped in one
process, two ways: (a) with plain OpenCV, as a training script would (`cv2.imread`, full
decode, INTER_AREA, a lookup table for the mask: the decode limit of the issue) and (b) with
packer's own decoders (libspng for PNG, DCT-reduced JPEG: what is left is the converter's
own overhead); then (c) `packer.pack` runs with 1 and 2 workers, and (d) the OpenCV work of
(a) runs in 2 forked processes, to show how far the cores scale at all. Efficiency = pack
img/s divided by N x a single-core limit. The sources are repeated through hard links (same files,
new names) so each pack runs for seconds and start-up does not dominate; each contender runs
in several alternating rounds and the medians are compared.

    python benchmarks/bench_pack.py [--repeat 10] [--rounds 5] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cv2
import harness
import numpy as np

import packer
from packer.imaging import Geometry, decode_image, decode_mask, resample_mask
from packer.sources import scan

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
LIMITS = ("opencv", "packer")
DATASETS = {"camvid": (480, 352), "hymenoptera": (224, 224)}


def opencv_limit(src: Path, size: tuple[int, int]) -> float:
    """Images/s of one process doing the per-image work with plain OpenCV: full decode to
    RGB, centre crop to the output's aspect, INTER_AREA resize, and for masks an unchanged
    decode, the same crop, nearest resize and a class lookup table (cv2.LUT)."""
    samples = scan(src).samples
    start = time.perf_counter()
    opencv_pass(src, size, samples)
    return len(samples) / (time.perf_counter() - start)


def opencv_pass(src: Path, size: tuple[int, int], samples: list) -> None:
    """The plain-OpenCV per-image work of `opencv_limit` over `samples`."""
    cv2.setNumThreads(1)
    lut = np.arange(256, dtype=np.uint8)
    for sample in samples:
        image = cv2.imread(str(src / sample.image), cv2.IMREAD_COLOR_RGB)
        image = cv2.resize(centre_crop(image, size), size, interpolation=cv2.INTER_AREA)
        if sample.mask is not None:
            mask = cv2.imread(str(src / sample.mask), cv2.IMREAD_UNCHANGED)
            mask = cv2.resize(centre_crop(mask, size), size, interpolation=cv2.INTER_NEAREST)
            cv2.LUT(mask, lut)


def opencv_parallel(src: Path, size: tuple[int, int], processes: int) -> float:
    """Images/s of `processes` forked processes each doing `opencv_pass` over an equal share:
    how far this machine's cores scale on the decode alone (not part of the issue's ratio)."""
    samples = scan(src).samples
    shares = [samples[k::processes] for k in range(processes)]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        list(pool.map(abs, range(processes)))  # the processes are up before the clock starts
        start = time.perf_counter()
        list(pool.map(opencv_pass, [src] * processes, [size] * processes, shares))
        return len(samples) / (time.perf_counter() - start)


def centre_crop(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The largest centred region of `array` with the aspect ratio of `size` (W, H)."""
    height, width = array.shape[:2]
    crop_w, crop_h = (
        min(width, height * size[0] // size[1]),
        min(height, width * size[1] // size[0]),
    )
    x0, y0 = (width - crop_w) // 2, (height - crop_h) // 2
    return array[y0 : y0 + crop_h, x0 : x0 + crop_w]


def packer_limit(src: Path, size: tuple[int, int]) -> float:
    """Images/s of one process running only packer's own decode, crop/resize and the mask's
    nearest-neighbour resample: the pack minus its overheads (label map, stats, write, hash)."""
    samples = scan(src).samples
    geometry = Geometry(size)
    start = time.perf_counter()
    for sample in samples:
        placement = decode_image((src / sample.image).read_bytes(), geometry).placement
        if sample.mask is not None:
            resample_mask(decode_mask((src / sample.mask).read_bytes()).values, placement)
    return len(samples) / (time.perf_counter() - start)


def pack_rate(src: Path, out: Path, size: tuple[int, int], workers: int) -> float:
    """Images/s of a whole pack (scan, plan, workers, finalise, manifest)."""
    start = time.perf_counter()
    ds = packer.pack(src, out=out, size=size, workers=workers, overwrite=True)
    return sum(s.count for s in ds.splits.values()) / (time.perf_counter() - start)


def measure(name: str, size: tuple[int, int], repeat: int, rounds: int, tmp: Path) -> dict:
    src = harness.linked_copy(SHARED / name, tmp / name, repeat)

    def pack(workers: int) -> float:
        rate = pack_rate(src, tmp / f"{name}-out{workers}", size, workers)
        shutil.rmtree(tmp / f"{name}-out{workers}")
        return rate

    contenders = {
        "opencv": lambda: opencv_limit(src, size),
        "opencv_2": lambda: opencv_parallel(src, size, 2),
        "packer": lambda: packer_limit(src, size),
        "pack_1": lambda: pack(1),
        "pack_2": lambda: pack(2),
    }
    # interleaved so that drift hits them alike; idle file pages are evicted within about
    # 30 s on these machines, so the sources are read again before each
    runs = harness.side_by_side(
        contenders, 0, rounds, lambda: harness.warm(src), measure=lambda run, _: run()
    )
    row = {key: statistics.median(values) for key, values in runs.items()}
    return {
        "dataset": name,
        "images": len(scan(src).samples),
        **row,
        **{
            f"vs_{limit}_{w}": row[f"pack_{w}"] / (w * row[limit])
            for limit in LIMITS
            for w in (1, 2)
        },
        "scaling_opencv_2": row["opencv_2"] / (2 * row["opencv"]),
        "vs_opencv_2_processes": row["pack_2"] / row["opencv_2"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="hard links per source file")
    parser.add_argument("--rounds", type=int, default=5, help="medians over this many rounds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, size in DATASETS.items():
            if (SHARED / name).is_dir():
                rows.append(measure(name, size, args.repeat, args.rounds, Path(tmp)))
    notes = (
        f"numpy {np.__version__}, opencv {cv2.__version__}; medians of {args.rounds} "
        "interleaved rounds, warm page cache (shared machine, compare within a run)"
    )
    headers = [
        "dataset", "images", "OpenCV limit, 1 core", "packer decoders, 1 core", "pack w1",
        "pack w2", "w2 / 2x OpenCV limit", "w1 / packer decoders", "w2 / 2x packer decoders",
    ]  # fmt: skip
    keys = ("opencv", "packer", "pack_1", "pack_2", "vs_opencv_2", "vs_packer_1", "vs_packer_2")
    table = [[r["dataset"], r["images"], *(r[k] for k in keys)] for r in rows]
    harness.report("Pack speed vs the decode limits", headers, table, notes)
    print("How far the cores scale on the OpenCV work alone (forked processes, same run):\n")
    headers = ["dataset", "OpenCV, 2 processes", "/ 2x 1 process", "pack w2 / OpenCV 2 processes"]
    keys = ("opencv_2", "scaling_opencv_2", "vs_opencv_2_processes")
    print(harness.table(headers, [[r["dataset"], *(r[k] for k in keys)] for r in rows]))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

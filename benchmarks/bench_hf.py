"""A Hugging Face dataset's Parquet files against the same images as class folders: pack speed.

Issue 39, must-hold 3: a Hub-layout Parquet dataset packs at >= 0.9 x the speed of the same
images in a folder layout. `--images` synthetic scenes (sizes varying around `--pixels`, ten
classes) are written once as PNG and once as JPEG (q90), each both as class folders
(`train/<class>/<i>.png`) and as one Hub Parquet file (`data/train-00000-of-00001.parquet`:
an `image` column of `{bytes, path}` structs and a `ClassLabel` column, `--row-group` rows a
row group: the `datasets` library writes 100 for image datasets). Every source is packed by
`pack SRC --workers 2 --size WxH` in a fresh process, fresh output, warm page cache, the four
alternating for `--rounds` (order rotating); medians compared per encoding:

    ratio = Parquet img/s / class folders img/s, target >= 0.9

Beside it, the CPU seconds of a pack (all its processes, the workers included), which a
shared machine's load moves far less than the wall time.

A split of cells is shuffled in row-group blocks (`packer.packing.order.in_blocks`), so each
chunk reads a few row groups, which each worker keeps (`packer.storage.cells.KEPT_BYTES` in
all) for their other rows: `--pixels 320x240` makes a 220 MB file, where a row-by-row shuffle
had each worker read and keep the whole file.

    python benchmarks/bench_hf.py [--images 4000] [--pixels 64x48] [--rounds 5] [--row-group 100]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

PACK = str(Path(sys.executable).parent / "pack")  # the command, from this environment
CLASSES = [f"class_{i}" for i in range(10)]
ENCODINGS = {"PNG": ("png", {}), "JPEG": ("jpg", {"quality": 90})}


def scene(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A smooth gradient with a few blocks and some noise: compresses like a small photo."""
    x = np.linspace(0, 1, width)[None, :, None]
    y = np.linspace(0, 1, height)[:, None, None]
    base = rng.uniform(0, 255, 3) * x + rng.uniform(0, 255, 3) * y
    picture = base.repeat(height, 0) if base.shape[0] == 1 else base
    picture = np.broadcast_to(picture, (height, width, 3)).copy()
    for _ in range(3):
        x0, y0 = rng.integers(0, width - 4), rng.integers(0, height - 4)
        picture[y0 : y0 + height // 4, x0 : x0 + width // 4] = rng.uniform(0, 255, 3)
    picture += rng.normal(0, 6, picture.shape)
    return picture.clip(0, 255).astype(np.uint8)


def make_sources(tmp: Path, images: int, pixels: tuple[int, int], row_group: int) -> dict:
    """Per encoding: (class folders root, Hub Parquet root), the same encoded bytes in both."""
    rng = np.random.default_rng(0)
    width, height = pixels
    shapes = [
        (width + int(rng.integers(-width // 8, width // 8 + 1)), height + int(rng.integers(0, 3)))
        for _ in range(images)
    ]
    pictures = [scene(rng, w, h) for w, h in shapes]
    labels = [i % len(CLASSES) for i in range(images)]
    features = {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel", "names": CLASSES}}
    metadata = {"huggingface": json.dumps({"info": {"features": features}})}
    sources = {}
    for name, (suffix, options) in ENCODINGS.items():
        folders, hub = tmp / f"{suffix}-folders", tmp / f"{suffix}-hub"
        cells = []
        for i, (picture, label) in enumerate(zip(pictures, labels, strict=True)):
            out = io.BytesIO()
            Image.fromarray(picture).save(out, name, **options)
            data = out.getvalue()
            folder = folders / "train" / CLASSES[label]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:06d}.{suffix}").write_bytes(data)
            cells.append({"bytes": data, "path": f"{i:06d}.{suffix}"})
        table = pa.table({"image": cells, "label": labels}).replace_schema_metadata(metadata)
        (hub / "data").mkdir(parents=True)
        path = hub / "data" / "train-00000-of-00001.parquet"
        pq.write_table(table, path, row_group_size=row_group)
        sources[name] = (folders, hub, path.stat().st_size)
    return sources


def pack_rate(src: Path, out: Path, count: int, size: str, cpu: list[float]) -> float:
    """img/s of `pack SRC --workers 2 --size WxH` in a fresh process, fresh output; its CPU
    seconds (all processes) appended to `cpu`."""
    harness.warm(src)
    before = _children_cpu()
    started = time.perf_counter()
    subprocess.run(
        [PACK, str(src), "--out", str(out), "--workers", "2", "--size", size, "--no-progress"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rate = count / (time.perf_counter() - started)
    cpu.append(_children_cpu() - before)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return rate


def _children_cpu() -> float:
    """User and system seconds of the processes this one started and waited for (a pack's
    workers count in once the pack has waited for them)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--pixels", default="64x48", help="WxH around which images vary")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--row-group", type=int, default=100, help="rows per Parquet row group")
    args = parser.parse_args()
    width, height = (int(v) for v in args.pixels.split("x"))
    size = f"{width}x{height}"
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        sources = make_sources(tmp, args.images, (width, height), args.row_group)
        packs, cpu = {}, {}
        for encoding, (folders, hub, _) in sources.items():
            for label, src in (
                (f"{encoding} class folders", folders),
                (f"{encoding} Parquet", hub),
            ):
                cpu[label] = []
                packs[label] = lambda src=src, used=cpu[label]: pack_rate(
                    src, tmp / "out", args.images, size, used
                )
        rates = harness.side_by_side(packs, 0, args.rounds, measure=lambda run, _: run())
        rows = []
        for encoding, (_, _, parquet_bytes) in sources.items():
            folder, hub = f"{encoding} class folders", f"{encoding} Parquet"
            paired = harness.ratios({folder: rates[folder], hub: rates[hub]}, folder)[hub]
            rows.append(
                [
                    encoding,
                    statistics.median(rates[folder]),
                    statistics.median(rates[hub]),
                    f"{statistics.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})",
                    f"{statistics.median(cpu[folder]):.2f} / {statistics.median(cpu[hub]):.2f}",
                    f"{parquet_bytes / 1e6:.1f} MB",
                ]
            )
        notes = (
            f"pack --workers 2 --size {size}, {args.images} images around {args.pixels} in 10 "
            f"classes, Parquet row groups of {args.row_group} rows; medians of {args.rounds} "
            "interleaved rounds (ratio: median of the per-round ratios, min-max), warm page "
            "cache, a fresh process per pack (shared machine, compare within a run)"
        )
        headers = [
            "images",
            "class folders img/s",
            "Parquet img/s",
            "Parquet / folders",
            "CPU s a pack: folders / Parquet",
            "file",
        ]
        harness.report("Hugging Face Parquet vs class folders: pack", headers, rows, notes)


if __name__ == "__main__":
    main()
